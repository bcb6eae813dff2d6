//! The work after the hand-off, as stages over one per-boot job ([`job::Boot`], read once):
//! the packaged `eks-nodeinit-launch-hook.service` runs `eks-nodeinit complete-hook` after the
//! agent's unit, nodeadm-run and kubelet. In order:
//!
//! 1. [`kubelet`]: wait until kubelet is active (the hand-off started it), then
//! 2. the steps after the hand-off ([`crate::exec::after`]), in the plan's order;
//! 3. [`prove`]: the Node Ready as planned, read with the node's own token, heartbeats for the
//!    launch hook meanwhile;
//! 4. [`fit`]: the Node's conditions (those the boot's checks of every phase name among them)
//!    and the initialisation deadline;
//! 5. [`hook`] and [`settle`]: the launch hook completed with the verdict's result, whose cause
//!    a failure is, the late join, or the node retiring itself ([`crate::exec::retire`]), as
//!    the outcome table says.
//!
//! The verdict and its causes go to the console, the journal and the report's `join` section;
//! a node that did not join exits non-zero. Without the proof's job (`verify.join: off`) the
//! hook is completed once kubelet is active and the steps after the hand-off ran.

mod completer;
mod fit;
mod hook;
mod job;
mod kubelet;
mod prove;
mod settle;

use tokio::time::Instant;

use crate::aws::autoscaling::{keep_alive, Completed, HookResult};
use crate::exec::after::Ran;
use crate::instance::lifecycle::{CompleteAfter, LAUNCH_HOOK_JOB};
use crate::os::fsutil;
use crate::plan::after::AFTER_JOB;
use crate::verify::launch_of;
use crate::verify::outcome;
use crate::verify::proof::{JoinJob, OwnNode, Proof, JOIN_JOB};
use crate::verify::record::JoinVerdict;
use crate::verify::Context;

use completer::{update, update_join};
pub use completer::{CompleteError, Completer};
use hook::{complete, hook_transport, launch_result, tell};
use prove::{context, fold_after, fold_gate, in_hooks_group, prove, record, verdict};

/// Run this boot's work after the hand-off: whichever of the steps, the proof and the launch
/// hook the run asked for.
pub async fn run(c: &Completer) -> Result<(), CompleteError> {
    let boot = job::Boot::read(c)?;
    // A warm pool's launch: the node was prepared, and does not join now.
    if let Some((job, text)) = boot
        .hook
        .as_ref()
        .filter(|(j, _)| j.after == CompleteAfter::Prep)
    {
        complete(c, job, HookResult::Continue, hook_transport(job).as_ref()).await?;
        return Ok(fsutil::write_atomic(&boot.done, text.as_bytes(), 0o644)?);
    }
    if boot.is_empty() {
        tracing::info!("nothing to run, prove or complete in this boot ({LAUNCH_HOOK_JOB}, {JOIN_JOB} and {AFTER_JOB} are absent, or the hook is done)");
        return Ok(());
    }
    match &boot.join {
        Some(job) => prove_join(c, job, &boot).await,
        None => unproven(c, &boot).await,
    }
}

/// No proof asked for: the steps after the hand-off and the hook once kubelet is active.
async fn unproven(c: &Completer, boot: &job::Boot) -> Result<(), CompleteError> {
    let hook_name = boot
        .hook
        .as_ref()
        .map_or_else(String::new, |(j, _)| j.hook.clone());
    let steps = (boot.after.as_ref(), &boot.earlier[..]);
    let ran = match kubelet::active_then_after(c, &hook_name, steps).await {
        Ok((ran, _, _)) => ran,
        Err((e, not_run)) => {
            update(c, |report| not_run.record(report))?;
            return Err(e);
        }
    };
    if !ran.is_empty() {
        update(c, |report| ran.record(report))?;
    }
    if let Some((job, text)) = &boot.hook {
        complete(c, job, HookResult::Continue, hook_transport(job).as_ref()).await?;
        fsutil::write_atomic(&boot.done, text.as_bytes(), 0o644)?;
    }
    match ran.failures.is_empty() {
        true => Ok(()),
        false => Err(CompleteError::After {
            failures: ran.failures.join("; "),
        }),
    }
}

