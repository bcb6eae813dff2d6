//! The tagging policy around the EC2 calls: a foreground part that never outlasts the sync
//! budget (client construction included), and a background part (the `tag-continue` process)
//! that keeps going until its deadline. Each builds its own client, as the two run in separate
//! processes in production. The fleet benchmark drives these same two functions.

use std::time::Duration;

use tokio::time::Instant;

use crate::ec2::{Calls, Ec2, TagError, TagOutcome};
use crate::facts::{InstanceTags, TagState};
use crate::retry::RetryPolicy;

/// One instance's tagging job. The background continuation receives it as JSON on its
/// standard input ([`Continuation`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Job {
    pub region: String,
    /// EC2 endpoint override; `None`: `AWS_ENDPOINT_URL_EC2` or the SDK default.
    pub endpoint: Option<String>,
    pub instance_id: String,
    pub key: String,
    pub value: String,
    /// Tags already known (IMDS tags or an earlier DescribeTags); unknown: read them first.
    pub known: InstanceTags,
    pub policy: RetryPolicy,
}

impl Job {
    /// The job the background part continues with. After a call cut off in flight a
    /// CreateTags may have landed, so what was known is dropped and the tags are read first.
    pub fn continued(&self, abandoned: bool) -> Job {
        Job {
            known: if abandoned {
                InstanceTags::Unknown
            } else {
                self.known.clone()
            },
            ..self.clone()
        }
    }

    /// Build a client and make the tag hold the value, until `deadline`.
    async fn run(&self, deadline: Instant) -> (Result<TagOutcome, TagError>, Calls) {
        let mut ec2 = Ec2::new(&self.region, self.endpoint.as_deref()).await;
        let r = ensure_tag(
            &mut ec2,
            &self.instance_id,
            &self.key,
            &self.value,
            &self.known,
            self.policy,
            deadline,
        )
        .await;
        (r, ec2.calls)
    }
}

/// Make the instance's `key` tag equal `value`: read the current tags unless the caller knows
/// them, and call CreateTags only when they differ. The tagging policy; `ec2` only calls.
pub async fn ensure_tag(
    ec2: &mut Ec2,
    instance_id: &str,
    key: &str,
    value: &str,
    known: &InstanceTags,
    policy: RetryPolicy,
    deadline: Instant,
) -> Result<TagOutcome, TagError> {
    let current = match known.get(key) {
        TagState::Unknown => {
            let tags = ec2.describe_tags(instance_id, policy, deadline).await?;
            InstanceTags::Known(tags).get(key)
        }
        known => known,
    };
    if current == TagState::Is(value.to_string()) {
        return Ok(TagOutcome::AlreadySet);
    }
    ec2.create_tag(instance_id, key, value, policy, deadline)
        .await?;
    Ok(TagOutcome::Created)
}

/// What the background continuation is given: the job, when to start and how long to try.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Continuation {
    pub job: Job,
    pub initial_delay_ms: u64,
    pub deadline_ms: u64,
}

/// What the foreground part came to.
#[derive(Debug)]
pub enum Foreground {
    Done(TagOutcome),
    Failed(TagError),
    /// Not done within the budget; the background continues after `initial_delay`.
    Pending {
        initial_delay: Duration,
        /// A call was cut off in flight: a CreateTags may have landed, so the background
        /// reads the tags before writing rather than trusting what was known.
        abandoned: bool,
    },
}

/// The random first-call delay: uniform in `[0, spread]`, so a fleet launched at once reaches
/// the account's CreateTags bucket at its refill rate (`tagging.spreadSec`).
pub fn draw_spread(spread: Duration) -> Duration {
    if spread.is_zero() {
        return Duration::ZERO;
    }
    let ms = u64::try_from(spread.as_millis()).unwrap_or(u64::MAX);
    Duration::from_millis(rand::random_range(0..=ms))
}

/// Try within `budget`, which is hard: an attempt still in flight at its end is abandoned. A
/// job with a spread `delay` makes no call here at all; the background part waits the delay,
/// so the hand-off never waits for the spread. The calls are those of finished attempts.
pub async fn foreground(job: &Job, delay: Duration, budget: Duration) -> (Foreground, Calls) {
    if !delay.is_zero() {
        return (
            Foreground::Pending {
                initial_delay: delay,
                abandoned: false,
            },
            Calls::default(),
        );
    }
    let deadline = far(budget);
    match tokio::time::timeout_at(deadline, job.run(deadline)).await {
        Ok((Ok(o), calls)) => (Foreground::Done(o), calls),
        Ok((Err(TagError::Deadline { .. }), calls)) => (
            Foreground::Pending {
                initial_delay: Duration::ZERO,
                abandoned: false,
            },
            calls,
        ),
        Ok((Err(e), calls)) => (Foreground::Failed(e), calls),
        Err(_) => (
            Foreground::Pending {
                initial_delay: Duration::ZERO,
                abandoned: true,
            },
            Calls::default(),
        ),
    }
}

/// Keep trying for `deadline` (counted from now), after `initial_delay`.
pub async fn background(
    job: &Job,
    initial_delay: Duration,
    deadline: Duration,
) -> (Result<TagOutcome, TagError>, Calls) {
    let end = far(deadline);
    tokio::time::sleep(initial_delay).await;
    job.run(end).await
}

/// `now + d`, saturating far in the future instead of overflowing.
fn far(d: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(d)
        .unwrap_or_else(|| now + Duration::from_secs(86_400 * 365))
}
