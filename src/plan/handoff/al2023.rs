//! The Amazon Linux 2023 hand-off: a nodeadm `NodeConfig` (`node.eks.aws/v1alpha1`) drop-in with
//! the cluster block when configured, `kubelet.config` (image GC, shutdown periods) and
//! `kubelet.flags` (labels, taints). nodeadm writes the kubelet config from it.
//!
//! Taints do not accumulate: nodeadm appends the drop-in's flags after the user data's and the
//! drop-ins named before it, and kubelet keeps only the last `--register-with-taints` (a flag
//! also overrides the config's `registerWithTaints`). So when the agent sets taints, its one
//! flag carries the taints of the NodeConfigs merged before it ([`crate::instance::userdata`])
//! first, then its own; a conflict, user data it cannot read, or a later drop-in's flag is a
//! finding. When it sets none, it adds no flag and the others' stand. What the other drop-ins
//! set beside the agent's is checked in [`super::nodeadm_d`].

use std::path::PathBuf;

use serde_json::{json, Map, Value};

use super::{nodeadm_d, HandoffIntent};
use crate::base::findings::Findings;
use crate::base::k8s::Taint;
use crate::discovery::ClusterFact;
use crate::facts::{Facts, Family};
use crate::instance::userdata::{EffectiveTaints, NodeConfigs, UserDataError, UserDataFact};
use crate::plan::kubelet::KubeletIntent;
use crate::plan::step::{Handoff, Mode, NodeadmHandoff, Step};
use crate::spec::Spec;

use super::Input;
use crate::facts::Read;
use crate::facts::Reads;
use crate::plan::out::Out;

/// nodeadm-run.service reads `file:///etc/eks/nodeadm.d/` after the instance's user data; files in
/// it merge in name order (later wins). `10-` lets an operator's own later drop-in win.
pub const DROPIN: &str = crate::instance::userdata::AGENT_DROPIN;

/// The package's drop-in for `nodeadm-config.service`, which adds `file:///etc/eks/nodeadm.d/`
/// to the config phase's sources (upstream reads only the user data there), and where an
/// operator may put it instead.
pub const CONFIG_UNIT_DROPINS: [&str; 2] = [
    "/usr/lib/systemd/system/nodeadm-config.service.d/50-eks-nodeinit.conf",
    "/etc/systemd/system/nodeadm-config.service.d/50-eks-nodeinit.conf",
];

pub(crate) fn reads(spec: &Spec, family: Option<Family>, r: &mut Reads) {
    if family == Some(Family::Al2023) {
        r.file(DROPIN);
        r.ask(Read::Dir {
            path: crate::instance::userdata::NODEADM_DIR.into(),
            suffix: String::new(),
        });
        r.ask(Read::Exists(spec.nodeconfig.nodeadm_path.clone()));
        r.extend(CONFIG_UNIT_DROPINS.iter().map(|p| Read::Exists(p.into())));
    }
}

/// The cluster fields nodeadm requires (internal/api/validation.go) that the drop-in lacks.
fn missing_cluster_fields(c: &ClusterFact) -> Vec<&'static str> {
    let mut m = Vec::new();
    if c.api_server_endpoint.is_none() {
        m.push("apiServerEndpoint");
    }
    if c.certificate_authority.is_none() {
        m.push("certificateAuthority");
    }
    if c.cidr.is_none() {
        m.push("cidr");
    }
    m
}

