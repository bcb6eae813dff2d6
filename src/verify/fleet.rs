//! What the other instances tell about a failed join. With the Node authorizer (selectors on,
//! Kubernetes 1.34 and later), a node may read its own Node alone, so the cluster's other Nodes
//! cannot be counted with the node's identity. The agent marks an instance whose join it proved
//! with the tag `eks-nodeinit/joined` = the cluster's name, one whose Node initialised with
//! `eks-nodeinit/initialised`, and one that retired with `eks-nodeinit/retired`. A failure that
//! may be the node's own is judged against its *like* peers only: instances of its group (outside
//! a group, of the account) launched within [`RECENT`] of it by EC2's clock, in its subnet, from
//! its image and launch template version. The retired ones of the scope, terminated included,
//! are its retirement budget.

use std::time::Duration;

use tokio::time::Instant;

use super::Context;
use crate::aws::ec2::{Ec2, Instance};
use crate::base::retry::RetryPolicy;

/// The tag on an instance whose join the agent proved; its value is the cluster's name.
pub const JOINED_TAG: &str = "eks-nodeinit/joined";
/// The tag on an instance whose Node's watched conditions were all True by the initialisation
/// deadline; its value is the cluster's name.
pub const INITIALISED_TAG: &str = "eks-nodeinit/initialised";
/// The tag the cause is written to before an instance retires (or its launch is abandoned);
/// the scope's retirement budget counts the instances that carry it.
pub const RETIRED_TAG: &str = "eks-nodeinit/retired";
/// The tags Auto Scaling and EC2 Fleet put on an instance launched from a launch template.
const TEMPLATE_TAGS: [&str; 2] = ["aws:ec2launchtemplate:id", "aws:ec2launchtemplate:version"];

/// How far apart two launches may be, by EC2's clock, for one to tell about the other.
pub const RECENT: Duration = Duration::from_secs(3600);
/// How many like peers must have joined (or initialised) for a failure to be the node's own.
pub const PEERS: usize = 2;
/// How many instances of a scope may retire within [`WINDOW`]; past it, none retires.
pub const BUDGET: usize = 2;
/// The budget's window, by EC2's clock (a terminated instance stays listed about an hour).
pub const WINDOW: Duration = Duration::from_secs(3600);

/// How long the calls may take together: the verdict waits for them.
const CALL: Duration = Duration::from_secs(5);

fn policy() -> RetryPolicy {
    RetryPolicy {
        base: Duration::from_millis(200),
        ..RetryPolicy::default()
    }
}

/// What the scope's marked instances tell: how many like peers joined and initialised, how
/// many instances of the scope retired within the window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fleet {
    pub joined: usize,
    /// Of the like peers that joined, those of this instance's type: the ones whose devices a
    /// check of the type's expected hardware judged too (a group of mixed types shares a launch
    /// template).
    pub joined_same_type: usize,
    pub initialised: usize,
    pub retired: usize,
}

/// Whether `p` tells about `own`: both launched within [`RECENT`] of each other, in one subnet,
/// from one image and one launch template version (or neither from a template). Anything
/// unknown on either side: not alike.
pub fn alike(own: &Instance, p: &Instance) -> bool {
    let near = match (own.launched, p.launched) {
        (Some(a), Some(b)) => a.abs_diff(b) <= RECENT.as_secs(),
        _ => false,
    };
    let same = |a: &Option<String>, b: &Option<String>| a.is_some() && a == b;
    let template = TEMPLATE_TAGS
        .iter()
        .all(|k| own.tags.get(*k) == p.tags.get(*k));
    near && same(&own.subnet, &p.subnet) && same(&own.image, &p.image) && template
}

/// The tally of `others` for `own` in `cluster`.
pub fn tally(own: &Instance, others: &[Instance], cluster: &str) -> Fleet {
    let marked = |p: &Instance, key: &str| p.tags.get(key).is_some_and(|v| v == cluster);
    let like_running = |p: &&Instance| p.state == "running" && alike(own, p);
    let recent = |p: &&Instance| match (own.launched, p.launched) {
        (Some(a), Some(b)) => a.abs_diff(b) <= WINDOW.as_secs(),
        // A retired instance whose launch is unknown counts: in doubt, the budget is spent.
        _ => true,
    };
    let same_type =
        |p: &&Instance| own.instance_type.is_some() && p.instance_type == own.instance_type;
    let joined = || {
        let like = others.iter().filter(like_running);
        like.filter(|p| marked(p, JOINED_TAG))
    };
    Fleet {
        joined: joined().count(),
        joined_same_type: joined().filter(same_type).count(),
        initialised: others
            .iter()
            .filter(like_running)
            .filter(|p| marked(p, INITIALISED_TAG))
            .count(),
        retired: others
            .iter()
            .filter(|p| p.tags.contains_key(RETIRED_TAG))
            .filter(recent)
            .count(),
    }
}