/// The proof, with heartbeats for the launch hook beside it (the proof goes on if they stop).
async fn proving(
    c: &Completer,
    job: &JoinJob,
    ctx: &Context,
    boot: &job::Boot,
) -> (Proof, Ran, OwnNode, Instant) {
    let hook_name = boot.hook.as_ref().map_or("", |(j, _)| j.hook.as_str());
    let steps = (boot.after.as_ref(), &boot.earlier[..]);
    let Some((h, _)) = &boot.hook else {
        return prove(c, job, ctx, hook_name, steps).await;
    };
    let t = ctx.transport();
    let beats = keep_alive(launch_of(h), c.heartbeat, c.policy, t.as_ref());
    let proving = prove(c, job, ctx, hook_name, steps);
    tokio::pin!(proving);
    tokio::select! {
        p = &mut proving => p,
        () = beats => proving.await,
    }
}

/// The proof, whose cause a failure is, the verdict recorded and logged with the Node's
/// conditions, then the hook completed with the verdict's result; then the initialisation
/// deadline, or the late join, and the node retired where it asks for it.
async fn prove_join(c: &Completer, job: &JoinJob, boot: &job::Boot) -> Result<(), CompleteError> {
    let hook = boot.hook.as_ref();
    let job = &in_hooks_group(job, hook);
    let ctx = context(job);
    let (mut proof, ran, mut own, active_at) = proving(c, job, &ctx, boot).await;
    let ready_as_planned = proof.verdict == JoinVerdict::Joined;
    fold_after(&mut proof, &ran);
    let gated = fold_gate(&mut proof, &boot.earlier);
    let guard = settle::judge(job, &ctx, &mut proof, gated).await;
    settle::kept_unless_it_leaves(&mut proof, job.retire.is_some() || hook.is_some());
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
    if result == HookResult::Abandon && hook.is_some() {
        settle::abandoning(c, job, &ctx, &proof).await;
    }
    let told = told(c, &ctx, boot, result, &proof).await;
    if !matches!(told, Ok(true)) && job.retire.is_none() && proof.verdict == JoinVerdict::Unfit {
        let settled = (ready_as_planned, &ran);
        kept_after_all(c, job, &ctx, &mut own, &mut proof, settled).await?;
    }
    let outcome = verdict(&proof, result);
    let abandoned = told?;
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

/// An `unfit` node the launch hook did not take (no launch waited on it, it had timed out, or it
/// could not be told) and nothing retires: it would stay tainted with `Joined=False` for ever. It
/// is kept as a `mismatch` after all, its conditions set again, saying why.
async fn kept_after_all(
    c: &Completer,
    job: &JoinJob,
    ctx: &Context,
    own: &mut OwnNode,
    proof: &mut Proof,
    (ready_as_planned, ran): (bool, &Ran),
) -> Result<(), CompleteError> {
    settle::kept_unless_it_leaves(proof, false);
    let set = fit::decided(proof, (ready_as_planned, job.hold_mismatch), ran);
    let failed = own.set_logged(ctx, &set, None).await;
    record(c, proof, ran)?;
    update_join(c, |join| {
        if !set.is_empty() {
            join.conditions = fit::said(&set, failed.as_ref());
        }
    })
}

/// The hook told `result`, if there is one: whether the launch was abandoned (only when Auto
/// Scaling took it: a hook timed out already took nothing), or why it could not be told.
async fn told(
    c: &Completer,
    ctx: &Context,
    boot: &job::Boot,
    result: HookResult,
    proof: &Proof,
) -> Result<bool, CompleteError> {
    let Some((h, text)) = &boot.hook else {
        return Ok(false);
    };
    match tell(c, ctx, h, text, &boot.done, result).await? {
        Ok(o) => Ok(result == HookResult::Abandon && o == Completed::Completed),
        Err(error) => Err(CompleteError::HookNotCompleted {
            hook: h.hook.clone(),
            result: result.as_str(),
            verdict: proof.verdict.as_str(),
            error,
        }),
    }
}
