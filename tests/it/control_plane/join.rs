//! Verified join against the real control plane (docs/join.md): kube-apiserver authenticating
//! nodes through the real aws-iam-authenticator (`common::iam_authenticator`), which reaches
//! STS and EC2 by their real names through a front checking each token's signature as STS does
//! and answering from moto; the Node authorizer and NodeRestriction. Each scenario is an
//! instance of a moto Auto Scaling group with a launch hook, its role's credentials served by the
//! strict IMDSv2 server in the suite's network namespace, its role mapped as the scenario says,
//! and the agent run there, where STS's name is the front's: `init` (the preflight), then
//! `complete-hook` (the proof) with kubelet.service active on a bus stand-in. Each asserts the
//! cause, the time to the verdict and what moto's Auto Scaling was told.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common;
use common::control_plane::{self, ControlPlane, CLUSTER, EKS_REGION, NODE_IP};
use common::dbus::{serve_unit_states, start_bus};
use common::iam_authenticator::{Mapping, Review};
use common::imds_server::ImdsServer;
use common::kubelet::Kubelet;
use common::node_identity::{instance_metadata, node_role, private_dns_name};
use common::*;
use eks_nodeinit::instance::lifecycle::LAUNCH_HOOK_DONE;
use eks_nodeinit::verify::proof::JOIN_JOB;

const HOOK: &str = "eks-node-ready";
pub(super) const VPC: &str = "10.0.0.0/16";

/// One instance of its own group, with its role mapped as the scenario says.
pub(super) struct Joining {
    pub root: tempfile::TempDir,
    pub(super) cfg: PathBuf,
    /// The instance's IMDS: a scenario may change what it serves.
    pub imds: ImdsServer,
    imds_url: String,
    pub instance: String,
    pub name: String,
    pub role_arn: String,
    /// The role session's access key: what the STS front records its calls under.
    pub access_key: String,
    /// The role's credentials as IMDS serves them.
    pub credentials: Value,
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
            let dns = private_dns_name(&moto, EKS_REGION, &id).await.unwrap();
            (id, dns)
        })
    })
}

/// An instance joining the suite's cluster, its role mapped as a node's (`EC2_LINUX`).
fn instance(cp: &ControlPlane, tag: &str, vpc: &str, edit: impl FnOnce(&mut Value)) -> Joining {
    instance_mapped(cp, tag, vpc, Mapping::Ec2Linux, edit)
}

/// An instance joining the suite's cluster: the group, the role mapped as `mapping`, IMDS in
/// the namespace, an AL2023 sample root and the config (the hook, the preflight in `warn`),
/// edited by `edit`.
pub(super) fn instance_mapped(
    cp: &ControlPlane,
    tag: &str,
    vpc: &str,
    mapping: Mapping,
    edit: impl FnOnce(&mut Value),
) -> Joining {
    let (instance, name) = group(cp, tag);
    let role = node_role(cp.eks.as_ref().unwrap(), &cp.netns, tag, &instance, mapping);
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
        // The join's own checks; the hardened-AMI checks read the live kernel, which a sample
        // root has not (tests/it/hardening.rs has them).
        v["verify"] = json!({"preflight": "warn", "joinDeadline": "40s", "hardening": "off"});
        edit(v);
    });
    Joining {
        imds_url: imds.url(),
        imds,
        root,
        cfg,
        instance,
        name,
        role_arn: role.arn,
        access_key: role.access_key,
        credentials: role.credentials,
    }
}

/// The agent in the suite's namespace, IMDS and AWS as on the instance: STS by its real name
/// (the front, trusted as the platform's roots trust STS), no `AWS_ENDPOINT_URL_STS` (a token
/// for any other host is refused); EC2, ECR and Auto Scaling moto's.
pub(super) fn agent(cp: &ControlPlane, j: &Joining, args: &[&str]) -> Command {
    let eks = cp.eks.as_ref().unwrap();
    let mut c = with_clean_env(eks.auth.in_names(bin()));
    c.env_remove("AWS_EC2_METADATA_DISABLED")
        .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", &j.imds_url)
        .env("AWS_REGION", EKS_REGION)
        .env("SSL_CERT_FILE", &eks.auth.front_ca);
    for s in ["EC2", "ECR", "AUTO_SCALING"] {
        c.env(format!("AWS_ENDPOINT_URL_{s}"), &eks.moto);
    }
    c.args(args);
    c
}

pub(super) fn init(cp: &ControlPlane, j: &Joining) -> (Output, Duration) {
    let t = Instant::now();
    let out = run(agent(cp, j, &["init", "--config"])
        .arg(&j.cfg)
        .arg("--root")
        .arg(j.root.path()));
    (out, t.elapsed())
}

