//! The Node's real name against the real authenticator and kube-apiserver: the hand-offs name
//! the Node by EC2's `PrivateDnsName` (or the instance id with nodeadm's `InstanceIdNodeName`),
//! never by IMDS `local-hostname`, which a VPC's custom DHCP domain name makes differ. Each
//! node here is proven `joined` and continued; a hook whose completion Auto Scaling refuses
//! after a good join fails the unit and `status` instead of passing silently; the joined
//! instance is marked for other nodes' verdicts.

use serde_json::Value;

use super::join::{
    agent, bus_with_kubelet_active, complete_hook_command, init, instance_mapped, report, told,
    Joining, VPC,
};
use crate::common;
use common::control_plane::{ControlPlane, CLUSTER, EKS_REGION, NODE_IP};
use common::iam_authenticator::Mapping;
use common::kubelet::Kubelet;
use common::node_identity::{moto_query, xml_tag};
use common::*;

const HOOK: &str = "eks-node-ready";

/// `complete-hook` in a thread, then the kubelet of Node `node` started from the agent's
/// hand-off (and `user_data`'s NodeConfig): the proof's output once the Node is Ready.
fn proven(
    cp: &ControlPlane,
    j: &Joining,
    node: &str,
    user_data: Option<Value>,
) -> std::process::Output {
    let bus = bus_with_kubelet_active().expect("a bus");
    let mut c = complete_hook_command(cp, j, &bus.address);
    let proof = std::thread::spawn(move || run(&mut c));
    let start = super::al2023_start_of(j.root.path(), user_data, &j.instance);
    let mut kubelet = Kubelet::start(cp, node, &start);
    kubelet.node(cp);
    cp.set_addresses(node, NODE_IP);
    let out = proof.join().unwrap();
    drop(bus);
    out
}

/// The value of the instance's tag `key` in moto's EC2.
fn tag(cp: &ControlPlane, instance: &str, key: &str) -> Option<String> {
    let eks = cp.eks.as_ref().unwrap();
    let xml = moto_query(
        &cp.netns,
        &eks.moto,
        EKS_REGION,
        "ec2",
        &[
            ("Action", "DescribeTags"),
            ("Version", "2016-11-15"),
            ("Filter.1.Name", "resource-id"),
            ("Filter.1.Value.1", instance),
            ("Filter.2.Name", "key"),
            ("Filter.2.Value.1", key),
        ],
    );
    xml_tag(&xml, "value")
}

/// `init`, and its identity check passed with `field` of the check naming `needle`.
fn identity_passes(cp: &ControlPlane, j: &Joining, field: &str, needle: &str) {
    let (out, _) = init(cp, j);
    assert!(out.status.success(), "{}", stderr(&out));
    let rep = report(j);
    let id = super::join::check(&rep, "identity");
    assert_eq!(id["result"], "passed", "{id:#}");
    assert!(id[field].as_str().unwrap().contains(needle), "{id:#}");
}

/// The proof of Node `node` ends `joined`, the hook continued.
fn joined(cp: &ControlPlane, j: &Joining, node: &str) {
    let proof = proven(cp, j, node, None);
    assert!(proof.status.success(), "{}", stderr(&proof));
    assert_eq!(told(cp, j), ["CONTINUE"]);
    let rep = report(j);
    assert_eq!(rep["join"]["verdict"], "joined", "{:#}", rep["join"]);
}

fn joining(
    tag: &str,
    mapping: Mapping,
) -> Option<(std::sync::MutexGuard<'static, ControlPlane>, Joining)> {
    joining_with(tag, mapping, |_| {})
}

