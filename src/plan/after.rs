//! The phase after the hand-off, built by the plan itself: every setting's steps planned with
//! [`When::After`] (programs and checks), in the plan's order, left in one per-boot job
//! ([`AFTER_JOB`], 0600) that the packaged launch-hook unit runs once kubelet is active, before
//! the proof. A setting that needs work after the hand-off plans the step and nothing more. The
//! job is written with a hand-off (a held run, or one handed off already in this boot, leaves
//! the job of the hand-off it belongs to), removed when a hand-off has none, and starts the
//! unit whoever ran the agent; a rerun with the job in place plans nothing.

use serde::{Deserialize, Serialize};

use crate::base::findings::Findings;
use crate::facts::Facts;
use crate::plan::join;
use crate::plan::out::Out;
use crate::plan::step::{After, Step, Unit, UnitJob, When};

/// This boot's steps after the hand-off; the launch-hook unit's condition names it.
pub const AFTER_JOB: &str = "/run/eks-nodeinit/after-handoff.json";

const FIELD: &str = "steps after the hand-off";

/// The job: the plan's own steps after the hand-off, in its order.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AfterJob {
    pub steps: Vec<After>,
}

impl AfterJob {
    pub fn from_text(text: &str) -> Result<AfterJob, String> {
        serde_json::from_str(text).map_err(|e| crate::base::text::serde_message(&e))
    }

    pub fn to_text(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }
}

/// The steps planned for after the hand-off, taken out of `steps`: a check whose probe no job
/// can hold is a finding (it would never run).
pub(crate) fn split(steps: Vec<Step>, findings: &mut Findings) -> (Vec<Step>, Vec<After>) {
    let mut now = Vec::with_capacity(steps.len());
    let mut after = Vec::new();
    for step in steps {
        match step {
            Step::Run(r) if r.when == When::After => after.push(After::Run(r)),
            Step::Check(c) if c.when == When::After => {
                let p = &c.check.probe;
                if let Err(why) = crate::verify::check::load(p.kind(), &p.fields()) {
                    findings.push(FIELD, format!("{}: {why}", p.describe()));
                }
                after.push(After::Check(c));
            }
            other => now.push(other),
        }
    }
    (now, after)
}

