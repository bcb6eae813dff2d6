//! Pod capacity: the kubelet's max pods from the instance type and the VPC CNI's mode, and the
//! kube-reserved derived from the max pods the kubelet really gets.
//!
//! Max pods is the VPC CNI's calculator (awslabs/amazon-eks-ami, AL2's
//! `max-pods-calculator.sh`): the ENIs of the default network card, min'd with the CNI's
//! MAX_ENI, one fewer with custom networking; then `ENIs × (IPv4 per ENI − 1) + 2` with
//! secondary IPs, `ENIs × ((IPv4 per ENI − 1) × 16) + 2` with prefix delegation (Nitro only);
//! then the ceiling (recommended: 250 when the vCPUs are more than 30, else 110). In the CNI's
//! IPv6 mode the node gets one /80 prefix on its primary ENI (2^48 addresses) and no more ENIs:
//! the addresses never bind, the ceiling alone does. The
//! reservation is bootstrap.sh's (`get_memory_mebibytes_to_reserve`,
//! `get_cpu_millicores_to_reserve`), in its integer arithmetic. Pure: every input is a value.

pub mod cache;
pub mod explain;
pub mod table;

use std::fmt;

pub use table::{TypeFact, TypeInfo, TypeSource};

/// The IPv4 addresses a /28 prefix gives (the calculator's IPS_PER_PREFIX).
pub const IPS_PER_PREFIX: u64 = 16;
/// The addresses of the one /80 prefix the CNI's IPv6 mode assigns a node.
pub const IPV6_PREFIX_ADDRESSES: u64 = 1 << 48;
/// The recommended ceilings and the vCPU count above which the high one applies.
pub const CEILING_LOW_CPU: u64 = 110;
pub const CEILING_HIGH_CPU: u64 = 250;
pub const CEILING_CPU_THRESHOLD: u64 = 30;
/// kubelet's `--max-pods` is an int32.
pub const KUBELET_MAX: u64 = i32::MAX as u64;

/// How the VPC CNI gives pods their addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Cni {
    /// One secondary IPv4 address per pod (the default).
    #[serde(rename = "secondaryIPs")]
    SecondaryIps,
    /// A /28 prefix per address slot (`ENABLE_PREFIX_DELEGATION`), Nitro only.
    PrefixDelegation,
    /// IPv6 (`ENABLE_IPv6`, prefix delegation on): one /80 prefix on the primary ENI, Nitro
    /// only, no custom networking, no further ENIs.
    #[serde(rename = "ipv6")]
    Ipv6,
}

impl Cni {
    pub fn name(self) -> &'static str {
        match self {
            Cni::SecondaryIps => "secondaryIPs",
            Cni::PrefixDelegation => "prefixDelegation",
            Cni::Ipv6 => "ipv6",
        }
    }
}

/// The upper bound put on the computed value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ceiling {
    /// The calculator's: 110, or 250 with more than 30 vCPUs.
    Recommended,
    /// None: every address the CNI mode can give (`--show-max-allowed`).
    None,
    Fixed(u64),
}

/// What the computation needs beyond the instance type's numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mode {
    pub cni: Cni,
    pub custom_networking: bool,
    /// The CNI's MAX_ENI.
    pub max_enis: Option<u64>,
    pub ceiling: Ceiling,
}

impl Default for Mode {
    fn default() -> Mode {
        Mode {
            cni: Cni::SecondaryIps,
            custom_networking: false,
            max_enis: None,
            ceiling: Ceiling::Recommended,
        }
    }
}

/// One computed max pods, with the numbers it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaxPods {
    pub value: u64,
    /// The pod addresses the CNI mode gives (before the ceiling).
    pub addresses: u64,
    /// ENIs used for pods.
    pub enis: u64,
    /// The ceiling that bounds the value, if any.
    pub ceiling: Option<u64>,
    /// The vCPUs the recommended ceiling was chosen for (`None`: another ceiling).
    pub recommended_for: Option<u64>,
    pub ipv4_per_eni: u64,
    pub cni: Cni,
}

