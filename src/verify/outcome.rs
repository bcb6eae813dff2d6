//! One table of outcomes (docs/lifecycle.md#every-outcome): for each verdict and blame, what the
//! agent's [`JOINED`](super::conditions::JOINED) condition says, whether the shipped
//! NodeReadinessRule (which waits on it alone) releases the startup taint, what retires, and what
//! bounds the wait. The proof's unit decides by these functions; the docs' table is
//! [`markdown`], checked against the page by a test. No row leaves a node tainted with nothing
//! that ends the wait.

use super::record::JoinVerdict;
use super::verdict::Blame;

/// `eks-nodeinit.io/Joined` for a verdict: its status and reason. A mismatch is a node that
/// joined (Ready, and its finding in `eks-nodeinit.io/AsPlanned`), so the rule releases it,
/// unless the config holds it (`verify.mismatch: hold`); otherwise only a Node not Ready holds
/// the taint, and it takes no pods while not Ready anyway.
pub fn joined(verdict: JoinVerdict, hold_mismatch: bool) -> (bool, &'static str) {
    match verdict {
        JoinVerdict::Joined => (true, "JoinedAsPlanned"),
        JoinVerdict::Mismatch => (!hold_mismatch, "NotAsPlanned"),
        JoinVerdict::InitDeadline => (true, "JoinedAsPlanned"),
        JoinVerdict::JoinedLate => (true, "JoinedLate"),
        JoinVerdict::Unfit => (false, "Unfit"),
        JoinVerdict::NotReady | JoinVerdict::Deadline | JoinVerdict::ChecksFailed => {
            (false, "NotReady")
        }
    }
}

/// Whether a verdict retires the node (or abandons its launch): a Node that never joined or
/// never initialised, for a cause of its own. A mismatch joined; a failed check before the
/// hand-off is the AMI's or the config's (a replacement meets it again); a cause the fleet
/// shares never.
pub fn retires(verdict: JoinVerdict, blame: Option<Blame>) -> bool {
    let failed = matches!(
        verdict,
        JoinVerdict::Deadline
            | JoinVerdict::NotReady
            | JoinVerdict::InitDeadline
            | JoinVerdict::Unfit
    );
    failed && blame == Some(Blame::Node)
}

/// Whether a verdict goes on to the initialisation deadline: a Node that is Ready.
pub fn waits_to_initialise(verdict: JoinVerdict) -> bool {
    matches!(verdict, JoinVerdict::Joined | JoinVerdict::Mismatch)
}

/// Whether a failed join goes on watching the Node until it is Ready (then `joined-late`): a
/// Node not Ready, or none registered, unless the node is leaving (its launch abandoned, or it
/// retires itself: `retiring` with a verdict that [`retires`]).
pub fn watches_late(verdict: JoinVerdict, blame: Option<Blame>, retiring: bool) -> bool {
    let leaving = retiring && retires(verdict, blame);
    matches!(verdict, JoinVerdict::Deadline | JoinVerdict::NotReady) && !leaving
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub case: String,
    pub joined: String,
    pub rule: &'static str,
    pub retires: &'static str,
    pub bound: &'static str,
}

fn row(verdict: JoinVerdict, blame: Option<Blame>, bound: &'static str) -> Row {
    let (ok, reason) = joined(verdict, false);
    let case = match blame {
        Some(b) => format!("`{}`, blame `{}`", verdict.as_str(), b.as_str()),
        None => format!("`{}`", verdict.as_str()),
    };
    let (joined, rule) = match (verdict, ok) {
        (JoinVerdict::Deadline | JoinVerdict::ChecksFailed, _) => {
            ("none (no Node)".to_string(), "nothing to release")
        }
        (_, true) => (format!("True ({reason})"), "releases the taint"),
        (JoinVerdict::Unfit, false) => (
            format!("False ({reason})"),
            "holds it: the Node is Ready, and takes no pods",
        ),
        (_, false) => (
            format!("False ({reason})"),
            "holds it; the Node is not Ready anyway",
        ),
    };
    let retires = match (retires(verdict, blame), verdict) {
        (true, JoinVerdict::InitDeadline) => {
            "retires (`verify.onFailure`; the hook was completed before)"
        }
        (true, _) => "`ABANDON`, else retires (`verify.onFailure`)",
        (false, JoinVerdict::Mismatch) => "never (`ABANDON` under `strict`)",
        (false, JoinVerdict::Joined | JoinVerdict::JoinedLate) => "never",
        (false, JoinVerdict::InitDeadline) => "kept, the cause said",
        (false, _) => "kept, the cause said (`ABANDON` under `strict`)",
    };
    Row {
        case,
        joined,
        rule,
        retires,
        bound,
    }
}

/// What ends the wait of a node kept after a failed join.
const KEPT: &str =
    "`verify.joinDeadline`, then watched until Ready (`joined-late`) for `verify.lateJoin`";

