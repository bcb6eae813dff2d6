//! The EC2 API: the instance's Name tag (DescribeTags, CreateTags) with the agent's own retry
//! policy: throttling and eventual-consistency errors retry with capped, jittered backoff under
//! a deadline; permission errors never retry and name the IAM statement needed.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{Filter, Tag};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::aws;
use crate::base::retry::RetryPolicy;

/// A failed EC2 call: denied (naming the statement), final, or still failing at its deadline.
pub type TagError = aws::CallError;

/// Counters the tests and the benchmark read.
#[derive(Debug, Default, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Calls {
    pub describe_tags: u32,
    pub create_tags: u32,
    /// Not tagging's: left out of its report when none was made.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub describe_instance_types: u32,
    /// Not tagging's either: the Node's name for verified join.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub describe_instances: u32,
    /// The instance retiring itself (`verify.onFailure: terminate`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub terminate_instances: u32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub describe_instance_attribute: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase", tag = "outcome")]
pub enum TagOutcome {
    /// The tag already had the value: no CreateTags call.
    AlreadySet,
    Created,
}

/// What DescribeInstances says of one instance that tells whether it is like another: where
/// and from what it was launched, when (EC2's clock, not the node's), and its tags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Instance {
    pub id: String,
    /// Seconds since the epoch, by EC2.
    pub launched: Option<i64>,
    pub state: String,
    pub subnet: Option<String>,
    pub zone: Option<String>,
    pub image: Option<String>,
    pub instance_type: Option<String>,
    pub tags: BTreeMap<String, String>,
}

impl Instance {
    fn of(i: &aws_sdk_ec2::types::Instance) -> Instance {
        let tags = i
            .tags()
            .iter()
            .filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or("").to_string())))
            .collect();
        Instance {
            id: i.instance_id().unwrap_or("").to_string(),
            launched: i.launch_time().map(|t| t.secs()),
            state: i
                .state()
                .and_then(|s| s.name())
                .map_or_else(String::new, |n| n.as_str().to_string()),
            subnet: i.subnet_id().map(String::from),
            zone: i
                .placement()
                .and_then(|p| p.availability_zone())
                .map(String::from),
            image: i.image_id().map(String::from),
            instance_type: i.instance_type().map(|t| t.as_str().to_string()),
            tags,
        }
    }
}

/// [`Ec2::marked`]'s answer.
#[derive(Debug, Clone, Default)]
pub struct Marked {
    /// The instance itself, unless EC2 does not list it.
    pub own: Option<Instance>,
    pub others: Vec<Instance>,
    /// The others are all EC2 has (one page held them).
    pub whole: bool,
}

pub struct Ec2 {
    client: aws_sdk_ec2::Client,
    pub calls: Calls,
}

/// Load the TLS trust store on a blocking thread now, while the caller reads instance
/// metadata: the SDK caches the platform's root certificates process-wide when its first client
/// is built (reading every file in /etc/ssl/certs), which otherwise delays the first EC2 call.
pub(crate) fn warm_up() -> tokio::task::JoinHandle<()> {
    tokio::task::spawn_blocking(|| {
        let conf = aws_sdk_ec2::Config::builder()
            .behavior_version(aws_sdk_ec2::config::BehaviorVersion::latest())
            .region(aws_sdk_ec2::config::Region::new("us-east-1"))
            .build();
        let _ = aws_sdk_ec2::Client::from_conf(conf);
    })
}

/// The SDK config for EC2 in `region` ([`aws::sdk_config`]) with the endpoint `endpoint`, else
/// the SDK's `AWS_ENDPOINT_URL_EC2` / default.
async fn sdk_config(
    region: &str,
    endpoint: Option<&str>,
    transport: Option<&aws::Transport>,
) -> aws_config::SdkConfig {
    let conf = aws::sdk_config(region, transport).await;
    aws::for_service(&conf, "EC2", endpoint, transport).await
}

