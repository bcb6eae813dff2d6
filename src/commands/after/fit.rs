//! Fit for service, after the proof (docs/join.md#node-conditions): the boot's Node conditions
//! from what the proof and the steps after the hand-off came to, the initialisation deadline
//! over them (and the other reporters' conditions the config names), and the node retiring
//! itself where no launch hook waits for a verdict of its own cause.

use std::time::Duration;

use tokio::time::Instant;

use crate::exec::after::Ran;
use crate::verify::conditions::Unmet;
use crate::verify::conditions::{self, Condition, AS_PLANNED, BOOT_STEPS, JOINED};
use crate::verify::outcome;
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
/// [`JOINED`] as the outcome table says ([`outcome::joined`]); [`AS_PLANNED`] beside it.
/// `hold`: `verify.mismatch: hold`, a mismatch (a failed step after the hand-off among them)
/// says `Joined=False`.
pub(super) fn decided(
    p: &Proof,
    (ready_as_planned, hold): (bool, bool),
    ran: &Ran,
) -> Vec<Condition> {
    if p.registered_at.is_none() {
        return Vec::new();
    }
    let verdict = match (ready_as_planned, hold && p.verdict == JoinVerdict::Mismatch) {
        _ if p.verdict == JoinVerdict::Unfit => JoinVerdict::Unfit,
        (_, true) => JoinVerdict::Mismatch,
        (true, false) => JoinVerdict::Joined,
        (false, false) => p.verdict,
    };
    let (ok, reason) = outcome::joined(verdict, hold);
    let joined = match ok {
        true => Condition::new(JOINED, true, reason, &p.checked.join("; ")),
        false => Condition::new(JOINED, false, reason, &p.causes.join("; ")),
    };
    let planned = match p.verdict {
        JoinVerdict::Joined => Some(Condition::new(
            AS_PLANNED,
            true,
            "AsPlanned",
            &p.checked.join("; "),
        )),
        JoinVerdict::Mismatch | JoinVerdict::Unfit => Some(Condition::new(
            AS_PLANNED,
            false,
            "NotAsPlanned",
            &p.causes.join("; "),
        )),
        _ => None,
    };
    std::iter::once(joined)
        .chain(planned)
        .chain(boot(ran))
        .collect()
}

/// What the record says of conditions set, or why they were not.
pub(super) fn said(set: &[Condition], failed: Option<&crate::verify::Cause>) -> Vec<String> {
    match failed {
        Some(c) => vec![format!("not set: ({}) {}", c.code, c.detail)],
        None => set.iter().map(Condition::to_string).collect(),
    }
}

/// The condition types the initialisation deadline waits for: [`JOINED`] (the one the
/// shipped rule waits on), then the config's. Watched whether or not the agent could set its
/// own: a patch refused leaves it unset, and the deadline says so.
pub(super) fn watched(job: &JoinJob) -> Vec<String> {
    std::iter::once(JOINED.to_string())
        .chain(job.init_conditions.iter().cloned())
        .collect()
}

/// Wait until every watched condition is True on the Node, reading it every `every`, until
/// `deadline`: what was not True at the end, otherwise. `refused`: the agent's own conditions,
/// set again before each read until a patch is taken.
pub(super) async fn initialised(
    own: &mut OwnNode,
    ctx: &Context,
    job: &JoinJob,
    (kinds, mut refused): (&[String], Option<&[Condition]>),
    (deadline, every): (Instant, Duration),
) -> Result<(), Unmet> {
    let unread = |why: String| Unmet {
        unset: vec![why],
        ..Unmet::default()
    };
    loop {
        if let Some(set) = refused {
            if own.set_logged(ctx, set, None).await.is_none() {
                refused = None;
            }
        }
        let read = tokio::time::timeout(
            crate::verify::proof::LOOK_TIMEOUT,
            own.node(ctx, &job.instance_id),
        );
        let last = match read.await {
            Ok(Ok(Some(node))) => conditions::unmet(&node, kinds),
            Ok(Ok(None)) => unread("the Node is gone".into()),
            Ok(Err(c)) => unread(format!(
                "the Node could not be read: ({}) {}",
                c.code, c.detail
            )),
            Err(_) => unread("a read of the Node did not answer".into()),
        };
        if last.is_empty() {
            return Ok(());
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
        let c = decided(&proof(JoinVerdict::Joined, true), (true, false), &ran);
        let got: Vec<_> = c
            .iter()
            .map(|c| (c.kind.as_str(), c.status, c.reason))
            .collect();
        assert_eq!(
            got,
            [
                (JOINED, "True", "JoinedAsPlanned"),
                (AS_PLANNED, "True", "AsPlanned"),
                (BOOT_STEPS, "True", "NoSteps")
            ]
        );
        let failed = Ran {
            failures: vec!["the sandbox image is not in containerd's store".into()],
            ..Ran::default()
        };
        // A failed step: the Node itself as planned stays Joined; the steps' condition and
        // AsPlanned say it.
        let c = decided(&proof(JoinVerdict::Mismatch, true), (true, false), &failed);
        let got: Vec<_> = c.iter().map(|c| (c.status, c.reason)).collect();
        assert_eq!(
            got,
            [
                ("True", "JoinedAsPlanned"),
                ("False", "NotAsPlanned"),
                ("False", "StepFailed")
            ]
        );
        // A Node not as planned joined all the same: the rule (on Joined) releases it.
        let c = decided(&proof(JoinVerdict::Mismatch, true), (false, false), &ran);
        assert_eq!((c[0].status, c[0].reason), ("True", "NotAsPlanned"));
        assert_eq!((c[1].kind.as_str(), c[1].status), (AS_PLANNED, "False"));
        assert!(c[1].message.contains("planned 29"), "{:?}", c[1]);
        let c = decided(&proof(JoinVerdict::NotReady, true), (false, false), &ran);
        assert_eq!((c[0].status, c[0].reason), ("False", "NotReady"));
        assert_eq!(c.len(), 2, "no AsPlanned for a Node not Ready: {c:?}");
        assert!(decided(&proof(JoinVerdict::Deadline, false), (false, false), &ran).is_empty());
        let c = decided(&proof(JoinVerdict::JoinedLate, true), (false, false), &ran);
        // Held by the config: a mismatch says Joined=False, a failed step's too.
        let c2 = decided(&proof(JoinVerdict::Mismatch, true), (false, true), &ran);
        assert_eq!((c2[0].status, c2[0].reason), ("False", "NotAsPlanned"));
        let c2 = decided(&proof(JoinVerdict::Mismatch, true), (true, true), &failed);
        assert_eq!((c2[0].status, c2[0].reason), ("False", "NotAsPlanned"));
        assert_eq!((c[0].status, c[0].reason), ("True", "JoinedLate"));
        // The deadline watches Joined and the config's conditions, nothing else.
        let job: JoinJob = serde_json::from_value(serde_json::json!({
            "cluster": "c", "region": "r", "endpoint": "e", "certificateAuthority": "",
            "node": {"from": "instanceId", "name": "i"}, "instanceId": "i", "stsUrl": "s",
            "imdsEndpoint": "m", "deadlineSecs": 1, "expect": {"labels": {}, "taints": []},
            "initConditions": ["gpu.example/Ready"],
        }))
        .unwrap();
        assert_eq!(watched(&job), [JOINED, "gpu.example/Ready"]);
        let p = pending(&ran);
        assert_eq!(
            (p[0].kind.as_str(), p[0].status, p[0].reason),
            (JOINED, "False", "Proving")
        );
    }
}
