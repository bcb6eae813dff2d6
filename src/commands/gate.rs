//! `eks-nodeinit gate`: the packaged `eks-nodeinit-gate.service` runs this boot's checks before
//! the kubelet starts ([`crate::plan::gate`]), after the agent's unit and the drivers' units,
//! before `nodeadm-run.service`. Each check waits within its own budget; their results go into
//! the report under the run's lock (with the Node conditions they name, which the work after
//! the hand-off sets). A failed check stops nothing: the unit succeeds so that the kubelet
//! starts and the Node registers, where its conditions hold it back; only a job that cannot
//! be read, or a report that cannot be written, fails it.

use std::path::{Path, PathBuf};

use crate::exec::report::Report;
use crate::os::fsutil::{self, under};
use crate::plan::gate::{GateJob, GATE_JOB};
use crate::plan::step::{CheckStep, When};
use crate::verify::Verdict;

#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error(transparent)]
    Fs(#[from] fsutil::FsError),
    #[error("{path}: {message}; it is written by `eks-nodeinit init`: run `systemctl restart eks-nodeinit` to write it again")]
    Job { path: PathBuf, message: String },
    #[error("the report cannot be written: {0}")]
    Report(String),
    #[error(transparent)]
    Lock(#[from] crate::os::lock::LockError),
}

/// Run this boot's checks before the kubelet starts, if the run left any: how many failed.
pub async fn run(root: &Path) -> Result<usize, GateError> {
    let path = under(root, GATE_JOB);
    let Some(text) = fsutil::read_optional(&path)? else {
        tracing::info!("no checks before the kubelet in this boot ({GATE_JOB} is absent)");
        return Ok(0);
    };
    let job = GateJob::from_text(&text).map_err(|message| GateError::Job { path, message })?;
    let steps: Vec<&CheckStep> = job.steps.iter().collect();
    let results = crate::exec::checks::run(&steps, root).await;
    let failed = results.as_ref().map_or(0, |r| {
        let failed = r.iter().filter(|c| c.result == Verdict::Failed);
        failed.filter(|c| !c.advisory).count()
    });
    let _lock = crate::os::lock::take(root, true)?;
    let mut report = Report::for_update(root);
    crate::exec::checks::record(&steps, When::Gate, results, &mut report);
    report
        .write(root, &[])
        .map_err(|e| GateError::Report(e.to_string()))?;
    match failed {
        0 => tracing::info!("the checks before the kubelet passed: the kubelet starts"),
        n => tracing::error!("{n} check(s) before the kubelet failed: the kubelet starts, and the Node's conditions say why; see `eks-nodeinit status`"),
    }
    Ok(failed)
}
