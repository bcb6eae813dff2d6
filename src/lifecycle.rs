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

/// Whether a state (as read, trimmed) is a warm-pool one (`Warmed:Stopped`, `Warmed:Running`,
/// `Warmed:Hibernated`, …), in which the hand-off is held; any other (`InService`, `Standby`, …)
/// hands off as always. The boot after a start into service hands off; without a reboot, the
/// packaged `eks-nodeinit-await-service.service` waits for a state that is not warmed and has
/// the agent's unit run again, which hands off.
pub fn is_warmed(state: &str) -> bool {
    state.starts_with("Warmed:")
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
        serde_json::from_str(text).map_err(|e| crate::text::serde_message(&e))
    }
}

/// A state as IMDS serves it: one line of printable ASCII (`Warmed:Stopped`), else `None`
/// and the reason.
pub fn parse(text: &str) -> Result<Option<String>, String> {
    let s = text.trim();
    if s.is_empty() {
        return Ok(None);
    }
    if s.len() > 64 || !s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b':') {
        return Err(format!(
            "`{}` is not a lifecycle state (letters and `:`, such as `Warmed:Stopped`)",
            crate::text::printable(s)
        ));
    }
    Ok(Some(s.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warmed_states_hold_the_others_join() {
        for s in ["InService", "Standby", "Detached", "Warmed"] {
            assert!(!is_warmed(s), "{s}");
        }
        for s in [
            "Warmed:Stopped",
            "Warmed:Terminated",
            "Warmed:Running",
            "Warmed:Hibernated",
            "Warmed:Later",
        ] {
            assert!(is_warmed(s), "{s}");
        }
    }

    #[test]
    fn a_state_is_one_word_of_letters_and_colons() {
        assert_eq!(parse("Warmed:Stopped\n"), Ok(Some("Warmed:Stopped".into())));
        assert_eq!(parse(" \n"), Ok(None));
        let e = parse("Warmed Stopped\r").unwrap_err();
        assert!(e.contains("`Warmed Stopped`"), "{e}");
        assert!(parse(&"W".repeat(65)).is_err());
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
