//! A real kubelet (`tools/peers/build`) started from what a node's hand-off would give it, against
//! the shared control plane (`control_plane.rs`).
//!
//! What the agent and the hand-off models wrote reaches the kubelet byte for byte. What this host
//! cannot run as an EKS node does is one more config drop-in, `99-host.conf`, loaded last, and is
//! printed with every start (tests/README.md lists it): cgroup v1 (`failCgroupV1: false`), no
//! systemd (`cgroupDriver: cgroupfs`), a shared machine's kernel settings left alone
//! (`protectKernelDefaults: false`), and the node's paths moved under the case's directory
//! (the cluster CA file and containerd's socket).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use super::control_plane::{in_netns, peers_bin, tied, wait_until, ControlPlane};
use super::peers::Proc;

/// What a hand-off gives the kubelet: its config file, drop-ins (name, document; the kubelet
/// merges them over the file in name order) and its flags after the node's own.
pub struct Start {
    pub config: serde_json::Value,
    pub dropins: Vec<(String, serde_json::Value)>,
    pub flags: Vec<String>,
}

/// The overrides this host needs, in the drop-in loaded last.
pub fn host_overrides(ca: &Path, cri: &Path) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": false,
        "cgroupDriver": "cgroupfs",
        "protectKernelDefaults": false,
        "authentication": {"x509": {"clientCAFile": ca.display().to_string()}},
        "containerRuntimeEndpoint": format!("unix://{}", cri.display()),
    })
}

pub struct Kubelet {
    pub name: String,
    leftovers: Vec<PathBuf>,
    pub dir: tempfile::TempDir,
    pub log: PathBuf,
    proc: Proc,
}

impl Kubelet {
    /// Start the kubelet of node `name` from `start`: the node's flags as both hand-offs pass
    /// them (the address, the name, the external cloud provider), then `start.flags`.
    pub fn start(cp: &ControlPlane, name: &str, start: &Start) -> Kubelet {
        let dir = tempfile::Builder::new()
            .prefix("kubelet")
            .tempdir()
            .unwrap();
        let d = dir.path();
        let config = d.join("config.json");
        std::fs::write(&config, serde_json::to_vec_pretty(&start.config).unwrap()).unwrap();
        let dropins = d.join("config.json.d");
        std::fs::create_dir_all(&dropins).unwrap();
        for (n, doc) in &start.dropins {
            std::fs::write(dropins.join(n), serde_json::to_vec_pretty(doc).unwrap()).unwrap();
        }
        let host = host_overrides(&cp.ca(), &cp.cri);
        eprintln!("kubelet {name}: this host's overrides (99-host.conf): {host}");
        std::fs::write(dropins.join("99-host.conf"), host.to_string()).unwrap();
        let kubeconfig = cp.node_kubeconfig(name, d);
        let mut c = in_netns(&cp.netns, peers_bin().join("kubelet"));
        c.arg("--config")
            .arg(&config)
            .arg("--config-dir")
            .arg(&dropins)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("--root-dir")
            .arg(d.join("root"))
            .arg("--cert-dir")
            .arg(d.join("pki"))
            .arg(format!("--node-ip={}", cp.net.node_ip))
            .args(["--cloud-provider=external", "--v=2"])
            .arg(format!("--hostname-override={name}"))
            .args(&start.flags);
        eprintln!(
            "kubelet {name}: flags after the node's own: {:?}",
            start.flags
        );
        let log = d.join("kubelet.log");
        let proc = tied(c, &log);
        Kubelet {
            name: name.to_string(),
            leftovers: cp.leftovers.clone(),
            dir,
            log,
            proc,
        }
    }

    /// The kubelet's log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Whether the kubelet has exited, and its status.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.proc.0.try_wait().unwrap()
    }

    /// The kubelet's verdict on what it was started with: accepted (its Node registered) or
    /// refused (it exited); it must give one within a minute.
    pub fn accepted(&mut self, cp: &ControlPlane) -> bool {
        let path = format!("/api/v1/nodes/{}", self.name);
        let mut verdict = None;
        let judged = wait_until(Duration::from_secs(60), || {
            if self.exited().is_some() {
                verdict = Some(false);
            } else if cp.get(&path).0 == 200 {
                verdict = Some(true);
            }
            verdict.is_some()
        });
        assert!(
            judged,
            "kubelet {}: no verdict in 60 s\n{}",
            self.name,
            tail(&self.log_text())
        );
        verdict.unwrap_or(false)
    }

    /// The Node the kubelet registered, with its allocatable reported.
    pub fn node(&mut self, cp: &ControlPlane) -> serde_json::Value {
        let path = format!("/api/v1/nodes/{}", self.name);
        let mut node = Value::Null;
        let registered = wait_until(Duration::from_secs(60), || {
            let (s, n) = cp.get(&path);
            node = n;
            s == 200 && node["status"]["allocatable"]["pods"].is_string() || self.exited().is_some()
        });
        let exited = self.exited();
        if !registered || exited.is_some() {
            panic!(
                "kubelet {}: no Node with its allocatable (exited: {exited:?}):\n{}",
                self.name,
                tail(&self.log_text())
            );
        }
        node
    }

    /// The kubelet's running configuration (`/configz`, through the API server's node proxy),
    /// once its serving certificate is signed.
    pub fn configz(&self, cp: &ControlPlane) -> serde_json::Value {
        cp.set_addresses(&self.name, cp.net.node_ip);
        let mut csr = None;
        let asked = wait_until(Duration::from_secs(60), || {
            csr = cp.serving_csr(&self.name);
            csr.is_some()
        });
        assert!(
            asked,
            "kubelet {}: no serving CSR after 60 s\n{}",
            self.name,
            tail(&self.log_text())
        );
        cp.approve_and_sign(csr.as_ref().unwrap(), &self.name);
        let path = format!("/api/v1/nodes/{}/proxy/configz", self.name);
        let mut last = (0, serde_json::Value::Null);
        let served = wait_until(Duration::from_secs(60), || {
            last = cp.get(&path);
            last.0 == 200
        });
        assert!(
            served,
            "the kubelet's /configz: {} {}\n{}",
            last.0,
            last.1,
            tail(&self.log_text())
        );
        last.1["kubeletconfig"].clone()
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        let _ = self.proc.0.kill();
        let _ = self.proc.0.wait();
        // The pods' mounts under the root dir, if any, before the temp dir goes.
        let root = self.dir.path().join("root");
        let _ = Command::new("umount").arg("-R").arg(&root).output();
        remove_leftovers(&self.leftovers);
    }
}

