//! This boot's job, read once: the three parts the run left (the launch hook's, the proof's,
//! the steps after the hand-off), and the results of this boot's earlier checks that name a
//! Node condition (the report's `checks`), which the conditions carry once the Node exists.

use std::path::PathBuf;

use super::completer::{CompleteError, Completer};
use crate::exec::checks::CHECKS;
use crate::exec::report::Report;
use crate::instance::lifecycle::{LaunchHookJob, LAUNCH_HOOK_DONE, LAUNCH_HOOK_JOB};
use crate::os::fsutil::{self, under};
use crate::plan::after::{AfterJob, AFTER_JOB};
use crate::plan::gate::{GateJob, GATE_JOB, UNIT};
use crate::plan::step::When;
use crate::verify::proof::{JoinJob, JOIN_JOB};
use crate::verify::{CheckResult, Verdict};

/// What the stages after the hand-off run over.
pub(super) struct Boot {
    /// The launch hook to complete, with the job's text (absent, or completed earlier in
    /// this boot: `None`).
    pub hook: Option<(LaunchHookJob, String)>,
    /// Where the completed hook's job is kept.
    pub done: PathBuf,
    pub join: Option<JoinJob>,
    pub after: Option<AfterJob>,
    /// This boot's checks before the kubelet (every one) and the others before the steps after
    /// the hand-off that name a Node condition.
    pub earlier: Vec<CheckResult>,
}

impl Boot {
    pub fn read(c: &Completer) -> Result<Boot, CompleteError> {
        let mut hook = read_job(c, LAUNCH_HOOK_JOB, LaunchHookJob::from_text)?;
        let done = under(&c.root, LAUNCH_HOOK_DONE);
        if let Some((_, text)) = &hook {
            if fsutil::read_optional(&done)?.as_deref() == Some(text.as_str()) {
                tracing::info!("the launch hook of this job was completed earlier in this boot");
                hook = None;
            }
        }
        let join = read_job(c, JOIN_JOB, |t| {
            serde_json::from_str::<JoinJob>(t).map_err(|e| crate::base::text::serde_message(&e))
        })?;
        let after = read_job(c, AFTER_JOB, AfterJob::from_text)?.map(|(j, _)| j);
        let mut earlier = earlier(c);
        unrun_gate(c, &mut earlier);
        Ok(Boot {
            hook,
            done,
            join: join.map(|(j, _)| j),
            after,
            earlier,
        })
    }

    /// Nothing left to do in this boot.
    pub fn is_empty(&self) -> bool {
        self.hook.is_none() && self.join.is_none() && self.after.is_none()
    }
}

/// A job file: `None` when absent.
fn read_job<T>(
    c: &Completer,
    node_path: &str,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Option<(T, String)>, CompleteError> {
    let path = under(&c.root, node_path);
    let Some(text) = fsutil::read_optional(&path)? else {
        return Ok(None);
    };
    let job = parse(&text).map_err(|message| CompleteError::Job { path, message })?;
    Ok(Some((job, text)))
}

/// Each of this boot's checks before the kubelet ([`GATE_JOB`]) with no result in the report, as
/// failed, never the instance's own fault: the gate unit did not run it, was stopped, or could
/// not record it. Not a pass: a node whose gate said nothing is not counted among its peers'
/// joined nodes. A job that cannot be read adds nothing, and says so.
fn unrun_gate(c: &Completer, earlier: &mut Vec<CheckResult>) {
    let job = match read_job(c, GATE_JOB, GateJob::from_text) {
        Ok(job) => job,
        Err(e) => {
            return tracing::warn!("{e}: its checks' results are taken as the report has them")
        }
    };
    let steps = job.map(|(j, _)| j.steps).unwrap_or_default();
    for step in steps {
        let name = step.check.probe.describe();
        let gate = Some(When::Gate.as_str().to_string());
        if earlier.iter().any(|r| r.check == name && r.phase == gate) {
            continue;
        }
        let why = format!("no result in the report: {UNIT} did not run it, was stopped before its end, or could not record it; see `journalctl -u {UNIT}`");
        let mut r = CheckResult::other(step.check.probe.as_ref(), Verdict::Failed, why);
        r.cause = Some("gate-unrun".into());
        // A check whose failures never count (nodeadm's own check) is advisory unrun too.
        r.advisory = !step.check.probe.blocks("gate-unrun");
        (r.phase, r.condition) = (gate, step.condition.clone());
        earlier.push(r);
    }
}

/// The report's results of checks before the steps after the hand-off that name a condition
/// (a report that cannot be read has none: the proof goes on, and says nothing of them).
fn earlier(c: &Completer) -> Vec<CheckResult> {
    let report = match Report::load(&c.root) {
        Ok(Some(r)) => r,
        Ok(None) => return Vec::new(),
        Err(e) => {
            tracing::warn!("the report cannot be read ({e}): the conditions of this boot's earlier checks are not set");
            return Vec::new();
        }
    };
    let all: std::collections::BTreeMap<String, CheckResult> =
        report.property(CHECKS).unwrap_or_default();
    all.into_values()
        .filter(|r| match r.phase.as_deref() {
            Some(p) if p == When::Gate.as_str() => true,
            Some(p) if p == When::After.as_str() => false,
            _ => r.condition.is_some(),
        })
        .collect()
}
