//! One retry loop for every remote call (IMDS, EC2): capped exponential backoff with full
//! jitter, under a deadline that no wait may cross.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// Capped, jittered exponential backoff between attempts.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetryPolicy {
    #[serde(with = "millis")]
    pub base: Duration,
    #[serde(with = "millis")]
    pub cap: Duration,
}

impl Default for RetryPolicy {
    /// The AWS API policy: 250 ms doubling up to 20 s.
    fn default() -> Self {
        RetryPolicy {
            base: Duration::from_millis(250),
            cap: Duration::from_secs(20),
        }
    }
}

mod millis {
    use std::time::Duration;
    pub fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
    pub(crate) fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<Duration, D::Error> {
        <u64 as serde::Deserialize>::deserialize(d).map(Duration::from_millis)
    }
}

/// Capped exponential backoff with full jitter: attempt k waits a uniform random time in
/// `[0, min(cap, base·2^k)]`, which spreads a crowd of clients best.
pub(crate) struct Backoff {
    policy: RetryPolicy,
    n: u32,
}

impl Backoff {
    pub fn new(policy: RetryPolicy) -> Self {
        Backoff { policy, n: 0 }
    }
    pub(crate) fn next_delay(&mut self) -> Duration {
        let exp = self.policy.base.saturating_mul(1u32 << self.n.min(16));
        self.n = self.n.saturating_add(1);
        let ceiling = u64::try_from(exp.min(self.policy.cap).as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        Duration::from_millis(rand::random_range(1..=ceiling))
    }
}

/// What one failed attempt means.
#[derive(Debug)]
pub enum Verdict<E> {
    /// Worth another try after a backoff wait; the text says why it failed.
    Retry(String),
    /// Worth another try at once (e.g. a refreshed credential).
    RetryNow(String),
    /// Never retried.
    Fail(E),
}

/// Why the loop gave up.
#[derive(Debug)]
pub enum Failure<E> {
    Fatal(E),
    /// The next wait would cross the deadline.
    Deadline {
        attempts: u32,
        last: String,
    },
}

/// Run `attempt` (given the attempt number, from 1) until it succeeds, fails for good, or the
/// next wait would cross `deadline` (`None`: the caller bounds the whole loop itself).
pub async fn run<T, E, F, Fut>(
    policy: RetryPolicy,
    deadline: Option<Instant>,
    mut attempt: F,
) -> Result<T, Failure<E>>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<T, Verdict<E>>>,
{
    let mut backoff = Backoff::new(policy);
    let mut attempts: u32 = 0;
    loop {
        attempts = attempts.saturating_add(1);
        let (wait, why) = match attempt(attempts).await {
            Ok(v) => return Ok(v),
            Err(Verdict::Fail(e)) => return Err(Failure::Fatal(e)),
            Err(Verdict::RetryNow(why)) => (Duration::ZERO, why),
            Err(Verdict::Retry(why)) => (backoff.next_delay(), why),
        };
        if let Some(d) = deadline {
            if Instant::now().checked_add(wait).map_or(true, |t| t >= d) {
                return Err(Failure::Deadline {
                    attempts,
                    last: why,
                });
            }
        }
        tracing::debug!(%why, ?wait, attempts, "attempt failed; retrying");
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fast() -> RetryPolicy {
        RetryPolicy {
            base: Duration::from_millis(1),
            cap: Duration::from_millis(5),
        }
    }

    #[tokio::test]
    async fn retries_until_success_then_counts_attempts() {
        let r: Result<u32, Failure<()>> = run(fast(), None, |n| async move {
            if n < 4 {
                Err(Verdict::Retry(format!("try {n}")))
            } else {
                Ok(n)
            }
        })
        .await;
        assert_eq!(r.unwrap(), 4);
    }

    #[tokio::test]
    async fn fatal_is_not_retried_and_deadline_stops() {
        let mut calls = 0;
        let r: Result<(), Failure<&str>> = run(fast(), None, |_| {
            calls += 1;
            async { Err(Verdict::Fail("no")) }
        })
        .await;
        assert!(matches!(r, Err(Failure::Fatal("no"))));
        assert_eq!(calls, 1);
        let r: Result<(), Failure<()>> = run(fast(), Some(Instant::now()), |_| async {
            Err(Verdict::Retry("busy".into()))
        })
        .await;
        assert!(matches!(r, Err(Failure::Deadline { attempts: 1, .. })));
    }

    #[test]
    fn backoff_stays_under_the_cap() {
        let mut b = Backoff::new(fast());
        for _ in 0..100 {
            assert!(b.next_delay() <= Duration::from_millis(5));
        }
    }
}
