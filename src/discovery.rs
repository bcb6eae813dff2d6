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

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use aws_sdk_ssm::config::http::HttpResponse;
use aws_sdk_ssm::error::{ProvideErrorMetadata, SdkError};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::config::{self, DiscoverySource};
use crate::facts::FileFact;
use crate::findings::Findings;
use crate::retry::{self, Failure, RetryPolicy, Verdict};
use crate::spec::{self, Cidr};
use crate::text::printable;

/// Where the answer is kept between runs and boots (under the root).
pub const CACHE: &str = "/var/lib/eks-nodeinit/discovery.json";
/// The cache holds the CA: owner-only.
pub const CACHE_MODE: u32 = 0o600;
/// The config field every discovery finding is reported under.
pub const FIELD: &str = "cluster.discovery";

/// The three values discovery can supply, as the config names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Value {
    Endpoint,
    Ca,
    Cidr,
}

impl Value {
    pub const ALL: [Value; 3] = [Value::Endpoint, Value::Ca, Value::Cidr];

    pub fn field(self) -> &'static str {
        match self {
            Value::Endpoint => "apiServerEndpoint",
            Value::Ca => "certificateAuthority",
            Value::Cidr => "cidr",
        }
    }
}

/// One checked source.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Source {
    /// `GetParametersByPath` on `path`; `names` under it for endpoint, CA, CIDR.
    SsmPath { path: String, names: [String; 3] },
    /// `GetParameters` by full names for endpoint, CA, CIDR (`None`: not looked up here).
    SsmParameters { names: [Option<String>; 3] },
    /// `DescribeCluster` on the cluster's name.
    DescribeCluster,
}

impl Source {
    fn describe(&self, cluster: &str) -> String {
        match self {
            Source::SsmPath { path, .. } => format!("SSM path {path}"),
            Source::SsmParameters { .. } => "SSM parameters".into(),
            Source::DescribeCluster => format!("DescribeCluster {cluster}"),
        }
    }
}

/// The discovery section, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct DiscoverySpec {
    pub sources: Vec<Source>,
    pub ssm_endpoint: Option<String>,
    pub eks_endpoint: Option<String>,
    pub deadline: Duration,
    pub spread: Duration,
    pub cache: bool,
}

impl DiscoverySpec {
    /// What a cached answer must have been asked with to be used: the cluster and the sources.
    fn key(&self, cluster: &str) -> String {
        serde_json::json!({"cluster": cluster, "sources": self.sources}).to_string()
    }
}

