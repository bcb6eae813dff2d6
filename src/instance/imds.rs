//! EC2 instance metadata over IMDSv2.
//!
//! One HTTP client for all reads; one session token (PUT with a TTL) cached and shared by
//! concurrent reads; a 401 drops the token and the retry fetches a new one; 404 is "absent";
//! 5xx, refused connections and timeouts retry with capped, jittered backoff; every read runs
//! under one total deadline. IMDSv1 (no token) only when the config opts in.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::base::retry::{self, Failure, RetryPolicy, Verdict};
use crate::instance::metadata::Metadata;
use crate::instance::metadata::UserData;
use std::sync::atomic::Ordering;

pub(crate) const DEFAULT_ENDPOINT: &str = "http://169.254.169.254";
pub(crate) const ENDPOINT_ENV: &str = "AWS_EC2_METADATA_SERVICE_ENDPOINT";
/// The metadata API version all paths use.
pub(crate) const API_VERSION: &str = "latest";
pub(crate) const TOKEN_TTL_SECONDS: u32 = 21_600;
const TOKEN_HEADER: &str = "x-aws-ec2-metadata-token";
const TOKEN_TTL_HEADER: &str = "x-aws-ec2-metadata-token-ttl-seconds";

#[derive(Debug, thiserror::Error)]
pub enum ImdsError {
    #[error("instance metadata at {endpoint} did not answer within {deadline_ms} ms ({last}); not on EC2? On a dev box pass --metadata FILE (see examples/metadata.json)")]
    Deadline {
        endpoint: String,
        deadline_ms: u128,
        last: String,
    },
    #[error("instance metadata {path}: HTTP {status}")]
    Status { path: String, status: u16 },
    #[error("IMDSv2 token request refused with HTTP {status} at {endpoint}; if this instance only offers IMDSv1, set imds.allowV1Fallback (not recommended)")]
    TokenRefused { endpoint: String, status: u16 },
    #[error("instance metadata {path} is required but absent (404)")]
    Missing { path: String },
    #[error("instance metadata at {endpoint} is unreachable ({last}); not on EC2? On a dev box pass --metadata FILE (see examples/metadata.json)")]
    Unreachable { endpoint: String, last: String },
    #[error("bad IMDS endpoint `{0}`: use a URL like http://169.254.169.254")]
    Endpoint(String),
}

/// How long to keep trying when IMDS has never answered at all (a dev box, not EC2).
pub(crate) const UNREACHABLE_AFTER: Duration = Duration::from_secs(2);

/// Why an attempt failed, and whether to try again.
enum Attempt {
    Retry(String),
    /// Could not connect at all.
    NoConnection(String),
    /// 401 for the request that carried this token.
    Unauthorized(Option<String>),
    Fatal(ImdsError),
}

pub struct ImdsClient {
    endpoint: String,
    http: Client<HttpConnector, Full<Bytes>>,
    token: Mutex<Option<(String, Instant)>>,
    allow_v1: bool,
    attempt_timeout: Duration,
    created: Instant,
    ever_connected: std::sync::atomic::AtomicBool,
    /// Why the most recent failed attempt failed, for the deadline error.
    last_error: std::sync::Mutex<String>,
}

/// IMDS on an IPv6-only subnet (Nitro, the instance's metadata options enabling the IPv6
/// endpoint).
pub const IPV6_ENDPOINT: &str = "http://[fd00:ec2::254]";
/// `imds.endpoint`'s word for trying IPv4's address, then IPv6's.
pub const AUTO: &str = "auto";

/// The endpoint to use: the config's, else the environment's, else the link-local address.
pub(crate) fn resolve_endpoint(config: Option<&str>) -> String {
    candidates(config).swap_remove(0)
}

/// The endpoints to try, in order: the config's URL alone; else the environment's alone; else
/// (none, or `auto`) IPv4's link-local address (or the environment's), then IPv6's.
pub fn candidates(config: Option<&str>) -> Vec<String> {
    let env = std::env::var(ENDPOINT_ENV).ok().filter(|s| !s.is_empty());
    candidates_given(config, env)
}

fn candidates_given(config: Option<&str>, env: Option<String>) -> Vec<String> {
    let first = match (config, env) {
        (Some(c), _) if c != AUTO => return vec![c.trim_end_matches('/').to_string()],
        (None, Some(e)) => return vec![e.trim_end_matches('/').to_string()],
        (_, Some(e)) => e.trim_end_matches('/').to_string(),
        (_, None) => DEFAULT_ENDPOINT.to_string(),
    };
    vec![first, IPV6_ENDPOINT.to_string()]
}

