//! Auto Scaling warm pools ([`crate::lifecycle`]): while the instance's target lifecycle state
//! says it is warmed and will be stopped before it serves, every node-local step runs and the
//! Name tag is set, but the hand-off waits. The hand-off aspects ask [`held`] and plan no
//! hand-off; this aspect writes the per-boot hold marker the packaged units read and plans the
//! hold, so the plan and the report say what waits and why.

use std::path::PathBuf;

use crate::config::WarmPool;
use crate::facts::{Facts, Family};
use crate::lifecycle::{verdict, Verdict, HOLD_MARKER};
use crate::spec::Spec;
use crate::step::{HandoffHold, Step};

use super::{Aspect, Input, Out, Reads};

pub(crate) const ASPECT: Aspect = Aspect {
    name: "warm pool",
    reads,
    plan,
};

fn reads(_: &Spec, family: Option<Family>, r: &mut Reads) {
    if family.is_some() {
        r.file(HOLD_MARKER);
    }
}

fn state(facts: &Facts) -> Option<&str> {
    facts.instance.as_ref()?.target_lifecycle_state.as_deref()
}

/// The state that holds this run's hand-off, if it is held.
pub(crate) fn held<'a>(spec: &Spec, facts: &'a Facts) -> Option<&'a str> {
    let s = state(facts)?;
    (spec.warm_pool == WarmPool::Auto && verdict(Some(s)) == Verdict::Hold).then_some(s)
}

fn plan(i: &Input, out: &mut Out) {
    let (spec, facts) = (i.spec, i.facts);
    let Some(family) = facts.family() else {
        return;
    };
    let Some(s) = held(spec, facts) else {
        warn_joining_while_warmed(spec, facts, out);
        warn_left_marker(facts, family, out);
        return;
    };
    let Some(current) = facts.current_file(HOLD_MARKER, "lifecycle.warmPool", &mut out.findings)
    else {
        return;
    };
    let new = format!("{s}\n");
    if current.content.as_deref() != Some(new.as_str()) {
        out.steps.push(Step::File {
            purpose: "warm-pool hold marker".into(),
            path: PathBuf::from(HOLD_MARKER),
            old: current.content.clone(),
            new,
            mode: 0o644,
            backup: None,
        });
    }
    out.steps.push(Step::HoldHandoff(HandoffHold {
        state: s.to_string(),
        family,
        marker: PathBuf::from(HOLD_MARKER),
    }));
}

/// A hold marker from a run earlier in this boot, on a run that hands off: on AL2023 nodeadm-run
/// was skipped in this boot and nothing starts it by itself.
fn warn_left_marker(facts: &Facts, family: Family, out: &mut Out) {
    let left = matches!(
        facts.files.get(std::path::Path::new(HOLD_MARKER)),
        Some(crate::facts::FileFact {
            content: Ok(Some(_)),
            ..
        })
    );
    if left && family == Family::Al2023 {
        out.warnings.push(format!(
            "{HOLD_MARKER} exists: a run earlier in this boot held the hand-off, so nodeadm-run.service was skipped in this boot; this run writes the NodeConfig drop-in, then start nodeadm: `systemctl start nodeadm-run` (or reboot)"
        ));
    }
}

/// A warmed state this version does not hold in, or a hold turned off: the node joins now.
fn warn_joining_while_warmed(spec: &Spec, facts: &Facts, out: &mut Out) {
    let Some(s) = state(facts) else {
        return;
    };
    match (spec.warm_pool, verdict(Some(s))) {
        (_, Verdict::Join) => {}
        (WarmPool::Off, _) => out.warnings.push(format!(
            "target lifecycle state {s}: the instance is warmed, and lifecycle.warmPool is off: the node joins now and stays registered while warmed"
        )),
        (WarmPool::Auto, Verdict::JoinWhileWarmed) => out.warnings.push(format!(
            "target lifecycle state {s}: the instance is warmed without a reboot before it serves; this version holds the hand-off only for Warmed:Stopped (the boot after the start hands off), so the node joins now and stays registered while warmed"
        )),
        (WarmPool::Auto, Verdict::Hold) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{run, spec};
    use super::*;
    use crate::metadata::Metadata;

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
                [Step::File { path, new, .. }, Step::HoldHandoff(h)] => {
                    assert_eq!(path, &PathBuf::from(HOLD_MARKER));
                    assert_eq!(new, "Warmed:Stopped\n");
                    assert_eq!((h.state.as_str(), h.family), ("Warmed:Stopped", family));
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn a_rerun_in_the_held_boot_changes_nothing() {
        let facts = warmed(Family::Al2, Some("Warmed:Stopped"))
            .file(HOLD_MARKER, "Warmed:Stopped\n")
            .build();
        let out = run(&ASPECT, &spec(CONFIG), &facts);
        assert!(
            matches!(out.steps[..], [Step::HoldHandoff(_)]),
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
            assert_eq!(held(&s, &facts), None);
            let out = run(&ASPECT, &s, &facts);
            assert!(out.steps.is_empty(), "{:?}", out.steps);
            assert_eq!(
                out.warnings.len(),
                usize::from(s.warm_pool == WarmPool::Off)
            );
        }
    }

    #[test]
    fn warmed_running_joins_now_and_says_so() {
        let facts = warmed(Family::Al2, Some("Warmed:Running"))
            .absent([HOLD_MARKER])
            .build();
        let out = run(&ASPECT, &spec(CONFIG), &facts);
        assert!(out.steps.is_empty());
        assert!(out.warnings[0].contains("joins now"), "{:?}", out.warnings);
    }

    #[test]
    fn a_marker_left_from_a_held_run_in_this_boot_says_how_to_start_nodeadm() {
        let facts = warmed(Family::Al2023, Some("InService"))
            .file(HOLD_MARKER, "Warmed:Stopped\n")
            .build();
        let out = run(&ASPECT, &spec(CONFIG), &facts);
        assert!(out.steps.is_empty());
        assert!(
            out.warnings[0].contains("systemctl start nodeadm-run"),
            "{:?}",
            out.warnings
        );
    }
}
