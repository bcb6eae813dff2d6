//! The tagging policy around the EC2 calls: a foreground part that never outlasts the sync
//! budget, and a background part (the `tag-continue` process) that keeps going until its
//! deadline. The fleet benchmark drives these same two functions.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

use crate::ec2::{Ec2, RetryPolicy, TagError, TagOutcome};

/// One instance's tagging job.
#[derive(Debug, Clone)]
pub struct Job {
    pub instance_id: String,
    pub key: String,
    pub value: String,
    /// Tags already known (IMDS tags or an earlier DescribeTags); `None`: read them first.
    pub known: Option<BTreeMap<String, String>>,
    pub policy: RetryPolicy,
    /// Each agent waits a random delay in `[0, spread]` before its first CreateTags, so a
    /// fleet launched at once reaches the account's CreateTags bucket at its refill rate.
    pub spread: Duration,
}

/// What the foreground part came to.
#[derive(Debug)]
pub enum Foreground {
    Done(TagOutcome),
    Failed(TagError),
    /// Not done within the budget; the background continues after `initial_delay`.
    Pending {
        initial_delay: Duration,
    },
}

/// The random first-call delay for a job.
pub fn draw_spread(spread: Duration) -> Duration {
    if spread.is_zero() {
        return Duration::ZERO;
    }
    Duration::from_millis(rand::random_range(0..=spread.as_millis() as u64))
}

/// Try within `budget`. A job with a spread delay makes no call here at all: the background
/// part waits the delay, so the hand-off never waits for the spread.
pub async fn foreground(ec2: &mut Ec2, job: &Job, delay: Duration, budget: Duration) -> Foreground {
    let start = Instant::now();
    let deadline = start + budget;
    if !delay.is_zero() {
        return Foreground::Pending {
            initial_delay: delay,
        };
    }
    // The budget is hard: an attempt still in flight at the deadline is abandoned.
    let attempt = ec2.ensure_tag(
        &job.instance_id,
        &job.key,
        &job.value,
        job.known.as_ref(),
        job.policy,
        deadline,
    );
    match tokio::time::timeout_at(deadline, attempt).await {
        Ok(Ok(o)) => Foreground::Done(o),
        Ok(Err(TagError::Deadline { .. })) | Err(_) => Foreground::Pending {
            initial_delay: Duration::ZERO,
        },
        Ok(Err(e)) => Foreground::Failed(e),
    }
}

/// Keep trying until `deadline`, after `initial_delay`.
pub async fn background(
    ec2: &mut Ec2,
    job: &Job,
    initial_delay: Duration,
    deadline: Duration,
) -> Result<TagOutcome, TagError> {
    let end = Instant::now() + deadline;
    tokio::time::sleep(initial_delay).await;
    ec2.ensure_tag(
        &job.instance_id,
        &job.key,
        &job.value,
        job.known.as_ref(),
        job.policy,
        end,
    )
    .await
}
