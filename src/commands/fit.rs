//! Fit for service, after the proof (docs/join.md#node-conditions): the boot's Node conditions
//! from what the proof and the steps after the hand-off came to, the initialisation deadline
//! over them (and the other reporters' conditions the config names), and the node retiring
//! itself where no launch hook waits for a verdict of its own cause.

use std::time::Duration;

use tokio::time::Instant;

use crate::exec::after::Ran;
use crate::verify::conditions::{self, Condition, BOOT_STEPS, JOINED};
use crate::verify::proof::{JoinJob, OwnNode, Proof};
use crate::verify::record::JoinVerdict;
use crate::verify::Context;

/// The steps after the hand-off as conditions: [`BOOT_STEPS`], then each step's own.
fn boot(ran: &Ran) -> Vec<Condition> {
    let steps = match ran.failures.is_empty() {
        true if ran.is_empty() => Condition::new(
            BOOT_STEPS,
            true,
            "NoSteps",
            "no steps after the hand-off in this boot",
        ),
        true => Condition::new(
            BOOT_STEPS,
            true,
            "StepsDone",
            &format!("{} step(s) after the hand-off done", ran.outcomes().len()),
        ),
        false => Condition::new(BOOT_STEPS, false, "StepFailed", &ran.failures.join("; ")),
    };
    std::iter::once(steps)
        .chain(ran.conditions.iter().cloned())
        .collect()
}

/// The conditions the Node gets when the proof first sees it: the join not decided yet.
pub(super) fn pending(ran: &Ran) -> Vec<Condition> {
    let joined = Condition::new(
        JOINED,
        false,
        "Proving",
        "eks-nodeinit is waiting for the Node to be Ready as planned (verify.joinDeadline)",
    );
    std::iter::once(joined).chain(boot(ran)).collect()
}

/// The conditions after the verdict; none when no Node registered (nothing to set them on).
pub(super) fn decided(p: &Proof, ready_as_planned: bool, ran: &Ran) -> Vec<Condition> {
    if p.registered_at.is_none() {
        return Vec::new();
    }
    let joined = match (ready_as_planned, p.verdict) {
        (true, _) => Condition::new(JOINED, true, "JoinedAsPlanned", &p.checked.join("; ")),
        (false, JoinVerdict::Mismatch) => {
            Condition::new(JOINED, false, "NotAsPlanned", &p.causes.join("; "))
        }
        (false, _) => Condition::new(JOINED, false, "NotReady", &p.causes.join("; ")),
    };
    std::iter::once(joined).chain(boot(ran)).collect()
}

/// What the record says of conditions set, or why they were not.
pub(super) fn said(set: &[Condition], failed: Option<&crate::verify::Cause>) -> Vec<String> {
    match failed {
        Some(c) => vec![format!("not set: ({}) {}", c.code, c.detail)],
        None => set.iter().map(Condition::to_string).collect(),
    }
}

/// Whether a verdict waits for the Node to initialise: a Node Ready as planned only. A
/// mismatch is a finding, never retired, and its own conditions, which say so, never turn True.
pub(super) fn waits_to_initialise(verdict: JoinVerdict) -> bool {
    verdict == JoinVerdict::Joined
}

/// The condition types the initialisation deadline waits for: the agent's, then the config's.
pub(super) fn watched(set: &[Condition], job: &JoinJob) -> Vec<String> {
    set.iter()
        .map(|c| c.kind.clone())
        .chain(job.init_conditions.iter().cloned())
        .collect()
}

/// Wait until every watched condition is True on the Node, reading it every `every`, until
/// `deadline`: what was not True at the end, otherwise.
pub(super) async fn initialised(
    own: &mut OwnNode,
    ctx: &Context,
    job: &JoinJob,
    kinds: &[String],
    (deadline, every): (Instant, Duration),
) -> Result<(), Vec<String>> {
    let mut last = vec!["the Node was not read".to_string()];
    loop {
        let read = tokio::time::timeout(
            crate::verify::proof::LOOK_TIMEOUT,
            own.node(ctx, &job.instance_id),
        );
        match read.await {
            Ok(Ok(Some(node))) => {
                last = conditions::unmet(&node, kinds);
                if last.is_empty() {
                    return Ok(());
                }
            }
            Ok(Ok(None)) => last = vec!["the Node is gone".into()],
            Ok(Err(c)) => {
                last = vec![format!(
                    "the Node could not be read: ({}) {}",
                    c.code, c.detail
                )]
            }
            Err(_) => last = vec!["a read of the Node did not answer".into()],
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(last);
        }
        tokio::time::sleep(every.min(deadline - now)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::verdict::Seen;

    fn proof(verdict: JoinVerdict, registered: bool) -> Proof {
        Proof {
            verdict,
            blame: None,
            causes: vec!["allocatable pods: planned 29, the Node has 110".into()],
            checked: vec!["2 planned labels".into()],
            kubelet_active_at: None,
            registered_at: registered.then_some(1),
            ready_at: None,
            seen: Seen::default(),
        }
    }

    #[test]
    fn the_verdict_and_the_steps_become_conditions_with_their_reasons() {
        let ran = Ran::default();
        let c = decided(&proof(JoinVerdict::Joined, true), true, &ran);
        let got: Vec<_> = c
            .iter()
            .map(|c| (c.kind.as_str(), c.status, c.reason))
            .collect();
        assert_eq!(
            got,
            [
                (JOINED, "True", "JoinedAsPlanned"),
                (BOOT_STEPS, "True", "NoSteps")
            ]
        );
        let failed = Ran {
            failures: vec!["the sandbox image is not in containerd's store".into()],
            ..Ran::default()
        };
        // A failed step: the Node itself as planned stays Joined; the steps' condition says it.
        let c = decided(&proof(JoinVerdict::Mismatch, true), true, &failed);
        assert_eq!(
            (c[0].status, c[1].status, c[1].reason),
            ("True", "False", "StepFailed")
        );
        let c = decided(&proof(JoinVerdict::Mismatch, true), false, &ran);
        assert_eq!((c[0].status, c[0].reason), ("False", "NotAsPlanned"));
        let c = decided(&proof(JoinVerdict::NotReady, true), false, &ran);
        assert_eq!((c[0].status, c[0].reason), ("False", "NotReady"));
        assert!(decided(&proof(JoinVerdict::Deadline, false), false, &ran).is_empty());
        // Only a joined Node waits to initialise (a mismatch did, and could be retired).
        assert!(waits_to_initialise(JoinVerdict::Joined));
        for v in [
            JoinVerdict::Mismatch,
            JoinVerdict::NotReady,
            JoinVerdict::Deadline,
        ] {
            assert!(!waits_to_initialise(v), "{v:?}");
        }
        let p = pending(&ran);
        assert_eq!(
            (p[0].kind.as_str(), p[0].status, p[0].reason),
            (JOINED, "False", "Proving")
        );
    }
}
