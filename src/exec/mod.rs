//! The executor: runs every step of a plan in the plan's order — the tag beside them from the
//! start (its session lives with tagging) — then writes the report, then hands off, and nothing
//! else. It knows the step vocabulary's effects, never the aspect that planned them: everything
//! it runs is in the plan.

pub mod after;
mod call;
pub mod checks;
pub mod report;
pub mod retire;
pub mod tagging;

use std::collections::BTreeMap;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

use crate::exec::report::{now_ms, Outcome, Report, StepOutcome};
use crate::exec::tagging::{ReadyClient, Session};
use crate::os::fsutil::{self, under};
use crate::os::lock::RunLock;
use crate::os::marker;
use crate::os::procsys;
use crate::os::systemd::{self, PropertyCheck};
use crate::plan::step::{name, CheckStep, Handoff, IfFailed, Run, Step, Unit, UnitJob, When};
use crate::plan::Plan;

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
    /// A required step failed: what it leaves and what to do.
    #[error("{0}")]
    Required(String),
}

/// Run the plan. On AL2 a successful run does not return: the process becomes bootstrap.sh.
///
/// Two phases, so that a node is never left half-configured by a fault the node itself holds
/// (a full disk, a read-only or unwritable /etc, a sysctl that cannot be opened): first every
/// new file is written and fsynced beside its target and every live value opened; only when
/// all of that succeeded does the second phase run the steps in plan order (files renamed into
/// place, values set, programs run, units told), then the hand-off. The tag starts with the
/// second phase, on `ec2` when the command made a client ready for it.
pub(crate) async fn execute(
    root: &Path,
    plan: &Plan,
    bus: &Bus,
    lock: Option<&RunLock>,
    ec2: Option<ReadyClient>,
    early: Report,
) -> Result<()> {
    let mut report = Report::start(plan);
    for w in &plan.warnings {
        tracing::warn!("{w}");
    }
    if let Err(e) = lead_with_early(root, plan, bus, early, &mut report).await {
        return Err(failed_run(root, plan, &mut report, "before discovery", e));
    }
    let timelines = timelines(plan);
    report.stamp(&timelines, "agent started", report.started_at_unix_ms);
    report.stamp(&timelines, "planned", now_ms());
    if let Some(e) = first_phase(root, plan, &timelines, &mut report).await {
        return Err(failed_run(root, plan, &mut report, "checks", e));
    }
    let (mut prepared, staged_report) = match stage_all(root, plan, &report).await {
        Ok(p) => p,
        Err(e) => return Err(failed_run(root, plan, &mut report, "prepare", e)),
    };
    let tagging = Session::start(plan, ec2);
    let beside = checks_of(plan, When::Beside);
    let (applied, results) = tokio::join!(
        apply(root, &plan.steps, &mut prepared, bus, &mut report),
        checks::run(&beside, root)
    );
    checks::record(&beside, When::Beside, results, &mut report);
    report.stamp(&timelines, "applied", now_ms());
    if let Err(e) = applied {
        return Err(failed_run(root, plan, &mut report, "apply", e.into()));
    }
    let tag_failure = match tagging {
        Some(t) => t.finish(root, &mut report).await,
        None => None,
    };
    // The checks before the kubelet that the plan leaves here (bootstrap.sh starts it): they
    // stop nothing, their results go with the report.
    let gate = checks_of(plan, When::Gate);
    let results = checks::run(&gate, root).await;
    checks::record(&gate, When::Gate, results, &mut report);
    if tag_failure.is_none() {
        report.handoff = plan.handoff().unwrap_or_default();
    }
    report.finished_at_unix_ms = now_ms();
    if !report.handoff.is_empty() {
        report.stamp(&timelines, "handed off", report.finished_at_unix_ms);
    }
    let rpath = report.commit(root, staged_report, &plan.secrets)?;
    tracing::info!(report = %rpath.display(), "report written");
    if let Some(e) = tag_failure {
        return Err(anyhow::Error::new(e).context("the tag step is required by its policy"));
    }
    let Some((argv, env, marker)) = prepared.handoff else {
        return Ok(());
    };
    tracing::info!(path = %argv.first().map_or("", String::as_str), "handing off: the process becomes this program");
    marker.commit()?;
    if let Some(l) = lock {
        l.keep_across_exec()
            .context("keeping the run lock for the program the node is handed to")?;
    }
    let e = match exec(&argv, &env) {
        Err(e) => e,
        Ok(never) => match never {},
    };
    // Not handed off after all: a rerun must try again, and the report must say so.
    let _ = std::fs::remove_file(under(root, marker::MARKER));
    report.handoff = String::new();
    Err(failed_run(root, plan, &mut report, "hand-off", e.into()))
}