/// The calculator. `vcpus` is only read by the recommended ceiling; `nitro` only by prefix
/// delegation (on Xen the calculator falls back to secondary IPs; callers refuse that first).
pub fn max_pods(info: TypeInfo, mode: Mode, vcpus: u64, nitro: bool) -> MaxPods {
    if mode.cni == Cni::Ipv6 {
        return capped(info, mode, vcpus, (Cni::Ipv6, 1, IPV6_PREFIX_ADDRESSES));
    }
    let mut enis = u64::from(info.enis);
    if let Some(m) = mode.max_enis {
        enis = enis.min(m);
    }
    if mode.custom_networking {
        enis = enis.saturating_sub(1);
    }
    let per_eni = u64::from(info.ipv4_per_eni).saturating_sub(1);
    let cni = if mode.cni == Cni::PrefixDelegation && nitro {
        Cni::PrefixDelegation
    } else {
        Cni::SecondaryIps
    };
    let slots = match cni {
        Cni::PrefixDelegation => per_eni.saturating_mul(IPS_PER_PREFIX),
        // Taken out above: one /80 whatever the ENIs.
        Cni::SecondaryIps | Cni::Ipv6 => per_eni,
    };
    let addresses = enis.saturating_mul(slots).saturating_add(2);
    capped(info, mode, vcpus, (cni, enis, addresses))
}

/// The addresses a mode gives under the mode's ceiling.
fn capped(
    info: TypeInfo,
    mode: Mode,
    vcpus: u64,
    (cni, enis, addresses): (Cni, u64, u64),
) -> MaxPods {
    let ceiling = match mode.ceiling {
        Ceiling::Recommended if vcpus > CEILING_CPU_THRESHOLD => Some(CEILING_HIGH_CPU),
        Ceiling::Recommended => Some(CEILING_LOW_CPU),
        Ceiling::None => None,
        Ceiling::Fixed(c) => Some(c),
    };
    MaxPods {
        value: ceiling.map_or(addresses, |c| c.min(addresses)),
        addresses,
        enis,
        ceiling,
        recommended_for: (mode.ceiling == Ceiling::Recommended).then_some(vcpus),
        ipv4_per_eni: u64::from(info.ipv4_per_eni),
        cni,
    }
}

impl fmt::Display for MaxPods {
    /// The arithmetic: `3 ENIs × (10 − 1) + 2 = 29`, then the ceiling when there is one.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (n, ip) = (self.enis, self.ipv4_per_eni);
        let s = if n == 1 { "" } else { "s" };
        match self.cni {
            Cni::SecondaryIps => write!(f, "{n} ENI{s} × ({ip} − 1) + 2 = {}", self.addresses)?,
            Cni::PrefixDelegation => write!(
                f,
                "{n} ENI{s} × (({ip} − 1) × {IPS_PER_PREFIX}) + 2 = {}",
                self.addresses
            )?,
            Cni::Ipv6 => write!(
                f,
                "one /80 prefix on the primary ENI = 2^48 = {} addresses",
                self.addresses
            )?,
        }
        let why = match self.recommended_for {
            Some(v) => format!(" recommended for {v} vCPU{}", if v == 1 { "" } else { "s" }),
            None => String::new(),
        };
        match self.ceiling {
            Some(c) if c < self.addresses => write!(f, ", capped at {c} (the ceiling{why})"),
            Some(c) => write!(f, " (under the ceiling {c}{why})"),
            None => write!(f, " (no ceiling)"),
        }
    }
}

/// kube-reserved as bootstrap.sh derives it from the max pods and the vCPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reserved {
    pub memory_mi: u64,
    pub cpu_millis: u64,
    pub max_pods: u64,
    pub vcpus: u64,
}

/// `11 × maxPods + 255` MiB (bootstrap.sh's `get_memory_mebibytes_to_reserve`).
pub fn memory_mebibytes_to_reserve(max_pods: u64) -> u64 {
    max_pods.saturating_mul(11).saturating_add(255)
}

/// bootstrap.sh's `get_cpu_millicores_to_reserve`: over the ranges (in millicores) 0–1000,
/// 1000–2000, 2000–4000 and 4000 up, 6%, 1%, 0.5% and 0.25% (600, 100, 50, 25 hundredths of a
/// percent) of the part of the node's CPU inside each range, each range's share truncated on
/// its own as its shell arithmetic does.
pub fn cpu_millicores_to_reserve(vcpus: u64) -> u64 {
    let total = vcpus.saturating_mul(1000);
    let ranges = [(0, 1000, 600), (1000, 2000, 100), (2000, 4000, 50)];
    let last = (4000, total, 25);
    ranges
        .into_iter()
        .chain([last])
        .map(|(start, end, pct): (u64, u64, u64)| {
            if total > start {
                (total.min(end) - start).saturating_mul(pct) / 100 / 100
            } else {
                0
            }
        })
        .fold(0, u64::saturating_add)
}

