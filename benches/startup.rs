//! Start to hand-off, side by side in one run, against the same local IMDSv2 server and moto:
//!
//! * eks-nodeinit (`EKS_NODEINIT_BIN`, default target/release/eks-nodeinit) on a sample AL2 root;
//! * the user-data shell script it replaces (benches/userdata.sh: curl + the AWS CLI);
//! * the same-work floor (benches/same_work_floor.rs): a separate minimal process — this bench
//!   binary again, no AWS SDK — making the same IMDS reads and credential fetch, one
//!   SigV4-signed CreateTags, writing and fsyncing the same files and report, and exec'ing the
//!   same bootstrap.sh. What the agent costs beyond it is the agent's own overhead.
//!
//! Credentials come from the instance role through IMDS, as on a node; `STARTUP_CREDENTIALS=env`
//! puts static keys in the environment instead (and drops the floor's two credential GETs).
//! Each run ends when bootstrap.sh (a recorder that exits at once) has been exec'd.
//! Run: `cargo build --release && cargo bench --bench startup` (STARTUP_RUNS=N, default 10;
//! STARTUP_COMPARE=BIN[:BIN…] times other agent builds in the same rounds).
//! CI runs it once on the debug build (`make bench-smoke`), so a bench that cannot run fails CI.

// The integration suites' shared helpers, of which the bench uses a part.
#[path = "../tests/common/mod.rs"]
#[allow(dead_code)]
mod common;
#[path = "same_work_floor.rs"]
mod same_work_floor;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::control_plane::ControlPlane;
use common::imds_server::ImdsServer;

const ROLE: &str = "bench-node-role";

/// The instance role's credentials from IMDS (as on a node), unless STARTUP_CREDENTIALS=env.
fn role_credentials() -> bool {
    std::env::var("STARTUP_CREDENTIALS").map_or(true, |v| v != "env")
}

fn env(cmd: &mut Command, imds: &str) {
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", std::env::var("HOME").unwrap_or_default());
    if !role_credentials() {
        cmd.env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing");
    }
    cmd.env("AWS_CONFIG_FILE", "/nonexistent")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
        .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
}

fn timed(mut cmd: Command) -> Duration {
    let t = Instant::now();
    let out = cmd.output().unwrap();
    let d = t.elapsed();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    d
}

fn fresh_root() -> tempfile::TempDir {
    let root = common::sample_root("al2-root");
    // A stand-in with the sample script's option grammar (the agent reads it before handing
    // off, and refuses a script it cannot read): reads its options, writes what every
    // bootstrap.sh writes (the CA file), exits.
    common::install_bootstrap(
        root.path(),
        &common::bootstrap_standin(common::BOOTSTRAP_OPTIONS, ""),
    );
    std::fs::create_dir_all(root.path().join("etc/sysctl.d")).unwrap();
    root
}

/// The agent doing the floor's work: the preflight and the hardened-AMI checks off (the floor
/// makes no such call and reads no such file).
fn agent(bin: &Path, imds: &str, moto: &str) -> Duration {
    agent_with(bin, imds, moto, None)
}

/// The agent, with the preflight against `cp` when given: its endpoint and CA, the checks in
/// `warn` mode (the default), AWS's endpoints moto's.
fn agent_with(bin: &Path, imds: &str, moto: &str, cp: Option<&ControlPlane>) -> Duration {
    let root = fresh_root();
    let cfg = common::config_with(root.path(), "c.json", |v| {
        v["tagging"] = serde_json::json!({"ec2Endpoint": moto, "syncBudgetMs": 3000});
        v["verify"] = serde_json::json!({"preflight": "off", "hardening": "off"});
        if let Some(cp) = cp {
            let ca = std::fs::read(cp.ca()).unwrap();
            v["cluster"]["apiServerEndpoint"] = cp.endpoint().into();
            v["cluster"]["certificateAuthority"] = common::control_plane::base64_encode(&ca).into();
            v["cluster"]["cidr"] = common::control_plane::SERVICE_CIDR.into();
            v["verify"] = serde_json::json!({"preflight": "warn", "hardening": "off"});
        }
    });
    // STARTUP_STRACE=FILE: run the agent under `strace -f -tt` to see where its time goes.
    let mut c = match std::env::var("STARTUP_STRACE") {
        Ok(out) => {
            let mut c = launcher(cp, "strace");
            c.args(["-f", "-tt", "-o", &out]).arg(bin);
            c
        }
        Err(_) => launcher(cp, bin),
    };
    env(&mut c, imds);
    // STARTUP_AGENT_LOG=FILE: keep the agent's debug log (timestamps per step).
    if let Ok(log) = std::env::var("STARTUP_AGENT_LOG") {
        c.env("EKS_NODEINIT_LOG", "eks_nodeinit=debug,aws=debug")
            .stderr(std::fs::File::create(log).unwrap());
    }
    if let Some(eks) = cp.and_then(|cp| cp.eks.as_ref()) {
        // STS by its real name (the authenticator takes no other), trusted as the platform
        // trusts it; EC2 and ECR moto's.
        c.env("SSL_CERT_FILE", &eks.auth.front_ca);
        for s in ["EC2", "ECR"] {
            c.env(format!("AWS_ENDPOINT_URL_{s}"), moto);
        }
    }
    c.args(["init", "--config"])
        .arg(&cfg)
        .arg("--root")
        .arg(root.path());
    let d = timed(c);
    if cp.is_some() {
        let rep: serde_json::Value = serde_json::from_slice(
            &std::fs::read(root.path().join("var/lib/eks-nodeinit/report.json")).unwrap(),
        )
        .unwrap();
        for check in rep["join"]["preflight"].as_array().unwrap() {
            assert_eq!(check["result"], "passed", "a healthy preflight: {check}");
        }
    }
    d
}

