//! The agent's node proven by a real kubelet against a real kube-apiserver (etcd from Debian;
//! kubelet, kube-apiserver and containerd 2 built from upstream's modules by `make peers-k8s`).
//! For each case: the agent applies its config to a sample root, the hand-off's model turns what
//! it wrote into the kubelet's config and flags (`common::handoff_models`), a kubelet starts from
//! them, and the stored Node must hold the plan's labels, taints, pods and allocatable, and the
//! kubelet's `/configz` the plan's settings.
//!
//! `make control-plane` runs these (root; they are `#[ignore]`d in `make test`, which has no
//! control plane). The host overrides are printed with each start (tests/README.md).

mod credentials;
mod identity;
mod images;
mod ipv6_only;
mod join;
mod matrix;
mod names;
mod readiness;
mod resources;
mod roundtrip;

use serde_json::{json, Value};

use crate::common;
use common::bootstrap_sh;
use common::control_plane::{self, ControlPlane};
use common::handoff_models::{self, Instance};
use common::kubelet::{assert_allocatable, taints_but_the_kubelets, Kubelet, Start};
use common::*;
use eks_nodeinit::spec::resource_managers::parse_cpu_list;

/// The sample metadata's instance (examples/metadata.json): m6i.large, 2 vCPUs, 29 pods in
/// `eni-max-pods.txt`.
const INSTANCE: Instance = Instance {
    id: "i-0a1b2c3d4e5f67890",
    zone: "eu-west-1a",
    vcpus: 2,
    eni_max_pods: 29,
};

/// Whether this host can run the suite: root and the peers; otherwise a note, or a failure
/// when `CI` is set.
fn ready() -> bool {
    let mut missing = control_plane::missing();
    if !nix::unistd::Uid::effective().is_root() {
        missing.push("root (the kubelet manages cgroups)".into());
    }
    let names: Vec<&str> = missing.iter().map(String::as_str).collect();
    peer_present(&names)
}

/// The example config pointed at the suite's cluster, without tagging, edited by `edit`.
fn config(
    root: &std::path::Path,
    cp: &ControlPlane,
    edit: impl FnOnce(&mut Value),
) -> std::path::PathBuf {
    let ca = std::fs::read(cp.ca()).unwrap();
    config_with(root, "c.json", |v| {
        v["tagging"] = json!({"enabled": false});
        v["cluster"]["apiServerEndpoint"] = cp.endpoint().into();
        v["cluster"]["certificateAuthority"] = control_plane::base64_encode(&ca).into();
        v["cluster"]["cidr"] = cp.net.service_cidr.into();
        edit(v);
    })
}

/// The agent's plan (`--dry-run --output json`), then its run; both must succeed.
fn agent(root: &std::path::Path, cfg: &std::path::Path, metadata: &std::path::Path) -> Value {
    let dry = init_with(root, cfg, metadata, &["--dry-run", "--output", "json"]);
    assert!(dry.status.success(), "{}", stderr(&dry));
    let plan: Value = serde_json::from_slice(&dry.stdout).unwrap();
    let out = init_with(root, cfg, metadata, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    plan
}

/// AL2: the agent's kubelet-config.json rewritten as bootstrap.sh rewrites it, and the kubelet
/// flags from the argv the agent exec'd.
fn al2_start(root: &std::path::Path) -> Start {
    let argv: Vec<String> = std::fs::read_to_string(root.join("etc/eks/argv.txt"))
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    let parsed = bootstrap_sh::parse(&argv).expect("bootstrap.sh reads the agent's argv");
    let path = root.join("etc/kubernetes/kubelet/kubelet-config.json");
    let mut config: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let flags = handoff_models::al2_bootstrap(&mut config, &parsed, &INSTANCE);
    Start {
        config,
        dropins: vec![],
        flags,
    }
}

/// AL2023: the user data's NodeConfig (if any) and the agent's drop-in, merged as nodeadm does.
fn al2023_start(root: &std::path::Path, user_data: Option<Value>) -> Start {
    al2023_start_of(root, user_data, INSTANCE.id)
}

/// [`al2023_start`] for the instance `id` (its Node's providerID names it): the user data's
/// NodeConfig, then every file of `/etc/eks/nodeadm.d/` nodeadm reads (`.yaml`, `.yml`,
/// `.json` in any case) in name order, the agent's among them.
fn al2023_start_of(root: &std::path::Path, user_data: Option<Value>, id: &str) -> Start {
    let dir = root.join("etc/eks/nodeadm.d");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| {
            let n = n.to_lowercase();
            n.ends_with(".yaml") || n.ends_with(".yml") || n.ends_with(".json")
        })
        .collect();
    names.sort();
    let dropins = names.iter().map(|n| -> Value {
        let text = std::fs::read_to_string(dir.join(n)).unwrap();
        yaml_serde::from_str(&text).unwrap()
    });
    let docs: Vec<Value> = user_data.into_iter().chain(dropins).collect();
    let inst = Instance { id, ..INSTANCE };
    handoff_models::al2023_nodeadm(&handoff_models::nodeadm_merge(&docs), &inst)
}

