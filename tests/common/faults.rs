//! Helpers of the fault suites (tests/it/crash.rs, tests/it/concurrency.rs): node states
//! compared with only what legitimately differs from run to run masked (times, the temp root's
//! own path), the agent's temp-file leftovers, the change steps of a dry run, and the report of
//! a rerun.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::snapshot;

/// The report, relative to the root.
pub const REPORT: &str = "var/lib/eks-nodeinit/report.json";
/// The per-boot hand-off marker, relative to the root.
pub const MARKER: &str = "run/eks-nodeinit/bootstrap-exec";

/// A node's files (relative path → bytes), masked with [`mask`].
pub type State = BTreeMap<PathBuf, Vec<u8>>;

/// Every regular file under `root` but the run lock, masked, without the agent's temp files.
pub fn masked_state(root: &Path) -> State {
    snapshot(root)
        .into_iter()
        .filter(|(p, _)| !is_agent_temp(p))
        .map(|(p, b)| {
            let b = mask(root, &p, b);
            (p, b)
        })
        .collect()
}

/// `bytes` of the file `rel` under `root` with what differs between equal runs masked: in the
/// report, every `*UnixMs` field and the root's path (logind's skip reason names it); in the
/// hand-off marker, the time. A report that is not JSON (torn) is kept as it is.
pub fn mask(root: &Path, rel: &Path, bytes: Vec<u8>) -> Vec<u8> {
    if rel == Path::new(REPORT) {
        let text = String::from_utf8_lossy(&bytes).replace(&root.display().to_string(), "<root>");
        match serde_json::from_str::<Value>(&text) {
            Ok(mut v) => {
                mask_times(&mut v);
                serde_json::to_vec_pretty(&v).unwrap()
            }
            Err(_) => bytes,
        }
    } else if rel == Path::new(MARKER) {
        let mut out = Vec::with_capacity(bytes.len());
        for b in bytes {
            if b.is_ascii_digit() {
                if out.last() != Some(&b'N') {
                    out.push(b'N');
                }
            } else {
                out.push(b);
            }
        }
        out
    } else {
        bytes
    }
}

/// Every `*UnixMs` field, and every check's duration (`ms`), set to 0.
pub fn mask_times(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                // A time, or a check's duration (`ms`): the machine's, not the run's.
                if k.ends_with("UnixMs") || (k == "ms" && x.is_u64()) {
                    *x = Value::from(0);
                } else {
                    mask_times(x);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(mask_times),
        _ => {}
    }
}

/// The agent's temp-file name: `.<file>.eks-nodeinit.<pid>.<random>.tmp` (src/os/fsutil.rs).
pub fn is_agent_temp(p: &Path) -> bool {
    let n = p
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    n.starts_with('.') && n.contains(".eks-nodeinit.") && n.ends_with(".tmp")
}

/// Every agent temp file anywhere under `root`.
pub fn temp_leftovers(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => walk(&p, out),
                Ok(_) if is_agent_temp(&p) => out.push(p),
                _ => {}
            }
        }
    }
    walk(root, &mut out);
    out
}

/// The kinds of the steps of a `--dry-run --output json` plan that change the node (what
/// `Step::is_change` counts), and the plan's `changes`.
pub fn planned_changes(plan_json: &str) -> Result<(Vec<String>, Vec<String>), String> {
    let plan: Value =
        serde_json::from_str(plan_json).map_err(|e| format!("the plan is not JSON: {e}"))?;
    let kinds: Vec<String> = plan["steps"]
        .as_array()
        .ok_or("the plan has no steps array")?
        .iter()
        .map(super::agent::step_kind)
        .collect();
    let changes: Vec<String> = kinds
        .iter()
        .filter(|k| {
            matches!(
                k.as_str(),
                "tag" | "live" | "file" | "remove" | "run" | "unit:restart" | "unit:reload"
            )
        })
        .cloned()
        .collect();
    if plan["changes"].as_u64() != Some(changes.len() as u64) {
        return Err(format!(
            "the plan counts {} changes but lists {changes:?}",
            plan["changes"]
        ));
    }
    Ok((changes, kinds))
}

/// How a rerun's report compares with the clean run's (both masked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportMatch {
    /// Byte for byte.
    Exact,
    /// The same run but for steps an interrupted run had already done: the rerun's steps are a
    /// subsequence of the clean run's, everything else equal (warnings may add the one-hand-off
    /// note).
    Remaining,
}

/// A rerun's report against the clean run's: the report records the *last* run, so a rerun
/// after a kill lists only the steps that were still to do.
pub fn compare_reports(clean: &[u8], got: &[u8]) -> Result<ReportMatch, String> {
    if clean == got {
        return Ok(ReportMatch::Exact);
    }
    let c: Value = serde_json::from_slice(clean).map_err(|e| format!("clean report: {e}"))?;
    let g: Value = serde_json::from_slice(got).map_err(|e| format!("report is not JSON: {e}"))?;
    for k in ["version", "instanceId", "family", "handoff", "tagging"] {
        if c.get(k) != g.get(k) {
            return Err(format!(
                "report {k}: {:?} != clean {:?}",
                g.get(k),
                c.get(k)
            ));
        }
    }
    let cs = c["steps"].as_array().cloned().unwrap_or_default();
    let gs = g["steps"].as_array().cloned().unwrap_or_default();
    let mut it = cs.iter();
    for s in &gs {
        if !it.any(|x| x == s) {
            return Err(format!(
                "report step {s} is not one of the clean run's steps (in order): {cs:?}"
            ));
        }
    }
    let cw: BTreeSet<String> = strings(&c["warnings"]);
    for w in strings(&g["warnings"]) {
        // A rerun may say that bootstrap.sh already ran, or that it never started after a kill
        // between the marker and the execve (and so hands off).
        let about_the_marker = w.contains("bootstrap.sh was already exec'd in this boot")
            || w.contains("bootstrap.sh never started");
        if !cw.contains(&w) && !about_the_marker {
            return Err(format!("report warning not in the clean run's: {w}"));
        }
    }
    Ok(ReportMatch::Remaining)
}

fn strings(v: &Value) -> BTreeSet<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w.as_str().map(str::to_string))
        .collect()
}

/// `got` against `want`, file by file, the report compared with [`compare_reports`] and the
/// paths in `absent` expected absent instead. Returns how the report compared.
pub fn compare_states(
    want: &State,
    got: &State,
    absent: &[&str],
) -> Result<Option<ReportMatch>, String> {
    let mut report = None;
    let keys: BTreeSet<&PathBuf> = want.keys().chain(got.keys()).collect();
    for p in keys {
        let expect = if absent.iter().any(|a| Path::new(a) == p.as_path()) {
            None
        } else {
            want.get(p)
        };
        match (expect, got.get(p)) {
            (Some(w), Some(g)) if p.as_path() == Path::new(REPORT) => {
                report = Some(compare_reports(w, g)?)
            }
            (w, g) if w == g => {}
            (w, g) => {
                return Err(format!(
                    "{}: {}, where the clean run left {}",
                    p.display(),
                    shown(g),
                    shown(w)
                ))
            }
        }
    }
    Ok(report)
}

/// A file's content for a message.
pub fn shown(b: Option<&Vec<u8>>) -> String {
    match b {
        None => "absent".into(),
        Some(b) => {
            let s = String::from_utf8_lossy(b);
            if s.len() > 200 {
                let head: String = s.chars().take(200).collect();
                format!("{head:?}… ({} bytes)", b.len())
            } else {
                format!("{s:?}")
            }
        }
    }
}
