//! The scenario where the node joins for real: the shipped `al2023-name-only.mime` with
//! `kubelet.maxPods: {}` added, run by the packaged unit on AL2023. The guest runs containerd 2
//! and the kubelet built from upstream's modules (`make peers-k8s`) under its own systemd, with
//! Debian's CNI plugins for a bridge network, and joins a kube-apiserver on this host (etcd
//! beside it), which Parameter Store (moto) names: the user data carries no endpoint or CA.
//!
//! The nodeadm stand-in's config phase writes the kubelet's files (guest/nodeadm_kubelet.py), its
//! run phase starts containerd and the kubelet. The kubelet authenticates with a client
//! certificate the host issued for the node's name (EKS's token path is not this scenario's).
//! While the VM runs, the host plays the cloud controller manager (the Node's addresses) and the
//! cluster's signer (the kubelet's serving certificate). The guest reports its Node once Ready,
//! the kubelet's startup metrics and the inhibitors; after the reboot, the first boot's kubelet
//! journal. The host checks the Node against the plan, the kubelet's delay inhibitor, its
//! shutdown manager at the reboot, and the Node's condition while the guest shut down.

use super::*;
use crate::common::control_plane::{client_certificate, peers_bin, ControlPlane, EksAt};
use crate::common::handoff_models;
use crate::common::iam_authenticator::{Mapping, Review};
use crate::common::kubelet::{assert_allocatable, taints_but_the_kubelets};
use crate::common::node_identity::{node_role, NodeRole};

/// Where the guest reaches the API server (QEMU forwards it to the host's loopback).
pub(super) const GUEST_API_ADDR: &str = "169.254.170.96";
const GUEST_API_PORT: u16 = 6443;
/// The 2 MiB huge pages the scenario asks for.
const HUGEPAGES: u64 = 16;
/// The swap file it asks for, in bytes.
const SWAP: u64 = 64 << 20;

pub(super) fn is_join(name: &str) -> bool {
    name == "al2023-joins" || unfit::is_unfit(name)
}

/// The scenario whose role the cluster does not map: `verify.preflight: fail` and a launch hook.
pub(super) fn is_unmapped(name: &str) -> bool {
    name == "al2023-unmapped"
}

/// The scenarios with an API server on the host (the peers built from upstream's modules).
pub(super) fn needs_cluster(name: &str) -> bool {
    is_join(name) || is_unmapped(name)
}

/// The kernel settings an AL2023 AMI ships (`/etc/sysctl.d/99-amazon.conf`), which the
/// kubelet's protectKernelDefaults requires (the hardened scenario's guest has them too).
pub(super) const AMI_SYSCTLS: &str =
    "vm.overcommit_memory=1\nkernel.panic=10\nkernel.panic_on_oops=1\n";

/// The unmapped scenario's launch hook, on the group the instance's tags name.
const HOOK: &str = "eks-node-ready";
const GROUP: &str = "eks-e2e-asg";

/// What this scenario needs beside the others: the peers built from upstream's modules.
pub(super) fn prerequisites() -> Result<(), String> {
    let missing = crate::common::control_plane::missing();
    match missing.is_empty() {
        true => Ok(()),
        false => Err(format!("{missing:?} missing")),
    }
}

/// The endpoint Parameter Store gives the agent.
pub(super) fn endpoint() -> String {
    format!("https://{GUEST_API_ADDR}:{GUEST_API_PORT}")
}

/// The user data: the shipped name-only example with `kubelet.maxPods: {}` added, so that the
/// plan says what the Node's pods and allocatable must be, 16 huge pages of 2 MiB, a 64 MiB
/// swap file, and a preflight budget of 10 s: under TCG a guest's identity check (a presigned
/// token, TLS to the host's API server, its webhook to the authenticator) once took 2.02 s of
/// the default 2 s with the host loaded. Every check must still pass; the budget's own rule is
/// the host suites'.
pub(super) fn edit_user_data(sc: &mut Scenario) {
    sc.config["kubelet"]["maxPods"] = serde_json::json!({});
    sc.config["verify"]["preflightBudget"] = serde_json::json!("10s");
    sc.config["host"] = serde_json::json!({
        "hugepages": {"2Mi": HUGEPAGES},
        "swap": {"size": format!("{}Mi", SWAP >> 20)},
    });
    let part = serde_json::to_string_pretty(&sc.config).unwrap();
    let start = sc.user_data.find("{\n").unwrap();
    let end = sc.user_data.rfind("}\n").unwrap() + 1;
    sc.user_data.replace_range(start..end, &part);
}

