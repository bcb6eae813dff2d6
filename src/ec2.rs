//! The EC2 API: the instance's Name tag (DescribeTags, CreateTags) with the agent's own retry
//! policy: throttling and eventual-consistency errors retry with capped, jittered backoff under
//! a deadline; permission errors never retry and name the IAM statement needed.

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_ec2::error::ProvideErrorMetadata;
use aws_sdk_ec2::types::{Filter, Tag};
use tokio::time::Instant;

use crate::imds::Backoff;

#[derive(Debug, thiserror::Error)]
pub enum TagError {
    #[error("{op} on {instance_id} was denied ({code}): the instance role needs {{\"Effect\":\"Allow\",\"Action\":\"{action}\",\"Resource\":\"{resource}\"}} (see docs/iam-policy.json)")]
    Denied {
        op: &'static str,
        code: String,
        instance_id: String,
        action: &'static str,
        resource: String,
    },
    #[error("{op} on {instance_id} failed and will not be retried: {message}")]
    Fatal {
        op: &'static str,
        instance_id: String,
        message: String,
    },
    #[error(
        "{op} on {instance_id} still failing at its deadline ({attempts} attempts; last: {last})"
    )]
    Deadline {
        op: &'static str,
        instance_id: String,
        attempts: u32,
        last: String,
    },
}

/// Capped, jittered exponential backoff between attempts.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    pub base: Duration,
    pub cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            base: Duration::from_millis(250),
            cap: Duration::from_secs(20),
        }
    }
}

/// What one failed call means for the next one.
#[derive(Debug, PartialEq, Eq)]
pub enum Class {
    Retry,
    Denied,
    Fatal,
}

/// Classify an EC2 error code (or `None` for transport errors and timeouts).
pub fn classify(code: Option<&str>, http_status: Option<u16>) -> Class {
    match code {
        Some("RequestLimitExceeded" | "Throttling" | "ThrottlingException")
        | Some("InvalidInstanceID.NotFound")
        | Some("InternalError" | "InternalFailure" | "ServiceUnavailable" | "Unavailable") => {
            Class::Retry
        }
        Some(c)
            if c == "UnauthorizedOperation"
                || c.starts_with("AccessDenied")
                || c == "AuthFailure" =>
        {
            Class::Denied
        }
        Some(_) if http_status.is_some_and(|s| s >= 500) => Class::Retry,
        Some(_) => Class::Fatal,
        None => Class::Retry,
    }
}

/// Counters the tests and the benchmark read.
#[derive(Debug, Default, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Calls {
    pub describe_tags: u32,
    pub create_tags: u32,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase", tag = "outcome")]
pub enum TagOutcome {
    /// The tag already had the value: no CreateTags call.
    AlreadySet,
    Created,
}

pub struct Ec2 {
    client: aws_sdk_ec2::Client,
    pub calls: Calls,
}

/// Load the TLS trust store on a blocking thread now, while the caller reads instance
/// metadata: the SDK caches the platform's root certificates process-wide when its first client
/// is built (reading every file in /etc/ssl/certs), which otherwise delays the first EC2 call.
pub fn warm_up() -> tokio::task::JoinHandle<()> {
    tokio::task::spawn_blocking(|| {
        let conf = aws_sdk_ec2::Config::builder()
            .behavior_version(aws_sdk_ec2::config::BehaviorVersion::latest())
            .region(aws_sdk_ec2::config::Region::new("us-east-1"))
            .build();
        let _ = aws_sdk_ec2::Client::from_conf(conf);
    })
}