/// The last 40 lines of a log.
pub fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// The taints a kubelet adds itself at registration: not ready yet (removed by the node
/// lifecycle controller) and, with an external cloud provider, not initialised (removed by it).
pub const KUBELET_OWN_TAINTS: [&str; 2] = [
    "node.kubernetes.io/not-ready",
    "node.cloudprovider.kubernetes.io/uninitialized",
];

/// The Node's taints but the kubelet's own, each as `{key, value, effect}` (value "" if none).
pub fn taints_but_the_kubelets(node: &Value) -> Vec<Value> {
    node["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| !KUBELET_OWN_TAINTS.contains(&t["key"].as_str().unwrap_or("")))
        .map(|t| {
            let value = t.get("value").cloned().unwrap_or(Value::from(""));
            serde_json::json!({"key": t["key"], "value": value, "effect": t["effect"]})
        })
        .collect()
}

/// A quantity as the API writes it, × 1000 (CPU in millicores, memory in millibytes), read by
/// the agent's own reader.
fn milli(v: &Value) -> i128 {
    let s = v
        .as_str()
        .unwrap_or_else(|| panic!("{v} is not a quantity"));
    let m = eks_nodeinit::base::k8s::milli_value(s);
    i128::try_from(m.unwrap_or_else(|| panic!("{s} is not a quantity"))).unwrap()
}

/// allocatable = capacity − kubeReserved − the hand-offs' evictionHard: memory.available 100Mi
/// (and for memory the huge pages), nodefs.available 10%, the percentage as the kubelet holds
/// it (a float32).
pub fn assert_allocatable(status: &Value, reserved: &Value) {
    let q = |v: &Value| milli(v) / 1000;
    let cap = &status["capacity"];
    let alloc = &status["allocatable"];
    let want_cpu = milli(&cap["cpu"]) - milli(&reserved["cpu"]);
    assert_eq!(milli(&alloc["cpu"]), want_cpu, "allocatable cpu: {alloc}");
    // The kubelet takes huge pages out of allocatable memory too.
    let huge: i128 = cap
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with("hugepages-"))
        .map(|(_, v)| q(v))
        .sum();
    let mem = q(&cap["memory"]) - q(&reserved["memory"]) - (100 << 20) - huge;
    assert_eq!(q(&alloc["memory"]), mem, "allocatable memory: {alloc}");
    let disk = q(&cap["ephemeral-storage"]);
    let nodefs = (disk as f64 * f64::from(0.1_f32)) as i128;
    let eph = disk - q(&reserved["ephemeral-storage"]) - nodefs;
    assert_eq!(
        q(&alloc["ephemeral-storage"]),
        eph,
        "allocatable ephemeral-storage: {alloc}"
    );
}

/// The host paths a kubelet makes whatever its root and cert dirs (its device-plugin and
/// container-log directories, the QoS cgroups) that are not there now.
pub fn leftovers() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = ["/var/lib/kubelet", "/var/log/containers", "/var/log/pods"]
        .map(PathBuf::from)
        .to_vec();
    if let Ok(rd) = std::fs::read_dir("/sys/fs/cgroup") {
        paths.extend(rd.flatten().map(|e| e.path().join("kubepods")));
    }
    paths.retain(|p| !p.exists());
    paths
}

/// Remove `leftovers`: directories whole, cgroups (under /sys/fs/cgroup) deepest first.
pub fn remove_leftovers(leftovers: &[PathBuf]) {
    fn rmdir_tree(p: &Path) {
        for e in std::fs::read_dir(p).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                rmdir_tree(&e.path());
            }
        }
        let _ = std::fs::remove_dir(p);
    }
    for p in leftovers.iter().filter(|p| p.exists()) {
        if p.starts_with("/sys/fs/cgroup") {
            rmdir_tree(p);
        } else {
            let _ = std::fs::remove_dir_all(p);
        }
    }
}
