//! The Auto Scaling API: complete a launch lifecycle hook (`CompleteLifecycleAction` with
//! `CONTINUE`) and, when the run did not know it, find the instance's group
//! (`DescribeAutoScalingInstances`), under the agent's retry policy and a deadline: throttling
//! and server errors retry with capped, jittered backoff; a denial names the IAM statement.

use tokio::time::Instant;

use crate::aws::{self, CallError};
use crate::base::retry::RetryPolicy;

#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error(transparent)]
    Call(#[from] CallError),
    #[error("Auto Scaling knows no group for {instance_id} (DescribeAutoScalingInstances): it is not, or no longer, in an Auto Scaling group")]
    NoGroup { instance_id: String },
}

/// How many calls of each operation were made (the tests read them from the log line).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Calls {
    pub complete_lifecycle_action: u32,
    pub describe_auto_scaling_instances: u32,
    pub record_lifecycle_action_heartbeat: u32,
    pub set_instance_health: u32,
}

pub struct AutoScaling {
    client: aws_sdk_autoscaling::Client,
    pub calls: Calls,
}

/// What CompleteLifecycleAction said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completed {
    /// Completed with the result asked.
    Completed,
    /// Auto Scaling had no launch waiting on this hook for the instance (already completed, timed
    /// out, or no hook of that name): nothing left to do.
    NothingWaiting,
}

/// What the launch is told: go on into service, or be replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum HookResult {
    Continue,
    Abandon,
}

impl HookResult {
    pub fn as_str(self) -> &'static str {
        match self {
            HookResult::Continue => "CONTINUE",
            HookResult::Abandon => "ABANDON",
        }
    }
}

impl AutoScaling {
    /// A client for `region` with the SDK's default credential chain (the instance role on a
    /// node); the endpoint is `AWS_ENDPOINT_URL_AUTO_SCALING`, else the SDK's default. Through
    /// `transport` when there is one.
    pub async fn new(region: &str, transport: Option<&aws::Transport>) -> AutoScaling {
        let conf = aws::sdk_config(region, transport).await;
        let conf = aws::for_service(&conf, "AUTO_SCALING", None, transport).await;
        AutoScaling {
            client: aws_sdk_autoscaling::Client::new(&conf),
            calls: Calls::default(),
        }
    }

    /// The instance's Auto Scaling group.
    pub async fn group_of(
        &mut self,
        instance_id: &str,
        policy: RetryPolicy,
        deadline: Instant,
    ) -> Result<String, HookError> {
        let op = aws::Op {
            name: "DescribeAutoScalingInstances",
            action: "autoscaling:DescribeAutoScalingInstances",
            resource: "*".into(),
            on: instance_id,
        };
        let client = &self.client;
        let calls = &mut self.calls.describe_auto_scaling_instances;
        let out = op
            .call(policy, deadline, calls, || {
                client
                    .describe_auto_scaling_instances()
                    .instance_ids(instance_id)
                    .send()
            })
            .await?;
        out.auto_scaling_instances()
            .iter()
            .find(|i| i.instance_id() == Some(instance_id))
            .and_then(|i| i.auto_scaling_group_name())
            .map(String::from)
            .ok_or_else(|| HookError::NoGroup {
                instance_id: instance_id.into(),
            })
    }

