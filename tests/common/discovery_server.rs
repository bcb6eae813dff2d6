//! A local Parameter Store and EKS endpoint for what moto cannot produce: throttling, denials,
//! a DescribeCluster answer with a real PEM CA, malformed values. It speaks the two protocols
//! the SDK uses (SSM: JSON 1.1 with `X-Amz-Target`; EKS: REST JSON, `GET /clusters/{name}`),
//! answers from its parameters and clusters, fails calls as scripted, and records every call.
//! One bucket (SSM's shared throughput) may throttle every SSM call.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use serde_json::{json, Value};

use super::ec2_server::{serve_in, Bucket};

/// One cluster as DescribeCluster shows it.
#[derive(Clone)]
pub struct Cluster {
    pub endpoint: String,
    pub ca: String,
    pub ip_family: &'static str,
    pub cidr: String,
}

#[derive(Default)]
pub struct DiscoveryState {
    /// Parameter name → value.
    pub parameters: BTreeMap<String, String>,
    pub clusters: BTreeMap<String, Cluster>,
    /// Errors to answer the next calls of an operation with, in order: (HTTP status, code).
    pub errors: BTreeMap<String, VecDeque<(u16, &'static str)>>,
    /// SSM's shared throughput (`None`: unlimited).
    pub ssm_bucket: Option<Bucket>,
    /// Every call: (operation, request body or path).
    pub calls: Vec<(String, String)>,
}

impl DiscoveryState {
    pub fn count(&self, op: &str) -> usize {
        self.calls.iter().filter(|(o, _)| o == op).count()
    }
    pub fn fail(&mut self, op: &str, errors: &[(u16, &'static str)]) {
        self.errors
            .entry(op.to_string())
            .or_default()
            .extend(errors.iter().copied());
    }
}

pub struct DiscoveryServer {
    pub addr: SocketAddr,
    pub state: Arc<Mutex<DiscoveryState>>,
}

impl DiscoveryServer {
    pub fn start(state: DiscoveryState) -> DiscoveryServer {
        let state = Arc::new(Mutex::new(state));
        let addr = serve_in(None, state.clone(), handle);
        DiscoveryServer { addr, state }
    }
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
    pub fn count(&self, op: &str) -> usize {
        self.state.lock().unwrap().count(op)
    }
}

fn reply(status: u16, headers: &[(&str, &str)], body: Value) -> Response<Full<Bytes>> {
    let mut b = Response::builder().status(StatusCode::from_u16(status).unwrap());
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(Full::new(Bytes::from(body.to_string()))).unwrap()
}

/// An error as each protocol carries it.
fn error(ssm: bool, status: u16, code: &str) -> Response<Full<Bytes>> {
    if ssm {
        reply(
            status,
            &[("content-type", "application/x-amz-json-1.1")],
            json!({"__type": code, "message": format!("injected {code}")}),
        )
    } else {
        reply(
            status,
            &[
                ("content-type", "application/json"),
                ("x-amzn-errortype", code),
            ],
            json!({"message": format!("injected {code}")}),
        )
    }
}

async fn handle(
    state: Arc<Mutex<DiscoveryState>>,
    req: Request<()>,
    body: Bytes,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let target = req
        .headers()
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    let path = req.uri().path().to_string();
    let body = String::from_utf8_lossy(&body).into_owned();
    let mut s = state.lock().unwrap();
    let (op, ssm) = match &target {
        Some(t) => (t.trim_start_matches("AmazonSSM.").to_string(), true),
        None if path.starts_with("/clusters/") => ("DescribeCluster".to_string(), false),
        None => return Ok(error(false, 404, "UnknownOperationException")),
    };
    s.calls
        .push((op.clone(), if ssm { body.clone() } else { path.clone() }));
    if let Some((status, code)) = s.errors.get_mut(&op).and_then(VecDeque::pop_front) {
        return Ok(error(ssm, status, code));
    }
    if ssm {
        if let Some(b) = s.ssm_bucket.as_mut() {
            if !b.take() {
                return Ok(error(true, 400, "ThrottlingException"));
            }
        }
    }
    let req: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    Ok(match op.as_str() {
        "GetParametersByPath" => ok(true, parameters_by_path(&s, &req)),
        "GetParameters" => ok(true, parameters(&s, &req)),
        "DescribeCluster" => {
            let name = path.trim_start_matches("/clusters/");
            match s.clusters.get(name) {
                None => error(false, 404, "ResourceNotFoundException"),
                Some(c) => ok(false, cluster(name, c)),
            }
        }
        _ => error(ssm, 400, "UnknownOperationException"),
    })
}

/// 200 with `v` in the protocol's content type.
fn ok(ssm: bool, v: Value) -> Response<Full<Bytes>> {
    let content_type = if ssm {
        "application/x-amz-json-1.1"
    } else {
        "application/json"
    };
    reply(200, &[("content-type", content_type)], v)
}

/// One parameter as Parameter Store answers it.
fn param(name: &str, value: &str) -> Value {
    json!({"Name": name, "Type": "SecureString", "Value": value, "Version": 1, "ARN": format!("arn:aws:ssm:us-east-1:123456789012:parameter{name}")})
}

/// GetParametersByPath: the parameters directly under the request's `Path`.
fn parameters_by_path(s: &DiscoveryState, req: &Value) -> Value {
    let p = req["Path"].as_str().unwrap_or("").trim_end_matches('/');
    let list: Vec<Value> = s
        .parameters
        .iter()
        .filter(|(n, _)| {
            n.strip_prefix(p)
                .and_then(|r| r.strip_prefix('/'))
                .is_some_and(|leaf| !leaf.contains('/'))
        })
        .map(|(n, v)| param(n, v))
        .collect();
    json!({"Parameters": list})
}

/// GetParameters: the named ones found, the others invalid.
fn parameters(s: &DiscoveryState, req: &Value) -> Value {
    let mut found = Vec::new();
    let mut invalid = Vec::new();
    for n in req["Names"].as_array().into_iter().flatten() {
        let n = n.as_str().unwrap_or("");
        match s.parameters.get(n) {
            Some(v) => found.push(param(n, v)),
            None => invalid.push(json!(n)),
        }
    }
    json!({"Parameters": found, "InvalidParameters": invalid})
}

/// DescribeCluster's answer for `c`.
fn cluster(name: &str, c: &Cluster) -> Value {
    let mut net = json!({"ipFamily": c.ip_family});
    let key = if c.ip_family == "ipv6" {
        "serviceIpv6Cidr"
    } else {
        "serviceIpv4Cidr"
    };
    net[key] = json!(c.cidr);
    json!({"cluster": {
        "name": name,
        "arn": format!("arn:aws:eks:us-east-1:123456789012:cluster/{name}"),
        "endpoint": c.endpoint,
        "certificateAuthority": {"data": c.ca},
        "kubernetesNetworkConfig": net,
        "status": "ACTIVE",
    }})
}
