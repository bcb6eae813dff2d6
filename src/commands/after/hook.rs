//! Stage 5, the launch hook: completed with the verdict's result (`CONTINUE` for a Node Ready as
//! planned, `ABANDON` for a failure of the node's own or under `strict`), and what Auto Scaling
//! made of it recorded.

use tokio::time::Instant;

use super::completer::{update_join, CompleteError, Completer};
use crate::aws::autoscaling::{complete_launch, Completed, HookResult};
use crate::instance::lifecycle::LaunchHookJob;
use crate::os::fsutil;
use crate::verify::launch_of;
use crate::verify::proof::Proof;
use crate::verify::verdict::hook_result;

/// What the launch is told: a Node Ready as planned continues even when a step after the
/// hand-off failed, under `strict` too. Such a step fails on what the AMI or the config gives
/// every instance (a pause image the AMI does not keep), which a replacement meets again; the
/// failure stays in the verdict and the unit's exit status.
pub(super) fn launch_result(p: &Proof, ready_as_planned: bool, strict: bool) -> HookResult {
    if ready_as_planned && p.verdict != crate::verify::record::JoinVerdict::Unfit {
        return HookResult::Continue;
    }
    hook_result(p.verdict, p.blame, strict)
}

/// The hook completed with `result` and recorded: what Auto Scaling made of it, or why not.
pub(super) async fn tell(
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

/// CompleteLifecycleAction with `result`: the group asked of Auto Scaling when the run did not
/// know it.
pub(super) async fn complete(
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

/// How the hook's calls go without the proof's job: the proxy the unit's environment gives
/// (the agent's drop-in), to where the hook's job says the boot found IMDS and with its names.
pub(super) fn hook_transport(h: &LaunchHookJob) -> Option<crate::aws::Transport> {
    crate::aws::Transport::from_env(h.aws.clone())
}

#[cfg(test)]
mod tests {
    use super::super::prove::fold_after;
    use super::*;
    use crate::exec::after::Ran;
    use crate::verify::record::JoinVerdict;
    use crate::verify::verdict::Seen;

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
