//! This boot's steps after the hand-off: every setting's `Run` steps with
//! [`When::After`](crate::plan::step::When::After), in registry order, left in one per-boot job
//! ([`AFTER_JOB`]) that the packaged launch-hook unit runs once kubelet is active, before the
//! proof ([`crate::exec::after`]). Registered last, so that it sees every other setting's steps;
//! a setting that needs a program after the hand-off plans the step and nothing more. Like the
//! proof's job, it is written with a hand-off (none when held or done already in this boot) and
//! starts the unit whoever ran the agent; a rerun with the job in place plans nothing.

use serde::{Deserialize, Serialize};

use crate::facts::Family;
use crate::plan::step::{Mode, Remove, Step, Unit, UnitJob, When};
use crate::spec::Spec;

use super::{Aspect, Input, Out, Reads};

pub(crate) const ASPECT: Aspect = Aspect {
    name: "steps after the hand-off",
    reads,
    plan,
    ..Aspect::BASE
};

/// This boot's steps after the hand-off; the launch-hook unit's condition names it.
pub const AFTER_JOB: &str = "/run/eks-nodeinit/after-handoff.json";

/// The job: the steps in the plan's order.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AfterJob {
    pub steps: Vec<AfterRun>,
}

/// A program run after the hand-off (argv, no shell), as the plan's `Run` step holds it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AfterRun {
    pub purpose: String,
    pub argv: Vec<String>,
    pub timeout_secs: u64,
    /// Why it is not run, if it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip: Option<String>,
    /// What a failure means (what did not happen) and what to do.
    pub what: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub todo: String,
}

impl AfterJob {
    /// The `Run` steps of `steps` that run after the hand-off, if there are any.
    pub fn of(steps: &[Step]) -> Option<AfterJob> {
        let steps: Vec<AfterRun> = steps
            .iter()
            .filter_map(|s| match s {
                Step::Run(r) if r.when == When::After => Some(AfterRun {
                    purpose: r.purpose.clone(),
                    argv: r.argv.clone(),
                    timeout_secs: r.timeout_secs,
                    skip: r.skip.clone(),
                    what: r.if_failed.what.clone(),
                    todo: r.if_failed.todo.clone(),
                }),
                _ => None,
            })
            .collect();
        (!steps.is_empty()).then_some(AfterJob { steps })
    }

    pub fn from_text(text: &str) -> Result<AfterJob, String> {
        serde_json::from_str(text).map_err(|e| crate::base::text::serde_message(&e))
    }

    pub fn to_text(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }
}

fn reads(_: &Spec, _: Option<Family>, r: &mut Reads) {
    r.file(AFTER_JOB);
}

fn plan(i: &Input, out: &mut Out) {
    // Held, or handed off already in this boot: the job of that hand-off stays as it is.
    if !crate::plan::hands_off(&out.steps) {
        return;
    }
    const FIELD: &str = "steps after the hand-off";
    let Some(current) = i.facts.current_file(AFTER_JOB, FIELD, &mut out.findings) else {
        return;
    };
    let Some(job) = AfterJob::of(&out.steps) else {
        if current.content.is_some() {
            out.steps.push(Step::Remove(Remove {
                purpose: "an earlier run's steps after the hand-off, which this plan has none of"
                    .into(),
                path: AFTER_JOB.into(),
                restore_if_run_fails: false,
            }));
        }
        return;
    };
    let purpose = format!(
        "this boot's {} step(s) after the hand-off, for {}",
        job.steps.len(),
        super::launch_hook::UNIT
    );
    if !out.file_from(
        current,
        AFTER_JOB,
        purpose,
        job.to_text(),
        Mode::Exact(0o600),
    ) {
        return;
    }
    // One start of the unit, after every job it reads (a rerun after a kill between the jobs
    // plans the rest in the same order).
    let starts_unit = |s: &Step| matches!(s, Step::Unit(Unit { job: UnitJob::Start { unit }, .. }) if unit == super::launch_hook::UNIT);
    let start = match out.steps.iter().position(starts_unit) {
        Some(at) => out.steps.remove(at),
        None => start_unit(),
    };
    out.steps.push(start);
}

/// The launch-hook unit started for this job.
fn start_unit() -> Step {
    super::launch_hook::start_unit("it runs the steps after the hand-off once kubelet is active")
}

#[cfg(test)]
mod tests {
    use super::super::testing::spec;
    use super::*;
    use crate::facts::Facts;
    use crate::plan::step::{Handoff, IfFailed, Run};