/// The job's steps for this plan, which hands the node off: the job written (and the unit
/// started once, after every job it reads) or an earlier one removed.
pub(crate) fn plan(facts: &Facts, after: &[After], out: &mut Out) {
    let job = (!after.is_empty()).then(|| {
        let job = AfterJob {
            steps: after.to_vec(),
        };
        let n = job.steps.len();
        let purpose = format!(
            "this boot's {n} step(s) after the hand-off, for {}",
            join::UNIT
        );
        (purpose, job.to_text())
    });
    if !out.boot_job(facts, FIELD, AFTER_JOB, job) {
        return;
    }
    // One start of the unit, after every job it reads (a rerun after a kill between the jobs
    // plans the rest in the same order).
    let starts_unit = |s: &Step| matches!(s, Step::Unit(Unit { job: UnitJob::Start { unit }, .. }) if unit == join::UNIT);
    let start = match out.steps.iter().position(starts_unit) {
        Some(at) => out.steps.remove(at),
        None => join::start_unit("it runs the steps after the hand-off once kubelet is active"),
    };
    out.steps.push(start);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::Family;
    use crate::plan::step::{Handoff, IfFailed, Run};

    fn after(purpose: &str) -> Step {
        let failed = IfFailed::new(format!("{purpose} failed"), "look");
        Step::Run(Run::new(purpose, vec!["/usr/bin/true".into()], 5, failed).when(When::After))
    }

    fn exec() -> Step {
        Step::Handoff(Handoff::Exec {
            argv: vec!["/etc/eks/bootstrap.sh".into()],
            env: Default::default(),
        })
    }

    /// The plan's order of `steps` on a node whose job holds `current`: the steps run now.
    fn plan_after(steps: Vec<Step>, current: Option<&str>) -> Vec<Step> {
        let job = crate::os::fsutil::FileFact {
            content: Ok(current.map(String::from)),
            mode: current.map(|_| 0o600),
            link: None,
        };
        let facts = Facts::builder(Family::Al2)
            .file_fact(AFTER_JOB, job)
            .build();
        let mut out = Out {
            steps,
            ..Out::default()
        };
        crate::plan::order(&facts, &mut out);
        assert!(out.findings.is_empty(), "{:?}", out.findings);
        out.steps
    }

    fn job_of(purposes: &[&str]) -> String {
        let steps = purposes.iter().map(|p| match after(p) {
            Step::Run(r) => After::Run(r),
            _ => unreachable!(),
        });
        AfterJob {
            steps: steps.collect(),
        }
        .to_text()
    }

    #[test]
    fn the_steps_after_the_hand_off_go_into_one_job_and_start_the_unit_once() {
        let steps = plan_after(vec![after("one"), exec(), after("two")], None);
        let [Step::File(f), Step::Unit(u), Step::Handoff(_)] = &steps[..] else {
            panic!("{steps:?}")
        };
        assert_eq!((f.path.to_str(), f.mode), (Some(AFTER_JOB), 0o600));
        let job = AfterJob::from_text(&f.new).unwrap();
        let purposes: Vec<String> = job.steps.iter().map(After::describe).collect();
        assert_eq!(purposes, ["one", "two"]);
        assert!(matches!(&u.job, UnitJob::Start { unit } if unit == join::UNIT));
        // The unit started already (the proof's job): once, after this job.
        let start = join::start_unit("the proof");
        let steps = plan_after(vec![after("one"), start, exec()], None);
        assert!(
            matches!(&steps[..], [Step::File(_), Step::Unit(_), Step::Handoff(_)]),
            "{steps:?}"
        );
        // The job in place: nothing.
        let steps = plan_after(vec![after("one"), exec()], Some(&job_of(&["one"])));
        assert_eq!(steps.len(), 1, "{steps:?}");
    }

    #[test]
    fn no_hand_off_leaves_the_job_and_a_hand_off_without_steps_removes_it() {
        let held = plan_after(vec![after("one")], Some(&job_of(&["zero"])));
        assert!(held.is_empty(), "{held:?}");
        let steps = plan_after(vec![exec()], Some(&job_of(&["zero"])));
        let [Step::Remove(r), _] = &steps[..] else {
            panic!("{steps:?}")
        };
        assert_eq!(r.path.to_str(), Some(AFTER_JOB));
        assert!(
            !steps[0].is_change(),
            "a per-boot job is not the node's configuration"
        );
        assert_eq!(plan_after(vec![exec()], None).len(), 1);
    }

    #[test]
    fn a_check_no_job_can_hold_is_a_finding_not_a_silent_drop() {
        let check = Step::Check(crate::plan::step::CheckStep::new(
            crate::verify::Check::new(crate::verify::check::Passing),
            When::After,
            std::time::Duration::from_millis(1000),
        ));
        let mut findings = Findings::default();
        let (now, after) = split(vec![check, exec()], &mut findings);
        assert_eq!((now.len(), after.len()), (1, 1));
        let f = format!("{:?}", findings.0);
        assert!(f.contains("cannot run from a job"), "{f}");
    }

    #[test]
    fn the_packaged_unit_runs_for_each_job_a_run_leaves() {
        let unit = include_str!("../../systemd/eks-nodeinit-launch-hook.service");
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
        let job = AfterJob::from_text(&job_of(&["first"])).unwrap();
        assert_eq!(AfterJob::from_text(&job.to_text()), Ok(job));
        let e = AfterJob::from_text(r#"{"steps": [], "shell": "x"}"#).unwrap_err();
        assert!(e.contains("shell"), "{e}");
        let step = r#"{"steps": [{"kind": "run", "purpose": "p", "argv": [], "timeoutSecs": 1, "shell": "x"}]}"#;
        let e = AfterJob::from_text(step).unwrap_err();
        assert!(e.contains("shell"), "{e}");
    }

    #[test]
    fn every_probe_a_job_can_hold_reads_back_as_a_step_after_the_hand_off() {
        use crate::verify::accelerators::{Accelerators, AskEc2};
        use crate::verify::hardening::{Exec, Fips, KernelDefaults, Selinux};
        let step = |check| {
            let d = std::time::Duration::from_secs(2);
            After::Check(crate::plan::step::CheckStep::new(check, When::After, d))
        };
        let job = AfterJob {
            steps: vec![
                step(crate::verify::Check::new(KernelDefaults {
                    protected_by: "x".into(),
                    agent_sets: [("kernel.panic".into(), "10".into())].into(),
                    next_boot: false,
                })),
                step(crate::verify::Check::new(Exec {
                    dirs: [("/opt/cni/bin".into(), "CNI".into())].into(),
                    programs: [("/usr/bin/kubelet".into(), "kubelet".into())].into(),
                })),
                step(crate::verify::Check::new(Selinux {})),
                step(crate::verify::Check::new(Fips {})),
                step(crate::verify::Check::new(Accelerators {
                    instance_type: "p5.48xlarge".into(),
                    gpus: 8,
                    efa: None,
                    ask: Some(AskEc2 {
                        region: "us-east-1".into(),
                        instance_id: "i-1".into(),
                        endpoints: crate::aws::Endpoints {
                            imds: Some("http://[fd00:ec2::254]".into()),
                            dual_stack: Some(true),
                        },
                    }),
                    operator_driver: false,
                    mig: Some(false),
                    nvidia_smi: "/usr/bin/nvidia-smi".into(),
                })),
                step(crate::verify::Check::new(
                    crate::verify::nodeadm::NodeadmConfig {
                        program: "/usr/bin/nodeadm".into(),
                        sources: vec!["imds://user-data".into()],
                        env: [(
                            "AWS_EC2_METADATA_SERVICE_ENDPOINT".into(),
                            "http://[fd00:ec2::254]".into(),
                        )]
                        .into(),
                    },
                )),
            ],
        };
        let kinds: Vec<&str> = crate::verify::LOADERS
            .iter()
            .flat_map(|l| l.iter().map(|(k, _)| *k))
            .collect();
        let have: Vec<&str> = job
            .steps
            .iter()
            .map(|s| match s {
                After::Check(c) => c.check.probe.kind(),
                After::Run(_) => "",
            })
            .collect();
        for k in &kinds {
            assert!(have.contains(k), "{k}: one step per kind a job can hold");
        }
        assert_eq!(AfterJob::from_text(&job.to_text()), Ok(job));
    }
}
