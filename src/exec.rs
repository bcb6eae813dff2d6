//! The executor: runs every step of a plan — the tag beside the local steps, then sysctls,
//! files and logind in plan order, then the report, then the hand-off — and nothing else.

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::aspects::{logind, name_tag, nodeconfig};
use crate::ec2::{Calls, TagError, TagOutcome};
use crate::facts::{Facts, Family, TagState};
use crate::fsutil::{self, under};
use crate::lock::RunLock;
use crate::marker;
use crate::plan::Plan;
use crate::procsys;
use crate::report::{now_ms, Report, StepOutcome, TagResult, TaggingRecord};
use crate::spec::{Spec, TaggingSpec};
use crate::step::Step;
use crate::tagging::{self, Continuation, Foreground, Job};

/// Where the background tagging continuation logs.
pub const TAG_LOG: &str = "/var/log/eks-nodeinit-tagging.log";

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
}

/// Run the plan. On AL2 a successful run does not return: the process becomes bootstrap.sh.
///
/// Two phases, so that a node is never left half-configured by a fault the node itself holds
/// (a full disk, a read-only or unwritable /etc, a sysctl that cannot be opened): first every
/// new file is written and fsynced beside its target and every live sysctl opened; only when
/// all of that succeeded are the files renamed into place, then the live sysctls set, then
/// logind told, then the hand-off. The tag starts with the second phase.
pub async fn execute(
    spec: &Spec,
    facts: &Facts,
    plan: &Plan,
    bus: &Bus,
    lock: Option<&RunLock>,
) -> Result<()> {
    let root = facts.root.as_path();
    let mut report = Report {
        version: env!("CARGO_PKG_VERSION").into(),
        instance_id: plan.instance.instance_id.clone(),
        family: Some(plan.family),
        started_at_unix_ms: now_ms(),
        warnings: plan.warnings.clone(),
        discovery: plan.discovery.clone(),
        ..Default::default()
    };
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
    let tagging = start_tagging(spec, facts, plan);
    if let Err(e) = apply(prepared.changes, bus, &mut report).await {
        return Err(failed_run(root, plan, &mut report, "apply", e.into()));
    }
    let tag_failure = match tagging {
        Some(t) => finish_tagging(t, spec, root, &mut report).await,
        None => {
            report.tagging = already_set(spec, facts);
            None
        }
    };
    if tag_failure.is_none() {
        report.handoff = match plan.family {
            Family::Al2 => "exec bootstrap.sh".into(),
            Family::Al2023 => format!("NodeConfig at {}", nodeconfig::DROPIN),
        };
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
        outcome: format!("failed: {e:#}"),
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
    NotifyLogind {
        step: String,
        usec: u64,
    },
}

/// The first phase: write and fsync every file's new content beside it and open every live
/// sysctl. Nothing the node reads has changed when this returns, whether it failed or not.
fn prepare(root: &Path, plan: &Plan) -> Result<Prepared, ExecError> {
    let mut changes = Vec::new();
    let mut sysctl_changes = Vec::new();
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
            Step::Sysctl { key, new, .. } => sysctl_changes.push(Change::Sysctl {
                step: step.describe(),
                key: key.clone(),
                value: new.clone(),
                prepared: procsys::prepare_live(root, key, new)?,
            }),
            Step::NotifyLogind {
                inhibit_delay_max_usec,
            } => sysctl_changes.push(Change::NotifyLogind {
                step: step.describe(),
                usec: *inhibit_delay_max_usec,
            }),
            Step::ExecBootstrap { argv } => {
                let record = marker::Record::this_process(root, now_ms())?;
                let staged =
                    fsutil::stage(&under(root, marker::MARKER), &record.to_bytes(), 0o644)?;
                handoff = Some((argv.clone(), staged));
            }
            Step::Tag { .. } | Step::Nodeadm { .. } => {}
        }
    }
    // Files into place first, then the live values, then logind (it reads its drop-in).
    changes.extend(sysctl_changes);
    Ok(Prepared { changes, handoff })
}