impl Ec2 {
    /// A client for `region` with the SDK's default credential chain (the instance role on a
    /// node). The endpoint is `endpoint`, else the SDK's `AWS_ENDPOINT_URL_EC2` / default.
    /// The SDK's own retries are off: the agent's policy decides.
    pub async fn new(
        region: &str,
        endpoint: Option<&str>,
        transport: Option<&aws::Transport>,
    ) -> Self {
        Ec2::from_conf(&sdk_config(region, endpoint, transport).await)
    }

    fn from_conf(conf: &aws_config::SdkConfig) -> Ec2 {
        Ec2 {
            client: aws_sdk_ec2::Client::new(conf),
            calls: Calls::default(),
        }
    }

    /// A client ready to call: its config loaded and its credentials resolved now (the role's,
    /// from IMDS on a node), so that its first call does neither. When the credentials cannot be
    /// resolved yet the client keeps the SDK's provider chain: its calls resolve them and report
    /// a failure as usual.
    pub(crate) async fn ready(
        region: &str,
        endpoint: Option<&str>,
        transport: Option<&aws::Transport>,
    ) -> Ec2 {
        use aws_sdk_ec2::config::{ProvideCredentials, SharedCredentialsProvider};
        let conf = sdk_config(region, endpoint, transport).await;
        let Some(provider) = conf.credentials_provider() else {
            return Ec2::from_conf(&conf);
        };
        match provider.provide_credentials().await {
            Ok(creds) => Ec2::from_conf(
                &conf
                    .into_builder()
                    .credentials_provider(SharedCredentialsProvider::new(creds))
                    .build(),
            ),
            Err(e) => {
                tracing::debug!("credentials not resolved ahead of the first call: {e}");
                Ec2::from_conf(&conf)
            }
        }
    }

