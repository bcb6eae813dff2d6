//! Verified join against the real control plane (docs/join.md): kube-apiserver authenticating
//! nodes through the suite's EKS authenticator (`common::eks_auth`: the token's presigned STS
//! URL checked and called on moto, the role mapped to `system:node:{{EC2PrivateDNSName}}`), the
//! Node authorizer and NodeRestriction. Each scenario is an instance of a moto Auto Scaling
//! group with a launch hook, its role's credentials served by the strict IMDSv2 server in the
//! suite's network namespace, and the agent run there: `init` (the preflight), then
//! `complete-hook` (the proof) with kubelet.service active on a bus stand-in. Each asserts the
//! cause, the time to the verdict and what moto's Auto Scaling was told.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common;
use common::control_plane::{self, in_netns, ControlPlane, CLUSTER, EKS_REGION, NODE_IP};
use common::dbus::{serve_unit_states, start_bus};
use common::eks_auth::{instance_metadata, node_role};
use common::imds_server::ImdsServer;
use common::kubelet::Kubelet;
use common::*;

const HOOK: &str = "eks-node-ready";
const VPC: &str = "10.0.0.0/16";

/// One instance of its own group, with its role mapped as a node's.
struct Joining {
    root: tempfile::TempDir,
    cfg: PathBuf,
    _imds: ImdsServer,
    imds_url: String,
    instance: String,
    name: String,
    role_arn: String,
}

/// The scenario's group (one instance, a launch hook) and the instance's private DNS name.
fn group(cp: &ControlPlane, tag: &str) -> (String, String) {
    let moto = cp.eks.as_ref().unwrap().moto.clone();
    let tag = tag.to_string();
    common::netns::run_in(&cp.netns, move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async move {
            let conf = common::moto_sdk_config(&moto, EKS_REGION).await;
            let g = format!("asg-{tag}");
            let a = common::group_with_launch_hook(&conf, &g, HOOK, "us-east-1a", 1).await;
            let out = a
                .describe_auto_scaling_groups()
                .auto_scaling_group_names(&g)
                .send()
                .await
                .unwrap();
            let id = out.auto_scaling_groups()[0].instances()[0]
                .instance_id()
                .unwrap()
                .to_string();
            let dns = common::eks_auth::private_dns_name(&moto, EKS_REGION, &id)
                .await
                .unwrap();
            (id, dns)
        })
    })
}

/// An instance joining the suite's cluster: the group, the role, IMDS in the namespace, an
/// AL2023 sample root and the config (the hook, the preflight in `mode`), edited by `edit`.
fn instance(cp: &ControlPlane, tag: &str, vpc: &str, edit: impl FnOnce(&mut Value)) -> Joining {
    let (instance, name) = group(cp, tag);
    let role = node_role(cp.eks.as_ref().unwrap(), &cp.netns, tag, &instance);
    let group = format!("asg-{tag}");
    let st = instance_metadata(
        &instance,
        NODE_IP,
        &name,
        EKS_REGION,
        &role,
        vpc,
        Some(&group),
    );
    let imds = ImdsServer::start_in(Some(&cp.netns), st);
    let root = sample_root("al2023-root");
    let ca = std::fs::read(cp.ca()).unwrap();
    let cfg = config_with(root.path(), "c.json", |v| {
        v["tagging"] = json!({"enabled": false});
        v["cluster"] = json!({"name": CLUSTER, "apiServerEndpoint": cp.endpoint(), "certificateAuthority": control_plane::base64_encode(&ca), "cidr": control_plane::SERVICE_CIDR});
        v["lifecycle"] = json!({"completeLaunchHook": HOOK});
        v["verify"] = json!({"preflight": "warn", "joinDeadline": "40s"});
        edit(v);
    });
    Joining {
        imds_url: imds.url(),
        _imds: imds,
        root,
        cfg,
        instance,
        name,
        role_arn: role.arn,
    }
}

/// The agent in the suite's namespace, IMDS and AWS (moto) as on the instance.
fn agent(cp: &ControlPlane, j: &Joining, args: &[&str]) -> Command {
    let moto = &cp.eks.as_ref().unwrap().moto;
    let mut c = with_clean_env(in_netns(&cp.netns, bin()));
    c.env_remove("AWS_EC2_METADATA_DISABLED")
        .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", &j.imds_url)
        .env("AWS_REGION", EKS_REGION);
    for s in ["STS", "EC2", "ECR", "AUTO_SCALING"] {
        c.env(format!("AWS_ENDPOINT_URL_{s}"), moto);
    }
    c.args(args);
    c
}