/// The join scenarios' cluster on the host, the user data edited for each, and Parameter
/// Store's values naming it; `None` for the other scenarios.
pub(super) fn cluster_for(
    sc: &mut Scenario,
    ec2: &Ec2,
    rt: &tokio::runtime::Runtime,
) -> Option<Cluster> {
    if !needs_cluster(sc.name) {
        return None;
    }
    let unmapped = is_unmapped(sc.name);
    let node = format!(
        "ip-{}.{REGION}.compute.internal",
        ec2.private_ip.replace('.', "-")
    );
    let c = Cluster::start(&ec2.instance_id, &node, &ec2.private_ip, &ec2._moto.url);
    match unmapped {
        true => c.unmap(rt, ec2, sc),
        false => edit_user_data(sc),
    }
    sc.ssm = Some((endpoint(), c.ca(), SSM_CIDR.into()));
    Some(c)
}

/// The host's side: the API server, and the Node's state as the host saw it while the VM ran.
pub(super) struct Cluster {
    pub cp: ControlPlane,
    /// The instance's role in moto, mapped as a node's by the API server's aws-iam-authenticator.
    role: NodeRole,
    pub node: String,
    ip: String,
    instance_id: String,
    /// Each change of the Node's Ready condition the host saw: (seconds, status, message).
    pub ready: Mutex<Vec<(f64, String, String)>>,
    start: Instant,
}

impl Cluster {
    /// The API server for the instance `instance_id`, its node `node` (its private DNS name)
    /// at `ip`, authenticating nodes as EKS does: aws-iam-authenticator, reaching the Region's
    /// STS and EC2 by name through the STS front on a loopback address of this host, which
    /// checks the token the guest signs and answers from the suite's moto (`moto`).
    pub(super) fn start(instance_id: &str, node: &str, ip: &str, moto: &str) -> Cluster {
        let at = EksAt {
            moto: moto.to_string(),
            region: REGION.into(),
            cluster: CLUSTER.into(),
        };
        let cp = ControlPlane::on_host_with_eks(&[&format!("IP:{GUEST_API_ADDR}")], Some(at));
        let eks = cp.eks.as_ref().unwrap();
        let role = node_role(eks, &cp.netns, "e2e", instance_id, Mapping::Ec2Linux);
        Cluster {
            cp,
            role,
            node: node.to_string(),
            ip: ip.to_string(),
            instance_id: instance_id.to_string(),
            ready: Mutex::new(vec![]),
            start: Instant::now(),
        }
    }

    /// The unmapped scenario: the role's mapping removed from the authenticator, the instance
    /// attached to a group with a launch hook in moto, and the user data asking for the preflight
    /// in `fail` mode and the hook.
    pub(super) fn unmap(&self, rt: &tokio::runtime::Runtime, ec2: &Ec2, sc: &mut Scenario) {
        let auth = &self.cp.eks.as_ref().unwrap().auth;
        auth.map(&self.role.arn, Mapping::Unmapped);
        rt.block_on(group_with_hook(&ec2._moto.url, &ec2.instance_id));
        sc.config["lifecycle"] = serde_json::json!({"completeLaunchHook": HOOK});
        sc.config["verify"] = serde_json::json!({"preflight": "fail"});
        let part = serde_json::to_string_pretty(&sc.config).unwrap();
        let start = sc.user_data.find("{\n").unwrap();
        let end = sc.user_data.rfind("}\n").unwrap() + 1;
        sc.user_data.replace_range(start..end, &part);
    }

    /// IMDS serving the instance's role (moto's assumed role) in place of the suite's default;
    /// in service, for the unmapped scenario's launch hook.
    pub(super) fn serve_role(&self, imds: &ImdsServer, in_service: bool) {
        let mut s = imds.state.lock().unwrap();
        if in_service {
            s.data.insert(
                "autoscaling/target-lifecycle-state".into(),
                "InService".into(),
            );
        }
        s.data
            .retain(|k, _| !k.starts_with("iam/security-credentials/"));
        s.data
            .insert("iam/security-credentials/".into(), self.role.name.clone());
        s.data.insert(
            format!("iam/security-credentials/{}", self.role.name),
            self.role.credentials.to_string(),
        );
    }

    pub(super) fn forward(&self) -> (String, u16) {
        (format!("{GUEST_API_ADDR}:{GUEST_API_PORT}"), self.cp.port)
    }

    /// The CA, base64, as Parameter Store holds it.
    pub(super) fn ca(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(std::fs::read(self.cp.ca()).unwrap())
    }