/// A client at the first of `endpoints` that answers, under `deadline` in all: the next is
/// tried only when this one was never reached ([`ImdsError::Unreachable`]). One endpoint is
/// taken as it is, unasked.
pub async fn first_answering(
    endpoints: &[String],
    allow_v1: bool,
    deadline: Duration,
) -> Result<ImdsClient, ImdsError> {
    let end = Instant::now() + deadline;
    let mut last = None;
    for e in endpoints {
        let client = ImdsClient::new(e, allow_v1)?;
        if endpoints.len() == 1 {
            return Ok(client);
        }
        let left = end.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, client.get_owned(&md("instance-id"))).await {
            Err(_) => return Err(deadline_error(&client, deadline)),
            Ok(Err(e @ ImdsError::Unreachable { .. })) => {
                tracing::info!("IMDS: {e}; trying the next endpoint");
                last = Some(e);
            }
            Ok(_) => return Ok(client),
        }
    }
    Err(last.unwrap_or_else(|| ImdsError::Endpoint(String::new())))
}

impl ImdsClient {
    pub fn new(endpoint: &str, allow_v1: bool) -> Result<Self, ImdsError> {
        if !(endpoint.starts_with("http://")) || endpoint.parse::<hyper::Uri>().is_err() {
            return Err(ImdsError::Endpoint(endpoint.to_string()));
        }
        let mut conn = HttpConnector::new();
        conn.set_connect_timeout(Some(Duration::from_millis(500)));
        conn.set_nodelay(true);
        let http = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(5))
            .build(conn);
        Ok(ImdsClient {
            endpoint: endpoint.trim_end_matches('/').to_string(),
            http,
            token: Mutex::new(None),
            allow_v1,
            attempt_timeout: Duration::from_secs(1),
            created: Instant::now(),
            ever_connected: Default::default(),
            last_error: Default::default(),
        })
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
    ) -> Result<(StatusCode, Bytes), (bool, String)> {
        let mut b = Request::builder()
            .method(method)
            .uri(format!("{}{}", self.endpoint, path));
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        let req = b
            .body(Full::new(Bytes::new()))
            .map_err(|e| (false, e.to_string()))?;
        let fut = async {
            let resp = self
                .http
                .request(req)
                .await
                .map_err(|e| (e.is_connect(), crate::base::text::chain(&e)))?;
            self.ever_connected.store(true, Ordering::Relaxed);
            let status = resp.status();
            let body = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| (false, e.to_string()))?
                .to_bytes();
            Ok((status, body))
        };
        match tokio::time::timeout(self.attempt_timeout, fut).await {
            Ok(r) => r,
            Err(_) => Err((
                false,
                format!("no answer within {:?}", self.attempt_timeout),
            )),
        }
    }

    /// The session token, fetched once and shared; `None` in IMDSv1 fallback.
    async fn token(&self) -> Result<Option<String>, Attempt> {
        let mut guard = self.token.lock().await;
        if let Some((t, exp)) = guard.as_ref() {
            if Instant::now() + Duration::from_secs(60) < *exp {
                return Ok(Some(t.clone()));
            }
        }
        let ttl = TOKEN_TTL_SECONDS.to_string();
        match self
            .send(
                Method::PUT,
                &format!("/{API_VERSION}/api/token"),
                &[(TOKEN_TTL_HEADER, &ttl)],
            )
            .await
        {
            Ok((s, body)) if s.is_success() => {
                let body = String::from_utf8_lossy(&body);
                let exp = Instant::now() + Duration::from_secs(u64::from(TOKEN_TTL_SECONDS));
                *guard = Some((body.trim().to_string(), exp));
                Ok(Some(body.trim().to_string()))
            }
            Ok((s, _)) if s.is_server_error() => {
                Err(Attempt::Retry(format!("token PUT: HTTP {s}")))
            }
            Ok((s, _)) if self.allow_v1 && matches!(s.as_u16(), 403..=405) => {
                tracing::warn!(
                    status = s.as_u16(),
                    "IMDSv2 token refused; using IMDSv1 as imds.allowV1Fallback permits"
                );
                Ok(None)
            }
            Ok((s, _)) => Err(Attempt::Fatal(ImdsError::TokenRefused {
                endpoint: self.endpoint.clone(),
                status: s.as_u16(),
            })),
            Err((true, e)) => Err(Attempt::NoConnection(format!("token PUT: {e}"))),
            Err((false, e)) => Err(Attempt::Retry(format!("token PUT: {e}"))),
        }
    }

    async fn attempt(&self, path: &str) -> Result<Option<Bytes>, Attempt> {
        let token = self.token().await?;
        let headers: Vec<(&str, &str)> = match &token {
            Some(t) => vec![(TOKEN_HEADER, t.as_str())],
            None => vec![],
        };
        match self.send(Method::GET, path, &headers).await {
            Ok((s, body)) if s.is_success() => Ok(Some(body)),
            Ok((StatusCode::NOT_FOUND, _)) => Ok(None),
            Ok((StatusCode::UNAUTHORIZED, _)) => Err(Attempt::Unauthorized(token)),
            Ok((s, _)) if s.is_server_error() => Err(Attempt::Retry(format!("{path}: HTTP {s}"))),
            Ok((s, _)) => Err(Attempt::Fatal(ImdsError::Status {
                path: path.to_string(),
                status: s.as_u16(),
            })),
            Err((true, e)) => Err(Attempt::NoConnection(format!("{path}: {e}"))),
            Err((false, e)) => Err(Attempt::Retry(format!("{path}: {e}"))),
        }
    }

    async fn drop_token(&self, used: Option<&str>) {
        let mut g = self.token.lock().await;
        if g.as_ref().map(|(t, _)| t.as_str()) == used {
            *g = None;
        }
    }

    /// GET a metadata path (`/latest/meta-data/...`) as text; `Ok(None)` on 404. Retries until
    /// the caller's deadline (the caller wraps the whole read in one timeout).
    pub fn get<'a>(
        &'a self,
        path: &str,
    ) -> impl std::future::Future<Output = Result<Option<String>, ImdsError>> + 'a {
        let path = path.to_string();
        async move {
            let body = self.get_owned(&path).await?;
            Ok(body.map(|b| String::from_utf8_lossy(&b).into_owned()))
        }
    }

    /// GET a path's bytes as they are (the user data may be gzip).
    pub(crate) fn get_bytes<'a>(
        &'a self,
        path: &str,
    ) -> impl std::future::Future<Output = Result<Option<Bytes>, ImdsError>> + 'a {
        let path = path.to_string();
        async move { self.get_owned(&path).await }
    }

    async fn get_owned(&self, path: &str) -> Result<Option<Bytes>, ImdsError> {
        let refreshed = std::cell::Cell::new(false);
        let r = retry::run(RETRY, None, |_| async {
            let why = match self.attempt(path).await {
                Ok(v) => return Ok(v),
                Err(Attempt::Fatal(e)) => return Err(Verdict::Fail(e)),
                Err(Attempt::Unauthorized(used)) => {
                    // Token expired or revoked: drop it (unless a concurrent read already
                    // replaced it); the next attempt uses or fetches a new one, at once the
                    // first time.
                    self.drop_token(used.as_deref()).await;
                    if !refreshed.replace(true) {
                        return Err(Verdict::RetryNow(format!("{path}: HTTP 401")));
                    }
                    format!("{path}: HTTP 401 after a token refresh")
                }
                Err(Attempt::NoConnection(why))
                    if !self.ever_connected.load(Ordering::Relaxed)
                        && self.created.elapsed() >= UNREACHABLE_AFTER =>
                {
                    return Err(Verdict::Fail(ImdsError::Unreachable {
                        endpoint: self.endpoint.clone(),
                        last: why,
                    }));
                }
                Err(Attempt::Retry(why)) | Err(Attempt::NoConnection(why)) => why,
            };
            if let Ok(mut last) = self.last_error.lock() {
                last.clone_from(&why);
            }
            Err(Verdict::Retry(why))
        })
        .await;
        r.map_err(|f| match f {
            Failure::Fatal(e) => e,
            // Unreachable: the loop has no deadline of its own (the caller's timeout bounds it).
            Failure::Deadline { last, .. } => ImdsError::Unreachable {
                endpoint: self.endpoint.clone(),
                last,
            },
        })
    }
}