/// The plan's checks of phase `when`.
fn checks_of(plan: &Plan, when: When) -> Vec<&CheckStep> {
    let mut of = Vec::new();
    for s in &plan.steps {
        if let Step::Check(c) = s {
            if c.when == when {
                of.push(c);
            }
        }
    }
    of
}

/// The report properties that receive the run's phases: the plan's, and those its checks
/// record into.
fn timelines(plan: &Plan) -> Vec<String> {
    let checks = plan.steps.iter().filter_map(|s| match s {
        Step::Check(c) => c.record.as_ref().map(|(p, _)| p.clone()),
        _ => None,
    });
    let all: std::collections::BTreeSet<String> =
        plan.timelines.iter().cloned().chain(checks).collect();
    all.into_iter().collect()
}

/// The steps before discovery lead the report: those `init` ran already (`early`), or, when it
/// did not, run now.
async fn lead_with_early(
    root: &Path,
    plan: &Plan,
    bus: &Bus,
    early: Report,
    report: &mut Report,
) -> Result<()> {
    let early = match plan.early_done {
        true => early,
        false => before_discovery(root, &plan.early, bus).await?,
    };
    report.before_discovery = early.steps.len();
    report.steps = early.steps;
    report.warnings.extend(early.warnings);
    report.properties.extend(early.properties);
    Ok(())
}

/// The steps before discovery ([`Plan::early`]): each file staged and fsynced, then every step
/// run in order, as the two phases of [`execute`] run theirs. What they came to goes into the
/// run's report (given to [`execute`]).
pub(crate) async fn before_discovery(root: &Path, steps: &[Step], bus: &Bus) -> Result<Report> {
    let mut report = Report::default();
    if steps.is_empty() {
        return Ok(report);
    }
    let unchanged = |e: ExecError| anyhow::Error::new(e).context("nothing was changed");
    let mut prepared = prepare(root, steps).await.map_err(unchanged)?;
    let files = prepared.files.values_mut().flatten().map(|(_, s)| s);
    fsutil::sync_all(files).map_err(|e| unchanged(e.into()))?;
    apply(root, steps, &mut prepared, bus, &mut report)
        .await
        .context("the steps before discovery")?;
    Ok(report)
}

/// The steps before any change. When one fails, the plan's on-failure steps run and the error
/// that ends the run comes back: nothing was changed, nothing is handed off.
async fn first_phase(
    root: &Path,
    plan: &Plan,
    timelines: &[String],
    report: &mut Report,
) -> Option<anyhow::Error> {
    let first = checks_of(plan, When::First);
    let results = checks::run(&first, root).await;
    let failed = checks::record(&first, When::First, results, report);
    if failed == 0 {
        return None;
    }
    for step in &plan.on_failure {
        match step {
            Step::Record(r) => report.record(&r.property, &r.key, r.value.clone()),
            Step::Call(c) => {
                let said = call::run(c).await;
                if let Some((property, key)) = &c.record {
                    report.record(property, key, serde_json::Value::String(said));
                }
            }
            other => tracing::warn!("not run on failure: {}", other.describe()),
        }
    }
    report.stamp(timelines, "verdict", now_ms());
    Some(anyhow::anyhow!(checks::stopped(failed)))
}