    /// The guest's files for this scenario (see the module's comment).
    pub(super) fn prepare(&self, root: &Path) {
        let guest = e2e_dir().join("guest");
        let copy = |from: &Path, to: &str, mode: u32| {
            guest::write_bytes(&root.join(to), &std::fs::read(from).unwrap(), mode)
        };
        copy(&peers_bin().join("kubelet"), "usr/bin/kubelet", 0o755);
        copy(&peers_bin().join("containerd"), "usr/bin/containerd", 0o755);
        copy(
            &guest.join("nodeadm_kubelet.py"),
            "usr/lib/e2e/nodeadm_kubelet.py",
            0o644,
        );
        copy(&guest.join("e2e-node"), "usr/local/sbin/e2e-node", 0o755);
        for unit in ["kubelet.service", "runtime.slice"] {
            copy(
                &guest.join(unit),
                &format!("etc/systemd/system/{unit}"),
                0o644,
            );
        }
        let text = |to: &str, body: &str| guest::write(&root.join(to), body, 0o644);
        text(
            "etc/systemd/system/containerd.service.d/00-runtime-slice.conf",
            "[Service]\nSlice=runtime.slice\n",
        );
        text("etc/sysctl.d/99-amazon.conf", AMI_SYSCTLS);
        // The pod network, as the VPC CNI would install it: Debian's plugins, a bridge.
        text("etc/cni/net.d/10-bridge.conflist", BRIDGE_CNI);
        std::fs::create_dir_all(root.join("opt/cni")).unwrap();
        std::os::unix::fs::symlink("/usr/lib/cni", root.join("opt/cni/bin")).unwrap();
        // The guest reports its Node only where one can register: the role mapped.
        let mapped = self.cp.eks.as_ref().unwrap().auth.maps(&self.role.arn);
        if mapped {
            text("etc/e2e/kubelet", "");
        }
        // nodeadm's generated config for this m6i.large with one vCPU (the guest's), from the
        // suite's model of it.
        let instance = handoff_models::Instance {
            id: &self.instance_id,
            zone: &format!("{REGION}a"),
            vcpus: 1,
            eni_max_pods: 29,
        };
        let nc = serde_json::json!({"spec": {"cluster": {"cidr": SSM_CIDR}}});
        let generated = handoff_models::al2023_nodeadm(&nc, &instance).config;
        text("etc/e2e/kubelet-config.json", &generated.to_string());
        // A persistent journal: the second boot reports the first boot's kubelet shutdown.
        std::fs::create_dir_all(root.join("var/log/journal")).unwrap();
        let e2e = root.join("etc/e2e");
        let d = self.cp.dir.path();
        let cn = format!("system:node:{}", self.node);
        client_certificate(d, &e2e, "node", &cn, "system:nodes");
        client_certificate(d, &e2e, "admin", "suite-admin", "system:masters");
    }