pub(crate) fn plan(i: &Input, out: &mut Out) {
    let (spec, facts) = (i.spec, i.facts);
    if facts.family() != Some(Family::Al2023) {
        return;
    }
    let Some(old) = facts.current_file(DROPIN, "handoff", &mut out.findings) else {
        return;
    };
    let user_data = &facts.user_data;
    nodeadm_d::unreadable(facts, out);
    let agent_taints = &i.handoff.kubelet.taints;
    nodeadm_d::taints_after(facts, !agent_taints.is_empty(), out);
    let merged = facts.node_configs.as_ref();
    let Some(taints) = taints(agent_taints, user_data, merged, &mut out.findings) else {
        return;
    };
    out.secrets
        .extend(i.handoff.cluster.certificate_authority.iter().cloned());
    // The one --register-with-taints: the earlier NodeConfigs' taints, then the config's.
    let intent = HandoffIntent {
        kubelet: KubeletIntent {
            taints: taints.all.clone(),
            ..i.handoff.kubelet.clone()
        },
        ..i.handoff.clone()
    };
    let mut doc = document(&intent);
    nodeadm_d::carry_disabled_mounts(facts, &mut doc);
    nodeadm_d::conflicts(facts, &doc, out);
    let new = text(&doc);
    let purpose = "nodeadm NodeConfig drop-in";
    out.file_from(old, DROPIN, purpose, new, Mode::Keep(0o600));
    let config_unit_reads_dropins = CONFIG_UNIT_DROPINS
        .iter()
        .any(|p| facts.exists(std::path::Path::new(p)));
    if i.handoff.hold.is_none() {
        out.steps
            .push(Step::Handoff(Handoff::Dropin(NodeadmHandoff {
                dropin: PathBuf::from(DROPIN),
                config_unit_reads_dropins,
                carried_taints: taints
                    .carried
                    .as_ref()
                    .map(|from| (from.entries.len(), from.source.clone())),
            })));
        nodeadm_d::nodeadm_check(i, out);
    }
    user_data_warnings(spec, facts, user_data, config_unit_reads_dropins, out);
    if !facts.exists(&spec.nodeconfig.nodeadm_path) {
        out.warnings.push(format!(
            "{} does not exist under the root: nothing will read the NodeConfig drop-in",
            spec.nodeconfig.nodeadm_path.display()
        ));
    }
}

/// What nodeadm will make of the user data beside the drop-in.
fn user_data_warnings(
    spec: &Spec,
    facts: &Facts,
    user_data: &UserDataFact,
    config_unit_reads_dropins: bool,
    out: &mut Out,
) {
    match user_data {
        // nodeadm passes over user data without a NodeConfig when another source follows it
        // (internal/configprovider/chain.go): then the drop-in alone must satisfy its validation.
        UserDataFact::Read(Err(UserDataError::NoNodeConfig(why))) => {
            let dropins = facts.node_configs.as_ref();
            let mut missing = missing_cluster_fields(&facts.cluster);
            missing.retain(|f| !dropins.is_some_and(|n| n.sets(&format!("spec.cluster.{f}"))));
            if !missing.is_empty() {
                out.warnings.push(format!(
                    "the instance's user data holds no NodeConfig ({why}) and the drop-in has no cluster {}: nodeadm requires all four cluster fields and no other file in /etc/eks/nodeadm.d gives them: it fails; set them in the config or look them up with cluster.discovery",
                    missing.join(", ")
                ));
            }
            if !config_unit_reads_dropins {
                out.warnings.push(format!(
                    "the instance's user data holds no NodeConfig ({why}) and nodeadm-config.service reads only the user data (no {}): it fails with \"no config in chain\"; install the package's drop-in, or add an application/node.eks.aws MIME part with the cluster block (examples/cloud-init/al2023-userdata.mime)",
                    CONFIG_UNIT_DROPINS[0]
                ));
            }
        }
        // With taints to merge this is a finding (see `taints`).
        UserDataFact::Read(Err(e)) if spec.registration.taints.is_empty() => {
            out.warnings.push(format!(
                "nodeadm cannot read the instance's user data: {e}; {}: fix the user data",
                what_nodeadm_does(e)
            ))
        }
        _ => {}
    }
}

/// What nodeadm does with user data it cannot read (internal/configprovider/chain.go): a
/// NodeConfig that does not decode (`bridge.ErrNodeConfigDecodingFailure`) makes it pass over the
/// whole user data when another source follows; a gzip or MIME error is fatal.
fn what_nodeadm_does(e: &UserDataError) -> &'static str {
    match e {
        UserDataError::Document { .. } => "nodeadm passes over the whole user data, its other NodeConfigs included, and takes its config from /etc/eks/nodeadm.d/ alone",
        _ => "nodeadm fails on it in both phases",
    }
}

