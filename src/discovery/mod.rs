//! Cluster discovery, a facts module: the cluster's API endpoint, CA and service CIDR looked up
//! where the config leaves them out — SSM Parameter Store (`GetParametersByPath`,
//! `GetParameters`, with decryption) or EKS `DescribeCluster` — in the order the operator sets,
//! the first complete answer winning. Values the config gives are never looked up.
//!
//! Every discovered value is checked before the plan sees it (an `https://` URL the hand-offs
//! can carry, base64 of PEM certificates, an IPv4 or IPv6 network); the CA is a secret wherever
//! it came from. The answer is kept in [`CACHE`] (mode 0600, written by the executor as a plan
//! step), so a reboot or a rerun makes no call. Calls share the agent's retry policy (full
//! jitter under one deadline); throttling retries, a denial names the IAM statement it needs.

mod cache;
mod check;
mod eks;
mod ssm;

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use aws_sdk_ssm::config::http::HttpResponse;
use aws_sdk_ssm::error::{ProvideErrorMetadata, SdkError};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::aws::{self, Class};
use crate::base::retry::{Failure, RetryPolicy, Verdict};
use crate::os::fsutil::{self, FileFact};
use crate::spec;
use crate::spec::cluster::{Cidr, ClusterSpec};

pub use crate::spec::discovery::Value;

pub(crate) use crate::spec::discovery::{DiscoverySpec, Source, FIELD};

/// Where the answer is kept between runs and boots (under the root).
pub const CACHE: &str = "/var/lib/eks-nodeinit/discovery.json";
/// The cache holds the CA: owner-only.
pub(crate) const CACHE_MODE: u32 = 0o600;

/// Where one value came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "from")]
pub enum Origin {
    Config,
    #[serde(rename_all = "camelCase")]
    SsmPath {
        path: String,
        name: String,
    },
    #[serde(rename_all = "camelCase")]
    SsmParameter {
        name: String,
    },
    #[serde(rename_all = "camelCase")]
    DescribeCluster {
        cluster: String,
    },
}

impl Origin {
    pub fn describe(&self) -> String {
        match self {
            Origin::Config => "the config".into(),
            Origin::SsmPath { path, name } => format!("SSM {path}/{name}"),
            Origin::SsmParameter { name } => format!("SSM {name}"),
            Origin::DescribeCluster { cluster } => format!("DescribeCluster {cluster}"),
        }
    }
}

/// A discovered value and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Found {
    pub value: String,
    pub origin: Origin,
}

/// The values a source answered (only those the config left out).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Answer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_server_endpoint: Option<Found>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_authority: Option<Found>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cidr: Option<Found>,
}

impl Answer {
    pub(crate) fn get(&self, v: Value) -> Option<&Found> {
        match v {
            Value::Endpoint => self.api_server_endpoint.as_ref(),
            Value::Ca => self.certificate_authority.as_ref(),
            Value::Cidr => self.cidr.as_ref(),
        }
    }
    pub(crate) fn set(&mut self, v: Value, found: Found) {
        match v {
            Value::Endpoint => self.api_server_endpoint = Some(found),
            Value::Ca => self.certificate_authority = Some(found),
            Value::Cidr => self.cidr = Some(found),
        }
    }
    /// Only the values in `wanted`.
    pub(crate) fn only(&self, wanted: &[Value]) -> Answer {
        let mut a = Answer::default();
        for v in wanted {
            if let Some(f) = self.get(*v) {
                a.set(*v, f.clone());
            }
        }
        a
    }
}

/// API calls made, per operation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Calls {
    pub get_parameters_by_path: u32,
    pub get_parameters: u32,
    pub describe_cluster: u32,
}

impl Calls {
    pub fn total(&self) -> u32 {
        self.get_parameters_by_path
            .saturating_add(self.get_parameters)
            .saturating_add(self.describe_cluster)
    }
}

/// What discovery found on this run.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Not configured, or the config gives every value.
    NotAsked,
    /// Every value the config leaves out, checked.
    Found {
        answer: Answer,
        from_cache: bool,
        calls: Calls,
    },
    /// No source gave a complete, valid answer: one line per source (or the one reason).
    Failed { reasons: Vec<String>, calls: Calls },
}