/// A real API server (kube-apiserver from the peers, with the EKS authenticator and moto) and
/// an IMDS server for an instance of that moto whose role is mapped as a node's: the healthy
/// preflight's peers. `None` (said) without the peers or root.
fn preflight_peers() -> Option<(ControlPlane, ImdsServer)> {
    let missing = common::control_plane::missing();
    if !missing.is_empty() || !nix::unistd::Uid::effective().is_root() {
        println!("(the preflight row needs root and {missing:?}: make peers-k8s)");
        return None;
    }
    let cp = ControlPlane::on_host_with_eks(&[], None);
    let eks = cp.eks.as_ref().unwrap();
    let region = common::control_plane::EKS_REGION;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (id, ip) = rt.block_on(async {
        let ec2 = common::ec2_client(&eks.moto, region).await;
        common::run_instance(&ec2).await
    });
    let dns = rt
        .block_on(common::node_identity::private_dns_name(
            &eks.moto, region, &id,
        ))
        .unwrap();
    let mapping = common::iam_authenticator::Mapping::Ec2Linux;
    let role = common::node_identity::node_role(eks, &cp.netns, "bench", &id, mapping);
    let st = common::node_identity::instance_metadata(
        &id,
        &ip,
        &dns,
        region,
        &role,
        "10.0.0.0/16",
        None,
    );
    let imds = ImdsServer::start_with(st);
    Some((cp, imds))
}

/// `program`, with the preflight's peers where the Region's STS name is the EKS
/// authenticator's front (an nsenter into its mount namespace).
fn launcher(cp: Option<&ControlPlane>, program: impl AsRef<std::ffi::OsStr>) -> Command {
    match cp.and_then(|cp| cp.eks.as_ref()) {
        Some(eks) => eks.auth.in_names(program),
        None => Command::new(program),
    }
}

fn shell(imds: &str, moto: &str) -> Duration {
    let root = fresh_root();
    let mut c = Command::new("bash");
    env(&mut c, imds);
    c.arg(common::manifest_dir().join("benches/userdata.sh"))
        .env("ROOT", root.path())
        .env("IMDS", imds)
        .env("EC2_ENDPOINT", moto);
    timed(c)
}

/// The same-work floor, as its own process on a fresh root.
fn floor(imds: &str, moto: &str) -> Duration {
    let root = fresh_root();
    let mut c = Command::new(std::env::current_exe().unwrap());
    env(&mut c, imds);
    c.env("STARTUP_FLOOR", "1")
        .env("FLOOR_IMDS", imds)
        .env("FLOOR_EC2", moto)
        .env("FLOOR_ROOT", root.path());
    timed(c)
}

fn stats(mut v: Vec<Duration>) -> (f64, f64, f64) {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    (ms(v[0]), ms(v[v.len() / 2]), ms(v[v.len() - 1]))
}