/// The taints of the drop-in's `--register-with-taints`.
#[derive(Debug, PartialEq)]
pub struct Taints {
    /// The earlier NodeConfigs', then the config's not already among them.
    pub all: Vec<Taint>,
    /// The earlier NodeConfigs' taints, when there were any to carry.
    pub carried: Option<EffectiveTaints>,
}

/// The drop-in's taints: `agent`'s alone when it sets none (no flag: the others' stand) or the
/// NodeConfigs `merged` before the agent's drop-in register none; else theirs followed by the
/// agent's, each key and effect once. `None` with findings under `taints` when they cannot be
/// merged: a key and effect with two values, a carried taint kubelet would refuse, or user
/// data nodeadm cannot read.
pub fn taints(
    agent: &[Taint],
    user_data: &UserDataFact,
    merged: Option<&NodeConfigs>,
    f: &mut Findings,
) -> Option<Taints> {
    let alone = || Taints {
        all: agent.to_vec(),
        carried: None,
    };
    if agent.is_empty() {
        return Some(alone());
    }
    let what_to_do = "or give the config `\"taints\": []` (which also drops a role's preset taints) so that the NodeConfigs' stand alone";
    if let UserDataFact::Read(Err(e)) = user_data {
        if !matches!(e, UserDataError::NoNodeConfig(_)) {
            f.push(
                FIELD,
                format!(
                    "{e}. The agent carries the user data's taints into its --register-with-taints (kubelet keeps only the last such flag) and cannot tell which it would drop: fix the user data ({}), {what_to_do}",
                    what_nodeadm_does(e)
                ),
            );
            return None;
        }
    }
    let Some(carried) = merged.and_then(|m| m.taints.as_ref()) else {
        return Some(alone());
    };
    let mut all: Vec<Taint> = Vec::new();
    let mut ok = true;
    for (i, entry) in carried.entries.iter().enumerate() {
        match entry {
            Err(why) => {
                f.push(
                    FIELD,
                    format!(
                        "taint {} of {} (which the agent carries into its --register-with-taints) is one kubelet refuses: {why}; fix it there, {what_to_do}",
                        i + 1,
                        carried.source
                    ),
                );
                ok = false;
            }
            Ok(t) => ok &= add(&mut all, t, true, &carried.source, f, what_to_do),
        }
    }
    for t in agent {
        ok &= add(&mut all, t, false, &carried.source, f, what_to_do);
    }
    ok.then(|| Taints {
        all,
        carried: Some(carried.clone()),
    })
}

/// The config field taint findings name.
const FIELD: &str = "taints";

/// Add `t` (from the NodeConfigs at `source`, else the config) unless the same taint is there;
/// a different value for its key and effect is a finding (kubelet registers one taint per key
/// and effect). The NodeConfigs' taints come first, so a clash is within them or between
/// it and the config.
fn add(
    all: &mut Vec<Taint>,
    t: &Taint,
    from_user_data: bool,
    source: &str,
    f: &mut Findings,
    what_to_do: &str,
) -> bool {
    match all.iter().find(|x| x.key == t.key && x.effect == t.effect) {
        None => {
            all.push(t.clone());
            true
        }
        Some(x) if x.value == t.value => true,
        Some(_) => {
            let by = if from_user_data {
                format!("twice in the NodeConfigs ({source})")
            } else {
                format!("by a NodeConfig ({source}) and by the config")
            };
            f.push(
                FIELD,
                format!(
                    "taint `{}:{}` is given different values {by}; kubelet registers one taint per key and effect, and the agent carries the earlier NodeConfigs' taints into its --register-with-taints: keep one value in one place, {what_to_do}",
                    crate::base::text::printable(&t.key),
                    t.effect
                ),
            );
            false
        }
    }
}

