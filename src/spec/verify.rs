//! The `verify` section checked: the preflight's mode and budget, the proof's deadline.

use std::time::Duration;

use crate::base::findings::Findings;
use crate::base::text::printable;
use crate::config::{JoinMode, PreflightMode, VerifySettings};

pub const DEFAULT_BUDGET: Duration = Duration::from_secs(2);
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, PartialEq)]
pub struct VerifySpec {
    pub preflight: PreflightMode,
    /// The hardened-AMI checks' mode.
    pub hardening: PreflightMode,
    /// All the checks together.
    pub budget: Duration,
    /// The proof after the hand-off: `None` when off.
    pub join_deadline: Option<Duration>,
    /// `verify.join: strict`: every verdict but `joined` abandons the launch.
    pub join_strict: bool,
}

impl Default for VerifySpec {
    fn default() -> Self {
        VerifySpec {
            preflight: PreflightMode::Warn,
            hardening: PreflightMode::Warn,
            budget: DEFAULT_BUDGET,
            join_deadline: Some(DEFAULT_DEADLINE),
            join_strict: false,
        }
    }
}

/// A Go duration in `[min, max]`, or the finding for `field`.
fn bounded(
    field: &str,
    text: Option<&str>,
    default: Duration,
    (min, max): (Duration, Duration),
    f: &mut Findings,
) -> Duration {
    let Some(text) = text else {
        return default;
    };
    let r = crate::base::duration::parse(text)
        .map_err(|e| e.to_string())
        .and_then(|d| match (min..=max).contains(&d) {
            true => Ok(d),
            false => Err(format!(
                "`{}` is outside {min:?}..={max:?}",
                printable(text)
            )),
        });
    f.check(field, r).unwrap_or(default)
}

pub fn spec(c: &VerifySettings, f: &mut Findings) -> VerifySpec {
    let budget = bounded(
        "verify.preflightBudget",
        c.preflight_budget.as_deref(),
        DEFAULT_BUDGET,
        (Duration::from_millis(100), Duration::from_secs(30)),
        f,
    );
    let deadline = bounded(
        "verify.joinDeadline",
        c.join_deadline.as_deref(),
        DEFAULT_DEADLINE,
        (Duration::from_secs(10), Duration::from_secs(3600)),
        f,
    );
    VerifySpec {
        preflight: c.preflight,
        hardening: c.hardening,
        budget,
        join_deadline: (c.join != JoinMode::Off).then_some(deadline),
        join_strict: c.join == JoinMode::Strict,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_out_of_bounds_or_malformed_are_findings_naming_the_field() {
        let mut f = Findings::default();
        let c = VerifySettings {
            preflight_budget: Some("1h".into()),
            join_deadline: Some("5 minutes".into()),
            ..Default::default()
        };
        spec(&c, &mut f);
        let fields: Vec<_> = f.0.iter().map(|x| x.field.clone()).collect();
        assert_eq!(fields, ["verify.preflightBudget", "verify.joinDeadline"]);
        let mut f = Findings::default();
        let c = VerifySettings {
            preflight_budget: Some("500ms".into()),
            join: JoinMode::Off,
            ..Default::default()
        };
        let s = spec(&c, &mut f);
        assert!(f.is_empty());
        assert_eq!(s.budget, Duration::from_millis(500));
        assert_eq!(s.join_deadline, None);
    }
}
