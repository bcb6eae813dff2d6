//! Huge pages (docs/resources.md): 2 MiB pages set live as `vm.nr_hugepages` before the
//! hand-off, because the kubelet reads them only when it starts, read back (the kernel gives
//! fewer on fragmented memory: a mismatch in the report, the Node's allocatable then shows what
//! there is), and persisted in their own sysctl file for every later boot. 1 GiB pages exist only
//! from the kernel's command line: the plan checks the node has them and names the argument.
//!
//! The kubelet takes huge pages out of allocatable memory; a count the node's memory cannot
//! hold beside its reservation is a finding before any change.

use std::path::Path;

use crate::base::k8s::milli_value;
use crate::base::node::{mem_total_kib, meminfo_kib, MEMINFO};
use crate::facts::Family;
use crate::plan::kubelet::EVICTION_HARD_MEMORY_MIB;
use crate::plan::step::{Live, Mode, Step};
use crate::spec::host::Pages;
use crate::spec::Spec;

use super::{Aspect, Input, Out, Reads};
use crate::facts::Read;

pub(crate) const ASPECT: Aspect = Aspect {
    name: "hugepages",
    reads,
    plan,
    contribute: super::Contribution::Nothing,
};

pub const KEY: &str = "vm.nr_hugepages";
/// Its own file: `98-` sorts before the sysctls' `99-zz-`, which may not set the key too.
pub const PERSIST_PATH: &str = "/etc/sysctl.d/98-eks-nodeinit-hugepages.conf";
/// The node's 1 GiB pages, reserved at boot.
pub const GIGANTIC: &str = "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages";
const FIELD: &str = "host.hugepages.2Mi";

fn reads(spec: &Spec, _: Option<Family>, r: &mut Reads) {
    let Some(h) = &spec.host else { return };
    if h.hugepages_2mi.is_some() {
        r.ask(Read::Sysctl(KEY.into()));
        r.file(MEMINFO);
        r.file(PERSIST_PATH);
    }
    if h.hugepages_1gi.is_some() {
        r.file(GIGANTIC);
    }
}

fn plan(i: &Input, out: &mut Out) {
    let Some(h) = &i.spec.host else { return };
    if let Some(want) = h.hugepages_1gi {
        gigantic(i, want, out);
    }
    let Some(pages) = h.hugepages_2mi else { return };
    if i.spec.sysctls.contains_key(KEY) {
        out.findings.push(
            FIELD,
            format!("sysctls sets {KEY} too; set huge pages in one place"),
        );
        return;
    }
    let Some(meminfo) = i.facts.text(MEMINFO) else {
        out.findings.push(
            FIELD,
            format!("{MEMINFO} could not be read: the node's memory is needed"),
        );
        return;
    };
    let Some((total_kib, size_kib)) =
        mem_total_kib(&meminfo).zip(meminfo_kib(&meminfo, "Hugepagesize"))
    else {
        out.findings.push(
            FIELD,
            format!("{MEMINFO} holds no MemTotal or Hugepagesize"),
        );
        return;
    };
    if size_kib != 2048 {
        out.findings.push(FIELD, format!(
            "the kernel's default huge page is {size_kib} KiB, not 2 MiB (a default_hugepagesz= argument): {KEY} would count those"
        ));
        return;
    }
    let (n, how) = match pages {
        Pages::Count(n) => (n, format!("{n} pages")),
        Pages::Share(p) => {
            let n = total_kib * p / 100 / 2048;
            (n, format!("{p}% of MemTotal {total_kib} KiB = {n} pages"))
        }
    };
    if !fits(i, n, total_kib, out) {
        return;
    }
    live(i, n, out);
    let text = format!(
        "# Written by eks-nodeinit from host.hugepages; rewritten on every run. Do not edit.\n{KEY} = {n}\n"
    );
    let purpose = format!(
        "2Mi huge pages at every boot: {how} ({} MiB, which the kubelet takes from allocatable memory)",
        n * 2
    );
    out.file(
        i.facts,
        FIELD,
        PERSIST_PATH,
        purpose,
        text,
        Mode::Keep(0o644),
    );
}