/// The first phase and the report staged beside it, then every staged file fsynced: nothing
/// the node reads has changed when this returns, whether it failed or not.
async fn stage_all(
    root: &Path,
    plan: &Plan,
    report: &Report,
) -> Result<(Prepared, fsutil::Staged)> {
    let unchanged = |e: ExecError| anyhow::Error::new(e).context("nothing was changed");
    let mut prepared = prepare(root, &plan.steps).await.map_err(unchanged)?;
    let mut staged_report = report
        .stage(root, &plan.secrets)
        .map_err(|e| unchanged(e.into()))?;
    prepared
        .sync(&mut staged_report)
        .map_err(|e| unchanged(e.into()))?;
    Ok((prepared, staged_report))
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

/// What the first phase made ready, by the index of the step in the plan.
#[derive(Default)]
struct Prepared {
    /// A file (and its one-time backup) staged beside its target, with its node path.
    files: BTreeMap<usize, Vec<(PathBuf, fsutil::Staged)>>,
    live: BTreeMap<usize, procsys::PreparedSysctl>,
    /// bootstrap.sh's argv and the per-boot marker, staged.
    handoff: Option<(Vec<String>, BTreeMap<String, String>, fsutil::Staged)>,
}

impl Prepared {
    /// Fsync every file staged, and `report`, at once: the last step of the first phase.
    fn sync(&mut self, report: &mut fsutil::Staged) -> Result<(), fsutil::FsError> {
        let files = self.files.values_mut().flatten().map(|(_, s)| s);
        let marker = self.handoff.iter_mut().map(|(_, _, s)| s);
        fsutil::sync_all(files.chain(marker).chain(std::iter::once(report)))
    }
}

/// The first phase: write every file's new content beside it, open every live value and stage
/// the hand-off's marker ([`Prepared::sync`] then fsyncs the files). Nothing the node reads has
/// changed when this returns, whether it failed or not.
async fn prepare(root: &Path, steps: &[Step]) -> Result<Prepared, ExecError> {
    let mut p = Prepared::default();
    for (i, step) in steps.iter().enumerate() {
        match step {
            Step::Run(Run {
                check: Some(argv),
                timeout_secs,
                if_failed,
                ..
            }) => run_argv(argv, *timeout_secs, if_failed).await?,
            Step::File(f) => {
                let mut staged = Vec::new();
                if let (Some(b), Some(orig)) = (&f.backup, &f.old) {
                    let bfull = under(root, b);
                    if !bfull.exists() {
                        let s = fsutil::stage(&bfull, orig.as_bytes(), f.mode)?;
                        staged.push((b.clone(), s));
                    }
                }
                let s = fsutil::stage_exact(&under(root, &f.path), f.new.as_bytes(), f.mode)?;
                staged.push((f.path.clone(), s));
                p.files.insert(i, staged);
            }
            Step::Live(l) => {
                let ready = procsys::prepare_at(under(root, &l.path), &l.key, &l.new)?;
                p.live.insert(i, ready);
            }
            Step::Handoff(Handoff::Exec { argv, env }) => {
                let record = marker::Record::this_process(root, now_ms())?;
                let staged =
                    fsutil::stage(&under(root, marker::MARKER), &record.to_bytes(), 0o644)?;
                p.handoff = Some((argv.clone(), env.clone(), staged));
            }
            _ => {}
        }
    }
    Ok(p)
}

/// The second phase: every step in plan order. A failure stops it; the files a step removed
/// for a rerun's sake are put back first.
async fn apply(
    root: &Path,
    steps: &[Step],
    prepared: &mut Prepared,
    bus: &Bus,
    report: &mut Report,
) -> Result<(), ExecError> {
    let mut removed = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        match run_step(root, i, step, prepared, bus, report, &mut removed).await {
            Ok(Some(outcome)) => report.steps.push(StepOutcome {
                step: step.describe(),
                outcome,
            }),
            Ok(None) => {}
            Err(e) => {
                restore(&removed);
                return Err(e);
            }
        }
    }
    Ok(())
}