    /// One turn of the host's loop while the VM runs: the Node's addresses once registered (as
    /// the cloud controller manager sets them), the kubelet's serving CSR signed, and the Ready
    /// condition's changes recorded.
    pub(super) fn advance(&self) {
        let (status, node) = self.cp.get(&format!("/api/v1/nodes/{}", self.node));
        if status != 200 {
            return;
        }
        let addressed = node["status"]["addresses"]
            .as_array()
            .is_some_and(|a| !a.is_empty());
        if !addressed {
            self.cp.set_addresses(&self.node, &self.ip);
        }
        if let Some(csr) = self.cp.serving_csr(&self.node) {
            if csr["status"]["certificate"].is_null() {
                self.cp.approve_and_sign(&csr, &self.node);
            }
        }
        let cond = node["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "Ready")
            .map(|c| (c["status"].to_string(), c["message"].to_string()));
        if let Some((s, m)) = cond {
            let mut seen = self.ready.lock().unwrap();
            if !seen.last().is_some_and(|(_, ls, lm)| (ls, lm) == (&s, &m)) {
                eprintln!("[al2023-joins] Node Ready {s}: {m}");
                seen.push((self.start.elapsed().as_secs_f64(), s, m));
            }
        }
    }
}

const BRIDGE_CNI: &str = r#"{
  "cniVersion": "1.0.0",
  "name": "e2e-bridge",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.88.0.0/16"}]]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
"#;

/// The host's checks of the join (module comment).
pub(super) fn check(sc: &Scenario, run: &Run, cluster: &Cluster) {
    let reported = run.must(1, "node");
    assert!(
        !reported.contains("not Ready"),
        "the Node never became Ready:\n{reported}\n{}",
        run.must(1, "kubelet-journal")
    );
    let node: serde_json::Value = serde_json::from_str(reported.lines().next().unwrap()).unwrap();
    let plan: serde_json::Value = serde_json::from_str(&run.must(1, "second-run")).unwrap();
    let labels = &node["metadata"]["labels"];
    assert_eq!(labels["node.kubernetes.io/role"], "scaler", "{labels}");
    let taints = taints_but_the_kubelets(&node);
    assert!(
        taints.is_empty(),
        "the scaler's Node has no taints of the plan's: {taints:?}"
    );
    let pods = plan["derived"]["podCapacity"]["maxPods"]["value"]
        .as_u64()
        .unwrap();
    let status = &node["status"];
    assert_eq!(status["capacity"]["pods"], pods.to_string(), "{status}");
    let huge = format!("{}Mi", HUGEPAGES * 2);
    assert_eq!(
        status["capacity"]["hugepages-2Mi"],
        huge.as_str(),
        "{status}"
    );
    assert_eq!(
        status["allocatable"]["hugepages-2Mi"],
        huge.as_str(),
        "{status}"
    );
    assert_allocatable(
        status,
        &plan["derived"]["podCapacity"]["kubeReserved"]["value"],
    );
    eprintln!(
        "[{}] Node {}: capacity {}, allocatable {}",
        sc.name, cluster.node, status["capacity"], status["allocatable"]
    );
    // The agent read its huge pages back before the hand-off.
    let report = run.file(1, "/var/lib/eks-nodeinit/report.json");
    let read_back = format!("vm.nr_hugepages = {HUGEPAGES}");
    assert!(
        report.contains(&read_back),
        "{read_back} in the report:\n{report}"
    );
    check_swap(run, &node);
    check_shutdown(sc, run, cluster);
    check_verified(sc, &report, cluster);
    let metrics = run.must(1, "kubelet-metrics");
    for m in [
        "pre_kubelet",
        "pre_registration",
        "registration",
        "post_registration",
    ] {
        let name = format!("kubelet_node_startup_{m}_duration_seconds");
        assert!(metrics.contains(&name), "{name} in\n{metrics}");
    }
    eprintln!("[{}] the kubelet's startup metrics:\n{metrics}", sc.name);
}

/// The swap file on in both boots (the agent's swapon, then its swap unit), and the Node's
/// swap capacity as the kubelet reports it.
fn check_swap(run: &Run, node: &serde_json::Value) {
    for boot in [1, 2] {
        let swaps = run.must(boot, "swaps");
        let on = swaps.lines().skip(1).any(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.first() == Some(&"/swapfile")
                && w.get(2) == Some(&(SWAP / 1024 - 4).to_string().as_str())
        });
        assert!(on, "boot {boot}: /swapfile of {SWAP} bytes on:\n{swaps}");
    }
    let capacity = &node["status"]["nodeInfo"]["swap"]["capacity"];
    assert_eq!(
        capacity.as_u64(),
        Some(SWAP - 4096),
        "the Node's swap: {}",
        node["status"]["nodeInfo"]
    );
}

/// Graceful shutdown for real: the kubelet's delay inhibitor for the whole boot, its shutdown
/// manager at the reboot (the first boot's journal, read after it), and the Node's condition.
fn check_shutdown(sc: &Scenario, run: &Run, cluster: &Cluster) {
    let inhibitors = run.must(1, "inhibitors");
    assert!(
        inhibitors
            .lines()
            .any(|l| l.contains("kubelet") && l.contains("shutdown") && l.contains("delay")),
        "the kubelet holds a delay inhibitor:\n{inhibitors}"
    );
    let journal = run.must(1, "kubelet-journal");
    assert!(
        journal.contains("Creating node shutdown manager")
            && journal.contains("shutdownGracePeriodRequested=\"2m0s\""),
        "the kubelet's shutdown manager with the config's grace period:\n{journal}"
    );
    let previous = run.must(2, "kubelet-journal-previous");
    for line in [
        "Shutdown manager detected new shutdown event",
        "Shutdown manager completed processing shutdown event",
    ] {
        assert!(
            previous.contains(line),
            "at the reboot, {line:?}:\n{previous}"
        );
    }
    let seen = cluster.ready.lock().unwrap();
    assert!(
        seen.iter()
            .any(|(_, s, m)| s == "\"False\"" && m.contains("node is shutting down")),
        "[{}] the Node said it was shutting down: {seen:?}",
        sc.name
    );
}