/// Whether `n` pages leave the node its reservation and eviction threshold; a finding if not.
fn fits(i: &Input, n: u64, total_kib: u64, out: &mut Out) -> bool {
    let reserved_kib = i
        .handoff
        .kubelet
        .kube_reserved("memory")
        .and_then(milli_value)
        .map_or(0, |m| u64::try_from(m / 1000 / 1024).unwrap_or(u64::MAX));
    let need = n
        .saturating_mul(2048)
        .saturating_add(reserved_kib)
        .saturating_add(EVICTION_HARD_MEMORY_MIB * 1024);
    if need < total_kib {
        return true;
    }
    out.findings.push(FIELD, format!(
        "{n} pages ({} MiB) with the kube-reserved memory ({} MiB) and the eviction threshold (100 MiB) leave nothing of the node's {} MiB",
        n * 2,
        reserved_kib / 1024,
        total_kib / 1024
    ));
    false
}

fn live(i: &Input, n: u64, out: &mut Out) {
    match i.facts.sysctl(KEY) {
        Some(Ok(old)) if old.trim() == n.to_string() => {}
        Some(Ok(old)) => out.steps.push(Step::Live(Live {
            key: KEY.into(),
            path: Path::new("/proc/sys/vm/nr_hugepages").into(),
            old: old.clone(),
            new: n.to_string(),
            read_back: Some(
                "the kernel could not find that many free 2 MiB pages (fragmented memory); the Node's allocatable hugepages-2Mi shows what it has".into(),
            ),
        })),
        Some(Err(e)) => out.findings.push(FIELD, format!("{KEY}: {e}")),
        None => out.findings.push(FIELD, format!("{KEY} was not read from the node")),
    }
}

/// 1 GiB pages: reserved only at boot by the kernel's command line; said, never pretended.
fn gigantic(i: &Input, want: u64, out: &mut Out) {
    let have: u64 = i
        .facts
        .text(GIGANTIC)
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0);
    if have < want {
        out.warnings.push(format!(
            "host.hugepages.1Gi: the node has {have} of the {want} 1 GiB pages asked; they are reserved only at boot: add `hugepagesz=1G hugepages={want}` to the kernel command line (the AMI's boot loader config); the agent does not set them"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{findings, run, spec, Facts};
    use super::*;
    use crate::plan::step::File;

    /// 8,000,000 KiB of memory: at most 3,906 pages of 2 MiB.
    const MEMINFO_8G: &str = "MemTotal:        8000000 kB\nHugepagesize:       2048 kB\n";

    fn node() -> Facts {
        Facts::builder(Family::Al2023)
            .file(MEMINFO, MEMINFO_8G)
            .sysctl(KEY, Ok("0"))
            .absent([PERSIST_PATH])
            .build()
    }

    #[test]
    fn a_count_is_set_live_then_persisted() {
        let s = spec(r#"{"cluster":{"name":"c"},"host":{"hugepages":{"2Mi":16}}}"#);
        let out = run(&ASPECT, &s, &node());
        assert!(findings(&out).is_empty(), "{:?}", out.findings);
        assert!(
            matches!(&out.steps[0], Step::Live(Live { key, old, new, .. })
            if key == KEY && old == "0" && new == "16"),
            "{:?}",
            out.steps
        );
        assert!(
            matches!(&out.steps[1], Step::File(File { path, new, .. })
            if path == Path::new(PERSIST_PATH) && new.ends_with("vm.nr_hugepages = 16\n")),
            "{:?}",
            out.steps
        );
    }

    #[test]
    fn pages_the_memory_cannot_hold_are_a_finding_and_no_step() {
        let s = spec(r#"{"cluster":{"name":"c"},"host":{"hugepages":{"2Mi":4000}}}"#);
        let out = run(&ASPECT, &s, &node());
        assert!(out.steps.is_empty(), "{:?}", out.steps);
        let f = findings(&out);
        assert!(
            f[0].starts_with("host.hugepages.2Mi: 4000 pages (8000 MiB)")
                && f[0].ends_with("leave nothing of the node's 7812 MiB"),
            "{f:?}"
        );
    }

    #[test]
    fn missing_gigantic_pages_are_a_warning_naming_the_kernel_argument() {
        let s = spec(r#"{"cluster":{"name":"c"},"host":{"hugepages":{"1Gi":2}}}"#);
        let facts = Facts::builder(Family::Al2023).file(GIGANTIC, "0\n").build();
        let out = run(&ASPECT, &s, &facts);
        assert!(out.steps.is_empty(), "{:?}", out.steps);
        assert!(
            out.warnings[0].contains("has 0 of the 2 1 GiB pages")
                && out.warnings[0].contains("`hugepagesz=1G hugepages=2`"),
            "{:?}",
            out.warnings
        );
    }
}