/// What the plan promises, checked against the stored Node and the kubelet's `/configz`.
pub(super) struct Promise {
    labels: Vec<(&'static str, &'static str)>,
    taints: Vec<Value>,
}

/// The example config's image GC thresholds and grace periods (examples/scaler.json), as the
/// kubelet's `/configz` writes them (Go's durations: 90s is `1m30s`).
const EXAMPLE_GC: (u64, u64) = (80, 60);
const EXAMPLE_GRACE: (&str, &str) = ("1m30s", "30s");

/// Start the kubelet from `start` and check the stored Node and `/configz` against the plan;
/// the `/configz` for more checks.
fn prove(cp: &ControlPlane, name: &str, start: &Start, plan: &Value, want: &Promise) -> Value {
    let mut kubelet = Kubelet::start(cp, name, start);
    let node = kubelet.node(cp);
    let capacity = &plan["derived"]["podCapacity"];
    let pods = capacity["maxPods"]["value"].as_u64().unwrap();
    let reserved = &capacity["kubeReserved"]["value"];
    let rm = &plan["derived"]["resourceManagers"];
    let reserved_cpus = rm["reservedSystemCPUs"]["value"].as_str();
    let labels = &node["metadata"]["labels"];
    for (k, v) in &want.labels {
        assert_eq!(labels[k], *v, "label {k} on the Node: {labels}");
    }
    let taints = taints_but_the_kubelets(&node);
    assert_eq!(taints, want.taints, "the Node's taints");
    let status = &node["status"];
    eprintln!(
        "Node {name}: capacity {}, allocatable {}",
        status["capacity"], status["allocatable"]
    );
    assert_eq!(status["capacity"]["pods"], pods.to_string());
    assert_eq!(status["allocatable"]["pods"], pods.to_string());
    // The kubelet takes reserved CPUs, whole, in place of kube-reserved cpu.
    let mut held = reserved.clone();
    if let Some(list) = reserved_cpus {
        held["cpu"] = json!(parse_cpu_list(list).unwrap().len().to_string());
    }
    assert_allocatable(status, &held);
    let cz = kubelet.configz(cp);
    assert_resource_managers(&cz, plan);
    assert_eq!(cz["maxPods"], pods);
    assert_eq!(cz["imageGCHighThresholdPercent"], EXAMPLE_GC.0);
    assert_eq!(cz["imageGCLowThresholdPercent"], EXAMPLE_GC.1);
    assert_eq!(cz["shutdownGracePeriod"], EXAMPLE_GRACE.0);
    assert_eq!(cz["shutdownGracePeriodCriticalPods"], EXAMPLE_GRACE.1);
    if reserved_cpus.is_none() {
        assert_eq!(&cz["kubeReserved"], reserved);
    }
    cz
}

/// `/configz` holds the plan's CPU and memory manager settings, where it has any.
fn assert_resource_managers(cz: &Value, plan: &Value) {
    let d = &plan["derived"]["resourceManagers"];
    if let Some(cpus) = d["reservedSystemCPUs"]["value"].as_str() {
        assert_eq!(cz["cpuManagerPolicy"], "static");
        assert_eq!(cz["reservedSystemCPUs"], cpus);
    }
    if d["reservedMemory"]["value"].is_array() {
        assert_eq!(cz["memoryManagerPolicy"], "Static");
        assert_eq!(cz["reservedMemory"], d["reservedMemory"]["value"]);
    }
}

/// The sample metadata with `user_data` (a NodeConfig) as the instance's user data, in a MIME
/// multi-part document as EKS writes it.
fn metadata_with(dir: &std::path::Path, node_config: &str) -> std::path::PathBuf {
    let ud = format!(
        "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"//\"\r\n\r\n--//\r\nContent-Type: application/node.eks.aws\r\n\r\n{node_config}\r\n--//--\r\n"
    );
    let mut v: Value =
        serde_json::from_slice(&std::fs::read(example("metadata.json")).unwrap()).unwrap();
    v["userData"] = ud.into();
    let p = dir.join("metadata.json");
    std::fs::write(&p, v.to_string()).unwrap();
    p
}

/// The example config as it is: a scaler, 29 pods (m6i.large, secondary IPs), its labels.
fn scaler(root: &'static str, name: &'static str) -> Case {
    Case {
        root,
        name,
        edit: |_| {},
        user_data: None,
        pods: 29,
        want: Promise {
            labels: scaler_labels(),
            taints: vec![],
        },
    }
}