    /// All tags on the instance (DescribeTags filtered on the resource id).
    pub async fn describe_tags(
        &mut self,
        instance_id: &str,
        policy: RetryPolicy,
        deadline: Instant,
    ) -> Result<BTreeMap<String, String>, TagError> {
        let op = aws::Op {
            name: "DescribeTags",
            action: "ec2:DescribeTags",
            resource: "*".into(),
            on: instance_id,
        };
        let client = &self.client;
        let r = op
            .call(policy, deadline, &mut self.calls.describe_tags, || {
                client
                    .describe_tags()
                    .filters(
                        Filter::builder()
                            .name("resource-id")
                            .values(instance_id)
                            .build(),
                    )
                    .send()
            })
            .await;
        Ok(r?
            .tags()
            .iter()
            .filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or("").to_string())))
            .collect())
    }

    /// The instance type's ENIs on its default network card and IPv4 addresses per ENI
    /// (DescribeInstanceTypes), as nodeadm reads them; `None` when EC2 does not know the type or
    /// gives no such card.
    pub async fn describe_instance_type(
        &mut self,
        instance_type: &str,
        policy: RetryPolicy,
        deadline: Instant,
    ) -> Result<Option<crate::base::podcap::TypeInfo>, TagError> {
        let op = aws::Op {
            name: "DescribeInstanceTypes",
            action: "ec2:DescribeInstanceTypes",
            resource: "*".into(),
            on: instance_type,
        };
        let client = &self.client;
        let t = aws_sdk_ec2::types::InstanceType::from(instance_type);
        let r = op
            .call(
                policy,
                deadline,
                &mut self.calls.describe_instance_types,
                || {
                    client
                        .describe_instance_types()
                        .instance_types(t.clone())
                        .send()
                },
            )
            .await;
        let out = match r {
            Err(TagError::Fatal { message, .. }) if message.contains("InvalidInstanceType") => {
                return Ok(None)
            }
            other => other?,
        };
        let Some(net) = out.instance_types().first().and_then(|t| t.network_info()) else {
            return Ok(None);
        };
        let index = net.default_network_card_index();
        let enis = net
            .network_cards()
            .iter()
            .find(|c| c.network_card_index() == index)
            .and_then(|c| c.maximum_network_interfaces());
        let info = enis
            .zip(net.ipv4_addresses_per_interface())
            .and_then(|(e, i)| Some((u32::try_from(e).ok()?, u32::try_from(i).ok()?)))
            .filter(|(e, i)| *e > 0 && *i > 0)
            .map(|(enis, ipv4_per_eni)| crate::base::podcap::TypeInfo { enis, ipv4_per_eni });
        Ok(info)
    }

    /// The instance as EC2 describes it (DescribeInstances): what the node cannot read of
    /// itself.
    pub async fn describe_self(
        &mut self,
        instance_id: &str,
        policy: RetryPolicy,
        deadline: Instant,
    ) -> Result<Described, TagError> {
        let op = aws::Op {
            name: "DescribeInstances",
            action: "ec2:DescribeInstances",
            resource: "*".into(),
            on: instance_id,
        };
        let client = &self.client;
        let out = op
            .call(policy, deadline, &mut self.calls.describe_instances, || {
                client.describe_instances().instance_ids(instance_id).send()
            })
            .await?;
        let own = out
            .reservations()
            .iter()
            .flat_map(|r| r.instances())
            .find(|i| i.instance_id() == Some(instance_id));
        let Some(i) = own else {
            return Ok(Described::default());
        };
        let types = i.network_interfaces().iter();
        let types = types.map(|n| n.interface_type().unwrap_or("interface").to_string());
        Ok(Described {
            private_dns_name: i
                .private_dns_name()
                .filter(|n| !n.is_empty())
                .map(String::from),
            interface_types: types.collect(),
        })
    }

    /// The instances the agent marked (any of `keys` as a tag key), in `group` when given, in
    /// every state (a retired instance stays listed about an hour after it terminated), and
    /// the instance `own` itself: DescribeInstances twice, each its first page (`Marked::whole`
    /// says whether EC2 had more).
    pub async fn marked(
        &mut self,
        keys: &[&str],
        group: Option<&str>,
        own: &str,
        (policy, deadline): (RetryPolicy, Instant),
    ) -> Result<Marked, TagError> {
        let op = aws::Op {
            name: "DescribeInstances",
            action: "ec2:DescribeInstances",
            resource: "*".into(),
            on: own,
        };
        let filter = |n: &str, v: &[&str]| {
            let values = v.iter().map(|s| s.to_string()).collect();
            Filter::builder().name(n).set_values(Some(values)).build()
        };
        let mut filters = vec![filter("tag-key", keys)];
        if let Some(g) = group {
            filters.push(filter("tag:aws:autoscaling:groupName", &[g]));
        }
        let client = &self.client;
        let calls = &mut self.calls.describe_instances;
        let mine = op
            .call(policy, deadline, calls, || {
                client.describe_instances().instance_ids(own).send()
            })
            .await?;
        let others = op
            .call(policy, deadline, calls, || {
                client
                    .describe_instances()
                    .set_filters(Some(filters.clone()))
                    .send()
            })
            .await?;
        let all = |o: &aws_sdk_ec2::operation::describe_instances::DescribeInstancesOutput| {
            let list: Vec<Instance> = o
                .reservations()
                .iter()
                .flat_map(|r| r.instances())
                .map(Instance::of)
                .collect();
            list
        };
        Ok(Marked {
            own: all(&mine).into_iter().find(|i| i.id == own),
            whole: others.next_token().map_or(true, str::is_empty),
            others: all(&others).into_iter().filter(|i| i.id != own).collect(),
        })
    }

    /// Whether CreateTags of `key` = `value` on the instance would be allowed: the call with
    /// `DryRun`, which EC2 answers `DryRunOperation` when it would succeed and changes nothing.
    pub async fn may_tag(
        &mut self,
        instance_id: &str,
        tag: (&str, &str),
        policy: RetryPolicy,
        deadline: Instant,
    ) -> Result<(), TagError> {
        match self.tag(instance_id, tag, true, (policy, deadline)).await {
            Err(aws::CallError::Fatal { message, .. }) if message.contains("DryRunOperation") => {
                Ok(())
            }
            // Ok: not a dry run after all (a peer that ignores the flag), and the tag is set.
            r => r,
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
    ) -> Result<(), TagError> {
        self.tag(instance_id, (key, value), false, (policy, deadline))
            .await
    }

    /// CreateTags of `key` = `value` on the instance, as a dry run or not.
    async fn tag(
        &mut self,
        instance_id: &str,
        (key, value): (&str, &str),
        dry_run: bool,
        (policy, deadline): (RetryPolicy, Instant),
    ) -> Result<(), TagError> {
        let op = aws::Op {
            name: "CreateTags",
            action: "ec2:CreateTags",
            resource: format!("arn:aws:ec2:*:*:instance/{instance_id}"),
            on: instance_id,
        };
        let client = &self.client;
        let tag = Tag::builder().key(key).value(value).build();
        op.call(policy, deadline, &mut self.calls.create_tags, || {
            let c = client.create_tags().resources(instance_id);
            c.tags(tag.clone())
                .set_dry_run(dry_run.then_some(true))
                .send()
        })
        .await
        .map(|_| ())
    }
}

