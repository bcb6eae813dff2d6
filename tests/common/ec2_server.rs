//! A local EC2 Query API server for the failure paths moto cannot produce: it answers
//! DescribeTags and CreateTags, with scripted errors (RequestLimitExceeded, AccessDenied,
//! InvalidInstanceID.NotFound) and a record of every call. Also the small HTTP plumbing the
//! IMDS server shares.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

/// Serve `handler` on 127.0.0.1 (a free port) from a runtime on its own thread, so both
/// blocking and async tests can use it; in the network namespace `netns` (its thread and runtime
/// join it first), or in this process's. The handler gets the request and its whole body.
pub fn serve_in<S, F, Fut>(
    netns: Option<&std::path::Path>,
    state: Arc<Mutex<S>>,
    handler: F,
) -> SocketAddr
where
    S: Send + 'static,
    F: Fn(Arc<Mutex<S>>, Request<()>, Bytes) -> Fut + Send + Sync + Copy + 'static,
    Fut: Future<Output = Result<Response<Full<Bytes>>, Infallible>> + Send + 'static,
{
    serve_on(netns, "127.0.0.1:0", state, handler)
}

/// [`serve_in`] on the address `bind` (an IPv6 one: `[::1]:0`).
pub fn serve_on<S, F, Fut>(
    netns: Option<&std::path::Path>,
    bind: &str,
    state: Arc<Mutex<S>>,
    handler: F,
) -> SocketAddr
where
    S: Send + 'static,
    F: Fn(Arc<Mutex<S>>, Request<()>, Bytes) -> Fut + Send + Sync + Copy + 'static,
    Fut: Future<Output = Result<Response<Full<Bytes>>, Infallible>> + Send + 'static,
{
    let netns = netns.map(std::path::Path::to_path_buf);
    let bind = bind.to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // (This file stands alone in the benches: the namespace joined here, not via netns.rs.)
        if let Some(ns) = &netns {
            let f = std::fs::File::open(ns).unwrap();
            nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns (root)");
        }
        let listener = std::net::TcpListener::bind(bind.as_str()).unwrap();
        listener.set_nonblocking(true).unwrap();
        tx.send(listener.local_addr().unwrap()).unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let state = state.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                        let state = state.clone();
                        async move {
                            let (parts, body) = req.into_parts();
                            let body = body.collect().await.map(|b| b.to_bytes());
                            let req = Request::from_parts(parts, ());
                            handler(state, req, body.unwrap_or_default()).await
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
    });
    rx.recv().unwrap()
}

/// Test credentials for an in-process SDK client (the benches): no profile, no IMDS.
pub fn use_test_credentials() {
    // Call it first in main, before any other thread exists: setting the environment is not
    // thread-safe.
    for (k, v) in [
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
        ("AWS_CONFIG_FILE", "/nonexistent"),
        ("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent"),
    ] {
        std::env::set_var(k, v);
    }
}

/// EC2's throttling: a token bucket per API action, per account and region.
pub struct Bucket {
    pub capacity: f64,
    pub refill_per_sec: f64,
    tokens: f64,
    last: std::time::Instant,
}

