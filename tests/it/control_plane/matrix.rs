//! The kubelet as a validating oracle: settings drawn from the property suite's generators, each
//! judged by `eks-nodeinit validate` and by a real kubelet started with it (as AL2023 hands it
//! over: the config keys in nodeadm's drop-in, labels and taints as flags). The kubelet's verdict
//! is "refused" when it exits, "accepted" when it registers its Node. Every case must get the
//! same verdict from both, except the documented ones (docs/reliability.md, "The kubelet as
//! oracle"), where the agent is stricter on purpose; those are counted and printed.

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use serde_json::{json, Value};

use super::{ready, INSTANCE};
use crate::common;
use crate::props::strategies;
use common::control_plane::ControlPlane;
use common::handoff_models;
use common::kubelet::Kubelet;
use common::*;

#[derive(Debug, Clone)]
enum Setting {
    Label(String, String),
    Taint(String),
    ImageGc(i64, i64),
    Grace(String, String),
    MaxPods(i64),
}

impl Setting {
    /// The agent's config for this setting (the example's, pointed nowhere, no tagging).
    fn config(&self, v: &mut Value) {
        v["tagging"] = json!({"enabled": false});
        let k = &mut v["kubelet"];
        match self {
            Setting::Label(key, value) => v["labels"] = json!({ key: value }),
            Setting::Taint(t) => v["taints"] = json!([t]),
            Setting::ImageGc(h, l) => {
                k["imageGCHighThresholdPercent"] = (*h).into();
                k["imageGCLowThresholdPercent"] = (*l).into();
            }
            Setting::Grace(g, c) => {
                k["shutdownGracePeriod"] = g.as_str().into();
                k["shutdownGracePeriodCriticalPods"] = c.as_str().into();
                // logind follows the grace period by default; keep it out of the verdict.
                v["logind"] = json!({});
            }
            Setting::MaxPods(n) => k["maxPods"] = (*n).into(),
        }
    }

    /// What the kubelet gets: config keys (nodeadm's drop-in) and flags.
    fn kubelet(&self) -> (Value, Vec<String>) {
        match self {
            Setting::Label(key, value) => (json!({}), vec![format!("--node-labels={key}={value}")]),
            Setting::Taint(t) => (json!({}), vec![format!("--register-with-taints={t}")]),
            Setting::ImageGc(h, l) => (
                json!({"imageGCHighThresholdPercent": h, "imageGCLowThresholdPercent": l}),
                vec![],
            ),
            Setting::Grace(g, c) => (
                json!({"shutdownGracePeriod": g, "shutdownGracePeriodCriticalPods": c}),
                vec![],
            ),
            Setting::MaxPods(n) => (json!({"maxPods": n}), vec![]),
        }
    }
}

/// `per_kind` settings of each kind, the same on every run (a fixed seed).
fn settings(per_kind: usize) -> Vec<Setting> {
    let mut runner = TestRunner::deterministic();
    let mut draw = |s: BoxedStrategy<Setting>| -> Vec<Setting> {
        (0..per_kind)
            .map(|_| s.new_tree(&mut runner).unwrap().current())
            .collect()
    };
    let percent = || -3i64..=103;
    let kinds: Vec<BoxedStrategy<Setting>> = vec![
        (strategies::label_key(), strategies::label_value())
            .prop_map(|(k, v)| Setting::Label(k, v))
            .boxed(),
        strategies::taint_text().prop_map(Setting::Taint).boxed(),
        (percent(), percent())
            .prop_map(|(h, l)| Setting::ImageGc(h, l))
            .boxed(),
        (strategies::duration_text(), strategies::duration_text())
            .prop_map(|(g, c)| Setting::Grace(g, c))
            .boxed(),
        prop_oneof![-2i64..=2, 3i64..=300, Just(i64::from(i32::MAX) + 1)]
            .prop_map(Setting::MaxPods)
            .boxed(),
    ];
    kinds.into_iter().flat_map(&mut draw).collect()
}

/// `eks-nodeinit validate`'s verdict: accepted (exit 0) or refused (exit 3, an invalid config).
fn agent_accepts(dir: &std::path::Path, s: &Setting) -> bool {
    let cfg = config_with(dir, "matrix.json", |v| s.config(v));
    let out = run(cmd().arg("validate").arg("--config").arg(&cfg));
    match out.status.code() {
        Some(0) => true,
        Some(3) => false,
        other => panic!("validate {s:?}: exit {other:?}\n{}", stderr(&out)),
    }
}

/// The kubelet's verdict: refused (it exits) or accepted (its Node is registered).
fn kubelet_accepts(cp: &ControlPlane, name: &str, s: &Setting) -> bool {
    let nc = json!({"spec": {"cluster": {"cidr": common::control_plane::SERVICE_CIDR}}});
    let mut start = handoff_models::al2023_nodeadm(&nc, &INSTANCE);
    let (keys, flags) = s.kubelet();
    let mut doc =
        json!({"kind": "KubeletConfiguration", "apiVersion": "kubelet.config.k8s.io/v1beta1"});
    doc.as_object_mut()
        .unwrap()
        .extend(keys.as_object().unwrap().clone());
    start.dropins.push(("40-nodeadm.conf".into(), doc));
    start.flags = flags;
    Kubelet::start(cp, name, &start).accepted(cp)
}

/// The agent is stricter than the kubelet here on purpose (docs/reliability.md).
fn agent_stricter_on_purpose(s: &Setting) -> bool {
    matches!(s, Setting::MaxPods(n) if *n == 0)
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn the_kubelet_and_validate_agree_on_generated_settings() {
    if !ready() {
        return;
    }
    let per_kind = std::env::var("MATRIX_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(8);
    let cp = ControlPlane::shared();
    let dir = tempfile::tempdir().unwrap();
    let (mut disagree, mut stricter, mut unjudged) = (Vec::new(), 0, 0);
    let cases = settings(per_kind);
    for (i, s) in cases.iter().enumerate() {
        let agent = agent_accepts(dir.path(), s);
        if s.kubelet().1.iter().any(|f| f.contains('\0')) {
            // No argv can carry it: the kubelet cannot judge it; the agent must refuse it.
            assert!(!agent, "{s:?}: a NUL in a flag accepted");
            unjudged += 1;
            continue;
        }
        let kubelet = kubelet_accepts(&cp, &format!("matrix-{i}.node.test"), s);
        eprintln!("matrix {i}: {s:?}: agent {agent}, kubelet {kubelet}");
        if agent != kubelet {
            if !agent && agent_stricter_on_purpose(s) {
                stricter += 1;
            } else {
                disagree.push(format!(
                    "{s:?}: agent accepts {agent}, kubelet accepts {kubelet}"
                ));
            }
        }
    }
    eprintln!(
        "matrix: {} cases, {} agreed, {stricter} where the agent is stricter on purpose, \
         {unjudged} no argv can carry (refused by the agent)",
        cases.len(),
        cases.len() - disagree.len() - stricter - unjudged
    );
    assert!(
        disagree.is_empty(),
        "the agent and the kubelet disagree:\n{}",
        disagree.join("\n")
    );
}
