//! The Auto Scaling group's launch lifecycle hook (`lifecycle.completeLaunchHook`): the run
//! writes a per-boot job for the packaged `eks-nodeinit-launch-hook.service`, which completes the
//! hook with `CONTINUE` (`eks-nodeinit complete-hook`) once the node is ready. In service that is
//! after the hand-off, with kubelet active: on AL2 the agent execs bootstrap.sh and on AL2023
//! nodeadm-run starts kubelet after the agent has exited, so a unit ordered after both (and
//! requiring the agent's) does it, rather than an agent that would have to wait for
//! bootstrap.sh instead of becoming it. In a warm pool it is once the run that prepared the
//! node succeeded.

use crate::aws::autoscaling::HookResult;
use crate::facts::Family;
use crate::instance::lifecycle::{
    meaning, CompleteAfter, LaunchHookJob, Meaning, LAUNCH_HOOK_DONE, LAUNCH_HOOK_JOB,
};
use crate::instance::metadata::Metadata;
use crate::plan::join::{self, UNIT};
use crate::plan::step::{AwsCall, Call, Mode, Step};
use crate::spec::Spec;

use super::{Aspect, Input, Out, Reads};

const FIELD: &str = "lifecycle.completeLaunchHook";

pub(crate) const ASPECT: Aspect = Aspect {
    name: "launch hook",
    reads,
    plan,
    contribute: super::Contribution::Nothing,
};

fn reads(spec: &Spec, family: Option<Family>, r: &mut Reads) {
    if spec.launch_hook.is_some() && family.is_some() {
        r.file(LAUNCH_HOOK_JOB);
        r.file(LAUNCH_HOOK_DONE);
    }
}

/// The job this run leaves, or why there is none (a warning). Planning without the instance
/// (its facts not read) leaves none and says nothing.
fn job(i: &Input, md: &Metadata, hook: &str) -> Result<LaunchHookJob, String> {
    let facts = i.facts;
    let Some(state) = md.target_lifecycle_state.as_deref() else {
        return Err(format!("{FIELD} is `{hook}`, but the instance is in no Auto Scaling group (IMDS has no target lifecycle state): there is no hook to complete"));
    };
    let after = match meaning(state) {
        Meaning::Warmed if i.handoff.hold.is_some() => CompleteAfter::Prep,
        // Joining now (lifecycle.warmPool off): the warm pool's launch, once kubelet is active.
        Meaning::Warmed => CompleteAfter::Kubelet,
        Meaning::Serves if state == "InService" => CompleteAfter::Kubelet,
        _ => {
            return Err(format!(
                "target lifecycle state {state}: no launch is waiting on a hook in this state, so {FIELD} (`{hook}`) is not completed"
            ))
        }
    };
    Ok(LaunchHookJob {
        hook: hook.to_string(),
        group: facts.autoscaling_group().map(String::from),
        instance_id: md.instance_id.clone(),
        region: md.region.clone(),
        state: state.to_string(),
        after,
        aws: facts.endpoints(),
    })
}

