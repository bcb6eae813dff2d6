//! The proof after the hand-off (`complete-hook` with a join job) against peers that accept a
//! connection and never answer: an API server that stalls in the TLS handshake, an `https://`
//! proxy that stalls after the client's first bytes. Each run ends by itself within the job's
//! deadline plus ten seconds, with a named cause and whose it is; the proxy is spoken to over
//! TLS (its password never in clear); the launch hook gets heartbeats while the proof runs and
//! its result by the cause's blame (moto's Auto Scaling with tests/moto/lifecycle_actions.py,
//! kubelet.service active on a private dbus-daemon). The real control plane's verdicts are in
//! tests/it/control_plane/join.rs.

use crate::common;

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use common::dbus::{serve_unit_states, start_bus, Bus};
use common::imds_server::ImdsServer;
use common::{cmd, stderr, stdout};
use eks_nodeinit::instance::lifecycle::{CompleteAfter, LaunchHookJob, LAUNCH_HOOK_JOB};
use eks_nodeinit::verify::name::NodeName;
use eks_nodeinit::verify::proof::{Expect, JoinJob, JOIN_JOB};
use serde_json::{json, Value};

pub(super) const INSTANCE: &str = "i-0123456789abcdef0";
const SECRET: &str = "role-secret-key";
const PROXY_PASSWORD: &str = "s3cret-proxy-pw";
/// The job's deadline where one stalled read meets it (the longest one read may take).
pub(super) const DEADLINE: u64 = 10;
/// A deadline that sees two reads given up at their own limit before it.
const LONG_DEADLINE: u64 = 22;

/// A TCP server that accepts every connection, keeps it open and reads what the client
/// sends, and never answers.
pub(super) struct Stalling {
    pub(super) port: u16,
    received: Arc<Mutex<Vec<u8>>>,
}

pub(super) fn stalling() -> Stalling {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let received = Arc::new(Mutex::new(Vec::new()));
    let r = received.clone();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let r = r.clone();
            std::thread::spawn(move || {
                let mut s = s;
                let mut buf = [0u8; 4096];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    r.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            });
        }
    });
    Stalling { port, received }
}

/// IMDS with the instance's role and its credentials.
pub(super) fn imds() -> ImdsServer {
    let s = ImdsServer::start();
    let mut st = s.state.lock().unwrap();
    st.data
        .insert("iam/security-credentials/".into(), "eks-node".into());
    st.data.insert(
        "iam/security-credentials/eks-node".into(),
        json!({"Code": "Success", "AccessKeyId": "ASIAEXAMPLE", "SecretAccessKey": SECRET, "Token": "role-session-token"}).to_string(),
    );
    drop(st);
    s
}

/// The proof's job in `root`, for the API server at `endpoint`, through `proxy` if any, the
/// instance in `group`.
pub(super) fn join_job(
    root: &Path,
    imds: &str,
    endpoint: &str,
    proxy: Option<String>,
    (deadline, group): (u64, Option<&str>),
) {
    let ca = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    let job = JoinJob {
        cluster: "prod".into(),
        region: "us-east-1".into(),
        endpoint: endpoint.into(),
        certificate_authority: base64::engine::general_purpose::STANDARD.encode(ca),
        node: NodeName::InstanceId {
            name: INSTANCE.into(),
        },
        instance_id: INSTANCE.into(),
        group: group.map(String::from),
        sts_url: "https://sts.us-east-1.amazonaws.com".into(),
        dual_stack: None,
        imds_endpoint: imds.into(),
        imds_v1_fallback: false,
        deadline_secs: deadline,
        strict: false,
        transport: proxy.map(|p| eks_nodeinit::aws::Transport {
            proxy: Some(eks_nodeinit::aws::Proxy {
                http: None,
                https: Some(p),
                no_proxy: String::new(),
            }),
            ca_bundles: Vec::new(),
            endpoints: Default::default(),
        }),
        expect: Expect::default(),
        init_deadline_secs: None,
        init_conditions: Vec::new(),
        retire: None,
        group_unknown: false,
        late_join_secs: 0,
        hold_mismatch: false,
    };
    write(root, JOIN_JOB, &job.to_text());
}

