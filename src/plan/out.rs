//! What planning produces: the steps, warnings, findings and notes of one setting, gathered by
//! the plan into [`crate::plan::Plan`]. Below both the settings (`plan::aspects`) and the
//! hand-off renderers (`plan::handoff`), which fill it alike.

use crate::base::findings::Findings;
use crate::facts::Facts;
use crate::plan::step::{File, Mode, Remove, Step};

/// What one aspect's planning produced.
#[derive(Debug, Default)]
pub(crate) struct Out {
    pub steps: Vec<Step>,
    /// Steps run before discovery and every check ([`crate::plan::Plan::early`]).
    pub early: Vec<Step>,
    pub warnings: Vec<String>,
    pub findings: Findings,
    /// Values the aspect put into a step that must never be shown (the cluster CA).
    pub secrets: Vec<String>,
    /// What the aspect says beside its steps ([`crate::plan::step::Note`]).
    pub notes: Vec<crate::plan::step::Note>,
    /// Steps run when a step before the changes fails (the plan's `on_failure`).
    pub on_failure: Vec<Step>,
    /// Report properties known before the run, by key.
    pub record: std::collections::BTreeMap<String, serde_json::Value>,
    /// Report properties that receive the run's phases.
    pub timelines: std::collections::BTreeSet<String>,
}

impl Out {
    /// Plan `path` to hold `new` with `mode`'s rule ([`File::wanted`]), from the file as the
    /// facts hold it; one the agent cannot replace is a finding for `field`. Whether a step was
    /// planned.
    pub fn file(
        &mut self,
        facts: &Facts,
        field: &str,
        path: &str,
        purpose: impl Into<String>,
        new: String,
        mode: Mode,
    ) -> bool {
        let Some(cur) = facts.current_file(path, field, &mut self.findings) else {
            return false;
        };
        self.file_from(cur, path, purpose, new, mode)
    }

    /// [`Out::file`] for a file already read from the facts.
    /// This boot's job for a packaged unit at `path` (under /run, 0600, never a change of the
    /// node's): `job`'s text written with its purpose, or, with none, an earlier run's job
    /// removed. Whether the job's write was planned (an equal one is not written again).
    pub fn boot_job(
        &mut self,
        facts: &Facts,
        field: &str,
        path: &str,
        job: Option<(String, String)>,
    ) -> bool {
        let Some((purpose, text)) = job else {
            if matches!(facts.file(path).map(|f| &f.content), Some(Ok(Some(_)))) {
                self.steps.push(Step::Remove(Remove {
                    purpose: format!("an earlier run's {field}, which this plan has none of"),
                    path: path.into(),
                    restore_if_run_fails: false,
                }));
            }
            return false;
        };
        self.file(facts, field, path, purpose, text, Mode::Exact(0o600))
    }

    pub fn file_from(
        &mut self,
        cur: crate::facts::Current,
        path: &str,
        purpose: impl Into<String>,
        new: String,
        mode: Mode,
    ) -> bool {
        let step = File::wanted(path, purpose, (cur.content, cur.mode), new, mode);
        let planned = step.is_some();
        self.steps.extend(step);
        planned
    }
}
