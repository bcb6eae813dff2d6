//! After the verdict (docs/lifecycle.md#every-outcome): whose cause a failure is, the
//! initialisation deadline, the late join of a node kept for a cause the fleet shares, and the
//! node retiring itself, each as the outcome table ([`crate::verify::outcome`]) says.

use std::time::Duration;

use tokio::time::Instant;

use super::completer::{update_join, CompleteError, Completer};
use super::fit;
use crate::exec::after::Ran;
use crate::exec::report::now_ms;
use crate::exec::retire::{self, Retiring};
use crate::os::systemd;
use crate::verify::conditions::Condition;
use crate::verify::fleet::{self, Fleet};
use crate::verify::outcome;
use crate::verify::proof::{self, JoinJob, OwnNode, Proof};
use crate::verify::record::JoinVerdict;
use crate::verify::verdict::{blame_in, blame_unfit, blame_uninitialised};
use crate::verify::Context;

/// Whom a node's failure is counted against: its group, else its cluster.
pub(super) fn scope(job: &JoinJob) -> &'static str {
    match job.group {
        Some(_) => "its group",
        None => "its cluster",
    }
}

/// The scope's marked instances, or why they cannot be told.
async fn peers(job: &JoinJob, ctx: &Context) -> Result<Fleet, String> {
    if job.group_unknown && job.group.is_none() {
        return Err("the instance is in an Auto Scaling group whose name the boot could not read (no instance-metadata tags, DescribeTags unanswered), so its peers cannot be told from the account's".into());
    }
    fleet::read(ctx, &job.instance_id, job.group.as_deref()).await
}

/// A Ready Node marks the instance joined for other nodes' verdicts (what failed, if that did:
/// the guard cannot open on this node's account), unless a check before the kubelet failed
/// (`gated`: a joined peer is one that passed them); a failure gets its blame from its cause and
/// the like peers of its scope. An `unfit` node whose like peers do not show the fault its own
/// (too few joined, the budget spent, peers not told) is kept as a `mismatch`.
pub(super) async fn judge(
    job: &JoinJob,
    ctx: &Context,
    p: &mut Proof,
    gated: bool,
) -> Option<String> {
    if p.verdict == JoinVerdict::Unfit {
        let fleet = peers(job, ctx).await;
        let what = "a check before the kubelet found a fault of this instance's own";
        let (blame, why) = blame_unfit(what, fleet.as_ref().map_err(String::as_str), scope(job));
        if blame == crate::verify::verdict::Blame::Cluster {
            p.verdict = JoinVerdict::Mismatch;
        }
        p.blame = Some(blame);
        p.causes.push(why);
        return None;
    }
    if matches!(p.verdict, JoinVerdict::Joined | JoinVerdict::Mismatch) && gated {
        return None;
    }
    if matches!(p.verdict, JoinVerdict::Joined | JoinVerdict::Mismatch) {
        let marked = fleet::mark_joined(ctx, &job.instance_id).await;
        return marked.err().map(|e| {
            format!("the tag {} could not be written ({e}): other nodes of {} cannot count this one, so a failure of theirs is less often found their own; allow ec2:CreateTags of it (docs/iam-policy.json)", fleet::JOINED_TAG, scope(job))
        });
    }
    let fleet = peers(job, ctx).await;
    let (blame, why) = blame_in(&p.seen, fleet.as_ref().map_err(String::as_str), scope(job));
    p.blame = Some(blame);
    p.causes.push(why);
    None
}

/// An `unfit` node that nothing makes leave (no retirement by `verify.onFailure`, no launch hook
/// to `ABANDON` it) would stay Ready with `Joined=False` for ever: it is kept as a `mismatch`,
/// which releases it, saying so.
pub(super) fn kept_unless_it_leaves(p: &mut Proof, leaves: bool) {
    if p.verdict == JoinVerdict::Unfit && !leaves {
        p.verdict = JoinVerdict::Mismatch;
        p.causes.push("nothing would make this node leave (`verify.onFailure: report`, and no launch hook took it): it is kept as a `mismatch`".into());
    }
}

/// Before the launch is abandoned (Auto Scaling terminates the instance): the cause said as a
/// retiring node says it, on the console and as the tag the scope's budget counts.
pub(super) async fn abandoning(c: &Completer, job: &JoinJob, ctx: &Context, p: &Proof) {
    retire::say(&retiring(c, job, ctx), p.verdict, &p.causes.join("; ")).await;
}

/// Where and as whom this node retires.
fn retiring<'a>(c: &'a Completer, job: &'a JoinJob, ctx: &'a Context) -> Retiring<'a> {
    Retiring {
        root: &c.root,
        bus_address: &c.bus_address,
        ctx,
        instance_id: &job.instance_id,
        group: job.group.as_deref(),
        policy: c.policy,
    }
}

