//! The AWS SDK plumbing every client shares: one config (the instance role's credentials, the
//! SDK's own retries off so the agent's policy decides, the agent's timeouts), one
//! classification of a failed call, the one "denied" error naming the IAM statement, and the
//! retry loop for one SDK operation (`run_sdk`).

pub mod autoscaling;
pub mod ec2;
pub(crate) mod http;

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

pub use crate::aws::http::{Proxy, Transport};
use crate::base::retry::{self, Failure, RetryPolicy, Verdict};

/// Whether the agent's AWS calls take the dual-stack names: as `aws.dualStack` says, else on an
/// instance without a private IPv4 address (an IPv6-only subnet, where the IPv4-only names are
/// reached only through DNS64 and NAT64 or a VPC endpoint), else `None`: the SDK's own choice.
pub fn dual_stack_for(configured: Option<bool>, has_ipv4: bool) -> Option<bool> {
    configured.or((!has_ipv4).then_some(true))
}

/// The endpoint a client of `service` (its `AWS_ENDPOINT_URL_<SERVICE>` name: `EC2`,
/// `AUTO_SCALING`, `SSM`, `EKS`) is given: `configured`, else the SDK's environment
/// (`AWS_ENDPOINT_URL_<SERVICE>`, then `AWS_ENDPOINT_URL`). The SDK refuses a custom endpoint
/// with the dual-stack names on ("Dualstack and custom endpoint are not supported"), so a client
/// given one calls it without them.
pub fn custom_endpoint(service: &str, configured: Option<&str>) -> Option<String> {
    endpoint_in(service, configured, |k| std::env::var(k).ok())
}

/// [`custom_endpoint`] with the environment `var`.
fn endpoint_in(
    service: &str,
    configured: Option<&str>,
    var: impl Fn(&str) -> Option<String>,
) -> Option<String> {
    let env = |k: &str| var(k).filter(|v| !v.is_empty());
    // The SDK's switch that makes it pass over the environment's endpoints.
    let ignored = env("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS").is_some_and(|v| v == "true");
    let env = |k: &str| env(k).filter(|_| !ignored);
    configured
        .map(String::from)
        .or_else(|| env(&format!("AWS_ENDPOINT_URL_{service}")))
        .or_else(|| env("AWS_ENDPOINT_URL"))
}

/// `conf` for one service's client: at its [`custom_endpoint`], without the dual-stack names
/// there (the SDK refuses both); with the dual-stack names on, by the usual name when the
/// service's dual-stack name does not resolve (not every service has one in every Region: a
/// subnet with DNS64 and NAT64 reaches the usual names); else as it is. Through a proxy
/// (`transport`'s) the proxy resolves the names, so they are not looked up here.
pub(crate) async fn for_service(
    conf: &aws_config::SdkConfig,
    service: &str,
    configured: Option<&str>,
    transport: Option<&Transport>,
) -> aws_config::SdkConfig {
    let proxied = transport.is_some_and(|t| t.proxy.is_some());
    if let Some(ep) = custom_endpoint(service, configured) {
        let b = conf.clone().into_builder().endpoint_url(ep);
        return b.use_dual_stack(false).build();
    }
    let region = conf.region().map(|r| r.to_string());
    let (Some(true), false, Some(region)) = (conf.use_dual_stack(), proxied, region) else {
        return conf.clone();
    };
    let host = dual_stack_host(service, &region);
    match resolves(&host).await {
        Ok(()) => conf.clone(),
        Err(why) => {
            tracing::warn!(
                "{host} {why}: {} is called by its usual name instead",
                service.to_lowercase()
            );
            conf.clone().into_builder().use_dual_stack(false).build()
        }
    }
}

/// The dual-stack name of a service's endpoint in `region` (`AWS_ENDPOINT_URL_<SERVICE>`
/// naming): its endpoint prefix, the Region, the partition's dual-stack suffix.
pub(crate) fn dual_stack_host(service: &str, region: &str) -> String {
    let prefix = match service {
        "AUTO_SCALING" => "autoscaling".to_string(),
        s => s.to_lowercase(),
    };
    let suffix = crate::base::ecr::dual_stack_suffix(region);
    format!("{prefix}.{region}.{suffix}")
}

