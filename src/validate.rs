//! Every check on the config that needs no filesystem: all findings at once, each naming the
//! field and saying what to do. Checks that need the node's files (sysctl keys exist,
//! protectKernelDefaults) run while planning and report in the same `Finding` form.

use std::fmt;

use crate::config::{Config, Role};
use crate::duration;

/// One problem with the config: where it is and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    pub field: String,
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// All findings, printed one per line.
#[derive(Debug, thiserror::Error)]
#[error("the config is invalid ({} problem{}):\n{}", .0.len(), if .0.len() == 1 { "" } else { "s" }, render(.0))]
pub struct Invalid(pub Vec<Finding>);

fn render(f: &[Finding]) -> String {
    f.iter()
        .map(|x| format!("  - {x}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn finding(field: impl Into<String>, message: impl Into<String>) -> Finding {
    Finding {
        field: field.into(),
        message: message.into(),
    }
}

/// kubelet's kubeletLabels: the well-known keys a kubelet may set on itself
/// (kubernetes staging/src/k8s.io/kubelet/pkg/apis/well_known_labels.go).
pub const KUBELET_ALLOWED_LABELS: [&str; 11] = [
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
];
/// Label namespaces (and their subdomains) a kubelet may set on itself.
pub const KUBELET_ALLOWED_NAMESPACES: [&str; 2] = ["kubelet.kubernetes.io", "node.kubernetes.io"];

/// Sysctls kubelet checks when `protectKernelDefaults` is on, with the value it requires
/// (kubernetes pkg/kubelet/cm: setupKernelTunables; component-helpers/node/util/sysctl).
pub const PROTECTED_KERNEL_DEFAULTS: [(&str, &str); 6] = [
    ("vm.overcommit_memory", "1"),
    ("vm.panic_on_oom", "0"),
    ("kernel.panic", "10"),
    ("kernel.panic_on_oops", "1"),
    ("kernel.keys.root_maxkeys", "1000000"),
    ("kernel.keys.root_maxbytes", "25000000"),
];

/// Labels and taints a role starts from, before the config's own.
pub fn role_preset(role: Role) -> (Vec<(&'static str, &'static str)>, Vec<&'static str>) {
    match role {
        Role::Master => (
            vec![("node.kubernetes.io/role", "master")],
            vec!["CriticalAddonsOnly=true:NoSchedule"],
        ),
        Role::Scaler => (vec![("node.kubernetes.io/role", "scaler")], vec![]),
        Role::None => (vec![], vec![]),
    }
}

/// The labels the node registers with: the role preset, overridden by the config
/// (a `null` value removes a preset label). Sorted by key.
pub fn effective_labels(c: &Config) -> Vec<(String, String)> {
    let (preset, _) = role_preset(c.node_group.role);
    let mut m: std::collections::BTreeMap<String, String> = preset
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    for (k, v) in &c.labels {
        match v {
            Some(v) => {
                m.insert(k.clone(), v.clone());
            }
            None => {
                m.remove(k);
            }
        }
    }
    m.into_iter().collect()
}

/// The taints the node registers with: the config's list when given, else the role preset's.
pub fn effective_taints(c: &Config) -> Vec<String> {
    match &c.taints {
        Some(t) => t.clone(),
        None => role_preset(c.node_group.role)
            .1
            .into_iter()
            .map(String::from)
            .collect(),
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'
}

/// Kubernetes "name" part of a qualified name, and label values: ≤63, alphanumeric at both
/// ends, `-_.` inside.
fn check_name_part(s: &str, what: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err(format!("{what} must not be empty"));
    }
    if s.len() > 63 {
        return Err(format!(
            "{what} `{s}` is {} characters; at most 63",
            s.len()
        ));
    }
    let first = s.chars().next().unwrap();
    let last = s.chars().last().unwrap();
    if !first.is_ascii_alphanumeric()
        || !last.is_ascii_alphanumeric()
        || !s.chars().all(is_name_char)
    {
        return Err(format!(
            "{what} `{}` must start and end with a letter or digit and hold only letters, digits, `-`, `_`, `.`",
            printable(s)
        ));
    }
    Ok(())
}

/// DNS-1123 subdomain: ≤253, lowercase labels of `[a-z0-9-]` separated by dots.
fn check_dns_subdomain(s: &str) -> Result<(), String> {
    if s.is_empty() || s.len() > 253 {
        return Err(format!(
            "prefix `{}` must be a DNS subdomain of 1 to 253 characters",
            printable(s)
        ));
    }
    for label in s.split('.') {
        let ok = !label.is_empty()
            && label.len() <= 63
            && label
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return Err(format!(
                "prefix `{}` must be a lowercase DNS subdomain (e.g. `example.com`)",
                printable(s)
            ));
        }
    }
    Ok(())
}

/// A Kubernetes qualified name: `[prefix/]name`.
pub fn check_qualified_name(key: &str) -> Result<(), String> {
    match key.split_once('/') {
        Some((prefix, name)) => {
            check_dns_subdomain(prefix)?;
            if name.contains('/') {
                return Err(format!("key `{}` has more than one `/`", printable(key)));
            }
            check_name_part(name, "name")
        }
        None => check_name_part(key, "name"),
    }
}

pub fn check_label_value(v: &str) -> Result<(), String> {
    if v.is_empty() {
        return Ok(());
    }
    check_name_part(v, "value")
}

fn in_namespace(prefix: &str, ns: &str) -> bool {
    prefix == ns || prefix.ends_with(&format!(".{ns}"))
}

/// kubelet's self-label rule: refuse keys under kubernetes.io / k8s.io that kubelet would
/// refuse at start-up. Returns what to do instead.
pub fn check_kubelet_self_label(key: &str, value: &str) -> Result<(), String> {
    let Some((prefix, name)) = key.split_once('/') else {
        return Ok(());
    };
    if in_namespace(prefix, "node-restriction.kubernetes.io") {
        return Err(format!(
            "`{key}` is reserved for labels an administrator sets on the Node object; the NodeRestriction admission plugin forbids a kubelet from setting it. Set it with kubectl or a controller, or use `node.kubernetes.io/{name}`"
        ));
    }
    if !(in_namespace(prefix, "kubernetes.io") || in_namespace(prefix, "k8s.io")) {
        return Ok(());
    }
    if KUBELET_ALLOWED_LABELS.contains(&key)
        || KUBELET_ALLOWED_NAMESPACES
            .iter()
            .any(|ns| in_namespace(prefix, ns))
    {
        return Ok(());
    }
    let instead = if key == "kubernetes.io/role" || in_namespace(prefix, "node-role.kubernetes.io")
    {
        let role = if key == "kubernetes.io/role" {
            value
        } else {
            name
        };
        format!(
            "use `node.kubernetes.io/role={role}` instead (node-role.kubernetes.io/* can only be set by a controller or kubectl after the node joins)"
        )
    } else {
        format!("use `node.kubernetes.io/{name}` or a key under your own domain")
    };
    Err(format!(
        "kubelet refuses to start with `--node-labels` holding `{key}`: keys under kubernetes.io and k8s.io are limited to kubelet.kubernetes.io/*, node.kubernetes.io/* and {} well-known keys; {instead}",
        KUBELET_ALLOWED_LABELS.len()
    ))
}

pub const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// A taint `key[=value]:Effect` split into its parts.
pub fn parse_taint(t: &str) -> Result<(String, String, String), String> {
    let Some((kv, effect)) = t.rsplit_once(':') else {
        return Err(format!(
            "`{}` has no effect; write `key[=value]:Effect` with Effect one of NoSchedule, PreferNoSchedule, NoExecute",
            printable(t)
        ));
    };
    if !TAINT_EFFECTS.contains(&effect) {
        return Err(format!(
            "effect `{}` is not one of NoSchedule, PreferNoSchedule, NoExecute (case matters)",
            printable(effect)
        ));
    }
    let (key, value) = match kv.split_once('=') {
        Some((k, v)) => (k, v),
        None => (kv, ""),
    };
    check_qualified_name(key).map_err(|e| format!("taint key: {e}"))?;
    check_label_value(value).map_err(|e| format!("taint value: {e}"))?;
    Ok((key.to_string(), value.to_string(), effect.to_string()))
}

/// A sysctl key: dot-separated components of `[A-Za-z0-9_-]`; never `/`, `..` or anything that
/// could leave /proc/sys.
pub fn check_sysctl_key(key: &str) -> Result<(), String> {
    if key.is_empty() {
        return Err("empty sysctl key".into());
    }
    if key.contains('/') {
        return Err(format!(
            "`{}` holds `/`; write sysctl keys with dots (`fs.inotify.max_user_watches`)",
            printable(key)
        ));
    }
    if key.contains("..") || key.starts_with('.') || key.ends_with('.') {
        return Err(format!(
            "`{}` has an empty component; write sysctl keys like `fs.inotify.max_user_watches`",
            printable(key)
        ));
    }
    if !key
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
    {
        return Err(format!(
            "`{}` holds characters outside letters, digits, `_`, `-` and `.`",
            printable(key)
        ));
    }
    Ok(())
}

pub fn check_sysctl_value(v: &str) -> Result<(), String> {
    if v.trim().is_empty() {
        return Err("empty value".into());
    }
    if v.chars().any(|c| c.is_control() && c != '\t') {
        return Err(format!(
            "value `{}` holds a control character (newline, NUL…); it would break /etc/sysctl.d",
            printable(v)
        ));
    }
    Ok(())
}

/// Normalise a sysctl value for comparison: the kernel prints multi-value sysctls with tabs.
pub fn normalize_sysctl_value(v: &str) -> String {
    v.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Show a string with control characters escaped, so messages never carry raw newlines.
pub fn printable(s: &str) -> String {
    s.chars().flat_map(|c| c.escape_debug()).collect()
}

/// Characters that would break bootstrap.sh's `Environment='KUBELET_EXTRA_ARGS=…'` drop-in or
/// a systemd unit line.
fn unsafe_for_dropin(s: &str) -> Option<char> {
    s.chars()
        .find(|c| c.is_control() || matches!(c, '\'' | '"' | '\\' | '$' | '%' | '`' | ' '))
}

const BOOTSTRAP_FLAGS_OWNED: [&str; 5] = [
    "--b64-cluster-ca",
    "--apiserver-endpoint",
    "--kubelet-extra-args",
    "--container-runtime",
    "--service-ipv4-cidr",
];

/// Every check that needs nothing but the config.
pub fn check_config(c: &Config) -> Vec<Finding> {
    let mut out = Vec::new();

    // cluster
    let name = &c.cluster.name;
    if name.is_empty()
        || name.len() > 100
        || !name.starts_with(|ch: char| ch.is_ascii_alphanumeric())
        || !name
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_')
    {
        out.push(finding(
            "cluster.name",
            format!(
                "`{}` is not an EKS cluster name (1-100 letters, digits, `-`, `_`, starting with a letter or digit)",
                printable(name)
            ),
        ));
    }
    if let Some(ep) = &c.cluster.api_server_endpoint {
        if !ep.starts_with("https://") || ep.len() <= 8 || unsafe_for_dropin(ep).is_some() {
            out.push(finding(
                "cluster.apiServerEndpoint",
                format!(
                    "`{}` must be an https:// URL without spaces or quotes (the cluster's endpoint from `aws eks describe-cluster`)",
                    printable(ep)
                ),
            ));
        }
    }
    if let Some(ca) = &c.cluster.certificate_authority {
        use base64::Engine;
        if ca.is_empty()
            || base64::engine::general_purpose::STANDARD
                .decode(ca)
                .is_err()
        {
            // Never echo the value: it is the cluster CA.
            out.push(finding(
                "cluster.certificateAuthority",
                "is not valid base64 on one line; use the cluster's certificateAuthority.data as is",
            ));
        }
    }
    if let Some(cidr) = &c.cluster.cidr {
        if parse_cidr(cidr).is_none() {
            out.push(finding(
                "cluster.cidr",
                format!(
                    "`{}` is not an IP network like `10.100.0.0/16` (the cluster's service CIDR)",
                    printable(cidr)
                ),
            ));
        }
    }
    if c.cluster.container_runtime != "containerd" {
        out.push(finding(
            "cluster.containerRuntime",
            format!(
                "`{}` is not supported: EKS AMIs since Kubernetes 1.24 run containerd only",
                printable(&c.cluster.container_runtime)
            ),
        ));
    }

    // node group
    if let Some(g) = &c.node_group.name {
        if g.is_empty() || g.len() > 200 || g.chars().any(|ch| ch.is_control()) {
            out.push(finding(
                "nodeGroup.name",
                "must be 1-200 printable characters (it prefixes the instance's Name tag)",
            ));
        }
    }

    // labels
    for (k, v) in effective_labels(c) {
        let field = format!("labels[\"{}\"]", printable(&k));
        if let Err(e) = check_qualified_name(&k) {
            out.push(finding(&field, format!("key: {e}")));
            continue;
        }
        if let Err(e) = check_label_value(&v) {
            out.push(finding(&field, e));
        }
        if let Err(e) = check_kubelet_self_label(&k, &v) {
            out.push(finding(&field, e));
        }
    }

    // taints
    let mut seen = std::collections::BTreeSet::new();
    for (i, t) in effective_taints(c).iter().enumerate() {
        let field = if c.taints.is_some() {
            format!("taints[{i}]")
        } else {
            format!("nodeGroup.role (preset taint {i})")
        };
        match parse_taint(t) {
            Ok((k, _v, e)) => {
                if !seen.insert((k.clone(), e.clone())) {
                    out.push(finding(
                        field,
                        format!("duplicate taint `{k}:{e}`; keep one entry per key and effect"),
                    ));
                }
            }
            Err(e) => out.push(finding(field, e)),
        }
    }

    // sysctls (syntax only here)
    for (k, v) in &c.sysctls {
        let field = format!("sysctls[\"{}\"]", printable(k));
        if let Err(e) = check_sysctl_key(k) {
            out.push(finding(&field, e));
        }
        if let Err(e) = check_sysctl_value(&v.as_string()) {
            out.push(finding(&field, e));
        }
    }

    // kubelet
    let k = &c.kubelet;
    for (field, v) in [
        (
            "kubelet.imageGCHighThresholdPercent",
            k.image_gc_high_threshold_percent,
        ),
        (
            "kubelet.imageGCLowThresholdPercent",
            k.image_gc_low_threshold_percent,
        ),
    ] {
        if let Some(v) = v {
            if !(0..=100).contains(&v) {
                out.push(finding(field, format!("{v} is outside 0..100")));
            }
        }
    }
    // kubelet's own defaults are high 85, low 80: compare against them when one side is unset.
    let high = k.image_gc_high_threshold_percent.unwrap_or(85);
    let low = k.image_gc_low_threshold_percent.unwrap_or(80);
    if (k.image_gc_high_threshold_percent.is_some() || k.image_gc_low_threshold_percent.is_some())
        && low >= high
    {
        out.push(finding(
            "kubelet.imageGCLowThresholdPercent",
            format!(
                "low ({low}) must be below high ({high}){}",
                if k.image_gc_high_threshold_percent.is_none() {
                    " (kubelet's default high)"
                } else if k.image_gc_low_threshold_percent.is_none() {
                    " (kubelet's default low is 80)"
                } else {
                    ""
                }
            ),
        ));
    }
    let grace = k.shutdown_grace_period.as_deref().map(|s| {
        duration::parse(s)
            .map_err(|e| out.push(finding("kubelet.shutdownGracePeriod", e.to_string())))
    });
    let critical = k.shutdown_grace_period_critical_pods.as_deref().map(|s| {
        duration::parse(s).map_err(|e| {
            out.push(finding(
                "kubelet.shutdownGracePeriodCriticalPods",
                e.to_string(),
            ))
        })
    });
    match (grace, critical) {
        (Some(Ok(g)), Some(Ok(cr))) if cr > g => out.push(finding(
            "kubelet.shutdownGracePeriodCriticalPods",
            format!(
                "{} is longer than shutdownGracePeriod {}; the critical-pod period is part of the grace period and must not exceed it",
                k.shutdown_grace_period_critical_pods.as_deref().unwrap_or_default(),
                k.shutdown_grace_period.as_deref().unwrap_or_default()
            ),
        )),
        (None, Some(Ok(_))) => out.push(finding(
            "kubelet.shutdownGracePeriodCriticalPods",
            "is set without kubelet.shutdownGracePeriod; set the grace period too",
        )),
        _ => {}
    }
    if let (Some(Ok(g)), Some(delay)) = (
        k.shutdown_grace_period.as_deref().map(duration::parse),
        c.logind.inhibit_delay_max_sec,
    ) {
        let need = g.as_secs() + u64::from(g.subsec_nanos() > 0);
        if delay < need {
            out.push(finding(
                "logind.inhibitDelayMaxSec",
                format!(
                    "{delay} is below kubelet.shutdownGracePeriod ({need}s): logind would cut the graceful shutdown short; raise it or leave it unset"
                ),
            ));
        }
    }
    for (i, a) in k.extra_args.iter().enumerate() {
        let field = format!("kubelet.extraArgs[{i}]");
        if !a.starts_with("--") || !a.contains('=') {
            out.push(finding(
                &field,
                format!(
                    "`{}` must be a kubelet flag in `--flag=value` form",
                    printable(a)
                ),
            ));
        } else if let Some(ch) = unsafe_for_dropin(a) {
            out.push(finding(
                &field,
                format!(
                    "`{}` holds {:?}, which would break the kubelet's systemd drop-in; remove it",
                    printable(a),
                    ch
                ),
            ));
        } else if a.starts_with("--node-labels=") || a.starts_with("--register-with-taints=") {
            out.push(finding(
                &field,
                "set labels and taints with the `labels` and `taints` fields, not as raw flags",
            ));
        }
    }

    // hand-off
    for (i, a) in c.handoff.extra_bootstrap_args.iter().enumerate() {
        let field = format!("handoff.extraBootstrapArgs[{i}]");
        if a.chars().any(|ch| ch.is_control()) {
            out.push(finding(&field, "holds a control character"));
            continue;
        }
        if let Some((flag, value)) = a.split_once('=').filter(|_| a.starts_with("--")) {
            out.push(finding(&field, format!(
                "`{}`: bootstrap.sh takes `--flag value` only and would take `--flag=value` as the cluster name; write \"{}\", \"{}\" as two elements",
                printable(a), printable(flag), printable(value)
            )));
            continue;
        }
        if BOOTSTRAP_FLAGS_OWNED.contains(&a.as_str()) {
            out.push(finding(&field, format!(
                "`{a}` is set by eks-nodeinit from the config (cluster, labels, taints, kubelet.extraArgs); set it there"
            )));
        }
    }
    for (field, p) in [
        ("handoff.bootstrapPath", &c.handoff.bootstrap_path),
        ("handoff.nodeadmPath", &c.handoff.nodeadm_path),
        ("kubelet.configPath", &c.kubelet.config_path),
    ] {
        if !p.is_absolute() || p.components().any(|x| x == std::path::Component::ParentDir) {
            out.push(finding(
                field,
                format!("`{}` must be an absolute path without `..`", p.display()),
            ));
        }
    }

    // tagging / imds
    if c.tagging.sync_budget_ms > 60_000 {
        out.push(finding(
            "tagging.syncBudgetMs",
            "at most 60000: tagging must never hold up the join for long",
        ));
    }
    if c.imds.deadline_ms == 0 || c.imds.deadline_ms > 120_000 {
        out.push(finding("imds.deadlineMs", "must be between 1 and 120000"));
    }
    out
}

fn parse_cidr(s: &str) -> Option<(std::net::IpAddr, u8)> {
    let (ip, len) = s.split_once('/')?;
    let ip: std::net::IpAddr = ip.parse().ok()?;
    let len: u8 = len.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    (len <= max).then_some((ip, len))
}
