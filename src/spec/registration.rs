//! Registration: the labels and taints the node registers with (the role's preset merged with
//! the config's) and `kubelet.extraArgs`, each checked as kubelet and systemd will read it.

use std::collections::BTreeMap;

use crate::base::findings::Findings;
use crate::base::k8s::{self, Taint};
use crate::base::text::{printable, unsplittable, unsplittable_problem};
use crate::config::{Config, Role};

use super::unsafe_for_dropin;

/// What the kubelet registers the node with, and the extra flags it gets.
#[derive(Debug, Clone, Default)]
pub struct Registration {
    /// Role preset merged with the config's labels, sorted by key.
    pub labels: Vec<(String, String)>,
    pub taints: Vec<Taint>,
    /// `kubelet.extraArgs`, each `--flag=value`.
    pub extra_args: Vec<String>,
}

/// Labels and taints a role starts from, before the config's own.
pub(crate) fn role_preset(role: Role) -> (Vec<(&'static str, &'static str)>, Vec<&'static str>) {
    match role {
        Role::Master => (
            vec![("node.kubernetes.io/role", "master")],
            vec!["CriticalAddonsOnly=true:NoSchedule"],
        ),
        Role::Scaler => (vec![("node.kubernetes.io/role", "scaler")], vec![]),
        Role::None => (vec![], vec![]),
    }
}

/// The labels the node registers with: the role preset, overridden by the config (a `null`
/// value removes a preset label), sorted by key.
fn merged_labels(c: &Config) -> BTreeMap<String, String> {
    let (preset, _) = role_preset(c.node_group.role);
    let mut m: BTreeMap<String, String> = preset
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    for (k, v) in &c.labels {
        match v {
            Some(v) => m.insert(k.clone(), v.clone()),
            None => m.remove(k),
        };
    }
    m
}

pub(super) fn registration(c: &Config, f: &mut Findings) -> Registration {
    Registration {
        labels: labels(c, f),
        taints: taints(c, f),
        extra_args: extra_args(c, f),
    }
}

fn labels(c: &Config, f: &mut Findings) -> Vec<(String, String)> {
    let mut labels = Vec::new();
    for (k, v) in merged_labels(c) {
        let field = format!("labels[\"{}\"]", printable(&k));
        if let Some((text, ch)) = [&k, &v]
            .into_iter()
            .find_map(|x| unsplittable(x).map(|ch| (x, ch)))
        {
            f.push(&field, unsplittable_problem(text, ch));
            continue;
        }
        if let Err(e) = k8s::check_qualified_name(&k) {
            f.push(&field, format!("key: {e}"));
            continue;
        }
        let value_ok = f.check(&field, k8s::check_label_value(&v)).is_some();
        let self_ok = f
            .check(&field, k8s::check_kubelet_self_label(&k, &v))
            .is_some();
        if value_ok && self_ok {
            labels.push((k, v));
        }
    }
    labels
}

/// The config's taints, else the role's preset; one per key and effect.
fn taints(c: &Config, f: &mut Findings) -> Vec<Taint> {
    let (given, written): (Vec<String>, bool) = match &c.taints {
        Some(t) => (t.clone(), true),
        None => {
            let preset = role_preset(c.node_group.role).1;
            (preset.into_iter().map(String::from).collect(), false)
        }
    };
    let mut taints: Vec<Taint> = Vec::new();
    for (i, t) in given.iter().enumerate() {
        let field = if written {
            format!("taints[{i}]")
        } else {
            format!("nodeGroup.role (preset taint {i})")
        };
        if let Some(ch) = unsplittable(t) {
            f.push(&field, unsplittable_problem(t, ch));
            continue;
        }
        let Some(t) = f.check(&field, k8s::parse_taint(t)) else {
            continue;
        };
        if taints
            .iter()
            .any(|x| x.key == t.key && x.effect == t.effect)
        {
            f.push(
                field,
                format!(
                    "duplicate taint `{}:{}`; keep one entry per key and effect",
                    t.key, t.effect
                ),
            );
            continue;
        }
        taints.push(t);
    }
    taints
}

fn extra_args(c: &Config, f: &mut Findings) -> Vec<String> {
    let mut extra_args = Vec::new();
    for (i, a) in c.kubelet.extra_args.iter().enumerate() {
        match extra_arg_problem(a) {
            Some(p) => f.push(format!("kubelet.extraArgs[{i}]"), p),
            None => extra_args.push(a.clone()),
        }
    }
    extra_args
}

/// Why kubelet, the systemd drop-in or the hand-off could not carry `a` as one flag.
fn extra_arg_problem(a: &str) -> Option<String> {
    if let Some(ch) = unsplittable(a) {
        Some(unsplittable_problem(a, ch))
    } else if !a.starts_with("--") || !a.contains('=') {
        Some(format!(
            "`{}` must be a kubelet flag in `--flag=value` form",
            printable(a)
        ))
    } else if let Some(ch) = unsafe_for_dropin(a) {
        Some(format!(
            "`{}` holds {ch:?}, which would break the kubelet's systemd drop-in; remove it",
            printable(a)
        ))
    } else if a.starts_with("--node-labels=") || a.starts_with("--register-with-taints=") {
        Some("set labels and taints with the `labels` and `taints` fields, not as raw flags".into())
    } else {
        None
    }
}