/// The agent binaries to time: `EKS_NODEINIT_BIN` (default target/release/eks-nodeinit), then
/// each of `STARTUP_COMPARE` (`:`-separated: other builds, e.g. the commit before a change, run
/// in the same rounds so that all meet the same machine).
fn agents() -> Vec<PathBuf> {
    let bin = std::env::var("EKS_NODEINIT_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|_| common::manifest_dir().join("target/release/eks-nodeinit"));
    let mut all = vec![bin];
    if let Some(more) = std::env::var_os("STARTUP_COMPARE") {
        all.extend(std::env::split_paths(&more));
    }
    for b in &all {
        assert!(
            b.exists(),
            "{} missing: run `cargo build --release` first",
            b.display()
        );
    }
    all
}

/// A moto server with a real instance, and an IMDSv2 server describing it (its region, its
/// role's credentials).
fn peers() -> (common::Moto, ImdsServer) {
    let moto = common::start_moto().expect("moto[server] is installed (make deps)");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let instance_id = rt.block_on(async {
        let ec2 = common::ec2_client(&moto.url, "eu-west-1").await;
        common::run_instance(&ec2).await.0
    });
    let imds = ImdsServer::start();
    {
        let mut s = imds.state.lock().unwrap();
        s.data.insert("instance-id".into(), instance_id.clone());
        s.data.insert("placement/region".into(), "eu-west-1".into());
        s.data.insert(
            format!("iam/security-credentials/{ROLE}"),
            serde_json::json!({
                "Code": "Success", "LastUpdated": "2026-11-23T00:00:00Z", "Type": "AWS-HMAC",
                "AccessKeyId": "ASIABENCHEXAMPLE", "SecretAccessKey": "bench-secret",
                "Token": "bench-session-token", "Expiration": "2099-01-01T00:00:00Z",
            })
            .to_string(),
        );
    }
    (moto, imds)
}

fn print_table(
    runs: usize,
    agents: &[(PathBuf, Vec<Duration>)],
    s: Vec<Duration>,
    f: Vec<Duration>,
) {
    let (s, f) = (stats(s), stats(f));
    let a0 = stats(agents[0].1.clone());
    println!(
        "start → hand-off, {runs} runs each, same IMDSv2 server and moto, credentials from {} (ms: min / median / max)",
        if role_credentials() { "the instance role via IMDS" } else { "the environment" }
    );
    println!("| what | min | median | max | median vs eks-nodeinit |");
    println!("|---|---:|---:|---:|---:|");
    for (bin, times) in agents {
        let a = stats(times.clone());
        println!(
            "| eks-nodeinit init ({}) | {:.1} | {:.1} | {:.1} | {:.2}× the floor |",
            bin.display(),
            a.0,
            a.1,
            a.2,
            a.1 / f.1
        );
    }
    println!(
        "| shell script (curl + AWS CLI) | {:.1} | {:.1} | {:.1} | {:.1}× slower |",
        s.0,
        s.1,
        s.2,
        s.1 / a0.1
    );
    println!(
        "| same-work floor (separate process: same IMDS reads{}, signed CreateTags, same files fsync'd, exec) | {:.1} | {:.1} | {:.1} | eks-nodeinit is {:.2}× the floor |",
        if role_credentials() { " + role credentials" } else { "" },
        f.0, f.1, f.2, a0.1 / f.1
    );
}

fn main() {
    if std::env::var_os("STARTUP_FLOOR").is_some() {
        let v = |k: &str| std::env::var(k).unwrap();
        same_work_floor::run(
            &v("FLOOR_IMDS"),
            &v("FLOOR_EC2"),
            Path::new(&v("FLOOR_ROOT")),
            role_credentials(),
        );
    }
    let runs: usize = std::env::var("STARTUP_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let mut agents: Vec<(PathBuf, Vec<Duration>)> =
        agents().into_iter().map(|b| (b, vec![])).collect();
    assert!(
        Command::new("aws").arg("--version").output().is_ok(),
        "the AWS CLI is needed for the baseline: pip install awscli"
    );
    let (moto, imds) = peers();
    let url = imds.url();
    let pre = preflight_peers();
    let pre_run = |bin: &Path| {
        pre.as_ref().map(|(cp, i)| {
            let moto = &cp.eks.as_ref().unwrap().moto;
            agent_with(bin, &i.url(), moto, Some(cp))
        })
    };
    let mut with_preflight = vec![];
    // Warm-up: page cache, moto's first request.
    for (bin, _) in &agents {
        agent(bin, &url, &moto.url);
    }
    pre_run(&agents[0].0);
    shell(&url, &moto.url);
    floor(&url, &moto.url);

    let (mut s, mut f) = (vec![], vec![]);
    for round in 0..runs {
        // Each round starts with the next agent, so that none always runs right after another.
        let n = agents.len();
        for k in 0..n {
            let (bin, times) = &mut agents[(round + k) % n];
            times.push(agent(bin, &url, &moto.url));
        }
        with_preflight.extend(pre_run(&agents[0].0));
        s.push(shell(&url, &moto.url));
        f.push(floor(&url, &moto.url));
    }
    print_preflight(&agents[0], &with_preflight, &f);
    print_table(runs, &agents, s, f);
}

/// The agent with its preflight against a real API server, beside the same agent without it.
fn print_preflight(agent: &(PathBuf, Vec<Duration>), with: &[Duration], f: &[Duration]) {
    if with.is_empty() {
        return;
    }
    let (a, p, fl) = (
        stats(agent.1.clone()),
        stats(with.to_vec()),
        stats(f.to_vec()),
    );
    println!("the preflight (warn, every check passing against kube-apiserver, the EKS authenticator and moto), same rounds (ms: min / median / max):");
    println!("| what | min | median | max | median vs the floor |");
    println!("|---|---:|---:|---:|---:|");
    println!(
        "| eks-nodeinit init, preflight off | {:.1} | {:.1} | {:.1} | {:.2}× |",
        a.0,
        a.1,
        a.2,
        a.1 / fl.1
    );
    println!("| eks-nodeinit init, preflight on (healthy) | {:.1} | {:.1} | {:.1} | {:.2}× (+{:.1} ms) |", p.0, p.1, p.2, p.1 / fl.1, p.1 - a.1);
}
