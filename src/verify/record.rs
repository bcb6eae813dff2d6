//! One record of the boot's join, in the report's `join` section: each phase with its time,
//! the preflight's results, the verdict, its causes and what Auto Scaling was told. `init`
//! writes the first part, `complete-hook` the rest; `status` prints it.

use serde::{Deserialize, Serialize};

use super::verdict::Blame;
pub use super::verdict::JoinVerdict;
use super::{CheckResult, Verdict};

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct JoinRecord {
    #[serde(default)]
    pub phases: Vec<Phase>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preflight: Vec<CheckResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<JoinVerdict>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<String>,
    /// Whose cause it is when the node did not join: `node` (the launch is abandoned) or
    /// `cluster` (it goes on, the cause named).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blame: Option<Blame>,
    /// What the launch hook was completed with, or why it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook: Option<String>,
    /// The hook should have been completed and was not: Auto Scaling applies its default
    /// result at the heartbeat timeout (`status` fails).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hook_failed: bool,
    /// What the Node showed against the plan.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checked: Vec<String>,
    /// `verify.join: off`: the node was handed off and no proof runs, so no verdict comes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unproven: bool,
    /// The Node conditions last set (`type=status (reason)`), or why they could not be.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<String>,
    /// How the node retired itself (`verify.onFailure`), or why it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retired: Option<String>,
    /// Why this node cannot count for others' verdicts (its joined tag not written): no node
    /// of its scope retires on its account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guard: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Phase {
    pub phase: String,
    pub at_unix_ms: u64,
}

impl JoinRecord {
    /// `status`'s verdict on the record: `Ok` when the node joined, or was handed off with no
    /// proof asked for, and its launch hook (if any) was completed; why not, otherwise.
    pub fn judged(&self) -> Result<(), String> {
        if self.hook_failed {
            return Err(format!(
                "the launch hook was not completed ({}): Auto Scaling applies its default result at the heartbeat timeout",
                self.hook.as_deref().unwrap_or("no answer recorded")
            ));
        }
        match self.verdict {
            Some(JoinVerdict::Joined | JoinVerdict::JoinedLate) => Ok(()),
            Some(JoinVerdict::InitDeadline) => {
                Err("the node joined and did not finish initialising in time: init-deadline".into())
            }
            None if self.unproven => Ok(()),
            Some(v) => Err(format!("the node did not join: {}", v.as_str())),
            None => Err("the node has no verdict yet".into()),
        }
    }

    /// With the boot's other checks before and beside the changes (any setting's: the
    /// report's `checks` has every check by its name) after the join's own.
    pub fn with_checks(mut self, all: impl IntoIterator<Item = CheckResult>) -> JoinRecord {
        for r in all {
            let known = self.preflight.iter().any(|p| p.check == r.check);
            if !known && r.phase.as_deref() != Some("after") {
                self.preflight.push(r);
            }
        }
        self
    }

    /// Every cause, the one that decided first: the failures of the checks before the changes
    /// that count (they stop the run), the proof's causes, the failures beside the changes that
    /// count, then those that do not count.
    pub fn all_causes(&self) -> Vec<String> {
        let failed = |first: bool, advisory: bool| {
            self.preflight
                .iter()
                .filter(move |r| {
                    let before = r.phase.as_deref() == Some("first");
                    r.result == Verdict::Failed
                        && r.advisory == advisory
                        && (advisory || before == first)
                })
                .map(CheckResult::line)
        };
        failed(true, false)
            .chain(self.causes.iter().cloned())
            .chain(failed(false, false))
            .chain(failed(false, true))
            .collect()
    }

    /// The record as `status --output json` gives it: `causes` holds every cause, the one that
    /// decided first ([`Self::all_causes`]).
    pub fn for_tools(&self) -> JoinRecord {
        JoinRecord {
            causes: self.all_causes(),
            ..self.clone()
        }
    }

    pub fn phase(&mut self, name: &str, at_unix_ms: u64) {
        self.phases.push(Phase {
            phase: name.to_string(),
            at_unix_ms,
        });
    }