pub fn reserved(max_pods: u64, vcpus: u64) -> Reserved {
    Reserved {
        memory_mi: memory_mebibytes_to_reserve(max_pods),
        cpu_millis: cpu_millicores_to_reserve(vcpus),
        max_pods,
        vcpus,
    }
}

impl Reserved {
    /// As kubelet's `kubeReserved` map (bootstrap.sh's three keys and units).
    pub fn quantities(&self) -> Vec<(&'static str, String)> {
        vec![
            ("cpu", format!("{}m", self.cpu_millis)),
            ("ephemeral-storage", "1Gi".to_string()),
            ("memory", format!("{}Mi", self.memory_mi)),
        ]
    }
}

impl fmt::Display for Reserved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "memory 255 + 11 × {} = {}Mi, cpu {}m ({} vCPU{}), ephemeral-storage 1Gi",
            self.max_pods,
            self.memory_mi,
            self.cpu_millis,
            self.vcpus,
            if self.vcpus == 1 { "" } else { "s" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(enis: u32, ips: u32) -> TypeInfo {
        TypeInfo {
            enis,
            ipv4_per_eni: ips,
        }
    }

    #[test]
    fn cpu_reservation_matches_bootstrap_sh_by_range() {
        // 1 vCPU: 6% of 1000; 2: +1% of 1000; 4: +0.5% of 2000; 8: +0.25% of 4000.
        let got: Vec<u64> = [0, 1, 2, 3, 4, 8, 96].map(cpu_millicores_to_reserve).into();
        assert_eq!(got, [0, 60, 70, 75, 80, 90, 310]);
    }

    #[test]
    fn custom_networking_leaves_the_primary_eni_out_after_max_enis() {
        let m = Mode {
            custom_networking: true,
            max_enis: Some(2),
            ..Mode::default()
        };
        let p = max_pods(info(3, 10), m, 2, true);
        assert_eq!((p.enis, p.value), (1, 11));
        let none = max_pods(info(1, 10), m, 2, true);
        assert_eq!((none.enis, none.value), (0, 2));
    }

    #[test]
    fn prefix_delegation_on_xen_is_secondary_ips_as_the_calculator_does() {
        let m = Mode {
            cni: Cni::PrefixDelegation,
            ceiling: Ceiling::None,
            ..Mode::default()
        };
        assert_eq!(max_pods(info(4, 15), m, 4, false).value, 58);
        assert_eq!(max_pods(info(4, 15), m, 4, true).value, 898);
    }

    #[test]
    fn in_ipv6_mode_the_ceiling_binds_never_the_addresses() {
        let v6 = |ceiling| Mode {
            cni: Cni::Ipv6,
            ceiling,
            ..Mode::default()
        };
        // m5.large's 29 under the IPv4 formula; 110 here, 250 with more than 30 vCPUs.
        let p = max_pods(info(3, 10), v6(Ceiling::Recommended), 2, true);
        assert_eq!((p.value, p.enis, p.addresses), (110, 1, 1 << 48));
        assert_eq!(
            p.to_string(),
            "one /80 prefix on the primary ENI = 2^48 = 281474976710656 addresses, capped at 110 (the ceiling recommended for 2 vCPUs)"
        );
        assert_eq!(
            max_pods(info(3, 10), v6(Ceiling::Recommended), 31, true).value,
            250
        );
        assert_eq!(
            max_pods(info(1, 2), v6(Ceiling::Fixed(737)), 1, true).value,
            737
        );
        // No ceiling: every address, which kubelet cannot take (the plan refuses it).
        assert!(max_pods(info(3, 10), v6(Ceiling::None), 2, true).value > KUBELET_MAX);
    }

    #[test]
    fn the_arithmetic_reads_as_the_plan_shows_it() {
        let p = max_pods(info(3, 10), Mode::default(), 2, true);
        assert_eq!(
            p.to_string(),
            "3 ENIs × (10 − 1) + 2 = 29 (under the ceiling 110 recommended for 2 vCPUs)"
        );
        let r = reserved(p.value, 2);
        assert_eq!(
            r.to_string(),
            "memory 255 + 11 × 29 = 574Mi, cpu 70m (2 vCPUs), ephemeral-storage 1Gi"
        );
    }
}