/// The cluster as the plan uses it: the config's values, with what discovery found.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterFact {
    pub name: String,
    pub api_server_endpoint: Option<String>,
    /// A secret.
    pub certificate_authority: Option<String>,
    pub cidr: Option<Cidr>,
    pub outcome: Outcome,
    /// The cache file as read (once) by discovery: the plan's "old" content for it.
    pub cache_file: Option<FileFact>,
}

impl ClusterFact {
    /// The config's values alone.
    pub fn from_spec(c: &ClusterSpec) -> ClusterFact {
        ClusterFact {
            name: c.name.clone(),
            api_server_endpoint: c.api_server_endpoint.clone(),
            certificate_authority: c.certificate_authority.clone(),
            cidr: c.cidr.clone(),
            outcome: Outcome::NotAsked,
            cache_file: None,
        }
    }

    /// Where each value came from, for the plan (only when discovery was asked).
    pub(crate) fn origins(&self) -> Vec<(&'static str, String)> {
        let Outcome::Found {
            answer, from_cache, ..
        } = &self.outcome
        else {
            return Vec::new();
        };
        Value::ALL
            .iter()
            .map(|v| {
                let from = match answer.get(*v) {
                    Some(f) if *from_cache => {
                        format!("cache {CACHE} (from {})", f.origin.describe())
                    }
                    Some(f) => f.origin.describe(),
                    None => Origin::Config.describe(),
                };
                (v.field(), from)
            })
            .collect()
    }
}