/// Run one step; `None` for a step with no outcome of its own here (the tag, the hand-off).
async fn run_step(
    root: &Path,
    i: usize,
    step: &Step,
    prepared: &mut Prepared,
    bus: &Bus,
    report: &mut Report,
    removed: &mut Vec<(PathBuf, Vec<u8>)>,
) -> Result<Option<Outcome>, ExecError> {
    Ok(Some(match step {
        Step::Tag { .. } | Step::Handoff(_) | Step::Check(_) => return Ok(None),
        // Run only on a failure of the first phase.
        Step::Call(_) | Step::Record(_) => return Ok(None),
        Step::File(_) => {
            for (path, s) in prepared.files.remove(&i).unwrap_or_default() {
                s.commit()?;
                tracing::info!(path = %path.display(), "wrote file");
            }
            Outcome::Done
        }
        Step::Live(l) => {
            if let Some(ready) = prepared.live.remove(&i) {
                ready.apply()?;
            }
            tracing::info!(key = %l.key, value = %l.new, "set kernel value");
            match &l.read_back {
                Some(why) => read_back(root, l, why, report),
                None => Outcome::Done,
            }
        }
        Step::Remove(r) => {
            let full = under(root, &r.path);
            // Read only to put it back: a removed swap file is gigabytes.
            let held = match r.restore_if_run_fails {
                true => std::fs::read(&full).ok(),
                false => None,
            };
            fsutil::remove(&full)?;
            tracing::info!(path = %r.path.display(), "removed file");
            if let Some(content) = held {
                removed.push((full, content));
            }
            Outcome::Done
        }
        Step::Run(r) => match &r.skip {
            Some(why) => Outcome::Skipped(why.clone()),
            None => {
                run_argv(&r.argv, r.timeout_secs, &r.if_failed).await?;
                tracing::info!("{}: done", r.purpose);
                Outcome::Done
            }
        },
        Step::Unit(u) => unit_job(bus, u, report).await?,
    }))
}

/// Put back the files removed in this run for a rerun's sake.
fn restore(removed: &[(PathBuf, Vec<u8>)]) {
    for (path, content) in removed {
        if let Err(w) = fsutil::write_atomic(path, content, 0o644) {
            tracing::error!("cannot put {} back either: {w}", path.display());
        }
    }
}

/// A unit job. A required one that fails fails the run; any other says what happened and the
/// run goes on (the unit's files are on disk and apply at its next start or the next boot).
async fn unit_job(bus: &Bus, u: &Unit, report: &mut Report) -> Result<Outcome, ExecError> {
    if let UnitJob::Restart { unit, verify } = &u.job {
        return Ok(restart_unit(bus, unit, verify, report).await);
    }
    // A reload under another root with no bus asked for: nothing to tell.
    if let (UnitJob::Reload, Bus::Skip(why)) = (&u.job, bus) {
        return Ok(Outcome::Skipped(why.clone()));
    }
    let r = match connect(bus).await {
        Ok(conn) => match &u.job {
            UnitJob::Start { unit } => systemd::queue(&conn, unit, systemd::Job::Start).await,
            _ => systemd::reload(&conn).await,
        }
        .map_err(|e| e.to_string()),
        Err(why) => Err(why),
    };
    let cause = match r {
        Ok(()) => {
            tracing::info!("{}: done over D-Bus", Step::Unit(u.clone()).describe());
            return Ok(Outcome::Done);
        }
        Err(cause) => cause,
    };
    let msg = u.if_failed.say(&cause);
    if u.required {
        return Err(ExecError::Required(msg));
    }
    tracing::warn!("{msg}");
    report.warnings.push(msg.clone());
    Ok(Outcome::Skipped(msg))
}

