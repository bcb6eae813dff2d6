//! The `verify` section checked: the preflight's mode and budget, the proof's deadline.

use std::time::Duration;

use crate::base::findings::Findings;
use crate::base::text::printable;
use crate::config::{CheckMode, JoinMode, OnFailure, VerifySettings};

pub const DEFAULT_BUDGET: Duration = Duration::from_secs(2);
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(300);
/// How long a kept node is watched for a late join by default.
pub const DEFAULT_LATE_JOIN: Duration = Duration::from_secs(1800);
/// The initialisation deadline a startup taint gets when the config sets none: what ends the
/// wait of a node whose conditions cannot be set.
pub const STARTUP_INIT_DEADLINE: Duration = Duration::from_secs(900);

#[derive(Debug, Clone, PartialEq)]
pub struct VerifySpec {
    pub preflight: CheckMode,
    /// The hardened-AMI checks' mode.
    pub hardening: CheckMode,
    /// All the checks together.
    pub budget: Duration,
    /// The proof after the hand-off: `None` when off.
    pub join_deadline: Option<Duration>,
    /// `verify.join: strict`: every verdict but `joined` abandons the launch.
    pub join_strict: bool,
    /// What a failed join of the node's own cause does where no launch hook waits.
    pub on_failure: OnFailure,
    /// How long after kubelet is active the Node's watched conditions may take to be True.
    pub init_deadline: Option<Duration>,
    /// Other reporters' Node condition types the initialisation deadline waits for.
    pub init_conditions: Vec<String>,
    /// How long a node kept after a failed join is watched for a late join (zero: not).
    pub late_join: Duration,
    /// `verify.mismatch: hold`: a mismatch's `Joined` is `False`.
    pub hold_mismatch: bool,
    /// `verify.accelerators`.
    pub accelerators: AcceleratorSpec,
}

/// The accelerator checks as the config asks them.
#[derive(Debug, Clone, PartialEq)]
pub struct AcceleratorSpec {
    pub on: bool,
    /// The GPU operator's driver container manages the driver.
    pub operator_driver: bool,
    pub wait: Duration,
    pub mig: Option<bool>,
    pub efa: Option<u32>,
}

/// How long the devices may take by default.
pub const DEFAULT_ACCELERATOR_WAIT: Duration = Duration::from_secs(300);

impl Default for AcceleratorSpec {
    fn default() -> Self {
        AcceleratorSpec {
            on: true,
            operator_driver: false,
            wait: DEFAULT_ACCELERATOR_WAIT,
            mig: None,
            efa: None,
        }
    }
}

fn accelerators(c: &VerifySettings, f: &mut Findings) -> AcceleratorSpec {
    let c = &c.accelerators;
    let wait = bounded(
        "verify.accelerators.wait",
        c.wait.as_deref(),
        DEFAULT_ACCELERATOR_WAIT,
        (Duration::from_secs(10), Duration::from_secs(1800)),
        f,
    );
    AcceleratorSpec {
        on: c.is_on(),
        operator_driver: c.operator_driver(),
        wait,
        mig: c.mig_enabled(),
        efa: c.efa,
    }
}

impl Default for VerifySpec {
    fn default() -> Self {
        VerifySpec {
            preflight: CheckMode::Warn,
            hardening: CheckMode::Warn,
            budget: DEFAULT_BUDGET,
            join_deadline: Some(DEFAULT_DEADLINE),
            join_strict: false,
            on_failure: OnFailure::Report,
            init_deadline: None,
            init_conditions: Vec::new(),
            late_join: DEFAULT_LATE_JOIN,
            hold_mismatch: false,
            accelerators: AcceleratorSpec::default(),
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
    let init_deadline = c.init_deadline.as_deref().map(|text| {
        bounded(
            "verify.initDeadline",
            Some(text),
            DEFAULT_DEADLINE,
            (Duration::from_secs(30), Duration::from_secs(3600)),
            f,
        )
    });
    let late_join = bounded(
        "verify.lateJoin",
        c.late_join.as_deref(),
        DEFAULT_LATE_JOIN,
        (Duration::ZERO, Duration::from_secs(3600)),
        f,
    );
    if c.join == JoinMode::Off && (init_deadline.is_some() || c.on_failure != OnFailure::Report) {
        f.push(
            "verify.join",
            "`off` leaves no proof after the hand-off, so `initDeadline` and `onFailure` would never act; set `on` or remove them".to_string(),
        );
    }
    VerifySpec {
        preflight: c.preflight,
        hardening: c.hardening,
        budget,
        join_deadline: (c.join != JoinMode::Off).then_some(deadline),
        join_strict: c.join == JoinMode::Strict,
        on_failure: c.on_failure,
        init_deadline,
        init_conditions: init_conditions(&c.init_conditions, f),
        late_join,
        hold_mismatch: c.mismatch == crate::config::MismatchMode::Hold,
        accelerators: accelerators(c, f),
    }
}

/// The condition types a Node may carry: qualified names (`[prefix/]Name`), one each, none of
/// the agent's own (it waits for those anyway).
fn init_conditions(types: &[String], f: &mut Findings) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (i, t) in types.iter().enumerate() {
        let field = format!("verify.initConditions[{i}]");
        let r = crate::base::k8s::check_qualified_name(t).and_then(|()| {
            match crate::base::k8s::is_own_condition(t) || out.contains(t) {
                true => Err(format!("`{}` is listed twice or is one of the agent's own conditions, which the deadline waits for anyway", printable(t))),
                false => Ok(()),
            }
        });
        if f.check(&field, r).is_some() {
            out.push(t.clone());
        }
    }
    out
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

    #[test]
    fn the_initialisation_deadline_and_its_conditions_are_checked() {
        let mut f = Findings::default();
        let c = VerifySettings {
            init_deadline: Some("10m".into()),
            init_conditions: vec!["nvidia.com/GPUReady".into()],
            on_failure: OnFailure::Terminate,
            ..Default::default()
        };
        let s = spec(&c, &mut f);
        assert!(f.is_empty(), "{f:?}");
        assert_eq!(s.init_deadline, Some(Duration::from_secs(600)));
        assert_eq!(s.init_conditions, ["nvidia.com/GPUReady"]);
        let mut f = Findings::default();
        let c = VerifySettings {
            init_deadline: Some("2h".into()),
            init_conditions: vec![
                "bad type".into(),
                "eks-nodeinit.io/Joined".into(),
                "x/Ok".into(),
                "x/Ok".into(),
            ],
            ..Default::default()
        };
        spec(&c, &mut f);
        let fields: Vec<_> = f.0.iter().map(|x| x.field.clone()).collect();
        assert_eq!(
            fields,
            [
                "verify.initDeadline",
                "verify.initConditions[0]",
                "verify.initConditions[1]",
                "verify.initConditions[3]"
            ]
        );
        // Without the proof nothing would act on them.
        let mut f = Findings::default();
        let c = VerifySettings {
            join: JoinMode::Off,
            on_failure: OnFailure::Replace,
            ..Default::default()
        };
        spec(&c, &mut f);
        assert_eq!(f.0[0].field, "verify.join");
    }
}