fn plan(i: &Input, out: &mut Out) {
    let (spec, facts) = (i.spec, i.facts);
    let (Some(hook), Some(_), Some(md)) = (&spec.launch_hook, facts.family(), &facts.instance)
    else {
        return;
    };
    let job = match job(i, md, hook) {
        Ok(j) => j,
        Err(why) => {
            out.warnings.push(why);
            return;
        }
    };
    let new = job.to_text();
    let done = facts.current_file(LAUNCH_HOOK_DONE, FIELD, &mut out.findings);
    let current = facts.current_file(LAUNCH_HOOK_JOB, FIELD, &mut out.findings);
    let (Some(done), Some(current)) = (done, current) else {
        return;
    };
    // Completed in this boot, or left for the unit already: nothing to change.
    if done.content.as_deref() == Some(new.as_str()) {
        return;
    }
    // A failed check before the changes, whichever setting planned it, completes it with
    // ABANDON: the hand-off never comes. The executor runs it only then.
    if job.after == CompleteAfter::Kubelet {
        out.on_failure.push(Step::Call(Call {
            purpose: format!("complete the launch hook `{}` with ABANDON", job.hook),
            api: AwsCall::CompleteLaunch {
                job: job.clone(),
                result: HookResult::Abandon,
            },
            record: Some((join::RECORD.into(), "hook".into())),
            transport: join::node_transport(spec, facts, md).map(Box::new),
        }));
    }
    if current.content.as_deref() == Some(new.as_str()) {
        return;
    }
    let group = job
        .group
        .as_deref()
        .unwrap_or("its group, asked by instance id");
    let when = match job.after {
        CompleteAfter::Prep => "once this run has prepared the node (the warm pool's launch)",
        CompleteAfter::Kubelet if spec.verify.join_deadline.is_some() => {
            "once the Node is Ready as planned (verify.join), else with ABANDON"
        }
        CompleteAfter::Kubelet => "once this run has handed off and kubelet is active",
    };
    let purpose = format!(
        "launch-hook job: {UNIT} completes `{}` of {group} with CONTINUE {when}",
        job.hook
    );
    out.file_from(current, LAUNCH_HOOK_JOB, purpose, new, Mode::Exact(0o644));
    // A user-data script's run (cloud-final) is not the agent's unit, which pulls the hook unit
    // in: start it, ordered after nodeadm-run and waiting for kubelet, whoever ran the agent.
    out.steps.push(join::start_unit(
        "it completes the hook when its time comes",
    ));
}

#[cfg(test)]
mod tests {
    use super::super::testing::{run, spec};
    use super::*;
    use crate::facts::Facts;
    use crate::plan::step::{Unit, UnitJob};
    use std::path::PathBuf;

    const CONFIG: &str =
        r#"{"cluster":{"name":"c"},"lifecycle":{"completeLaunchHook":"eks-node-ready"}}"#;

    fn node(
        family: Family,
        state: Option<&str>,
        group: Option<&str>,
    ) -> crate::facts::FactsBuilder {
        Facts::builder(family).instance(Metadata {
            instance_id: "i-1".into(),
            region: "eu-west-1".into(),
            target_lifecycle_state: state.map(String::from),
            autoscaling_group_name: group.map(String::from),
            ..Metadata::default()
        })
    }

