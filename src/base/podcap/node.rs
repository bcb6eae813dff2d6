//! What the node itself says that pod capacity needs: its online vCPUs (what bootstrap.sh's
//! `nproc` counts), Nitro or Xen, and its memory. Parsers of the files' text only; gathering
//! reads the files under `--root`.

/// The kernel's list of online CPUs, e.g. `0-3` or `0,2-7`.
pub const CPU_ONLINE: &str = "/sys/devices/system/cpu/online";
/// `Amazon EC2` on Nitro instances.
pub const SYS_VENDOR: &str = "/sys/devices/virtual/dmi/id/sys_vendor";
/// `xen` on Xen instances.
pub const HYPERVISOR_TYPE: &str = "/sys/hypervisor/type";
pub const MEMINFO: &str = "/proc/meminfo";
/// The NUMA nodes the kernel has online, a list like `0-1` (absent without NUMA support: one
/// node, 0, as the kubelet's cAdvisor reports it).
pub const NODE_ONLINE: &str = "/sys/devices/system/node/online";

/// The number of CPUs in a kernel CPU list (`0-3,8,10-11`).
pub fn count_cpus(list: &str) -> Result<u64, String> {
    let list = list.trim();
    if list.is_empty() {
        return Err("the list of online CPUs is empty".into());
    }
    let mut n: u64 = 0;
    for part in list.split(',') {
        let bad = || {
            format!(
                "`{}` is not a CPU number or range",
                crate::base::text::escaped(part)
            )
        };
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a, b),
            None => (part, part),
        };
        let num = |s: &str| {
            s.parse::<u64>()
                .ok()
                .filter(|_| s.bytes().all(|c| c.is_ascii_digit()))
        };
        let (a, b) = (num(a).ok_or_else(bad)?, num(b).ok_or_else(bad)?);
        if b < a {
            return Err(bad());
        }
        n = n.saturating_add((b - a).saturating_add(1));
    }
    Ok(n)
}

/// The hypervisor, as the node's firmware and kernel say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hypervisor {
    Nitro,
    Xen,
}

impl Hypervisor {
    /// From `sys_vendor` and `/sys/hypervisor/type` (either may be missing).
    pub fn detect(sys_vendor: Option<&str>, hypervisor_type: Option<&str>) -> Option<Hypervisor> {
        let vendor = sys_vendor.map(str::trim);
        if vendor == Some("Amazon EC2") {
            return Some(Hypervisor::Nitro);
        }
        if hypervisor_type.map(str::trim) == Some("xen") || vendor == Some("Xen") {
            return Some(Hypervisor::Xen);
        }
        None
    }
}

/// `MemTotal` of `/proc/meminfo`, in KiB.
pub fn mem_total_kib(meminfo: &str) -> Option<u64> {
    meminfo.lines().find_map(|l| {
        let rest = l.strip_prefix("MemTotal:")?;
        rest.trim().strip_suffix("kB")?.trim().parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_count_as_the_kernel_writes_them() {
        assert_eq!(count_cpus("0-3\n"), Ok(4));
        assert_eq!(count_cpus("0"), Ok(1));
        assert_eq!(count_cpus("0,2-7,9"), Ok(8));
        for bad in ["", "3-1", "a", "0-", "-1", "0,,1", "+1"] {
            assert!(count_cpus(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            count_cpus(&format!("0-{}", u64::MAX)),
            Ok(u64::MAX),
            "saturates"
        );
    }

    #[test]
    fn nitro_by_vendor_xen_by_hypervisor_type() {
        use Hypervisor::*;
        assert_eq!(Hypervisor::detect(Some("Amazon EC2\n"), None), Some(Nitro));
        assert_eq!(Hypervisor::detect(Some("Xen\n"), Some("xen\n")), Some(Xen));
        assert_eq!(Hypervisor::detect(None, Some("xen")), Some(Xen));
        assert_eq!(Hypervisor::detect(Some("QEMU"), None), None);
    }

    #[test]
    fn mem_total_in_kib() {
        let m = "MemTotal:        7936764 kB\nMemFree:  1 kB\n";
        assert_eq!(mem_total_kib(m), Some(7_936_764));
        assert_eq!(mem_total_kib("MemFree: 1 kB"), None);
    }
}
