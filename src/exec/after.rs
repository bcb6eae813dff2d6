//! The steps after the hand-off ([`crate::plan::step::When::After`]), from this boot's job
//! ([`crate::plan::after`]): `eks-nodeinit complete-hook` (the packaged launch-hook unit) runs
//! them in the plan's order once kubelet is active, before the proof: a program as the
//! executor runs one, a check as the executor's checks run. A step that fails (a check that
//! counts) stops the ones after it; what each came to goes into the report's steps, and a
//! failure into the join's verdict. Nothing here or in the unit names a setting.

use std::path::Path;

use crate::exec::report::{Outcome, StepOutcome};
use crate::plan::after::AfterJob;
use crate::plan::step::After;
use crate::verify::conditions::Condition;
use crate::verify::Verdict;

/// How the report names a step after the hand-off: this, then what it is.
pub const PREFIX: &str = "after the hand-off: ";

/// What the steps came to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ran {
    pub(crate) outcomes: Vec<StepOutcome>,
    /// Each failure: what did not happen, why, and what to do.
    pub failures: Vec<String>,
    /// The Node conditions the steps' settings name, each as its step went.
    pub conditions: Vec<Condition>,
}

/// Run the job's steps in order under `root`; a failure stops the steps after it.
pub async fn run(job: &AfterJob, root: &Path) -> Ran {
    let mut ran = Ran::default();
    for s in &job.steps {
        let step = format!("{PREFIX}{}", s.describe());
        let outcome = match ran.failures.is_empty() {
            false => Outcome::Skipped("a step before it after the hand-off failed".into()),
            true => one(s, root).await,
        };
        if let Some(kind) = s.condition() {
            ran.conditions
                .push(condition(kind, &outcome, !ran.failures.is_empty()));
        }
        match &outcome {
            Outcome::Failed(e) => {
                tracing::error!("{step}: {e}");
                ran.failures.push(e.clone());
            }
            o => tracing::info!("{step}: {o}"),
        }
        ran.outcomes.push(StepOutcome { step, outcome });
    }
    ran
}

/// A step's own condition: `True` when done or not needed here, `False` when it failed or a
/// failure before it stopped it (`stopped`).
fn condition(kind: &str, o: &Outcome, stopped: bool) -> Condition {
    match o {
        Outcome::Done => Condition::new(kind, true, "Done", "done after the hand-off"),
        Outcome::DoneWith(d) => Condition::new(kind, true, "Done", d),
        Outcome::Failed(e) => Condition::new(kind, false, "Failed", e),
        Outcome::Skipped(why) if stopped => Condition::new(kind, false, "NotRun", why),
        Outcome::Skipped(why) => Condition::new(kind, true, "NotNeeded", why),
        other => Condition::new(kind, false, "NotRun", &other.to_string()),
    }
}

/// One step's outcome.
async fn one(s: &After, root: &Path) -> Outcome {
    match s {
        After::Run(r) => match &r.skip {
            Some(why) => Outcome::Skipped(why.clone()),
            None => match super::run_argv(&r.argv, r.timeout_secs, &r.if_failed).await {
                Ok(()) => Outcome::Done,
                Err(e) => Outcome::Failed(e.to_string()),
            },
        },
        After::Check(c) => {
            let results = super::checks::run(&[c], root).await.unwrap_or_default();
            let Some(r) = results.into_iter().next() else {
                return Outcome::Skipped("no result".into());
            };
            match r.result {
                Verdict::Passed => Outcome::DoneWith(r.detail),
                Verdict::Failed if !r.advisory => Outcome::Failed(r.line()),
                Verdict::Failed => Outcome::DoneWith(r.line()),
                Verdict::Skipped | Verdict::NotRun => Outcome::Skipped(r.detail),
            }
        }
    }
}

impl Ran {
    /// The job's steps, none run, and why.
    pub fn not_run(job: &AfterJob, why: &str) -> Ran {
        let outcomes = job.steps.iter().map(|s| StepOutcome {
            step: format!("{PREFIX}{}", s.describe()),
            outcome: Outcome::Skipped(why.to_string()),
        });
        let conditions = job.steps.iter().filter_map(|s| {
            let kind = s.condition()?;
            Some(Condition::new(kind, false, "NotRun", why))
        });
        Ran {
            outcomes: outcomes.collect(),
            failures: Vec::new(),
            conditions: conditions.collect(),
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
    use crate::plan::step::{IfFailed, Run, When};

    fn step(purpose: &str, argv: &[&str], skip: Option<&str>) -> After {
        let argv = argv.iter().map(|a| a.to_string()).collect();
        let failed = IfFailed::new(format!("{purpose} did not happen"), "look");
        let run = Run::new(purpose, argv, 10, failed).when(When::After);
        After::Run(run.skip(skip.map(String::from)))
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
        let ran = run(&job, Path::new("/")).await;
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

    /// A check that passes where a file is under the root, and fails naming it otherwise.
    #[derive(Debug)]
    struct Present(&'static str);

    impl crate::verify::Probe for Present {
        fn kind(&self) -> &'static str {
            "present"
        }
        fn describe(&self) -> String {
            format!("{} present", self.0)
        }
        fn fields(&self) -> serde_json::Value {
            serde_json::json!({ "path": self.0 })
        }
        fn run<'a>(
            &'a self,
            env: &'a crate::verify::check::Env,
        ) -> crate::verify::check::Outcome<'a> {
            Box::pin(async move {
                match env.root.join(self.0).exists() {
                    true => Ok(format!("{} is there", self.0).into()),
                    false => {
                        Err(crate::verify::Cause::new("absent", format!("no {}", self.0)).into())
                    }
                }
            })
        }
    }

    fn check(path: &'static str) -> After {
        After::Check(crate::plan::step::CheckStep::new(
            crate::verify::Check::new(Present(path)),
            When::After,
            std::time::Duration::from_millis(1000),
        ))
    }

    #[tokio::test]
    async fn a_check_after_the_hand_off_runs_under_the_root_and_its_failure_stops_the_rest() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("here"), "").unwrap();
        let job = AfterJob {
            steps: vec![
                check("here"),
                check("gone"),
                step("after", &["/bin/true"], None),
            ],
        };
        let ran = run(&job, root.path()).await;
        assert_eq!(
            ran.outcomes(),
            [
                "after the hand-off: check here present: done: here is there",
                "after the hand-off: check gone present: failed: gone present (absent): no gone; see `eks-nodeinit status` and the docs of the setting that planned the check",
                "after the hand-off: after: skipped: a step before it after the hand-off failed",
            ]
        );
        assert_eq!(ran.failures.len(), 1);
    }
}
