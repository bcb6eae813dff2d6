//! An Auto Scaling instance's target lifecycle state, as IMDS serves it at
//! `autoscaling/target-lifecycle-state` (absent outside an Auto Scaling group), and what it
//! means for the hand-off.
//!
//! A warm pool launches an instance, lets its first boot run, then stops it (or keeps it
//! running, or hibernates it) until a scale-out puts it into service. A node that joins the
//! cluster during that warm-up boot leaves a NotReady node object behind once it is stopped, so
//! the hand-off waits: the hold marker below, on the per-boot tmpfs, tells the packaged units
//! that this boot held it (nodeadm-run.service does not start kubelet; the first-boot marker is
//! not written; the waiter starts), and either the boot after the instance is started into
//! service hands off, or, without a reboot, the waiter sees `InService` and has the agent's unit
//! run again, which hands off and releases the hold.

/// Written when a run holds the hand-off; /run is a tmpfs, so the next boot starts without it.
/// The package's drop-in for `nodeadm-run.service` has `ConditionPathExists=!` on it, and
/// `eks-nodeinit mark-done` (the unit's `ExecStartPost`) writes no first-boot marker while it
/// exists.
pub const HOLD_MARKER: &str = "/run/eks-nodeinit/handoff-held";

/// The IMDS metadata path (under `/latest/meta-data/`).
pub const IMDS_PATH: &str = "autoscaling/target-lifecycle-state";

/// What a target lifecycle state means for the hand-off. The states Auto Scaling sets there are
/// `InService`, `Standby`, `Detached`, `Terminated` and the warm pool's `Warmed:Stopped`,
/// `Warmed:Running`, `Warmed:Hibernated`, `Warmed:Terminated`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Meaning {
    /// `InService`, `Standby`, `Detached`: the instance serves (or runs outside the group): the
    /// node joins, as it always has.
    Serves,
    /// `Warmed:*`: prepared now, joins once put into service.
    Warmed,
    /// `Terminated`, `Warmed:Terminated`: it will never serve; it does not join.
    Terminating,
    /// Any other value: not known to be in service, so it does not join (with a warning) until
    /// the state is one that serves.
    Unknown,
}

/// What `state` (as [`parse`] left it) means for the hand-off.
pub fn meaning(state: &str) -> Meaning {
    match state {
        "InService" | "Standby" | "Detached" => Meaning::Serves,
        "Terminated" | "Warmed:Terminated" => Meaning::Terminating,
        s if s.starts_with("Warmed:") && s.len() > "Warmed:".len() => Meaning::Warmed,
        _ => Meaning::Unknown,
    }
}

/// Whether the hand-off waits in `state`: every state but those that serve. The boot after a
/// start into service hands off; without a reboot, the packaged
/// `eks-nodeinit-await-service.service` waits for a state that serves and has the agent's unit
/// run again, which hands off.
pub fn holds(state: &str) -> bool {
    meaning(state) != Meaning::Serves
}

/// What the hold marker holds: the state that held the hand-off and how that run reached IMDS,
/// so the waiter asks the same endpoint (an IPv6-only node's, say) without the config.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Hold {
    pub state: String,
    /// The config's `imds.endpoint` (absent: the environment's, else the link-local address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imds_endpoint: Option<String>,
    #[serde(default)]
    pub allow_v1_fallback: bool,
}

impl Hold {
    /// The marker's content: one line of JSON.
    pub fn to_text(&self) -> String {
        let mut s = serde_json::to_string(self).unwrap_or_default();
        s.push('\n');
        s
    }

    pub fn from_text(text: &str) -> Result<Hold, String> {
        serde_json::from_str(text).map_err(|e| crate::base::text::serde_message(&e))
    }
}

/// Written by a run that has a launch hook to complete (`lifecycle.completeLaunchHook`) for the
/// packaged `eks-nodeinit-launch-hook.service`, which completes it (`eks-nodeinit
/// complete-hook`) once the run succeeded and, in service, kubelet is active. On the per-boot
/// tmpfs: each boot's launch is completed in that boot.
pub const LAUNCH_HOOK_JOB: &str = "/run/eks-nodeinit/launch-hook.json";

/// The job last completed in this boot, byte for byte: a run whose job is the same plans
/// nothing; a warmed instance put into service without a reboot has a new one.
pub const LAUNCH_HOOK_DONE: &str = "/run/eks-nodeinit/launch-hook.done";

/// When the launch hook may be completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum CompleteAfter {
    /// In a warmed state: once the run that prepared the node succeeded (the warm pool's launch
    /// hook).
    Prep,
    /// In service: once the node is handed off and kubelet is active.
    Kubelet,
}

/// What `complete-hook` needs: `CompleteLifecycleAction` (`CONTINUE`) for `hook` on `group`
/// (`None`: not known to the run; asked of Auto Scaling by instance id).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LaunchHookJob {
    pub hook: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    pub instance_id: String,
    pub region: String,
    /// The target lifecycle state the run saw.
    pub state: String,
    pub after: CompleteAfter,
    /// Where the boot found IMDS and whether its AWS calls took the dual-stack names: the
    /// hook's calls go the same way.
    #[serde(default, skip_serializing_if = "crate::aws::Endpoints::is_default")]
    pub aws: crate::aws::Endpoints,
}

