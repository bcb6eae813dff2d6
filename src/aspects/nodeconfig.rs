//! The Amazon Linux 2023 hand-off: a nodeadm `NodeConfig` (`node.eks.aws/v1alpha1`) drop-in with
//! the cluster block when configured, `kubelet.config` (image GC, shutdown periods) and
//! `kubelet.flags` (labels, taints). nodeadm writes the kubelet config from it.

use std::path::PathBuf;

use serde_json::{json, Map, Value};

use crate::config::HandoffSettings;
use crate::facts::{Facts, Family};
use crate::findings::Findings;
use crate::plan::Step;
use crate::spec::{check_node_path, Spec};

use super::{Aspect, Out, Reads};

pub const ASPECT: Aspect = Aspect {
    name: "nodeconfig",
    reads,
    plan,
};

/// nodeadm-run.service reads `file:///etc/eks/nodeadm.d/` after the instance's user data; files in
/// it merge in name order (later wins). `10-` lets an operator's own later drop-in win.
pub const DROPIN: &str = "/etc/eks/nodeadm.d/10-eks-nodeinit.json";

#[derive(Debug, Clone)]
pub struct NodeconfigSpec {
    pub nodeadm_path: PathBuf,
}

pub fn spec(h: &HandoffSettings, f: &mut Findings) -> NodeconfigSpec {
    check_node_path("handoff.nodeadmPath", &h.nodeadm_path, f);
    NodeconfigSpec {
        nodeadm_path: h.nodeadm_path.clone(),
    }
}

fn reads(spec: &Spec, family: Option<Family>, r: &mut Reads) {
    if family == Some(Family::Al2023) {
        r.file(DROPIN);
        r.exists.push(spec.nodeconfig.nodeadm_path.clone());
    }
}

fn plan(spec: &Spec, facts: &Facts, out: &mut Out) {
    if facts.family() != Some(Family::Al2023) {
        return;
    }
    let Some(old) = facts.current_file(DROPIN, "handoff", &mut out.findings) else {
        return;
    };
    out.secrets
        .extend(spec.cluster.certificate_authority.iter().cloned());
    let new = text(spec);
    if old.content.as_deref() != Some(new.as_str()) {
        out.steps.push(Step::File {
            purpose: "nodeadm NodeConfig drop-in".into(),
            path: PathBuf::from(DROPIN),
            old: old.content.clone(),
            new,
            mode: old.mode.unwrap_or(0o600),
            backup: None,
        });
    }
    out.steps.push(Step::Nodeadm {
        dropin: PathBuf::from(DROPIN),
        note: "nodeadm-run.service (after cloud-final.service) reads imds://user-data then file:///etc/eks/nodeadm.d/ and starts kubelet; the agent exits 0".into(),
    });
    if facts
        .instance
        .as_ref()
        .and_then(|m| m.user_data_has_node_config)
        == Some(false)
    {
        out.warnings.push(
            "the instance's user data holds no NodeConfig: nodeadm-run reads imds://user-data first and fails without one (\"could not find NodeConfig within UserData\"); add an application/node.eks.aws MIME part with at least the cluster block (examples/cloud-init/al2023-userdata.mime)".into(),
        );
    }
    if !facts.exists(&spec.nodeconfig.nodeadm_path) {
        out.warnings.push(format!(
            "{} does not exist under the root: nothing will read the NodeConfig drop-in",
            spec.nodeconfig.nodeadm_path.display()
        ));
    }
}

/// The NodeConfig document.
pub fn document(spec: &Spec) -> Value {
    let c = &spec.cluster;
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
    let mut kubelet = Map::new();
    let cfg: Map<String, Value> = spec
        .kubelet
        .desired()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    if !cfg.is_empty() {
        kubelet.insert("config".into(), Value::Object(cfg));
    }
    let flags = spec.registration.kubelet_flags();
    if !flags.is_empty() {
        kubelet.insert("flags".into(), json!(flags));
    }
    let mut spec_doc = Map::new();
    spec_doc.insert("cluster".into(), Value::Object(cluster));
    if !kubelet.is_empty() {
        spec_doc.insert("kubelet".into(), Value::Object(kubelet));
    }
    json!({
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": Value::Object(spec_doc),
    })
}

pub fn text(spec: &Spec) -> String {
    let mut s = serde_json::to_string_pretty(&document(spec)).unwrap_or_default();
    s.push('\n');
    s
}
