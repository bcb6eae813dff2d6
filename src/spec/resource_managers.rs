//! `kubelet.cpuManager` and `kubelet.memoryManager`: the kubelet's policy names (case-sensitive,
//! as `pkg/kubelet/cm` spells them), a CPU list in the kubelet's cpuset grammar, and the static
//! policy's options by the kubelet's own maturity table (`cpumanager/policy_options.go`).

use crate::base::findings::Findings;
use crate::base::node;
use crate::base::text::printable;
use crate::config::{CpuManagerSettings, MemoryManagerSettings};

/// The CPU manager's options the kubelet takes without a feature gate (stable, and beta with
/// its gate on by default), and those that need `CPUManagerPolicyAlphaOptions`.
const CPU_OPTIONS: [&str; 4] = [
    "full-pcpus-only",
    "strict-cpu-reservation",
    "prefer-align-cpus-by-uncorecache",
    "distribute-cpus-across-numa",
];
const CPU_ALPHA_OPTIONS: [&str; 2] = ["align-by-socket", "distribute-cpus-across-cores"];

/// What Go's `strconv.ParseBool` reads, as the kubelet reads an option's value.
const GO_BOOLS: [&str; 12] = [
    "1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False",
];

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResourceManagersSpec {
    pub cpu: Option<CpuManagerSpec>,
    /// The memory manager's policy: `Static` (true) or `None`.
    pub memory_static: Option<bool>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CpuManagerSpec {
    pub static_policy: bool,
    pub reserved: ReservedCpus,
    pub options: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ReservedCpus {
    /// Not set: the kubelet's own reservation stands.
    Unset,
    /// The whole CPUs the reservation rounds up to, the lowest-numbered online ones.
    Auto,
    /// As given: the text and the CPUs it names, ascending.
    List(String, Vec<u32>),
}

impl ResourceManagersSpec {
    pub(crate) fn is_set(&self) -> bool {
        self.cpu.is_some() || self.memory_static.is_some()
    }
}

pub fn spec(
    cpu: Option<&CpuManagerSettings>,
    memory: Option<&MemoryManagerSettings>,
    f: &mut Findings,
) -> ResourceManagersSpec {
    let memory_static = memory.and_then(|m| match m.policy.as_str() {
        "Static" => Some(true),
        "None" => Some(false),
        p => {
            f.push(
                "kubelet.memoryManager.policy",
                format!("`{}` is not a memory manager policy the kubelet knows: None or Static (case-sensitive)", printable(p)),
            );
            None
        }
    });
    ResourceManagersSpec {
        cpu: cpu.and_then(|c| cpu_spec(c, f)),
        memory_static,
    }
}

fn cpu_spec(c: &CpuManagerSettings, f: &mut Findings) -> Option<CpuManagerSpec> {
    let static_policy = match c.policy.as_str() {
        "static" => true,
        "none" => false,
        p => {
            f.push(
                "kubelet.cpuManager.policy",
                format!("`{}` is not a CPU manager policy the kubelet knows: none or static (case-sensitive)", printable(p)),
            );
            return None;
        }
    };
    const FIELD: &str = "kubelet.cpuManager.reservedSystemCPUs";
    let reserved = match (c.reserved_system_cpus.as_deref(), static_policy) {
        (None, true) | (Some("auto"), true) => ReservedCpus::Auto,
        (None, false) => ReservedCpus::Unset,
        (Some("auto"), false) => {
            f.push(FIELD, "`auto` derives the static policy's CPUs; with policy none give a CPU list or leave it out");
            ReservedCpus::Unset
        }
        (Some(list), _) => match parse_cpu_list(list) {
            Ok(cpus) => ReservedCpus::List(list.to_string(), cpus),
            Err(e) => {
                f.push(FIELD, e);
                ReservedCpus::Unset
            }
        },
    };
    for (k, v) in &c.options {
        let field = format!("kubelet.cpuManager.options[{}]", printable(k));
        if !static_policy {
            f.push(
                &field,
                "options belong to the static policy; set policy static or remove them",
            );
        } else if CPU_ALPHA_OPTIONS.contains(&k.as_str()) {
            f.push(&field, "is an alpha option: the kubelet refuses it without the CPUManagerPolicyAlphaOptions feature gate, which the agent does not set");
        } else if !CPU_OPTIONS.contains(&k.as_str()) {
            f.push(
                &field,
                format!(
                    "is not an option the kubelet knows: {}",
                    CPU_OPTIONS.join(", ")
                ),
            );
        } else if !GO_BOOLS.contains(&v.as_str()) {
            f.push(&field, format!("`{}` is not true or false", printable(v)));
        }
    }
    Some(CpuManagerSpec {
        static_policy,
        reserved,
        options: c
            .options
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    })
}

/// The CPUs of a list in the kubelet's cpuset grammar (the kernel's: `0-3,8`), ascending, each
/// once.
pub fn parse_cpu_list(s: &str) -> Result<Vec<u32>, String> {
    node::cpu_list(s)
        .map_err(|e| format!("`{}` is not a CPU list such as 0-1,4: {e}", printable(s)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn cpu(
        policy: &str,
        reserved: Option<&str>,
        options: &[(&str, &str)],
    ) -> (Option<CpuManagerSpec>, Vec<String>) {
        let mut f = Findings::default();
        let c = CpuManagerSettings {
            policy: policy.into(),
            reserved_system_cpus: reserved.map(String::from),
            options: options
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        };
        let s = cpu_spec(&c, &mut f);
        (s, f.0.iter().map(|x| x.to_string()).collect())
    }

    #[test]
    fn cpu_policies_and_lists_as_the_kubelet_reads_them() {
        assert_eq!(
            cpu("static", None, &[]).0.unwrap().reserved,
            ReservedCpus::Auto
        );
        assert_eq!(
            cpu("none", None, &[]).0.unwrap().reserved,
            ReservedCpus::Unset
        );
        let (s, e) = cpu("static", Some("0-1,4"), &[("full-pcpus-only", "true")]);
        assert!(e.is_empty(), "{e:?}");
        assert_eq!(
            s.unwrap().reserved,
            ReservedCpus::List("0-1,4".into(), vec![0, 1, 4])
        );
        assert!(cpu("Static", None, &[]).1[0].contains("none or static"));
        assert!(cpu("static", Some("1-0"), &[]).1[0].contains("backwards"));
        assert!(cpu("static", Some("0, 1"), &[]).1[0].contains("not a CPU number"));
        assert!(cpu("none", Some("auto"), &[]).1[0].contains("static policy"));
        assert!(cpu("static", None, &[("align-by-socket", "true")]).1[0].contains("alpha"));
        assert!(cpu("static", None, &[("full-pcpus", "true")]).1[0].contains("not an option"));
        assert!(cpu("static", None, &[("full-pcpus-only", "yes")]).1[0].contains("true or false"));
        assert!(cpu("none", None, &[("full-pcpus-only", "true")]).1[0].contains("static policy"));
    }

    #[test]
    fn memory_policies_are_case_sensitive() {
        let mut f = Findings::default();
        let m = |p: &str| MemoryManagerSettings { policy: p.into() };
        assert_eq!(
            spec(None, Some(&m("Static")), &mut f).memory_static,
            Some(true)
        );
        assert_eq!(
            spec(None, Some(&m("None")), &mut f).memory_static,
            Some(false)
        );
        assert!(f.0.is_empty());
        assert_eq!(spec(None, Some(&m("static")), &mut f).memory_static, None);
        assert!(f.0[0].to_string().contains("None or Static"));
    }
}