    fn planned(out: &Out) -> LaunchHookJob {
        match &out.steps[..] {
            [Step::File(crate::plan::step::File { path, new, .. }), Step::Unit(Unit {
                job: UnitJob::Start { unit },
                ..
            })] => {
                assert_eq!(path, &PathBuf::from(LAUNCH_HOOK_JOB));
                assert_eq!(unit, UNIT);
                LaunchHookJob::from_text(new).unwrap()
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn in_service_the_hook_waits_for_kubelet_and_warmed_for_the_prep() {
        for family in [Family::Al2, Family::Al2023] {
            for (state, after) in [
                ("InService", CompleteAfter::Kubelet),
                ("Warmed:Stopped", CompleteAfter::Prep),
                ("Warmed:Running", CompleteAfter::Prep),
            ] {
                let facts = node(family, Some(state), Some("asg-a"))
                    .absent([LAUNCH_HOOK_JOB, LAUNCH_HOOK_DONE])
                    .build();
                let out = run(&ASPECT, &spec(CONFIG), &facts);
                assert!(out.warnings.is_empty(), "{:?}", out.warnings);
                let j = planned(&out);
                assert_eq!((j.after, j.state.as_str()), (after, state));
                assert_eq!(j.group.as_deref(), Some("asg-a"));
                assert_eq!(
                    (j.hook.as_str(), j.instance_id.as_str()),
                    ("eks-node-ready", "i-1")
                );
            }
        }
    }

    #[test]
    fn the_hooks_calls_go_where_the_boots_did() {
        // Before: the job named neither, and the unit's calls looked for the role's
        // credentials at IPv4's IMDS and called IPv4-only names, which an IPv6-only subnet lacks.
        let mut facts = node(Family::Al2023, Some("Warmed:Stopped"), Some("asg-a"))
            .absent([LAUNCH_HOOK_JOB, LAUNCH_HOOK_DONE])
            .build();
        facts.reach = Some(crate::facts::Reach {
            imds_endpoint: "http://[fd00:ec2::254]".into(),
            dual_stack: Some(true),
            ..Default::default()
        });
        let j = planned(&run(&ASPECT, &spec(CONFIG), &facts));
        let want = crate::aws::Endpoints {
            imds: Some("http://[fd00:ec2::254]".into()),
            dual_stack: Some(true),
        };
        assert_eq!(j.aws, want);
    }

    #[test]
    fn a_failed_check_before_the_changes_abandons_the_launch() {
        let facts = node(Family::Al2023, Some("InService"), Some("asg-a"))
            .absent([LAUNCH_HOOK_JOB, LAUNCH_HOOK_DONE])
            .build();
        let fail = r#"{"cluster":{"name":"c"},"lifecycle":{"completeLaunchHook":"eks-node-ready"},"verify":{"preflight":"fail"}}"#;
        let out = run(&ASPECT, &spec(fail), &facts);
        match &out.on_failure[..] {
            [Step::Call(c)] => {
                let AwsCall::CompleteLaunch { job, result } = &c.api;
                assert_eq!(
                    (job.hook.as_str(), *result),
                    ("eks-node-ready", HookResult::Abandon)
                );
                assert_eq!(c.record, Some(("join".into(), "hook".into())));
            }
            other => panic!("{other:?}"),
        }
        // Whatever mode the join's checks are in: another setting's check may run before the
        // changes, and the executor runs this only when one fails.
        assert_eq!(run(&ASPECT, &spec(CONFIG), &facts).on_failure.len(), 1);
    }

    #[test]
    fn the_hold_turned_off_completes_after_kubelet() {
        let s = spec(
            r#"{"cluster":{"name":"c"},"lifecycle":{"completeLaunchHook":"h","warmPool":"off"}}"#,
        );
        let facts = node(Family::Al2, Some("Warmed:Stopped"), None)
            .absent([LAUNCH_HOOK_JOB, LAUNCH_HOOK_DONE])
            .build();
        let j = planned(&run(&ASPECT, &s, &facts));
        assert_eq!((j.after, j.group), (CompleteAfter::Kubelet, None));
    }

    #[test]
    fn a_job_done_or_left_in_this_boot_plans_nothing_and_a_new_one_replaces_it() {
        let facts = node(Family::Al2023, Some("InService"), Some("asg-a"))
            .absent([LAUNCH_HOOK_JOB, LAUNCH_HOOK_DONE])
            .build();
        let text = planned(&run(&ASPECT, &spec(CONFIG), &facts)).to_text();
        for (job, done) in [(Some(text.as_str()), None), (None, Some(text.as_str()))] {
            let mut b = node(Family::Al2023, Some("InService"), Some("asg-a"));
            b = match job {
                Some(t) => b.file(LAUNCH_HOOK_JOB, t).absent([LAUNCH_HOOK_DONE]),
                None => b
                    .file(LAUNCH_HOOK_DONE, done.unwrap())
                    .absent([LAUNCH_HOOK_JOB]),
            };
            assert!(run(&ASPECT, &spec(CONFIG), &b.build()).steps.is_empty());
        }
        // Warmed:Running done, now in service without a reboot: a new job.
        let warmed = text.replace("InService", "Warmed:Running");
        let facts = node(Family::Al2023, Some("InService"), Some("asg-a"))
            .file(LAUNCH_HOOK_DONE, &warmed)
            .file(LAUNCH_HOOK_JOB, &warmed)
            .build();
        let out = run(&ASPECT, &spec(CONFIG), &facts);
        assert_eq!(planned(&out).after, CompleteAfter::Kubelet);
    }

    #[test]
    fn outside_a_group_or_in_a_state_without_a_launch_it_warns_and_plans_nothing() {
        for state in [
            None,
            Some("Standby"),
            Some("Terminated"),
            Some("Pending:Wait"),
        ] {
            let facts = node(Family::Al2, state, Some("asg-a"))
                .absent([LAUNCH_HOOK_JOB, LAUNCH_HOOK_DONE])
                .build();
            let out = run(&ASPECT, &spec(CONFIG), &facts);
            assert!(out.steps.is_empty(), "{state:?}");
            assert_eq!(out.warnings.len(), 1, "{state:?}");
        }
        let none = spec(r#"{"cluster":{"name":"c"}}"#);
        let facts = node(Family::Al2, Some("InService"), None).build();
        let out = run(&ASPECT, &none, &facts);
        assert!(out.steps.is_empty() && out.warnings.is_empty());
    }
}
