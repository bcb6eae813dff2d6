//! The `Call` effect: an AWS call that acts beyond the node, under the agent's retry policy for
//! up to a minute, through the transport the plan gave it; its outcome in words.

use std::time::Duration;

use tokio::time::Instant;

use crate::aws::autoscaling::{complete_launch, Completed, HookResult};
use crate::base::retry::RetryPolicy;
use crate::plan::step::{AwsCall, Call};

/// Make the call; what came of it, for the report.
pub(crate) async fn run(c: &Call) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    let transport = c.transport.as_deref();
    match &c.api {
        AwsCall::CompleteLaunch { job, result } => {
            let launch = crate::verify::launch_of(job);
            let r =
                complete_launch(launch, *result, RetryPolicy::default(), deadline, transport).await;
            let then = match result {
                HookResult::Abandon => "Auto Scaling replaces the instance",
                HookResult::Continue => "the instance goes on into service",
            };
            let result = result.as_str();
            match r {
                Ok(Completed::Completed) => {
                    tracing::error!(hook = %job.hook, "launch hook completed with {result}: {then}");
                    format!("{result} ({})", job.hook)
                }
                Ok(Completed::NothingWaiting) => format!(
                    "{result} not taken: Auto Scaling had no launch waiting on {}",
                    job.hook
                ),
                Err(e) => {
                    tracing::error!("the launch hook could not be completed: {e}");
                    format!("not completed: {e}")
                }
            }
        }
    }
}