/// Whether `host` has an address: `Err` says why not. A lookup that does not answer within 2 s
/// proves nothing, and is taken as resolving.
async fn resolves(host: &str) -> Result<(), String> {
    let lookup = tokio::net::lookup_host((host, 443));
    match tokio::time::timeout(Duration::from_secs(2), lookup).await {
        Ok(Ok(a)) => match a.count() {
            0 => Err("has no address".into()),
            _ => Ok(()),
        },
        Ok(Err(e)) => Err(format!("does not resolve ({e})")),
        Err(_) => Ok(()),
    }
}

/// Where a boot's AWS calls go beyond the SDK's defaults, handed to the units that call AWS
/// after the run (in their jobs), so that they call as the boot did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Endpoints {
    /// Where the boot found IMDS: the role's credentials are read there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imds: Option<String>,
    /// The dual-stack names, or not; absent: the SDK's own choice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dual_stack: Option<bool>,
}

impl Endpoints {
    pub fn is_default(&self) -> bool {
        *self == Endpoints::default()
    }
}

/// The default credential chain with its IMDS client at `endpoint` (else the chain's own
/// choice: `AWS_EC2_METADATA_SERVICE_ENDPOINT`, or IPv4's link-local address).
async fn credentials_at(
    region: &str,
    endpoint: &str,
) -> Option<aws_config::default_provider::credentials::DefaultCredentialsChain> {
    let imds = aws_config::imds::Client::builder()
        .endpoint(endpoint)
        .ok()?
        .build();
    let chain = aws_config::default_provider::credentials::DefaultCredentialsChain::builder()
        .region(aws_config::Region::new(region.to_string()))
        .imds_client(imds)
        .build()
        .await;
    Some(chain)
}

/// The SDK config for `region`: the default credential chain (the instance role on a node), the
/// SDK's own retries off, 2 s to connect and 5 s per attempt, through `transport` (a proxy, CA
/// bundles) when it has them, the role's credentials from IMDS where it says the boot found it,
/// the dual-stack names as it says. A client's own endpoint (`tagging.ec2Endpoint`,
/// `AWS_ENDPOINT_URL_EC2`) wins over both names.
pub(crate) async fn sdk_config(
    region: &str,
    transport: Option<&Transport>,
) -> aws_config::SdkConfig {
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(region.to_string()))
        .retry_config(aws_config::retry::RetryConfig::disabled())
        .timeout_config(
            aws_config::timeout::TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(2))
                .operation_attempt_timeout(Duration::from_secs(5))
                .build(),
        );
    let Some(t) = transport else {
        return loader.load().await;
    };
    if t.needs_client() {
        loader = loader.http_client(crate::aws::http::client(t));
    }
    if let Some(on) = t.endpoints.dual_stack {
        loader = loader.use_dual_stack(on);
    }
    if let Some(endpoint) = &t.endpoints.imds {
        let endpoint = endpoint.trim_end_matches('/');
        if let Some(chain) = credentials_at(region, endpoint).await {
            loader = loader.credentials_provider(chain);
        }
    }
    loader.load().await
}

/// What one failed call means for the next one.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Class {
    Retry,
    Denied,
    NotFound,
    Fatal,
}

/// Classify an EC2, SSM or EKS error code (`None`: a transport error or a timeout). Throttling,
/// server errors and EC2's eventual consistency (`InvalidInstanceID.NotFound` right after
/// launch) retry; a denial names the statement; a missing parameter or cluster is not found;
/// any other client error is final.
pub(crate) fn classify(code: Option<&str>, http_status: Option<u16>) -> Class {
    match code {
        Some(
            "RequestLimitExceeded"
            | "Throttling"
            | "ThrottlingException"
            | "TooManyRequestsException"
            | "InvalidInstanceID.NotFound"
            | "InternalError"
            | "InternalFailure"
            | "InternalServerError"
            | "ServerException"
            | "ServiceUnavailable"
            | "ServiceUnavailableException"
            | "Unavailable",
        ) => Class::Retry,
        Some(c)
            if c == "UnauthorizedOperation"
                || c.starts_with("AccessDenied")
                || c == "AuthFailure" =>
        {
            Class::Denied
        }
        Some("ParameterNotFound" | "ResourceNotFoundException") => Class::NotFound,
        Some(_) if http_status.is_some_and(|s| s >= 500) => Class::Retry,
        Some(_) => Class::Fatal,
        None => Class::Retry,
    }
}

