//! Max pods and kube-reserved (`kubelet.maxPods`, `kubelet.kubeReserved`): the max pods from
//! the instance type in the configured CNI mode (or as given), and kube-reserved derived from
//! that effective max pods as bootstrap.sh derives it — with where each number came from.

use serde_json::Value;

use crate::base::findings::Findings;
use crate::base::node::{self, Hypervisor};
use crate::base::podcap::{self, Ceiling, Cni, Mode, TypeFact};
use crate::base::text::printable;
use crate::facts::{Facts, Reads};
use crate::spec::pod_capacity::{MaxPodsSpec, ReservedSpec};
use crate::spec::Spec;

use crate::plan::kubelet::{Derived, KubeletIntent, Section, EVICTION_HARD_MEMORY_MIB};

/// Where the plan shows max pods and kube-reserved.
const SECTION: Section = Section {
    title: "pod capacity",
    key: "podCapacity",
};

/// The node files the numbers need, when the config sets either.
pub(super) fn reads(spec: &Spec, r: &mut Reads) {
    if spec.kubelet.pod_capacity.is_set() {
        for p in [
            node::CPU_ONLINE,
            node::SYS_VENDOR,
            node::HYPERVISOR_TYPE,
            node::MEMINFO,
        ] {
            r.file(p);
        }
    }
}

pub(super) fn contribute(spec: &Spec, facts: &Facts, k: &mut KubeletIntent, f: &mut Findings) {
    let pc = &spec.kubelet.pod_capacity;
    // Without an instance (`validate`) there is nothing to compute for.
    let Some(md) = facts.instance.as_ref().filter(|_| pc.is_set()) else {
        return;
    };
    let n = Node::of(facts, &md.instance_type);
    let before = f.0.len();
    let max = pc.max_pods.and_then(|m| max_pods(m, &n, k, f));
    if f.0.len() > before {
        return;
    }
    let reserved = match (&pc.reserved, &max) {
        (ReservedSpec::Explicit(q), _) => Some(Derived::new(
            SECTION,
            "kubeReserved",
            object(q.iter().map(|(k, v)| (k.as_str(), v.clone()))),
            "kubelet.kubeReserved".into(),
        )),
        (ReservedSpec::Auto, Some(m)) => auto_reserved(m.value.as_u64().unwrap_or(0), &n, k, f),
        (ReservedSpec::Auto, None) => None,
    };
    user_data_sets_too(facts, max.is_some(), reserved.is_some(), f);
    for d in [max, reserved].into_iter().flatten() {
        k.derive(d);
    }
}

/// On AL2023, the user data's NodeConfig setting what the agent sets: nodeadm would merge both
/// and one would win silently.
fn user_data_sets_too(facts: &Facts, max: bool, reserved: bool, f: &mut Findings) {
    let Some(nc) = &facts.node_configs else {
        return;
    };
    for (key, at) in &nc.pod_capacity {
        let field = match *key {
            "maxPods" if max => "kubelet.maxPods",
            "kubeReserved" if reserved => "kubelet.kubeReserved",
            _ => continue,
        };
        f.push(field, format!(
            "a NodeConfig nodeadm merges sets it too ({at}): nodeadm would keep one of them silently; set it in one place"
        ));
    }
}

/// What the node says, read once for this contributor.
struct Node<'a> {
    instance_type: &'a str,
    type_info: Option<&'a TypeFact>,
    vcpus: Result<u64, String>,
    hypervisor: Option<Hypervisor>,
    mem_kib: Option<u64>,
}

impl<'a> Node<'a> {
    fn of(facts: &'a Facts, instance_type: &'a str) -> Node<'a> {
        let text = |p: &str| {
            facts
                .file_text(p)
                .and_then(|t| t.ok_or_else(|| format!("{p} does not exist")))
        };
        Node {
            instance_type,
            type_info: facts.type_info.as_ref(),
            vcpus: text(node::CPU_ONLINE).and_then(|t| {
                node::count_cpus(&t).map_err(|e| format!("{}: {e}", node::CPU_ONLINE))
            }),
            hypervisor: Hypervisor::detect(
                text(node::SYS_VENDOR).ok().as_deref(),
                text(node::HYPERVISOR_TYPE).ok().as_deref(),
            ),
            mem_kib: text(node::MEMINFO)
                .ok()
                .and_then(|t| node::mem_total_kib(&t)),
        }
    }

    fn vcpus(&self, field: &str, f: &mut Findings) -> Option<u64> {
        match &self.vcpus {
            Ok(n) => Some(*n),
            Err(e) => {
                f.push(
                    field,
                    format!("cannot count the node's vCPUs ({e}); the number depends on them"),
                );
                None
            }
        }
    }

    fn shown_type(&self) -> String {
        printable(self.instance_type)
    }
}

