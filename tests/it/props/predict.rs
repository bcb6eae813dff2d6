//! What a config document should plan, or why it should be refused: one small oracle per config
//! section, each written from the section's documented checks and the upstream rules
//! (`oracle`), never from the agent's code. A new setting adds an oracle here and a line to
//! [`predict`].

use std::collections::BTreeMap;
use std::sync::LazyLock;

use eks_nodeinit::plan::handoff::al2::{FLAGS_OWNED, NEWEST_OPTIONS};
use serde_json::{json, Map, Value};

use super::config_doc::VALID_ENDPOINTS;
use super::{oracle, Root};

/// What the oracle expects an accepted config to plan.
#[derive(Debug)]
pub struct Want {
    pub al2: bool,
    pub name: String,
    pub ca: Option<String>,
    pub endpoint: Option<String>,
    /// The text and whether it is IPv6.
    pub cidr: Option<(String, bool)>,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<String>,
    pub extra_args: Vec<String>,
    pub extra_bootstrap: Vec<(String, String)>,
    pub kubelet: Map<String, Value>,
    pub kubelet_path: String,
    pub logind_sec: Option<u64>,
    /// kubelet's shutdownGracePeriod in nanoseconds.
    pub grace_nanos: Option<u128>,
    pub sysctls: BTreeMap<String, String>,
    pub live_changes: BTreeMap<String, String>,
    pub tag: Option<String>,
}

/// The reasons for a refusal, as the oracles find them.
type Why = Vec<String>;

/// The config's refusals, each a reason; or what it plans. A config without a cluster, with a
/// node group that is no object, or on a node of no family is refused at once; otherwise every
/// section is checked, so that all reasons are listed.
pub fn predict(doc: &Value, root: &Root) -> Result<Want, Why> {
    let mut why = Why::new();
    let top = doc.as_object().unwrap();
    top_level(top, &mut why);
    let tag_enabled = tagging(section(top, "tagging"), &mut why);
    imds(section(top, "imds"), &mut why);
    let Some(cluster) = cluster(top, &mut why) else {
        return Err(why);
    };
    let Some(group) = node_group(top, &mut why) else {
        return Err(why);
    };
    let labels = labels(section(top, "labels"), &group, &mut why);
    let taints = taints(top, &group, &mut why);
    let kubelet = kubelet(section(top, "kubelet"), &mut why);
    let logind_sec = logind(section(top, "logind"), kubelet.grace_nanos, &mut why);
    let handoff = handoff(section(top, "handoff"), &mut why);
    let Some(al2) = family(&handoff, root, &mut why) else {
        return Err(why);
    };
    // protectKernelDefaults: nodeadm's default on AL2023; on AL2 the sample kubelet config's.
    let sample_config = kubelet.path == "/etc/kubernetes/kubelet/kubelet-config.json";
    if al2 && !kubelet.desired.is_empty() && !sample_config {
        why.push("kubelet config missing".into());
    }
    let (sysctls, live_changes) = sysctls(
        section(top, "sysctls"),
        root,
        !al2 || sample_config,
        &mut why,
    );
    let tag = name_tag(tag_enabled, &group, &mut why);
    // On AL2 the agent sets --ip-family for an IPv6 CIDR; the operator may not set it again.
    if al2
        && cluster.cidr.as_ref().is_some_and(|(_, v6)| *v6)
        && handoff
            .extra_bootstrap
            .iter()
            .any(|(o, _)| o == "--ip-family")
    {
        why.push("--ip-family twice".into());
    }
    if !why.is_empty() {
        return Err(why);
    }
    Ok(Want {
        al2,
        name: cluster.name,
        ca: cluster.ca,
        endpoint: cluster.endpoint,
        cidr: cluster.cidr,
        labels,
        taints,
        extra_args: kubelet.extra_args,
        extra_bootstrap: handoff.extra_bootstrap,
        kubelet: kubelet.desired,
        kubelet_path: kubelet.path,
        logind_sec,
        grace_nanos: kubelet.grace_nanos,
        sysctls,
        live_changes,
        tag,
    })
}

/// A section of the document as an object; absent: empty.
fn section<'a>(top: &'a Map<String, Value>, k: &str) -> &'a Map<String, Value> {
    static EMPTY: LazyLock<Map<String, Value>> = LazyLock::new(Map::new);
    top.get(k).and_then(Value::as_object).unwrap_or(&EMPTY)
}

fn string(m: &Map<String, Value>, k: &str) -> Option<String> {
    m.get(k).and_then(Value::as_str).map(String::from)
}

