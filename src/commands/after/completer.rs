//! What `complete-hook` and its stages after the verdict (`settle`) share: where the jobs are
//! and how long each wait may be, the unit's errors, and the boot's report edited under the
//! run's lock.

use std::path::PathBuf;
use std::time::Duration;

use crate::aws::autoscaling::HookError;
use crate::base::retry::RetryPolicy;
use crate::exec::report::Report;
use crate::os::{fsutil, systemd};

#[derive(Debug, thiserror::Error)]
pub enum CompleteError {
    #[error(transparent)]
    Fs(#[from] fsutil::FsError),
    #[error("{path}: {message}; it is written by `eks-nodeinit init`: run `systemctl restart eks-nodeinit` to write it again")]
    Job { path: PathBuf, message: String },
    #[error("kubelet.service is {state} after {waited:?}, not active: the node did not join, so {left}; see `journalctl -u kubelet`")]
    Kubelet {
        state: String,
        waited: Duration,
        /// What is left undone.
        left: String,
    },
    #[error("the node did not join (verdict {verdict}): {causes}; see `eks-nodeinit status`")]
    NotJoined {
        verdict: &'static str,
        causes: String,
    },
    #[error("launch hook `{hook}` was not completed with {result}: {error}; Auto Scaling applies the hook's default result at its heartbeat timeout (ABANDON unless set otherwise), whatever the node's verdict ({verdict}); see `eks-nodeinit status`")]
    HookNotCompleted {
        hook: String,
        result: &'static str,
        verdict: &'static str,
        error: String,
    },
    #[error(
        "after the hand-off, {failures}; `eks-nodeinit status` lists the steps after the hand-off"
    )]
    After { failures: String },
    #[error(transparent)]
    Hook(#[from] HookError),
    #[error(transparent)]
    Systemd(Box<systemd::SystemdError>),
    #[error(transparent)]
    Lock(#[from] crate::os::lock::LockError),
}

impl From<systemd::SystemdError> for CompleteError {
    fn from(e: systemd::SystemdError) -> Self {
        CompleteError::Systemd(Box::new(e))
    }
}

/// Where the jobs are and how long each wait may be.
#[derive(Debug, Clone)]
pub struct Completer {
    pub root: PathBuf,
    pub bus_address: String,
    /// How long kubelet may take to be active.
    pub kubelet_wait: Duration,
    /// The Auto Scaling calls' deadline.
    pub deadline: Duration,
    pub policy: RetryPolicy,
    /// How often the proof asks for the Node.
    pub poll: Duration,
    /// How often the launch hook's heartbeat is recorded while the proof runs.
    pub heartbeat: Duration,
    /// How many times a retirement is tried (0: until the instance is gone).
    pub retire_attempts: u32,
    /// The first wait before a failed retirement is tried again (it doubles, to 5 minutes).
    pub retire_retry: Duration,
}

pub(super) fn update_join(
    c: &Completer,
    edit: impl FnOnce(&mut crate::verify::record::JoinRecord),
) -> Result<(), CompleteError> {
    update(c, |report| {
        let mut join: crate::verify::record::JoinRecord =
            report.property("join").unwrap_or_default();
        edit(&mut join);
        report.set_property("join", &join);
    })
}

/// The report edited under the run's lock.
pub(super) fn update(c: &Completer, edit: impl FnOnce(&mut Report)) -> Result<(), CompleteError> {
    let _lock = crate::os::lock::take(&c.root, true)?;
    let mut report = Report::for_update(&c.root);
    edit(&mut report);
    report.write(&c.root, &[])?;
    Ok(())
}
