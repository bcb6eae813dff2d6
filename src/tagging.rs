//! The tagging policy around the EC2 calls: a foreground part that never outlasts the sync
//! budget (client construction included), and a background part (the `tag-continue` process)
//! that keeps going until its deadline. Each builds its own client, as the two run in separate
//! processes in production. The fleet benchmark drives these same two functions.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

use crate::ec2::{Calls, Ec2, RetryPolicy, TagError, TagOutcome};

/// One instance's tagging job.
#[derive(Debug, Clone)]
pub struct Job {
    pub region: String,
    /// EC2 endpoint override; `None`: `AWS_ENDPOINT_URL_EC2` or the SDK default.
    pub endpoint: Option<String>,
    pub instance_id: String,
    pub key: String,
    pub value: String,
    /// Tags already known (IMDS tags or an earlier DescribeTags); `None`: read them first.
    pub known: Option<BTreeMap<String, String>>,
    pub policy: RetryPolicy,
}

impl Job {
    /// The job the background part continues with. After a call cut off in flight a
    /// CreateTags may have landed, so what was known is dropped and the tags are read first.
    pub fn continued(&self, abandoned: bool) -> Job {
        Job {
            known: self.known.clone().filter(|_| !abandoned),
            ..self.clone()
        }
    }

    /// Build a client and make the tag hold the value, until `deadline`.
    async fn run(&self, deadline: Instant) -> (Result<TagOutcome, TagError>, Calls) {
        let mut ec2 = Ec2::new(&self.region, self.endpoint.as_deref()).await;
        let r = ec2
            .ensure_tag(
                &self.instance_id,
                &self.key,
                &self.value,
                self.known.as_ref(),
                self.policy,
                deadline,
            )
            .await;
        (r, ec2.calls)
    }
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
    Duration::from_millis(rand::random_range(0..=spread.as_millis() as u64))
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
    let deadline = Instant::now() + budget;
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
    let end = Instant::now() + deadline;
    tokio::time::sleep(initial_delay).await;
    job.run(end).await
}