impl Ec2 {
    /// TerminateInstances of the instance itself.
    pub async fn terminate(
        &mut self,
        instance_id: &str,
        policy: RetryPolicy,
        deadline: Instant,
    ) -> Result<(), TagError> {
        let op = aws::Op {
            name: "TerminateInstances",
            action: "ec2:TerminateInstances",
            resource: format!("arn:aws:ec2:*:*:instance/{instance_id}"),
            on: instance_id,
        };
        let client = &self.client;
        op.call(
            policy,
            deadline,
            &mut self.calls.terminate_instances,
            || {
                client
                    .terminate_instances()
                    .instance_ids(instance_id)
                    .send()
            },
        )
        .await
        .map(|_| ())
    }

    /// What the instance does when its OS powers off: `terminate` or `stop`
    /// (DescribeInstanceAttribute `instanceInitiatedShutdownBehavior`).
    pub async fn shutdown_behaviour(
        &mut self,
        instance_id: &str,
        policy: RetryPolicy,
        deadline: Instant,
    ) -> Result<String, TagError> {
        use aws_sdk_ec2::types::InstanceAttributeName;
        let op = aws::Op {
            name: "DescribeInstanceAttribute",
            action: "ec2:DescribeInstanceAttribute",
            resource: format!("arn:aws:ec2:*:*:instance/{instance_id}"),
            on: instance_id,
        };
        let client = &self.client;
        let counter = &mut self.calls.describe_instance_attribute;
        let out = op
            .call(policy, deadline, counter, || {
                client
                    .describe_instance_attribute()
                    .instance_id(instance_id)
                    .attribute(InstanceAttributeName::InstanceInitiatedShutdownBehavior)
                    .send()
            })
            .await?;
        let v = out.instance_initiated_shutdown_behavior();
        Ok(v.and_then(|a| a.value()).unwrap_or_default().to_string())
    }
}

/// What tagging came to, in the foreground or from the background continuation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TaggingRecord {
    pub result: TagResult,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls: Option<Calls>,
    pub key: String,
    pub value: String,
    /// Written by the background continuation.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub background: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at_unix_ms: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", tag = "outcome")]
pub enum TagResult {
    /// The tag already had the value: no CreateTags call.
    AlreadySet,
    Created,
    Failed {
        error: String,
    },
    /// Handed to the background continuation, this process.
    Background {
        pid: u32,
    },
}

impl From<TagOutcome> for TagResult {
    fn from(o: TagOutcome) -> Self {
        match o {
            TagOutcome::AlreadySet => TagResult::AlreadySet,
            TagOutcome::Created => TagResult::Created,
        }
    }
}

impl TaggingRecord {
    /// The tag already held its value: no step, no call.
    pub fn already_set(key: String, value: String) -> TaggingRecord {
        TaggingRecord {
            result: TagResult::AlreadySet,
            calls: Some(Calls::default()),
            key,
            value,
            background: false,
            finished_at_unix_ms: None,
        }
    }
}

/// What EC2 says of the instance that the node cannot read of itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Described {
    /// Its `PrivateDnsName`, the name bootstrap.sh and nodeadm give the Node (`None`: EC2
    /// gives none).
    pub private_dns_name: Option<String>,
    /// Each attached network interface's `InterfaceType` (`interface`, `efa`, `efa-only`,
    /// `trunk`), in EC2's order.
    pub interface_types: Vec<String>,
}