/// IMDS is local: 50 ms doubling up to 1 s.
const RETRY: RetryPolicy = RetryPolicy {
    base: Duration::from_millis(50),
    cap: Duration::from_secs(1),
};

pub(crate) fn md(path: &str) -> String {
    format!("/{API_VERSION}/meta-data/{path}")
}

/// The user data's path.
pub(crate) fn user_data_path() -> String {
    format!("/{API_VERSION}/user-data")
}

/// The instance's user data alone (`Absent`: the instance has none), under `deadline`: read
/// before the config exists when the config is in it (`--config imds://user-data`).
pub async fn user_data(client: &ImdsClient, deadline: Duration) -> Result<UserData, ImdsError> {
    match tokio::time::timeout(deadline, user_data_bytes(client)).await {
        Ok(r) => r,
        Err(_) => Err(deadline_error(client, deadline)),
    }
}

fn deadline_error(client: &ImdsClient, deadline: Duration) -> ImdsError {
    ImdsError::Deadline {
        endpoint: client.endpoint().to_string(),
        deadline_ms: deadline.as_millis(),
        last: match client.last_error.lock().map(|l| l.clone()) {
            Ok(l) if !l.is_empty() => l,
            _ => "no answer".into(),
        },
    }
}

/// What [`fetch`] is given, and what it reads beyond what every run needs.
#[derive(Debug, Default)]
pub struct Ask {
    /// The user data when it was already read (with the config in it), so that it is not read
    /// twice; `Unknown`: read it.
    pub user_data: UserData,
    /// Read the VPC's CIDR blocks too: a config with a proxy puts them in NO_PROXY.
    pub vpc_cidr_blocks: bool,
}

