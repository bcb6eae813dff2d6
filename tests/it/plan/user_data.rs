//! The AL2023 hand-off and the user data: the taints nodeadm would register from it carried into
//! the one `--register-with-taints`, conflicts and invalid taints as findings.

use super::*;

/// The drop-in's kubelet flags in this plan.
fn dropin_flags(p: &Plan) -> Vec<String> {
    let new = p
        .steps
        .iter()
        .find_map(|s| match s {
            Step::File(eks_nodeinit::plan::step::File { path, new, .. })
                if path == std::path::Path::new(nodeconfig::DROPIN) =>
            {
                Some(new.clone())
            }
            _ => None,
        })
        .expect("a drop-in step");
    let doc: serde_json::Value = serde_json::from_str(&new).unwrap();
    doc["spec"]["kubelet"]["flags"]
        .as_array()
        .map(|a| a.iter().map(|f| f.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

fn nodeadm_handoff(p: &Plan) -> NodeadmHandoff {
    p.steps
        .iter()
        .find_map(|s| match s {
            Step::Handoff(eks_nodeinit::plan::step::Handoff::Dropin(h)) => Some(h.clone()),
            _ => None,
        })
        .unwrap()
}

/// AL2023 facts whose user data is `text`.
fn al2023_with_user_data(text: &str) -> Facts {
    let mut f = al2023(&[CLUSTER_TAG, ("Name", "g-10x0x12x34")]);
    f.set_user_data(user_data(text));
    f
}

#[test]
fn user_data_taints_are_carried_into_the_one_register_with_taints() {
    // Issue 11 item 7: kubelet keeps only the last --register-with-taints, and the drop-in's
    // flags come after the user data's, so the agent's flag must hold both sets.
    let s = spec(|v| v["taints"] = json!(["dedicated=infra:NoSchedule"]));
    let f = al2023_with_user_data(&nodeconfig_part(&[
        "--register-with-taints=team=a:NoSchedule,gpu:NoExecute",
    ]));
    let p = build(&s, &f).unwrap();
    assert_eq!(
        dropin_flags(&p),
        [
            "--node-labels=node.kubernetes.io/role=scaler",
            "--register-with-taints=team=a:NoSchedule,gpu:NoExecute,dedicated=infra:NoSchedule"
        ]
    );
    assert_eq!(
        nodeadm_handoff(&p).carried_taints,
        Some((
            2,
            "kubelet.flags[1] of the NodeConfig in MIME part 2 of the user data".into()
        ))
    );
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    // Taints in kubelet.config.registerWithTaints count too (without a flag overriding them).
    let ud = nodeconfig_part(&[]).replace(
        "      - --v=2\n",
        "      - --v=2\n    config:\n      registerWithTaints:\n        - {key: team, value: b, effect: NoExecute}\n",
    );
    let p = build(&s, &al2023_with_user_data(&ud)).unwrap();
    assert_eq!(
        dropin_flags(&p)[1],
        "--register-with-taints=team=b:NoExecute,dedicated=infra:NoSchedule"
    );
    let carried = nodeadm_handoff(&p).carried_taints.unwrap();
    assert!(carried
        .1
        .starts_with("kubelet.config.registerWithTaints of the NodeConfig in MIME part 2"));
}

#[test]
fn the_same_user_data_taint_is_carried_once() {
    let s = spec(|v| v["taints"] = json!(["dedicated=infra:NoSchedule", "b:NoExecute"]));
    let f = al2023_with_user_data(&nodeconfig_part(&[
        "--register-with-taints",
        "dedicated=infra:NoSchedule,a:NoSchedule",
    ]));
    let p = build(&s, &f).unwrap();
    assert_eq!(
        dropin_flags(&p)[1],
        "--register-with-taints=dedicated=infra:NoSchedule,a:NoSchedule,b:NoExecute"
    );
}

#[test]
fn conflicting_or_invalid_user_data_taints_are_findings() {
    let s = spec(|v| v["taints"] = json!(["dedicated=infra:NoSchedule"]));
    // Same key and effect, another value: a finding naming the part and `taints`.
    let f = al2023_with_user_data(&nodeconfig_part(&[
        "--register-with-taints=dedicated=batch:NoSchedule",
    ]));
    let e = errors(&s, &f);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with("taints: taint `dedicated:NoSchedule` is given different values by a NodeConfig (kubelet.flags[1] of the NodeConfig in MIME part 2 of the user data) and by the config"),
        "{e:?}"
    );
    assert!(build(&s, &f).is_err(), "nothing is planned");
    // The same key with another effect is another taint.
    let f = al2023_with_user_data(&nodeconfig_part(&[
        "--register-with-taints=dedicated=batch:NoExecute",
    ]));
    assert!(build(&s, &f).is_ok());
    // A user-data taint kubelet refuses: a finding that does not echo it.
    let f = al2023_with_user_data(&nodeconfig_part(&[
        "--register-with-taints=ok:NoSchedule,secret-looking-value:Never",
    ]));
    let e = errors(&s, &f);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with(
            "taints: taint 2 of kubelet.flags[1] of the NodeConfig in MIME part 2 of the user data"
        ),
        "{e:?}"
    );
    assert!(e[0].contains("effect is not one of"), "{e:?}");
    assert!(!e[0].contains("secret-looking-value"), "{e:?}");
    // User data nodeadm cannot read: with taints a finding (the agent cannot tell what it
    // would drop), without them a warning.
    let broken = nodeconfig_part(&[]).replace("kind: NodeConfig", "kind: [NodeConfig");
    let e = errors(&s, &al2023_with_user_data(&broken));
    assert!(
        e[0].starts_with(
            "taints: MIME part 2 of the user data is not a NodeConfig nodeadm can decode"
        ),
        "{e:?}"
    );
    let none = spec(|v| v["taints"] = json!([]));
    let p = build(&none, &al2023_with_user_data(&broken)).unwrap();
    assert!(
        p.warnings[0].starts_with("nodeadm cannot read the instance's user data: MIME part 2"),
        "{:?}",
        p.warnings
    );
    // A NodeConfig that does not decode: nodeadm's chain passes over the whole user data.
    assert!(
        p.warnings[0].contains("nodeadm passes over the whole user data"),
        "{:?}",
        p.warnings
    );
    // A gzip error is fatal to nodeadm (the gzip magic, then junk; base64 as EC2 may carry it).
    let gzip_magic = "H4tub3QgZ3ppcA==";
    let p = build(&none, &al2023_with_user_data(gzip_magic)).unwrap();
    assert!(
        p.warnings[0].contains("nodeadm fails on it in both phases"),
        "{:?}",
        p.warnings
    );
}

#[test]
fn without_agent_taints_the_user_data_taints_stand() {
    let s = spec(|v| v["taints"] = json!([]));
    let f = al2023_with_user_data(&nodeconfig_part(&[
        "--register-with-taints=team=a:NoSchedule",
    ]));
    let p = build(&s, &f).unwrap();
    let flags = dropin_flags(&p);
    assert!(
        !flags
            .iter()
            .any(|f| f.starts_with("--register-with-taints")),
        "{flags:?}"
    );
    assert_eq!(nodeadm_handoff(&p).carried_taints, None);
    // With no NodeConfig or no taints in the user data, the agent's taints go alone, as before.
    let s = spec(|v| v["taints"] = json!(["dedicated=infra:NoSchedule"]));
    for ud in ["#!/bin/sh\n".to_string(), nodeconfig_part(&[])] {
        let p = build(&s, &al2023_with_user_data(&ud)).unwrap();
        assert_eq!(
            dropin_flags(&p)[1],
            "--register-with-taints=dedicated=infra:NoSchedule"
        );
    }
}

/// The Node's name the join job and the identity check expect, for this spec and user data.
fn node_name(s: &Spec, user_data: &str) -> (serde_json::Value, String) {
    let mut f = al2023_with_user_data(user_data);
    f.reach = Some(eks_nodeinit::facts::Reach::default());
    f.set_file(eks_nodeinit::verify::proof::JOIN_JOB, absent());
    let p = build(s, &f).unwrap();
    let job = p
        .steps
        .iter()
        .find_map(|st| match st {
            Step::File(file)
                if file.path == std::path::Path::new("/run/eks-nodeinit/join.json") =>
            {
                Some(serde_json::from_str::<serde_json::Value>(&file.new).unwrap())
            }
            _ => None,
        })
        .expect("the join job");
    let identity = steps(&p)
        .into_iter()
        .find(|d| d.contains("identity is"))
        .expect("the identity check");
    (job["node"].clone(), identity)
}

#[test]
fn the_nodes_name_is_the_hand_offs_never_local_hostname() {
    let cluster = |v: &mut serde_json::Value| v["cluster"] = json!({"name": "prod", "apiServerEndpoint": "https://k.example", "certificateAuthority": "Y2E=", "cidr": "172.20.0.0/16"});
    // By default EC2's PrivateDnsName, asked at run time (IMDS local-hostname may differ).
    let s = spec(cluster);
    let (node, check) = node_name(&s, &nodeconfig_part(&[]));
    assert_eq!(node, json!({"from": "privateDnsName", "instanceId": "i-1"}));
    assert!(
        check.contains("system:node:<PrivateDnsName of i-1>"),
        "{check}"
    );
    // nodeadm's InstanceIdNodeName in the user data's NodeConfig: the instance id.
    let gate = nodeconfig_part(&[]).replace(
        "kind: NodeConfig\nspec:\n",
        "kind: NodeConfig\nspec:\n  featureGates:\n    InstanceIdNodeName: true\n",
    );
    let (node, check) = node_name(&s, &gate);
    assert_eq!(node, json!({"from": "instanceId", "name": "i-1"}));
    assert!(
        check.contains("system:node:i-1 (the instance id"),
        "{check}"
    );
    // A --hostname-override among the user data's kubelet flags wins over the gate...
    let flagged = gate.replace(
        "      - --v=2\n",
        "      - --v=2\n      - --hostname-override=Custom.Example \n",
    );
    let (node, _) = node_name(&s, &flagged);
    assert_eq!(node["name"], "custom.example");
    // ...and the config's own kubelet.extraArgs over both (the hand-off appends them last).
    let s = spec(|v| {
        cluster(v);
        v["kubelet"] = json!({"extraArgs": ["--hostname-override=mine.example"]});
    });
    let (node, check) = node_name(&s, &flagged);
    assert_eq!(
        node,
        json!({"from": "override", "name": "mine.example", "source": "kubelet.extraArgs[0]"})
    );
    assert!(
        check.contains("system:node:mine.example (kubelet.extraArgs[0])"),
        "{check}"
    );
}

#[test]
fn the_configs_node_name_names_the_node_everywhere_the_agent_predicts_it() {
    let cluster = |v: &mut serde_json::Value| v["cluster"] = json!({"name": "prod", "apiServerEndpoint": "https://k.example", "certificateAuthority": "Y2E=", "cidr": "172.20.0.0/16"});
    let by_id = spec(|v| {
        cluster(v);
        v["kubelet"] = json!({"nodeName": "instanceId"});
    });
    let (node, check) = node_name(&by_id, &nodeconfig_part(&[]));
    assert_eq!(node, json!({"from": "instanceId", "name": "i-1"}));
    assert!(
        check.contains("system:node:i-1 (the instance id"),
        "{check}"
    );
    // nodeadm is told by the drop-in's feature gate.
    let p = build(&by_id, &al2023_with_user_data(&nodeconfig_part(&[]))).unwrap();
    let dropin = p
        .steps
        .iter()
        .find_map(|st| match st {
            Step::File(file) if file.path.ends_with("10-eks-nodeinit.json") => {
                Some(serde_json::from_str::<serde_json::Value>(&file.new).unwrap())
            }
            _ => None,
        })
        .expect("the drop-in");
    assert_eq!(dropin["spec"]["featureGates"]["InstanceIdNodeName"], true);
    // `privateDnsName` over a user data's gate: the agent's drop-in, merged after it, says false.
    let gate = nodeconfig_part(&[]).replace(
        "kind: NodeConfig\nspec:\n",
        "kind: NodeConfig\nspec:\n  featureGates:\n    InstanceIdNodeName: true\n",
    );
    let by_dns = spec(|v| {
        cluster(v);
        v["kubelet"] = json!({"nodeName": "privateDnsName"});
    });
    let (node, _) = node_name(&by_dns, &gate);
    assert_eq!(node["from"], "privateDnsName");
}
