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

/// The tag on an instance whose Node's watched conditions were all True by the initialisation
/// deadline; its value is the cluster's name.
pub const INITIALISED_TAG: &str = "eks-nodeinit/initialised";

/// How many other running instances of `group` (else of the cluster) the agent proved joined;
/// `Err` says why it cannot be told.
pub async fn others_joined(
    ctx: &Context,
    instance_id: &str,
    group: Option<&str>,
) -> Result<usize, String> {
    others_tagged(ctx, instance_id, group, JOINED_TAG).await
}

/// How many other running instances of `group` (else of the cluster) carry `key` = the
/// cluster's name; `Err` says why it cannot be told.
pub async fn others_tagged(
    ctx: &Context,
    instance_id: &str,
    group: Option<&str>,
    key: &str,
) -> Result<usize, String> {
    let deadline = Instant::now() + CALL;
    let mut ec2 = Ec2::new(&ctx.region, None, ctx.transport().as_ref()).await;
    let tag = (key, ctx.cluster.as_str());
    let r = ec2.count_tagged(tag, group, instance_id, (policy(), deadline));
    match tokio::time::timeout_at(deadline + Duration::from_secs(1), r).await {
        Ok(Ok(n)) => Ok(n),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("DescribeInstances did not answer within {CALL:?}")),
    }
}

/// Mark this instance joined (a failure is logged: the mark only helps other nodes' verdicts).
pub async fn mark_joined(ctx: &Context, instance_id: &str) {
    mark(ctx, instance_id, JOINED_TAG).await
}

/// Mark this instance with `key` = the cluster's name (a failure is logged).
pub async fn mark(ctx: &Context, instance_id: &str, key: &str) {
    let deadline = Instant::now() + CALL;
    let mut ec2 = Ec2::new(&ctx.region, None, ctx.transport().as_ref()).await;
    let r = ec2.create_tag(instance_id, key, &ctx.cluster, policy(), deadline);
    match tokio::time::timeout_at(deadline + Duration::from_secs(1), r).await {
        Ok(Ok(())) => tracing::info!(tag = key, "the instance is marked"),
        Ok(Err(e)) => tracing::warn!(
            "the instance could not be marked ({key}): {e}; other nodes' verdicts cannot count it"
        ),
        Err(_) => tracing::warn!(
            "the instance could not be marked ({key}): CreateTags did not answer within {CALL:?}"
        ),
    }
}
