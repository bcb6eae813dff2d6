//! The executor: runs every step of a plan — the tag beside the local steps (its session lives
//! with tagging), then files, live sysctls and unit restarts, then the report, then the
//! hand-off — and nothing else. It knows steps and their effects, never the aspect that planned
//! them: everything it runs is in the plan.

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

use crate::fsutil::{self, under};
use crate::lock::RunLock;
use crate::marker;
use crate::plan::Plan;
use crate::procsys;
use crate::report::{now_ms, Outcome, Report, StepOutcome, TaggingRecord};
use crate::step::Step;
use crate::systemd::{self, UnitRestart};
use crate::tagging::{ReadyClient, Session};

impl From<systemd::SystemdError> for ExecError {
    fn from(e: systemd::SystemdError) -> Self {
        ExecError::Systemd(Box::new(e))
    }
}

/// How to reach logind.
#[derive(Debug, Clone)]
pub enum Bus {
    /// Connect to this address (the system bus, or a test bus).
    Address(String),
    /// Do not notify logind, and say why.
    Skip(String),
}

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error(transparent)]
    Fs(#[from] fsutil::FsError),
    #[error(transparent)]
    Sysctl(#[from] procsys::SysctlError),
    #[error("cannot exec {path}: {source}")]
    Exec {
        path: PathBuf,
        #[source]
        source: nix::Error,
    },
    #[error(transparent)]
    Marker(#[from] marker::MarkerError),
    #[error("hand-off argument holds a NUL byte")]
    Nul,
    #[error(transparent)]
    Systemd(Box<systemd::SystemdError>),
    #[error("cannot start {unit}, which the warm-pool hold skipped in this boot: {why}; the node does not join until it runs: `systemctl start {unit}`")]
    NoBus { unit: String, why: String },
    #[error("systemd did not reload its units ({why}): nodeadm-config.service would start without the proxy drop-ins written now; run `systemctl daemon-reload` and restart nodeadm-config.service")]
    Reload { why: String },
    #[error("the CA trust store was not rebuilt: {tool} {why}; the CA files are in place: run it by hand, then restart containerd")]
    Trust { tool: String, why: String },
}

/// Run the plan. On AL2 a successful run does not return: the process becomes bootstrap.sh.
///
/// Two phases, so that a node is never left half-configured by a fault the node itself holds
/// (a full disk, a read-only or unwritable /etc, a sysctl that cannot be opened): first every
/// new file is written and fsynced beside its target and every live sysctl opened; only when
/// all of that succeeded are the files renamed into place, then the live sysctls set, then
/// logind told, then the hand-off. The tag starts with the second phase, on `ec2` when the
/// command made a client ready for it.
pub(crate) async fn execute(
    root: &Path,
    plan: &Plan,
    bus: &Bus,
    lock: Option<&RunLock>,
    ec2: Option<ReadyClient>,
) -> Result<()> {
    let mut report = Report::start(plan);
    for w in &plan.warnings {
        tracing::warn!("{w}");
    }
    let prepared = match prepare(root, plan) {
        Ok(p) => p,
        Err(e) => {
            let e = anyhow::Error::new(e).context("nothing was changed");
            return Err(failed_run(root, plan, &mut report, "prepare", e));
        }
    };
    // The report too is staged before any change; its final content replaces this one.
    let staged_report = match report.stage(root, &plan.secrets) {
        Ok(s) => s,
        Err(e) => {
            let e = anyhow::Error::new(e).context("nothing was changed");
            return Err(failed_run(root, plan, &mut report, "prepare", e));
        }
    };
    let tagging = Session::start(plan, ec2);
    if let Err(e) = apply(root, prepared.changes, bus, &mut report).await {
        return Err(failed_run(root, plan, &mut report, "apply", e.into()));
    }
    let tag_failure = match tagging {
        Some(t) => t.finish(root, &mut report).await,
        None => {
            report.tagging = plan
                .tag_in_place
                .clone()
                .map(|(key, value)| TaggingRecord::already_set(key, value));
            None
        }
    };
    if tag_failure.is_none() {
        report.handoff = plan.handoff().unwrap_or_default();
    }
    report.finished_at_unix_ms = now_ms();
    let rpath = report.commit(root, staged_report, &plan.secrets)?;
    tracing::info!(report = %rpath.display(), "report written");
    if let Some(e) = tag_failure {
        return Err(anyhow::Error::new(e).context("tagging.required is on"));
    }
    let Some((argv, marker)) = prepared.handoff else {
        return Ok(());
    };
    tracing::info!(path = %argv.first().map_or("", String::as_str), "handing off to bootstrap.sh");
    marker.commit()?;
    if let Some(l) = lock {
        l.keep_across_exec()
            .context("keeping the run lock for bootstrap.sh")?;
    }
    let e = match exec(&argv) {
        Err(e) => e,
        Ok(never) => match never {},
    };
    // Not handed off after all: a rerun must try again, and the report must say so.
    let _ = std::fs::remove_file(under(root, marker::MARKER));
    report.handoff = String::new();
    Err(failed_run(root, plan, &mut report, "hand-off", e.into()))
}

/// Record a failed phase in the report (as far as the disk lets it be written) and give back
/// the error the caller sees.
fn failed_run(
    root: &Path,
    plan: &Plan,
    report: &mut Report,
    phase: &str,
    e: anyhow::Error,
) -> anyhow::Error {
    report.steps.push(StepOutcome {
        step: phase.into(),
        outcome: Outcome::Failed(format!("{e:#}")),
    });
    report.finished_at_unix_ms = now_ms();
    if let Err(w) = report.write(root, &plan.secrets) {
        tracing::error!("cannot write the report either: {w}");
    }
    e
}

/// Everything the second phase does, made ready by the first.
struct Prepared {
    changes: Vec<Change>,
    /// bootstrap.sh's argv and the per-boot marker, staged.
    handoff: Option<(Vec<String>, fsutil::Staged)>,
}

enum Change {
    /// A file (and its one-time backup) staged beside its target, with its node path.
    Files {
        step: String,
        staged: Vec<(PathBuf, fsutil::Staged)>,
    },
    Sysctl {
        step: String,
        key: String,
        value: String,
        prepared: procsys::PreparedSysctl,
    },
    RestartUnit {
        step: String,
        restart: UnitRestart,
    },
    /// The warm-pool hold of this boot released: its marker removed, the unit it held started.
    Release {
        step: String,
        marker: PathBuf,
        start_unit: Option<String>,
    },
    StartUnit {
        step: String,
        unit: String,
    },
    Reload {
        step: String,
        required: bool,
    },
    Trust {
        step: String,
        rebuild: crate::step::TrustRebuild,
    },
    /// A record of earlier work that this run's changes make stale, removed before any of them.
    Forget {
        path: PathBuf,
    },
}

/// The first phase: write and fsync every file's new content beside it and open every live
/// sysctl. Nothing the node reads has changed when this returns, whether it failed or not.
fn prepare(root: &Path, plan: &Plan) -> Result<Prepared, ExecError> {
    let mut changes = Vec::new();
    // The trust store's rebuild record goes before the anchors change: a run stopped between
    // them and the rebuild finds no record, and plans the rebuild again.
    changes.extend(plan.steps.iter().find_map(|s| match s {
        Step::RebuildTrust(t) => t.record.as_ref().map(|(path, _)| Change::Forget {
            path: under(root, path),
        }),
        _ => None,
    }));
    let mut after_files = Vec::new();
    let mut handoff = None;
    for step in &plan.steps {
        match step {
            Step::File {
                path,
                new,
                mode,
                backup,
                old,
                ..
            } => {
                let mut staged = Vec::new();
                if let (Some(b), Some(orig)) = (backup, old) {
                    let bfull = under(root, b);
                    if !bfull.exists() {
                        staged.push((b.clone(), fsutil::stage(&bfull, orig.as_bytes(), *mode)?));
                    }
                }
                let s = fsutil::stage(&under(root, path), new.as_bytes(), *mode)?;
                staged.push((path.clone(), s));
                changes.push(Change::Files {
                    step: step.describe(),
                    staged,
                });
            }
            Step::Sysctl { key, new, .. } => after_files.push(Change::Sysctl {
                step: step.describe(),
                key: key.clone(),
                value: new.clone(),
                prepared: procsys::prepare_live(root, key, new)?,
            }),
            Step::NotifyLogind { .. } => {
                after_files.extend(step.unit_restart().map(|restart| Change::RestartUnit {
                    step: step.describe(),
                    restart,
                }))
            }
            Step::ExecBootstrap { argv } => {
                let record = marker::Record::this_process(root, now_ms())?;
                let staged =
                    fsutil::stage(&under(root, marker::MARKER), &record.to_bytes(), 0o644)?;
                handoff = Some((argv.clone(), staged));
            }
            Step::ReleaseHold(r) => after_files.push(Change::Release {
                step: step.describe(),
                marker: under(root, &r.marker),
                start_unit: r.start_unit.clone(),
            }),
            Step::StartUnit(u) => after_files.push(Change::StartUnit {
                step: step.describe(),
                unit: u.unit.clone(),
            }),
            Step::ReloadUnits { required, .. } => after_files.push(Change::Reload {
                step: step.describe(),
                required: *required,
            }),
            Step::RebuildTrust(t) => after_files.push(Change::Trust {
                step: step.describe(),
                rebuild: t.clone(),
            }),
            // The hold's marker is a file step of its own; the hold itself runs nothing.
            Step::Tag { .. } | Step::Nodeadm(_) | Step::HoldHandoff(_) => {}
        }
    }
    // Files into place first, then the live values, then unit restarts (they read the files).
    changes.extend(after_files);
    Ok(Prepared { changes, handoff })
}

/// The second phase: rename the staged files into place, set the live sysctls, tell logind.
async fn apply(
    root: &Path,
    changes: Vec<Change>,
    bus: &Bus,
    report: &mut Report,
) -> Result<(), ExecError> {
    for c in changes {
        let (step, outcome) = match c {
            Change::Files { step, staged } => {
                for (path, s) in staged {
                    s.commit()?;
                    tracing::info!(path = %path.display(), "wrote file");
                }
                (step, Outcome::Done)
            }
            Change::Sysctl {
                step,
                key,
                value,
                prepared,
            } => {
                prepared.apply()?;
                tracing::info!(sysctl = %key, value = %value, "set sysctl");
                (step, Outcome::Done)
            }
            Change::RestartUnit { step, restart } => {
                (step, restart_unit(bus, &restart, report).await)
            }
            Change::Release {
                step,
                marker,
                start_unit,
            } => {
                release(bus, &marker, start_unit.as_deref()).await?;
                (step, Outcome::Done)
            }
            Change::StartUnit { step, unit } => (step, start_unit(bus, &unit, report).await),
            Change::Forget { path } => {
                fsutil::remove(&path)?;
                continue;
            }
            Change::Reload { step, required } => (step, reload(bus, required, report).await?),
            Change::Trust { step, rebuild } => match rebuild.skip {
                Some(why) => (step, Outcome::Skipped(why)),
                None => {
                    rebuild_trust(&rebuild.argv).await?;
                    if let Some((path, content)) = &rebuild.record {
                        fsutil::write_atomic(&under(root, path), content.as_bytes(), 0o644)?;
                    }
                    (step, Outcome::Done)
                }
            },
        };
        report.steps.push(StepOutcome { step, outcome });
    }
    Ok(())
}

/// Restart a unit and read its property back; never fails the run (the unit's files are on
/// disk and apply at next boot anyway), but says exactly what happened.
async fn restart_unit(bus: &Bus, r: &UnitRestart, report: &mut Report) -> Outcome {
    let (unit, property, expected) = (r.unit, r.check.property, r.check.expected);
    let conn = match connect(bus).await {
        Ok(c) => c,
        Err(why) => {
            tracing::warn!("not notifying {}: {why}", name(unit));
            return Outcome::Skipped(why);
        }
    };
    match systemd::restart_and_read(&conn, r, Duration::from_secs(5)).await {
        Ok(v) => {
            report.record_property(&r.check, v);
            if v == expected {
                tracing::info!(unit, property, value = v, "{} took the change", name(unit));
                return Outcome::DoneWith(format!("{property}={v}"));
            }
            let msg = format!(
                "{} reports {property}={v}, expected {expected}: another drop-in or its main config overrides it",
                name(unit)
            );
            tracing::warn!("{msg}");
            report.warnings.push(msg.clone());
            Outcome::Mismatch(msg)
        }
        Err(e) => {
            tracing::warn!("{} notification failed: {e}", name(unit));
            report.warnings.push(e.to_string());
            Outcome::Failed(e.to_string())
        }
    }
}

/// Queue a unit's start; never fails the run (in the agent's unit's run the unit is pulled in
/// anyway), but says what happened.
async fn start_unit(bus: &Bus, unit: &str, report: &mut Report) -> Outcome {
    match start(bus, unit).await {
        Ok(()) => {
            tracing::info!(unit, "start queued over D-Bus");
            Outcome::Done
        }
        Err(e) => {
            let msg = format!("{unit} not started: {e}");
            tracing::warn!("{msg}");
            report.warnings.push(msg.clone());
            Outcome::Skipped(msg)
        }
    }
}

/// Have systemd reload its units. A failure fails the run when `required` (AL2023: nodeadm's
/// config phase starts right after the agent); else (AL2, whose bootstrap.sh reloads too) it is
/// a warning naming what it means. Under another root with no bus asked for, nothing is told.
async fn reload(bus: &Bus, required: bool, report: &mut Report) -> Result<Outcome, ExecError> {
    if let Bus::Skip(why) = bus {
        return Ok(Outcome::Skipped(why.clone()));
    }
    let r = match connect(bus).await {
        Ok(conn) => systemd::reload(&conn).await.map_err(|e| e.to_string()),
        Err(why) => Err(why),
    };
    Ok(match r {
        Ok(()) => {
            tracing::info!("systemd reloaded its units");
            Outcome::Done
        }
        Err(e) if required => return Err(ExecError::Reload { why: e }),
        Err(e) => {
            let msg = format!("systemd did not reload its units ({e}): units started before the next reload or boot run without the drop-ins written now");
            tracing::warn!("{msg}");
            report.warnings.push(msg.clone());
            Outcome::Skipped(msg)
        }
    })
}

/// Run the trust store's tool (argv, no shell) and wait for it, up to a minute. Its failure fails
/// the run: containerd and kubelet would start without the CAs the config asks for.
async fn rebuild_trust(argv: &[String]) -> Result<(), ExecError> {
    let tool = argv.first().cloned().unwrap_or_default();
    let err = |why: String| ExecError::Trust {
        tool: tool.clone(),
        why,
    };
    let child = tokio::process::Command::new(&tool)
        .args(&argv[1..])
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = match tokio::time::timeout(Duration::from_secs(60), child).await {
        Err(_) => return Err(err("did not finish within 60 s".into())),
        Ok(Err(e)) => return Err(err(format!("could not be run: {e}"))),
        Ok(Ok(out)) => out,
    };
    if out.status.success() {
        tracing::info!(tool = %tool, "trust store rebuilt");
        return Ok(());
    }
    let said = String::from_utf8_lossy(&out.stderr);
    let tail: String = said
        .trim()
        .chars()
        .rev()
        .take(300)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    Err(err(format!(
        "failed ({}): {}",
        out.status,
        crate::text::printable(&tail)
    )))
}

/// Remove this boot's hold marker, then start the unit the hold kept from running (its
/// condition is checked when the start job runs, so the marker goes first). Unlike a logind
/// restart, a unit that cannot be started fails the run, and the marker is put back so that a
/// rerun releases again: without that unit the node never joins.
async fn release(bus: &Bus, marker: &Path, start_unit: Option<&str>) -> Result<(), ExecError> {
    let held = std::fs::read(marker).ok();
    fsutil::remove(marker)?;
    tracing::info!(marker = %marker.display(), "warm-pool hold released");
    let Some(unit) = start_unit else {
        return Ok(());
    };
    let Err(e) = start(bus, unit).await else {
        tracing::info!(unit, "started over D-Bus: nodeadm takes the node from here");
        return Ok(());
    };
    if let Some(h) = held {
        if let Err(w) = fsutil::write_atomic(marker, &h, 0o644) {
            tracing::error!("cannot put the hold marker back either: {w}");
        }
    }
    Err(e)
}

async fn start(bus: &Bus, unit: &str) -> Result<(), ExecError> {
    let conn = connect(bus).await.map_err(|why| ExecError::NoBus {
        unit: unit.to_string(),
        why,
    })?;
    systemd::queue(&conn, unit, systemd::Job::Start).await?;
    Ok(())
}

/// A connection to systemd, or why there is none.
async fn connect(bus: &Bus) -> Result<zbus::Connection, String> {
    match bus {
        Bus::Skip(why) => Err(why.clone()),
        Bus::Address(a) => systemd::connect(a).await.map_err(|e| e.to_string()),
    }
}

/// A unit as logs name it: `systemd-logind`.
fn name(unit: &str) -> &str {
    unit.trim_end_matches(".service")
}

/// Replace this process with bootstrap.sh. No shell: the argv goes to execv as is.
pub fn exec(argv: &[String]) -> Result<std::convert::Infallible, ExecError> {
    let cargs: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(a.as_bytes()).map_err(|_| ExecError::Nul))
        .collect::<Result<_, _>>()?;
    let path = cargs.first().ok_or(ExecError::Nul)?;
    nix::unistd::execv(path, &cargs).map_err(|source| ExecError::Exec {
        path: PathBuf::from(&argv[0]),
        source,
    })
}