/// Every outcome, in the order the docs list them.
pub fn table() -> Vec<Row> {
    use JoinVerdict::*;
    let (node, cluster) = (Some(Blame::Node), Some(Blame::Cluster));
    let mut rows = vec![
        row(
            Joined,
            None,
            "`verify.initDeadline` for the config's other conditions",
        ),
        row(
            Mismatch,
            None,
            "the same: the finding is in `AsPlanned`, which the rule does not wait on",
        ),
        Row {
            case: "`mismatch`, `verify.mismatch: hold`".into(),
            joined: format!("False ({})", joined(Mismatch, true).1),
            rule: "holds it, as the config asks",
            retires: "never (`ABANDON` under `strict`)",
            bound: "`verify.initDeadline` (15 minutes by default with a startup taint): `init-deadline`, blame `cluster`, kept",
        },
        row(ChecksFailed, None, "no hand-off: the unit fails at boot"),
        row(Deadline, node, "`verify.joinDeadline`"),
        row(Deadline, cluster, KEPT),
        row(NotReady, node, "`verify.joinDeadline`"),
        row(NotReady, cluster, KEPT),
        row(JoinedLate, None, "the rule releases it once Ready"),
        row(
            Unfit,
            node,
            "`verify.joinDeadline` at most: the verdict comes with the proof, then the node leaves (a launch hook's `ABANDON`, else `verify.onFailure`)",
        ),
        Row {
            case: "`unfit`, like peers failing alike, the budget spent, or nothing to make it leave (`verify.onFailure: report` and no launch hook)".into(),
            // The Node itself is as planned: `fit::decided` keeps `Joined` as for a failed step.
            joined: format!("True ({})", joined(Joined, false).1),
            rule: "releases the taint: a `mismatch`, `AsPlanned` and the check's own condition `False`",
            retires: "never",
            bound: "as `mismatch`: the fault is the image's or the expectation's, which a replacement meets too, or nothing would retire the node",
        },
        row(InitDeadline, node, "`verify.initDeadline`"),
        row(
            InitDeadline,
            cluster,
            "`verify.initDeadline`: the other reporter's condition decides, the verdict says which",
        ),
    ];
    rows.push(Row {
        case: "conditions refused (`conditions-forbidden`)".into(),
        joined: "unset: retried every read until the initialisation deadline".into(),
        rule: "holds it until a patch succeeds",
        retires: "kept (a refusal is the cluster's RBAC)",
        bound: "`verify.initDeadline` (15 minutes by default with a startup taint): `init-deadline`, blame `cluster`",
    });
    rows.push(Row {
        case: "`verify.join: off`".into(),
        joined: "never set".into(),
        rule: "would hold it for ever",
        retires: "never",
        bound: "refused: `validate` rejects `lifecycle.startupTaint` with `verify.join: off`",
    });
    rows
}

/// The table as the docs show it.
pub fn markdown() -> String {
    let mut out = String::from(
        "| outcome | `eks-nodeinit.io/Joined` | the shipped rule | retires | what ends the wait |\n|---|---|---|---|---|\n",
    );
    for r in table() {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            r.case, r.joined, r.rule, r.retires, r.bound
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_row_holds_the_taint_with_nothing_that_ends_the_wait() {
        for r in table() {
            assert!(!r.bound.is_empty(), "{r:?}");
            if r.rule.starts_with("holds") || r.rule.starts_with("would hold") {
                let leaves = r.retires.starts_with("`ABANDON`") || r.retires.starts_with("retires");
                let ends = r.bound.contains("initDeadline") || r.bound.starts_with("refused");
                // A Node not Ready takes no pods, held or not.
                let idle = r.rule.ends_with("the Node is not Ready anyway");
                assert!(leaves || ends || idle, "{r:?}");
            }
        }
        // A mismatch joined: released, never retired.
        assert_eq!(joined(JoinVerdict::Mismatch, false), (true, "NotAsPlanned"));
        assert_eq!(joined(JoinVerdict::Mismatch, true), (false, "NotAsPlanned"));
        assert!(!retires(JoinVerdict::Mismatch, Some(Blame::Node)));
        assert!(waits_to_initialise(JoinVerdict::Mismatch));
        assert!(watches_late(
            JoinVerdict::NotReady,
            Some(Blame::Cluster),
            true
        ));
        assert!(!watches_late(
            JoinVerdict::NotReady,
            Some(Blame::Node),
            true
        ));
        // Blamed, but only reported (`verify.onFailure: report`): it stays, so it is watched.
        assert!(watches_late(
            JoinVerdict::Deadline,
            Some(Blame::Node),
            false
        ));
        assert!(!watches_late(JoinVerdict::Mismatch, None, false));
    }

    #[test]
    fn only_a_failed_join_of_the_nodes_own_cause_retires() {
        use JoinVerdict::*;
        for v in [Deadline, NotReady, InitDeadline, Unfit] {
            assert!(retires(v, Some(Blame::Node)), "{v:?}");
            assert!(!retires(v, Some(Blame::Cluster)), "{v:?}");
            assert!(!retires(v, None), "{v:?}");
        }
        for v in [Joined, Mismatch, ChecksFailed, JoinedLate] {
            assert!(!retires(v, Some(Blame::Node)), "{v:?}");
        }
    }

    #[test]
    fn the_docs_show_the_table_the_code_decides_by() {
        let page = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/lifecycle.md"),
        )
        .unwrap();
        assert!(
            page.contains(&markdown()),
            "docs/lifecycle.md lacks:\n{}",
            markdown()
        );
    }
}