    /// For a person on the node: the phases with their offsets, the checks, the verdict, its
    /// causes and what to do.
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        let undecided = match self.unproven {
            true => "none: the join is not proven (verify.join is off)",
            false => "not decided yet (the proof has not run, or is running)",
        };
        let verdict = self.verdict.map_or(undecided, JoinVerdict::as_str);
        o.push_str(&format!("verdict: {verdict}\n"));
        if let Some(b) = self.blame {
            o.push_str(&format!("blame: {}\n", b.as_str()));
        }
        if let Some(h) = &self.hook {
            let failed = if self.hook_failed { "FAILED: " } else { "" };
            o.push_str(&format!("launch hook: {failed}{h}\n"));
        }
        if let Some(g) = &self.guard {
            o.push_str(&format!("guard: {g}\n"));
        }
        if let Some(r) = &self.retired {
            o.push_str(&format!("retired: {r}\n"));
        }
        for c in &self.conditions {
            o.push_str(&format!("Node condition: {c}\n"));
        }
        let causes = self.all_causes();
        if let Some((first, others)) = causes.split_first() {
            o.push_str(&format!("cause: {first}\n"));
            for c in others {
                o.push_str(&format!("other cause: {c}\n"));
            }
        }
        if let Some(first) = self.phases.first() {
            o.push_str("phases:\n");
            for p in &self.phases {
                let dt = p.at_unix_ms.saturating_sub(first.at_unix_ms);
                o.push_str(&format!("  {:>9.3} s  {}\n", dt as f64 / 1000.0, p.phase));
            }
        }
        for (phase, title) in [
            (
                "first",
                "checks before the changes (one that counts stops the run)",
            ),
            ("beside", "checks beside the changes"),
        ] {
            let of: Vec<_> = self
                .preflight
                .iter()
                .filter(|r| r.phase.as_deref().unwrap_or("beside") == phase)
                .collect();
            if !of.is_empty() {
                o.push_str(&format!("{title}:\n"));
            }
            for r in of {
                let what = match r.result {
                    Verdict::Passed => "ok",
                    Verdict::Failed => "FAILED",
                    Verdict::Skipped => "skipped",
                    Verdict::NotRun => "not run",
                };
                // A failure is a cause above, with its detail and what to do.
                let line = match (&r.result, &r.cause) {
                    (Verdict::Failed, Some(code)) => format!("{} ({code})", r.check),
                    _ => r.line(),
                };
                o.push_str(&format!("  {what:<7} {:>5} ms  {line}\n", r.ms));
            }
        }
        for c in &self.checked {
            o.push_str(&format!("node: {c}\n"));
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_passes_a_joined_node_and_one_whose_join_is_not_proven() {
        let joined = JoinRecord {
            verdict: Some(JoinVerdict::Joined),
            ..JoinRecord::default()
        };
        assert_eq!(joined.judged(), Ok(()));
        let off = JoinRecord {
            unproven: true,
            ..JoinRecord::default()
        };
        assert_eq!(off.judged(), Ok(()));
        assert!(off
            .to_text()
            .starts_with("verdict: none: the join is not proven (verify.join is off)"));
        let waiting = JoinRecord::default();
        assert_eq!(waiting.judged(), Err("the node has no verdict yet".into()));
        let hook = JoinRecord {
            unproven: true,
            hook_failed: true,
            ..JoinRecord::default()
        };
        assert!(hook
            .judged()
            .unwrap_err()
            .starts_with("the launch hook was not completed"));
        let record: JoinRecord =
            serde_json::from_value(serde_json::json!({"unproven": true})).unwrap();
        assert!(record.unproven);
        // Joined, never initialised, retired: said so, with the conditions last set.
        let late = JoinRecord {
            verdict: Some(JoinVerdict::InitDeadline),
            retired: Some("SetInstanceHealth Unhealthy".into()),
            conditions: vec!["eks-nodeinit.io/Joined=True (JoinedAsPlanned)".into()],
            ..JoinRecord::default()
        };
        assert!(late
            .judged()
            .unwrap_err()
            .contains("did not finish initialising"));
        let text = late.to_text();
        assert!(
            text.contains("\nretired: SetInstanceHealth Unhealthy\n"),
            "{text}"
        );
        assert!(
            text.contains("\nNode condition: eks-nodeinit.io/Joined=True (JoinedAsPlanned)\n"),
            "{text}"
        );
        // Joined late: it joined; a guard that cannot open is said, not failed.
        let late = JoinRecord {
            verdict: Some(JoinVerdict::JoinedLate),
            guard: Some("the tag eks-nodeinit/joined could not be written".into()),
            ..JoinRecord::default()
        };
        assert_eq!(late.judged(), Ok(()));
        let text = late.to_text();
        assert!(text.starts_with("verdict: joined-late\n"), "{text}");
        assert!(
            text.contains("\nguard: the tag eks-nodeinit/joined could not be written\n"),
            "{text}"
        );
    }

    #[test]
    fn status_leads_with_the_cause_that_decided_and_says_each_failure_once() {
        let failed = |check: &str, cause: &str, advisory: bool| CheckResult {
            check: check.into(),
            result: Verdict::Failed,
            cause: Some(cause.into()),
            detail: format!("{check} said no"),
            todo: Some(format!("fix {check}")),
            ms: 3,
            advisory,
            phase: Some("first".into()),
            condition: None,
            own_fault: false,
        };
        let rec = JoinRecord {
            verdict: Some(JoinVerdict::ChecksFailed),
            preflight: vec![
                failed("STS reachable", "unreachable", true),
                failed(
                    "identity is system:node:n in system:nodes",
                    "unauthenticated",
                    false,
                ),
            ],
            ..JoinRecord::default()
        };
        let text = rec.to_text();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[1]
                .starts_with("cause: identity is system:node:n in system:nodes (unauthenticated)"),
            "{text}"
        );
        assert!(
            lines[2].starts_with("other cause: STS reachable (unreachable)"),
            "{text}"
        );
        for todo in ["fix identity", "fix STS"] {
            assert_eq!(text.matches(todo).count(), 1, "{todo} once:\n{text}");
        }
        assert!(
            text.contains("FAILED      3 ms  STS reachable (unreachable)\n"),
            "{text}"
        );
    }

    #[test]
    fn tools_get_every_cause_the_checks_before_the_changes_first() {
        let failed = CheckResult {
            check: "identity".into(),
            result: Verdict::Failed,
            cause: Some("unauthenticated".into()),
            detail: "refused".into(),
            todo: Some("map the role".into()),
            ms: 3,
            advisory: false,
            phase: Some("first".into()),
            condition: None,
            own_fault: false,
        };
        let rec = JoinRecord {
            verdict: Some(JoinVerdict::ChecksFailed),
            preflight: vec![failed],
            causes: vec!["the proof's".into()],
            ..JoinRecord::default()
        };
        let json = serde_json::to_value(rec.for_tools()).unwrap();
        assert_eq!(
            json["causes"],
            serde_json::json!([
                "identity (unauthenticated): refused; map the role",
                "the proof's"
            ])
        );
    }
}
