//! An Auto Scaling instance's target lifecycle state, as IMDS serves it at
//! `autoscaling/target-lifecycle-state` (absent outside an Auto Scaling group), and what it
//! means for the hand-off.
//!
//! A warm pool launches an instance, lets its first boot run, then stops it (or keeps it
//! running, or hibernates it) until a scale-out puts it into service. A node that joins the
//! cluster during that warm-up boot leaves a NotReady node object behind once it is stopped, so
//! the hand-off waits: the hold marker below, on the per-boot tmpfs, tells the packaged units
//! that this boot held it (nodeadm-run.service does not start kubelet; the first-boot marker is
//! not written), and the boot after the instance is started into service hands off.

/// Written when a run holds the hand-off; /run is a tmpfs, so the next boot starts without it.
/// The package's drop-in for `nodeadm-run.service` has `ConditionPathExists=!` on it, and
/// `eks-nodeinit mark-done` (the unit's `ExecStartPost`) writes no first-boot marker while it
/// exists.
pub const HOLD_MARKER: &str = "/run/eks-nodeinit/handoff-held";

/// The IMDS metadata path (under `/latest/meta-data/`).
pub const IMDS_PATH: &str = "autoscaling/target-lifecycle-state";

/// What a target lifecycle state means for this boot's hand-off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Not warmed (absent, `InService`, `Standby`, …): hand off as always.
    Join,
    /// Warmed and going to be stopped (or terminated) before it serves: hold the hand-off; the
    /// boot that follows the start into service hands off.
    Hold,
    /// Warmed without a reboot before service (`Warmed:Running`, `Warmed:Hibernated`, or a
    /// warmed state this version does not know): nothing would run the hand-off when the
    /// instance goes into service, so this boot hands off now, with a warning.
    JoinWhileWarmed,
}

/// The verdict for a state as read (trimmed).
pub fn verdict(state: Option<&str>) -> Verdict {
    match state {
        Some("Warmed:Stopped" | "Warmed:Terminated") => Verdict::Hold,
        Some(s) if s.starts_with("Warmed:") => Verdict::JoinWhileWarmed,
        _ => Verdict::Join,
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
    fn warmed_states_that_stop_before_service_hold_the_others_join() {
        assert_eq!(verdict(None), Verdict::Join);
        assert_eq!(verdict(Some("InService")), Verdict::Join);
        assert_eq!(verdict(Some("Standby")), Verdict::Join);
        assert_eq!(verdict(Some("Warmed:Stopped")), Verdict::Hold);
        assert_eq!(verdict(Some("Warmed:Terminated")), Verdict::Hold);
        assert_eq!(verdict(Some("Warmed:Running")), Verdict::JoinWhileWarmed);
        assert_eq!(verdict(Some("Warmed:Hibernated")), Verdict::JoinWhileWarmed);
        assert_eq!(verdict(Some("Warmed:Later")), Verdict::JoinWhileWarmed);
    }

    #[test]
    fn a_state_is_one_word_of_letters_and_colons() {
        assert_eq!(parse("Warmed:Stopped\n"), Ok(Some("Warmed:Stopped".into())));
        assert_eq!(parse(" \n"), Ok(None));
        let e = parse("Warmed Stopped\r").unwrap_err();
        assert!(e.contains("`Warmed Stopped`"), "{e}");
        assert!(parse(&"W".repeat(65)).is_err());
    }
}