/// [`joining`] with `edit` applied to the config.
fn joining_with(
    tag: &str,
    mapping: Mapping,
    edit: impl FnOnce(&mut Value),
) -> Option<(std::sync::MutexGuard<'static, ControlPlane>, Joining)> {
    if !super::ready() {
        return None;
    }
    let cp = ControlPlane::shared();
    let j = instance_mapped(&cp, tag, VPC, mapping, edit);
    Some((cp, j))
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn a_custom_dhcp_domain_name_does_not_rename_the_node() {
    let Some((cp, j)) = joining("dhcp", Mapping::Ec2Linux) else {
        return;
    };
    // The VPC's DHCP options name another domain: the instance's own hostname (IMDS
    // local-hostname) is not EC2's private DNS name, which the hand-offs name the Node by.
    let local = "ip-10-0-12-34.corp.example";
    j.imds
        .state
        .lock()
        .unwrap()
        .data
        .insert("local-hostname".into(), local.into());
    let name = format!("PrivateDnsName of {}", j.instance);
    identity_passes(&cp, &j, "check", &name);
    joined(&cp, &j, &j.name);
    // Marked joined, for the verdicts of the group's other nodes.
    assert_eq!(
        tag(&cp, &j.instance, "eks-nodeinit/joined").as_deref(),
        Some(CLUSTER)
    );
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn a_node_named_by_its_instance_id_is_proven_joined() {
    let Some((cp, j)) = joining("byid", Mapping::SessionName) else {
        return;
    };
    // nodeadm's InstanceIdNodeName in the user data's NodeConfig; the role mapped as
    // system:node:{{SessionName}} (the session name is the instance id).
    let nodeconfig = format!(
        "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: {}\n  featureGates:\n    InstanceIdNodeName: true\n",
        CLUSTER
    );
    let ud = format!(
        "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n--//\nContent-Type: application/node.eks.aws\n\n{nodeconfig}--//--\n"
    );
    j.imds.state.lock().unwrap().user_data = Some(ud.into_bytes());
    let user = format!("system:node:{} in [", j.instance);
    identity_passes(&cp, &j, "detail", &user);
    joined(&cp, &j, &j.instance);
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn a_hook_refused_after_a_good_join_fails_the_unit_and_status() {
    let Some((cp, j)) = joining("refused", Mapping::Ec2Linux) else {
        return;
    };
    let (out, _) = init(&cp, &j);
    assert!(out.status.success(), "{}", stderr(&out));
    // The hook's group is gone by the time the node joined: Auto Scaling refuses the
    // completion, and applies the hook's default result at its heartbeat timeout.
    let job = j
        .root
        .path()
        .join(&eks_nodeinit::instance::lifecycle::LAUNCH_HOOK_JOB[1..]);
    let text = std::fs::read_to_string(&job).unwrap();
    std::fs::write(&job, text.replace("asg-refused", "asg-gone")).unwrap();
    let proof = proven(&cp, &j, &j.name, None);
    assert_eq!(proof.status.code(), Some(1), "{}", stderr(&proof));
    let e = stderr(&proof);
    assert!(
        e.contains(&format!(
            "launch hook `{HOOK}` was not completed with CONTINUE"
        )),
        "{e}"
    );
    assert!(told(&cp, &j).is_empty());
    let rep = report(&j);
    assert_eq!(rep["join"]["verdict"], "joined");
    assert_eq!(rep["join"]["hookFailed"], true, "{:#}", rep["join"]);
    let status = run(agent(&cp, &j, &["status", "--root"]).arg(j.root.path()));
    assert_eq!(status.status.code(), Some(1));
    assert!(
        stdout(&status).contains("launch hook: FAILED: not completed"),
        "{}",
        stdout(&status)
    );
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn a_node_name_ec2_does_not_give_is_no_passed_identity() {
    let Some((cp, j)) = joining("noname", Mapping::Ec2Linux) else {
        return;
    };
    // The agent's EC2 unreachable (the authenticator's is not): the role's mapping is read, but
    // whether it names this Node is unknown. It used to pass with "not compared".
    let out = run(agent(&cp, &j, &["init", "--config"])
        .arg(&j.cfg)
        .arg("--root")
        .arg(j.root.path())
        .env("AWS_ENDPOINT_URL_EC2", "http://127.0.0.1:9"));
    assert!(out.status.success(), "{}", stderr(&out));
    let rep = report(&j);
    let id = super::join::check(&rep, "identity");
    assert_eq!(
        (id["result"].as_str(), id["cause"].as_str()),
        (Some("failed"), Some("name-unknown")),
        "{id:#}"
    );
    assert_eq!(id["advisory"], true, "{id:#}");
    let detail = id["detail"].as_str().unwrap();
    assert!(
        detail.contains("system:node:") && detail.contains("could not be read"),
        "{id:#}"
    );
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn the_user_datas_own_reservations_are_in_what_the_node_must_show() {
    let Some((cp, j)) = joining("reserved", Mapping::Ec2Linux) else {
        return;
    };
    // The user data's NodeConfig reserves for the system and raises the hard eviction threshold:
    // the real kubelet merges that drop-in over nodeadm's config key by key. The proof's
    // expectation used to know only kube-reserved and the 100Mi default: a false `mismatch`.
    let nodeconfig = serde_json::json!({
        "apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig",
        "spec": {"cluster": {"name": CLUSTER}, "kubelet": {"config": {
            "systemReserved": {"cpu": "100m", "memory": "256Mi"},
            "evictionHard": {"memory.available": "200Mi"}}}}
    });
    j.imds.state.lock().unwrap().user_data = Some(nodeconfig.to_string().into_bytes());
    let (out, _) = init(&cp, &j);
    assert!(out.status.success(), "{}", stderr(&out));
    let proof = proven(&cp, &j, &j.name, Some(nodeconfig));
    assert!(proof.status.success(), "{}", stderr(&proof));
    let rep = report(&j);
    assert_eq!(rep["join"]["verdict"], "joined", "{:#}", rep["join"]);
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn a_baked_dropin_names_the_node_and_its_taint_is_kept_beside_the_configs() {
    // The config's own taint; the AMI's own drop-in, sorted before the agent's: nodeadm's
    // InstanceIdNodeName and a taint, which the agent's --register-with-taints used to replace.
    let taint = |v: &mut Value| v["taints"] = serde_json::json!(["team=a:NoSchedule"]);
    let Some((cp, j)) = joining_with("baked", Mapping::SessionName, taint) else {
        return;
    };
    let baked = "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  featureGates:\n    InstanceIdNodeName: true\n  kubelet:\n    flags:\n      - --register-with-taints=ami=baked:NoSchedule\n";
    let dir = j.root.path().join("etc/eks/nodeadm.d");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("00-ami.yaml"), baked).unwrap();
    let user = format!("system:node:{} in [", j.instance);
    identity_passes(&cp, &j, "detail", &user);
    joined(&cp, &j, &j.instance);
    let (_, node) = cp.get(&format!("/api/v1/nodes/{}", j.instance));
    let taints: Vec<String> = node["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            format!(
                "{}={}:{}",
                t["key"].as_str().unwrap(),
                t["value"].as_str().unwrap_or(""),
                t["effect"].as_str().unwrap()
            )
        })
        .collect();
    for want in ["ami=baked:NoSchedule", "team=a:NoSchedule"] {
        assert!(taints.iter().any(|t| t == want), "{want} not in {taints:?}");
    }
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn a_config_naming_the_node_by_its_instance_id_is_proven_joined() {
    // `kubelet.nodeName: instanceId`, nothing in the user data: the drop-in's feature gate tells
    // nodeadm; the identity check, the proof and its conditions wait for that Node.
    let by_id = |v: &mut Value| v["kubelet"]["nodeName"] = serde_json::json!("instanceId");
    let Some((cp, j)) = joining_with("cfgid", Mapping::SessionName, by_id) else {
        return;
    };
    identity_passes(
        &cp,
        &j,
        "detail",
        &format!("system:node:{} in [", j.instance),
    );
    joined(&cp, &j, &j.instance);
}
