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
    /// The config's taints (else the role's), then the startup taint.
    pub taints: Vec<Taint>,
    /// `lifecycle.startupTaint`: among `taints`, and not expected on the Node by the proof
    /// (a controller removes it).
    pub startup_taint: Option<Taint>,
    /// `kubelet.extraArgs`, each `--flag=value`.
    pub extra_args: Vec<String>,
    /// `kubelet.nodeName`: what names the Node, when the config says.
    pub node_name: Option<crate::config::NodeNaming>,
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
    let mut taints = taints(c, f);
    let startup_taint = startup_taint(c, &taints, f);
    taints.extend(startup_taint.iter().cloned());
    Registration {
        labels: labels(c, f),
        taints,
        startup_taint,
        extra_args: extra_args(c, f),
        node_name: node_name(c, f),
    }
}

/// `kubelet.nodeName`, unless a `--hostname-override` among the extra arguments names the Node
/// another way.
fn node_name(c: &Config, f: &mut Findings) -> Option<crate::config::NodeNaming> {
    let n = c.kubelet.node_name?;
    let extra = c.kubelet.extra_args.iter();
    if extra
        .into_iter()
        .any(|a| super::is_flag(a, "--hostname-override"))
    {
        f.push("kubelet.nodeName", "kubelet.extraArgs gives --hostname-override, which names the Node whatever this says: keep one");
        return None;
    }
    Some(n)
}

/// The label the shipped NodeReadinessRule selects on (examples/readiness/): its value is the
/// version of the agent's conditions' contract, so that a rule applied to a running fleet
/// selects only nodes of an agent that keeps it (docs/lifecycle.md#rolling-out-the-rule).
pub const RULE_LABEL: (&str, &str) = ("eks-nodeinit.io/readiness", "v2");

/// What `validate` and the plan say of a startup taint the config's labels leave no rule to
/// release as shipped: none when there is no taint or the label is there.
pub fn startup_advice(r: &Registration) -> Option<String> {
    let t = r.startup_taint.as_ref()?;
    let (k, v) = RULE_LABEL;
    let found = r.labels.iter().find(|(key, _)| key == k);
    match found {
        Some((_, value)) if value == v => None,
        Some((_, value)) => Some(format!("labels[\"{k}\"] is `{}`: the shipped NodeReadinessRule selects `{k}={v}`, the contract of this agent's conditions; a rule selecting another value waits on conditions this agent may not set", printable(value))),
        None => Some(format!("lifecycle.startupTaint `{}` is set and `labels` lacks `{k}: {v}`, the label the shipped NodeReadinessRule selects on: unless a rule of your own selects this node, nothing removes the taint", printable(&t.key))),
    }
}

/// The prefix of the taints Kubernetes' Node Readiness Controller manages.
pub const STARTUP_TAINT_PREFIX: &str = "readiness.k8s.io/";

/// `lifecycle.startupTaint`, checked as kubelet reads a taint, under the readiness prefix, and
/// not a key and effect the other taints have.
fn startup_taint(c: &Config, others: &[Taint], f: &mut Findings) -> Option<Taint> {
    const FIELD: &str = "lifecycle.startupTaint";
    let text = c.lifecycle.startup_taint.as_deref()?;
    if let Some(ch) = unsplittable(text) {
        f.push(FIELD, unsplittable_problem(text, ch));
        return None;
    }
    let t = f.check(FIELD, k8s::parse_taint(text))?;
    let problem = if !t.key.starts_with(STARTUP_TAINT_PREFIX) {
        Some(format!("the key `{}` is not under `{STARTUP_TAINT_PREFIX}`: the Node Readiness Controller manages only taints of that prefix (for instance `{STARTUP_TAINT_PREFIX}eks-nodeinit=pending:NoSchedule`)", printable(&t.key)))
    } else if t.effect == "PreferNoSchedule" {
        Some("a `PreferNoSchedule` taint keeps no pod off the node; use `NoSchedule` (or `NoExecute`)".to_string())
    } else if others
        .iter()
        .any(|x| x.key == t.key && x.effect == t.effect)
    {
        Some(format!(
            "`taints` has `{}:{}` already; keep it in one place",
            printable(&t.key),
            t.effect
        ))
    } else {
        None
    };
    match problem {
        Some(p) => {
            f.push(FIELD, p);
            None
        }
        None => Some(t),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn of(config: &str) -> (Registration, Vec<String>) {
        let c = crate::config::parse(config, "t.json").unwrap();
        let mut f = Findings::default();
        let r = registration(&c, &mut f);
        (
            r,
            f.0.iter()
                .map(|x| format!("{}: {}", x.field, x.message))
                .collect(),
        )
    }

    #[test]
    fn the_startup_taint_is_registered_after_the_others_under_the_readiness_prefix() {
        let (r, f) = of(
            r#"{"cluster":{"name":"c"},"taints":["a=b:NoSchedule"],"lifecycle":{"startupTaint":"readiness.k8s.io/eks-nodeinit=pending:NoSchedule"}}"#,
        );
        assert!(f.is_empty(), "{f:?}");
        let texts: Vec<_> = r.taints.iter().map(|t| t.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "a=b:NoSchedule",
                "readiness.k8s.io/eks-nodeinit=pending:NoSchedule"
            ]
        );
        assert_eq!(
            r.startup_taint.unwrap().key,
            "readiness.k8s.io/eks-nodeinit"
        );
        for (taint, says) in [
            (
                "example.com/boot:NoSchedule",
                "is not under `readiness.k8s.io/`",
            ),
            ("readiness.k8s.io/boot:PreferNoSchedule", "keeps no pod off"),
            ("readiness.k8s.io/a=b:NoSchedule", "`taints` has"),
            ("readiness.k8s.io/boot", "has no effect"),
        ] {
            let config = format!(
                r#"{{"cluster":{{"name":"c"}},"taints":["readiness.k8s.io/a=c:NoSchedule"],"lifecycle":{{"startupTaint":"{taint}"}}}}"#
            );
            let (r, f) = of(&config);
            assert_eq!(f.len(), 1, "{taint}: {f:?}");
            assert!(
                f[0].starts_with("lifecycle.startupTaint: ") && f[0].contains(says),
                "{taint}: {f:?}"
            );
            assert!(r.startup_taint.is_none() && r.taints.len() == 1, "{taint}");
        }
    }
}
