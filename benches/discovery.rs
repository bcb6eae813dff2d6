//! Discovery under a launch burst, by simulation: N agents run the real discovery code
//! (`discovery::gather`: the SDK's Parameter Store client, the agent's retry policy and spread)
//! at once against a local endpoint that enforces Parameter Store's shared throughput as a token
//! bucket and answers `ThrottlingException`.
//!
//! Parameter Store's default throughput is 40 transactions per second, shared by GetParameter,
//! GetParameters and GetParametersByPath per account and Region; "higher throughput" raises
//! GetParametersByPath to 100 (AWS Systems Manager endpoints and quotas). The bucket holds one
//! second's worth (its burst is not published).
//!
//! Run: `cargo bench --bench discovery` (DISCOVERY_SIZES=100,1000 DISCOVERY_SPREADS=0,auto
//! DISCOVERY_TPS=40 to choose).

#[path = "../tests/common/discovery_server.rs"]
#[allow(dead_code)]
mod discovery_server;
#[path = "../tests/common/ec2_server.rs"]
#[allow(dead_code)]
mod ec2_server;

use std::sync::Arc;
use std::time::{Duration, Instant};

use discovery_server::{DiscoveryServer, DiscoveryState};
use ec2_server::Bucket;
use eks_nodeinit::discovery::{gather, Outcome};

struct Row {
    n: usize,
    spread_sec: f64,
    resolved: usize,
    calls: usize,
    time_to_all: Duration,
    floor: Duration,
    worst_join: Duration,
}

fn spec(endpoint: &str, spread_sec: f64) -> eks_nodeinit::spec::Spec {
    let cfg = serde_json::json!({
        "cluster": {"name": "prod-eu", "discovery": {"ssmEndpoint": endpoint, "spreadSec": spread_sec}},
        "nodeGroup": {"name": "scaler", "role": "scaler"},
        "tagging": {"enabled": false},
    });
    let c = eks_nodeinit::config::parse(&cfg.to_string(), "bench.json").unwrap();
    eks_nodeinit::spec::from_config(&c).unwrap()
}

async fn run(n: usize, spread_sec: f64, tps: f64, ca: &str) -> Row {
    let mut state = DiscoveryState {
        ssm_bucket: Some(Bucket::new(tps, tps)),
        ..Default::default()
    };
    for (k, v) in [
        (
            "APISERVER_ENDPOINT",
            "https://0123456789ABCDEF.gr7.eu-west-1.eks.amazonaws.com",
        ),
        ("B64_CLUSTER_CA", ca),
        ("SERVICE_CIDR", "10.100.0.0/16"),
    ] {
        state
            .parameters
            .insert(format!("/eks/prod-eu/{k}"), v.to_string());
    }
    let server = DiscoveryServer::start(state);
    let spec = Arc::new(spec(&server.url(), spread_sec));
    // No cache on a fresh node: an empty root.
    let root = Arc::new(tempfile::tempdir().unwrap());
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..n {
        let (spec, root) = (spec.clone(), root.clone());
        tasks.push(tokio::spawn(async move {
            let t0 = Instant::now();
            let fact = gather(&spec, root.path(), async {
                Ok(("eu-west-1".to_string(), Default::default()))
            })
            .await;
            let ok = matches!(fact.outcome, Outcome::Found { .. });
            if let Outcome::Failed { reasons, .. } = &fact.outcome {
                eprintln!("agent failed: {reasons:?}");
            }
            (ok, t0.elapsed(), Instant::now())
        }));
    }
    let mut resolved = 0;
    let mut worst_join = Duration::ZERO;
    let mut last = start;
    for t in tasks {
        let (ok, took, at) = t.await.unwrap();
        resolved += usize::from(ok);
        worst_join = worst_join.max(took);
        last = last.max(at);
    }
    let calls = server.count("GetParametersByPath");
    Row {
        n,
        spread_sec,
        resolved,
        calls,
        time_to_all: last.duration_since(start),
        floor: Duration::from_secs_f64(((n as f64 - tps).max(0.0)) / tps),
        worst_join,
    }
}

fn main() {
    ec2_server::use_test_credentials();
    let list = |k: &str, d: &str| -> Vec<String> {
        std::env::var(k)
            .unwrap_or_else(|_| d.into())
            .split(',')
            .map(|s| s.trim().to_string())
            .collect()
    };
    let sizes: Vec<usize> = list("DISCOVERY_SIZES", "100,1000")
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
    let spreads = list("DISCOVERY_SPREADS", "0,auto");
    let tps: f64 = std::env::var("DISCOVERY_TPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40.0);
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD.encode(
        std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/cluster-ca.pem"
        ))
        .unwrap(),
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    println!("Parameter Store bucket: {tps} calls/s, capacity {tps}; one GetParametersByPath per agent when unthrottled");
    println!("| agents | spreadSec | resolved | calls / node | time to all resolved | floor | time / floor | worst join delay |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &n in &sizes {
        for sp in &spreads {
            // "auto": the documented rule, 1.1 × (burst − bucket capacity) ÷ rate: arrivals a
            // tenth below the refill rate, so that chance bunching rarely meets an empty bucket.
            let spread = if sp == "auto" {
                1.1 * (n as f64 - tps).max(0.0) / tps
            } else {
                sp.parse().unwrap()
            };
            let r = rt.block_on(run(n, spread, tps, &ca));
            let ratio = if r.floor.is_zero() {
                "n/a (floor 0)".to_string()
            } else {
                format!("{:.2}", r.time_to_all.as_secs_f64() / r.floor.as_secs_f64())
            };
            println!(
                "| {} | {:.1} | {:.1}% | {:.2} | {:.1} s | {:.1} s | {} | {:.1} s |",
                r.n,
                r.spread_sec,
                100.0 * r.resolved as f64 / r.n as f64,
                r.calls as f64 / r.n as f64,
                r.time_to_all.as_secs_f64(),
                r.floor.as_secs_f64(),
                ratio,
                r.worst_join.as_secs_f64()
            );
        }
    }
}
