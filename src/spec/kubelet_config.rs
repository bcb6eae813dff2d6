//! `kubelet.config`: KubeletConfiguration keys the agent passes to the kubelet as given (AL2023:
//! the NodeConfig's `kubelet.config`, which the kubelet merges over nodeadm's; AL2: the kubelet
//! config file, or a kubelet flag where bootstrap.sh rewrites the key on every run). Judged by
//! the kubelet's own rules the agent has: the field must be one of the kubelet's
//! ([`crate::base::kubelet_fields`]: a name it does not know it ignores without a word), its
//! value of the JSON kind the kubelet decodes (else the kubelet does not start), a duration one
//! Go reads, a reservation a quantity. A key the agent sets from another field is refused with
//! that field.

use serde_json::{Map, Value};

use crate::base::duration;
use crate::base::findings::Findings;
use crate::base::k8s::milli_value;
use crate::base::kubelet_fields::{self, Kind};
use crate::base::text::printable;

/// Keys the agent sets itself, and the field that sets them (or who does).
pub const OWNED: &[(&str, &str)] = &[
    ("kind", "the hand-off"),
    ("apiVersion", "the hand-off"),
    (
        "imageGCHighThresholdPercent",
        "kubelet.imageGCHighThresholdPercent",
    ),
    (
        "imageGCLowThresholdPercent",
        "kubelet.imageGCLowThresholdPercent",
    ),
    ("shutdownGracePeriod", "kubelet.shutdownGracePeriod"),
    (
        "shutdownGracePeriodCriticalPods",
        "kubelet.shutdownGracePeriodCriticalPods",
    ),
    ("maxPods", "kubelet.maxPods"),
    ("kubeReserved", "kubelet.kubeReserved"),
    ("cpuManagerPolicy", "kubelet.cpuManager"),
    ("cpuManagerPolicyOptions", "kubelet.cpuManager"),
    ("reservedSystemCPUs", "kubelet.cpuManager"),
    ("kubeReservedCgroup", "kubelet.cpuManager"),
    ("systemReservedCgroup", "kubelet.cpuManager"),
    ("memoryManagerPolicy", "kubelet.memoryManager"),
    ("reservedMemory", "kubelet.memoryManager"),
    ("serializeImagePulls", "images.pull"),
    ("maxParallelImagePulls", "images.pull"),
    ("registryPullQPS", "images.pull"),
    ("registryBurst", "images.pull"),
    ("registerWithTaints", "taints"),
    ("failSwapOn", "host.swap"),
    ("memorySwap", "host.swap"),
    (
        "providerID",
        "the hand-off (nodeadm or bootstrap.sh names the instance)",
    ),
    (
        "cgroupDriver",
        "the hand-off (nodeadm and bootstrap.sh set systemd)",
    ),
];

/// Reservation maps whose values the kubelet reads as quantities, and (`evictionHard`,
/// `evictionSoft`) thresholds that may be a percentage.
const QUANTITY_MAPS: [(&str, bool); 3] = [
    ("systemReserved", false),
    ("evictionHard", true),
    ("evictionSoft", true),
];

/// The keys that pass every check, in the config's order, named by the kubelet's own field.
pub fn spec(config: &Map<String, Value>, f: &mut Findings) -> Vec<(&'static str, Value)> {
    let mut out = Vec::new();
    for (key, value) in config {
        let field = format!("kubelet.config.{}", printable(key));
        if let Some((_, by)) = OWNED.iter().find(|(k, _)| k == key) {
            let why = match by.strip_prefix("the hand-off") {
                Some(who) => format!("the hand-off sets it{who}: leave it out"),
                None => format!("the agent sets it from {by}: set it there"),
            };
            f.push(field, why);
            continue;
        }
        let Some((name, kind)) = kubelet_fields::field(key) else {
            let hint = match kubelet_fields::near(key) {
                Some(n) => format!(" (its names are case-sensitive: `{n}`?)"),
                None => String::new(),
            };
            f.push(field, format!("the kubelet has no such field{hint} and would ignore it without a word; names are those of KubeletConfiguration (kubelet.config.k8s.io/v1beta1)"));
            continue;
        };
        match check(name, kind, value) {
            Ok(()) => out.push((name, value.clone())),
            Err(why) => f.push(field, why),
        }
    }
    out
}

