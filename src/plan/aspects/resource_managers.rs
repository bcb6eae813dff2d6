//! The CPU and memory managers: their policies, and what the static policies need derived from
//! the node's reservation (docs/resources.md).
//!
//! * CPU `static`: `reservedSystemCPUs`, the whole CPUs the reservation rounds up to (as the
//!   static policy rounds it: `ceil(kube-reserved cpu)`), the lowest-numbered online ones, or a
//!   list as given, each online. The kubelet refuses it beside the reserved cgroups, which
//!   nodeadm sets (`kubeReservedCgroup`) and bootstrap.sh sets unless its extra args hold
//!   `--reserved-cpus`: both are cleared, and on AL2 it goes as that flag.
//! * Memory `Static`: `reservedMemory` over the online NUMA nodes, summing exactly to
//!   kube-reserved + system-reserved + the hard eviction threshold for memory (both hand-offs
//!   write `memory.available<100Mi`), or the kubelet exits at start.

use serde_json::{json, Value};

use crate::base::findings::Findings;
use crate::base::k8s::milli_value;
use crate::base::node::{self, cpu_list, cpu_list_text};
use crate::base::podcap;
use crate::facts::{Facts, Family, Reads};
use crate::spec::resource_managers::ReservedCpus;
use crate::spec::Spec;

use crate::plan::kubelet::{Derived, KubeletIntent, Section, EVICTION_HARD_MEMORY_MIB};

use super::{Aspect, Contribution};

/// Where the plan shows the reservations the static policies need.
const SECTION: Section = Section {
    title: "resource managers",
    key: "resourceManagers",
};

pub(crate) const ASPECT: Aspect = Aspect {
    name: "resource managers",
    reads,
    contribute: Contribution::Kubelet(contribute),
    ..Aspect::BASE
};

fn reads(spec: &Spec, _: Option<Family>, r: &mut Reads) {
    let rm = &spec.kubelet.resources;
    if rm.cpu.is_some() {
        r.file(node::CPU_ONLINE);
    }
    if rm.memory_static == Some(true) {
        r.file(node::NODE_ONLINE);
    }
}

fn contribute(spec: &Spec, facts: &Facts, k: &mut KubeletIntent, f: &mut Findings) {
    let rm = &spec.kubelet.resources;
    // Without an instance (`validate`) there is no node to derive for.
    if !rm.is_set() || facts.instance.is_none() {
        return;
    }
    if let Some(c) = &rm.cpu {
        k.set(
            "cpuManagerPolicy",
            json!(if c.static_policy { "static" } else { "none" }),
        );
        if !c.options.is_empty() {
            let o: serde_json::Map<String, Value> = c
                .options
                .iter()
                .map(|(a, b)| (a.clone(), json!(b)))
                .collect();
            k.set("cpuManagerPolicyOptions", Value::Object(o));
        }
        if let Some(d) = reserved_cpus(&c.reserved, facts, k, f) {
            k.derive(d);
            k.set("kubeReservedCgroup", json!(""));
            k.set("systemReservedCgroup", json!(""));
        }
    }
    match rm.memory_static {
        Some(true) => {
            let sized = spec.kubelet.pod_capacity.is_set();
            if let Some(d) = reserved_memory(facts, k, sized, f) {
                k.set("memoryManagerPolicy", json!("Static"));
                k.derive(d);
            }
        }
        Some(false) => k.set("memoryManagerPolicy", json!("None")),
        None => {}
    }
}

const CPU_FIELD: &str = "kubelet.cpuManager.reservedSystemCPUs";

fn reserved_cpus(
    r: &ReservedCpus,
    facts: &Facts,
    k: &KubeletIntent,
    f: &mut Findings,
) -> Option<Derived> {
    let online = match facts.file_text(node::CPU_ONLINE) {
        Ok(Some(t)) => cpu_list(&t).map_err(|e| format!("{}: {e}", node::CPU_ONLINE)),
        Ok(None) => Err(format!("{} does not exist", node::CPU_ONLINE)),
        Err(e) => Err(e),
    };
    let online = match (r, online) {
        (ReservedCpus::Unset, _) => return None,
        (_, Ok(o)) => o,
        (_, Err(e)) => {
            f.push(CPU_FIELD, format!("the node's online CPUs are needed: {e}"));
            return None;
        }
    };
    let online_text = cpu_list_text(&online);
    let (cpus, from) = match r {
        ReservedCpus::List(t, cpus) => {
            if let Some(c) = cpus.iter().find(|c| !online.contains(c)) {
                f.push(
                    CPU_FIELD,
                    format!("CPU {c} of `{t}` is not online on this node (online: {online_text})"),
                );
                return None;
            }
            (cpus.clone(), format!("{CPU_FIELD} {t}"))
        }
        _ => {
            let (milli, what) = cpu_reservation(k, online.len())?;
            let n = milli.div_ceil(1000).max(1);
            let cpus: Vec<u32> = online
                .iter()
                .copied()
                .take(usize::try_from(n).ok()?)
                .collect();
            let from = format!(
                "ceil({what}) = {n} whole CPU{}, the lowest-numbered online (online: {online_text})",
                if n == 1 { "" } else { "s" }
            );
            (cpus, from)
        }
    };
    if cpus.len() >= online.len() {
        f.push(
            CPU_FIELD,
            format!(
            "would reserve all {} online CPUs ({online_text}) for the system, none left for pods",
            online.len()
        ),
        );
        return None;
    }
    Some(Derived::new(
        SECTION,
        "reservedSystemCPUs",
        json!(cpu_list_text(&cpus)),
        from,
    ))
}