/// A number as the config's types take it: `default` when absent; not a u64, a reason.
fn u64_field(m: &Map<String, Value>, k: &str, default: u64, why: &mut Why) -> u64 {
    match m.get(k) {
        None => default,
        Some(v) => v.as_u64().unwrap_or_else(|| {
            why.push(format!("{k} {v} is no u64"));
            default
        }),
    }
}

/// No field the config does not know; the one apiVersion.
fn top_level(top: &Map<String, Value>, why: &mut Why) {
    const TOP: [&str; 11] = [
        "apiVersion",
        "cluster",
        "nodeGroup",
        "labels",
        "taints",
        "sysctls",
        "kubelet",
        "logind",
        "handoff",
        "tagging",
        "imds",
    ];
    for k in top.keys() {
        if !TOP.contains(&k.as_str()) {
            why.push(format!("unknown field {k}"));
        }
    }
    if let Some(v) = top.get("apiVersion") {
        if v != "eks-nodeinit/v1" {
            why.push(format!("apiVersion {v}"));
        }
    }
}

/// `tagging`: its budgets in range, the spread shorter than the deadline. Whether it tags.
fn tagging(tagging: &Map<String, Value>, why: &mut Why) -> bool {
    let budget = u64_field(tagging, "syncBudgetMs", 3000, why);
    let deadline = u64_field(tagging, "backgroundDeadlineSec", 600, why);
    let spread = u64_field(tagging, "spreadSec", 0, why);
    if budget > 60_000 {
        why.push("syncBudgetMs".into());
    }
    if !(1..=86_400).contains(&deadline) {
        why.push("backgroundDeadlineSec".into());
    }
    if spread > 86_400 || spread >= deadline {
        why.push("spreadSec".into());
    }
    tagging
        .get("enabled")
        .and_then(Value::as_bool)
        .unwrap_or(true)
}

/// `imds`: the deadline in range; the endpoint `auto` or an `http://` URL (with a host).
fn imds(imds: &Map<String, Value>, why: &mut Why) {
    let deadline = u64_field(imds, "deadlineMs", 10_000, why);
    if !(1..=120_000).contains(&deadline) {
        why.push("imds.deadlineMs".into());
    }
    if let Some(e) = string(imds, "endpoint") {
        let url = e.strip_prefix("http://").is_some_and(|h| !h.is_empty());
        if e != "auto" && !url {
            why.push(format!("imds.endpoint {e}"));
        }
    }
}

/// `cluster`'s values as the hand-offs get them.
struct Cluster {
    name: String,
    endpoint: Option<String>,
    ca: Option<String>,
    cidr: Option<(String, bool)>,
}

/// `cluster`: required; an EKS name, an endpoint the hand-offs can carry, a canonical base64 CA,
/// a service CIDR (IPv4 or IPv6), containerd. `None`: no cluster.
fn cluster(top: &Map<String, Value>, why: &mut Why) -> Option<Cluster> {
    let Some(cluster) = top.get("cluster").and_then(Value::as_object) else {
        why.push("no cluster".into());
        return None;
    };
    let name = string(cluster, "name").unwrap_or_default();
    if !oracle::cluster_name(&name) {
        why.push(format!("cluster.name {name:?}"));
    }
    let endpoint = string(cluster, "apiServerEndpoint");
    if let Some(e) = endpoint
        .as_ref()
        .filter(|e| !VALID_ENDPOINTS.contains(&e.as_str()))
    {
        why.push(format!("endpoint {e}"));
    }
    let ca = string(cluster, "certificateAuthority");
    if ca.as_ref().is_some_and(|c| !oracle::base64(c)) {
        why.push("certificateAuthority".into());
    }
    let cidr = string(cluster, "cidr").map(|c| {
        let v6 = oracle::cidr(&c);
        if v6.is_none() {
            why.push(format!("cidr {c}"));
        }
        (c, v6.unwrap_or(false))
    });
    if string(cluster, "containerRuntime").is_some_and(|r| r != "containerd") {
        why.push("containerRuntime".into());
    }
    Some(Cluster {
        name,
        endpoint,
        ca,
        cidr,
    })
}

/// The node group's name and its role's preset labels and taints.
struct Group {
    name: Option<String>,
    labels: Vec<(&'static str, &'static str)>,
    taints: Vec<&'static str>,
}