/// The second phase: rename the staged files into place, set the live sysctls, tell logind.
async fn apply(changes: Vec<Change>, bus: &Bus, report: &mut Report) -> Result<(), ExecError> {
    for c in changes {
        let (step, outcome) = match c {
            Change::Files { step, staged } => {
                for (path, s) in staged {
                    s.commit()?;
                    tracing::info!(path = %path.display(), "wrote file");
                }
                (step, "done".to_string())
            }
            Change::Sysctl {
                step,
                key,
                value,
                prepared,
            } => {
                prepared.apply()?;
                tracing::info!(sysctl = %key, value = %value, "set sysctl");
                (step, "done".to_string())
            }
            Change::NotifyLogind { step, usec } => (step, notify_logind(bus, usec, report).await),
        };
        report.steps.push(StepOutcome { step, outcome });
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
        Ok(v) if v == expected => {
            report.logind_inhibit_delay_max_usec = Some(v);
            tracing::info!(
                inhibit_delay_max_usec = v,
                "systemd-logind took the drop-in"
            );
            format!("done: InhibitDelayMaxUSec={v}")
        }
        Ok(v) => {
            report.logind_inhibit_delay_max_usec = Some(v);
            let msg = format!(
                "logind reports InhibitDelayMaxUSec={v}, expected {expected}: another drop-in or logind.conf overrides it"
            );
            tracing::warn!("{msg}");
            report.warnings.push(msg.clone());
            format!("mismatch: {msg}")
        }
        Err(e) => {
            tracing::warn!("systemd-logind notification failed: {e}");
            report.warnings.push(e.to_string());
            format!("failed: {e}")
        }
    }
}

/// Tagging under way beside the local steps.
struct Tagging {
    job: Job,
    task: TagTask,
}

enum TagTask {
    /// Bounded by the sync budget; may continue in the background.
    Foreground(tokio::task::JoinHandle<(Foreground, Calls)>),
    /// `tagging.required`: the hand-off waits for it.
    Required(tokio::task::JoinHandle<(Result<TagOutcome, TagError>, Calls)>),
}

fn start_tagging(spec: &Spec, facts: &Facts, plan: &Plan) -> Option<Tagging> {
    let (key, value) = plan.steps.iter().find_map(|s| match s {
        Step::Tag { key, value, .. } => Some((key.clone(), value.clone())),
        _ => None,
    })?;
    let t = &spec.tagging;
    let job = Job {
        region: plan.instance.region.clone(),
        endpoint: t.ec2_endpoint.clone(),
        instance_id: plan.instance.instance_id.clone(),
        key,
        value,
        known: facts.tags.clone(),
        policy: Default::default(),
    };
    let delay = tagging::draw_spread(t.spread);
    let j = job.clone();
    let task = if t.required {
        let deadline = t.background_deadline;
        TagTask::Required(tokio::spawn(async move {
            // A required tag is worth the wait: the spread delay is waited out here.
            tagging::background(&j, delay, deadline).await
        }))
    } else {
        let budget = t.sync_budget;
        TagTask::Foreground(tokio::spawn(async move {
            tagging::foreground(&j, delay, budget).await
        }))
    };
    Some(Tagging { job, task })
}

