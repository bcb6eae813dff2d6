//! Fleet burst, by simulation: N agents' tagging logic (the real `tagging::foreground` /
//! `tagging::background` and the real EC2 client) run at once against a local EC2 endpoint that
//! enforces the account's token buckets and answers `RequestLimitExceeded`.
//!
//! Buckets, from "Request throttling for the Amazon EC2 API"
//! (https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html):
//! CreateTags is an uncategorized action with its own bucket, capacity 100, refill 10/s;
//! DescribeTags is a non-mutating action, capacity 100, refill 20/s.
//!
//! Run: `cargo bench --bench fleet` (FLEET_SIZES=100,1000 FLEET_SPREADS=0,auto to choose).

#[path = "../tests/common/ec2_server.rs"]
#[allow(dead_code)]
mod ec2_server;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ec2_server::{Bucket, Ec2Server, Ec2State};
use eks_nodeinit::base::retry::RetryPolicy;
use eks_nodeinit::exec::tagging::{background, draw_spread, foreground, Foreground, Job};
use eks_nodeinit::facts::InstanceTags;

const CAPACITY: f64 = 100.0;
const REFILL: f64 = 10.0;
const BUDGET: Duration = Duration::from_millis(3000);

/// The shipped retry policy, or FLEET_BASE_MS / FLEET_CAP_MS to explore others.
fn policy() -> RetryPolicy {
    let d = RetryPolicy::default();
    let ms = |k: &str, dflt: Duration| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .map(Duration::from_millis)
            .unwrap_or(dflt)
    };
    RetryPolicy {
        base: ms("FLEET_BASE_MS", d.base),
        cap: ms("FLEET_CAP_MS", d.cap),
    }
}

struct Row {
    n: usize,
    spread_sec: u64,
    tagged: usize,
    create_calls: usize,
    describe_calls: usize,
    time_to_all: Duration,
    floor: Duration,
    worst_handoff: Duration,
}

async fn run(n: usize, spread_sec: u64) -> Row {
    let server = Ec2Server::start(Ec2State {
        create_bucket: Some(Bucket::new(CAPACITY, REFILL)),
        describe_bucket: Some(Bucket::new(100.0, 20.0)),
        ..Default::default()
    });
    let url = Arc::new(server.url());
    let start = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..n {
        let url = url.clone();
        tasks.push(tokio::spawn(async move {
            let t0 = Instant::now();
            let job = Job {
                region: "eu-west-1".into(),
                endpoint: Some(url.to_string()),
                instance_id: format!("i-{i:017x}"),
                key: "Name".into(),
                value: format!("scaler-10x0x{}x{}", i / 256, i % 256),
                known: InstanceTags::Known(BTreeMap::new()),
                policy: policy(),
                transport: None,
            };
            let delay = draw_spread(Duration::from_secs(spread_sec));
            // As `init`: the whole foreground part, client included, is bounded by the budget.
            let (fg, _) = foreground(&job, delay, BUDGET).await;
            let handoff = t0.elapsed();
            let ok = match fg {
                Foreground::Done(_) => true,
                Foreground::Failed(e) => {
                    eprintln!("agent {i}: {e}");
                    false
                }
                // As `tag-continue`: a fresh client (a new process); the tags were known,
                // straight to CreateTags, unless a call was cut off in flight.
                Foreground::Pending {
                    initial_delay,
                    abandoned,
                } => background(
                    &job.continued(abandoned),
                    initial_delay,
                    Duration::from_secs(600),
                )
                .await
                .0
                .is_ok(),
            };
            (ok, handoff)
        }));
    }
    let mut tagged = 0;
    let mut worst_handoff = Duration::ZERO;
    for t in tasks {
        let (ok, h) = t.await.unwrap();
        tagged += usize::from(ok);
        worst_handoff = worst_handoff.max(h);
    }
    let st = server.state.lock().unwrap();
    let last = st.created_at.iter().max().copied().unwrap_or(start);
    let floor_secs = ((n as f64 - CAPACITY).max(0.0)) / REFILL;
    Row {
        n,
        spread_sec,
        tagged,
        create_calls: st.count("CreateTags"),
        describe_calls: st.count("DescribeTags"),
        time_to_all: last.duration_since(start),
        floor: Duration::from_secs_f64(floor_secs),
        worst_handoff,
    }
}

fn main() {
    ec2_server::use_test_credentials();
    let sizes: Vec<usize> = std::env::var("FLEET_SIZES")
        .unwrap_or_else(|_| "100,1000".into())
        .split(',')
        .map(|s| s.trim().parse().unwrap())
        .collect();
    let spreads: Vec<String> = std::env::var("FLEET_SPREADS")
        .unwrap_or_else(|_| "0,auto".into())
        .split(',')
        .map(|s| s.trim().to_string())
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    println!(
        "CreateTags bucket: capacity {CAPACITY}, refill {REFILL}/s; sync budget {} ms",
        BUDGET.as_millis()
    );
    println!("| agents | spreadSec | tagged | CreateTags calls / N | DescribeTags calls / N | time to all tagged | floor | time / floor | worst hand-off delay |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &n in &sizes {
        for sp in &spreads {
            // "auto": the documented rule, (burst size − bucket capacity) ÷ refill rate: arrivals
            // then never outrun the tokens (capacity + refill × t).
            let spread = if sp == "auto" {
                ((n as f64 - CAPACITY).max(0.0) / REFILL).ceil() as u64
            } else {
                sp.parse().unwrap()
            };
            let r = rt.block_on(run(n, spread));
            let ratio = if r.floor.is_zero() {
                "n/a (floor 0)".to_string()
            } else {
                format!("{:.2}", r.time_to_all.as_secs_f64() / r.floor.as_secs_f64())
            };
            println!(
                "| {} | {} | {:.1}% | {:.2} | {:.2} | {:.1} s | {:.1} s | {} | {:.2} s |",
                r.n,
                r.spread_sec,
                100.0 * r.tagged as f64 / r.n as f64,
                r.create_calls as f64 / r.n as f64,
                r.describe_calls as f64 / r.n as f64,
                r.time_to_all.as_secs_f64(),
                r.floor.as_secs_f64(),
                ratio,
                r.worst_handoff.as_secs_f64()
            );
        }
    }
}
