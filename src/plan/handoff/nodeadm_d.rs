//! The agent's drop-in among the others nodeadm merges (`/etc/eks/nodeadm.d/`, in name order
//! after the user data): a drop-in nodeadm cannot read, a value another NodeConfig sets that
//! the agent's sets differently, a later `--register-with-taints`, and the instance store's
//! disabled mounts carried, as `kubelet.flags` taints are, because nodeadm's merge replaces a
//! list.
//!
//! Only a drop-in nodeadm cannot read refuses the run: nodeadm fails on it and the node would
//! not join whatever the agent did. A baked drop-in that overrides the agent's values is an
//! image's, which every instance of a fleet shares, and the node still joins with it: that is a
//! warning in the plan and the report, never a node held back.

use serde_json::{json, Value};

use crate::config::CheckMode;
use crate::facts::Facts;
use crate::instance::userdata::{Conflict, AGENT_DROPIN};
use crate::plan::out::Out;
use crate::plan::step::{CheckStep, Step, When};
use crate::verify::nodeadm::NodeadmConfig;
use crate::verify::Check;

/// The sources `nodeadm-run.service` reads, in its order.
const SOURCES: [&str; 2] = ["imds://user-data", "file:///etc/eks/nodeadm.d/"];

/// How long nodeadm's check may take.
const CHECK_BUDGET: std::time::Duration = std::time::Duration::from_secs(30);

/// nodeadm's own check of what it will merge, the agent's drop-in among it, before the kubelet
/// ([`crate::verify::nodeadm`]): where nodeadm is on the node, the hand-off is not held and the
/// join's checks are not off.
pub(super) fn nodeadm_check(i: &super::Input, out: &mut Out) {
    let (spec, facts) = (i.spec, i.facts);
    let nodeadm = &spec.nodeconfig.nodeadm_path;
    if i.handoff.hold.is_some() || spec.verify.preflight == CheckMode::Off || !facts.exists(nodeadm)
    {
        return;
    }
    let probe = NodeadmConfig {
        program: nodeadm.display().to_string(),
        sources: SOURCES.map(String::from).to_vec(),
        env: super::sdk_env(facts),
    };
    let step = CheckStep::new(Check::new(probe), When::Gate, CHECK_BUDGET);
    out.steps.push(Step::Check(step));
}

/// Paths another check already names: max pods and kube-reserved (`kubelet.maxPods`,
/// `kubelet.kubeReserved`).
const NAMED_ELSEWHERE: [&str; 2] = [
    "spec.kubelet.config.maxPods",
    "spec.kubelet.config.kubeReserved",
];

/// The list the agent carries from the NodeConfigs before it: theirs differing from the
/// agent's is the carrying, not a conflict.
const CARRIED: &str = "spec.instance.localStorage.disabledMounts";

/// Every drop-in nodeadm cannot read: its config phase fails on it, whatever the agent writes.
pub(super) fn unreadable(facts: &Facts, out: &mut Out) {
    for (_, read) in &facts.dropins {
        if let Err(e) = read {
            out.findings.push(
                "handoff",
                format!("{e}: nodeadm fails its config phase on a drop-in it cannot read, and the node does not join; fix or remove the file"),
            );
        }
    }
}

/// What another NodeConfig sets that the agent's drop-in (`doc`) sets differently, and which
/// of the two nodeadm keeps.
pub(super) fn conflicts(facts: &Facts, doc: &Value, out: &mut Out) {
    let Some(nc) = &facts.node_configs else {
        return;
    };
    for Conflict {
        path,
        other,
        other_wins,
    } in nc.conflicts(doc)
    {
        let carried = path.starts_with(CARRIED) && !other_wins;
        if carried || NAMED_ELSEWHERE.iter().any(|p| path.starts_with(p)) {
            continue;
        }
        out.warnings.push(match other_wins {
            true => format!("{path} is set by {other} too, differently, and nodeadm merges it after the agent's {AGENT_DROPIN}: the config's value is not used on this node; set it in one place (remove it from {other}, or leave it out of the config)"),
            false => format!("{path} is set by {other} too, differently; nodeadm merges the agent's {AGENT_DROPIN} after it, so the config's value is used: set it in one place"),
        });
    }
}

/// A `--register-with-taints` merged after the agent's: kubelet keeps only the last, so the
/// agent's taints (the startup taint among them) are not registered.
pub(super) fn taints_after(facts: &Facts, agent_sets_taints: bool, out: &mut Out) {
    let after = facts
        .node_configs
        .as_ref()
        .and_then(|n| n.taints_after.as_ref());
    if let (true, Some(at)) = (agent_sets_taints, after) {
        out.warnings.push(format!("{at} gives --register-with-taints after the agent's {AGENT_DROPIN}, and kubelet keeps only the last such flag: the config's taints are not registered on this node (the proof will find them missing); move that drop-in's taints into the config's `taints`, or name the file to sort before the agent's"));
    }
}