fn init(cp: &ControlPlane, j: &Joining) -> (Output, Duration) {
    let t = Instant::now();
    let out = run(agent(cp, j, &["init", "--config"])
        .arg(&j.cfg)
        .arg("--root")
        .arg(j.root.path()));
    (out, t.elapsed())
}

/// `complete-hook`, kubelet.service active on the bus.
fn complete_hook(cp: &ControlPlane, j: &Joining, bus: &str) -> (Output, Duration) {
    let t = Instant::now();
    let out = run(agent(cp, j, &["complete-hook", "--root"])
        .arg(j.root.path())
        .args([
            "--system-bus-address",
            bus,
            "--deadline-sec",
            "20",
            "--poll-ms",
            "500",
            "--kubelet-wait-sec",
            "5",
        ]));
    (out, t.elapsed())
}

fn report(j: &Joining) -> Value {
    serde_json::from_slice(
        &std::fs::read(j.root.path().join("var/lib/eks-nodeinit/report.json")).unwrap(),
    )
    .unwrap()
}

/// What moto's Auto Scaling was told for this instance.
fn told(cp: &ControlPlane, j: &Joining) -> Vec<String> {
    let log = std::fs::read_to_string(&cp.eks.as_ref().unwrap().hook_log).unwrap_or_default();
    log.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["InstanceId"] == j.instance.as_str())
        .map(|v| {
            v["LifecycleActionResult"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// The preflight's result for the check named `check` (its `check` text starts so).
fn check<'a>(rep: &'a Value, check: &str) -> &'a Value {
    rep["join"]["preflight"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"].as_str().unwrap().starts_with(check))
        .unwrap_or_else(|| panic!("no check {check}: {rep:#}"))
}

fn bus_with_kubelet_active() -> Option<common::dbus::Bus> {
    let bus = start_bus()?;
    serve_unit_states(
        &bus.address,
        &[(
            "kubelet.service",
            Arc::new(Mutex::new("active".to_string())),
        )],
    );
    Some(bus)
}

fn ready() -> bool {
    super::ready()
}

/// The suite's control plane and the instance `tag` joining it, when this host can run the
/// suite.
fn joining(
    tag: &str,
    vpc: &str,
    edit: impl FnOnce(&mut Value),
) -> Option<(std::sync::MutexGuard<'static, ControlPlane>, Joining)> {
    if !ready() {
        return None;
    }
    let cp = ControlPlane::shared();
    let j = instance(&cp, tag, vpc, edit);
    Some((cp, j))
}

/// The node's record after a good join: the verdict, the hook, every phase, the Node as
/// planned, and `status` saying so.
fn assert_joined(cp: &ControlPlane, j: &Joining) {
    let rep = report(j);
    let join = &rep["join"];
    assert_eq!(join["verdict"], "joined", "{join:#}");
    assert_eq!(join["hook"], format!("CONTINUE ({HOOK})"));
    let phases: Vec<&str> = join["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    for p in [
        "agent started",
        "preflight done",
        "handed off",
        "kubelet active",
        "Node registered",
        "Node Ready",
        "verdict",
    ] {
        assert!(phases.contains(&p), "{p} in {phases:?}");
    }
    let checked = join["checked"].to_string();
    assert!(checked.contains("allocatable pods 29"), "{checked}");
    assert!(checked.contains("allocatable memory"), "{checked}");
    let status = run(agent(cp, j, &["status", "--root"]).arg(j.root.path()));
    assert!(status.status.success(), "{}", stderr(&status));
    assert!(
        stdout(&status).contains("verdict: joined"),
        "{}",
        stdout(&status)
    );
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn a_good_node_is_continued_only_after_its_node_is_ready_as_planned() {
    let Some((cp, j)) = joining("good", VPC, |_| {}) else {
        return;
    };
    let (out, took) = init(&cp, &j);
    assert!(out.status.success(), "{}", stderr(&out));
    let rep = report(&j);
    for c in rep["join"]["preflight"].as_array().unwrap() {
        assert_eq!(c["result"], "passed", "{c:#}");
    }
    let id = check(&rep, "identity");
    assert!(
        id["detail"]
            .as_str()
            .unwrap()
            .contains(&format!("system:node:{} in [", j.name)),
        "{id:#}"
    );
    eprintln!(
        "init with the preflight: {took:?}, preflight {} ms",
        rep["join"]["preflight"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["ms"].as_u64().unwrap())
            .max()
            .unwrap()
    );
    let Some(bus) = bus_with_kubelet_active() else {
        return;
    };
    // The proof starts before the kubelet: nothing is told while no Node is Ready.
    let proof = {
        let mut c = agent(&cp, &j, &["complete-hook", "--root"]);
        c.arg(j.root.path()).args([
            "--system-bus-address",
            &bus.address,
            "--deadline-sec",
            "20",
            "--poll-ms",
            "500",
            "--kubelet-wait-sec",
            "5",
        ]);
        std::thread::spawn(move || run(&mut c))
    };
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        told(&cp, &j).is_empty(),
        "nothing told before the Node exists"
    );
    let start = super::al2023_start(j.root.path(), None);
    let mut kubelet = Kubelet::start(&cp, &j.name, &start);
    let node = kubelet.node(&cp);
    cp.set_addresses(&j.name, NODE_IP);
    let out = proof.join().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(told(&cp, &j), ["CONTINUE"]);
    eprintln!("Node {}: {}", j.name, node["status"]["allocatable"]);
    assert_joined(&cp, &j);
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn an_unmapped_role_fails_the_preflight_and_the_hook_is_abandoned_before_any_change() {
    let Some((cp, j)) = joining("unmapped", VPC, |v| {
        v["verify"]["preflight"] = "fail".into()
    }) else {
        return;
    };
    let auth = &cp.eks.as_ref().unwrap().auth;
    auth.state.lock().unwrap().roles.remove(&j.role_arn);
    assert!(!auth.maps(&j.role_arn));
    let (out, took) = init(&cp, &j);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(
        e.contains(
            "preflight check failed (verify.preflight: fail): no hand-off, nothing was changed"
        ),
        "{e}"
    );
    let rep = report(&j);
    let id = check(&rep, "identity");
    assert_eq!(
        (id["result"].as_str(), id["cause"].as_str()),
        (Some("failed"), Some("unauthenticated")),
        "{id:#}"
    );
    assert!(id["todo"].as_str().unwrap().contains("EC2_LINUX"), "{id:#}");
    assert_eq!(rep["join"]["verdict"], "preflight-failed");
    assert_eq!(told(&cp, &j), ["ABANDON"]);
    assert!(
        !j.root
            .path()
            .join("etc/eks/nodeadm.d/10-eks-nodeinit.json")
            .exists(),
        "no hand-off"
    );
    let refused = cp
        .eks
        .as_ref()
        .unwrap()
        .auth
        .reviews()
        .iter()
        .any(|r| matches!(r, Err(w) if w.contains(&j.role_arn)));
    assert!(refused, "the authenticator refused the role");
    assert!(took < Duration::from_secs(10), "{took:?}");
    let status = run(agent(&cp, &j, &["status", "--root"]).arg(j.root.path()));
    assert_eq!(status.status.code(), Some(1));
    let text = stdout(&status);
    assert!(text.contains("verdict: preflight-failed"), "{text}");
    assert!(
        text.contains(&format!("launch hook: ABANDON ({HOOK})")),
        "{text}"
    );
    let json = run(agent(&cp, &j, &["status", "--output", "json", "--root"]).arg(j.root.path()));
    let v: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["verdict"], "preflight-failed");
}

/// A warn-mode scenario: init goes on (exit 0) and the named check failed with `cause`.
fn warned(
    tag: &str,
    vpc: &str,
    edit: impl FnOnce(&mut Value),
    name: &str,
    cause: &str,
) -> (Value, Duration) {
    let cp = ControlPlane::shared();
    let j = instance(&cp, tag, vpc, edit);
    let (out, took) = init(&cp, &j);
    assert!(out.status.success(), "{}", stderr(&out));
    let rep = report(&j);
    let c = check(&rep, name).clone();
    assert_eq!(
        (c["result"].as_str(), c["cause"].as_str()),
        (Some("failed"), Some(cause)),
        "{c:#}"
    );
    assert!(
        stderr(&out).contains(&format!("({cause})")),
        "logged: {}",
        stderr(&out)
    );
    assert!(
        j.root
            .path()
            .join("etc/eks/nodeadm.d/10-eks-nodeinit.json")
            .exists(),
        "warn: the hand-off goes on"
    );
    assert!(told(&cp, &j).is_empty());
    (c, took)
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn a_ca_of_another_cluster_an_unresolvable_endpoint_and_a_dropping_port_are_named() {
    if !ready() {
        return;
    }
    let other = tempfile::tempdir().unwrap();
    let (other_ca, _, _) = common::tls::certificates(other.path());
    let other_ca = control_plane::base64_encode(&std::fs::read(other_ca).unwrap());
    let (c, _) = warned(
        "otherca",
        VPC,
        |v| v["cluster"]["certificateAuthority"] = other_ca.into(),
        "API server",
        "tls-untrusted",
    );
    assert!(
        !c["detail"].as_str().unwrap().contains("BEGIN"),
        "the CA is never echoed"
    );
    warned(
        "nodns",
        VPC,
        |v| v["cluster"]["apiServerEndpoint"] = "https://api.prod-eu.invalid".into(),
        "API server",
        "dns",
    );
    // A port whose packets are dropped: the check waits out the budget, no longer.
    let cp = ControlPlane::shared();
    control_plane::sh_in(
        &cp.netns,
        "iptables",
        &["-A", "INPUT", "-p", "tcp", "--dport", "6449", "-j", "DROP"],
    );
    drop(cp);
    let (c, took) = warned(
        "drop",
        VPC,
        |v| {
            v["cluster"]["apiServerEndpoint"] = format!("https://{NODE_IP}:6449").into();
            v["verify"]["preflightBudget"] = "1s".into();
        },
        "API server",
        "timeout",
    );
    assert!((1000..1500).contains(&c["ms"].as_u64().unwrap()), "{c:#}");
    assert!(took < Duration::from_secs(10), "{took:?}");
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn a_service_cidr_that_is_the_vpcs_is_named() {
    if !ready() {
        return;
    }
    warned(
        "vpccidr",
        control_plane::SERVICE_CIDR,
        |_| {},
        "service CIDR",
        "service-cidr",
    );
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn a_kubelet_that_never_registers_meets_the_deadline_and_the_hook_is_abandoned() {
    let Some((cp, j)) = joining("noreg", VPC, |v| v["verify"]["joinDeadline"] = "10s".into())
    else {
        return;
    };
    let (out, _) = init(&cp, &j);
    assert!(out.status.success(), "{}", stderr(&out));
    let Some(bus) = bus_with_kubelet_active() else {
        return;
    };
    let (out, took) = complete_hook(&cp, &j, &bus.address);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("did not join (verdict deadline)"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains(&format!("no Node {} registered yet", j.name)),
        "{}",
        stderr(&out)
    );
    assert!(
        (Duration::from_secs(10)..Duration::from_secs(20)).contains(&took),
        "{took:?}"
    );
    assert_eq!(told(&cp, &j), ["ABANDON"]);
    let rep = report(&j);
    assert_eq!(rep["join"]["verdict"], "deadline");
    assert_eq!(rep["join"]["hook"], format!("ABANDON ({HOOK})"));
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn sts_unreachable_through_the_proxy_is_named_with_the_proxys_answer() {
    if !ready() || !peer_present(&missing_commands(&["tinyproxy"])) {
        return;
    }
    let cp = ControlPlane::shared();
    let dir = tempfile::tempdir().unwrap();
    // The proxy allows CONNECT to 443 only, as a proxy allow-listing the AWS endpoints would;
    // STS is on another port here (moto's, by the node's address, which NO_PROXY does not name:
    // the VPC is another block), so the proxy refuses it.
    let (_proxy, port, log) =
        common::tinyproxy::start_in(Some(&cp.netns), dir.path(), "ConnectPort 443\n", None);
    let moto_port = cp
        .eks
        .as_ref()
        .unwrap()
        .moto
        .rsplit(':')
        .next()
        .unwrap()
        .to_string();
    let j = instance(&cp, "proxied", "10.1.0.0/16", |v| {
        v["proxy"] = json!({"https": format!("http://127.0.0.1:{port}")});
    });
    // https, as STS is: through the proxy with CONNECT, which the proxy refuses first.
    let sts = format!("https://{NODE_IP}:{moto_port}");
    let out = run(agent(&cp, &j, &["init", "--config"])
        .env("AWS_ENDPOINT_URL_STS", &sts)
        .arg(&j.cfg)
        .arg("--root")
        .arg(j.root.path()));
    assert!(out.status.success(), "{}", stderr(&out));
    let rep = report(&j);
    let c = check(&rep, "STS");
    assert_eq!(
        (c["result"].as_str(), c["cause"].as_str()),
        (Some("failed"), Some("proxy")),
        "{c:#}"
    );
    let detail = c["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!(
            "answered CONNECT {NODE_IP}:{moto_port} with `HTTP/1.1 403 Access violation`"
        )),
        "{detail}"
    );
    assert!(
        c["todo"].as_str().unwrap().contains("proxy.noProxy"),
        "{c:#}"
    );
    let connects = common::tinyproxy::proxied(&log);
    assert!(
        connects
            .iter()
            .any(|l| l.starts_with(&format!("CONNECT {NODE_IP}:{moto_port}"))),
        "{connects:?}"
    );
    // The API server (127.0.0.1, always direct) and EC2 (moto on loopback) are reached directly.
    assert_eq!(check(&rep, "API server")["result"], "passed");
    assert_eq!(check(&rep, "EC2")["result"], "passed");
}
