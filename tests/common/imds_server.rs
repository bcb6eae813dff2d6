//! An IMDSv2 server that behaves like the real one where the agent can tell: token PUT with a
//! TTL header (1..=21600, else 400), GETs without a valid token 401, expired tokens 401,
//! unknown paths 404, tags 404 when instance-metadata tags are off; plus fault injection.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};

#[derive(Default)]
pub struct State {
    pub data: BTreeMap<String, String>,
    /// Served at /latest/user-data as these bytes (404 when `None`); EC2 serves gzip'd user
    /// data as it is.
    pub user_data: Option<Vec<u8>>,
    /// Served under /latest/dynamic/ (the instance identity document, for cloud-init).
    pub dynamic: BTreeMap<String, String>,
    /// `None`: instance-metadata tags are off.
    pub tags: Option<BTreeMap<String, String>>,
    /// Answer 500 to this many requests first.
    pub fail_first: usize,
    /// Delay every answer by this much.
    pub delay: Duration,
    /// Answer token PUTs with this status (an IMDSv1-only endpoint or proxy refusing PUT).
    pub refuse_token_with: Option<u16>,
    /// Serve GETs without a token (IMDSv1 allowed on the instance).
    pub v1_allowed: bool,
    /// After this many successful GETs, expire every token once.
    pub expire_tokens_after_gets: Option<usize>,
    tokens: HashMap<String, Instant>,
    pub puts: usize,
    pub gets: usize,
    pub unauthorized: usize,
    pub server_errors: usize,
    pub paths: Vec<String>,
}

pub struct ImdsServer {
    pub addr: SocketAddr,
    pub state: Arc<Mutex<State>>,
}

impl ImdsServer {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A server for a typical instance.
    pub fn start() -> ImdsServer {
        let mut s = State::default();
        for (k, v) in [
            ("instance-id", "i-0123456789abcdef0"),
            ("local-ipv4", "10.0.12.34"),
            ("local-hostname", "ip-10-0-12-34.eu-west-1.compute.internal"),
            ("instance-type", "m6i.large"),
            ("placement/region", "eu-west-1"),
            ("placement/availability-zone", "eu-west-1a"),
        ] {
            s.data.insert(k.to_string(), v.to_string());
        }
        s.tags = Some(BTreeMap::from([
            (
                "aws:autoscaling:groupName".to_string(),
                "eks-scaler-asg".to_string(),
            ),
            (
                "kubernetes.io/cluster/prod-eu".to_string(),
                "owned".to_string(),
            ),
        ]));
        Self::start_with(s)
    }

    pub fn start_with(state: State) -> ImdsServer {
        Self::start_in(None, state)
    }

    /// The server on `bind` alone (`[::1]:0`: an IMDS that answers only over IPv6).
    pub fn start_on(bind: &str, state: State) -> ImdsServer {
        let state = Arc::new(Mutex::new(state));
        let addr = super::ec2_server::serve_on(None, bind, state.clone(), handle);
        ImdsServer { addr, state }
    }

    /// [`ImdsServer::start_on`] in the network namespace `netns`.
    pub fn start_on_in(netns: &std::path::Path, bind: &str, state: State) -> ImdsServer {
        let state = Arc::new(Mutex::new(state));
        let addr = super::ec2_server::serve_on(Some(netns), bind, state.clone(), handle);
        ImdsServer { addr, state }
    }

    /// The server in the network namespace `netns` (the control-plane suite's).
    pub fn start_in(netns: Option<&std::path::Path>, state: State) -> ImdsServer {
        let state = Arc::new(Mutex::new(state));
        let addr = super::ec2_server::serve_in(netns, state.clone(), handle);
        ImdsServer { addr, state }
    }
}

fn reply(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "text/plain")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

async fn handle(
    state: Arc<Mutex<State>>,
    req: Request<()>,
    _body: Bytes,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let delay = {
        let mut s = state.lock().unwrap();
        s.paths
            .push(format!("{} {}", req.method(), req.uri().path()));
        if s.fail_first > 0 {
            s.fail_first -= 1;
            s.server_errors += 1;
            return Ok(reply(StatusCode::INTERNAL_SERVER_ERROR, "injected fault"));
        }
        s.delay
    };
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let mut s = state.lock().unwrap();
    let path = versioned(req.uri().path());
    if path == "/latest/api/token" {
        return Ok(token(&mut s, &req));
    }
    if req.method() != hyper::Method::GET {
        return Ok(reply(StatusCode::METHOD_NOT_ALLOWED, ""));
    }
    if !authorized(&mut s, &req) {
        return Ok(reply(StatusCode::UNAUTHORIZED, ""));
    }
    Ok(get(&s, &path))
}