/// Check `cluster.discovery`. `None` when absent (or when it has a finding).
pub fn spec(c: &config::Cluster, f: &mut Findings) -> Option<DiscoverySpec> {
    let d = c.discovery.as_ref()?;
    let before = f.0.len();
    let given = match &d.sources {
        Some(s) => s.clone(),
        None => vec![DiscoverySource::SsmPath(config::SsmPath {
            path: format!("/eks/{}", c.name),
            names: config::ParameterNames::default(),
        })],
    };
    if given.is_empty() {
        f.push(
            format!("{FIELD}.sources"),
            "is empty; give at least one source, or remove `discovery` and give the values",
        );
    }
    let mut sources = Vec::new();
    for (i, s) in given.iter().enumerate() {
        let at = format!("{FIELD}.sources[{i}]");
        match s {
            DiscoverySource::SsmPath(p) => {
                check_ssm_name(&format!("{at}.ssmPath.path"), &p.path, true, f);
                let n = &p.names;
                let names = [
                    n.api_server_endpoint.clone(),
                    n.certificate_authority.clone(),
                    n.cidr.clone(),
                ];
                for (v, name) in Value::ALL.iter().zip(&names) {
                    let field = format!("{at}.ssmPath.names.{}", v.field());
                    if name.is_empty()
                        || !name
                            .chars()
                            .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '_' | '.' | '-'))
                    {
                        f.push(field, format!(
                            "`{}` is not a parameter name under the path (letters, digits, `_`, `.`, `-`)",
                            printable(name)
                        ));
                    }
                }
                sources.push(Source::SsmPath {
                    path: p.path.trim_end_matches('/').to_string(),
                    names,
                });
            }
            DiscoverySource::SsmParameters(p) => {
                let names = [
                    p.api_server_endpoint.clone(),
                    p.certificate_authority.clone(),
                    p.cidr.clone(),
                ];
                if names.iter().all(Option::is_none) {
                    f.push(
                        format!("{at}.ssmParameters"),
                        "names no parameter; give the full name of at least one value",
                    );
                }
                for (v, name) in Value::ALL.iter().zip(&names) {
                    if let Some(n) = name {
                        check_ssm_name(&format!("{at}.ssmParameters.{}", v.field()), n, false, f);
                    }
                }
                sources.push(Source::SsmParameters { names });
            }
            DiscoverySource::DescribeCluster(_) => sources.push(Source::DescribeCluster),
        }
    }
    for (field, ep) in [
        ("ssmEndpoint", &d.ssm_endpoint),
        ("eksEndpoint", &d.eks_endpoint),
    ] {
        if let Some(ep) = ep {
            if !(ep.starts_with("https://") || ep.starts_with("http://")) || ep.len() > 2048 {
                f.push(
                    format!("{FIELD}.{field}"),
                    format!("`{}` is not an http(s) URL", printable(ep)),
                );
            }
        }
    }
    if !(1..=3600).contains(&d.deadline_sec) {
        f.push(
            format!("{FIELD}.deadlineSec"),
            format!("{} is out of range: 1 to 3600 seconds", d.deadline_sec),
        );
    }
    if !(0.0..=3600.0).contains(&d.spread_sec) {
        f.push(
            format!("{FIELD}.spreadSec"),
            format!("{} is out of range: 0 to 3600 seconds", d.spread_sec),
        );
    }
    (f.0.len() == before).then(|| DiscoverySpec {
        sources,
        ssm_endpoint: d.ssm_endpoint.clone(),
        eks_endpoint: d.eks_endpoint.clone(),
        deadline: Duration::from_secs(d.deadline_sec),
        spread: Duration::from_secs_f64(d.spread_sec.clamp(0.0, 3600.0)),
        cache: d.cache,
    })
}

/// Parameter Store names: `/`-separated parts of letters, digits, `_.-`, at most 2048
/// characters (a path: starting with `/`).
fn check_ssm_name(field: &str, name: &str, path: bool, f: &mut Findings) {
    let chars_ok = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/'));
    let shape_ok = if path {
        name.starts_with('/')
    } else {
        !name.is_empty() && !name.ends_with('/')
    };
    if !chars_ok || !shape_ok || name.len() > 2048 || name.contains("//") {
        f.push(
            field,
            format!(
                "`{}` is not a Parameter Store {} (letters, digits, `_.-` in `/`-separated parts{})",
                printable(name),
                if path { "path" } else { "parameter name" },
                if path { ", starting with `/`" } else { "" }
            ),
        );
    }
}

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
    fn get(&self, v: Value) -> Option<&Found> {
        match v {
            Value::Endpoint => self.api_server_endpoint.as_ref(),
            Value::Ca => self.certificate_authority.as_ref(),
            Value::Cidr => self.cidr.as_ref(),
        }
    }
    fn set(&mut self, v: Value, found: Found) {
        match v {
            Value::Endpoint => self.api_server_endpoint = Some(found),
            Value::Ca => self.certificate_authority = Some(found),
            Value::Cidr => self.cidr = Some(found),
        }
    }
    /// Only the values in `wanted`.
    fn only(&self, wanted: &[Value]) -> Answer {
        let mut a = Answer::default();
        for v in wanted {
            if let Some(f) = self.get(*v) {
                a.set(*v, f.clone());
            }
        }
        a
    }
}

/// The cache file's document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CacheDoc {
    api_version: String,
    kind: String,
    /// [`DiscoverySpec::key`]: the answer is used only for the same cluster and sources.
    key: String,
    values: Answer,
}