/// Why one source gave no usable answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SourceError {
    #[error(transparent)]
    Denied(aws::Denied),
    #[error("{what} not found: {hint}")]
    NotFound { what: String, hint: String },
    #[error("{op} failed and will not be retried: {message}")]
    Fatal { op: &'static str, message: String },
    #[error("{op} still failing at the discovery deadline ({attempts} attempts; last: {last}); raise cluster.discovery.deadlineSec or spreadSec (docs/performance.md)")]
    Deadline {
        op: &'static str,
        attempts: u32,
        last: String,
    },
    #[error("no {} (the config leaves {} out)", missing.join(", "), if missing.len() == 1 { "it" } else { "them" })]
    Incomplete { missing: Vec<&'static str> },
    #[error("{field} from {origin} {why}")]
    Malformed {
        field: &'static str,
        origin: String,
        why: String,
    },
    #[error("cannot tell the region: {0}")]
    Region(String),
}

/// Look up what the config leaves out. `region` is awaited only when a call is needed (a cache
/// hit makes none); `root` is where the cache is read.
pub async fn gather<R>(spec: &spec::Spec, root: &Path, region: R) -> ClusterFact
where
    R: Future<Output = Result<(String, aws::Endpoints), String>>,
{
    let mut fact = ClusterFact::from_spec(&spec.cluster);
    let Some(d) = &spec.cluster.discovery else {
        return fact;
    };
    let missing = fact.missing();
    if missing.is_empty() {
        return fact;
    }
    let file = fsutil::read_file(root, Path::new(CACHE));
    let hit = d
        .cache
        .then(|| cache::cached(&file, d, &spec.cluster.name, &missing))
        .flatten();
    fact.cache_file = Some(file);
    let (answer, from_cache, calls) = match hit {
        Some(answer) => {
            tracing::info!("cluster values from the discovery cache {CACHE}: no lookup");
            (answer, true, Calls::default())
        }
        None => match lookup(spec, d, &missing, region).await {
            Ok((answer, calls)) => (answer, false, calls),
            Err(outcome) => {
                fact.outcome = outcome;
                return fact;
            }
        },
    };
    apply(&mut fact, &answer);
    fact.outcome = Outcome::Found {
        answer,
        from_cache,
        calls,
    };
    fact
}

impl ClusterFact {
    /// The values the config leaves out.
    fn missing(&self) -> Vec<Value> {
        Value::ALL
            .into_iter()
            .filter(|v| match v {
                Value::Endpoint => self.api_server_endpoint.is_none(),
                Value::Ca => self.certificate_authority.is_none(),
                Value::Cidr => self.cidr.is_none(),
            })
            .collect()
    }
}

/// Ask each source in turn, after the spread, until one gives a complete, valid answer; the
/// failure's outcome says why each gave none.
async fn lookup<R>(
    spec: &spec::Spec,
    d: &DiscoverySpec,
    missing: &[Value],
    region: R,
) -> Result<(Answer, Calls), Outcome>
where
    R: Future<Output = Result<(String, aws::Endpoints), String>>,
{
    let deadline = Instant::now() + d.deadline;
    let mut calls = Calls::default();
    let (region, endpoints) = region.await.map_err(|e| Outcome::Failed {
        reasons: vec![SourceError::Region(e).to_string()],
        calls,
    })?;
    if !d.spread.is_zero() {
        let ms = u64::try_from(d.spread.as_millis()).unwrap_or(u64::MAX);
        let wait = Duration::from_millis(rand::random_range(0..=ms));
        tracing::info!(?wait, "spreading the first discovery call");
        tokio::time::sleep(wait).await;
    }
    let clients = Clients::new(
        &region,
        d,
        spec.agent_transport(&region, &endpoints).as_ref(),
    )
    .await;
    let cluster = spec.cluster.name.as_str();
    let mut reasons = Vec::new();
    for source in &d.sources {
        let shown = source.describe(cluster);
        let r = clients
            .ask(source, cluster, deadline, &mut calls)
            .await
            .and_then(|a| check::complete(a, missing));
        match r {
            Ok(answer) => {
                tracing::info!(
                    calls = calls.total(),
                    "cluster values discovered from {shown}"
                );
                return Ok((answer, calls));
            }
            Err(e) => {
                tracing::warn!("discovery from {shown}: {e}");
                let stop = matches!(e, SourceError::Deadline { .. });
                reasons.push(format!("{shown}: {e}"));
                if stop {
                    break;
                }
            }
        }
    }
    Err(Outcome::Failed { reasons, calls })
}

fn apply(fact: &mut ClusterFact, a: &Answer) {
    if let Some(f) = &a.api_server_endpoint {
        fact.api_server_endpoint = Some(f.value.clone());
    }
    if let Some(f) = &a.certificate_authority {
        fact.certificate_authority = Some(f.value.clone());
    }
    if let Some(f) = &a.cidr {
        fact.cidr = check::parse_cidr(&f.value);
    }
}

/// The Parameter Store and EKS clients for the region, each with its configured endpoint.
struct Clients {
    ssm: aws_sdk_ssm::Client,
    eks: aws_sdk_eks::Client,
}

impl Clients {
    async fn new(region: &str, d: &DiscoverySpec, transport: Option<&aws::Transport>) -> Clients {
        let conf = aws::sdk_config(region, transport).await;
        let (ssm, eks) = tokio::join!(
            aws::for_service(&conf, "SSM", d.ssm_endpoint.as_deref(), transport),
            aws::for_service(&conf, "EKS", d.eks_endpoint.as_deref(), transport)
        );
        Clients {
            ssm: aws_sdk_ssm::Client::new(&ssm),
            eks: aws_sdk_eks::Client::new(&eks),
        }
    }

    /// One source's answer: one remote call per function in `ssm` and `eks`.
    async fn ask(
        &self,
        source: &Source,
        cluster: &str,
        deadline: Instant,
        calls: &mut Calls,
    ) -> Result<Answer, SourceError> {
        match source {
            Source::SsmPath { path, names } => {
                ssm::by_path(&self.ssm, path, names, deadline, calls).await
            }
            Source::SsmParameters { names } => {
                ssm::parameters(&self.ssm, names, deadline, calls).await
            }
            Source::DescribeCluster => {
                eks::describe_cluster(&self.eks, cluster, deadline, calls).await
            }
        }
    }
}

fn not_found_path(path: &str) -> SourceError {
    SourceError::NotFound {
        what: format!("parameters under {path}"),
        hint: "publish them (docs/discovery.md: APISERVER_ENDPOINT, B64_CLUSTER_CA, SERVICE_CIDR) or fix cluster.discovery.sources".into(),
    }
}

/// Send with the agent's retry policy: throttling and server errors retry with jittered backoff
/// until the deadline; denied, not found and other client errors never retry.
async fn retried<T, E, Fut>(
    op: &'static str,
    statement: &str,
    policy: RetryPolicy,
    deadline: Instant,
    calls: &mut u32,
    send: impl FnMut() -> Fut,
) -> Result<T, SourceError>
where
    Fut: Future<Output = Result<T, SdkError<E, HttpResponse>>>,
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    aws::run_sdk(policy, deadline, calls, send, |f| {
        match aws::classify(f.code.as_deref(), f.status) {
            Class::Retry => Verdict::Retry(f.text),
            Class::Denied => Verdict::Fail(SourceError::Denied(aws::Denied {
                op,
                on: String::new(),
                code: f.code.unwrap_or_default(),
                statement: statement.to_string(),
            })),
            Class::NotFound => Verdict::Fail(SourceError::NotFound {
                what: op.into(),
                hint: f.text,
            }),
            Class::Fatal => Verdict::Fail(SourceError::Fatal {
                op,
                message: f.text,
            }),
        }
    })
    .await
    .map_err(|f| match f {
        Failure::Fatal(e) => e,
        Failure::Deadline { attempts, last } => SourceError::Deadline { op, attempts, last },
    })
}