    /// CompleteLifecycleAction with `result` (`CONTINUE` or `ABANDON`) for `hook` of `group`
    /// and the instance.
    #[allow(clippy::too_many_arguments)]
    pub async fn complete(
        &mut self,
        result: HookResult,
        hook: &str,
        group: &str,
        instance_id: &str,
        policy: RetryPolicy,
        deadline: Instant,
    ) -> Result<Completed, HookError> {
        let op = aws::Op {
            name: "CompleteLifecycleAction",
            action: "autoscaling:CompleteLifecycleAction",
            resource: format!(
                "arn:aws:autoscaling:*:*:autoScalingGroup:*:autoScalingGroupName/{group}"
            ),
            on: instance_id,
        };
        let client = &self.client;
        let calls = &mut self.calls.complete_lifecycle_action;
        let r = op
            .call(policy, deadline, calls, || {
                client
                    .complete_lifecycle_action()
                    .lifecycle_hook_name(hook)
                    .auto_scaling_group_name(group)
                    .instance_id(instance_id)
                    .lifecycle_action_result(result.as_str())
                    .send()
            })
            .await;
        match r {
            Ok(_) => Ok(Completed::Completed),
            Err(CallError::Fatal { message, .. }) if nothing_waiting(&message) => {
                Ok(Completed::NothingWaiting)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// SetInstanceHealth `Unhealthy` for the instance, the group's health check grace period
    /// not respected (the verdict came after a deadline of its own): the group terminates it
    /// and launches another.
    pub async fn set_unhealthy(
        &mut self,
        instance_id: &str,
        group: Option<&str>,
        policy: RetryPolicy,
        deadline: Instant,
    ) -> Result<(), CallError> {
        let op = aws::Op {
            name: "SetInstanceHealth",
            action: "autoscaling:SetInstanceHealth",
            resource: format!(
                "arn:aws:autoscaling:*:*:autoScalingGroup:*:autoScalingGroupName/{}",
                group.unwrap_or("*")
            ),
            on: instance_id,
        };
        let client = &self.client;
        op.call(
            policy,
            deadline,
            &mut self.calls.set_instance_health,
            || {
                client
                    .set_instance_health()
                    .instance_id(instance_id)
                    .health_status("Unhealthy")
                    .should_respect_grace_period(false)
                    .send()
            },
        )
        .await
        .map(|_| ())
    }

    /// RecordLifecycleActionHeartbeat for `hook` of `group` and the instance: the hook's
    /// heartbeat timeout starts again.
    pub async fn heartbeat(
        &mut self,
        hook: &str,
        group: &str,
        instance_id: &str,
        policy: RetryPolicy,
        deadline: Instant,
    ) -> Result<(), HookError> {
        let op = aws::Op {
            name: "RecordLifecycleActionHeartbeat",
            action: "autoscaling:RecordLifecycleActionHeartbeat",
            resource: format!(
                "arn:aws:autoscaling:*:*:autoScalingGroup:*:autoScalingGroupName/{group}"
            ),
            on: instance_id,
        };
        let client = &self.client;
        let calls = &mut self.calls.record_lifecycle_action_heartbeat;
        op.call(policy, deadline, calls, || {
            client
                .record_lifecycle_action_heartbeat()
                .lifecycle_hook_name(hook)
                .auto_scaling_group_name(group)
                .instance_id(instance_id)
                .send()
        })
        .await?;
        Ok(())
    }

    /// The launch's group: the one the run knew, else asked of Auto Scaling.
    async fn group(
        &mut self,
        launch: &Launch<'_>,
        policy: RetryPolicy,
        deadline: Instant,
    ) -> Result<String, HookError> {
        match launch.group {
            Some(g) => Ok(g.to_string()),
            None => self.group_of(launch.instance_id, policy, deadline).await,
        }
    }
}

/// Auto Scaling's answer when no launch waits on the hook for the instance: a `ValidationError`
/// saying `No active Lifecycle Action found with instance ID …`.
fn nothing_waiting(message: &str) -> bool {
    message.starts_with("ValidationError") && message.contains("No active Lifecycle Action")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_validation_error_about_no_active_action_means_nothing_waits() {
        assert!(nothing_waiting(
            "ValidationError: No active Lifecycle Action found with instance ID i-1"
        ));
        assert!(!nothing_waiting("ValidationError: Group asg-x not found"));
        assert!(!nothing_waiting("No active Lifecycle Action"));
    }
}

/// Which launch to complete: the hook, the instance, its group when known (else asked of Auto
/// Scaling by instance id), the Region.
#[derive(Debug, Clone, Copy)]
pub struct Launch<'a> {
    pub hook: &'a str,
    pub group: Option<&'a str>,
    pub instance_id: &'a str,
    pub region: &'a str,
}

/// Complete `launch` with `result` before `deadline`, through `transport` (the config's proxy
/// and CA bundles, whatever the process environment holds), the calls logged.
pub async fn complete_launch(
    launch: Launch<'_>,
    result: HookResult,
    policy: RetryPolicy,
    deadline: Instant,
    transport: Option<&aws::Transport>,
) -> Result<Completed, HookError> {
    let mut api = AutoScaling::new(launch.region, transport).await;
    let r = async {
        let group = api.group(&launch, policy, deadline).await?;
        let (hook, id) = (launch.hook, launch.instance_id);
        api.complete(result, hook, &group, id, policy, deadline)
            .await
    }
    .await;
    tracing::info!(
        complete_lifecycle_action = api.calls.complete_lifecycle_action,
        describe_auto_scaling_instances = api.calls.describe_auto_scaling_instances,
        "Auto Scaling calls"
    );
    r
}

/// Keep `launch` waiting: a RecordLifecycleActionHeartbeat at once and then every `every`,
/// until the returned future is dropped, or Auto Scaling has no launch waiting on the hook
/// any more, or the role may not send one (each logged once; the hook then times out as
/// configured). Any other failure is retried at the next beat.
pub async fn keep_alive(
    launch: Launch<'_>,
    every: std::time::Duration,
    policy: RetryPolicy,
    transport: Option<&aws::Transport>,
) {
    let mut api = AutoScaling::new(launch.region, transport).await;
    let mut group = launch.group.map(String::from);
    loop {
        let deadline = Instant::now() + every;
        let r = async {
            let g = match &group {
                Some(g) => g.clone(),
                None => api.group_of(launch.instance_id, policy, deadline).await?,
            };
            group = Some(g.clone());
            let (hook, id) = (launch.hook, launch.instance_id);
            api.heartbeat(hook, &g, id, policy, deadline).await
        }
        .await;
        match r {
            Ok(()) => tracing::info!(
                hook = %launch.hook,
                heartbeats = api.calls.record_lifecycle_action_heartbeat,
                "launch hook heartbeat recorded: the proof goes on"
            ),
            Err(HookError::Call(CallError::Fatal { message, .. })) if nothing_waiting(&message) => {
                tracing::warn!(hook = %launch.hook, "no more heartbeats: Auto Scaling has no launch waiting on the hook for the instance (completed or timed out already)");
                return;
            }
            Err(e @ HookError::Call(CallError::Denied(_))) => {
                tracing::warn!(hook = %launch.hook, "no more heartbeats: {e}; the hook times out at its heartbeat timeout if the proof takes longer");
                return;
            }
            Err(e) => {
                tracing::warn!(hook = %launch.hook, "a launch hook heartbeat failed: {e}; tried again in {every:?}")
            }
        }
        tokio::time::sleep_until(deadline).await;
    }
}