impl LaunchHookJob {
    /// The job file's content: pretty JSON and a newline (the plan shows it as a diff).
    pub fn to_text(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }

    pub fn from_text(text: &str) -> Result<LaunchHookJob, String> {
        serde_json::from_str(text).map_err(|e| crate::base::text::serde_message(&e))
    }
}

/// A lifecycle hook name as Auto Scaling takes it: 1 to 255 of letters, digits, `-`, `_`, `/`;
/// else why not.
pub fn check_hook_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 255
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'/'));
    if ok {
        return Ok(());
    }
    Err(format!(
        "`{}` is not a lifecycle hook name (1 to 255 letters, digits, `-`, `_`, `/`: the name given to the Auto Scaling group's launch hook)",
        crate::base::text::printable(name)
    ))
}

/// A state as IMDS serves it, trimmed (`None`: empty). A value that is not one word of letters and
/// `:` is kept in its printable form (escaped, cut short): it is a state no one knows
/// ([`Meaning::Unknown`]), which holds the hand-off with a warning, never an error that would
/// leave the node unprepared, nor a hand-off into a state the agent cannot name.
pub fn parse(text: &str) -> Option<String> {
    let s = text.trim();
    if s.is_empty() {
        return None;
    }
    if s.len() > 64 || !s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b':') {
        return Some(crate::base::text::printable(
            &s.chars().take(64).collect::<String>(),
        ));
    }
    Some(s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_that_serve_join_and_every_other_holds() {
        for s in ["InService", "Standby", "Detached"] {
            assert_eq!(meaning(s), Meaning::Serves, "{s}");
            assert!(!holds(s), "{s}");
        }
        for s in [
            "Warmed:Stopped",
            "Warmed:Running",
            "Warmed:Hibernated",
            "Warmed:Later",
        ] {
            assert_eq!(meaning(s), Meaning::Warmed, "{s}");
        }
        for s in ["Terminated", "Warmed:Terminated"] {
            assert_eq!(meaning(s), Meaning::Terminating, "{s}");
        }
        for s in [
            "Warmed",
            "Warmed:",
            "inservice",
            "Pending:Wait",
            "In Service",
        ] {
            assert_eq!(meaning(s), Meaning::Unknown, "{s}");
            assert!(holds(s), "{s}");
        }
    }

    #[test]
    fn a_state_that_is_no_word_is_kept_printable_and_short() {
        assert_eq!(parse("Warmed:Stopped\n").as_deref(), Some("Warmed:Stopped"));
        assert_eq!(parse(" \n"), None);
        let odd = parse("In\u{1b}[2JService").unwrap();
        assert!(!odd.contains('\u{1b}'), "{odd}");
        assert_eq!(meaning(&odd), Meaning::Unknown);
        assert!(parse(&"W".repeat(500)).unwrap().chars().count() < 80);
        // Cut before it is checked: a long run of a known state is no state.
        assert_eq!(
            meaning(&parse(&"InService".repeat(9)).unwrap()),
            Meaning::Unknown
        );
    }

    #[test]
    fn hook_names_are_what_auto_scaling_takes() {
        for ok in ["eks-node-ready", "a", "team/launch_1", &"h".repeat(255)] {
            assert_eq!(check_hook_name(ok), Ok(()), "{ok}");
        }
        for bad in ["", "has space", "dot.ted", "new\nline", &"h".repeat(256)] {
            let e = check_hook_name(bad).unwrap_err();
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn a_launch_hook_job_round_trips() {
        let j = LaunchHookJob {
            hook: "eks-node-ready".into(),
            group: None,
            instance_id: "i-1".into(),
            region: "eu-west-1".into(),
            state: "InService".into(),
            after: CompleteAfter::Kubelet,
            aws: crate::aws::Endpoints {
                imds: Some("http://[fd00:ec2::254]".into()),
                dual_stack: Some(true),
            },
        };
        assert!(
            j.to_text().contains("\"dualStack\": true"),
            "{}",
            j.to_text()
        );
        assert_eq!(LaunchHookJob::from_text(&j.to_text()), Ok(j));
        assert!(LaunchHookJob::from_text("{}").is_err());
    }

    #[test]
    fn the_marker_round_trips_and_refuses_what_it_does_not_know() {
        let h = Hold {
            state: "Warmed:Running".into(),
            imds_endpoint: Some("http://[fd00:ec2::254]".into()),
            allow_v1_fallback: false,
        };
        assert_eq!(Hold::from_text(&h.to_text()), Ok(h));
        assert!(Hold::from_text("Warmed:Stopped\n").is_err());
        assert!(Hold::from_text(r#"{"state":"x","more":1}"#).is_err());
    }
}
