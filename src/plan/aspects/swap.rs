//! A swap file (docs/resources.md): made and turned on before the hand-off (`fallocate`,
//! `chmod 0600`, `mkswap`, `swapon`: programs run with argv, no shell), and on at every later
//! boot by a systemd swap unit that `swap.target` wants; the kubelet told to start with swap on
//! (`failSwapOn: false`) and how pods may use it (`memorySwap.swapBehavior`). A file already on with the size asked plans nothing; one
//! of another size on is a finding, as is a filesystem without room for it.

use std::path::Path;

use serde_json::json;

use crate::base::node::{mem_total_kib, MEMINFO};
use crate::facts::{Facts, Family};
use crate::plan::step::{IfFailed, Mode, Remove, Run, Step};
use crate::spec::host::{SwapSize, SwapSpec};
use crate::spec::Spec;

use crate::base::findings::Findings;
use crate::plan::kubelet::KubeletIntent;

use super::{Aspect, Contribution, Input, Out, Reads};
use crate::facts::Read;

pub(crate) const ASPECT: Aspect = Aspect {
    name: "swap",
    reads,
    contribute: Contribution::Kubelet(contribute),
    plan,
};

pub const SWAPS: &str = "/proc/swaps";
/// Makes `swap.target` want the agent's swap unit at every boot.
pub const TARGET_DROPIN: &str = "/etc/systemd/system/swap.target.d/50-eks-nodeinit.conf";
const FIELD: &str = "host.swap";
const PAGE: u64 = 4096;

fn reads(spec: &Spec, _: Option<Family>, r: &mut Reads) {
    let Some(w) = spec.host.as_ref().and_then(|h| h.swap.as_ref()) else {
        return;
    };
    r.file(SWAPS);
    r.file(MEMINFO);
    r.file(unit_path(&w.path));
    r.file(TARGET_DROPIN);
    r.ask(Read::Space(w.path.clone()));
}

fn plan(i: &Input, out: &mut Out) {
    let Some(w) = i.spec.host.as_ref().and_then(|h| h.swap.as_ref()) else {
        return;
    };
    let Some((bytes, how)) = size_bytes(w, i.facts, out) else {
        return;
    };
    let path = w.path.to_string_lossy().into_owned();
    let active = i.facts.text(SWAPS).is_some_and(|t| {
        t.lines()
            .skip(1)
            .any(|l| l.split_whitespace().next() == Some(path.as_str()))
    });
    let Some(space) = i.facts.space(&w.path) else {
        out.findings
            .push(FIELD, format!("{path} was not looked at"));
        return;
    };
    match (active, space.size) {
        (true, Some(s)) if s == bytes => {}
        (true, s) => out.findings.push(FIELD, format!(
            "a swap file of {} bytes is on at {path}: turn it off first (`swapoff {path}`) or set host.swap.size to its size",
            s.unwrap_or(0)
        )),
        (false, Some(s)) if s == bytes => turn_on(i.facts, &w.path, false, out),
        (false, s) => {
            let free = match &space.free {
                Ok(f) => f.saturating_add(s.unwrap_or(0)),
                Err(e) => {
                    out.findings.push(FIELD, e.clone());
                    return;
                }
            };
            if bytes > free {
                out.findings.push(FIELD, format!(
                    "the filesystem holding {path} has {free} bytes free; a {bytes}-byte swap file does not fit (an instance store too small?): set host.swap.size or host.swap.path"
                ));
                return;
            }
            if s.is_some() {
                out.steps.push(Step::Remove(Remove {
                    purpose: format!("the old swap file of another size ({path})"),
                    path: w.path.clone(),
                    restore_if_run_fails: false,
                }));
            }
            make(i.facts, &w.path, bytes, &how, out);
            turn_on(i.facts, &w.path, true, out);
        }
    }
    persist(i, w, out);
}

/// The file's size in bytes, whole pages (as given, or a share of MemTotal), and how it was
/// reached, for the plan.
fn size_bytes(w: &SwapSpec, facts: &Facts, out: &mut Out) -> Option<(u64, String)> {
    let (bytes, how) = match w.size {
        SwapSize::Bytes(b) => (b, format!("{b} bytes")),
        SwapSize::Share(p) => match facts.text(MEMINFO).as_deref().and_then(mem_total_kib) {
            Some(kib) => (
                kib.saturating_mul(1024) / 100 * p,
                format!("{p}% of MemTotal {kib} KiB"),
            ),
            None => {
                out.findings.push(
                    FIELD,
                    format!("{MEMINFO} holds no MemTotal: the share needs it"),
                );
                return None;
            }
        },
    };
    let whole = bytes.div_ceil(PAGE).saturating_mul(PAGE);
    Some((whole, format!("{how} = {whole} bytes in whole 4 KiB pages")))
}

/// The node path of a program's operand: under another root, that root's copy.
fn operand(facts: &Facts, p: &Path) -> String {
    crate::os::fsutil::under(&facts.root, p)
        .to_string_lossy()
        .into_owned()
}

fn run(purpose: String, argv: Vec<String>, skip: Option<String>, todo: &str) -> Step {
    let failed = IfFailed::new("the swap file is not ready", todo);
    Step::Run(Run::new(purpose, argv, 600, failed).skip(skip))
}

/// `fallocate` (the blocks reserved, no data written), then mode 0600 before anything is
/// swapped to it.
fn make(facts: &Facts, path: &Path, bytes: u64, how: &str, out: &mut Out) {
    let f = operand(facts, path);
    out.steps.push(run(
        format!("allocate the swap file: {how}"),
        vec![
            "fallocate".into(),
            "--length".into(),
            bytes.to_string(),
            f.clone(),
        ],
        None,
        "check the filesystem supports fallocate (ext4, XFS) and has room, or set host.swap.path",
    ));
    out.steps.push(run(
        "the swap file readable by root alone".into(),
        vec!["chmod".into(), "0600".into(), f],
        None,
        "check the file system is writable",
    ));
}