/// `complete-hook` as the scenarios run it: kubelet.service's state on the bus `bus`, the
/// Auto Scaling calls within 20 s, the Node read every half second.
pub(super) fn complete_hook_command(cp: &ControlPlane, j: &Joining, bus: &str) -> Command {
    let mut c = agent(cp, j, &["complete-hook", "--root"]);
    c.arg(j.root.path()).args([
        "--system-bus-address",
        bus,
        "--deadline-sec",
        "20",
        "--poll-ms",
        "500",
        "--kubelet-wait-sec",
        "5",
    ]);
    c
}

/// `complete-hook`, kubelet.service active on the bus.
fn complete_hook(cp: &ControlPlane, j: &Joining, bus: &str) -> (Output, Duration) {
    let t = Instant::now();
    let out = run(&mut complete_hook_command(cp, j, bus));
    (out, t.elapsed())
}

pub(super) fn report(j: &Joining) -> Value {
    serde_json::from_slice(
        &std::fs::read(j.root.path().join("var/lib/eks-nodeinit/report.json")).unwrap(),
    )
    .unwrap()
}

/// What moto's Auto Scaling was told for this instance.
pub(super) fn told(cp: &ControlPlane, j: &Joining) -> Vec<String> {
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
pub(super) fn check<'a>(rep: &'a Value, check: &str) -> &'a Value {
    rep["join"]["preflight"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"].as_str().unwrap().starts_with(check))
        .unwrap_or_else(|| panic!("no check {check}: {rep:#}"))
}

pub(super) fn bus_with_kubelet_active() -> Option<common::dbus::Bus> {
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

/// The suite's control plane and the instance `tag` joining it, its role mapped as `mapping`,
/// when this host can run the suite.
fn joining(
    tag: &str,
    mapping: Mapping,
    edit: impl FnOnce(&mut Value),
) -> Option<(std::sync::MutexGuard<'static, ControlPlane>, Joining)> {
    if !ready() {
        return None;
    }
    let cp = ControlPlane::shared();
    let j = instance_mapped(&cp, tag, VPC, mapping, edit);
    Some((cp, j))
}

/// The STS front's calls for this node's access key: (status, x-k8s-aws-id) each.
pub(super) fn sts_calls(cp: &ControlPlane, j: &Joining) -> Vec<(u64, String)> {
    let auth = &cp.eks.as_ref().unwrap().auth;
    auth.sts_calls(&j.access_key)
        .iter()
        .map(|c| {
            let cluster = c["cluster"].as_str().unwrap_or_default().to_string();
            (c["status"].as_u64().unwrap_or_default(), cluster)
        })
        .collect()
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
        "checks done",
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
    let Some((cp, j)) = joining("good", Mapping::Ec2Linux, |_| {}) else {
        return;
    };
    let (out, took) = init(&cp, &j);
    assert!(out.status.success(), "{}", stderr(&out));
    // The identity check's token, checked once by STS (the front) for this cluster.
    assert_eq!(sts_calls(&cp, &j), [(200, CLUSTER.to_string())]);
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
        let mut c = complete_hook_command(&cp, &j, &bus.address);
        std::thread::spawn(move || run(&mut c))
    };
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        told(&cp, &j).is_empty(),
        "nothing told before the Node exists"
    );
    let start = super::al2023_start_of(j.root.path(), None, &j.instance);
    let mut kubelet = Kubelet::start(&cp, &j.name, &start);
    let node = kubelet.node(&cp);
    cp.set_addresses(&j.name, NODE_IP);
    let out = proof.join().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(told(&cp, &j), ["CONTINUE"]);
    eprintln!("Node {}: {}", j.name, node["status"]["allocatable"]);
    assert_joined(&cp, &j);
    assert_every_review_was_sts_checked(&cp, &j);
}