/// Record what tagging came to; a required tag that failed comes back as the error.
async fn finish_tagging(
    t: Tagging,
    spec: &Spec,
    root: &Path,
    report: &mut Report,
) -> Option<TagError> {
    let panicked = |join: tokio::task::JoinError| TagError::Fatal {
        op: "CreateTags",
        instance_id: t.job.instance_id.clone(),
        message: join.to_string(),
    };
    let (result, calls, failure) = match t.task {
        TagTask::Required(h) => match h.await {
            Ok((Ok(o), calls)) => (o.into(), Some(calls), None),
            Ok((Err(e), calls)) => (failed(&e), Some(calls), Some(e)),
            Err(j) => (failed(&panicked(j)), None, None),
        },
        TagTask::Foreground(h) => {
            let (fg, calls) = h
                .await
                .unwrap_or_else(|j| (Foreground::Failed(panicked(j)), Calls::default()));
            match fg {
                Foreground::Done(o) => (o.into(), Some(calls), None),
                Foreground::Failed(e) => {
                    tracing::error!("{e}");
                    report.warnings.push(e.to_string());
                    (failed(&e), Some(calls), None)
                }
                Foreground::Pending {
                    initial_delay,
                    abandoned,
                } => {
                    let job = t.job.continued(abandoned);
                    match spawn_continuation(root, &job, &spec.tagging, initial_delay) {
                        Ok(pid) => {
                            tracing::warn!(
                                pid,
                                "tagging not done within {} ms; continuing in the background",
                                spec.tagging.sync_budget.as_millis()
                            );
                            (TagResult::Background { pid }, None, None)
                        }
                        Err(e) => {
                            let e = TagError::Fatal {
                                op: "CreateTags",
                                instance_id: job.instance_id.clone(),
                                message: format!("{e:#}"),
                            };
                            tracing::error!("{e}");
                            (failed(&e), Some(calls), None)
                        }
                    }
                }
            }
        }
    };
    if matches!(result, TagResult::Created | TagResult::AlreadySet) {
        tracing::info!(value = %t.job.value, "Name tag in place");
    }
    report.tagging = Some(TaggingRecord {
        result,
        calls,
        key: t.job.key,
        value: t.job.value,
        background: false,
        finished_at_unix_ms: None,
    });
    failure
}

fn failed(e: &TagError) -> TagResult {
    TagResult::Failed {
        error: e.to_string(),
    }
}

/// No tag step, and the Name already holds the value: recorded as a foreground outcome with no
/// calls, so that the report of a second run still answers "is it tagged?".
fn already_set(spec: &Spec, facts: &Facts) -> Option<TaggingRecord> {
    if !spec.tagging.enabled {
        return None;
    }
    let TagState::Is(value) = facts.tags.get(name_tag::KEY) else {
        return None;
    };
    Some(TaggingRecord {
        result: TagResult::AlreadySet,
        calls: Some(Calls::default()),
        key: name_tag::KEY.into(),
        value,
        background: false,
        finished_at_unix_ms: None,
    })
}

/// Start `eks-nodeinit tag-continue` in its own session, logging to a file, so it outlives the
/// hand-off (exec of bootstrap.sh) and the unit's process. Its job goes as JSON on its stdin.
fn spawn_continuation(
    root: &Path,
    job: &Job,
    t: &TaggingSpec,
    initial_delay: Duration,
) -> Result<u32> {
    use std::io::Write;
    use std::os::unix::process::CommandExt;
    let log = under(root, TAG_LOG);
    if let Some(d) = log.parent() {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .with_context(|| format!("opening {}", log.display()))?;
    let exe = std::env::current_exe().context("locating the eks-nodeinit binary")?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("tag-continue")
        .arg("--root")
        .arg(root)
        .stdin(Stdio::piped())
        .stdout(out.try_clone()?)
        .stderr(out);
    // SAFETY: setsid is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .context("starting the background tagging continuation")?;
    let c = Continuation {
        job: job.clone(),
        initial_delay_ms: u64::try_from(initial_delay.as_millis()).unwrap_or(u64::MAX),
        deadline_ms: u64::try_from(t.background_deadline.as_millis()).unwrap_or(u64::MAX),
    };
    let mut stdin = child.stdin.take().context("the continuation's stdin")?;
    serde_json::to_writer(&mut stdin, &c).context("handing the job to the continuation")?;
    stdin.flush()?;
    Ok(child.id())
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