impl Ec2 {
    /// A client for `region` with the SDK's default credential chain (the instance role on a
    /// node). The endpoint is `endpoint`, else the SDK's `AWS_ENDPOINT_URL_EC2` / default.
    /// The SDK's own retries are off: the agent's policy decides.
    pub async fn new(region: &str, endpoint: Option<&str>) -> Self {
        let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new(region.to_string()))
            .retry_config(aws_config::retry::RetryConfig::disabled())
            .timeout_config(
                aws_config::timeout::TimeoutConfig::builder()
                    .connect_timeout(Duration::from_secs(2))
                    .operation_attempt_timeout(Duration::from_secs(5))
                    .build(),
            );
        if let Some(ep) = endpoint {
            loader = loader.endpoint_url(ep);
        }
        let conf = loader.load().await;
        Ec2 {
            client: aws_sdk_ec2::Client::new(&conf),
            calls: Calls::default(),
        }
    }

    /// All tags on the instance (DescribeTags filtered on the resource id).
    pub async fn describe_tags(
        &mut self,
        instance_id: &str,
        policy: RetryPolicy,
        deadline: Instant,
    ) -> Result<BTreeMap<String, String>, TagError> {
        let mut backoff = Backoff::new(policy.base, policy.cap);
        let mut attempts = 0;
        loop {
            attempts += 1;
            self.calls.describe_tags += 1;
            let r = self
                .client
                .describe_tags()
                .filters(
                    Filter::builder()
                        .name("resource-id")
                        .values(instance_id)
                        .build(),
                )
                .send()
                .await;
            let err = match r {
                Ok(out) => {
                    return Ok(out
                        .tags()
                        .iter()
                        .filter_map(|t| {
                            Some((t.key()?.to_string(), t.value().unwrap_or("").to_string()))
                        })
                        .collect())
                }
                Err(e) => e,
            };
            let code = err.code().map(String::from);
            let status = err.raw_response().map(|r| r.status().as_u16());
            let message = describe_error(&err);
            match classify(code.as_deref(), status) {
                Class::Denied => {
                    return Err(TagError::Denied {
                        op: "DescribeTags",
                        code: code.unwrap_or_default(),
                        instance_id: instance_id.into(),
                        action: "ec2:DescribeTags",
                        resource: "*".into(),
                    })
                }
                Class::Fatal => {
                    return Err(TagError::Fatal {
                        op: "DescribeTags",
                        instance_id: instance_id.into(),
                        message,
                    })
                }
                Class::Retry => {
                    let wait = backoff.next_delay();
                    if Instant::now() + wait >= deadline {
                        return Err(TagError::Deadline {
                            op: "DescribeTags",
                            instance_id: instance_id.into(),
                            attempts,
                            last: message,
                        });
                    }
                    tracing::debug!(%message, ?wait, "DescribeTags failed; retrying");
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    /// CreateTags for one key on the instance, retrying what may succeed later.
    pub async fn create_tag(
        &mut self,
        instance_id: &str,
        key: &str,
        value: &str,
        policy: RetryPolicy,
        deadline: Instant,
    ) -> Result<u32, TagError> {
        let mut backoff = Backoff::new(policy.base, policy.cap);
        let mut attempts = 0;
        loop {
            attempts += 1;
            self.calls.create_tags += 1;
            let r = self
                .client
                .create_tags()
                .resources(instance_id)
                .tags(Tag::builder().key(key).value(value).build())
                .send()
                .await;
            let err = match r {
                Ok(_) => return Ok(attempts),
                Err(e) => e,
            };
            let code = err.code().map(String::from);
            let status = err.raw_response().map(|r| r.status().as_u16());
            let message = describe_error(&err);
            match classify(code.as_deref(), status) {
                Class::Denied => {
                    return Err(TagError::Denied {
                        op: "CreateTags",
                        code: code.unwrap_or_default(),
                        instance_id: instance_id.into(),
                        action: "ec2:CreateTags",
                        resource: format!("arn:aws:ec2:*:*:instance/{instance_id}"),
                    })
                }
                Class::Fatal => {
                    return Err(TagError::Fatal {
                        op: "CreateTags",
                        instance_id: instance_id.into(),
                        message,
                    })
                }
                Class::Retry => {
                    let wait = backoff.next_delay();
                    if Instant::now() + wait >= deadline {
                        return Err(TagError::Deadline {
                            op: "CreateTags",
                            instance_id: instance_id.into(),
                            attempts,
                            last: message,
                        });
                    }
                    tracing::debug!(%message, ?wait, "CreateTags failed; retrying");
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    /// Make the instance's `key` tag equal `value`: read the current tags unless the caller
    /// knows them, and call CreateTags only when they differ.
    pub async fn ensure_tag(
        &mut self,
        instance_id: &str,
        key: &str,
        value: &str,
        known: Option<&BTreeMap<String, String>>,
        policy: RetryPolicy,
        deadline: Instant,
    ) -> Result<TagOutcome, TagError> {
        let current = match known {
            Some(t) => t.get(key).cloned(),
            None => self
                .describe_tags(instance_id, policy, deadline)
                .await?
                .get(key)
                .cloned(),
        };
        if current.as_deref() == Some(value) {
            return Ok(TagOutcome::AlreadySet);
        }
        self.create_tag(instance_id, key, value, policy, deadline)
            .await?;
        Ok(TagOutcome::Created)
    }
}

fn describe_error<E, R>(e: &aws_sdk_ec2::error::SdkError<E, R>) -> String
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    match (e.code(), e.message()) {
        (Some(c), Some(m)) => format!("{c}: {m}"),
        (Some(c), None) => c.to_string(),
        _ => {
            let mut s = e.to_string();
            let mut src = std::error::Error::source(e);
            while let Some(x) = src {
                s = format!("{s}: {x}");
                src = x.source();
            }
            s
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        assert_eq!(
            classify(Some("RequestLimitExceeded"), Some(503)),
            Class::Retry
        );
        assert_eq!(
            classify(Some("InvalidInstanceID.NotFound"), Some(400)),
            Class::Retry
        );
        assert_eq!(
            classify(Some("UnauthorizedOperation"), Some(403)),
            Class::Denied
        );
        assert_eq!(classify(Some("AccessDenied"), Some(403)), Class::Denied);
        assert_eq!(
            classify(Some("InvalidParameterValue"), Some(400)),
            Class::Fatal
        );
        assert_eq!(classify(Some("Weird"), Some(502)), Class::Retry);
        assert_eq!(classify(None, None), Class::Retry);
    }
}