/// The CPU reservation in millicores and how it reads: the agent's kube-reserved cpu, else
/// what both hand-offs derive from the vCPUs.
fn cpu_reservation(k: &KubeletIntent, vcpus: usize) -> Option<(u128, String)> {
    match k.kube_reserved("cpu") {
        Some(q) => Some((milli_value(q)?, format!("kube-reserved cpu {q}"))),
        None => {
            let m = podcap::cpu_millicores_to_reserve(u64::try_from(vcpus).ok()?);
            Some((
                u128::from(m),
                format!("the hand-off's kube-reserved cpu {m}m for {vcpus} vCPUs"),
            ))
        }
    }
}

const MEMORY_FIELD: &str = "kubelet.memoryManager";

/// `sized`: the config sets pod capacity (if it gave no reservation, its own finding says why).
fn reserved_memory(
    facts: &Facts,
    k: &KubeletIntent,
    sized: bool,
    f: &mut Findings,
) -> Option<Derived> {
    let Some(q) = k.kube_reserved("memory") else {
        if sized {
            return None;
        }
        f.push(MEMORY_FIELD, "the Static policy's reservedMemory must equal the memory reservation: set kubelet.maxPods or kubelet.kubeReserved's memory so that the agent knows it (each hand-off would compute its own)");
        return None;
    };
    let Some(bytes) = milli_value(q).filter(|m| m % 1000 == 0).map(|m| m / 1000) else {
        f.push(
            MEMORY_FIELD,
            format!("kube-reserved memory {q} is not a whole number of bytes"),
        );
        return None;
    };
    let nodes = match facts.file_text(node::NODE_ONLINE) {
        Ok(Some(t)) => cpu_list(&t).ok()?,
        Ok(None) => vec![0],
        Err(e) => {
            f.push(
                MEMORY_FIELD,
                format!("the node's NUMA nodes are needed: {e}"),
            );
            return None;
        }
    };
    let total = bytes + (u128::from(EVICTION_HARD_MEMORY_MIB) << 20);
    let n = u128::try_from(nodes.len()).ok()?;
    let each = total / n;
    let limits: Vec<Value> = nodes
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let b = if i == 0 { each + total % n } else { each };
            json!({"numaNode": id, "limits": {"memory": memory_text(b)}})
        })
        .collect();
    let from = format!(
        "kube-reserved {q} + system-reserved 0 + evictionHard memory.available {EVICTION_HARD_MEMORY_MIB}Mi = {} over NUMA node{} {}",
        memory_text(total),
        if nodes.len() == 1 { "" } else { "s" },
        cpu_list_text(&nodes)
    );
    Some(Derived::new(
        SECTION,
        "reservedMemory",
        Value::Array(limits),
        from,
    ))
}

/// Bytes as the kubelet prints them: whole MiB as `NMi`, else bytes.
fn memory_text(b: u128) -> String {
    match b % (1 << 20) {
        0 => format!("{}Mi", b >> 20),
        _ => b.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::aspects::testing::{instance, spec};

    /// What the managers contribute for `config` on an instance with `cpus` online.
    fn contributed(config: &str, cpus: &str) -> (KubeletIntent, Vec<String>) {
        let s = spec(config);
        let mut facts = instance(&s, None);
        facts.set_file(
            node::CPU_ONLINE,
            crate::os::fsutil::FileFact {
                content: Ok(Some(cpus.into())),
                mode: Some(0o444),
                link: None,
            },
        );
        let (mut k, mut f) = (KubeletIntent::default(), Findings::default());
        contribute(&s, &facts, &mut k, &mut f);
        (k, f.0.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn the_static_cpu_policy_reserves_the_whole_cpus_of_the_hand_offs_reservation() {
        let c = r#"{"cluster":{"name":"c"},"kubelet":{"cpuManager":{"policy":"static"}}}"#;
        let (k, f) = contributed(c, "0-3\n");
        assert!(f.is_empty(), "{f:?}");
        assert_eq!(
            k.config,
            [
                ("cpuManagerPolicy", json!("static")),
                ("reservedSystemCPUs", json!("0")),
                ("kubeReservedCgroup", json!("")),
                ("systemReservedCgroup", json!("")),
            ]
        );
        let d = k
            .derived
            .iter()
            .find(|d| d.key == "reservedSystemCPUs")
            .unwrap();
        assert_eq!(
            d.from,
            "ceil(the hand-off's kube-reserved cpu 80m for 4 vCPUs) = 1 whole CPU, the lowest-numbered online (online: 0-3)"
        );
    }

    #[test]
    fn the_static_memory_policy_without_a_known_reservation_is_a_finding() {
        let c = r#"{"cluster":{"name":"c"},"kubelet":{"memoryManager":{"policy":"Static"}}}"#;
        let (k, f) = contributed(c, "0-3\n");
        assert!(k.config.is_empty(), "{:?}", k.config);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].starts_with("kubelet.memoryManager: the Static policy's reservedMemory must equal the memory reservation"),
            "{f:?}"
        );
    }
}
