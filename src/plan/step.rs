//! A step: one effect the executor runs, as the plan holds it. The vocabulary names what the
//! executor does (write a file, set a kernel value, run a program, ask systemd for a job, tag,
//! hand off), never the feature that wanted it: a new node setting composes these, and the
//! executor, the renderers and the report need no new case. The aspects produce steps, the plan
//! orders and renders them, the executor runs them in that order; the type sits below all three.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::facts::{Family, InstanceTags, TagState};
use crate::os::systemd::PropertyCheck;
use crate::spec::tagging::TaggingSpec;

/// What the executor needs to run a tag step beside its key and value.
#[derive(Debug, Clone, PartialEq)]
pub struct TagHow {
    pub region: String,
    /// Every tag as read before planning (unknown: tagging reads them first).
    pub known: InstanceTags,
    pub policy: TaggingSpec,
    /// The proxy for the agent's AWS calls, if the config has one.
    pub transport: Option<Box<crate::aws::http::Transport>>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Step {
    /// Make the instance's tag `key` hold `value`. With `current` unknown, the executor reads
    /// the tags first (DescribeTags) and writes only when they differ. It runs beside the
    /// other steps, from the start of the second phase.
    #[serde(rename_all = "camelCase")]
    Tag {
        instance_id: String,
        key: String,
        value: String,
        #[serde(flatten)]
        current: TagState,
        /// How the executor tags (region, endpoint, tags known, the tagging policy): part of the
        /// executed value, not of the printed plan.
        #[serde(skip)]
        how: TagHow,
    },
    /// A kernel value set now (a sysctl under /proc/sys).
    Live(Live),
    /// A file the node holds after the run: staged in the first phase, renamed in the second.
    File(File),
    /// A file removed.
    Remove(Remove),
    /// A program run to completion (argv, no shell).
    Run(Run),
    /// A job asked of systemd's manager over D-Bus.
    Unit(Unit),
    /// A check that changes nothing (docs/join.md), run before the changes or beside them as
    /// its [`When`] says, together with the plan's other checks under one budget.
    Check(CheckStep),
    /// An AWS call that acts on the instance beyond the node (the launch hook's completion).
    Call(Call),
    /// A value put into the report's property `property` under `key` (a verdict).
    Record(Record),
    /// How the node is handed to EKS: always the last step.
    Handoff(Handoff),
}

/// When a step runs. The executor runs the phases in this order and knows no feature: what a
/// failure of the first phase leads to is the plan's `on_failure` steps.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum When {
    /// Before any change: a failure stops the run with nothing changed.
    First,
    /// In the plan's order, after every file was staged (the second phase).
    #[default]
    Apply,
    /// Beside the second phase, from its start; its outcome recorded when both ended.
    Beside,
    /// After the hand-off took: the plan keeps them in its own list ([`After`]) and leaves
    /// them in this boot's job ([`crate::plan::after`]), which the packaged launch-hook unit
    /// runs once kubelet is active, before the proof. A failure is named in the join's verdict.
    /// Programs (`Run`) and checks (`Check`) carry it.
    After,
    /// Checks only: before the kubelet starts, once the hand-off's files are in place
    /// ([`crate::plan::gate`]: nodeadm's hand-off leaves them to the gate unit, bootstrap.sh's
    /// has the executor run them right before it). A failure stops nothing; the work after the
    /// hand-off sets the conditions they name and judges it.
    Gate,
}

impl When {
    /// Its name in the plan's JSON and the report's checks (`gate`, `after`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            When::First => "first",
            When::Apply => "apply",
            When::Beside => "beside",
            When::After => "after",
            When::Gate => "gate",
        }
    }

    /// The phase a check mode runs its checks in: `fail` before any change, `warn` beside the
    /// changes, `off` none.
    pub fn of_checks(mode: crate::config::CheckMode) -> Option<When> {
        match mode {
            crate::config::CheckMode::Off => None,
            crate::config::CheckMode::Fail => Some(When::First),
            crate::config::CheckMode::Warn => Some(When::Beside),
        }
    }

    /// The default phase, left out of the plan's JSON.
    pub fn is_apply(&self) -> bool {
        *self == When::Apply
    }
}