fn scaler_labels() -> Vec<(&'static str, &'static str)> {
    vec![
        ("example.com/team", "platform"),
        ("node.kubernetes.io/lifecycle", "spot"),
        ("node.kubernetes.io/role", "scaler"),
    ]
}

/// One node: the sample root, the Node's name, the config's edit, the user data's NodeConfig,
/// the plan's max pods and what the Node must show.
pub(super) struct Case {
    root: &'static str,
    name: &'static str,
    edit: fn(&mut Value),
    user_data: Option<&'static str>,
    pods: u64,
    want: Promise,
}

fn run_case(case: Case) {
    if !ready() {
        return;
    }
    let cp = ControlPlane::shared();
    let (_root, plan, start) = agent_start(&cp, &case);
    prove(&cp, case.name, &start, &plan, &case.want);
}

/// The agent run for `case` on a copy of its sample root (the host's NUMA nodes copied in, as
/// the kubelet here sees them), and what the hand-off starts the kubelet with: (the root, the
/// plan, the start).
fn agent_start(cp: &ControlPlane, case: &Case) -> (tempfile::TempDir, Value, Start) {
    let root = sample_root(case.root);
    let numa = std::path::Path::new(eks_nodeinit::base::node::NODE_ONLINE);
    if let Ok(t) = std::fs::read(numa) {
        let to = root.path().join(numa.strip_prefix("/").unwrap());
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::write(to, t).unwrap();
    }
    let al2 = case.root == "al2-root";
    if al2 {
        recording_bootstrap(root.path());
    }
    let md = match case.user_data {
        Some(nc) => metadata_with(root.path(), nc),
        None => example("metadata.json"),
    };
    let cfg = config(root.path(), cp, case.edit);
    let plan = agent(root.path(), &cfg, &md);
    let pods = &plan["derived"]["podCapacity"]["maxPods"]["value"];
    assert_eq!(*pods, case.pods);
    let start = if al2 {
        al2_start(root.path())
    } else {
        let user = case.user_data.map(|nc| yaml_serde::from_str(nc).unwrap());
        al2023_start(root.path(), user)
    };
    (root, plan, start)
}

