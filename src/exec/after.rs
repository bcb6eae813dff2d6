//! The `Run` steps after the hand-off ([`crate::plan::step::When::After`]), from this boot's job
//! ([`crate::plan::aspects::after_handoff`]): `eks-nodeinit complete-hook` (the packaged
//! launch-hook unit) runs them in the plan's order once kubelet is active, before the proof. A
//! step that fails stops the ones after it; what each came to goes into the report's steps, and
//! a failure into the join's verdict. Nothing here or in the unit names a setting.

use crate::exec::report::{Outcome, StepOutcome};
use crate::plan::aspects::after_handoff::AfterJob;
use crate::plan::step::IfFailed;

/// How the report names a step after the hand-off: this, then its purpose.
pub const PREFIX: &str = "after the hand-off: ";

/// What the steps came to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ran {
    pub(crate) outcomes: Vec<StepOutcome>,
    /// Each failure: what did not happen, why, and what to do.
    pub failures: Vec<String>,
}

/// Run the job's steps in order; a failure stops the steps after it.
pub async fn run(job: &AfterJob) -> Ran {
    let mut ran = Ran::default();
    for s in &job.steps {
        let step = format!("{PREFIX}{}", s.purpose);
        let outcome = match (&s.skip, ran.failures.is_empty()) {
            (_, false) => Outcome::Skipped("a step before it after the hand-off failed".into()),
            (Some(why), true) => Outcome::Skipped(why.clone()),
            (None, true) => {
                let if_failed = IfFailed::new(s.what.clone(), s.todo.clone());
                match super::run_argv(&s.argv, s.timeout_secs, &if_failed).await {
                    Ok(()) => {
                        tracing::info!("{step}: done");
                        Outcome::Done
                    }
                    Err(e) => {
                        tracing::error!("{step}: {e}");
                        ran.failures.push(e.to_string());
                        Outcome::Failed(e.to_string())
                    }
                }
            }
        };
        ran.outcomes.push(StepOutcome { step, outcome });
    }
    ran
}

impl Ran {
    /// The job's steps, none run, and why.
    pub fn not_run(job: &AfterJob, why: &str) -> Ran {
        let outcomes = job.steps.iter().map(|s| StepOutcome {
            step: format!("{PREFIX}{}", s.purpose),
            outcome: Outcome::Skipped(why.to_string()),
        });
        Ran {
            outcomes: outcomes.collect(),
            failures: Vec::new(),
        }
    }

    /// Whether there was no step to run.
    pub fn is_empty(&self) -> bool {
        self.outcomes.is_empty()
    }

    /// What each step came to, as the report says it.
    pub fn outcomes(&self) -> Vec<String> {
        let line = |o: &StepOutcome| format!("{}: {}", o.step, o.outcome);
        self.outcomes.iter().map(line).collect()
    }

    /// The outcomes into the report's steps, in place of an earlier run's in this boot.
    pub(crate) fn record(&self, report: &mut crate::exec::report::Report) {
        report.steps.retain(|s| !s.step.starts_with(PREFIX));
        report.steps.extend(self.outcomes.iter().cloned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::aspects::after_handoff::AfterRun;

    fn step(purpose: &str, argv: &[&str], skip: Option<&str>) -> AfterRun {
        AfterRun {
            purpose: purpose.into(),
            argv: argv.iter().map(|a| a.to_string()).collect(),
            timeout_secs: 10,
            skip: skip.map(String::from),
            what: format!("{purpose} did not happen"),
            todo: "look".into(),
        }
    }

    #[tokio::test]
    async fn a_failed_step_stops_the_ones_after_it_and_says_what_to_do() {
        let job = AfterJob {
            steps: vec![
                step("first", &["/bin/true"], None),
                step("not here", &["/bin/false"], Some("--root is not /")),
                step("second", &["/bin/sh", "-c", "echo gone >&2; exit 3"], None),
                step("third", &["/bin/true"], None),
            ],
        };
        let ran = run(&job).await;
        assert_eq!(
            ran.outcomes(),
            [
                "after the hand-off: first: done",
                "after the hand-off: not here: skipped: --root is not /",
                "after the hand-off: second: failed: second did not happen (/bin/sh failed (exit status: 3): gone): look",
                "after the hand-off: third: skipped: a step before it after the hand-off failed",
            ]
        );
        assert_eq!(
            ran.failures,
            ["second did not happen (/bin/sh failed (exit status: 3): gone): look"]
        );
        let none = Ran::not_run(&job, "kubelet never became active");
        assert!(none.failures.is_empty());
        assert_eq!(
            none.outcomes()[3],
            "after the hand-off: third: skipped: kubelet never became active"
        );
        // A second run in this boot replaces the first's outcomes in the report.
        let mut report = crate::exec::report::Report::default();
        report.steps.push(StepOutcome {
            step: "write /etc/x".into(),
            outcome: Outcome::Done,
        });
        none.record(&mut report);
        ran.record(&mut report);
        let steps: Vec<String> = report.steps.iter().map(|s| s.outcome.to_string()).collect();
        assert_eq!(steps.len(), 5, "{steps:?}");
        assert_eq!(steps[1], "done");
    }
}