/// A check as the plan runs it: when, under which budget, and where its results go in the
/// report (with the run's phases).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CheckStep {
    #[serde(flatten)]
    pub check: crate::verify::Check,
    #[serde(default, skip_serializing_if = "When::is_apply")]
    pub when: When,
    /// The budget the checks of its phase share, in milliseconds (the largest of theirs).
    pub budget_ms: u64,
    /// The report property and key its phase's results go into, beside the property
    /// `checks`, which has every check's by its name. A check after the hand-off has its
    /// result in the report's steps and the join's verdict.
    #[serde(skip)]
    pub record: Option<(String, String)>,
    /// After the hand-off: the Node condition that says how it went, named by its setting
    /// ([`crate::verify::conditions`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
}

impl CheckStep {
    /// `check` run in phase `when` under `budget` (the checks of a phase share the largest),
    /// its result in the report's `checks` only.
    pub fn new(check: crate::verify::Check, when: When, budget: std::time::Duration) -> CheckStep {
        CheckStep {
            check,
            when,
            budget_ms: u64::try_from(budget.as_millis()).unwrap_or(u64::MAX),
            record: None,
            condition: None,
        }
    }

    /// Its result also under the report's `property`.`key`, with its phase's other results.
    pub fn recorded_at(self, property: &str, key: &str) -> CheckStep {
        CheckStep {
            record: Some((property.into(), key.into())),
            ..self
        }
    }

    /// Its result is the Node condition `condition`, whichever phase it ran in.
    pub fn condition(self, condition: impl Into<String>) -> CheckStep {
        CheckStep {
            condition: Some(condition.into()),
            ..self
        }
    }
}

/// A step after the hand-off, as the plan keeps it and this boot's job holds it: a program
/// or a check ([`When::After`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum After {
    Run(Run),
    Check(CheckStep),
}

impl From<After> for Step {
    fn from(a: After) -> Step {
        match a {
            After::Run(r) => Step::Run(r),
            After::Check(c) => Step::Check(c),
        }
    }
}

impl After {
    /// What the report calls it.
    pub fn describe(&self) -> String {
        match self {
            After::Run(r) => r.purpose.clone(),
            After::Check(c) => format!("check {}", c.check.probe.describe()),
        }
    }

    /// The Node condition its setting names for it.
    pub fn condition(&self) -> Option<&str> {
        match self {
            After::Run(r) => r.condition.as_deref(),
            After::Check(c) => c.condition.as_deref(),
        }
    }
}

/// An AWS call the executor makes, and where its outcome goes in the report.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Call {
    pub purpose: String,
    #[serde(flatten)]
    pub api: AwsCall,
    /// The report property and key that receive the outcome, in words.
    #[serde(skip)]
    pub record: Option<(String, String)>,
    /// How the call reaches AWS (the config's proxy and CA bundles).
    #[serde(skip)]
    pub transport: Option<Box<crate::aws::Transport>>,
}

/// The AWS APIs a [`Call`] can make.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "api", rename_all = "camelCase")]
pub enum AwsCall {
    /// `autoscaling:CompleteLifecycleAction` for this instance's launch.
    #[serde(rename_all = "camelCase")]
    CompleteLaunch {
        #[serde(flatten)]
        job: crate::instance::lifecycle::LaunchHookJob,
        result: crate::aws::autoscaling::HookResult,
    },
}

/// A value for the report: `property.key = value`.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub property: String,
    pub key: String,
    pub value: serde_json::Value,
}

/// What an aspect says beside its steps: a JSON value under `key`, and its text lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Note {
    pub key: String,
    pub lines: Vec<String>,
    pub value: serde_json::Value,
}

/// A kernel value: `path` (node path) takes `new`.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Live {
    /// The name people know it by (`vm.max_map_count`).
    pub key: String,
    pub path: PathBuf,
    pub old: String,
    pub new: String,
    /// Read the value back after setting it: the kernel may take less than asked (huge pages
    /// on fragmented memory). What a shortfall means, said with it as a mismatch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_back: Option<String>,
}

/// How a file step sets the file's mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The node's mode when the file exists (the operator's choice stands), else this one.
    Keep(u32),
    /// Exactly this mode: a file holding the right content with another mode is rewritten.
    Exact(u32),
}