/// The NodeConfig document: the cluster block from `cluster` (the config's values with what
/// discovery found), the kubelet intent as `kubelet.config` and `kubelet.flags`, containerd's
/// pull settings as `containerd.config` (nodeadm merges it over its own, its values winning),
/// nodeadm's `FastImagePull` gate.
pub fn document(h: &HandoffIntent) -> Value {
    let mut spec_doc = Map::new();
    spec_doc.insert("cluster".into(), Value::Object(cluster_doc(&h.cluster)));
    let k = kubelet_doc(&h.kubelet);
    if !k.is_empty() {
        spec_doc.insert("kubelet".into(), Value::Object(k));
    }
    let mut instance = Map::new();
    if let Some(ls) = &h.local_storage {
        instance.insert("localStorage".into(), json!(ls));
    }
    if let Some(n) = &h.network {
        // The same values as the resolver file the agent wrote before discovery: nodeadm's
        // config phase writes it again from the merge, the same bytes.
        let mut network = Map::new();
        if !n.nameservers.is_empty() {
            network.insert("nameservers".into(), json!(n.nameserver_texts()));
        }
        if !n.domains.is_empty() {
            network.insert("domains".into(), json!(n.domains));
        }
        instance.insert("network".into(), Value::Object(network));
    }
    if !instance.is_empty() {
        spec_doc.insert("instance".into(), Value::Object(instance));
    }
    if let Some(c) = crate::plan::aspects::containerd::pull::inline_config(
        &h.containerd.pull,
        h.containerd.user_config_v3,
    ) {
        spec_doc.insert("containerd".into(), json!({ "config": c }));
    }
    let mut gates = Map::new();
    if h.containerd.fast_image_pull {
        gates.insert("FastImagePull".into(), json!(true));
    }
    if let Some(by_id) = h.instance_id_node_name {
        gates.insert("InstanceIdNodeName".into(), json!(by_id));
    }
    if !gates.is_empty() {
        spec_doc.insert("featureGates".into(), Value::Object(gates));
    }
    json!({
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": Value::Object(spec_doc),
    })
}

/// `spec.cluster`: the four fields nodeadm requires, as far as they are known.
fn cluster_doc(c: &ClusterFact) -> Map<String, Value> {
    let mut cluster = Map::new();
    cluster.insert("name".into(), json!(c.name));
    if let Some(v) = &c.api_server_endpoint {
        cluster.insert("apiServerEndpoint".into(), json!(v));
    }
    if let Some(v) = &c.certificate_authority {
        cluster.insert("certificateAuthority".into(), json!(v));
    }
    if let Some(v) = &c.cidr {
        cluster.insert("cidr".into(), json!(v.text));
    }
    cluster
}

/// `spec.kubelet`: `config` deep-merged by nodeadm over its own, `flags` appended.
fn kubelet_doc(kubelet: &KubeletIntent) -> Map<String, Value> {
    let mut k = Map::new();
    if !kubelet.config.is_empty() || !kubelet.passed.is_empty() {
        k.insert("config".into(), Value::Object(kubelet.config_object()));
    }
    let flags = kubelet.kubelet_flags();
    if !flags.is_empty() {
        k.insert("flags".into(), json!(flags));
    }
    k
}

/// The drop-in's bytes for this intent (with the config's taints alone: what a converged
/// node holds when no user data carries taints).
pub fn render(h: &HandoffIntent) -> String {
    text(&document(h))
}

