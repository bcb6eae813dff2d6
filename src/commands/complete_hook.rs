//! `eks-nodeinit complete-hook`: the packaged `eks-nodeinit-launch-hook.service` runs it after the
//! agent's unit (which it requires), nodeadm-run and kubelet. It reads the jobs the run left:
//! the proof's ([`crate::verify::proof::JOIN_JOB`]) and the launch hook's
//! ([`crate::instance::lifecycle::LAUNCH_HOOK_JOB`]). In service it waits for kubelet to be
//! active, then proves the join (the Node Ready as planned, read with the node's own token) and
//! completes the hook with `CONTINUE` only then, `ABANDON` on a deadline or a mismatch, so that
//! Auto Scaling replaces the instance at once. The verdict and its causes go to the console, the
//! journal and the report's `join` section; a node that did not join exits non-zero. Without the
//! proof's job (`verify.join: off`) the hook is completed once kubelet is active, as before.
//! Once kubelet is active, and before the proof, it runs this boot's steps after the hand-off
//! ([`crate::exec::after`]); a failure among them makes a joined Node a `mismatch`, and without
//! the proof makes the unit fail once the hook is completed.

use std::time::Duration;

use tokio::time::Instant;

use super::{fit, settle};
use crate::aws::autoscaling::{complete_launch, keep_alive, Completed, HookResult};
use crate::exec::after::{self, Ran};
use crate::exec::report::now_ms;
use crate::instance::lifecycle::{CompleteAfter, LaunchHookJob, LAUNCH_HOOK_DONE, LAUNCH_HOOK_JOB};
use crate::os::fsutil::{self, under};
use crate::os::systemd;
use crate::plan::after::{AfterJob, AFTER_JOB};
use crate::verify::launch_of;
use crate::verify::outcome;
use crate::verify::proof::{self, JoinJob, OwnNode, Proof, JOIN_JOB};
use crate::verify::record::JoinVerdict;
use crate::verify::verdict::{hook_result, Blame, Seen};

use super::completer::{update, update_join};
pub use super::completer::{CompleteError, Completer};