/// A whole file, written atomically.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct File {
    /// What the file is for, in the plan's words.
    pub purpose: String,
    /// The node path (without the root).
    pub path: PathBuf,
    pub old: Option<String>,
    pub new: String,
    /// The mode it is written with (the [`Mode`] rule applied to the node).
    pub mode: u32,
    /// One-time backup of the original, when it does not exist yet.
    pub backup: Option<PathBuf>,
}

impl File {
    /// The step that makes `path` hold `new`, given what the node has there (`old` content,
    /// `old_mode`), or `None` when it already does.
    pub fn wanted(
        path: &str,
        purpose: impl Into<String>,
        (old, old_mode): (Option<String>, Option<u32>),
        new: String,
        mode: Mode,
    ) -> Option<Step> {
        let mode = match (mode, old_mode) {
            (Mode::Keep(_), Some(m)) => m,
            (Mode::Keep(m) | Mode::Exact(m), _) => m,
        };
        let same_mode = old_mode.map_or(true, |m| m == mode);
        if old.as_deref() == Some(new.as_str()) && same_mode {
            return None;
        }
        Some(Step::File(File {
            purpose: purpose.into(),
            path: path.into(),
            old,
            new,
            mode,
            backup: None,
        }))
    }
}

/// A file removed (absent already is done).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Remove {
    pub purpose: String,
    pub path: PathBuf,
    /// Put the file back when a later step fails the run, so that a rerun plans this again.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub restore_if_run_fails: bool,
}

/// A program run with argv (no shell), under a timeout. Its failure fails the run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Run {
    pub purpose: String,
    pub argv: Vec<String>,
    pub timeout_secs: u64,
    /// A program that changes nothing and fails where `argv` would (`modprobe --dry-run`): run
    /// in the first phase, so that its failure stops the run before any change. Run even where
    /// `argv` is skipped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check: Option<Vec<String>>,
    /// Why it is not run here, if it is not (the plan and the report still show it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip: Option<String>,
    /// What a failure leaves and what to do, for the error.
    #[serde(default, skip_serializing_if = "IfFailed::is_empty")]
    pub if_failed: IfFailed,
    /// In the plan's order ([`When::Apply`]) or after the hand-off ([`When::After`]).
    #[serde(default, skip_serializing_if = "When::is_apply")]
    pub when: When,
    /// After the hand-off: the Node condition that says how it went, named by its setting
    /// ([`crate::verify::conditions`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
}

impl Run {
    /// A program run in the plan's order, with no check, skip or condition.
    pub fn new(
        purpose: impl Into<String>,
        argv: Vec<String>,
        timeout_secs: u64,
        if_failed: IfFailed,
    ) -> Run {
        Run {
            purpose: purpose.into(),
            argv,
            timeout_secs,
            check: None,
            skip: None,
            if_failed,
            when: When::Apply,
            condition: None,
        }
    }

    /// Run in phase `when`.
    pub fn when(self, when: When) -> Run {
        Run { when, ..self }
    }

    /// Not run here, because `why` (`None`: run).
    pub fn skip(self, why: Option<String>) -> Run {
        Run { skip: why, ..self }
    }

    /// With the check program that fails where it would, run before any change.
    pub fn checked_by(self, argv: Vec<String>) -> Run {
        Run {
            check: Some(argv),
            ..self
        }
    }

    /// Its outcome is the Node condition `condition`.
    pub fn condition(self, condition: impl Into<String>) -> Run {
        Run {
            condition: Some(condition.into()),
            ..self
        }
    }
}

impl Unit {
    /// `unit` started, not required, because `why`: a run outside the agent's unit (a user-data
    /// script) starts it; in the unit's own run it is pulled in already, and this is that job.
    pub fn start(unit: &str, why: &str) -> Step {
        Step::Unit(Unit {
            job: UnitJob::Start { unit: unit.into() },
            why: format!(
                "{why} (in the packaged unit's run it is already pulled in, and this is the same job)"
            ),
            required: false,
            if_failed: IfFailed::new(format!("{unit} not started"), ""),
        })
    }
}

/// A job for systemd's manager.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Unit {
    #[serde(flatten)]
    pub job: UnitJob,
    pub why: String,
    /// A failure fails the run; else it is a warning, and the run goes on.
    pub required: bool,
    /// What a failure leaves and what to do, for the error or the warning.
    #[serde(skip)]
    pub if_failed: IfFailed,
}