/// `nodeGroup`: optional (every field has a default); a name of 1-200 characters without control
/// characters, a known role. `None`: not an object.
fn node_group(top: &Map<String, Value>, why: &mut Why) -> Option<Group> {
    let no_group = Map::new();
    let ng = match top.get("nodeGroup") {
        None => &no_group,
        Some(v) => match v.as_object() {
            Some(o) => o,
            None => {
                why.push("nodeGroup not an object".into());
                return None;
            }
        },
    };
    let name = string(ng, "name");
    if let Some(g) = &name {
        if g.is_empty() || g.len() > 200 || g.chars().any(char::is_control) {
            why.push(format!("nodeGroup.name {g:?}"));
        }
    }
    let role = string(ng, "role").unwrap_or("none".into());
    let (labels, taints) = match role.as_str() {
        "master" => (
            vec![("node.kubernetes.io/role", "master")],
            vec!["CriticalAddonsOnly=true:NoSchedule"],
        ),
        "scaler" => (vec![("node.kubernetes.io/role", "scaler")], vec![]),
        "none" => (vec![], vec![]),
        r => {
            why.push(format!("role {r}"));
            (vec![], vec![])
        }
    };
    Some(Group {
        name,
        labels,
        taints,
    })
}

/// `labels`: the role's preset, then the config's (null removes one); each a qualified name and
/// label value that kubelet may set on itself.
fn labels(config: &Map<String, Value>, group: &Group, why: &mut Why) -> BTreeMap<String, String> {
    let mut labels: BTreeMap<String, String> = group
        .labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    for (k, v) in config {
        match v.as_str() {
            Some(v) => labels.insert(k.clone(), v.to_string()),
            None => labels.remove(k),
        };
    }
    for (k, v) in &labels {
        if !oracle::qualified_name(k) || !oracle::label_value(v) || !oracle::kubelet_may_set(k) {
            why.push(format!("label {k:?}={v:?}"));
        }
    }
    labels
}

/// `taints`: the config's list replaces the role's; each a taint kubelet registers, no key and
/// effect twice.
fn taints(top: &Map<String, Value>, group: &Group, why: &mut Why) -> Vec<String> {
    let taints: Vec<String> = match top.get("taints") {
        Some(t) => t
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap().to_string())
            .collect(),
        None => group.taints.iter().map(|t| t.to_string()).collect(),
    };
    let mut seen = Vec::new();
    for t in &taints {
        match oracle::taint(t) {
            None => why.push(format!("taint {t:?}")),
            Some((k, _, e)) if seen.contains(&(k.clone(), e.clone())) => {
                why.push(format!("taint {t:?} twice"))
            }
            Some((k, _, e)) => seen.push((k, e)),
        }
    }
    taints
}

/// What `kubelet` asks of the kubelet.
struct Kubelet {
    /// The keys to set in its config, with their values.
    desired: Map<String, Value>,
    grace_nanos: Option<u128>,
    path: String,
    extra_args: Vec<String>,
}

/// `kubelet`: the GC thresholds, the shutdown periods, an absolute config path, the extra
/// arguments bootstrap.sh and systemd carry intact.
fn kubelet(kubelet: &Map<String, Value>, why: &mut Why) -> Kubelet {
    let mut desired = Map::new();
    image_gc(kubelet, &mut desired, why);
    let grace_nanos = shutdown_periods(kubelet, &mut desired, why);
    let path = string(kubelet, "configPath")
        .unwrap_or("/etc/kubernetes/kubelet/kubelet-config.json".into());
    if !path.starts_with('/') || path.contains("/../") {
        why.push("kubelet.configPath".into());
    }
    let extra_args: Vec<String> = kubelet
        .get("extraArgs")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|x| x.as_str().unwrap().to_string()).collect())
        .unwrap_or_default();
    for a in &extra_args {
        if !oracle::kubelet_extra_arg(a) {
            why.push(format!("kubelet.extraArgs {a:?}"));
        }
    }
    Kubelet {
        desired,
        grace_nanos,
        path,
        extra_args,
    }
}

/// The image GC thresholds: percentages, low below high (kubelet's defaults 85 and 80 standing
/// in for the one not given).
fn image_gc(kubelet: &Map<String, Value>, desired: &mut Map<String, Value>, why: &mut Why) {
    let mut percent = |k: &str| -> Option<i64> {
        let v = kubelet.get(k)?;
        match v.as_i64() {
            None => {
                why.push(format!("{k} {v} is no i64"));
                None
            }
            Some(p) if !(0..=100).contains(&p) => {
                why.push(format!("{k} {p}"));
                None
            }
            Some(p) => Some(p),
        }
    };
    let high = percent("imageGCHighThresholdPercent");
    let low = percent("imageGCLowThresholdPercent");
    if (high.is_some() || low.is_some()) && low.unwrap_or(80) >= high.unwrap_or(85) {
        why.push("low not below high".into());
    }
    if let Some(h) = high {
        desired.insert("imageGCHighThresholdPercent".into(), json!(h));
    }
    if let Some(l) = low {
        desired.insert("imageGCLowThresholdPercent".into(), json!(l));
    }
}

