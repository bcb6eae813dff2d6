//! Executing a plan: under a lock, step by step, then a report under
//! `<root>/var/lib/eks-nodeinit/`. The hand-off itself is left to the caller (it may exec).

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::fsutil::{self, under};
use crate::logind;
use crate::plan::{self, Plan, Step};
use crate::sysctl;

pub const LOCK_PATH: &str = "/run/lock/eks-nodeinit.lock";
pub const REPORT_PATH: &str = "/var/lib/eks-nodeinit/report.json";

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("another eks-nodeinit run holds {0}; wait for it to finish")]
    Locked(PathBuf),
    #[error("cannot take the lock {path}: {source}")]
    Lock {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Fs(#[from] fsutil::FsError),
    #[error(transparent)]
    Sysctl(#[from] sysctl::SysctlError),
}

/// How to reach logind.
#[derive(Debug, Clone)]
pub enum Bus {
    /// Connect to this address (the system bus, or a test bus).
    Address(String),
    /// Do not notify logind, and say why.
    Skip(String),
}

/// The exclusive run lock; released when dropped (and on exec: the fd is close-on-exec).
pub struct RunLock {
    _lock: nix::fcntl::Flock<std::fs::File>,
}

/// Take the run lock: refuse at once when another run holds it, or, with `wait`, block until
/// it is released (the background tagging continuation waits for the foreground run).
pub fn lock(root: &Path, wait: bool) -> Result<RunLock, ApplyError> {
    let path = under(root, LOCK_PATH);
    let lerr = |source| ApplyError::Lock {
        path: path.clone(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(lerr)?;
    }
    let f = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(lerr)?;
    let how = if wait {
        nix::fcntl::FlockArg::LockExclusive
    } else {
        nix::fcntl::FlockArg::LockExclusiveNonblock
    };
    match nix::fcntl::Flock::lock(f, how) {
        Ok(l) => Ok(RunLock { _lock: l }),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Err(ApplyError::Locked(path)),
        Err((_, e)) => Err(lerr(std::io::Error::from(e))),
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StepOutcome {
    pub step: String,
    pub outcome: String,
}

#[derive(Debug, Clone, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub version: String,
    pub instance_id: String,
    pub family: String,
    pub started_at_unix_ms: u128,
    pub finished_at_unix_ms: u128,
    pub steps: Vec<StepOutcome>,
    /// What logind reported after the restart, in microseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logind_inhibit_delay_max_usec: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tagging: Option<serde_json::Value>,
    pub handoff: String,
    pub warnings: Vec<String>,
}

pub fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

pub fn describe(s: &Step) -> String {
    match s {
        Step::Tag { key, value, .. } => format!("tag {key}={value}"),
        Step::Sysctl { key, new, .. } => format!("sysctl {key}={new}"),
        Step::File { path, .. } => format!("write {}", path.display()),
        Step::NotifyLogind { .. } => "restart systemd-logind".into(),
        Step::ExecBootstrap { argv } => format!("exec {}", argv[0]),
        Step::Nodeadm { dropin, .. } => format!("nodeadm reads {}", dropin.display()),
    }
}

/// Apply the local steps (sysctls, files, logind). Tag and hand-off steps are the caller's.
/// Stops at the first failure; what was done so far is in `report.steps`.
pub async fn apply_local(
    root: &Path,
    plan: &Plan,
    bus: &Bus,
    report: &mut Report,
) -> Result<(), ApplyError> {
    for step in &plan.steps {
        let name = describe(step);
        match step {
            Step::Sysctl { key, new, .. } => {
                sysctl::write_live(root, key, new)?;
                tracing::info!(sysctl = %key, value = %new, "set sysctl");
                report.steps.push(StepOutcome {
                    step: name,
                    outcome: "done".into(),
                });
            }
            Step::File {
                path,
                new,
                mode,
                backup,
                old,
                ..
            } => {
                let full = under(root, path);
                if let (Some(b), Some(orig)) = (backup, old) {
                    let bfull = under(root, b);
                    if !bfull.exists() {
                        fsutil::write_atomic(&bfull, orig.as_bytes(), *mode)?;
                    }
                }
                fsutil::write_atomic(&full, new.as_bytes(), *mode)?;
                tracing::info!(path = %path.display(), "wrote file");
                report.steps.push(StepOutcome {
                    step: name,
                    outcome: "done".into(),
                });
            }
            Step::NotifyLogind {
                inhibit_delay_max_usec,
            } => {
                let outcome = notify_logind(bus, *inhibit_delay_max_usec, report).await;
                report.steps.push(StepOutcome {
                    step: name,
                    outcome,
                });
            }
            Step::Tag { .. } | Step::ExecBootstrap { .. } | Step::Nodeadm { .. } => {}
        }
    }
    Ok(())
}

/// Tell logind; never fails the run (the drop-in is on disk and applies at next boot anyway),
/// but says exactly what happened.
async fn notify_logind(bus: &Bus, expected: u64, report: &mut Report) -> String {
    let address = match bus {
        Bus::Skip(why) => {
            tracing::warn!("not notifying systemd-logind: {why}");
            return format!("skipped: {why}");
        }
        Bus::Address(a) => a,
    };
    let conn = match logind::connect(address).await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("not notifying systemd-logind: {e}");
            return format!("skipped: {e}");
        }
    };
    match logind::restart_and_read(&conn, expected, Duration::from_secs(5)).await {
        Ok(v) => {
            report.logind_inhibit_delay_max_usec = Some(v);
            if v == expected {
                tracing::info!(
                    inhibit_delay_max_usec = v,
                    "systemd-logind took the drop-in"
                );
                format!("done: InhibitDelayMaxUSec={v}")
            } else {
                let msg = format!(
                    "logind reports InhibitDelayMaxUSec={v}, expected {expected}: another drop-in or logind.conf overrides it"
                );
                tracing::warn!("{msg}");
                report.warnings.push(msg.clone());
                format!("mismatch: {msg}")
            }
        }
        Err(e) => {
            tracing::warn!("systemd-logind notification failed: {e}");
            report.warnings.push(e.to_string());
            format!("failed: {e}")
        }
    }
}

/// Write the report (atomically, secrets redacted).
pub fn write_report(root: &Path, plan: &Plan, report: &Report) -> Result<PathBuf, ApplyError> {
    let path = under(root, REPORT_PATH);
    let mut text = serde_json::to_string_pretty(report).expect("serialises");
    text.push('\n');
    let text = plan::redact(plan, &text);
    fsutil::write_atomic(&path, text.as_bytes(), 0o644)?;
    Ok(path)
}