/// `mkswap` (re-made when `fresh` is false: an inactive file of the right size, whatever it
/// holds), then `swapon`: only into the running kernel, so not under another root.
fn turn_on(facts: &Facts, path: &Path, fresh: bool, out: &mut Out) {
    let f = operand(facts, path);
    let purpose = match fresh {
        true => "a swap area on the file",
        false => "a swap area on the file that is there, off",
    };
    out.steps.push(run(
        purpose.into(),
        vec!["mkswap".into(), f.clone()],
        None,
        "check the file is not on a filesystem mkswap refuses (a copy-on-write btrfs)",
    ));
    let here = facts.root == Path::new("/");
    out.steps.push(run(
        "swap on".into(),
        vec!["swapon".into(), f],
        (!here).then(|| {
            format!(
                "--root is {}, not /: swap goes on only in the running kernel; on the node it does",
                facts.root.display()
            )
        }),
        "check the kernel allows swap on this filesystem (dmesg)",
    ));
}

/// The swap unit, and `swap.target` wanting it: on at every later boot before the kubelet.
fn persist(i: &Input, w: &SwapSpec, out: &mut Out) {
    let name = unit_name(&w.path);
    let unit = format!(
        "# Written by eks-nodeinit from host.swap; rewritten on every run. Do not edit.\n[Unit]\nDescription=Swap file for the kubelet (eks-nodeinit)\n\n[Swap]\nWhat={}\n",
        w.path.display()
    );
    let unit_path = unit_path(&w.path);
    out.file(
        i.facts,
        FIELD,
        &unit_path,
        "the swap file at every boot",
        unit,
        Mode::Keep(0o644),
    );
    let dropin = format!("# Written by eks-nodeinit from host.swap.\n[Unit]\nWants={name}\n");
    out.file(
        i.facts,
        FIELD,
        TARGET_DROPIN,
        "swap.target wants the swap file",
        dropin,
        Mode::Keep(0o644),
    );
}

fn unit_path(p: &Path) -> String {
    format!("/etc/systemd/system/{}", unit_name(p))
}

/// The swap unit's name for `p`, escaped as `systemd-escape --path --suffix=swap` escapes it.
pub fn unit_name(p: &Path) -> String {
    let s = p.to_string_lossy();
    let trimmed: Vec<&str> = s.split('/').filter(|c| !c.is_empty()).collect();
    let joined = trimmed.join("/");
    let mut out = String::new();
    for (i, b) in joined.bytes().enumerate() {
        match b {
            b'/' => out.push('-'),
            b'.' if i == 0 => out.push_str("\\x2e"),
            b if b.is_ascii_alphanumeric() || b == b':' || b == b'_' || b == b'.' => {
                out.push(char::from(b))
            }
            b => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    if out.is_empty() {
        out.push('-');
    }
    format!("{out}.swap")
}

/// What the kubelet is told.
fn contribute(spec: &Spec, facts: &Facts, k: &mut KubeletIntent, f: &mut Findings) {
    let Some(w) = spec.host.as_ref().and_then(|h| h.swap.as_ref()) else {
        return;
    };
    k.set("failSwapOn", json!(false));
    k.set("memorySwap", json!({"swapBehavior": w.behavior}));
    // The kubelet exits at start with LimitedSwap on cgroup v1 ("only supported with
    // cgroupv2"), which Amazon Linux 2 runs.
    if facts.family() == Some(Family::Al2) && w.behavior == "LimitedSwap" {
        f.push(
            "host.swap.behavior",
            "LimitedSwap needs cgroup v2 and Amazon Linux 2 runs cgroup v1: the kubelet would exit at start; set behavior NoSwap on AL2, or use AL2023",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::aspects::testing::spec;

    #[test]
    fn unit_names_escape_as_systemd_escape_does() {
        for (p, n) in [
            ("/swapfile", "swapfile.swap"),
            ("/var/lib/swap-file", "var-lib-swap\\x2dfile.swap"),
            ("/mnt/.hidden/sw", "mnt-.hidden-sw.swap"),
            ("/.swap", "\\x2eswap.swap"),
            ("/a b", "a\\x20b.swap"),
        ] {
            assert_eq!(unit_name(Path::new(p)), n, "{p}");
        }
    }

    const LIMITED: &str =
        r#"{"cluster":{"name":"c"},"host":{"swap":{"size":"1Gi","behavior":"LimitedSwap"}}}"#;

    fn contributed(family: Family) -> (KubeletIntent, Vec<String>) {
        let facts = Facts::builder(family).build();
        let (mut k, mut f) = (KubeletIntent::default(), Findings::default());
        contribute(&spec(LIMITED), &facts, &mut k, &mut f);
        (k, f.0.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn the_kubelet_starts_with_swap_and_its_behavior() {
        let (k, f) = contributed(Family::Al2023);
        assert!(f.is_empty(), "{f:?}");
        assert_eq!(
            k.config,
            [
                ("failSwapOn", json!(false)),
                ("memorySwap", json!({"swapBehavior": "LimitedSwap"})),
            ]
        );
    }

    #[test]
    fn limited_swap_on_al2_is_a_finding() {
        let (_, f) = contributed(Family::Al2);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].starts_with("host.swap.behavior: LimitedSwap needs cgroup v2"),
            "{f:?}"
        );
    }
}
