//! The checks before the kubelet starts ([`When::Gate`]): what the kubelet must not serve pods
//! without (a device, its driver), read once the hand-off's files are in place and the node's
//! own units (a driver's load) have run, within each check's budget. They stop nothing: their
//! results, and the Node conditions they name, go into the report, and the work after the
//! hand-off sets the conditions and judges a failure ([`crate::verify::outcome`]).
//!
//! Where they run depends on the hand-off. On AL2023 the agent's unit runs before nodeadm's
//! and before the drivers load, so the plan leaves the checks in this boot's job ([`GATE_JOB`],
//! 0600) for the packaged `eks-nodeinit-gate.service`, ordered after the agent, the NVIDIA
//! driver's units and before `nodeadm-run.service`, which starts the kubelet. On AL2 the agent
//! hands off by running bootstrap.sh, which starts the kubelet itself: the executor runs them
//! right before it. A plan that hands nothing off has none.

use serde::{Deserialize, Serialize};

use crate::base::findings::Findings;
use crate::facts::Facts;
use crate::plan::out::Out;
use crate::plan::step::{CheckStep, Handoff, Step, Unit, UnitJob, When};

/// This boot's checks before the kubelet starts, for the gate unit.
pub const GATE_JOB: &str = "/run/eks-nodeinit/gate.json";

/// The packaged unit that runs [`GATE_JOB`].
pub const UNIT: &str = "eks-nodeinit-gate.service";

const FIELD: &str = "checks before the kubelet starts";

/// The job: the checks, in the plan's order.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GateJob {
    pub steps: Vec<CheckStep>,
}

impl GateJob {
    pub fn from_text(text: &str) -> Result<GateJob, String> {
        serde_json::from_str(text).map_err(|e| crate::base::text::serde_message(&e))
    }

    pub fn to_text(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }
}

/// The gate's checks taken out of `steps` when the hand-off is nodeadm's (they go into the
/// job: `Some`); a check whose probe no job can hold is a finding (it would never run). With
/// bootstrap.sh's hand-off, or none, they stay in the steps (`None`), for the executor.
pub(crate) fn split(
    steps: Vec<Step>,
    findings: &mut Findings,
) -> (Vec<Step>, Option<Vec<CheckStep>>) {
    let by_unit = steps
        .iter()
        .any(|s| matches!(s, Step::Handoff(Handoff::Dropin(_))));
    if !by_unit {
        return (steps, None);
    }
    let mut now = Vec::with_capacity(steps.len());
    let mut gate = Vec::new();
    for step in steps {
        match step {
            Step::Check(c) if c.when == When::Gate => {
                let p = &c.check.probe;
                if let Err(why) = crate::verify::check::load(p.kind(), &p.fields()) {
                    findings.push(FIELD, format!("{}: {why}", p.describe()));
                }
                gate.push(c);
            }
            other => now.push(other),
        }
    }
    (now, Some(gate))
}

/// The job's steps for this plan, which hands the node off by nodeadm: the job written (the
/// unit started, for a run outside the agent's unit: in it, the unit is pulled in already) or
/// an earlier one removed.
pub(crate) fn plan(facts: &Facts, gate: &[CheckStep], out: &mut Out) {
    let job = (!gate.is_empty()).then(|| {
        let job = GateJob {
            steps: gate.to_vec(),
        };
        let n = job.steps.len();
        let purpose = format!("this boot's {n} check(s) before the kubelet starts, for {UNIT}");
        (purpose, job.to_text())
    });
    let at = out.steps.len();
    if out.boot_job(facts, FIELD, GATE_JOB, job) {
        let why = "it runs the checks before nodeadm-run starts the kubelet";
        out.steps.push(Unit::start(UNIT, why));
    }
    // A run that starts nodeadm-run itself (a warm pool's release) starts the gate first:
    // systemd orders two jobs only while both are queued.
    let gate: Vec<Step> = out.steps.drain(at..).collect();
    let first = out
        .steps
        .iter()
        .position(starts_what_the_gate_precedes)
        .unwrap_or(out.steps.len());
    out.steps.splice(first..first, gate);
}

/// The units the gate unit is ordered before (its `Before=`).
pub const BEFORE: [&str; 2] = ["nodeadm-run.service", "kubelet.service"];

fn starts_what_the_gate_precedes(s: &Step) -> bool {
    matches!(s, Step::Unit(Unit { job: UnitJob::Start { unit }, .. }) if BEFORE.contains(&unit.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::hardening::Selinux;
    use crate::verify::Check;

    fn gate() -> Step {
        let d = std::time::Duration::from_secs(60);
        let check = Check::new(Selinux {});
        Step::Check(CheckStep::new(check, When::Gate, d).condition("x.io/Fit"))
    }

    #[test]
    fn nodeadms_hand_off_leaves_the_gate_in_its_job_and_bootstrap_sh_s_keeps_it() {
        let mut findings = Findings::default();
        let dropin = Step::Handoff(Handoff::Dropin(crate::plan::step::NodeadmHandoff {
            dropin: "/etc/eks/nodeadm.d/10-eks-nodeinit.json".into(),
            config_unit_reads_dropins: true,
            carried_taints: None,
        }));
        let (now, job) = split(vec![gate(), dropin], &mut findings);
        let job = job.unwrap();
        assert_eq!((now.len(), job.len()), (1, 1));
        assert_eq!(job[0].condition.as_deref(), Some("x.io/Fit"));
        let text = GateJob { steps: job }.to_text();
        let back = GateJob::from_text(&text).unwrap();
        assert_eq!(back.steps[0].when, When::Gate);
        assert!(findings.is_empty(), "{:?}", findings.0);
        let exec = Step::Handoff(Handoff::Exec {
            argv: vec!["/etc/eks/bootstrap.sh".into()],
            env: Default::default(),
        });
        let (now, job) = split(vec![gate(), exec], &mut findings);
        assert_eq!((now.len(), job), (2, None));
    }

    #[test]
    fn the_gate_starts_before_a_start_of_what_its_unit_precedes() {
        let job = match gate() {
            Step::Check(c) => vec![c],
            _ => unreachable!(),
        };
        let facts = crate::facts::Facts::builder(crate::facts::Family::Al2023)
            .absent([GATE_JOB])
            .build();
        let mut out = Out::default();
        out.steps.push(Unit::start(
            "nodeadm-run.service",
            "the warm pool's release",
        ));
        plan(&facts, &job, &mut out);
        let described: Vec<String> = out.steps.iter().map(Step::describe).collect();
        assert_eq!(
            described,
            [
                format!("write {GATE_JOB}"),
                format!("start {UNIT}"),
                "start nodeadm-run.service".to_string()
            ]
        );
    }

    #[test]
    fn before_is_the_packaged_units_ordering() {
        let unit = include_str!("../../systemd/eks-nodeinit-gate.service");
        let line = unit.lines().find(|l| l.starts_with("Before=")).unwrap();
        let units: Vec<&str> = line["Before=".len()..].split_whitespace().collect();
        assert_eq!(units, BEFORE);
    }
}