/// The disabled mounts of the NodeConfigs merged before the agent's, then the config's: nodeadm
/// replaces the list with the agent's, so the agent's carries theirs.
pub(super) fn carry_disabled_mounts(facts: &Facts, doc: &mut Value) {
    let Some((earlier, _)) = facts
        .node_configs
        .as_ref()
        .and_then(|n| n.disabled_mounts.as_ref())
    else {
        return;
    };
    let list = doc
        .pointer_mut("/spec/instance/localStorage/disabledMounts")
        .and_then(Value::as_array_mut);
    let Some(list) = list else { return };
    let mut all: Vec<Value> = earlier.iter().map(|m| json!(m)).collect();
    for m in list.drain(..) {
        if !all.contains(&m) {
            all.push(m);
        }
    }
    *list = all;
}

#[cfg(test)]
mod tests {
    use crate::discovery::ClusterFact;
    use crate::facts::{Facts, FactsBuilder, Family};
    use crate::instance::userdata::UserDataFact;
    use crate::plan::aspects::testing::{findings, run, spec};
    use crate::plan::aspects::AL2023_HANDOFF as ASPECT;
    use crate::plan::step::Step;
    use serde_json::Value;

    const CLUSTER: &str = r#""cluster":{"name":"prod","apiServerEndpoint":"https://k.example","certificateAuthority":"Q0E=","cidr":"10.100.0.0/16"}"#;

    fn config(extra: &str) -> String {
        format!("{{{CLUSTER},{extra}}}")
    }

    fn node(config: &str) -> FactsBuilder {
        Facts::builder(Family::Al2023)
            .cluster(ClusterFact::from_spec(&spec(config).cluster))
            .exists("/usr/bin/nodeadm", true)
            .exists(super::super::al2023::CONFIG_UNIT_DROPINS[0], true)
            .absent([super::AGENT_DROPIN])
            .file("/sys/devices/system/cpu/online", "0-7\n")
            .file("/proc/meminfo", "MemTotal:       32000000 kB\n")
    }

    fn nodeconfig(spec: &str) -> String {
        format!("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n{spec}")
    }

    /// The drop-in the agent plans.
    fn dropin(out: &crate::plan::out::Out) -> Value {
        let f = out.steps.iter().find_map(|s| match s {
            Step::File(f) if f.path == std::path::Path::new(super::AGENT_DROPIN) => Some(f),
            _ => None,
        });
        serde_json::from_str(&f.expect("the drop-in").new).unwrap()
    }

