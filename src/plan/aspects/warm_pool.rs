//! Auto Scaling warm pools ([`crate::instance::lifecycle`]): while the instance's target lifecycle state
//! says it is warmed and will be stopped before it serves, every node-local step runs and the
//! Name tag is set, but the hand-off waits. The hand-off aspects ask [`held`] and plan no
//! hand-off; this aspect writes the per-boot hold marker the packaged units read and plans the
//! hold, so the plan and the report say what waits and why. When the instance is in service and
//! a run earlier in this boot held the hand-off, it plans the release: the marker removed and, on
//! AL2023, nodeadm-run.service started (the hold skipped it in this boot).

use std::path::PathBuf;

use crate::config::WarmPool;
use crate::facts::{Facts, Family};
use crate::instance::lifecycle::{holds, meaning, Hold, Meaning, HOLD_MARKER};
use crate::plan::step::{Handoff, HandoffHold, IfFailed, Mode, Remove, Step, Unit, UnitJob};
use crate::spec::Spec;

use super::{Aspect, Contribution, Input, Out, Reads};
use crate::base::findings::Findings;
use crate::plan::handoff::HandoffIntent;

const FIELD: &str = "lifecycle.warmPool";

/// nodeadm's run phase, which the package's drop-in skips while the hold marker exists.
pub const NODEADM_RUN: &str = "nodeadm-run.service";

pub(crate) const ASPECT: Aspect = Aspect {
    name: "warm pool",
    reads,
    contribute: Contribution::Handoff(hold),
    plan,
};

/// The hold, set once in the hand-off intent: any state but those that serve, when the config
/// lets a warm pool hold it.
fn hold(spec: &Spec, facts: &Facts, h: &mut HandoffIntent, _: &mut Findings) {
    h.hold = state(facts)
        .filter(|s| spec.warm_pool == WarmPool::Auto && holds(s))
        .map(String::from);
}

fn reads(_: &Spec, family: Option<Family>, r: &mut Reads) {
    if family.is_some() {
        r.file(HOLD_MARKER);
    }
}

fn state(facts: &Facts) -> Option<&str> {
    facts.instance.as_ref()?.target_lifecycle_state.as_deref()
}

fn plan(i: &Input, out: &mut Out) {
    let (spec, facts) = (i.spec, i.facts);
    let Some(family) = facts.family() else {
        return;
    };
    let Some(s) = i.handoff.hold.as_deref() else {
        warn_joining_while_not_serving(spec, facts, out);
        release_if_held_earlier(facts, family, out);
        return;
    };
    if meaning(s) == Meaning::Unknown {
        out.warnings.push(format!(
            "target lifecycle state `{s}` is not one the agent knows (InService, Standby, Detached, Terminated, Warmed:*): taken as not in service, so the node does not join until the state is InService"
        ));
    }
    let Some(current) = facts.current_file(HOLD_MARKER, FIELD, &mut out.findings) else {
        return;
    };
    let new = Hold {
        state: s.to_string(),
        imds_endpoint: spec.imds.endpoint.clone(),
        allow_v1_fallback: spec.imds.allow_v1_fallback,
    }
    .to_text();
    out.file_from(
        current,
        HOLD_MARKER,
        "warm-pool hold marker",
        new,
        Mode::Exact(0o644),
    );
    out.steps.push(Step::Handoff(Handoff::Hold(HandoffHold {
        state: s.to_string(),
        family,
        marker: PathBuf::from(HOLD_MARKER),
    })));
}

/// In service, and a run earlier in this boot held the hand-off: release it. A marker that was
/// not read (planning without the node) is no marker; one that cannot be read is a finding.
fn release_if_held_earlier(facts: &Facts, family: Family, out: &mut Out) {
    let Some(file) = facts.file(HOLD_MARKER) else {
        return;
    };
    let current = crate::facts::current_of(Some(file), HOLD_MARKER, FIELD, &mut out.findings);
    if !current.is_some_and(|c| c.content.is_some()) {
        return;
    }
    // The marker goes first (the unit's condition is checked when its start job runs), and comes
    // back if the run fails after it, so that a rerun releases again.
    out.steps.push(Step::Remove(Remove {
        purpose: "release the warm-pool hold of this boot".into(),
        path: PathBuf::from(HOLD_MARKER),
        restore_if_run_fails: true,
    }));
    if family == Family::Al2023 {
        out.steps.push(Step::Unit(Unit {
            job: UnitJob::Start {
                unit: NODEADM_RUN.into(),
            },
            why: "the hold skipped it in this boot; it starts kubelet".into(),
            required: true,
            if_failed: IfFailed::new(
                format!(
                    "cannot start {NODEADM_RUN}, which the warm-pool hold skipped in this boot"
                ),
                format!("the node does not join until it runs: `systemctl start {NODEADM_RUN}`"),
            ),
        }));
    }
}