fn max_pods(m: MaxPodsSpec, n: &Node, k: &mut KubeletIntent, f: &mut Findings) -> Option<Derived> {
    match m {
        MaxPodsSpec::Fixed(v) => {
            if let Some(TypeFact::Known { info, .. }) = n.type_info {
                warn_unaddressable(v, *info, n, k);
            }
            Some(Derived::new(
                SECTION,
                "maxPods",
                v.into(),
                "kubelet.maxPods".into(),
            ))
        }
        MaxPodsSpec::Computed(mode) => computed(mode, n, f),
    }
}

fn computed(mode: Mode, n: &Node, f: &mut Findings) -> Option<Derived> {
    const FIELD: &str = "kubelet.maxPods";
    let (info, source) = match n.type_info {
        Some(TypeFact::Known { info, source }) => (*info, *source),
        Some(TypeFact::Unknown(why)) => {
            f.push(FIELD, why.clone());
            return None;
        }
        None => {
            f.push(
                FIELD,
                format!("the ENIs of {} were not looked up", n.shown_type()),
            );
            return None;
        }
    };
    let nitro = match (mode.cni, n.hypervisor) {
        (Cni::PrefixDelegation, Some(Hypervisor::Xen)) => {
            f.push("kubelet.maxPods.cni", format!(
                "prefix delegation needs a Nitro instance and {} runs on Xen ({} reads xen): the VPC CNI would give secondary IPs; use \"secondaryIPs\" or a Nitro type",
                n.shown_type(), node::HYPERVISOR_TYPE
            ));
            return None;
        }
        (Cni::PrefixDelegation, None) => {
            f.push("kubelet.maxPods.cni", format!(
                "prefix delegation needs a Nitro instance and the node does not say it is one ({} does not read `Amazon EC2`)",
                node::SYS_VENDOR
            ));
            return None;
        }
        (Cni::Ipv6, h) if h != Some(Hypervisor::Nitro) => {
            f.push("kubelet.maxPods.cni", format!(
                "the VPC CNI's IPv6 mode needs a Nitro instance (it runs only with prefix delegation) and {} is not one here ({} and {}): use a Nitro type",
                n.shown_type(), node::SYS_VENDOR, node::HYPERVISOR_TYPE
            ));
            return None;
        }
        (_, h) => h == Some(Hypervisor::Nitro),
    };
    let vcpus = match mode.ceiling {
        Ceiling::Recommended => n.vcpus(FIELD, f)?,
        _ => 0,
    };
    let p = podcap::max_pods(info, mode, vcpus, nitro);
    if p.value > podcap::KUBELET_MAX {
        f.push(
            FIELD,
            format!(
                "{} gives {p}: more than kubelet's --max-pods takes ({}); set a ceiling",
                n.shown_type(),
                podcap::KUBELET_MAX
            ),
        );
        return None;
    }
    let mut from = format!(
        "{} ({}), {}: {p}",
        n.shown_type(),
        source.name(),
        p.cni.name()
    );
    if mode.custom_networking {
        from.push_str("; custom networking leaves the primary ENI out");
    }
    Some(Derived::new(SECTION, "maxPods", p.value.into(), from))
}

/// A fixed max pods above what the CNI can address on this type: pods past it never start.
fn warn_unaddressable(v: u64, info: podcap::TypeInfo, n: &Node, k: &mut KubeletIntent) {
    let uncapped = |cni| Mode {
        cni,
        ceiling: Ceiling::None,
        ..Mode::default()
    };
    let secondary = podcap::max_pods(info, uncapped(Cni::SecondaryIps), 0, false);
    if v <= secondary.addresses {
        return;
    }
    let nitro = n.hypervisor == Some(Hypervisor::Nitro);
    let pd = podcap::max_pods(info, uncapped(Cni::PrefixDelegation), 0, nitro).addresses;
    let tail = if v <= pd {
        format!("unless the VPC CNI's prefix delegation is on (up to {pd})")
    } else {
        format!("and prefix delegation gives at most {pd}")
    };
    k.warnings.push(format!(
        "kubelet.maxPods {v} is more than the {} pod addresses secondary IPs give on {} ({secondary}) {tail}: pods past that stay in ContainerCreating",
        secondary.addresses, n.shown_type()
    ));
}