#[cfg(test)]
mod tests {
    use super::check::{check_pem, complete};
    use super::*;
    use base64::Engine;

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    #[test]
    fn pem_check_takes_certificates_only() {
        // A DER SEQUENCE header in base64 ("MII…" starts every real certificate).
        let cert = "-----BEGIN CERTIFICATE-----\nMIIBCgKCAQEA\n-----END CERTIFICATE-----\n";
        assert!(check_pem(&b64(cert)).is_ok());
        assert!(check_pem(&b64(&format!("{cert}\n{cert}"))).is_ok());
        assert!(check_pem("not base64!").is_err());
        assert!(check_pem(&b64("hello")).is_err());
        assert!(check_pem(&b64("-----BEGIN CERTIFICATE-----\nMIIB\n")).is_err());
        assert!(check_pem(&b64("")).is_err());
        // moto's DescribeCluster answers a random string, not base64 PEM.
        assert!(check_pem("ZXhhbXBsZQ==abc").is_err());
        let not_der = "-----BEGIN CERTIFICATE-----\naGVsbG8=\n-----END CERTIFICATE-----\n";
        assert!(check_pem(&b64(not_der)).is_err());
    }

    #[test]
    fn an_incomplete_or_malformed_answer_is_refused() {
        let f = |v: &str| Found {
            value: v.into(),
            origin: Origin::SsmPath {
                path: "/eks/x".into(),
                name: "N".into(),
            },
        };
        let a = Answer {
            api_server_endpoint: Some(f("https://abc.eks.amazonaws.com")),
            ..Answer::default()
        };
        let e = complete(a.clone(), &[Value::Endpoint, Value::Cidr]).unwrap_err();
        assert_eq!(e.to_string(), "no cidr (the config leaves it out)");
        assert!(complete(a, &[Value::Endpoint]).is_ok());
        let bad = Answer {
            api_server_endpoint: Some(f("https://a,b")),
            ..Answer::default()
        };
        let e = complete(bad, &[Value::Endpoint]).unwrap_err().to_string();
        assert!(
            e.starts_with("apiServerEndpoint from SSM /eks/x/N is `https://a,b`"),
            "{e}"
        );
        let ca = Answer {
            certificate_authority: Some(f("c2VjcmV0")),
            ..Answer::default()
        };
        let e = complete(ca, &[Value::Ca]).unwrap_err().to_string();
        assert!(!e.contains("c2VjcmV0"), "the CA is never echoed: {e}");
    }
}
