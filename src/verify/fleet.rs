//! What the other instances tell about a failed join. With the Node authorizer (selectors on,
//! Kubernetes 1.34 and later), a node may read its own Node alone, so the cluster's other Nodes
//! cannot be counted with the node's identity. The agent marks an instance whose join it proved
//! with the tag `eks-nodeinit/joined` = the cluster's name; a node that fails while running
//! instances of its group (or, outside a group, of its cluster) carry that tag fails for a
//! cause of its own, which a replacement may not meet.

use std::time::Duration;

use tokio::time::Instant;

use super::Context;
use crate::aws::ec2::Ec2;
use crate::base::retry::RetryPolicy;

/// The tag on an instance whose join the agent proved; its value is the cluster's name.
pub const JOINED_TAG: &str = "eks-nodeinit/joined";

/// How long either call may take: the verdict waits for them.
const CALL: Duration = Duration::from_secs(5);

fn policy() -> RetryPolicy {
    RetryPolicy {
        base: Duration::from_millis(200),
        ..RetryPolicy::default()
    }
}

/// How many other running instances of `group` (else of the cluster) the agent proved joined;
/// `Err` says why it cannot be told.
pub async fn others_joined(
    ctx: &Context,
    instance_id: &str,
    group: Option<&str>,
) -> Result<usize, String> {
    let deadline = Instant::now() + CALL;
    let mut ec2 = Ec2::new(&ctx.region, None, ctx.transport().as_ref()).await;
    let tag = (JOINED_TAG, ctx.cluster.as_str());
    let r = ec2.count_tagged(tag, group, instance_id, (policy(), deadline));
    match tokio::time::timeout_at(deadline + Duration::from_secs(1), r).await {
        Ok(Ok(n)) => Ok(n),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("DescribeInstances did not answer within {CALL:?}")),
    }
}

/// Mark this instance joined (a failure is logged: the mark only helps other nodes' verdicts).
pub async fn mark_joined(ctx: &Context, instance_id: &str) {
    let deadline = Instant::now() + CALL;
    let mut ec2 = Ec2::new(&ctx.region, None, ctx.transport().as_ref()).await;
    let r = ec2.create_tag(instance_id, JOINED_TAG, &ctx.cluster, policy(), deadline);
    match tokio::time::timeout_at(deadline + Duration::from_secs(1), r).await {
        Ok(Ok(())) => tracing::info!(tag = JOINED_TAG, "the instance is marked joined"),
        Ok(Err(e)) => tracing::warn!(
            "the instance could not be marked joined: {e}; other nodes' verdicts cannot count it"
        ),
        Err(_) => tracing::warn!(
            "the instance could not be marked joined: CreateTags did not answer within {CALL:?}"
        ),
    }
}