fn auto_reserved(max: u64, n: &Node, k: &mut KubeletIntent, f: &mut Findings) -> Option<Derived> {
    let vcpus = n.vcpus("kubelet.kubeReserved", f)?;
    let r = podcap::reserved(max, vcpus);
    if let Some(kib) = n.mem_kib {
        let total_mi = kib / 1024;
        let allocatable = total_mi.saturating_sub(r.memory_mi + EVICTION_HARD_MEMORY_MIB);
        if allocatable.saturating_mul(4) < total_mi {
            k.warnings.push(format!(
                "kube-reserved memory {}Mi and the {EVICTION_HARD_MEMORY_MIB}Mi eviction threshold leave {allocatable}Mi of the node's {total_mi}Mi for pods (less than a quarter): lower kubelet.maxPods or use a larger type",
                r.memory_mi
            ));
        }
    }
    Some(Derived::new(
        SECTION,
        "kubeReserved",
        object(r.quantities().into_iter()),
        r.to_string(),
    ))
}

fn object<'a>(q: impl Iterator<Item = (&'a str, String)>) -> Value {
    Value::Object(q.map(|(k, v)| (k.to_string(), Value::String(v))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::podcap::{TypeInfo, TypeSource};
    use crate::facts::{FactsBuilder, Family};
    use crate::instance::metadata::Metadata;

    const MEMINFO_8G: &str = "MemTotal:        7868788 kB\n";

    /// An m6i.large (2 vCPUs, Nitro, 8 GiB) of this family, its numbers from the table.
    fn node(family: Family) -> FactsBuilder {
        Facts::builder(family)
            .instance(Metadata {
                instance_type: "m6i.large".into(),
                ..Metadata::default()
            })
            .file(node::CPU_ONLINE, "0-1\n")
            .file(node::SYS_VENDOR, "Amazon EC2\n")
            .absent([node::HYPERVISOR_TYPE])
            .file(node::MEMINFO, MEMINFO_8G)
            .type_info(TypeFact::Known {
                info: TypeInfo {
                    enis: 3,
                    ipv4_per_eni: 10,
                },
                source: TypeSource::Table,
            })
    }

    fn intent(config: serde_json::Value, facts: &Facts) -> (KubeletIntent, Vec<String>) {
        let mut c = serde_json::json!({"cluster": {"name": "c"}});
        c["kubelet"] = config;
        let spec =
            crate::spec::from_config(&crate::config::parse(&c.to_string(), "t").unwrap()).unwrap();
        let (mut k, mut f) = (KubeletIntent::default(), Findings::default());
        contribute(&spec, facts, &mut k, &mut f);
        (k, f.0.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn computed_max_pods_and_the_reservation_derived_from_it() {
        let (k, f) = intent(
            serde_json::json!({"maxPods": {}}),
            &node(Family::Al2023).build(),
        );
        assert!(f.is_empty(), "{f:?}");
        assert_eq!(k.config[0], ("maxPods", 29.into()));
        assert_eq!(
            k.config[1].1,
            serde_json::json!({"cpu": "70m", "ephemeral-storage": "1Gi", "memory": "574Mi"})
        );
        assert_eq!(k.derived[0].key, "maxPods");
        assert_eq!(
            k.derived[0].from,
            "m6i.large (table), secondaryIPs: 3 ENIs × (10 − 1) + 2 = 29 (under the ceiling 110 recommended for 2 vCPUs)"
        );
        assert!(k.warnings.is_empty(), "{:?}", k.warnings);
    }

    #[test]
    fn a_fixed_max_pods_keeps_its_value_and_derives_the_reservation_from_it() {
        let (k, f) = intent(
            serde_json::json!({"maxPods": 20}),
            &node(Family::Al2).build(),
        );
        assert!(f.is_empty(), "{f:?}");
        assert_eq!(k.config[0], ("maxPods", 20.into()));
        assert_eq!(k.config[1].1["memory"], "475Mi");
        let (k, _) = intent(
            serde_json::json!({"maxPods": 20, "kubeReserved": {"memory": "1Gi"}}),
            &node(Family::Al2).build(),
        );
        assert_eq!(k.config[1].1, serde_json::json!({"memory": "1Gi"}));
    }

    #[test]
    fn prefix_delegation_on_xen_or_an_unknown_hypervisor_is_refused() {
        let xen = node(Family::Al2)
            .file(node::SYS_VENDOR, "Xen\n")
            .file(node::HYPERVISOR_TYPE, "xen\n")
            .build();
        let (k, f) = intent(
            serde_json::json!({"maxPods": {"cni": "prefixDelegation"}}),
            &xen,
        );
        assert!(k.config.is_empty());
        assert!(
            f[0].starts_with("kubelet.maxPods.cni: prefix delegation needs a Nitro"),
            "{f:?}"
        );
        let unknown = node(Family::Al2).absent([node::SYS_VENDOR]).build();
        let (_, f) = intent(
            serde_json::json!({"maxPods": {"cni": "prefixDelegation"}}),
            &unknown,
        );
        assert!(f[0].contains("does not say it is one"), "{f:?}");
        // The IPv6 mode is prefix delegation's: Nitro only, whatever else is unknown.
        for n in [&xen, &unknown] {
            let (k, f) = intent(serde_json::json!({"maxPods": {"cni": "ipv6"}}), n);
            assert!(k.config.is_empty());
            assert!(f[0].contains("IPv6 mode needs a Nitro instance"), "{f:?}");
        }
        let (k, f) = intent(
            serde_json::json!({"maxPods": {"cni": "ipv6"}}),
            &node(Family::Al2).build(),
        );
        assert!(f.is_empty(), "{f:?}");
        assert_eq!(k.config[0], ("maxPods", 110.into()));
        assert_eq!(k.config[1].1["memory"], "1465Mi");
    }

    #[test]
    fn a_type_no_one_knows_and_uncountable_vcpus_are_findings() {
        let t = node(Family::Al2)
            .type_info(TypeFact::Unknown("x1.huge is not in the table".into()))
            .build();
        let (_, f) = intent(serde_json::json!({"maxPods": {}}), &t);
        assert_eq!(f, ["kubelet.maxPods: x1.huge is not in the table"]);
        let no_cpus = node(Family::Al2).absent([node::CPU_ONLINE]).build();
        let (_, f) = intent(serde_json::json!({"maxPods": {}}), &no_cpus);
        assert!(f[0].contains("cannot count the node's vCPUs"), "{f:?}");
        // A fixed max pods with no ceiling to choose still needs the vCPUs for kube-reserved.
        let (_, f) = intent(serde_json::json!({"maxPods": 30}), &no_cpus);
        assert!(
            f[0].starts_with("kubelet.kubeReserved: cannot count"),
            "{f:?}"
        );
    }

    #[test]
    fn warns_of_pods_without_addresses_and_of_a_node_mostly_reserved() {
        let (k, _) = intent(
            serde_json::json!({"maxPods": 200}),
            &node(Family::Al2).build(),
        );
        assert!(
            k.warnings[0].contains("more than the 29 pod addresses")
                && k.warnings[0].contains("prefix delegation is on (up to 434)"),
            "{:?}",
            k.warnings
        );
        let small = node(Family::Al2)
            .file(node::MEMINFO, "MemTotal:        1999000 kB\n")
            .build();
        let (k, _) = intent(serde_json::json!({"maxPods": 110}), &small);
        assert!(
            k.warnings.iter().any(|w| w.contains("less than a quarter")),
            "{:?}",
            k.warnings
        );
    }

    #[test]
    fn the_user_data_setting_it_too_is_a_finding() {
        let ud = b"apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      maxPods: 58\n";
        let facts = node(Family::Al2023)
            .user_data(crate::instance::userdata::UserDataFact::from_bytes(Some(
                ud,
            )))
            .build();
        let (_, f) = intent(serde_json::json!({"maxPods": {}}), &facts);
        assert_eq!(
            f,
            ["kubelet.maxPods: a NodeConfig nodeadm merges sets it too (kubelet.config.maxPods of the NodeConfig in the user data): nodeadm would keep one of them silently; set it in one place"]
        );
    }

    #[test]
    fn a_computed_value_kubelet_cannot_take_is_a_finding() {
        let huge = node(Family::Al2023)
            .type_info(TypeFact::Known {
                info: TypeInfo {
                    enis: u32::MAX,
                    ipv4_per_eni: u32::MAX,
                },
                source: TypeSource::Ec2,
            })
            .build();
        let (k, f) = intent(serde_json::json!({"maxPods": {"ceiling": "none"}}), &huge);
        assert!(k.config.is_empty());
        assert!(
            f[0].contains("more than kubelet's --max-pods takes"),
            "{f:?}"
        );
        let (k, f) = intent(serde_json::json!({"maxPods": {}}), &huge);
        assert!(f.is_empty(), "{f:?}");
        assert_eq!(k.config[0], ("maxPods", 110.into()));
    }

    #[test]
    fn nothing_without_the_settings_or_without_an_instance() {
        let (k, f) = intent(serde_json::json!({}), &node(Family::Al2).build());
        assert!(k.config.is_empty() && f.is_empty() && k.derived.is_empty());
        let validate = Facts::builder(Family::Al2).build();
        let (k, f) = intent(serde_json::json!({"maxPods": {}}), &validate);
        assert!(k.config.is_empty() && f.is_empty());
    }
}