/// The value by the kubelet's decoding of `name` (of `kind`).
fn check(name: &str, kind: Kind, v: &Value) -> Result<(), String> {
    let fits = match kind {
        Kind::Bool => v.is_boolean(),
        Kind::Integer => v.is_i64() || v.is_u64(),
        Kind::Number => v.is_number(),
        Kind::String | Kind::Duration => v.is_string(),
        Kind::Array => v.is_array(),
        Kind::Object => v.is_object(),
    };
    if !fits {
        return Err(format!(
            "is {}, but the kubelet reads {} there and would not start",
            json_kind(v),
            kind.as_str()
        ));
    }
    if let (Kind::Duration, Some(s)) = (kind, v.as_str()) {
        duration::parse(s).map_err(|e| e.to_string())?;
    }
    if let Some((_, percent)) = QUANTITY_MAPS.iter().find(|(n, _)| *n == name) {
        for (k, q) in v.as_object().into_iter().flatten() {
            let ok = q
                .as_str()
                .is_some_and(|s| milli_value(s).is_some() || (*percent && percentage(s)));
            if !ok {
                return Err(format!(
                    "its `{}` is not a quantity{} the kubelet reads (`100Mi`, `500m`{})",
                    printable(k),
                    if *percent { " or a percentage" } else { "" },
                    if *percent { ", `10%`" } else { "" }
                ));
            }
        }
    }
    Ok(())
}

/// `10%`, `2.5%`: a percentage the kubelet's eviction thresholds take.
fn percentage(s: &str) -> bool {
    s.strip_suffix('%')
        .and_then(|p| p.parse::<f64>().ok())
        .is_some_and(|p| (0.0..=100.0).contains(&p))
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a fractional number",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn findings(config: Value) -> (Vec<&'static str>, Vec<String>) {
        let mut f = Findings::default();
        let passed = spec(config.as_object().unwrap(), &mut f);
        let keys = passed.iter().map(|(k, _)| *k).collect();
        (keys, f.0.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn the_kubelets_own_fields_pass_as_given() {
        let (keys, f) = findings(json!({
            "podPidsLimit": 4096, "evictionHard": {"memory.available": "200Mi", "nodefs.available": "10%"},
            "clusterDNS": ["169.254.20.10"], "systemReserved": {"cpu": "100m", "memory": "256Mi"},
            "containerLogMaxSize": "50Mi", "allowedUnsafeSysctls": ["net.core.somaxconn"],
            "evictionPressureTransitionPeriod": "1m30s", "protectKernelDefaults": true
        }));
        assert!(f.is_empty(), "{f:?}");
        assert_eq!(keys.len(), 8);
    }

    #[test]
    fn a_key_the_agent_owns_a_field_the_kubelet_lacks_or_a_value_it_cannot_read_is_refused() {
        let (keys, f) = findings(json!({
            "maxPods": 50, "podPIDsLimit": 1, "podPidsLimit": "4096",
            "evictionPressureTransitionPeriod": "90", "evictionHard": {"memory.available": "lots"},
            "kind": "KubeletConfiguration", "imageMinimumGCAge": 5
        }));
        assert!(keys.is_empty(), "{keys:?}");
        assert_eq!(
            f,
            [
                "kubelet.config.maxPods: the agent sets it from kubelet.maxPods: set it there",
                "kubelet.config.podPIDsLimit: the kubelet has no such field (its names are case-sensitive: `podPidsLimit`?) and would ignore it without a word; names are those of KubeletConfiguration (kubelet.config.k8s.io/v1beta1)",
                "kubelet.config.podPidsLimit: is a string, but the kubelet reads an integer there and would not start",
                "kubelet.config.evictionPressureTransitionPeriod: `90` is not a Kubernetes duration (missing unit); write it like \"90s\" or \"1m30s\"",
                "kubelet.config.evictionHard: its `memory.available` is not a quantity or a percentage the kubelet reads (`100Mi`, `500m`, `10%`)",
                "kubelet.config.kind: the hand-off sets it: leave it out",
                "kubelet.config.imageMinimumGCAge: is an integer, but the kubelet reads a Go duration string there and would not start",
            ]
        );
    }
}