/// `verify.initDeadline`: every watched condition True in time, recorded as a phase; else the
/// verdict `init-deadline` with what was not True, judged and recorded. `refused`: the agent's
/// conditions, when their patch was refused: tried again at every read.
pub(super) async fn init_deadline(
    c: &Completer,
    job: &JoinJob,
    ctx: &Context,
    (own, active_at): (&mut OwnNode, Instant),
    p: &Proof,
    refused: Option<&[Condition]>,
) -> Result<Option<Proof>, CompleteError> {
    let Some(secs) = job.init_deadline_secs else {
        return Ok(None);
    };
    let kinds = fit::watched(job);
    // Counted on the monotonic clock from kubelet active: a clock stepped since moves nothing.
    let end = active_at + Duration::from_secs(secs.min(86_400));
    let unmet = match fit::initialised(own, ctx, job, (&kinds, refused), (end, c.poll)).await {
        Ok(()) => {
            tracing::info!("the Node is initialised: {} True", kinds.join(", "));
            let tag = (fleet::INITIALISED_TAG, ctx.cluster.as_str());
            let _ = fleet::mark(ctx, &job.instance_id, tag.0, tag.1).await;
            update_join(c, |join| join.phase("initialised", now_ms()))?;
            return Ok(None);
        }
        Err(unmet) => unmet,
    };
    let mut late = p.clone();
    late.verdict = JoinVerdict::InitDeadline;
    late.causes = vec![format!(
        "the Node's conditions not all True {secs}s after kubelet was active (verify.initDeadline): {}",
        unmet.lines().join("; ")
    )];
    let fleet = peers(job, ctx).await;
    let fleet = fleet.as_ref().map_err(String::as_str);
    let (blame, why) = blame_uninitialised(&unmet, fleet, scope(job));
    late.blame = Some(blame);
    late.causes.push(why);
    update_join(c, |join| {
        join.phase("init deadline", now_ms());
        join.verdict = Some(late.verdict);
        join.blame = late.blame;
        join.causes.extend(late.causes.iter().cloned());
    })?;
    Ok(Some(late))
}

/// `verify.lateJoin`: a node kept after `deadline` or `not-ready` is watched; Ready within it,
/// its conditions say it joined (the rule releases it) and the verdict becomes `joined-late`.
pub(super) async fn late_join(
    c: &Completer,
    job: &JoinJob,
    ctx: &Context,
    p: &Proof,
    ran: &Ran,
) -> Result<Option<Proof>, CompleteError> {
    let retiring = job.retire.is_some();
    if job.late_join_secs == 0 || !outcome::watches_late(p.verdict, p.blame, retiring) {
        return Ok(None);
    }
    tracing::info!(
        "the node is kept: watching for it to be Ready for {}s (verify.lateJoin)",
        job.late_join_secs
    );
    let late_job = JoinJob {
        deadline_secs: job.late_join_secs,
        ..job.clone()
    };
    let held = fit::decided(p, (false, false), ran);
    let (seen, mut own) = proof::prove(&late_job, ctx, c.poll, &held).await;
    if !matches!(seen.verdict, JoinVerdict::Joined | JoinVerdict::Mismatch) {
        tracing::warn!("the Node was not Ready within verify.lateJoin either");
        return Ok(None);
    }
    let mut late = seen;
    late.verdict = JoinVerdict::JoinedLate;
    late.blame = None;
    let set = fit::decided(&late, (false, false), ran);
    let failed = own.set_logged(ctx, &set, None).await;
    let _ = fleet::mark_joined(ctx, &job.instance_id).await;
    tracing::info!("the node joined late: the Node is Ready");
    update_join(c, |join| {
        join.phase("joined late", now_ms());
        join.verdict = Some(JoinVerdict::JoinedLate);
        join.conditions = fit::said(&set, failed.as_ref());
    })?;
    Ok(Some(late))
}

/// `verify.onFailure`: the node retires itself for a verdict of its own cause, recorded: the
/// cause said once, kubelet stopped (a retiring node takes no pods), then the retirement tried
/// until it is done (`--retire-attempts`; by default until the instance is gone).
pub(super) async fn retire(
    c: &Completer,
    job: &JoinJob,
    ctx: &Context,
    p: &Proof,
) -> Result<(), CompleteError> {
    let Some(how) = job.retire else {
        return Ok(());
    };
    if !outcome::retires(p.verdict, p.blame) {
        return Ok(());
    }
    let r = retiring(c, job, ctx);
    retire::say(&r, p.verdict, &p.causes.join("; ")).await;
    if let Err(e) = stop_kubelet(&c.bus_address).await {
        tracing::warn!("kubelet.service could not be stopped before retiring: {e}");
    }
    let done = retried(c, || retire::act(how, &r)).await;
    match &done {
        Ok(d) => tracing::error!("the node retired itself: {d}"),
        Err(e) => tracing::error!("the node could not retire itself: {e}"),
    }
    update_join(c, |join| {
        join.retired = Some(match done {
            Ok(d) => d,
            Err(e) => format!("not retired: {e}"),
        })
    })
}

/// `act` until it succeeds, `c.retire_attempts` times at most (0: no limit), the wait between
/// two doubling from `c.retire_retry` to five minutes.
async fn retried<F, Fut>(c: &Completer, mut act: F) -> Result<String, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<String, String>>,
{
    let mut wait = c.retire_retry;
    let mut attempt: u32 = 0;
    loop {
        attempt = attempt.saturating_add(1);
        let e = match act().await {
            Ok(d) => return Ok(d),
            Err(e) => e,
        };
        if c.retire_attempts != 0 && attempt >= c.retire_attempts {
            return Err(format!("{e} (tried {attempt} times)"));
        }
        tracing::warn!("retiring failed (attempt {attempt}), tried again in {wait:?}: {e}");
        update_join(c, |join| {
            join.retired = Some(format!("retrying (attempt {attempt} failed: {e})"))
        })
        .ok();
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(300));
    }
}

/// kubelet.service stopped: a retiring node takes no pods.
async fn stop_kubelet(bus: &str) -> Result<(), systemd::SystemdError> {
    let conn = systemd::connect(bus).await?;
    systemd::queue(&conn, "kubelet.service", systemd::Job::Stop).await
}
