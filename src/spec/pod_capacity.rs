//! `kubelet.maxPods` and `kubelet.kubeReserved`: checked field by field, each problem named.
//! kubelet's `--max-pods` is an int32; kube-reserved takes kubelet's four resources as
//! non-negative Kubernetes quantities (its `parseResourceList`).

use serde_json::Value;

use crate::base::findings::Findings;
use crate::base::k8s::check_quantity;
use crate::base::podcap::{Ceiling, Cni, Mode, KUBELET_MAX};
use crate::base::text::printable;

/// How the kubelet's max pods is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxPodsSpec {
    /// Taken as is.
    Fixed(u64),
    /// Computed from the instance type in this CNI mode.
    Computed(Mode),
}

/// How kube-reserved is set.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ReservedSpec {
    /// From the max pods the agent sets (without `maxPods`: the family's own, unchanged).
    #[default]
    Auto,
    /// These quantities, by resource name, sorted.
    Explicit(Vec<(String, String)>),
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodCapacitySpec {
    pub max_pods: Option<MaxPodsSpec>,
    pub reserved: ReservedSpec,
}

impl PodCapacitySpec {
    /// Whether the agent sets anything (else every family keeps its own values).
    pub fn is_set(&self) -> bool {
        self.max_pods.is_some() || self.reserved != ReservedSpec::Auto
    }
}

/// The resources kubelet reserves for itself.
pub const RESOURCES: [&str; 4] = ["cpu", "ephemeral-storage", "memory", "pid"];

pub fn spec(
    max_pods: Option<&Value>,
    reserved: Option<&Value>,
    extra_args: &[String],
    f: &mut Findings,
) -> PodCapacitySpec {
    let s = PodCapacitySpec {
        max_pods: max_pods.and_then(|v| max_pods_spec(v, f)),
        reserved: reserved.map_or(ReservedSpec::Auto, |v| reserved_spec(v, f)),
    };
    let flag_of = super::is_flag;
    for (i, a) in extra_args.iter().enumerate() {
        let sets = if flag_of(a, "--max-pods") && max_pods.is_some() {
            "kubelet.maxPods"
        } else if flag_of(a, "--kube-reserved") && (max_pods.is_some() || reserved.is_some()) {
            "kubelet.kubeReserved"
        } else {
            continue;
        };
        f.push(format!("kubelet.extraArgs[{i}]"), format!(
            "`{}` sets what {sets} sets: kubelet would take one of them silently; remove it from kubelet.extraArgs",
            printable(a)
        ));
    }
    s
}

fn max_pods_spec(v: &Value, f: &mut Findings) -> Option<MaxPodsSpec> {
    const FIELD: &str = "kubelet.maxPods";
    match v {
        Value::Object(o) => {
            let before = f.0.len();
            for k in o.keys() {
                if !["cni", "customNetworking", "maxENIs", "ceiling"].contains(&k.as_str()) {
                    f.push(
                        format!("{FIELD}.{}", printable(k)),
                        "unknown field; the fields are cni, customNetworking, maxENIs and ceiling",
                    );
                }
            }
            let mode = Mode {
                cni: cni(o.get("cni"), f),
                custom_networking: match o.get("customNetworking") {
                    None | Some(Value::Null) => false,
                    Some(Value::Bool(b)) => *b,
                    Some(_) => {
                        f.push(format!("{FIELD}.customNetworking"), "must be true or false");
                        false
                    }
                },
                max_enis: o
                    .get("maxENIs")
                    .filter(|v| !v.is_null())
                    .and_then(|v| count(v, &format!("{FIELD}.maxENIs"), u64::from(u32::MAX), f)),
                ceiling: ceiling(o.get("ceiling"), f),
            };
            ipv6_alone(&mode, f);
            (f.0.len() == before).then_some(MaxPodsSpec::Computed(mode))
        }
        v => count(v, FIELD, KUBELET_MAX, f).map(MaxPodsSpec::Fixed),
    }
}