const CACHE_KIND: &str = "DiscoveryCache";

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
    pub fn from_spec(c: &spec::ClusterSpec) -> ClusterFact {
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
    pub fn origins(&self) -> Vec<(&'static str, String)> {
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

    /// The cache document for this answer (what the plan writes).
    pub fn cache_text(&self, d: &DiscoverySpec) -> Option<String> {
        let Outcome::Found { answer, .. } = &self.outcome else {
            return None;
        };
        let doc = CacheDoc {
            api_version: "eks-nodeinit/v1".into(),
            kind: CACHE_KIND.into(),
            key: d.key(&self.name),
            values: answer.clone(),
        };
        let mut s = serde_json::to_string_pretty(&doc).ok()?;
        s.push('\n');
        Some(s)
    }
}

/// Why one source gave no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error(
        "{op} was denied ({code}): the instance role needs {statement} (see docs/iam-policy.json)"
    )]
    Denied {
        op: &'static str,
        code: String,
        statement: String,
    },
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
    R: Future<Output = Result<String, String>>,
{
    let mut fact = ClusterFact::from_spec(&spec.cluster);
    let Some(d) = &spec.cluster.discovery else {
        return fact;
    };
    let missing: Vec<Value> = Value::ALL
        .into_iter()
        .filter(|v| match v {
            Value::Endpoint => fact.api_server_endpoint.is_none(),
            Value::Ca => fact.certificate_authority.is_none(),
            Value::Cidr => fact.cidr.is_none(),
        })
        .collect();
    if missing.is_empty() {
        return fact;
    }
    let file = crate::facts::read_file(root, Path::new(CACHE));
    let hit = d
        .cache
        .then(|| cached(&file, d, &spec.cluster.name, &missing))
        .flatten();
    fact.cache_file = Some(file);
    if let Some(answer) = hit {
        tracing::info!("cluster values from the discovery cache {CACHE}: no lookup");
        apply(&mut fact, &answer);
        fact.outcome = Outcome::Found {
            answer,
            from_cache: true,
            calls: Calls::default(),
        };
        return fact;
    }
    let deadline = Instant::now() + d.deadline;
    let mut calls = Calls::default();
    let mut reasons = Vec::new();
    let region = match region.await {
        Ok(r) => r,
        Err(e) => {
            fact.outcome = Outcome::Failed {
                reasons: vec![SourceError::Region(e).to_string()],
                calls,
            };
            return fact;
        }
    };
    if !d.spread.is_zero() {
        let ms = u64::try_from(d.spread.as_millis()).unwrap_or(u64::MAX);
        let wait = Duration::from_millis(rand::random_range(0..=ms));
        tracing::info!(?wait, "spreading the first discovery call");
        tokio::time::sleep(wait).await;
    }
    let clients = Clients::new(&region, d).await;
    for source in &d.sources {
        let shown = source.describe(&spec.cluster.name);
        let r = clients
            .ask(source, &spec.cluster.name, deadline, &mut calls)
            .await
            .and_then(|a| complete(a, &missing));
        match r {
            Ok(answer) => {
                tracing::info!(
                    calls = calls.total(),
                    "cluster values discovered from {shown}"
                );
                apply(&mut fact, &answer);
                fact.outcome = Outcome::Found {
                    answer,
                    from_cache: false,
                    calls,
                };
                return fact;
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
    fact.outcome = Outcome::Failed { reasons, calls };
    fact
}

fn apply(fact: &mut ClusterFact, a: &Answer) {
    if let Some(f) = &a.api_server_endpoint {
        fact.api_server_endpoint = Some(f.value.clone());
    }
    if let Some(f) = &a.certificate_authority {
        fact.certificate_authority = Some(f.value.clone());
    }
    if let Some(f) = &a.cidr {
        fact.cidr = parse_cidr(&f.value);
    }
}

/// The cached answer, when it was asked with this cluster and these sources, covers `missing`
/// and still passes every check. Anything else is ignored (and rewritten by the plan).
fn cached(file: &FileFact, d: &DiscoverySpec, cluster: &str, missing: &[Value]) -> Option<Answer> {
    if file.link.is_some() {
        return None;
    }
    let text = file.content.as_ref().ok()?.as_ref()?;
    let doc: CacheDoc = match serde_json::from_str(text) {
        Ok(doc) => doc,
        Err(e) => {
            tracing::warn!("ignoring the discovery cache {CACHE}: {e}");
            return None;
        }
    };
    if doc.kind != CACHE_KIND || doc.key != d.key(cluster) {
        tracing::info!("the discovery cache {CACHE} was written for other sources or another cluster: looking up again");
        return None;
    }
    match complete(doc.values, missing) {
        Ok(a) => Some(a),
        Err(e) => {
            tracing::warn!("ignoring the discovery cache {CACHE}: {e}");
            None
        }
    }
}

/// `a` reduced to `missing`, every value there and checked.
fn complete(a: Answer, missing: &[Value]) -> Result<Answer, SourceError> {
    let gaps: Vec<&'static str> = missing
        .iter()
        .filter(|v| a.get(**v).is_none())
        .map(|v| v.field())
        .collect();
    if !gaps.is_empty() {
        return Err(SourceError::Incomplete { missing: gaps });
    }
    let a = a.only(missing);
    for v in missing {
        if let Some(f) = a.get(*v) {
            check_value(*v, f)?;
        }
    }
    Ok(a)
}

/// The checks a discovered value must pass before a hand-off carries it.
pub fn check_value(v: Value, f: &Found) -> Result<(), SourceError> {
    let bad = |why: String| SourceError::Malformed {
        field: v.field(),
        origin: f.origin.describe(),
        why,
    };
    match v {
        Value::Endpoint if !spec::is_endpoint(&f.value) => Err(bad(format!(
            "is `{}`, not an https:// URL of a host, an optional port and a path of letters, digits and `-._~/` (bootstrap.sh's sed and a systemd drop-in carry nothing else): fix the source",
            printable(&f.value)
        ))),
        Value::Ca => check_pem(&f.value).map_err(|why| {
            // Never echo the value: it is the cluster CA.
            bad(format!("{why}: publish the cluster's certificateAuthority.data as is"))
        }),
        Value::Cidr if parse_cidr(&f.value).is_none() => Err(bad(format!(
            "is `{}`, not an IP network like `10.100.0.0/16` or `fd00:10:96::/112`: fix the source",
            printable(&f.value)
        ))),
        _ => Ok(()),
    }
}

fn parse_cidr(s: &str) -> Option<Cidr> {
    spec::parse_cidr(s).map(|(ip, _)| Cidr {
        text: s.to_string(),
        ipv6: ip.is_ipv6(),
    })
}

/// Base64 (one line) of one or more PEM certificates: `BEGIN CERTIFICATE` / `END CERTIFICATE`
/// pairs around base64 bodies, nothing else but blank lines.
pub fn check_pem(b64: &str) -> Result<(), String> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .map_err(|_| "is not base64 on one line".to_string())?;
    let text = String::from_utf8(bytes).map_err(|_| "does not decode to PEM text".to_string())?;
    let mut certs = 0usize;
    let mut body: Option<String> = None;
    for line in text.lines().map(str::trim) {
        match (&mut body, line) {
            (None, "") => {}
            (None, "-----BEGIN CERTIFICATE-----") => body = Some(String::new()),
            (None, _) => return Err("decodes to text that is not PEM certificates".into()),
            (Some(b), "-----END CERTIFICATE-----") => {
                let der = base64::engine::general_purpose::STANDARD
                    .decode(b.as_bytes())
                    .map_err(|_| {
                        format!(
                            "certificate {} is not base64 inside its PEM block",
                            certs + 1
                        )
                    })?;
                // A DER certificate is a SEQUENCE.
                if der.first() != Some(&0x30) {
                    return Err(format!(
                        "certificate {} is not a DER certificate",
                        certs + 1
                    ));
                }
                certs += 1;
                body = None;
            }
            (Some(b), l) => b.push_str(l),
        }
    }
    match (certs, body) {
        (_, Some(_)) => Err("decodes to a PEM block without its END line".into()),
        (0, None) => Err("decodes to no PEM certificate".into()),
        _ => Ok(()),
    }
}

/// What one failed call means.
#[derive(Debug, PartialEq, Eq)]
pub enum Class {
    Retry,
    Denied,
    NotFound,
    Fatal,
}

/// Classify an SSM or EKS error code (or `None` for transport errors and timeouts).
pub fn classify(code: Option<&str>, http_status: Option<u16>) -> Class {
    match code {
        Some(
            "ThrottlingException"
            | "Throttling"
            | "TooManyRequestsException"
            | "RequestLimitExceeded"
            | "InternalServerError"
            | "InternalFailure"
            | "ServerException"
            | "ServiceUnavailableException"
            | "ServiceUnavailable",
        ) => Class::Retry,
        Some(c) if c.starts_with("AccessDenied") || c == "UnauthorizedOperation" => Class::Denied,
        Some("ParameterNotFound" | "ResourceNotFoundException") => Class::NotFound,
        Some(_) if http_status.is_some_and(|s| s >= 500) => Class::Retry,
        Some(_) => Class::Fatal,
        None => Class::Retry,
    }
}

struct Clients {
    ssm: aws_sdk_ssm::Client,
    eks: aws_sdk_eks::Client,
}

impl Clients {
    /// Clients for `region` with the SDK's default credentials (the instance role on a node);
    /// the SDK's own retries off, the agent's policy decides.
    async fn new(region: &str, d: &DiscoverySpec) -> Clients {
        let conf = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new(region.to_string()))
            .retry_config(aws_config::retry::RetryConfig::disabled())
            .timeout_config(
                aws_config::timeout::TimeoutConfig::builder()
                    .connect_timeout(Duration::from_secs(2))
                    .operation_attempt_timeout(Duration::from_secs(5))
                    .build(),
            )
            .load()
            .await;
        let mut ssm = aws_sdk_ssm::config::Builder::from(&conf);
        if let Some(ep) = &d.ssm_endpoint {
            ssm = ssm.endpoint_url(ep);
        }
        let mut eks = aws_sdk_eks::config::Builder::from(&conf);
        if let Some(ep) = &d.eks_endpoint {
            eks = eks.endpoint_url(ep);
        }
        Clients {
            ssm: aws_sdk_ssm::Client::from_conf(ssm.build()),
            eks: aws_sdk_eks::Client::from_conf(eks.build()),
        }
    }

    async fn ask(
        &self,
        source: &Source,
        cluster: &str,
        deadline: Instant,
        calls: &mut Calls,
    ) -> Result<Answer, SourceError> {
        let policy = RetryPolicy::default();
        match source {
            Source::SsmPath { path, names } => {
                let mut answer = Answer::default();
                let mut token: Option<String> = None;
                let statement = format!(
                    "{{\"Effect\":\"Allow\",\"Action\":\"ssm:GetParametersByPath\",\"Resource\":\"arn:aws:ssm:<region>:<account>:parameter{path}\"}} (and kms:Decrypt on the key of a SecureString)"
                );
                // Pages of up to 10 parameters; the path holds a handful.
                for _page in 0..100 {
                    let out = retried(
                        "GetParametersByPath",
                        &statement,
                        policy,
                        deadline,
                        &mut calls.get_parameters_by_path,
                        || {
                            self.ssm
                                .get_parameters_by_path()
                                .path(path)
                                .recursive(false)
                                .with_decryption(true)
                                .set_next_token(token.clone())
                                .send()
                        },
                    )
                    .await
                    .map_err(|e| match e {
                        SourceError::NotFound { .. } => not_found_path(path),
                        e => e,
                    })?;
                    for p in out.parameters() {
                        let (Some(full), Some(value)) = (p.name(), p.value()) else {
                            continue;
                        };
                        let leaf = full.rsplit('/').next().unwrap_or(full);
                        for (v, name) in Value::ALL.iter().zip(names) {
                            if leaf == name {
                                answer.set(
                                    *v,
                                    Found {
                                        value: value.trim().to_string(),
                                        origin: Origin::SsmPath {
                                            path: path.clone(),
                                            name: name.clone(),
                                        },
                                    },
                                );
                            }
                        }
                    }
                    token = out.next_token().map(String::from).filter(|t| !t.is_empty());
                    if token.is_none() {
                        break;
                    }
                }
                if answer == Answer::default() {
                    return Err(not_found_path(path));
                }
                Ok(answer)
            }
            Source::SsmParameters { names } => {
                let wanted: Vec<String> = names.iter().flatten().cloned().collect();
                let statement = format!(
                    "{{\"Effect\":\"Allow\",\"Action\":\"ssm:GetParameters\",\"Resource\":[{}]}} (and kms:Decrypt on the key of a SecureString)",
                    wanted
                        .iter()
                        .map(|n| format!("\"arn:aws:ssm:<region>:<account>:parameter{}{n}\"", if n.starts_with('/') { "" } else { "/" }))
                        .collect::<Vec<_>>()
                        .join(",")
                );
                let out = retried(
                    "GetParameters",
                    &statement,
                    policy,
                    deadline,
                    &mut calls.get_parameters,
                    || {
                        self.ssm
                            .get_parameters()
                            .set_names(Some(wanted.clone()))
                            .with_decryption(true)
                            .send()
                    },
                )
                .await?;
                let mut answer = Answer::default();
                for p in out.parameters() {
                    let (Some(full), Some(value)) = (p.name(), p.value()) else {
                        continue;
                    };
                    for (v, name) in Value::ALL.iter().zip(names) {
                        if name.as_deref() == Some(full) {
                            answer.set(
                                *v,
                                Found {
                                    value: value.trim().to_string(),
                                    origin: Origin::SsmParameter { name: full.into() },
                                },
                            );
                        }
                    }
                }
                let invalid = out.invalid_parameters();
                if !invalid.is_empty() && answer == Answer::default() {
                    return Err(SourceError::NotFound {
                        what: format!(
                            "parameters {}",
                            invalid
                                .iter()
                                .map(|n| printable(n))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                        hint: "create them (docs/discovery.md) or fix cluster.discovery.sources"
                            .into(),
                    });
                }
                Ok(answer)
            }
            Source::DescribeCluster => {
                let statement = format!(
                    "{{\"Effect\":\"Allow\",\"Action\":\"eks:DescribeCluster\",\"Resource\":\"arn:aws:eks:<region>:<account>:cluster/{cluster}\"}}"
                );
                let out = retried(
                    "DescribeCluster",
                    &statement,
                    policy,
                    deadline,
                    &mut calls.describe_cluster,
                    || self.eks.describe_cluster().name(cluster).send(),
                )
                .await
                .map_err(|e| match e {
                    SourceError::NotFound { .. } => SourceError::NotFound {
                        what: format!("cluster {cluster}"),
                        hint: "check cluster.name and the region".into(),
                    },
                    e => e,
                })?;
                let mut answer = Answer::default();
                let origin = Origin::DescribeCluster {
                    cluster: cluster.to_string(),
                };
                let found = |v: &str| Found {
                    value: v.trim().to_string(),
                    origin: origin.clone(),
                };
                if let Some(c) = out.cluster() {
                    if let Some(ep) = c.endpoint() {
                        answer.api_server_endpoint = Some(found(ep));
                    }
                    if let Some(ca) = c.certificate_authority().and_then(|c| c.data()) {
                        answer.certificate_authority = Some(found(ca));
                    }
                    if let Some(net) = c.kubernetes_network_config() {
                        let v6 = net
                            .ip_family()
                            .is_some_and(|f| f.as_str().eq_ignore_ascii_case("ipv6"));
                        let cidr = if v6 {
                            net.service_ipv6_cidr()
                        } else {
                            net.service_ipv4_cidr()
                        };
                        if let Some(cidr) = cidr {
                            answer.cidr = Some(found(cidr));
                        }
                    }
                }
                Ok(answer)
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
    retry::run_sdk(policy, deadline, calls, send, |f| {
        match classify(f.code.as_deref(), f.status) {
            Class::Retry => Verdict::Retry(f.text),
            Class::Denied => Verdict::Fail(SourceError::Denied {
                op,
                code: f.code.unwrap_or_default(),
                statement: statement.to_string(),
            }),
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
    fn classification() {
        for (code, status, want) in [
            (Some("ThrottlingException"), Some(400), Class::Retry),
            (Some("AccessDeniedException"), Some(400), Class::Denied),
            (Some("ParameterNotFound"), Some(400), Class::NotFound),
            (
                Some("ResourceNotFoundException"),
                Some(404),
                Class::NotFound,
            ),
            (Some("ValidationException"), Some(400), Class::Fatal),
            (Some("Odd"), Some(503), Class::Retry),
            (None, None, Class::Retry),
        ] {
            assert_eq!(classify(code, status), want, "{code:?}");
        }
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