pub(super) fn write(root: &Path, node_path: &str, text: &str) {
    let p = root.join(&node_path[1..]);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn kubelet_active() -> Option<Bus> {
    let bus = start_bus()?;
    let cell = Arc::new(Mutex::new("active".to_string()));
    serve_unit_states(&bus.address, &[("kubelet.service", cell)]);
    Some(bus)
}

/// `complete-hook` with `env`, killed if it has not ended after a minute: its output and how
/// long it ran.
pub(super) fn complete_hook(
    root: &Path,
    bus: &str,
    env: &[(&str, &str)],
    extra: &[&str],
) -> (Output, Duration) {
    let t = Instant::now();
    let mut c = cmd();
    c.envs(env.iter().copied())
        .args(["complete-hook", "--root"])
        .arg(root)
        .args(["--system-bus-address", bus, "--kubelet-wait-sec", "5"])
        .args(["--poll-ms", "500", "--deadline-sec", "20"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    while child.try_wait().unwrap().is_none() && t.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    eprintln!("--- stdout\n{}\n--- stderr\n{}", stdout(&out), stderr(&out));
    (out, t.elapsed())
}

pub(super) fn report(root: &Path) -> Value {
    let text = std::fs::read_to_string(root.join("var/lib/eks-nodeinit/report.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn an_https_proxy_that_stalls_ends_the_proof_in_time_and_never_sees_the_password() {
    let Some(bus) = kubelet_active() else { return };
    let imds = imds();
    let proxy = stalling();
    let root = tempfile::tempdir().unwrap();
    let url = format!("https://node:{PROXY_PASSWORD}@127.0.0.1:{}", proxy.port);
    // The API server's name need not resolve here: the proxy is asked for it.
    let reach = (LONG_DEADLINE, None);
    join_job(
        root.path(),
        &imds.url(),
        "https://k.example",
        Some(url),
        reach,
    );
    let (out, took) = complete_hook(root.path(), &bus.address, &[], &[]);
    assert!(took < Duration::from_secs(LONG_DEADLINE + 10), "{took:?}");
    assert!(!out.status.success());
    let join = &report(root.path())["join"];
    assert_eq!(
        (join["verdict"].as_str(), join["blame"].as_str()),
        (Some("deadline"), Some("cluster")),
        "{join}"
    );
    // Each read is given up at its own limit; the one the deadline cuts keeps what they saw.
    let causes = join["causes"].to_string();
    assert!(
        causes.contains("(timeout) one read of the Node was given up after 10s"),
        "{causes}"
    );
    // A read that timed out is a cause the fleet shares: no peer is counted for it.
    assert!(causes.contains("never this node's own"), "{causes}");
    // TLS to the proxy: the first byte is a handshake record, no CONNECT, no password in clear.
    let got = proxy.received.lock().unwrap().clone();
    assert_eq!(
        got.first(),
        Some(&0x16),
        "{:?}",
        String::from_utf8_lossy(&got)
    );
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("node:{PROXY_PASSWORD}"));
    for needle in ["CONNECT", PROXY_PASSWORD, basic.as_str()] {
        assert!(
            !String::from_utf8_lossy(&got).contains(needle),
            "{needle} in clear"
        );
    }
    common::assert_unprinted(&out, root.path(), &[PROXY_PASSWORD, SECRET, "k8s-aws-v1."]);
}

/// moto with the lifecycle actions, a group of two instances with a launch hook, and the logs
/// of completions and heartbeats.
struct Asg {
    moto: common::Moto,
    /// The instance proving its join, and the other one of its group.
    instance_id: String,
    other: String,
    completed: PathBuf,
    heartbeats: PathBuf,
    _dir: tempfile::TempDir,
}

const GROUP: &str = "asg-nodes";

fn asg() -> Option<Asg> {
    let dir = tempfile::tempdir().unwrap();
    let (completed, heartbeats) = (dir.path().join("c.jsonl"), dir.path().join("h.jsonl"));
    let script = common::manifest_dir().join("tests/moto/lifecycle_actions.py");
    let moto = common::start_moto_as(
        &[script.to_str().unwrap()],
        &[
            ("MOTO_LIFECYCLE_LOG", completed.to_str().unwrap()),
            ("MOTO_HEARTBEAT_LOG", heartbeats.to_str().unwrap()),
        ],
    )?;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let ids = rt.block_on(async {
        let conf = common::moto_sdk_config(&moto.url, "us-east-1").await;
        let a = common::group_with_launch_hook(&conf, GROUP, "ready", "us-east-1a", 2).await;
        let out = a.describe_auto_scaling_instances().send().await.unwrap();
        let ids: Vec<String> = out
            .auto_scaling_instances()
            .iter()
            .map(|i| i.instance_id().unwrap().to_string())
            .collect();
        ids
    });
    Some(Asg {
        moto,
        instance_id: ids[0].clone(),
        other: ids[1].clone(),
        completed,
        heartbeats,
        _dir: dir,
    })
}

/// The other instance of the group marked joined by its own agent.
fn other_joined(a: &Asg) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let conf = common::moto_sdk_config(&a.moto.url, "us-east-1").await;
        let tag = aws_sdk_ec2::types::Tag::builder()
            .key("eks-nodeinit/joined")
            .value("prod")
            .build();
        aws_sdk_ec2::Client::new(&conf)
            .create_tags()
            .resources(&a.other)
            .tags(tag)
            .send()
            .await
            .unwrap();
    });
}

pub(super) fn lines(p: &Path) -> Vec<Value> {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn hook_job(root: &Path, a: &Asg, group: &str) {
    let job = LaunchHookJob {
        hook: "ready".into(),
        group: Some(group.into()),
        instance_id: a.instance_id.clone(),
        region: "us-east-1".into(),
        state: "InService".into(),
        after: CompleteAfter::Kubelet,
        aws: Default::default(),
    };
    write(root, LAUNCH_HOOK_JOB, &job.to_text());
}

/// The proof of `a`'s instance against an API server that stalls, its launch hook waiting,
/// heartbeats every 2 s: the run's output, how long it took, and its root.
fn stalled_proof(a: &Asg, hook_group: &str) -> (Output, Duration, tempfile::TempDir) {
    let bus = kubelet_active().unwrap();
    let imds = imds();
    let api = stalling();
    let root = tempfile::tempdir().unwrap();
    let endpoint = format!("https://127.0.0.1:{}", api.port);
    join_job(
        root.path(),
        &imds.url(),
        &endpoint,
        None,
        (DEADLINE, Some(GROUP)),
    );
    // The job's instance is the group's.
    let text = std::fs::read_to_string(root.path().join(&JOIN_JOB[1..])).unwrap();
    write(
        root.path(),
        JOIN_JOB,
        &text.replace(INSTANCE, &a.instance_id),
    );
    hook_job(root.path(), a, hook_group);
    let env = [
        ("AWS_ENDPOINT_URL_AUTO_SCALING", a.moto.url.as_str()),
        ("AWS_ENDPOINT_URL_EC2", a.moto.url.as_str()),
    ];
    let (out, took) = complete_hook(root.path(), &bus.address, &env, &["--heartbeat-sec", "2"]);
    (out, took, root)
}

#[test]
fn a_stalling_api_server_keeps_the_hook_alive_then_continues_for_a_cluster_cause() {
    let (Some(_), Some(a)) = (start_bus(), asg()) else {
        return;
    };
    let (out, took, root) = stalled_proof(&a, GROUP);
    assert!(took < Duration::from_secs(DEADLINE + 10), "{took:?}");
    assert!(!out.status.success(), "the node did not join");
    // A heartbeat at once and every 2 s while the proof ran about 10 s.
    let beats = lines(&a.heartbeats);
    assert!((4..=7).contains(&beats.len()), "{beats:?}");
    assert!(beats
        .iter()
        .all(|b| b["InstanceId"] == a.instance_id.as_str()));
    // No other instance of the group joined: the launch goes on, the cause named.
    let done = lines(&a.completed);
    assert_eq!(done.len(), 1, "{done:?}");
    assert_eq!(done[0]["LifecycleActionResult"], "CONTINUE");
    assert!(
        stderr(&out).contains("did not join as planned"),
        "{}",
        stderr(&out)
    );
    let status = common::run(cmd().args(["status", "--root"]).arg(root.path()));
    assert!(!status.status.success());
    let text = stdout(&status);
    assert!(
        text.contains("blame: cluster") && text.contains("launch hook: CONTINUE (ready)"),
        "{text}"
    );
    assert!(
        text.contains("(timeout) the last read of the API server failed"),
        "{text}"
    );
    common::assert_unprinted(
        &out,
        root.path(),
        &[SECRET, "k8s-aws-v1.", "role-session-token"],
    );
}

/// An API server that stalls after others of the group joined is an outage the fleet shares:
/// the launch goes on (before, the joined peer made it the node's own and abandoned it).
#[test]
fn a_stalled_api_server_after_the_group_joined_continues_the_launch() {
    let (Some(_), Some(a)) = (start_bus(), asg()) else {
        return;
    };
    other_joined(&a);
    let (out, _, root) = stalled_proof(&a, GROUP);
    assert!(!out.status.success());
    let done = lines(&a.completed);
    assert_eq!(done.len(), 1, "{done:?}");
    assert_eq!(done[0]["LifecycleActionResult"], "CONTINUE");
    let join = &report(root.path())["join"];
    assert_eq!(join["blame"], "cluster", "{join}");
    assert!(
        join["causes"]
            .to_string()
            .contains("never this node's own on the count of others"),
        "{join}"
    );
}

#[test]
fn a_hook_that_cannot_be_completed_fails_the_unit_and_status() {
    let (Some(_), Some(a)) = (start_bus(), asg()) else {
        return;
    };
    // A group Auto Scaling does not know: CompleteLifecycleAction is refused.
    let (out, _, root) = stalled_proof(&a, "asg-gone");
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("launch hook `ready` was not completed with CONTINUE"),
        "{}",
        stderr(&out)
    );
    assert!(lines(&a.completed).is_empty());
    let status = common::run(cmd().args(["status", "--root"]).arg(root.path()));
    assert!(!status.status.success());
    assert!(
        stdout(&status).contains("launch hook: FAILED: not completed"),
        "{}",
        stdout(&status)
    );
    assert!(
        stderr(&status).contains("the launch hook was not completed"),
        "{}",
        stderr(&status)
    );
}