/// The CNI's IPv6 mode takes no custom networking (its config check refuses it) and adds no
/// ENIs, so `maxENIs` would mean nothing.
fn ipv6_alone(mode: &Mode, f: &mut Findings) {
    if mode.cni != Cni::Ipv6 {
        return;
    }
    if mode.custom_networking {
        f.push("kubelet.maxPods.customNetworking", "the VPC CNI refuses custom networking in IPv6 mode (\"IPv6 is supported only in Prefix Delegation mode\" without custom networking): remove it, or use an IPv4 mode");
    }
    if mode.max_enis.is_some() {
        f.push("kubelet.maxPods.maxENIs", "in IPv6 mode the VPC CNI attaches no ENIs for pods (one /80 prefix on the primary ENI serves them all): remove it");
    }
}

/// A whole number from 1 to `max`.
fn count(v: &Value, field: &str, max: u64, f: &mut Findings) -> Option<u64> {
    match v.as_u64() {
        Some(n) if (1..=max).contains(&n) => Some(n),
        _ => {
            let shown = crate::base::text::json(v);
            let what = if field == "kubelet.maxPods" {
                " (a number, or an object saying how to compute it)"
            } else {
                ""
            };
            f.push(
                field,
                format!("{shown} is not a whole number from 1 to {max}{what}"),
            );
            None
        }
    }
}

fn cni(v: Option<&Value>, f: &mut Findings) -> Cni {
    match (v, v.and_then(Value::as_str)) {
        (None | Some(Value::Null), _) => Cni::SecondaryIps,
        (_, Some("secondaryIPs")) => Cni::SecondaryIps,
        (_, Some("prefixDelegation")) => Cni::PrefixDelegation,
        (_, Some("ipv6")) => Cni::Ipv6,
        _ => {
            let shown = v.map(crate::base::text::json).unwrap_or_default();
            f.push(
                "kubelet.maxPods.cni",
                format!("{shown} is not a CNI mode; use \"secondaryIPs\", \"prefixDelegation\" or \"ipv6\""),
            );
            Cni::SecondaryIps
        }
    }
}

fn ceiling(v: Option<&Value>, f: &mut Findings) -> Ceiling {
    match v {
        None | Some(Value::Null) => Ceiling::Recommended,
        Some(Value::String(s)) if s == "recommended" => Ceiling::Recommended,
        Some(Value::String(s)) if s == "none" => Ceiling::None,
        Some(n @ Value::Number(_)) => count(n, "kubelet.maxPods.ceiling", KUBELET_MAX, f)
            .map_or(Ceiling::Recommended, Ceiling::Fixed),
        Some(other) => {
            f.push(
                "kubelet.maxPods.ceiling",
                format!(
                    "{} is not a ceiling; use \"recommended\", \"none\" or a number",
                    crate::base::text::json(other)
                ),
            );
            Ceiling::Recommended
        }
    }
}