/// An instance not in service whose hold is turned off: the node joins now.
fn warn_joining_while_not_serving(spec: &Spec, facts: &Facts, out: &mut Out) {
    let Some(s) = state(facts).filter(|s| holds(s)) else {
        return;
    };
    if spec.warm_pool == WarmPool::Off {
        out.warnings.push(format!(
            "target lifecycle state {s}: the instance is not in service, and lifecycle.warmPool is off: the node joins now and stays registered while it is not serving"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{run, spec};
    use super::*;
    use crate::instance::metadata::Metadata;

    fn warmed(family: Family, state: Option<&str>) -> crate::facts::FactsBuilder {
        Facts::builder(family).instance(Metadata {
            instance_id: "i-1".into(),
            target_lifecycle_state: state.map(String::from),
            ..Metadata::default()
        })
    }

    const CONFIG: &str = r#"{"cluster":{"name":"c"}}"#;

    #[test]
    fn a_warmed_stopped_instance_writes_the_marker_and_holds() {
        for family in [Family::Al2, Family::Al2023] {
            let facts = warmed(family, Some("Warmed:Stopped"))
                .absent([HOLD_MARKER])
                .build();
            let out = run(&ASPECT, &spec(CONFIG), &facts);
            assert!(out.findings.is_empty(), "{:?}", out.findings);
            match &out.steps[..] {
                [Step::File(crate::plan::step::File { path, new, .. }), Step::Handoff(Handoff::Hold(h))] =>
                {
                    assert_eq!(path, &PathBuf::from(HOLD_MARKER));
                    assert_eq!(Hold::from_text(new).unwrap().state, "Warmed:Stopped");
                    assert_eq!((h.state.as_str(), h.family), ("Warmed:Stopped", family));
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn a_rerun_in_the_held_boot_changes_nothing() {
        let marker = Hold {
            state: "Warmed:Stopped".into(),
            imds_endpoint: None,
            allow_v1_fallback: false,
        };
        let facts = warmed(Family::Al2, Some("Warmed:Stopped"))
            .file(HOLD_MARKER, &marker.to_text())
            .build();
        let out = run(&ASPECT, &spec(CONFIG), &facts);
        assert!(
            matches!(out.steps[..], [Step::Handoff(Handoff::Hold(_))]),
            "{:?}",
            out.steps
        );
    }

    #[test]
    fn in_service_outside_a_group_or_turned_off_nothing_is_held() {
        let off = spec(r#"{"cluster":{"name":"c"},"lifecycle":{"warmPool":"off"}}"#);
        for (s, state) in [
            (spec(CONFIG), Some("InService")),
            (spec(CONFIG), None),
            (off, Some("Warmed:Stopped")),
        ] {
            let facts = warmed(Family::Al2023, state).absent([HOLD_MARKER]).build();
            let mut f = crate::base::findings::Findings::default();
            assert_eq!(crate::plan::aspects::intent(&s, &facts, &mut f).hold, None);
            let out = run(&ASPECT, &s, &facts);
            assert!(out.steps.is_empty(), "{:?}", out.steps);
            assert_eq!(
                out.warnings.len(),
                usize::from(s.warm_pool == WarmPool::Off)
            );
        }
    }

    #[test]
    fn every_state_but_those_that_serve_holds_and_an_unknown_one_warns() {
        for (state, warns) in [
            ("Warmed:Running", false),
            ("Warmed:Hibernated", false),
            ("Warmed:Terminated", false),
            ("Terminated", false),
            ("Pending:Wait", true),
        ] {
            let facts = warmed(Family::Al2, Some(state))
                .absent([HOLD_MARKER])
                .build();
            let out = run(&ASPECT, &spec(CONFIG), &facts);
            assert!(
                matches!(out.steps[..], [_, Step::Handoff(Handoff::Hold(_))]),
                "{state}"
            );
            assert_eq!(out.warnings.len(), usize::from(warns), "{state}");
        }
        for state in ["Standby", "Detached"] {
            let facts = warmed(Family::Al2, Some(state))
                .absent([HOLD_MARKER])
                .build();
            assert!(run(&ASPECT, &spec(CONFIG), &facts).steps.is_empty());
        }
    }

    #[test]
    fn in_service_after_a_held_run_releases_the_hold() {
        for (family, unit) in [(Family::Al2023, Some(NODEADM_RUN)), (Family::Al2, None)] {
            let facts = warmed(family, Some("InService"))
                .file(HOLD_MARKER, "{}")
                .build();
            let out = run(&ASPECT, &spec(CONFIG), &facts);
            let Some((Step::Remove(r), rest)) = out.steps.split_first() else {
                panic!("{:?}", out.steps);
            };
            assert_eq!(r.path, PathBuf::from(HOLD_MARKER));
            assert!(r.restore_if_run_fails);
            let started: Vec<&str> = rest
                .iter()
                .map(|s| match s {
                    Step::Unit(Unit {
                        job: UnitJob::Start { unit },
                        required: true,
                        ..
                    }) => unit.as_str(),
                    other => panic!("{other:?}"),
                })
                .collect();
            assert_eq!(started, Vec::from_iter(unit));
        }
    }

    #[test]
    fn a_marker_that_cannot_be_read_is_a_finding_and_one_not_read_is_none() {
        let unreadable = crate::facts::FileFact {
            content: Err("cannot read it: Permission denied".into()),
            mode: None,
            link: None,
        };
        let facts = warmed(Family::Al2023, Some("InService"))
            .file_fact(HOLD_MARKER, unreadable)
            .build();
        let out = run(&ASPECT, &spec(CONFIG), &facts);
        assert!(out.steps.is_empty());
        assert_eq!(out.findings.0.len(), 1, "{:?}", out.findings);
        let not_read = warmed(Family::Al2023, Some("InService")).build();
        let out = run(&ASPECT, &spec(CONFIG), &not_read);
        assert!(out.steps.is_empty() && out.findings.is_empty());
    }
}
