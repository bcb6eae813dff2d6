//! Stage 3: the proof (the Node Ready as planned, read with the node's own token) under the
//! job's deadline, after kubelet and the steps after the hand-off; the verdict recorded and
//! said.

use std::time::Duration;

use tokio::time::Instant;

use super::completer::{update, update_join, CompleteError, Completer};
use super::fit;
use super::kubelet::active_then_after;
use crate::aws::autoscaling::HookResult;
use crate::exec::after::Ran;
use crate::exec::report::now_ms;
use crate::instance::lifecycle::LaunchHookJob;
use crate::plan::after::AfterJob;
use crate::plan::step::When;
use crate::verify::proof::{self, JoinJob, OwnNode, Proof};
use crate::verify::record::JoinVerdict;
use crate::verify::verdict::{Blame, Seen};
use crate::verify::CheckResult;

/// kubelet active, the steps after the hand-off, then the Node: the proof under the job's
/// deadline.
pub(super) async fn prove(
    c: &Completer,
    job: &JoinJob,
    ctx: &crate::verify::Context,
    hook: &str,
    steps: (Option<&AfterJob>, &[CheckResult]),
) -> (Proof, Ran, OwnNode, Instant) {
    let start = Instant::now();
    let kubelet_wait = c.kubelet_wait.min(Duration::from_secs(job.deadline_secs));
    let waited = Completer {
        kubelet_wait,
        ..c.clone()
    };
    let (ran, active, active_at) = match active_then_after(&waited, hook, steps).await {
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

/// This boot's checks before the kubelet that failed (that count): a Node Ready is not as
/// planned, and each is a cause; one that failed for a fault of the instance's own makes it
/// `unfit` (judged then with the fleet's guard). Whether any failed.
pub(super) fn fold_gate(p: &mut Proof, earlier: &[CheckResult]) -> bool {
    let failed: Vec<&CheckResult> = earlier
        .iter()
        .filter(|r| r.phase.as_deref() == Some(When::Gate.as_str()))
        .filter(|r| r.result == crate::verify::Verdict::Failed && !r.advisory)
        .collect();
    if failed.is_empty() {
        return false;
    }
    if matches!(p.verdict, JoinVerdict::Joined | JoinVerdict::Mismatch) {
        p.verdict = match failed.iter().any(|r| r.own_fault) {
            true => JoinVerdict::Unfit,
            false => JoinVerdict::Mismatch,
        };
    }
    let causes = failed
        .iter()
        .map(|r| format!("before the kubelet, {}", r.line()));
    p.causes.extend(causes);
    true
}

/// Steps after the hand-off that failed: a Node Ready is not as planned, and each failure is a
/// cause.
pub(super) fn fold_after(p: &mut Proof, ran: &Ran) {
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

/// The proof into the report's `join` section, and the steps after the hand-off into its
/// steps (the run's lock held while it is written).
pub(super) fn record(c: &Completer, p: &Proof, ran: &Ran) -> Result<(), CompleteError> {
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

/// The verdict at error priority when the node did not join (the unit's output is the
/// console's too), with whose cause it is and what the launch was told; else at info.
pub(super) fn verdict(p: &Proof, result: HookResult) -> Result<(), CompleteError> {
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

/// The job with the launch hook's group where the run's had none (the hook's job names the
/// group Auto Scaling gave it).
pub(super) fn in_hooks_group(job: &JoinJob, hook: Option<&(LaunchHookJob, String)>) -> JoinJob {
    let mut job = job.clone();
    if job.group.is_none() {
        job.group = hook.and_then(|(h, _)| h.group.clone());
    }
    job
}

/// What the proof's calls share: the job's transport, else the unit's proxy (a job of a run
/// that named none).
pub(super) fn context(job: &JoinJob) -> crate::verify::Context {
    let mut ctx = job.context();
    if ctx.proxy.is_none() {
        ctx.proxy = crate::aws::Proxy::from_env(|k| std::env::var(k).ok());
    }
    ctx
}