/// A NodeConfig document as the drop-in holds it.
fn text(doc: &Value) -> String {
    let mut s = serde_json::to_string_pretty(doc).unwrap_or_default();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::aspects::testing::{run, spec, Facts};
    use crate::plan::aspects::AL2023_HANDOFF as ASPECT;

    const CONFIG: &str = r#"{"cluster":{"name":"prod","apiServerEndpoint":"https://k.example","certificateAuthority":"Q0E=","cidr":"10.100.0.0/16"},"labels":{"team":"a"},"kubelet":{"shutdownGracePeriod":"90s"}}"#;

    /// An AL2023 node with the config's cluster values (nothing looked up).
    fn al2023() -> crate::facts::FactsBuilder {
        Facts::builder(Family::Al2023).cluster(ClusterFact::from_spec(&spec(CONFIG).cluster))
    }

    fn node() -> crate::facts::FactsBuilder {
        al2023()
            .exists("/usr/bin/nodeadm", true)
            .exists(CONFIG_UNIT_DROPINS[0], true)
    }

    /// The drop-in's `spec.instance` for config `c`.
    fn instance_block(c: &str) -> Value {
        let out = run(&ASPECT, &spec(c), &node().absent([DROPIN]).build());
        let Step::File(f) = &out.steps[0] else {
            panic!("{:?}", out.steps)
        };
        let doc: Value = serde_json::from_str(&f.new).unwrap();
        doc["spec"]["instance"].clone()
    }

    #[test]
    fn local_storage_goes_as_nodeadms_instance_local_storage() {
        let c = r#"{"cluster":{"name":"prod"},"localStorage":{"strategy":"RAID10","mountPath":"/data","disabledMounts":["PodLogs","SOCI"]}}"#;
        assert_eq!(
            instance_block(c),
            serde_json::json!({"localStorage": {"strategy": "RAID10", "mountPath": "/data", "disabledMounts": ["PodLogs", "SOCI"]}})
        );
    }

    #[test]
    fn the_resolvers_go_beside_the_instance_store_as_nodeadms_instance_network() {
        let c = r#"{"cluster":{"name":"prod"},"localStorage":{"strategy":"RAID0"},"network":{"nameservers":["10.0.0.53","FD00:EC2::253"],"domains":["corp.example"]}}"#;
        assert_eq!(
            instance_block(c),
            serde_json::json!({"localStorage": {"strategy": "RAID0"}, "network": {"nameservers": ["10.0.0.53", "fd00:ec2::253"], "domains": ["corp.example"]}})
        );
    }

    #[test]
    fn the_dropin_carries_the_cluster_and_the_kubelet_intent_then_nodeadm_takes_over() {
        let s = spec(CONFIG);
        let out = run(&ASPECT, &s, &node().absent([DROPIN]).build());
        let Step::File(crate::plan::step::File {
            path, new, mode, ..
        }) = &out.steps[0]
        else {
            panic!("{:?}", out.steps)
        };
        assert_eq!(
            (path.as_path(), *mode),
            (std::path::Path::new(DROPIN), 0o600)
        );
        let doc: Value = serde_json::from_str(new).unwrap();
        assert_eq!(doc["spec"]["cluster"]["cidr"], "10.100.0.0/16");
        assert_eq!(
            doc["spec"]["kubelet"]["config"]["shutdownGracePeriod"],
            "90s"
        );
        assert_eq!(doc["spec"]["kubelet"]["flags"][0], "--node-labels=team=a");
        assert_eq!(
            out.steps[1],
            Step::Handoff(Handoff::Dropin(NodeadmHandoff {
                dropin: DROPIN.into(),
                config_unit_reads_dropins: true,
                carried_taints: None,
            }))
        );
        assert_eq!(out.secrets, ["Q0E="]);
        assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    }

    #[test]
    fn a_converged_node_plans_only_the_hand_off() {
        let s = spec(CONFIG);
        let facts = node().build();
        let facts = node()
            .file(DROPIN, &render(&crate::plan::handoff_intent(&s, &facts)))
            .build();
        let out = run(&ASPECT, &s, &facts);
        // The hand-off, and nodeadm's check of the merge for the gate (a boot's job).
        assert!(
            matches!(out.steps[..], [Step::Handoff(Handoff::Dropin(_)), Step::Check(ref c)] if c.when == crate::plan::step::When::Gate),
            "{:?}",
            out.steps
        );
    }

    #[test]
    fn without_nodeadm_nothing_reads_the_dropin() {
        let facts = al2023().absent([DROPIN]).build();
        let out = run(&ASPECT, &spec(CONFIG), &facts);
        assert!(out
            .warnings
            .iter()
            .any(|w| w.contains("nothing will read the NodeConfig drop-in")));
    }
}