impl Bucket {
    pub fn new(capacity: f64, refill_per_sec: f64) -> Bucket {
        Bucket {
            capacity,
            refill_per_sec,
            tokens: capacity,
            last: std::time::Instant::now(),
        }
    }
    pub fn take(&mut self) -> bool {
        let now = std::time::Instant::now();
        let dt = now.duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + dt * self.refill_per_sec).min(self.capacity);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[derive(Default)]
pub struct Ec2State {
    /// Throttling buckets for CreateTags and DescribeTags (`None`: unlimited).
    pub create_bucket: Option<Bucket>,
    pub describe_bucket: Option<Bucket>,
    /// When each successful CreateTags was answered.
    pub created_at: Vec<std::time::Instant>,
    /// Errors to answer CreateTags with, in order, before succeeding: (HTTP status, code).
    pub create_errors: VecDeque<(u16, &'static str)>,
    pub describe_errors: VecDeque<(u16, &'static str)>,
    pub tags: BTreeMap<String, BTreeMap<String, String>>,
    /// Every call: (action, decoded form fields).
    pub calls: Vec<(String, BTreeMap<String, String>)>,
    /// The access key each call was signed with (its `Authorization` header's credential).
    pub access_keys: Vec<String>,
    pub create_delay: std::time::Duration,
}

impl Ec2State {
    pub fn count(&self, action: &str) -> usize {
        self.calls.iter().filter(|(a, _)| a == action).count()
    }
}

pub struct Ec2Server {
    pub addr: SocketAddr,
    pub state: Arc<Mutex<Ec2State>>,
}

impl Ec2Server {
    pub fn start(state: Ec2State) -> Ec2Server {
        let state = Arc::new(Mutex::new(state));
        let addr = serve_in(None, state.clone(), handle);
        Ec2Server { addr, state }
    }
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let h = std::str::from_utf8(&b[i + 1..i + 3]).unwrap();
                out.push(u8::from_str_radix(h, 16).unwrap());
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).unwrap()
}

pub fn parse_form(body: &str) -> BTreeMap<String, String> {
    body.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn xml(status: u16, body: String) -> Response<Full<Bytes>> {
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap())
        .header("content-type", "text/xml;charset=UTF-8")
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}

fn error(status: u16, code: &str) -> Response<Full<Bytes>> {
    xml(
        status,
        format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{code}</Code><Message>injected {code}</Message></Error></Errors><RequestID>req-1</RequestID></Response>"),
    )
}

async fn handle(
    state: Arc<Mutex<Ec2State>>,
    req: Request<()>,
    body: Bytes,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let form = parse_form(&String::from_utf8_lossy(&body));
    let action = form.get("Action").cloned().unwrap_or_default();
    let auth = req.headers().get("authorization");
    let key = auth
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split("Credential=").nth(1))
        .and_then(|c| c.split('/').next())
        .unwrap_or_default()
        .to_string();
    let delay = {
        let mut s = state.lock().unwrap();
        s.calls.push((action.clone(), form.clone()));
        s.access_keys.push(key);
        s.create_delay
    };
    let answer = respond(&mut state.lock().unwrap(), &action, &form);
    // A slow answer, not a slow write: the tag is in place before the reply is late.
    if action == "CreateTags" && !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    Ok(answer)
}

fn respond(
    s: &mut Ec2State,
    action: &str,
    form: &BTreeMap<String, String>,
) -> Response<Full<Bytes>> {
    match action {
        "CreateTags" => {
            if let Some((st, code)) = s.create_errors.pop_front() {
                return error(st, code);
            }
            if let Some(b) = s.create_bucket.as_mut() {
                if !b.take() {
                    return error(503, "RequestLimitExceeded");
                }
            }
            s.created_at.push(std::time::Instant::now());
            let id = form.get("ResourceId.1").cloned().unwrap_or_default();
            let k = form.get("Tag.1.Key").cloned().unwrap_or_default();
            let v = form.get("Tag.1.Value").cloned().unwrap_or_default();
            s.tags.entry(id).or_default().insert(k, v);
            xml(200, "<CreateTagsResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>req-2</requestId><return>true</return></CreateTagsResponse>".into())
        }
        "DescribeTags" => {
            if let Some((st, code)) = s.describe_errors.pop_front() {
                return error(st, code);
            }
            if let Some(b) = s.describe_bucket.as_mut() {
                if !b.take() {
                    return error(503, "RequestLimitExceeded");
                }
            }
            let id = form.get("Filter.1.Value.1").cloned().unwrap_or_default();
            let items: String = s
                .tags
                .get(&id)
                .map(|t| {
                    t.iter()
                        .map(|(k, v)| format!("<item><resourceId>{id}</resourceId><resourceType>instance</resourceType><key>{k}</key><value>{v}</value></item>"))
                        .collect()
                })
                .unwrap_or_default();
            xml(200, format!("<DescribeTagsResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>req-3</requestId><tagSet>{items}</tagSet></DescribeTagsResponse>"))
        }
        _ => error(400, "InvalidAction"),
    }
}