fn taint(key: &str, value: &str, effect: &str) -> Value {
    json!({"key": key, "value": value, "effect": effect})
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn al2_scaler_registers_with_the_plans_labels_pods_and_allocatable() {
    run_case(scaler("al2-root", "al2-scaler.node.test"));
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn al2_master_with_an_explicit_kube_reserved_and_prefix_delegation() {
    run_case(Case {
        root: "al2-root",
        name: "al2-master.node.test",
        edit: |v| {
            v["nodeGroup"]["role"] = "master".into();
            v["kubelet"]["maxPods"] = json!({"cni": "prefixDelegation"});
            v["kubelet"]["kubeReserved"] =
                json!({"cpu": "250m", "memory": "1Gi", "ephemeral-storage": "3Gi"});
        },
        user_data: None,
        pods: 110,
        want: Promise {
            labels: vec![
                ("example.com/team", "platform"),
                ("node.kubernetes.io/role", "master"),
            ],
            taints: vec![taint("CriticalAddonsOnly", "true", "NoSchedule")],
        },
    });
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn the_cnis_ipv6_mode_registers_the_ceiling_as_pods_on_both_families() {
    // m6i.large, 2 vCPUs: 110 pods (the IPv4 formula, which nodeadm keeps, says 29), and
    // kube-reserved's memory from them (255 + 11 × 110 Mi) in the Node's allocatable.
    for (root, name) in [
        ("al2-root", "al2-ipv6.node.test"),
        ("al2023-root", "al2023-ipv6.node.test"),
    ] {
        run_case(ipv6_mode(root, name));
    }
}

/// The example's node in the CNI's IPv6 mode: the ceiling's 110 pods, the scaler's labels.
fn ipv6_mode(root: &'static str, name: &'static str) -> Case {
    Case {
        root,
        name,
        edit: |v| v["kubelet"]["maxPods"] = json!({"cni": "ipv6"}),
        user_data: None,
        pods: 110,
        want: Promise {
            labels: scaler_labels(),
            taints: vec![],
        },
    }
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn an_ipv6_cluster_registers_on_an_ipv6_control_plane_on_both_families() {
    // kube-apiserver on ::1 alone with an IPv6 service CIDR; the kubelet at the node's IPv6
    // address, its cluster DNS the CIDR's `::a` as each hand-off derives it from what the agent
    // wrote (bootstrap.sh's `--service-ipv6-cidr`, the NodeConfig's `cluster.cidr`).
    if !ready() {
        return;
    }
    let cp = ControlPlane::shared_ipv6();
    assert!(
        cp.endpoint().starts_with("https://[::1]:"),
        "{}",
        cp.endpoint()
    );
    for (root, name) in [
        ("al2-root", "al2-v6.node.test"),
        ("al2023-root", "al2023-v6.node.test"),
    ] {
        let case = ipv6_mode(root, name);
        let (_root, plan, start) = agent_start(&cp, &case);
        let cz = prove(&cp, name, &start, &plan, &case.want);
        assert_eq!(cz["clusterDNS"], json!(["fd00:10:20::a"]), "{name}");
        let (_, node) = cp.get(&format!("/api/v1/nodes/{name}"));
        let addresses = &node["status"]["addresses"];
        assert_eq!(addresses[0]["address"], control_plane::NODE_IP6, "{node}");
    }
    // The agent's own client (the preflight's and the proof's) by the IPv6 literal, trusting
    // the cluster's CA alone for `::1`.
    let ctx = eks_nodeinit::verify::Context {
        cluster: "prod-eu".into(),
        region: "eu-west-1".into(),
        endpoint: cp.endpoint(),
        ca_pem: std::fs::read_to_string(cp.ca()).unwrap(),
        node: None,
        imds_endpoint: String::new(),
        dual_stack: None,
        imds_v1_fallback: false,
        proxy: None,
        ca_bundles: vec![],
        sts_url: String::new(),
    };
    let (ready, got) = common::netns::run_in(&cp.netns, move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let api = eks_nodeinit::verify::kube::ApiServer::of(&ctx).unwrap();
            let token = Some(control_plane::ADMIN_TOKEN);
            let path = "/api/v1/nodes/al2023-v6.node.test";
            let got = api.call("GET", path, token, None).await.map(|a| a.status);
            (api.readyz().await, got)
        })
    });
    assert_eq!(ready.unwrap(), "/readyz: ok");
    assert_eq!(got.unwrap(), 200);
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn al2023_scaler_registers_with_the_plans_labels_pods_and_allocatable() {
    run_case(scaler("al2023-root", "al2023-scaler.node.test"));
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn al2023_labels_and_taints_from_user_data_and_config_add_up() {
    run_case(Case {
        root: "al2023-root",
        name: "al2023-master.node.test",
        edit: |v| {
            v["nodeGroup"]["role"] = "master".into();
            v["kubelet"]["maxPods"] = json!({"cni": "prefixDelegation", "ceiling": 60});
        },
        user_data: Some(
            "---\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: prod-eu\n  kubelet:\n    flags:\n      - --node-labels=example.com/pool=data\n      - --register-with-taints=example.com/pool=data:NoSchedule\n",
        ),
        pods: 60,
        want: Promise {
            labels: vec![
                ("example.com/pool", "data"),
                ("example.com/team", "platform"),
                ("node.kubernetes.io/role", "master"),
            ],
            taints: vec![
                taint("example.com/pool", "data", "NoSchedule"),
                taint("CriticalAddonsOnly", "true", "NoSchedule"),
            ],
        },
    });
}

#[test]
fn systemd_splits_a_variable_on_ascii_whitespace_only() {
    assert_eq!(
        handoff_models::split_ascii_whitespace(" a\u{a0}b \tc\n"),
        ["a\u{a0}b", "c"]
    );
}

#[test]
fn nodeadm_merges_maps_and_appends_flags() {
    let a =
        json!({"spec": {"kubelet": {"config": {"maxPods": 10, "x": {"a": 1}}, "flags": ["--a"]}}});
    let b = json!({"spec": {"kubelet": {"config": {"x": {"b": 2}}, "flags": ["--b"]}}});
    let m = handoff_models::nodeadm_merge(&[a, b]);
    assert_eq!(
        m["spec"]["kubelet"]["config"],
        json!({"maxPods": 10, "x": {"a": 1, "b": 2}})
    );
    assert_eq!(m["spec"]["kubelet"]["flags"], json!(["--a", "--b"]));
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn an_anonymous_client_may_read_readyz_and_version_and_nothing_else() {
    // What a node can ask the API server before it has any identity (EKS binds
    // system:public-info-viewer to anonymous users): the API server on this host's loopback,
    // its certificate naming one more address, as the VM scenario reaches it.
    if !ready() {
        return;
    }
    let cp = ControlPlane::on_host(&["IP:169.254.170.96"]);
    let anonymous = |path: &str| {
        let out = std::process::Command::new("curl")
            .args(["-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert"])
            .arg(cp.ca())
            .arg(format!("{}{path}", cp.endpoint()))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(anonymous("/readyz"), "200");
    assert_eq!(anonymous("/version"), "200");
    assert_eq!(anonymous("/api/v1/nodes"), "403");
    let san = common::tls::sh(
        std::process::Command::new("openssl")
            .args(["x509", "-noout", "-ext", "subjectAltName", "-in"])
            .arg(cp.dir.path().join("srv.crt")),
    );
    assert!(san.contains("IP Address:169.254.170.96"), "{san}");
}