    fn after(purpose: &str) -> Step {
        Step::Run(Run {
            purpose: purpose.into(),
            argv: vec!["/usr/bin/true".into()],
            timeout_secs: 5,
            check: None,
            skip: None,
            if_failed: IfFailed::new(format!("{purpose} failed"), "look"),
            when: When::After,
        })
    }

    /// The aspect after others planned `steps`, on a node whose job holds `current`.
    fn plan_after(steps: Vec<Step>, current: Option<&str>) -> Vec<Step> {
        let s = spec(r#"{"cluster": {"name": "c"}}"#);
        let job = crate::os::fsutil::FileFact {
            content: Ok(current.map(String::from)),
            mode: current.map(|_| 0o600),
            link: None,
        };
        let facts = Facts::builder(Family::Al2)
            .file_fact(AFTER_JOB, job)
            .build();
        let handoff = crate::plan::aspects::intent(&s, &facts, &mut Default::default());
        let input = Input {
            spec: &s,
            facts: &facts,
            handoff: &handoff,
        };
        let mut out = Out {
            steps,
            ..Out::default()
        };
        (ASPECT.plan)(&input, &mut out);
        out.steps
    }

    fn exec() -> Step {
        Step::Handoff(Handoff::Exec {
            argv: vec!["/etc/eks/bootstrap.sh".into()],
        })
    }

    #[test]
    fn the_steps_after_the_hand_off_go_into_one_job_and_start_the_unit_once() {
        let steps = plan_after(vec![after("one"), exec(), after("two")], None);
        let [_, _, _, Step::File(f), Step::Unit(u)] = &steps[..] else {
            panic!("{steps:?}")
        };
        assert_eq!((f.path.to_str(), f.mode), (Some(AFTER_JOB), 0o600));
        let job = AfterJob::from_text(&f.new).unwrap();
        let purposes: Vec<&str> = job.steps.iter().map(|s| s.purpose.as_str()).collect();
        assert_eq!(purposes, ["one", "two"]);
        assert_eq!(job.steps[0].what, "one failed");
        assert!(
            matches!(&u.job, UnitJob::Start { unit } if unit == super::super::launch_hook::UNIT)
        );
        // The unit started already (the proof's job): once, after this job.
        let steps = plan_after(vec![after("one"), start_unit(), exec()], None);
        assert_eq!(
            steps.iter().filter(|s| matches!(s, Step::Unit(_))).count(),
            1
        );
        assert!(
            matches!(&steps[..], [.., Step::File(_), Step::Unit(_)]),
            "{steps:?}"
        );
        // The job in place: nothing.
        let steps = plan_after(vec![after("one"), exec()], Some(&job_of(&["one"])));
        assert_eq!(steps.len(), 2, "{steps:?}");
    }

    fn job_of(purposes: &[&str]) -> String {
        let steps: Vec<Step> = purposes.iter().map(|p| after(p)).collect();
        AfterJob::of(&steps).unwrap().to_text()
    }

    #[test]
    fn no_hand_off_leaves_the_job_and_a_hand_off_without_steps_removes_it() {
        let held = plan_after(vec![after("one")], Some(&job_of(&["zero"])));
        assert_eq!(held.len(), 1, "{held:?}");
        let steps = plan_after(vec![exec()], Some(&job_of(&["zero"])));
        let [_, Step::Remove(r)] = &steps[..] else {
            panic!("{steps:?}")
        };
        assert_eq!(r.path.to_str(), Some(AFTER_JOB));
        assert!(
            !steps[1].is_change(),
            "a per-boot job is not the node's configuration"
        );
        assert_eq!(plan_after(vec![exec()], None).len(), 1);
    }

    #[test]
    fn the_packaged_unit_runs_for_each_job_a_run_leaves() {
        let unit = include_str!("../../../systemd/eks-nodeinit-launch-hook.service");
        for job in [
            AFTER_JOB,
            crate::verify::proof::JOIN_JOB,
            crate::instance::lifecycle::LAUNCH_HOOK_JOB,
        ] {
            assert!(
                unit.contains(&format!("\nConditionPathExists=|{job}\n")),
                "{job}"
            );
        }
    }

    #[test]
    fn the_job_reads_back_what_it_wrote_and_nothing_else() {
        let job = AfterJob {
            steps: vec![AfterRun {
                purpose: "first".into(),
                argv: vec!["/bin/true".into()],
                timeout_secs: 10,
                skip: None,
                what: "first did not happen".into(),
                todo: String::new(),
            }],
        };
        let text = serde_json::to_string(&job).unwrap();
        assert_eq!(AfterJob::from_text(&text), Ok(job));
        let e = AfterJob::from_text(r#"{"steps": [], "shell": "x"}"#).unwrap_err();
        assert!(e.contains("shell"), "{e}");
    }
}