/// Read everything the agent needs, concurrently, under one total deadline.
pub async fn fetch(
    client: &ImdsClient,
    deadline: Duration,
    ask: Ask,
) -> Result<Metadata, ImdsError> {
    if let Ok(mut last) = client.last_error.lock() {
        last.clear();
    }
    let work = async {
        let (id, v4, v6, itype, region, az, tag_keys, lifecycle, user_data, vpc, host) = tokio::join!(
            client.get(&md("instance-id")),
            client.get(&md("local-ipv4")),
            client.get(&md("ipv6")),
            client.get(&md("instance-type")),
            client.get(&md("placement/region")),
            client.get(&md("placement/availability-zone")),
            client.get(&md("tags/instance")),
            client.get(&md(crate::instance::lifecycle::IMDS_PATH)),
            async {
                match ask.user_data {
                    UserData::Unknown => user_data_bytes(client).await,
                    known => Ok(known),
                }
            },
            async {
                match ask.vpc_cidr_blocks {
                    true => vpc_cidr_blocks(client).await,
                    false => Ok(None),
                }
            },
            client.get(&md("local-hostname")),
        );
        let need = |v: Result<Option<String>, ImdsError>, p: &str| -> Result<String, ImdsError> {
            v?.map(|s| s.trim().to_string())
                .ok_or_else(|| ImdsError::Missing { path: md(p) })
        };
        let tags = read_tags(client, tag_keys?).await?;
        Ok(Metadata {
            instance_id: need(id, "instance-id")?,
            // An empty answer is no address, as `has_ipv4` reads it.
            private_ipv4: v4?.map(|s| s.trim().to_string()).filter(|s| !s.is_empty()),
            ipv6: v6?.map(|s| s.lines().next().unwrap_or("").trim().to_string()),
            instance_type: need(itype, "instance-type")?,
            local_hostname: host?
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty()),
            region: need(region, "placement/region")?,
            availability_zone: need(az, "placement/availability-zone")?,
            // Read as nodeadm reads it, reduced at once to what the plan needs; never kept or
            // logged (it may hold secrets such as the cluster CA).
            user_data: user_data?,
            // IMDS names no group: the group is one of the tags (`Facts::autoscaling_group`).
            autoscaling_group_name: None,
            target_lifecycle_state: lifecycle?
                .as_deref()
                .and_then(crate::instance::lifecycle::parse),
            vpc_cidr_blocks: vpc?,
            tags,
        })
    };
    match tokio::time::timeout(deadline, work).await {
        Ok(r) => r,
        Err(_) => Err(deadline_error(client, deadline)),
    }
}

/// The user data's bytes as they are (`Absent`: the instance has none).
async fn user_data_bytes(client: &ImdsClient) -> Result<UserData, ImdsError> {
    let b = client.get_bytes(&user_data_path()).await?;
    Ok(b.map_or(UserData::Absent, |b| UserData::Bytes(b.to_vec())))
}