/// Restart a unit and read its property back; never fails the run (the unit's files are on
/// disk and apply at next boot anyway), but says exactly what happened.
async fn restart_unit(
    bus: &Bus,
    unit: &str,
    check: &PropertyCheck,
    report: &mut Report,
) -> Outcome {
    let (property, expected) = (check.property, &check.expected);
    let conn = match connect(bus).await {
        Ok(c) => c,
        Err(why) => {
            tracing::warn!("not notifying {}: {why}", name(unit));
            return Outcome::Skipped(why);
        }
    };
    match systemd::restart_and_read(&conn, unit, check, Duration::from_secs(5)).await {
        Ok(v) => {
            if let Some(key) = check.record_as {
                report.set_property(key, &v);
            }
            if v == *expected {
                tracing::info!(unit, property, value = %v, "{} took the change", name(unit));
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

/// A kernel value read back after it was set: what it holds, or a mismatch saying what a
/// shortfall means (logged, and a warning in the report; the run goes on).
fn read_back(root: &Path, l: &crate::plan::step::Live, why: &str, report: &mut Report) -> Outcome {
    let got = std::fs::read_to_string(under(root, &l.path))
        .map(|t| t.trim().to_string())
        .unwrap_or_else(|e| format!("unreadable ({e})"));
    let outcome = judge_read_back(&l.key, &l.new, &got, why);
    if let Outcome::Mismatch(msg) = &outcome {
        tracing::warn!("{msg}");
        report.warnings.push(msg.clone());
    }
    outcome
}

/// `got` against the `asked` value of `key`.
fn judge_read_back(key: &str, asked: &str, got: &str, why: &str) -> Outcome {
    match got == asked {
        true => Outcome::DoneWith(format!("{key} = {got}")),
        false => Outcome::Mismatch(format!("{key} is {got}, not the {asked} asked: {why}")),
    }
}

/// Run a program (argv, no shell) and wait for it, up to `timeout_secs`; a failure is an error
/// saying what it means.
async fn run_argv(
    argv: &[String],
    timeout_secs: u64,
    if_failed: &IfFailed,
) -> Result<(), ExecError> {
    let tool = argv.first().cloned().unwrap_or_default();
    let err = |why: String| ExecError::Required(if_failed.say(&format!("{tool} {why}")));
    let child = tokio::process::Command::new(&tool)
        .args(argv.get(1..).unwrap_or_default())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = match tokio::time::timeout(Duration::from_secs(timeout_secs), child).await {
        Err(_) => return Err(err(format!("did not finish within {timeout_secs} s"))),
        Ok(Err(e)) => return Err(err(format!("could not be run: {e}"))),
        Ok(Ok(out)) => out,
    };
    if out.status.success() {
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
        crate::base::text::printable(&tail)
    )))
}

/// A connection to systemd, or why there is none.
async fn connect(bus: &Bus) -> Result<zbus::Connection, String> {
    match bus {
        Bus::Skip(why) => Err(why.clone()),
        Bus::Address(a) => systemd::connect(a).await.map_err(|e| e.to_string()),
    }
}

/// Replace this process with the hand-off's program (AL2: bootstrap.sh), its environment this
/// one's with `env` set over it. No shell: the argv goes to execve as is.
pub fn exec(
    argv: &[String],
    env: &BTreeMap<String, String>,
) -> Result<std::convert::Infallible, ExecError> {
    let c = |s: &[u8]| CString::new(s).map_err(|_| ExecError::Nul);
    let cargs: Vec<CString> = argv
        .iter()
        .map(|a| c(a.as_bytes()))
        .collect::<Result<_, _>>()?;
    let path = cargs.first().ok_or(ExecError::Nul)?;
    let err = |source| ExecError::Exec {
        path: PathBuf::from(&argv[0]),
        source,
    };
    if env.is_empty() {
        return nix::unistd::execv(path, &cargs).map_err(err);
    }
    use std::os::unix::ffi::OsStrExt;
    let mut vars: BTreeMap<Vec<u8>, Vec<u8>> = std::env::vars_os()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect();
    vars.extend(
        env.iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec())),
    );
    let cenv: Vec<CString> = vars
        .into_iter()
        .map(|(mut k, v)| {
            k.push(b'=');
            k.extend(v);
            c(&k)
        })
        .collect::<Result<_, _>>()?;
    nix::unistd::execve(path, &cargs, &cenv).map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_value_read_back_short_is_a_mismatch_that_says_why() {
        let ok = judge_read_back("vm.nr_hugepages", "16", "16", "fragmented");
        assert_eq!(ok, Outcome::DoneWith("vm.nr_hugepages = 16".into()));
        let short = judge_read_back("vm.nr_hugepages", "512", "300", "fragmented memory");
        assert_eq!(
            short,
            Outcome::Mismatch(
                "vm.nr_hugepages is 300, not the 512 asked: fragmented memory".into()
            )
        );
    }
}