/// Verified join on a booted node: the preflight passed where it reaches a peer of this suite (the
/// role's credentials, the API server, the node's identity as the API server's EKS
/// authenticator maps it), and the proof's verdict is `joined` with its phases.
fn check_verified(sc: &Scenario, report: &str, cluster: &Cluster) {
    let report: serde_json::Value = serde_json::from_str(report).unwrap();
    let join = &report["join"];
    // Every check passed: the role's credentials, the API server, the node's identity as the
    // API server's EKS authenticator maps it, and STS, EC2 and ECR through the guest's names.
    let checks = join["preflight"].as_array().unwrap();
    for name in [
        "credentials",
        "API server",
        "identity",
        "STS",
        "EC2",
        "ECR API",
        "ECR registry",
    ] {
        assert!(
            checks
                .iter()
                .any(|c| c["check"].as_str().is_some_and(|n| n.starts_with(name))),
            "[{}] preflight {name}: {join:#}",
            sc.name
        );
    }
    for c in checks {
        assert_eq!(c["result"], "passed", "[{}] {c:#}", sc.name);
    }
    assert_eq!(join["verdict"], "joined", "[{}] {join:#}", sc.name);
    let phases: Vec<&str> = join["phases"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["phase"].as_str())
        .collect();
    for p in [
        "handed off",
        "kubelet active",
        "Node registered",
        "Node Ready",
        "verdict",
    ] {
        assert!(phases.contains(&p), "[{}] {p} in {phases:?}", sc.name);
    }
    let reviews = cluster.cp.eks.as_ref().unwrap().auth.reviews();
    let want = format!("system:node:{}", cluster.node);
    assert!(
        reviews
            .iter()
            .any(|r| matches!(r, Review::Granted { username, .. } if *username == want)),
        "the authenticator mapped the node's token: {reviews:?}"
    );
    eprintln!("[{}] the join as the node recorded it:\n{join:#}", sc.name);
}

/// The group the instance's tags name, with a launch hook, and the instance attached to it.
async fn group_with_hook(moto: &str, instance: &str) {
    let conf = crate::common::moto_sdk_config(moto, REGION).await;
    let zone = format!("{REGION}a");
    let a = crate::common::group_with_launch_hook(&conf, GROUP, HOOK, &zone, 0).await;
    a.attach_instances()
        .auto_scaling_group_name(GROUP)
        .instance_ids(instance)
        .send()
        .await
        .unwrap();
}

/// The unmapped scenario's checks: no hand-off, the identity's cause in the report, the hook
/// abandoned (moto's record), and the cause on the console, which `aws ec2 get-console-output`
/// shows after the instance is gone.
pub(super) fn check_abandoned(sc: &Scenario, run: &Run, ec2: &Ec2, console: &str) {
    let report: serde_json::Value =
        serde_json::from_str(&run.file(1, "/var/lib/eks-nodeinit/report.json")).unwrap();
    let join = &report["join"];
    assert_eq!(join["verdict"], "checks-failed", "[{}] {join:#}", sc.name);
    let identity = join["preflight"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"].as_str().unwrap_or("").starts_with("identity"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        identity["cause"], "unauthenticated",
        "[{}] {join:#}",
        sc.name
    );
    assert_eq!(
        join["hook"],
        format!("ABANDON ({HOOK})"),
        "[{}] {join:#}",
        sc.name
    );
    assert_eq!(
        report["handoff"], "",
        "[{}] no hand-off: {report:#}",
        sc.name
    );
    assert!(
        run.get(1, &format!("file:{}", nodeconfig::DROPIN))
            .is_none(),
        "[{}] no NodeConfig drop-in",
        sc.name
    );
    let log = std::fs::read_to_string(&ec2.hook_log).unwrap_or_default();
    let told: Vec<serde_json::Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(told.len(), 1, "[{}] one completion: {told:?}", sc.name);
    assert_eq!(
        told[0]["LifecycleActionResult"], "ABANDON",
        "[{}] {told:?}",
        sc.name
    );
    assert_eq!(told[0]["InstanceId"], ec2.instance_id.as_str());
    let on_console: Vec<&str> = console
        .lines()
        .filter(|l| l.contains("(unauthenticated)") && l.contains("EC2_LINUX"))
        .collect();
    assert!(
        !on_console.is_empty(),
        "[{}] the cause on the console:\n{}",
        sc.name,
        checks::console_tail(console)
    );
    eprintln!(
        "[{}] on the console: {}\n[{}] the join as the node recorded it:\n{join:#}",
        sc.name, on_console[0], sc.name
    );
}