/// Each tag's value, for the keys IMDS listed (`None`: instance-metadata tags are off).
async fn read_tags(
    client: &ImdsClient,
    keys: Option<String>,
) -> Result<Option<BTreeMap<String, String>>, ImdsError> {
    let Some(list) = keys else {
        return Ok(None);
    };
    let keys: Vec<String> = list
        .lines()
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(String::from)
        .collect();
    let values = futures_join_all(
        keys.iter()
            .map(|k| client.get(&md(&format!("tags/instance/{k}")))),
    )
    .await;
    let mut m = BTreeMap::new();
    for (k, v) in keys.into_iter().zip(values) {
        if let Some(v) = v? {
            m.insert(k, v);
        }
    }
    Ok(Some(m))
}

/// The instance's region alone, for a lookup that runs beside [`fetch`] (the token is shared).
pub async fn region(client: &ImdsClient, deadline: Duration) -> Result<String, String> {
    match tokio::time::timeout(deadline, client.get(&md("placement/region"))).await {
        Ok(Ok(Some(r))) if !r.trim().is_empty() => Ok(r.trim().to_string()),
        Ok(Ok(_)) => Err(format!("IMDS has no {}", md("placement/region"))),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!(
            "IMDS did not answer {} within {} ms",
            md("placement/region"),
            deadline.as_millis()
        )),
    }
}

/// Whether the instance has a private IPv4 address (IMDS `local-ipv4`, which an instance on an
/// IPv6-only subnet lacks). When IMDS does not say within `deadline`, `true`: the IPv4 names
/// stay, as the metadata read that follows fails the run anyway.
pub async fn has_ipv4(client: &ImdsClient, deadline: Duration) -> bool {
    match tokio::time::timeout(deadline, client.get(&md("local-ipv4"))).await {
        Ok(Ok(None)) => false,
        Ok(Ok(Some(v))) => !v.trim().is_empty(),
        _ => true,
    }
}

/// The VPC's CIDR blocks (IPv4, then IPv6 when the VPC has any), as IMDS gives them for the
/// primary interface (`mac`, then `network/interfaces/macs/<mac>/vpc-ipv4-cidr-blocks` and
/// `vpc-ipv6-cidr-blocks`). `None` when IMDS serves no interface or no IPv4 blocks.
async fn vpc_cidr_blocks(client: &ImdsClient) -> Result<Option<Vec<String>>, ImdsError> {
    let Some(mac) = client.get(&md("mac")).await? else {
        return Ok(None);
    };
    let base = format!("network/interfaces/macs/{}", mac.trim());
    let (v4, v6) = tokio::join!(
        client.get(&md(&format!("{base}/vpc-ipv4-cidr-blocks"))),
        client.get(&md(&format!("{base}/vpc-ipv6-cidr-blocks"))),
    );
    let Some(v4) = v4? else {
        return Ok(None);
    };
    let lines = |t: &str| -> Vec<String> {
        t.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect()
    };
    let mut all = lines(&v4);
    all.extend(v6?.as_deref().map(lines).unwrap_or_default());
    Ok(Some(all))
}

/// Run futures concurrently and collect their outputs in order.
async fn futures_join_all<F: std::future::Future>(futs: impl Iterator<Item = F>) -> Vec<F::Output> {
    join_vec(futs.map(Box::pin).collect()).await
}

async fn join_vec<F: std::future::Future + Unpin>(mut futs: Vec<F>) -> Vec<F::Output> {
    use std::future::poll_fn;
    use std::task::Poll;
    let mut outs: Vec<Option<F::Output>> = futs.iter().map(|_| None).collect();
    poll_fn(|cx| {
        let mut pending = false;
        for (i, f) in futs.iter_mut().enumerate() {
            if outs[i].is_none() {
                match std::pin::Pin::new(&mut *f).poll(cx) {
                    Poll::Ready(v) => outs[i] = Some(v),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    // Ready only once every future has completed: every slot is filled.
    outs.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoints_to_try_are_the_configs_the_environments_or_ipv4s_then_ipv6s() {
        let env = || Some("http://127.0.0.1:1338/".to_string());
        let url = Some("http://[fd00:ec2::254]/");
        assert_eq!(candidates_given(url, env()), ["http://[fd00:ec2::254]"]);
        assert_eq!(candidates_given(None, env()), ["http://127.0.0.1:1338"]);
        assert_eq!(
            candidates_given(Some(AUTO), env()),
            ["http://127.0.0.1:1338", IPV6_ENDPOINT]
        );
        for config in [None, Some(AUTO)] {
            assert_eq!(
                candidates_given(config, None),
                [DEFAULT_ENDPOINT, IPV6_ENDPOINT]
            );
        }
    }
}