/// The tally for `instance_id` among the marked instances of `group` (else of the account);
/// `Err` says why it cannot be told.
pub async fn read(ctx: &Context, instance_id: &str, group: Option<&str>) -> Result<Fleet, String> {
    let deadline = Instant::now() + CALL;
    let mut ec2 = Ec2::new(&ctx.region, None, ctx.transport().as_ref()).await;
    let keys = [JOINED_TAG, INITIALISED_TAG, RETIRED_TAG];
    let r = ec2.marked(&keys, group, instance_id, (policy(), deadline));
    match tokio::time::timeout_at(deadline + Duration::from_secs(1), r).await {
        // A second page unread could hold retired instances: the budget is not counted short.
        Ok(Ok(m)) if !m.whole => Err("DescribeInstances answered more than one page of marked instances, so the retirement budget cannot be counted whole".into()),
        Ok(Ok(m)) => match m.own {
            Some(own) => Ok(tally(&own, &m.others, &ctx.cluster)),
            None => Err(format!(
                "DescribeInstances does not list this instance ({instance_id})"
            )),
        },
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("DescribeInstances did not answer within {CALL:?}")),
    }
}

/// Mark this instance joined: what failed, if it did (the mark is what lets other nodes'
/// failures be judged their own: without it the guard never opens).
pub async fn mark_joined(ctx: &Context, instance_id: &str) -> Result<(), String> {
    mark(ctx, instance_id, JOINED_TAG, &ctx.cluster).await
}

/// Mark this instance with `key` = `value`: what failed, if it did (logged too).
pub async fn mark(ctx: &Context, instance_id: &str, key: &str, value: &str) -> Result<(), String> {
    let deadline = Instant::now() + CALL;
    let mut ec2 = Ec2::new(&ctx.region, None, ctx.transport().as_ref()).await;
    let r = ec2.create_tag(instance_id, key, value, policy(), deadline);
    let failed = match tokio::time::timeout_at(deadline + Duration::from_secs(1), r).await {
        Ok(Ok(())) => {
            tracing::info!(tag = key, "the instance is marked");
            return Ok(());
        }
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("CreateTags did not answer within {CALL:?}"),
    };
    tracing::warn!("the instance could not be marked ({key}): {failed}");
    Err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(id: &str, launched: i64) -> Instance {
        Instance {
            id: id.into(),
            launched: Some(launched),
            state: "running".into(),
            subnet: Some("subnet-a".into()),
            zone: Some("us-east-1a".into()),
            image: Some("ami-1".into()),
            instance_type: Some("p5.48xlarge".into()),
            tags: [
                ("aws:ec2launchtemplate:id".to_string(), "lt-1".to_string()),
                ("aws:ec2launchtemplate:version".into(), "3".into()),
            ]
            .into(),
        }
    }

    fn tagged(mut i: Instance, key: &str, value: &str) -> Instance {
        i.tags.insert(key.into(), value.into());
        i
    }

    #[test]
    fn only_like_recent_running_peers_of_the_cluster_count() {
        let own = at("i-own", 10_000);
        let joined = |i: Instance| tagged(i, JOINED_TAG, "prod");
        let mut other_subnet = at("i-3", 10_000);
        other_subnet.subnet = Some("subnet-b".into());
        let mut other_image = at("i-4", 10_000);
        other_image.image = Some("ami-2".into());
        let mut other_version = at("i-5", 10_000);
        other_version
            .tags
            .insert("aws:ec2launchtemplate:version".into(), "4".into());
        let mut stopped = at("i-6", 10_000);
        stopped.state = "stopped".into();
        let mut unknown = at("i-9", 10_000);
        unknown.launched = None;
        let others = [
            joined(at("i-1", 9_000)),
            joined(at("i-2", 12_000)),
            joined(other_subnet),
            joined(other_image),
            joined(other_version),
            joined(stopped),
            joined(at("i-7", 10_000 - 3_601)),
            tagged(at("i-8", 10_000), JOINED_TAG, "staging"),
            joined(unknown),
        ];
        let f = tally(&own, &others, "prod");
        assert_eq!((f.joined, f.joined_same_type), (2, 2));
        // A group of mixed types: a peer of another type joined, but it tells nothing of this
        // type's devices; neither does one of an unknown type.
        let mut other_type = joined(at("i-10", 10_000));
        other_type.instance_type = Some("m6i.large".into());
        let mut no_type = joined(at("i-11", 10_000));
        no_type.instance_type = None;
        let f = tally(&own, &[other_type, no_type], "prod");
        assert_eq!((f.joined, f.joined_same_type), (2, 0));
        // Retired ones count by the window alone, terminated ones too, whatever they were like.
        let mut gone = tagged(at("r-1", 9_500), RETIRED_TAG, "deadline: x");
        gone.state = "terminated".into();
        gone.image = Some("ami-0".into());
        let old = tagged(at("r-2", 10_000 - 3_601), RETIRED_TAG, "deadline: x");
        let f = tally(&own, &[gone, old], "prod");
        assert_eq!((f.retired, f.joined), (1, 0));
        // Nothing known of this instance's own launch: nothing is alike, the budget counts all.
        let mut blind = own.clone();
        blind.launched = None;
        let f = tally(&blind, &others, "prod");
        assert_eq!(f.joined, 0);
    }
}