/// The shutdown grace periods: Go durations, not negative, the critical-pod one only with and
/// within the grace period. The grace period in nanoseconds.
fn shutdown_periods(
    kubelet: &Map<String, Value>,
    desired: &mut Map<String, Value>,
    why: &mut Why,
) -> Option<u128> {
    let mut dur = |k: &str| -> Option<(String, u128)> {
        let text = kubelet.get(k)?.as_str()?.to_string();
        match oracle::go_duration(&text) {
            Some(g) if g.accepted() && !(g.neg && g.nanos > 0) && g.slack == 0 => {
                Some((text, g.nanos))
            }
            Some(g) if g.slack > 0 => {
                why.push(format!(
                    "{k} {text:?}: fraction below a nanosecond (not generated)"
                ));
                None
            }
            _ => {
                why.push(format!("{k} {text:?}"));
                None
            }
        }
    };
    let grace = dur("shutdownGracePeriod");
    let critical = dur("shutdownGracePeriodCriticalPods");
    if let (Some((_, g)), Some((_, c))) = (&grace, &critical) {
        if c > g {
            why.push("critical longer than grace".into());
        }
    }
    if critical.is_some() && !kubelet.contains_key("shutdownGracePeriod") {
        why.push("critical without grace".into());
    }
    if let Some((t, _)) = &grace {
        desired.insert("shutdownGracePeriod".into(), json!(t));
    }
    if let Some((t, _)) = &critical {
        desired.insert("shutdownGracePeriodCriticalPods".into(), json!(t));
    }
    grace.map(|(_, n)| n)
}

/// `logind`: the delay covers the grace period, at most a day; without one, the grace period
/// rounded up to a second. `None`: no drop-in.
fn logind(logind: &Map<String, Value>, grace_nanos: Option<u128>, why: &mut Why) -> Option<u64> {
    let grace_secs = grace_nanos.map(|n| n.div_ceil(1_000_000_000) as u64);
    let given = logind.get("inhibitDelayMaxSec").and_then(|v| {
        let d = v.as_u64();
        if d.is_none() {
            why.push(format!("inhibitDelayMaxSec {v} is no u64"));
        }
        d
    });
    if let Some(d) = given {
        if d > 86_400 {
            why.push("inhibitDelayMaxSec over a day".into());
        }
        if grace_secs.is_some_and(|g| d < g) {
            why.push("inhibitDelayMaxSec below the grace period".into());
        }
    }
    if grace_secs.is_some_and(|g| g > 86_400) {
        why.push("grace over a day".into());
    }
    given.or(grace_secs).filter(|s| *s > 0)
}

/// `handoff` as the oracles read it.
struct Handoff {
    mode: String,
    bootstrap_path: String,
    nodeadm_path: String,
    /// `extraBootstrapArgs` as bootstrap.sh reads them: (option, value).
    extra_bootstrap: Vec<(String, String)>,
}

/// `handoff`: a known mode, absolute paths, extra arguments bootstrap.sh reads as meant.
fn handoff(handoff: &Map<String, Value>, why: &mut Why) -> Handoff {
    let mode = string(handoff, "mode").unwrap_or("auto".into());
    if !["auto", "al2", "al2023"].contains(&mode.as_str()) {
        why.push(format!("mode {mode:?}"));
    }
    let bootstrap_path = string(handoff, "bootstrapPath").unwrap_or("/etc/eks/bootstrap.sh".into());
    let nodeadm_path = string(handoff, "nodeadmPath").unwrap_or("/usr/bin/nodeadm".into());
    for p in [&bootstrap_path, &nodeadm_path] {
        if !p.starts_with('/') || p.contains("/../") {
            why.push(format!("path {p}"));
        }
    }
    let words: Vec<String> = handoff
        .get("extraBootstrapArgs")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|x| x.as_str().unwrap().to_string()).collect())
        .unwrap_or_default();
    Handoff {
        mode,
        bootstrap_path,
        nodeadm_path,
        extra_bootstrap: extra_bootstrap_args(&words, why),
    }
}