fn reserved_spec(v: &Value, f: &mut Findings) -> ReservedSpec {
    const FIELD: &str = "kubelet.kubeReserved";
    let Value::Object(o) = v else {
        if v.as_str() != Some("auto") {
            f.push(
                FIELD,
                format!(
                    "{} is neither \"auto\" nor an object of quantities",
                    crate::base::text::json(v)
                ),
            );
        }
        return ReservedSpec::Auto;
    };
    let mut out = Vec::new();
    for (k, q) in o {
        let field = format!("{FIELD}.{}", printable(k));
        if !RESOURCES.contains(&k.as_str()) {
            f.push(
                field,
                format!(
                    "kubelet cannot reserve this resource; use {}",
                    RESOURCES.join(", ")
                ),
            );
            continue;
        }
        let text = match q {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            _ => {
                f.push(field, "must be a quantity such as \"100m\" or \"1Gi\"");
                continue;
            }
        };
        match check_quantity(&text) {
            Ok(()) => out.push((k.clone(), text)),
            Err(e) => f.push(field, e),
        }
    }
    if o.is_empty() {
        f.push(FIELD, "is empty; give at least one quantity, or \"auto\"");
    }
    ReservedSpec::Explicit(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(
        max_pods: Option<Value>,
        reserved: Option<Value>,
        args: &[&str],
    ) -> (PodCapacitySpec, Vec<String>) {
        let mut f = Findings::default();
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let s = spec(max_pods.as_ref(), reserved.as_ref(), &args, &mut f);
        (s, f.0.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn a_number_or_an_object_with_defaults() {
        assert_eq!(
            run(Some(json!(110)), None, &[]).0.max_pods,
            Some(MaxPodsSpec::Fixed(110))
        );
        let (s, f) = run(Some(json!({})), None, &[]);
        assert!(f.is_empty());
        assert_eq!(s.max_pods, Some(MaxPodsSpec::Computed(Mode::default())));
        let (s, _) = run(
            Some(
                json!({"cni": "prefixDelegation", "customNetworking": true, "maxENIs": 2, "ceiling": "none"}),
            ),
            None,
            &[],
        );
        assert_eq!(
            s.max_pods,
            Some(MaxPodsSpec::Computed(Mode {
                cni: Cni::PrefixDelegation,
                custom_networking: true,
                max_enis: Some(2),
                ceiling: Ceiling::None,
            }))
        );
    }

    #[test]
    fn bad_values_are_named() {
        for (v, field) in [
            (json!(0), "kubelet.maxPods:"),
            (json!(-1), "kubelet.maxPods:"),
            (json!(2_147_483_648u64), "kubelet.maxPods:"),
            (json!(1.5), "kubelet.maxPods:"),
            (json!({"cni": "calico"}), "kubelet.maxPods.cni:"),
            (json!({"ceiling": 0}), "kubelet.maxPods.ceiling:"),
            (json!({"ceiling": "max"}), "kubelet.maxPods.ceiling:"),
            (json!({"maxENIs": 0}), "kubelet.maxPods.maxENIs:"),
            (
                json!({"customNetworking": "yes"}),
                "kubelet.maxPods.customNetworking:",
            ),
            (json!({"enis": 2}), "kubelet.maxPods.enis:"),
            // The CNI's IPv6 mode refuses custom networking and adds no ENIs.
            (
                json!({"cni": "ipv6", "customNetworking": true}),
                "kubelet.maxPods.customNetworking: the VPC CNI refuses",
            ),
            (
                json!({"cni": "ipv6", "maxENIs": 2}),
                "kubelet.maxPods.maxENIs: in IPv6 mode",
            ),
        ] {
            let (s, f) = run(Some(v.clone()), None, &[]);
            assert_eq!(s.max_pods, None, "{v}");
            assert!(f.len() == 1 && f[0].starts_with(field), "{v}: {f:?}");
        }
    }

    #[test]
    fn kube_reserved_takes_quantities_of_resources_kubelet_reserves() {
        let (s, f) = run(
            None,
            Some(json!({"memory": "1Gi", "cpu": "x", "gpu": "1"})),
            &[],
        );
        assert_eq!(
            s.reserved,
            ReservedSpec::Explicit(vec![("memory".into(), "1Gi".into())])
        );
        assert_eq!(f.len(), 2, "{f:?}");
        assert!(run(None, Some(json!("manual")), &[]).1[0].starts_with("kubelet.kubeReserved:"));
    }

    #[test]
    fn a_flag_beside_its_setting_is_a_finding() {
        let (_, f) = run(
            Some(json!(50)),
            None,
            &["--v=2", "--max-pods=60", "--kube-reserved=cpu=1"],
        );
        assert_eq!(f.len(), 2, "{f:?}");
        assert!(f[0].starts_with("kubelet.extraArgs[1]:"));
        assert!(run(None, None, &["--max-pods=60"]).1.is_empty());
    }
}