    #[test]
    fn a_baked_dropins_taint_is_carried_beside_the_configs() {
        let c = config(r#""taints":["team=a:NoSchedule"]"#);
        let ami =
            nodeconfig("  kubelet:\n    flags: [\"--register-with-taints=ami=baked:NoExecute\"]\n");
        let facts = node(&c).dropin("00-ami.yaml", &ami).build();
        let out = run(&ASPECT, &spec(&c), &facts);
        assert!(findings(&out).is_empty(), "{:?}", findings(&out));
        let flags = dropin(&out)["spec"]["kubelet"]["flags"].clone();
        assert!(
            flags
                .as_array()
                .unwrap()
                .contains(&"--register-with-taints=ami=baked:NoExecute,team=a:NoSchedule".into()),
            "{flags}"
        );
    }

    /// The plan's warnings and findings for config `c` on a node with one drop-in.
    fn said(c: &str, name: &str, text: &str) -> (Vec<String>, Vec<String>) {
        let out = run(&ASPECT, &spec(c), &node(c).dropin(name, text).build());
        (out.warnings.clone(), findings(&out))
    }

    #[test]
    fn a_later_dropins_taints_flag_is_said_and_the_node_kept_an_earlier_ones_is_carried() {
        let c = config(r#""taints":["team=a:NoSchedule"]"#);
        let flag = |t: &str| {
            nodeconfig(&format!(
                "  kubelet:\n    flags: [\"--register-with-taints={t}\"]\n"
            ))
        };
        let (w, f) = said(&c, "20-late.yml", &flag("late=x:NoSchedule"));
        assert!(f.is_empty(), "the node is not held back: {f:?}");
        assert!(w.iter().any(|w| w.starts_with("kubelet.flags[0] of the NodeConfig in /etc/eks/nodeadm.d/20-late.yml gives --register-with-taints after the agent's /etc/eks/nodeadm.d/10-eks-nodeinit.json")), "{w:?}");
        let (w, f) = said(&c, "05-early.yml", &flag("early=x:NoSchedule"));
        assert!(
            f.is_empty() && !w.iter().any(|w| w.contains("--register-with-taints")),
            "{w:?} {f:?}"
        );
        // Without taints of its own the agent adds no flag: the later drop-in's stand.
        let c = config(r#""taints":[]"#);
        let (w, f) = said(&c, "20-late.yml", &flag("late=x:NoSchedule"));
        assert!(f.is_empty() && w.is_empty(), "{w:?} {f:?}");
    }

    #[test]
    fn a_dropins_containerd_setting_that_makes_the_pull_settings_inert_is_said() {
        let c = config(r#""images":{"pull":{"maxConcurrentDownloads":8}}"#);
        let toml = |n: u32| {
            nodeconfig(&format!("  containerd:\n    config: |\n      [plugins.\"io.containerd.grpc.v1.cri\"]\n      max_concurrent_downloads = {n}\n"))
        };
        let (w, f) = said(&c, "50-containerd.json.yaml", &toml(2));
        assert!(f.is_empty(), "{f:?}");
        assert_eq!(w, [format!(
            "spec.containerd.config.plugins.\"io.containerd.grpc.v1.cri\".max_concurrent_downloads is set by /etc/eks/nodeadm.d/50-containerd.json.yaml too, differently, and nodeadm merges it after the agent's {}: the config's value is not used on this node; set it in one place (remove it from /etc/eks/nodeadm.d/50-containerd.json.yaml, or leave it out of the config)",
            super::AGENT_DROPIN
        )]);
        // The same value is no conflict; an earlier drop-in's different one loses to the agent's.
        assert_eq!(said(&c, "50-c.yaml", &toml(8)), (vec![], vec![]));
        let (w, _) = said(&c, "05-c.yaml", &toml(2));
        assert!(w.iter().any(|w| w.contains("is set by /etc/eks/nodeadm.d/05-c.yaml too, differently; nodeadm merges the agent's")), "{w:?}");
    }

    #[test]
    fn a_dropin_nodeadm_cannot_read_is_a_finding_and_other_names_are_not_read() {
        let c = config(r#""labels":{"a":"b"}"#);
        let facts = node(&c)
            .dropin(
                "30-broken.yaml",
                "apiVersion: node.eks.aws/v1alpha1\nkind: Other\n",
            )
            .dropin("README.md", "not a NodeConfig")
            .dropin("40-NOTES.TXT", "nor this")
            .build();
        let f = findings(&run(&ASPECT, &spec(&c), &facts));
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].starts_with("handoff: /etc/eks/nodeadm.d/30-broken.yaml is not a NodeConfig nodeadm can decode: no `kind: NodeConfig`: nodeadm fails its config phase"), "{f:?}");
        let facts = node(&c)
            .dropin(
                "30-UPPER.YAML",
                &nodeconfig("  kubelet:\n    config:\n      podPidsLimit: 1\n"),
            )
            .build();
        assert_eq!(facts.node_configs.as_ref().unwrap().documents.len(), 1);
    }

    #[test]
    fn the_earlier_nodeconfigs_disabled_mounts_are_carried_into_the_agents() {
        let c = config(r#""localStorage":{"strategy":"RAID0","disabledMounts":["PodLogs"]}"#);
        let ud = nodeconfig(
            "  instance:\n    localStorage:\n      strategy: RAID0\n      disabledMounts: [SOCI]\n",
        );
        let facts = node(&c)
            .user_data(UserDataFact::from_bytes(Some(ud.as_bytes())))
            .build();
        let doc = dropin(&run(&ASPECT, &spec(&c), &facts));
        assert_eq!(
            doc["spec"]["instance"]["localStorage"]["disabledMounts"],
            serde_json::json!(["SOCI", "PodLogs"])
        );
        // A later drop-in's list replaces the agent's: said.
        let late =
            nodeconfig("  instance:\n    localStorage:\n      disabledMounts: [Containerd]\n");
        let (w, _) = said(&c, "90-late.yaml", &late);
        assert!(w.iter().any(|w| w.starts_with("spec.instance.localStorage.disabledMounts is set by /etc/eks/nodeadm.d/90-late.yaml too")), "{w:?}");
    }

    #[test]
    fn the_merged_nodeconfigs_name_the_node_and_set_max_pods() {
        let c = config(r#""kubelet":{"maxPods":50}"#);
        let gate = nodeconfig("  featureGates:\n    InstanceIdNodeName: true\n  kubelet:\n    config:\n      maxPods: 40\n");
        let facts = node(&c).dropin("60-names.yaml", &gate).build();
        let nc = facts.node_configs.as_ref().unwrap();
        assert!(nc.naming.instance_id_node_name);
        assert_eq!(
            nc.pod_capacity,
            [(
                "maxPods",
                "kubelet.config.maxPods of the NodeConfig in /etc/eks/nodeadm.d/60-names.yaml"
                    .to_string()
            )]
        );
        // A later document's `false` turns the gate off again, as nodeadm's merge does.
        let off = nodeconfig("  featureGates:\n    InstanceIdNodeName: false\n");
        let facts = node(&c)
            .dropin("60-names.yaml", &gate)
            .dropin("70-off.yaml", &off)
            .build();
        assert!(
            !facts
                .node_configs
                .as_ref()
                .unwrap()
                .naming
                .instance_id_node_name
        );
    }
}