/// What a failed step means and what to do about it, for its error or warning.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IfFailed {
    /// What did not happen (`systemd did not reload its units`).
    pub what: String,
    /// What that leaves and what to do; may be empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub todo: String,
}

impl IfFailed {
    pub fn new(what: impl Into<String>, todo: impl Into<String>) -> IfFailed {
        IfFailed {
            what: what.into(),
            todo: todo.into(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.what.is_empty() && self.todo.is_empty()
    }

    /// The message for a failure of this `cause`.
    pub fn say(&self, cause: &str) -> String {
        match self.todo.as_str() {
            "" => format!("{}: {cause}", self.what),
            todo => format!("{} ({cause}): {todo}", self.what),
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "job", rename_all = "camelCase")]
pub enum UnitJob {
    /// Queue a start (without waiting for the unit).
    Start { unit: String },
    /// Restart the unit, then read a property back until it holds the expected value.
    Restart { unit: String, verify: PropertyCheck },
    /// Reload every unit file and drop-in (`Manager.Reload`, what `systemctl daemon-reload`
    /// asks), so that drop-ins written now apply to units started after it.
    Reload,
}

/// The hand-off.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "handoff", rename_all = "camelCase")]
pub enum Handoff {
    /// AL2: the process becomes this argv (bootstrap.sh); a per-boot marker stops a second one.
    /// `env`: variables set for it beside the agent's own environment.
    Exec {
        argv: Vec<String>,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        env: BTreeMap<String, String>,
    },
    /// AL2023: nodeadm takes the node from here; what it reads and when.
    Dropin(NodeadmHandoff),
    /// A warmed instance: the hand-off waits until the instance goes into service.
    Hold(HandoffHold),
}

impl Step {
    /// Steps that change the node's files, kernel or services (what a second run must not plan).
    /// A file under /run is this boot's job for a follow-up unit (the proof's, the hook's), like
    /// the hand-off's marker: gone at every reboot, it is written again with the hand-off, and
    /// changes nothing the node is configured with.
    pub fn is_change(&self) -> bool {
        match self {
            Step::File(f) => !f.path.starts_with("/run"),
            Step::Remove(r) => !r.path.starts_with("/run"),
            Step::Tag { .. } | Step::Live(_) | Step::Run(_) => true,
            Step::Call(_) => true,
            Step::Unit(u) => !matches!(u.job, UnitJob::Start { .. }),
            Step::Handoff(_) | Step::Check(_) | Step::Record(_) => false,
        }
    }

    /// When the step runs: a check as planned, the tag beside the changes, the rest in order.
    pub fn when(&self) -> When {
        match self {
            Step::Check(c) => c.when,
            Step::Run(r) => r.when,
            Step::Tag { .. } => When::Beside,
            _ => When::Apply,
        }
    }

    /// A short name for logs and the report.
    pub fn describe(&self) -> String {
        match self {
            Step::Tag { key, value, .. } => format!("tag {key}={value}"),
            Step::Live(l) if l.path.starts_with("/proc/sys") => {
                format!("sysctl {}={}", l.key, l.new)
            }
            Step::Live(l) => format!("set {}={}", l.path.display(), l.new),
            Step::File(f) => format!("write {}", f.path.display()),
            Step::Remove(r) => format!("remove {}", r.path.display()),
            Step::Run(r) => format!(
                "{} ({})",
                r.purpose,
                r.argv.first().map_or("", String::as_str)
            ),
            Step::Unit(u) => match &u.job {
                UnitJob::Start { unit } => format!("start {unit}"),
                UnitJob::Restart { unit, .. } => format!("restart {}", name(unit)),
                UnitJob::Reload => "reload systemd's units".into(),
            },
            Step::Check(c) => format!("check {}", c.check.probe.describe()),
            Step::Call(c) => c.purpose.clone(),
            Step::Record(r) => format!("record {}.{}", r.property, r.key),
            Step::Handoff(Handoff::Exec { argv, .. }) => {
                format!("exec {}", argv.first().map_or("", String::as_str))
            }
            Step::Handoff(Handoff::Dropin(h)) => format!("nodeadm reads {}", h.dropin.display()),
            Step::Handoff(Handoff::Hold(h)) => format!("hold the hand-off ({})", h.state),
        }
    }

    /// The hand-off this step is, as the report names it.
    pub fn handoff(&self) -> Option<String> {
        match self {
            Step::Handoff(Handoff::Exec { .. }) => Some("exec bootstrap.sh".into()),
            Step::Handoff(Handoff::Dropin(h)) => {
                Some(format!("NodeConfig at {}", h.dropin.display()))
            }
            Step::Handoff(Handoff::Hold(h)) => Some(format!(
                "held: {} (handed off once the instance is in service)",
                h.state
            )),
            _ => None,
        }
    }
}

/// A unit as logs name it: `systemd-logind`.
pub fn name(unit: &str) -> &str {
    unit.trim_end_matches(".service")
}

/// The AL2023 hand-off: the agent's NodeConfig drop-in, which nodeadm's units read after the
/// user data. In the plan's JSON: `dropin` and a `note` saying how nodeadm gets it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeadmHandoff {
    pub dropin: PathBuf,
    /// `nodeadm-config.service` has the package's drop-in adding `/etc/eks/nodeadm.d/` to its
    /// sources (else only `nodeadm-run.service` reads it).
    pub config_unit_reads_dropins: bool,
    /// The user data's taints the drop-in's `--register-with-taints` carries ahead of the
    /// config's: how many, and where they are.
    pub carried_taints: Option<(usize, String)>,
}

impl NodeadmHandoff {
    /// How nodeadm gets the node, in words.
    pub fn note(&self) -> String {
        let mut note = String::from(if self.config_unit_reads_dropins {
            "nodeadm-config.service (with the package's drop-in) and nodeadm-run.service read imds://user-data then file:///etc/eks/nodeadm.d/; nodeadm-run starts kubelet; the agent exits 0"
        } else {
            "nodeadm-run.service (after cloud-final.service) reads imds://user-data then file:///etc/eks/nodeadm.d/ and starts kubelet; the agent exits 0"
        });
        if let Some((n, source)) = &self.carried_taints {
            note.push_str(&format!(
                "; the drop-in's --register-with-taints carries {n} taint{} of the NodeConfigs merged before it ({source}) ahead of the config's, as kubelet keeps only the last such flag",
                if *n == 1 { "" } else { "s" },
            ));
        }
        note
    }
}

impl Serialize for NodeadmHandoff {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("NodeadmHandoff", 2)?;
        st.serialize_field("dropin", &self.dropin)?;
        st.serialize_field("note", &self.note())?;
        st.end()
    }
}

/// The hand-off held while the instance is warmed ([`crate::instance::lifecycle`]): the node-local steps
/// ran, the marker on the per-boot tmpfs says this boot held it, and the hand-off that waits is
/// the family's.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HandoffHold {
    /// The target lifecycle state that holds it (`Warmed:Stopped`).
    pub state: String,
    /// Whose hand-off waits: bootstrap.sh's exec (AL2) or nodeadm-run's kubelet (AL2023).
    pub family: Family,
    /// The hold marker (node path).
    pub marker: PathBuf,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wanted(old: Option<&str>, old_mode: Option<u32>, mode: Mode) -> Option<u32> {
        match File::wanted(
            "/f",
            "p",
            (old.map(String::from), old_mode),
            "x".into(),
            mode,
        ) {
            Some(Step::File(f)) => Some(f.mode),
            _ => None,
        }
    }

    #[test]
    fn keep_takes_the_nodes_mode_and_exact_rewrites_another() {
        assert_eq!(wanted(None, None, Mode::Keep(0o644)), Some(0o644));
        assert_eq!(
            wanted(Some("y"), Some(0o600), Mode::Keep(0o644)),
            Some(0o600)
        );
        assert_eq!(wanted(Some("x"), Some(0o600), Mode::Keep(0o644)), None);
        assert_eq!(
            wanted(Some("y"), Some(0o666), Mode::Exact(0o600)),
            Some(0o600)
        );
        assert_eq!(
            wanted(Some("x"), Some(0o666), Mode::Exact(0o600)),
            Some(0o600)
        );
        assert_eq!(wanted(Some("x"), Some(0o600), Mode::Exact(0o600)), None);
    }
}