/// Each of the node's TokenReviews (the preflight's, the proof's first) was one call the STS
/// front answered for this node's key and cluster, and the authenticator mapped it to the node.
/// (kube-apiserver keeps a good token's answer 10 s whatever the webhook's cache TTL, and two
/// runs signing in the same second make the same token: the count is not fixed.)
fn assert_every_review_was_sts_checked(cp: &ControlPlane, j: &Joining) {
    let calls = sts_calls(cp, j);
    assert!(!calls.is_empty());
    assert!(
        calls.iter().all(|c| *c == (200, CLUSTER.to_string())),
        "{calls:?}"
    );
    let user = format!("system:node:{}", j.name);
    let granted = cp.eks.as_ref().unwrap().auth.reviews().into_iter().filter(|r| {
        matches!(r, Review::Granted { username, groups } if *username == user && groups.iter().any(|g| g == "system:nodes"))
    });
    assert_eq!(granted.count(), calls.len(), "one review per STS call");
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn an_unmapped_role_fails_the_preflight_and_the_hook_is_abandoned_before_any_change() {
    let Some((cp, j)) = joining("unmapped", Mapping::Unmapped, |v| {
        v["verify"]["preflight"] = "fail".into()
    }) else {
        return;
    };
    assert!(!cp.eks.as_ref().unwrap().auth.maps(&j.role_arn));
    let (out, took) = init(&cp, &j);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(
        e.contains("check before the changes failed: no hand-off, nothing was changed"),
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
    assert_eq!(rep["join"]["verdict"], "checks-failed");
    assert_eq!(told(&cp, &j), ["ABANDON"]);
    assert!(
        !j.root
            .path()
            .join("etc/eks/nodeadm.d/10-eks-nodeinit.json")
            .exists(),
        "no hand-off"
    );
    // STS knew the role (the token is good); the authenticator found no mapping for it.
    assert_eq!(sts_calls(&cp, &j), [(200, CLUSTER.to_string())]);
    let auth = &cp.eks.as_ref().unwrap().auth;
    let refused = auth.reviews().into_iter().any(|r| {
        r == Review::Denied {
            error: "Identity is not mapped".into(),
            arn: Some(j.role_arn.clone()),
        }
    });
    assert!(
        refused,
        "the authenticator refused the role:\n{}",
        auth.log()
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
    let status = run(agent(&cp, &j, &["status", "--root"]).arg(j.root.path()));
    assert_eq!(status.status.code(), Some(1));
    let text = stdout(&status);
    assert!(text.contains("verdict: checks-failed"), "{text}");
    assert!(
        text.contains(&format!("launch hook: ABANDON ({HOOK})")),
        "{text}"
    );
    let json = run(agent(&cp, &j, &["status", "--output", "json", "--root"]).arg(j.root.path()));
    let v: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["verdict"], "checks-failed");
}

/// A warn-mode scenario's instance and the check that failed.
pub(super) struct Warned {
    pub check: Value,
    pub took: Duration,
    pub j: Joining,
}

/// A warn-mode scenario, the role mapped as `mapping`: init goes on (exit 0), the named check
/// failed with `cause`, and the hand-off is made with the launch hook left to the proof.
pub(super) fn warned(
    tag: &str,
    vpc: &str,
    mapping: Mapping,
    edit: impl FnOnce(&mut Value),
    name: &str,
    cause: &str,
) -> Warned {
    let cp = ControlPlane::shared();
    let j = instance_mapped(&cp, tag, vpc, mapping, edit);
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
    let root = j.root.path();
    assert!(
        root.join("etc/eks/nodeadm.d/10-eks-nodeinit.json").exists(),
        "warn: the hand-off goes on"
    );
    // Where fail mode abandons (the unmapped scenario), warn mode hands the hook to the
    // proof: its job written for complete-hook, the hook not decided by init.
    assert!(
        root.join("run/eks-nodeinit/join.json").exists(),
        "the proof's job"
    );
    let hook = rep["join"]["hook"].as_str().unwrap_or_default();
    assert!(
        hook.is_empty(),
        "init decided the hook in warn mode: {hook}"
    );
    Warned { check: c, took, j }
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
    let w = warned(
        "otherca",
        VPC,
        Mapping::Ec2Linux,
        |v| v["cluster"]["certificateAuthority"] = other_ca.into(),
        "API server",
        "tls-untrusted",
    );
    assert!(
        !w.check["detail"].as_str().unwrap().contains("BEGIN"),
        "the CA is never echoed"
    );
    // An API server the node does not trust is never sent the token: no review, no STS call.
    let id = check(&report(&w.j), "identity").clone();
    assert_eq!(id["result"], "notRun", "{id:#}");
    assert!(sts_calls(&ControlPlane::shared(), &w.j).is_empty());
    warned(
        "nodns",
        VPC,
        Mapping::Ec2Linux,
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
    let Warned { check: c, took, .. } = warned(
        "drop",
        VPC,
        Mapping::Ec2Linux,
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
        Mapping::Ec2Linux,
        |_| {},
        "service CIDR",
        "service-cidr",
    );
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn a_kubelet_that_never_registers_meets_the_deadline_and_the_launch_goes_on_named() {
    let Some((cp, j)) = joining("noreg", Mapping::Ec2Linux, |v| {
        v["verify"]["joinDeadline"] = "10s".into();
        // Kept, the node would be watched for a late join: not here.
        v["verify"]["lateJoin"] = "0s".into();
    }) else {
        return;
    };
    let (out, _) = init(&cp, &j);
    assert!(out.status.success(), "{}", stderr(&out));
    let Some(bus) = bus_with_kubelet_active() else {
        return;
    };
    let (out, took) = complete_hook(&cp, &j, &bus.address);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(e.contains("did not join (verdict deadline)"), "{e}");
    assert!(
        e.contains(&format!("no Node {} registered yet", j.name)),
        "{e}"
    );
    // No like instance of its group joined (its group is this one instance): nothing tells
    // this node's cause from the group's, and a replacement would meet it too.
    assert!(
        e.contains("this node never registered while the API server answered, and 0 like instances of its group"),
        "{e}"
    );
    assert!(
        (Duration::from_secs(10)..Duration::from_secs(20)).contains(&took),
        "{took:?}"
    );
    assert_eq!(told(&cp, &j), ["CONTINUE"]);
    let rep = report(&j);
    assert_eq!(rep["join"]["verdict"], "deadline");
    assert_eq!(rep["join"]["blame"], "cluster");
    assert_eq!(rep["join"]["hook"], format!("CONTINUE ({HOOK})"));
    let status = run(agent(&cp, &j, &["status", "--root"]).arg(j.root.path()));
    assert_eq!(status.status.code(), Some(1));
    assert!(
        stdout(&status).contains("blame: cluster"),
        "{}",
        stdout(&status)
    );
    // strict: the same node is abandoned.
    let text = std::fs::read_to_string(j.root.path().join(&JOIN_JOB[1..])).unwrap();
    let mut job: Value = serde_json::from_str(&text).unwrap();
    job["strict"] = true.into();
    std::fs::write(j.root.path().join(&JOIN_JOB[1..]), job.to_string()).unwrap();
    let hook_done = j.root.path().join(&LAUNCH_HOOK_DONE[1..]);
    std::fs::remove_file(&hook_done).unwrap();
    let (out, _) = complete_hook(&cp, &j, &bus.address);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    // Auto Scaling had taken the CONTINUE: the strict run's ABANDON finds no launch waiting.
    let rep = report(&j);
    assert_eq!(rep["join"]["blame"], "cluster");
    let hook = rep["join"]["hook"].as_str().unwrap();
    assert!(hook.starts_with("ABANDON not taken"), "{hook}");
    assert_eq!(told(&cp, &j), ["CONTINUE"]);
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn sts_unreachable_through_the_proxy_is_named_with_the_proxys_answer() {
    if !ready() || !peer_present(&missing_commands(&["tinyproxy"])) {
        return;
    }
    let cp = ControlPlane::shared();
    let dir = tempfile::tempdir().unwrap();
    // A proxy whose filter refuses STS by name (NO_PROXY does not name it), as a proxy
    // allow-listing the AWS endpoints a node needs to join might.
    let filter = dir.path().join("filter");
    std::fs::write(&filter, "^sts\\.\n").unwrap();
    let conf = format!("Filter \"{}\"\n", filter.display());
    let (_proxy, port, log) = common::tinyproxy::start_in(Some(&cp.netns), dir.path(), &conf, None);
    let j = instance(&cp, "proxied", "10.1.0.0/16", |v| {
        v["proxy"] = json!({"https": format!("http://127.0.0.1:{port}")});
    });
    let (out, _) = init(&cp, &j);
    assert!(out.status.success(), "{}", stderr(&out));
    let rep = report(&j);
    let c = check(&rep, "STS");
    assert_eq!(
        (c["result"].as_str(), c["cause"].as_str()),
        (Some("failed"), Some("proxy")),
        "{c:#}"
    );
    let sts = format!("sts.{EKS_REGION}.amazonaws.com:443");
    let detail = c["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!(
            "answered CONNECT {sts} with `HTTP/1.1 403 Filtered`"
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
            .any(|l| l.starts_with(&format!("CONNECT {sts}"))),
        "{connects:?}"
    );
    // The API server (127.0.0.1, always direct) and EC2 (moto on loopback) are reached
    // directly; the identity is proven all the same: STS is called by the control plane's
    // authenticator, not by the node.
    for name in ["API server", "EC2", "identity"] {
        assert_eq!(check(&rep, name)["result"], "passed", "{name}");
    }
    assert_eq!(sts_calls(&cp, &j), [(200, CLUSTER.to_string())]);
}