/// A call the instance role may not make, and the IAM statement it needs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{op}{on} was denied ({code}): the instance role needs {statement} (see docs/iam-policy.json)"
)]
pub struct Denied {
    pub op: &'static str,
    /// ` on <resource>` when the message names what was called on, else empty.
    pub on: String,
    pub code: String,
    pub statement: String,
}

/// An IAM statement allowing `action` on `resource` (a JSON ARN or list of them, quoted).
pub fn statement(action: &str, resource: &str) -> String {
    format!("{{\"Effect\":\"Allow\",\"Action\":\"{action}\",\"Resource\":{resource}}}")
}

/// What one failed AWS SDK call said: its error code, the HTTP status, and a line for logs and
/// messages (the service's message escaped, or the transport error's chain).
#[derive(Debug)]
pub(crate) struct SdkFailure {
    pub code: Option<String>,
    pub status: Option<u16>,
    pub text: String,
}

/// The code a failed call gets when the endpoint's TLS certificate is not trusted (a transport
/// error the SDK gives no code): final, never retried.
pub(crate) const UNTRUSTED: &str = "UntrustedCertificate";

/// Every SDK crate re-exports these from the same smithy runtime: one type for EC2, SSM, EKS.
type SdkError<E> = aws_sdk_ec2::error::SdkError<E, aws_sdk_ec2::config::http::HttpResponse>;

impl SdkFailure {
    pub fn of<E>(e: &SdkError<E>) -> SdkFailure
    where
        E: aws_sdk_ec2::error::ProvideErrorMetadata + std::error::Error + 'static,
    {
        use aws_sdk_ec2::error::ProvideErrorMetadata;
        let text = crate::base::text::chain(e);
        if e.code().is_none() && text.contains("invalid peer certificate: UnknownIssuer") {
            // Not a transient failure: retrying until the deadline cannot make it trusted.
            return SdkFailure {
                code: Some(UNTRUSTED.into()),
                status: None,
                text: format!("{text}: the endpoint's certificate is not trusted; give its CA in trust.caBundles (docs/private-networks.md)"),
            };
        }
        SdkFailure {
            code: e.code().map(String::from),
            status: e.raw_response().map(|r| r.status().as_u16()),
            text: match (e.code(), e.message()) {
                (Some(c), Some(m)) => format!("{c}: {}", crate::base::text::printable(m)),
                (Some(c), None) => c.to_string(),
                _ => crate::base::text::chain(e),
            },
        }
    }
}

/// [`retry::run`] for one AWS SDK operation: `send` makes one call (each counted in `calls`), `judge`
/// says what a failed one means. The SDK's own retries are off; this is the agent's policy.
pub(crate) async fn run_sdk<T, E, K, Fut>(
    policy: RetryPolicy,
    deadline: Instant,
    calls: &mut u32,
    mut send: impl FnMut() -> Fut,
    judge: impl Fn(SdkFailure) -> Verdict<K>,
) -> Result<T, Failure<K>>
where
    Fut: Future<Output = Result<T, SdkError<E>>>,
    E: aws_sdk_ec2::error::ProvideErrorMetadata + std::error::Error + 'static,
{
    let judge = &judge;
    retry::run(policy, Some(deadline), |_| {
        *calls = calls.saturating_add(1);
        let fut = send();
        async move { fut.await.map_err(|e| judge(SdkFailure::of(&e))) }
    })
    .await
}

/// One AWS operation as the agent calls it: its name, the IAM action and resource a denial
/// names, and what it acts on (for messages).
pub(crate) struct Op<'a> {
    pub name: &'static str,
    pub action: &'static str,
    /// The resource ARN (or `*`) of the statement a denial names.
    pub resource: String,
    pub on: &'a str,
}