/// A token PUT: a TTL of 1..=21600 seconds echoed, as the real service does.
fn token(s: &mut State, req: &Request<()>) -> Response<Full<Bytes>> {
    if req.method() != hyper::Method::PUT {
        return reply(StatusCode::METHOD_NOT_ALLOWED, "");
    }
    let ttl = req
        .headers()
        .get("x-aws-ec2-metadata-token-ttl-seconds")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(code) = s.refuse_token_with {
        return reply(StatusCode::from_u16(code).unwrap(), "");
    }
    let Some(ttl) = ttl.filter(|t| (1..=21600).contains(t)) else {
        return reply(StatusCode::BAD_REQUEST, "bad ttl");
    };
    s.puts += 1;
    let token = format!("token-{}", s.puts);
    s.tokens
        .insert(token.clone(), Instant::now() + Duration::from_secs(ttl));
    // The real service echoes the TTL; aws-config's IMDS client refuses a token without it.
    let mut r = reply(StatusCode::OK, &token);
    r.headers_mut()
        .insert("x-aws-ec2-metadata-token-ttl-seconds", ttl.into());
    r
}

/// Whether a GET may be served (a valid token, or none where IMDSv1 is allowed), counted; a
/// served GET may expire every token (`expire_tokens_after_gets`).
fn authorized(s: &mut State, req: &Request<()>) -> bool {
    let valid = req
        .headers()
        .get("x-aws-ec2-metadata-token")
        .and_then(|v| v.to_str().ok())
        .and_then(|t| s.tokens.get(t))
        .is_some_and(|exp| *exp > Instant::now());
    let tokenless = req.headers().get("x-aws-ec2-metadata-token").is_none();
    if !(valid || (s.v1_allowed && tokenless)) {
        s.unauthorized += 1;
        return false;
    }
    s.gets += 1;
    if s.expire_tokens_after_gets == Some(s.gets) {
        s.tokens.clear();
        s.expire_tokens_after_gets = None;
    }
    true
}

/// An authorized GET of `path`: user data, the dynamic tree, or instance metadata.
fn get(s: &State, path: &str) -> Response<Full<Bytes>> {
    if path == "/latest/user-data" {
        return match &s.user_data {
            Some(u) => Response::builder()
                .status(StatusCode::OK)
                .header("content-type", "application/octet-stream")
                .body(Full::new(Bytes::from(u.clone())))
                .unwrap(),
            None => reply(StatusCode::NOT_FOUND, ""),
        };
    }
    if let Some(rest) = path.strip_prefix("/latest/dynamic/") {
        return found(lookup(&s.dynamic, rest));
    }
    match path.strip_prefix("/latest/meta-data/") {
        Some(rest) => meta_data(s, rest),
        None => reply(StatusCode::NOT_FOUND, ""),
    }
}

/// 200 with the value, or 404.
fn found(v: Option<String>) -> Response<Full<Bytes>> {
    match v {
        Some(v) => reply(StatusCode::OK, &v),
        None => reply(StatusCode::NOT_FOUND, ""),
    }
}

/// Instance metadata under /latest/meta-data/: the tags only when they are on.
fn meta_data(s: &State, rest: &str) -> Response<Full<Bytes>> {
    if rest == "tags/" && s.tags.is_some() {
        return reply(StatusCode::OK, "instance");
    }
    if rest == "tags/instance" {
        return found(
            s.tags
                .as_ref()
                .map(|t| t.keys().cloned().collect::<Vec<_>>().join("\n")),
        );
    }
    if let Some(k) = rest.strip_prefix("tags/instance/") {
        return found(s.tags.as_ref().and_then(|t| t.get(k)).cloned());
    }
    let mut listing = lookup(&s.data, rest);
    if rest.is_empty() && s.tags.is_some() {
        // Instance-metadata tags appear in the top listing only when they are on.
        let mut entries: Vec<&str> = listing.as_deref().unwrap_or("").lines().collect();
        entries.push("tags/");
        entries.sort_unstable();
        listing = Some(entries.join("\n"));
    }
    found(listing)
}

/// IMDS serves every API version (`/2009-04-04/…`, `/2021-03-23/…`) beside `/latest/`; this
/// server holds one tree, so a dated prefix reads as `/latest/`.
fn versioned(path: &str) -> String {
    let mut parts = path.splitn(3, '/');
    let (_, version, rest) = (parts.next(), parts.next(), parts.next());
    match (version, rest) {
        (Some(v), Some(rest))
            if v.len() == 10 && v.bytes().all(|b| b.is_ascii_digit() || b == b'-') =>
        {
            format!("/latest/{rest}")
        }
        _ => path.to_string(),
    }
}

/// A leaf's value, or for `dir/` (and the empty top) the listing IMDS gives: one entry per
/// line, sub-directories with a trailing `/`.
fn lookup(tree: &BTreeMap<String, String>, path: &str) -> Option<String> {
    if let Some(v) = tree.get(path) {
        return Some(v.clone());
    }
    if !(path.is_empty() || path.ends_with('/')) {
        // A directory asked for without its slash lists it too.
        return lookup(tree, &format!("{path}/"));
    }
    let mut entries: Vec<String> = tree
        .keys()
        .filter_map(|k| k.strip_prefix(path))
        .map(|r| match r.split_once('/') {
            Some((dir, _)) => format!("{dir}/"),
            None => r.to_string(),
        })
        .collect();
    entries.dedup();
    (!entries.is_empty()).then(|| entries.join("\n"))
}