/// Read a job file: `None` when absent.
fn read_job<T>(
    c: &Completer,
    node_path: &str,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Option<(T, String)>, CompleteError> {
    let path = under(&c.root, node_path);
    let Some(text) = fsutil::read_optional(&path)? else {
        return Ok(None);
    };
    let job = parse(&text).map_err(|message| CompleteError::Job { path, message })?;
    Ok(Some((job, text)))
}

/// Prove the join and complete this boot's launch hook, whichever of the two the run asked for.
pub async fn run(c: &Completer) -> Result<(), CompleteError> {
    let mut hook = read_job(c, LAUNCH_HOOK_JOB, LaunchHookJob::from_text)?;
    let done = under(&c.root, LAUNCH_HOOK_DONE);
    if let Some((_, text)) = &hook {
        if fsutil::read_optional(&done)?.as_deref() == Some(text.as_str()) {
            tracing::info!("the launch hook of this job was completed earlier in this boot");
            hook = None;
        }
    }
    let join = read_job(c, JOIN_JOB, |t| {
        serde_json::from_str::<JoinJob>(t).map_err(|e| crate::base::text::serde_message(&e))
    })?;
    let after = read_job(c, AFTER_JOB, AfterJob::from_text)?.map(|(j, _)| j);
    // The hook's calls go as the boot's did (the proof's job says the same where there is one).
    if let Some((h, _)) = &hook {
        h.aws.apply();
    }
    // A warm pool's launch: the node was prepared, and does not join now.
    if let Some((job, text)) = hook
        .as_ref()
        .filter(|(j, _)| j.after == CompleteAfter::Prep)
    {
        complete(c, job, HookResult::Continue, from_env().as_ref()).await?;
        return Ok(fsutil::write_atomic(&done, text.as_bytes(), 0o644)?);
    }
    if hook.is_none() && join.is_none() && after.is_none() {
        tracing::info!("nothing to run, prove or complete in this boot ({LAUNCH_HOOK_JOB}, {JOIN_JOB} and {AFTER_JOB} are absent, or the hook is done)");
        return Ok(());
    }
    let hook_name = hook
        .as_ref()
        .map_or_else(String::new, |(j, _)| j.hook.clone());
    let Some((job, _)) = join else {
        // No proof asked for: the steps after the hand-off and the hook once kubelet is active.
        let ran = match active_then_after(c, &hook_name, after.as_ref()).await {
            Ok((ran, _, _)) => ran,
            Err((e, not_run)) => {
                update(c, |report| not_run.record(report))?;
                return Err(e);
            }
        };
        if !ran.is_empty() {
            update(c, |report| ran.record(report))?;
        }
        if let Some((job, text)) = &hook {
            complete(c, job, HookResult::Continue, from_env().as_ref()).await?;
            fsutil::write_atomic(&done, text.as_bytes(), 0o644)?;
        }
        return match ran.failures.is_empty() {
            true => Ok(()),
            false => Err(CompleteError::After {
                failures: ran.failures.join("; "),
            }),
        };
    };
    prove_join(c, &job, hook.as_ref(), &done, after.as_ref()).await
}

/// kubelet active (the hand-off started it), then this boot's steps after the hand-off: what
/// they came to, and when kubelet was seen active; or why kubelet is not active, with the steps marked not run.
async fn active_then_after(
    c: &Completer,
    hook: &str,
    after: Option<&AfterJob>,
) -> Result<(Ran, u64, Instant), (CompleteError, Ran)> {
    if let Err(e) = wait_for_kubelet(c, hook).await {
        let not_run = after.map(|j| Ran::not_run(j, "kubelet never became active"));
        return Err((e, not_run.unwrap_or_default()));
    }
    let (active, active_at) = (now_ms(), Instant::now());
    let ran = match after {
        Some(j) => after::run(j, &c.root).await,
        None => Ran::default(),
    };
    Ok((ran, active, active_at))
}

/// Steps after the hand-off that failed: a Node Ready is not as planned, and each failure is a
/// cause.
fn fold_after(p: &mut Proof, ran: &Ran) {
    if ran.failures.is_empty() {
        return;
    }
    if p.verdict == JoinVerdict::Joined {
        p.verdict = JoinVerdict::Mismatch;
    }
    let causes = ran
        .failures
        .iter()
        .map(|f| format!("after the hand-off, {f}"));
    p.causes.extend(causes);
}

/// What the launch is told: a Node Ready as planned continues even when a step after the
/// hand-off failed, under `strict` too. Such a step fails on what the AMI or the config gives
/// every instance (a pause image the AMI does not keep), which a replacement meets again; the
/// failure stays in the verdict and the unit's exit status.
fn launch_result(p: &Proof, ready_as_planned: bool, strict: bool) -> HookResult {
    if ready_as_planned {
        return HookResult::Continue;
    }
    hook_result(p.verdict, p.blame, strict)
}

/// The proof (with heartbeats for the hook meanwhile), whose cause a failure is, the verdict
/// recorded and logged with the Node's conditions, then the hook completed with the verdict's
/// result; then the initialisation deadline, and the node retired where it asks for it.
async fn prove_join(
    c: &Completer,
    job: &JoinJob,
    hook: Option<&(LaunchHookJob, String)>,
    done: &std::path::Path,
    after: Option<&AfterJob>,
) -> Result<(), CompleteError> {
    let job = &in_hooks_group(job, hook);
    let ctx = context(job);
    // The SDK's calls (the fleet, the hook, retiring) take credentials where the boot found IMDS.
    job.endpoints().apply();
    let hook_name = hook.map_or_else(String::new, |(j, _)| j.hook.clone());
    let (mut proof, ran, mut own, active_at) = match hook {
        Some((h, _)) => {
            // Heartbeats beside the proof; the proof goes on if they stop.
            let t = ctx.transport();
            let beats = keep_alive(launch_of(h), c.heartbeat, c.policy, t.as_ref());
            let proving = prove(c, job, &ctx, &hook_name, after);
            tokio::pin!(proving);
            tokio::select! {
                p = &mut proving => p,
                () = beats => proving.await,
            }
        }
        None => prove(c, job, &ctx, &hook_name, after).await,
    };
    let ready_as_planned = proof.verdict == JoinVerdict::Joined;
    fold_after(&mut proof, &ran);
    let guard = settle::judge(job, &ctx, &mut proof).await;
    let set = fit::decided(&proof, (ready_as_planned, job.hold_mismatch), &ran);
    let failed = own.set_logged(&ctx, &set, None).await;
    let result = launch_result(&proof, ready_as_planned, job.strict);
    record(c, &proof, &ran)?;
    update_join(c, |join| {
        if !set.is_empty() {
            join.conditions = fit::said(&set, failed.as_ref());
        }
        join.guard = guard;
    })?;
    let outcome = verdict(&proof, result);
    if result == HookResult::Abandon && hook.is_some() {
        settle::abandoning(c, job, &ctx, &proof).await;
    }
    let told = match hook {
        Some((h, text)) => Some(tell(c, &ctx, h, text, done, result).await?),
        None => None,
    };
    // Abandoned only when Auto Scaling took it (a hook timed out already took nothing).
    let abandoned = result == HookResult::Abandon && told == Some(Ok(Completed::Completed));
    if let Some(Err(error)) = told {
        return Err(CompleteError::HookNotCompleted {
            hook: hook_name,
            result: result.as_str(),
            verdict: proof.verdict.as_str(),
            error,
        });
    }
    if outcome::waits_to_initialise(proof.verdict) {
        let refused = failed.is_some().then_some(&set[..]);
        let watch = (&mut own, active_at);
        if let Some(late) = settle::init_deadline(c, job, &ctx, watch, &proof, refused).await? {
            proof = late;
        }
    } else if !abandoned {
        if let Some(late) = settle::late_join(c, job, &ctx, &proof, &ran).await? {
            return verdict(&late, result);
        }
    }
    if !abandoned {
        settle::retire(c, job, &ctx, &proof).await?;
    }
    match proof.verdict {
        JoinVerdict::InitDeadline => verdict(&proof, result),
        _ => outcome,
    }
}

/// The job with the launch hook's group where the run's had none (the hook's job names the
/// group Auto Scaling gave it).
fn in_hooks_group(job: &JoinJob, hook: Option<&(LaunchHookJob, String)>) -> JoinJob {
    let mut job = job.clone();
    if job.group.is_none() {
        job.group = hook.and_then(|(h, _)| h.group.clone());
    }
    job
}

/// The hook completed with `result` and recorded: what Auto Scaling made of it, or why not.
async fn tell(
    c: &Completer,
    ctx: &crate::verify::Context,
    h: &LaunchHookJob,
    text: &str,
    done: &std::path::Path,
    result: HookResult,
) -> Result<Result<Completed, String>, CompleteError> {
    let r = complete(c, h, result, ctx.transport().as_ref()).await;
    if r.is_ok() {
        fsutil::write_atomic(done, text.as_bytes(), 0o644)?;
    }
    let r = r.map_err(|e| e.to_string());
    record_hook(c, &r.clone().map(|o| told(result, h, o)))?;
    Ok(r)
}

/// What the proof's calls share: the job's transport, else the unit's proxy (a job of a run
/// that named none).
fn context(job: &JoinJob) -> crate::verify::Context {
    let mut ctx = job.context();
    if ctx.proxy.is_none() {
        ctx.proxy = crate::aws::Proxy::from_env(|k| std::env::var(k).ok());
    }
    ctx
}

/// The proxy the unit's environment gives (the agent's drop-in), for a job that names no
/// transport: the hook without the proof, or a job of an older run.
fn from_env() -> Option<crate::aws::Transport> {
    let proxy = crate::aws::Proxy::from_env(|k| std::env::var(k).ok())?;
    Some(crate::aws::Transport {
        proxy: Some(proxy),
        ca_bundles: Vec::new(),
    })
}

/// What the hook came to, for the record.
fn told(result: HookResult, h: &LaunchHookJob, o: Completed) -> String {
    match o {
        Completed::Completed => format!("{} ({})", result.as_str(), h.hook),
        Completed::NothingWaiting => format!(
            "{} not taken: Auto Scaling had no launch waiting on {} for the instance",
            result.as_str(),
            h.hook
        ),
    }
}

/// kubelet active, the steps after the hand-off, then the Node: the proof under the job's
/// deadline.
async fn prove(
    c: &Completer,
    job: &JoinJob,
    ctx: &crate::verify::Context,
    hook: &str,
    after: Option<&AfterJob>,
) -> (Proof, Ran, OwnNode, Instant) {
    let start = Instant::now();
    let kubelet_wait = c.kubelet_wait.min(Duration::from_secs(job.deadline_secs));
    let waited = Completer {
        kubelet_wait,
        ..c.clone()
    };
    let (ran, active, active_at) = match active_then_after(&waited, hook, after).await {
        Ok(r) => r,
        Err((e, not_run)) => {
            let proof = Proof {
                verdict: JoinVerdict::Deadline,
                blame: None,
                causes: vec![e.to_string()],
                checked: Vec::new(),
                kubelet_active_at: None,
                registered_at: None,
                ready_at: None,
                seen: Seen::kubelet(e.to_string()),
            };
            return (proof, not_run, OwnNode::of(job), Instant::now());
        }
    };
    let left = JoinJob {
        deadline_secs: job.deadline_secs.saturating_sub(start.elapsed().as_secs()),
        ..job.clone()
    };
    let (mut p, own) = proof::prove(&left, ctx, c.poll, &fit::pending(&ran)).await;
    p.kubelet_active_at = Some(active);
    (p, ran, own, active_at)
}

/// The proof into the report's `join` section, and the steps after the hand-off into its
/// steps (the run's lock held while it is written).
fn record(c: &Completer, p: &Proof, ran: &Ran) -> Result<(), CompleteError> {
    if !ran.is_empty() {
        update(c, |report| ran.record(report))?;
    }
    update_join(c, |join| {
        for (name, at) in [
            ("kubelet active", p.kubelet_active_at),
            ("Node registered", p.registered_at),
            ("Node Ready", p.ready_at),
        ] {
            if let Some(at) = at {
                join.phase(name, at);
            }
        }
        join.phase("verdict", now_ms());
        join.verdict = Some(p.verdict);
        join.blame = p.blame;
        join.causes.extend(p.causes.iter().cloned());
        join.checked = p.checked.clone();
    })
}

/// What the hook was told, or why it was not, into the record.
fn record_hook(c: &Completer, told: &Result<String, String>) -> Result<(), CompleteError> {
    update_join(c, |join| {
        join.hook_failed = told.is_err();
        join.hook = Some(match told {
            Ok(s) => s.clone(),
            Err(e) => format!("not completed: {e}"),
        });
    })
}

/// The verdict at error priority when the node did not join (the unit's output is the
/// console's too), with whose cause it is and what the launch was told; else at info.
fn verdict(p: &Proof, result: HookResult) -> Result<(), CompleteError> {
    if matches!(p.verdict, JoinVerdict::Joined | JoinVerdict::JoinedLate) {
        tracing::info!(checked = %p.checked.join("; "), "join verified: the Node is Ready as planned");
        return Ok(());
    }
    let blame = p.blame.map_or("none: a finding", Blame::as_str);
    tracing::error!(
        verdict = p.verdict.as_str(),
        blame,
        hook = result.as_str(),
        "the node did not join as planned: {}",
        p.causes.join("; ")
    );
    Err(CompleteError::NotJoined {
        verdict: p.verdict.as_str(),
        causes: p.causes.join("; "),
    })
}

/// CompleteLifecycleAction with `result`: the group asked of Auto Scaling when the run did not
/// know it.
async fn complete(
    c: &Completer,
    job: &LaunchHookJob,
    result: HookResult,
    transport: Option<&crate::aws::Transport>,
) -> Result<Completed, CompleteError> {
    let deadline = Instant::now() + c.deadline;
    let r = complete_launch(launch_of(job), result, c.policy, deadline, transport).await;
    let outcome = match r {
        Ok(o) => o,
        Err(e) => {
            tracing::error!(hook = %job.hook, result = result.as_str(), "the launch hook could not be completed: {e}");
            return Err(e.into());
        }
    };
    match outcome {
        Completed::Completed => {
            tracing::info!(hook = %job.hook, state = %job.state, "launch hook completed: {}", result.as_str())
        }
        Completed::NothingWaiting => {
            tracing::warn!(hook = %job.hook, state = %job.state, "Auto Scaling had no launch waiting on this hook for the instance (completed or timed out already, or no hook of that name on the group): nothing completed")
        }
    }
    Ok(outcome)
}

/// Wait until kubelet.service is active (the hand-off started it), reading its state over D-Bus
/// every half second for up to `c.kubelet_wait`.
async fn wait_for_kubelet(c: &Completer, hook: &str) -> Result<(), CompleteError> {
    let conn = systemd::connect(&c.bus_address).await?;
    let start = Instant::now();
    loop {
        let state = systemd::active_state(&conn, "kubelet.service").await?;
        if state == "active" {
            return Ok(());
        }
        if start.elapsed() >= c.kubelet_wait {
            let left = match hook {
                "" => "nothing after the hand-off is run".to_string(),
                h => format!("launch hook `{h}` is not completed (Auto Scaling applies its default result at the heartbeat timeout)"),
            };
            return Err(CompleteError::Kubelet {
                state,
                waited: c.kubelet_wait,
                left,
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proof(verdict: JoinVerdict) -> Proof {
        Proof {
            verdict,
            blame: None,
            causes: Vec::new(),
            checked: Vec::new(),
            kubelet_active_at: None,
            registered_at: None,
            ready_at: None,
            seen: Seen::default(),
        }
    }

    #[test]
    fn a_failed_step_after_the_hand_off_makes_a_joined_node_a_mismatch_and_a_cause() {
        let failed = Ran {
            failures: vec!["the sandbox image is not in containerd's store, pinned".into()],
            ..Ran::default()
        };
        let mut p = proof(JoinVerdict::Joined);
        fold_after(&mut p, &failed);
        assert_eq!(p.verdict, JoinVerdict::Mismatch);
        assert_eq!(
            p.causes,
            ["after the hand-off, the sandbox image is not in containerd's store, pinned"]
        );
        // A mismatch of the steps after the hand-off alone never abandons, strict or not: a
        // replacement meets the same AMI. A mismatch of the Node itself does under strict.
        for strict in [false, true] {
            assert_eq!(launch_result(&p, true, strict), HookResult::Continue);
        }
        assert_eq!(launch_result(&p, false, true), HookResult::Abandon);
        assert_eq!(launch_result(&p, false, false), HookResult::Continue);
        // A verdict that is already a failure keeps its own, and gains the cause.
        let mut p = proof(JoinVerdict::NotReady);
        fold_after(&mut p, &failed);
        assert_eq!((p.verdict, p.causes.len()), (JoinVerdict::NotReady, 1));
        let mut p = proof(JoinVerdict::Joined);
        fold_after(&mut p, &Ran::default());
        assert_eq!((p.verdict, p.causes.len()), (JoinVerdict::Joined, 0));
    }
}