/// Why an [`Op`] gave up.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error(transparent)]
    Denied(Denied),
    /// A client error never retried: the service's code and message.
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

impl Op<'_> {
    /// Send with the agent's retry policy: throttling, server errors and eventual consistency
    /// retry with jittered backoff until the deadline; denied and other client errors never
    /// retry.
    pub(crate) async fn call<T, E, Fut>(
        &self,
        policy: RetryPolicy,
        deadline: Instant,
        calls: &mut u32,
        send: impl FnMut() -> Fut,
    ) -> Result<T, CallError>
    where
        Fut: Future<Output = Result<T, SdkError<E>>>,
        E: aws_sdk_ec2::error::ProvideErrorMetadata + std::error::Error + 'static,
    {
        let r = run_sdk(policy, deadline, calls, send, |f| {
            match classify(f.code.as_deref(), f.status) {
                Class::Denied => Verdict::Fail(Err(f.code.unwrap_or_default())),
                Class::Fatal | Class::NotFound => Verdict::Fail(Ok(f.text)),
                Class::Retry => Verdict::Retry(f.text),
            }
        })
        .await;
        r.map_err(|f| match f {
            Failure::Fatal(Err(code)) => CallError::Denied(Denied {
                op: self.name,
                on: format!(" on {}", self.on),
                code,
                statement: statement(self.action, &format!("\"{}\"", self.resource)),
            }),
            Failure::Fatal(Ok(message)) => CallError::Fatal {
                op: self.name,
                instance_id: self.on.into(),
                message,
            },
            Failure::Deadline { attempts, last } => CallError::Deadline {
                op: self.name,
                instance_id: self.on.into(),
                attempts,
                last,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        for (code, status, class) in [
            (Some("RequestLimitExceeded"), Some(503), Class::Retry),
            (Some("ThrottlingException"), Some(400), Class::Retry),
            (Some("InvalidInstanceID.NotFound"), Some(400), Class::Retry),
            (Some("UnauthorizedOperation"), Some(403), Class::Denied),
            (Some("AccessDenied"), Some(403), Class::Denied),
            (Some("AccessDeniedException"), Some(400), Class::Denied),
            (Some("ParameterNotFound"), Some(400), Class::NotFound),
            (
                Some("ResourceNotFoundException"),
                Some(404),
                Class::NotFound,
            ),
            (Some("InvalidParameterValue"), Some(400), Class::Fatal),
            (Some("ValidationException"), Some(400), Class::Fatal),
            (Some("Weird"), Some(502), Class::Retry),
            (None, None, Class::Retry),
        ] {
            assert_eq!(classify(code, status), class, "{code:?} {status:?}");
        }
    }

    /// The name looked up before a client takes the dual-stack names is the one each SDK
    /// resolves for its service.
    #[tokio::test]
    async fn each_client_goes_where_its_own_transport_says_in_one_process() {
        // Two clients of one process, built one after the other with opposite choices: each
        // takes its own (a process-wide "first set stays" would give the second the first's).
        let t = |on: bool| Transport {
            endpoints: Endpoints {
                imds: Some("http://[fd00:ec2::254]".into()),
                dual_stack: Some(on),
            },
            ..Transport::default()
        };
        let (on, off) = (t(true), t(false));
        assert_eq!(
            sdk_config("eu-west-1", Some(&on)).await.use_dual_stack(),
            Some(true)
        );
        assert_eq!(
            sdk_config("eu-west-1", Some(&off)).await.use_dual_stack(),
            Some(false)
        );
        assert_eq!(
            sdk_config("eu-west-1", Some(&on)).await.use_dual_stack(),
            Some(true)
        );
        assert_eq!(sdk_config("eu-west-1", None).await.use_dual_stack(), None);
        // A transport of endpoints alone builds no HTTP client of the agent's own.
        assert!(!on.needs_client());
        assert_eq!(Transport::with_endpoints(None, Endpoints::default()), None);
        assert_eq!(
            Transport::with_endpoints(None, on.endpoints.clone()),
            Some(on)
        );
    }

    #[tokio::test]
    async fn the_dual_stack_name_looked_up_is_the_sdks_own_for_each_service() {
        macro_rules! sdk_url {
            ($krate:ident, $region:expr) => {{
                use $krate::config::endpoint::{DefaultResolver, Params, ResolveEndpoint};
                let p = Params::builder()
                    .region($region)
                    .use_dual_stack(true)
                    .use_fips(false)
                    .build()
                    .unwrap();
                let e = DefaultResolver::new().resolve_endpoint(&p).await.unwrap();
                e.url().to_string()
            }};
        }
        for region in ["eu-west-1", "us-gov-west-1", "cn-north-1"] {
            let want = [
                ("EC2", sdk_url!(aws_sdk_ec2, region)),
                ("AUTO_SCALING", sdk_url!(aws_sdk_autoscaling, region)),
                ("SSM", sdk_url!(aws_sdk_ssm, region)),
                ("EKS", sdk_url!(aws_sdk_eks, region)),
            ];
            for (service, url) in want {
                assert_eq!(
                    format!("https://{}", dual_stack_host(service, region)),
                    url,
                    "{service} in {region}"
                );
            }
        }
    }

    #[test]
    fn dual_stack_is_the_configs_else_on_without_ipv4_else_the_sdks() {
        assert_eq!(dual_stack_for(Some(false), false), Some(false));
        assert_eq!(dual_stack_for(Some(true), true), Some(true));
        assert_eq!(dual_stack_for(None, false), Some(true));
        assert_eq!(dual_stack_for(None, true), None);
    }

    #[test]
    fn a_clients_endpoint_is_the_given_one_then_the_services_then_the_global_one() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let both = env(&[
            ("AWS_ENDPOINT_URL_EC2", "https://ec2.env"),
            ("AWS_ENDPOINT_URL", "https://all.env"),
        ]);
        let given = Some("https://vpce.example");
        assert_eq!(
            endpoint_in("EC2", given, both).unwrap(),
            "https://vpce.example"
        );
        assert_eq!(endpoint_in("EC2", None, both).unwrap(), "https://ec2.env");
        assert_eq!(endpoint_in("SSM", None, both).unwrap(), "https://all.env");
        assert_eq!(endpoint_in("SSM", None, env(&[])), None);
        let empty = env(&[
            ("AWS_ENDPOINT_URL_EC2", ""),
            ("AWS_ENDPOINT_URL", "https://all.env"),
        ]);
        assert_eq!(endpoint_in("EC2", None, empty).unwrap(), "https://all.env");
        // The SDK's switch passes over the environment, never the config.
        let ignored = env(&[
            ("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true"),
            ("AWS_ENDPOINT_URL_EC2", "https://ec2.env"),
        ]);
        assert_eq!(endpoint_in("EC2", None, ignored), None);
        assert_eq!(
            endpoint_in("EC2", given, ignored).unwrap(),
            "https://vpce.example"
        );
    }

    #[test]
    fn endpoints_travel_as_json() {
        assert_eq!(serde_json::to_string(&Endpoints::default()).unwrap(), "{}");
        let e = Endpoints {
            imds: Some("http://[fd00:ec2::254]".into()),
            dual_stack: Some(false),
        };
        let text = serde_json::to_string(&e).unwrap();
        assert_eq!(
            text,
            r#"{"imds":"http://[fd00:ec2::254]","dualStack":false}"#
        );
        assert_eq!(serde_json::from_str::<Endpoints>(&text).unwrap(), e);
    }

    #[test]
    fn a_denial_names_the_statement() {
        let d = Denied {
            op: "CreateTags",
            on: " on i-1".into(),
            code: "UnauthorizedOperation".into(),
            statement: statement("ec2:CreateTags", "\"arn:aws:ec2:*:*:instance/i-1\""),
        };
        assert_eq!(
            d.to_string(),
            "CreateTags on i-1 was denied (UnauthorizedOperation): the instance role needs {\"Effect\":\"Allow\",\"Action\":\"ec2:CreateTags\",\"Resource\":\"arn:aws:ec2:*:*:instance/i-1\"} (see docs/iam-policy.json)"
        );
    }
}
