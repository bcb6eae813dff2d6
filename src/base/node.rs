//! What the node's hardware says, in the kernel's own grammars: its online CPUs and NUMA nodes
//! (CPU lists, what bootstrap.sh's `nproc` counts), Nitro or Xen, and its memory
//! (`/proc/meminfo`). Pod capacity, the CPU and memory managers, huge pages, swap and the join's
//! expectations all read them. Parsers of the files' text only; gathering reads the files under
//! `--root`.

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

/// The ranges of a kernel CPU list (`0-3,8,10-11`; NUMA node lists have the same grammar),
/// each `(first, last)`, as written.
pub fn cpu_ranges(list: &str) -> Result<Vec<(u64, u64)>, String> {
    let list = list.trim();
    if list.is_empty() {
        return Err("the list is empty".into());
    }
    list.split(',')
        .map(|part| {
            let shown = crate::base::text::escaped(part);
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            let num = |s: &str| {
                s.parse::<u64>()
                    .ok()
                    .filter(|_| s.bytes().all(|c| c.is_ascii_digit()))
                    .ok_or_else(|| format!("`{shown}` is not a CPU number or range"))
            };
            let (a, b) = (num(a)?, num(b)?);
            match b < a {
                true => Err(format!("`{shown}` runs backwards")),
                false => Ok((a, b)),
            }
        })
        .collect()
}

/// The number of CPUs in a kernel CPU list, as written (saturating).
pub fn count_cpus(list: &str) -> Result<u64, String> {
    let ranges = cpu_ranges(list)?;
    Ok(ranges.iter().fold(0u64, |n, (a, b)| {
        n.saturating_add((b - a).saturating_add(1))
    }))
}

/// The kernel's most CPUs (`NR_CPUS` at its largest).
const MAX_CPUS: u64 = 8192;

/// The CPUs (or NUMA nodes) of a list, ascending, each once.
pub fn cpu_list(list: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for (a, b) in cpu_ranges(list)? {
        if b >= MAX_CPUS {
            return Err(format!("{b} is beyond the kernel's {MAX_CPUS} CPUs"));
        }
        // Both below MAX_CPUS: they fit.
        out.extend(a as u32..=b as u32);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// The kernel's text for `cpus` (ascending): ranges joined by commas.
pub fn cpu_list_text(cpus: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(match j > i {
            true => format!("{}-{}", cpus[i], cpus[j]),
            false => cpus[i].to_string(),
        });
        i = j + 1;
    }
    parts.join(",")
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
    meminfo_kib(meminfo, "MemTotal")
}

/// A `/proc/meminfo` field given in kB (`Hugepagesize:       2048 kB`), in KiB.
pub fn meminfo_kib(meminfo: &str, field: &str) -> Option<u64> {
    meminfo.lines().find_map(|l| {
        let rest = l.strip_prefix(field)?.strip_prefix(':')?;
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
    fn cpu_lists_read_back_to_the_kernels_text() {
        for t in ["0", "0-1", "0-1,4", "0,2,4-7"] {
            assert_eq!(cpu_list_text(&cpu_list(t).unwrap()), t);
        }
        assert_eq!(cpu_list("3,1-2,2\n").unwrap(), [1, 2, 3]);
        assert!(cpu_list("1-0").unwrap_err().contains("backwards"));
        assert!(cpu_list("99999").unwrap_err().contains("beyond"));
        assert_eq!(
            meminfo_kib("MemTotal: 8 kB\nHugepagesize:  2048 kB\n", "Hugepagesize"),
            Some(2048)
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