/// bootstrap.sh's loop over `extraBootstrapArgs`: each word an option the agent does not set,
/// then its value, which is no option; no option twice; no control characters; no
/// `--flag=value` anywhere.
fn extra_bootstrap_args(words: &[String], why: &mut Why) -> Vec<(String, String)> {
    let is_option = |w: &str| NEWEST_OPTIONS.contains(&w) || w == "-h" || w == "--help";
    let mut pairs = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        if !NEWEST_OPTIONS.contains(&w.as_str()) || FLAGS_OWNED.contains(&w.as_str()) {
            why.push(format!("extraBootstrapArgs word {w:?}"));
            i += 1;
            continue;
        }
        match words.get(i + 1) {
            Some(v) if !is_option(v) => pairs.push((w.clone(), v.clone())),
            _ => why.push(format!("extraBootstrapArgs {w} without a value")),
        }
        i += 2;
    }
    for w in words {
        if w.chars().any(|c| c.is_control() || oracle::unsplittable(c))
            || (w.starts_with("--") && w.contains('='))
        {
            why.push(format!("extraBootstrapArgs {w:?}"));
        }
    }
    let mut opts: Vec<&str> = pairs.iter().map(|(o, _)| o.as_str()).collect();
    opts.sort();
    if opts.windows(2).any(|w| w[0] == w[1]) {
        why.push("extraBootstrapArgs option twice".into());
    }
    pairs
}

/// The node's family as the mode and the root's hand-off programs say: `Some(true)` AL2,
/// `Some(false)` AL2023, `None` neither.
fn family(handoff: &Handoff, root: &Root, why: &mut Why) -> Option<bool> {
    let bootstrap_here = root.al2 && handoff.bootstrap_path == "/etc/eks/bootstrap.sh";
    let nodeadm_here = !root.al2 && handoff.nodeadm_path == "/usr/bin/nodeadm";
    match handoff.mode.as_str() {
        "al2" if bootstrap_here => Some(true),
        "al2023" => Some(false),
        "auto" if nodeadm_here => Some(false),
        "auto" if bootstrap_here => Some(true),
        _ => {
            why.push("no family".into());
            None
        }
    }
}

/// The values `protectKernelDefaults` requires (kubelet refuses to start otherwise).
const PROTECTED: [(&str, &str); 6] = [
    ("vm.overcommit_memory", "1"),
    ("vm.panic_on_oom", "0"),
    ("kernel.panic", "10"),
    ("kernel.panic_on_oops", "1"),
    ("kernel.keys.root_maxkeys", "1000000"),
    ("kernel.keys.root_maxbytes", "25000000"),
];

/// `sysctls`: keys of the root's /proc/sys, values without control characters (whitespace
/// runs read as one space), none against `protectKernelDefaults` when it is on. The persisted
/// values, and those that differ from the live ones.
fn sysctls(
    config: &Map<String, Value>,
    root: &Root,
    protected: bool,
    why: &mut Why,
) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let (mut persisted, mut live_changes) = (BTreeMap::new(), BTreeMap::new());
    for (k, v) in config {
        let text = match v {
            Value::String(s) => s.clone(),
            Value::Number(n) if n.is_i64() => n.to_string(),
            _ => {
                why.push(format!("sysctl {k} value {v} is neither string nor i64"));
                continue;
            }
        };
        let key_ok = !k.is_empty()
            && k.split('.').all(|c| {
                !c.is_empty()
                    && c.chars()
                        .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-')
            });
        let file = root.path().join("proc/sys").join(k.replace('.', "/"));
        if !key_ok || !file.is_file() {
            why.push(format!("sysctl key {k:?}"));
            continue;
        }
        if text.trim().is_empty() || text.chars().any(|c| c.is_control() && c != '\t') {
            why.push(format!("sysctl {k} value {text:?}"));
            continue;
        }
        let value = text.split_ascii_whitespace().collect::<Vec<_>>().join(" ");
        if protected && PROTECTED.iter().any(|(pk, pv)| pk == k && *pv != value) {
            why.push(format!("sysctl {k}={value} against protectKernelDefaults"));
            continue;
        }
        let live = std::fs::read_to_string(&file).unwrap();
        if live.split_ascii_whitespace().collect::<Vec<_>>().join(" ") != value {
            live_changes.insert(k.clone(), value.clone());
        }
        persisted.insert(k.clone(), value);
    }
    (persisted, live_changes)
}

/// The Name tag when tagging is on: `<group or the ASG's name>-<IPv4 with x for dots>`; EC2
/// refuses `aws:` and more than 256 characters.
fn name_tag(enabled: bool, group: &Group, why: &mut Why) -> Option<String> {
    let tag = enabled.then(|| {
        format!(
            "{}-10x0x12x34",
            group
                .name
                .clone()
                .unwrap_or("eks-scaler-20261122-abcd".into())
        )
    });
    if tag
        .as_ref()
        .is_some_and(|t| t.to_ascii_lowercase().starts_with("aws:") || t.len() > 256)
    {
        why.push("Name tag".into());
    }
    tag
}
