//! `eks-nodeinit complete-hook`: the packaged `eks-nodeinit-launch-hook.service` runs it after the
//! agent's unit (which it requires) and nodeadm-run. It reads the job the run left
//! ([`crate::instance::lifecycle::LAUNCH_HOOK_JOB`]); in service it first waits for kubelet to be active,
//! then calls `CompleteLifecycleAction` (`CONTINUE`) under the agent's retry policy and a
//! deadline, and records the job as done in this boot. A kubelet that never becomes active, or a
//! call that keeps failing, fails the unit and completes nothing: Auto Scaling then applies the
//! hook's default result when its heartbeat timeout ends.

use std::path::PathBuf;
use std::time::Duration;

use tokio::time::Instant;

use crate::aws::autoscaling::{AutoScaling, Completed, HookError};
use crate::base::retry::RetryPolicy;
use crate::instance::lifecycle::{CompleteAfter, LaunchHookJob, LAUNCH_HOOK_DONE, LAUNCH_HOOK_JOB};
use crate::os::fsutil::{self, under};
use crate::os::systemd;

#[derive(Debug, thiserror::Error)]
pub enum CompleteError {
    #[error(transparent)]
    Fs(#[from] fsutil::FsError),
    #[error("{path}: {message}; it is written by `eks-nodeinit init`: run `systemctl restart eks-nodeinit` to write it again")]
    Job { path: PathBuf, message: String },
    #[error("kubelet.service is {state} after {waited:?}, not active: the node did not join, so launch hook `{hook}` is not completed (Auto Scaling applies its default result at the heartbeat timeout); see `journalctl -u kubelet`")]
    Kubelet {
        state: String,
        waited: Duration,
        hook: String,
    },
    #[error(transparent)]
    Hook(#[from] HookError),
    #[error(transparent)]
    Systemd(Box<systemd::SystemdError>),
}

impl From<systemd::SystemdError> for CompleteError {
    fn from(e: systemd::SystemdError) -> Self {
        CompleteError::Systemd(Box::new(e))
    }
}

/// Where the job is and how long each wait may be.
#[derive(Debug, Clone)]
pub struct Completer {
    pub root: PathBuf,
    pub bus_address: String,
    /// How long kubelet may take to be active.
    pub kubelet_wait: Duration,
    /// The Auto Scaling calls' deadline.
    pub deadline: Duration,
    pub policy: RetryPolicy,
}

/// Complete this boot's launch hook, if there is one and it is not done yet.
pub async fn run(c: &Completer) -> Result<(), CompleteError> {
    let path = under(&c.root, LAUNCH_HOOK_JOB);
    let Some(text) = fsutil::read_optional(&path)? else {
        tracing::info!("no launch hook to complete in this boot ({LAUNCH_HOOK_JOB} is absent)");
        return Ok(());
    };
    let done = under(&c.root, LAUNCH_HOOK_DONE);
    if fsutil::read_optional(&done)?.as_deref() == Some(text.as_str()) {
        tracing::info!("the launch hook of this job was completed earlier in this boot");
        return Ok(());
    }
    let job = LaunchHookJob::from_text(&text).map_err(|message| CompleteError::Job {
        path: path.clone(),
        message,
    })?;
    if job.after == CompleteAfter::Kubelet {
        wait_for_kubelet(c, &job.hook).await?;
    }
    let outcome = complete(c, &job).await?;
    fsutil::write_atomic(&done, text.as_bytes(), 0o644)?;
    match outcome {
        Completed::Continued => {
            tracing::info!(hook = %job.hook, state = %job.state, "launch hook completed: CONTINUE")
        }
        Completed::NothingWaiting => {
            tracing::warn!(hook = %job.hook, state = %job.state, "Auto Scaling had no launch waiting on this hook for the instance (completed or timed out already, or no hook of that name on the group): nothing completed")
        }
    }
    Ok(())
}

/// The calls: the group asked of Auto Scaling when the run did not know it, then the completion.
async fn complete(c: &Completer, job: &LaunchHookJob) -> Result<Completed, CompleteError> {
    let deadline = Instant::now() + c.deadline;
    // The agent's run gave this unit the proxy's environment in a drop-in, as it did kubelet's.
    let transport =
        crate::aws::Proxy::from_env(|k| std::env::var(k).ok()).map(|p| crate::aws::Transport {
            proxy: Some(p),
            ca_bundles: Vec::new(),
        });
    let mut api = AutoScaling::new(&job.region, transport.as_ref()).await;
    let r = async {
        let group = match &job.group {
            Some(g) => g.clone(),
            None => api.group_of(&job.instance_id, c.policy, deadline).await?,
        };
        api.complete(&job.hook, &group, &job.instance_id, c.policy, deadline)
            .await
    }
    .await;
    let calls = api.calls;
    tracing::info!(
        complete_lifecycle_action = calls.complete_lifecycle_action,
        describe_auto_scaling_instances = calls.describe_auto_scaling_instances,
        "Auto Scaling calls"
    );
    Ok(r?)
}

/// Wait until kubelet.service is active (the hand-off started it), reading its state over D-Bus
/// every half second for up to `c.kubelet_wait`.
async fn wait_for_kubelet(c: &Completer, hook: &str) -> Result<(), CompleteError> {
    let conn = systemd::connect(&c.bus_address).await?;
    let start = Instant::now();
    loop {
        let state = systemd::active_state(&conn, "kubelet.service").await?;
        if state == "active" {
            return Ok(());
        }
        if start.elapsed() >= c.kubelet_wait {
            return Err(CompleteError::Kubelet {
                state,
                waited: c.kubelet_wait,
                hook: hook.to_string(),
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
