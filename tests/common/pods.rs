//! Pods on the suite's kubelets (`kubelet.rs`), run by the shared containerd
//! (`control_plane.rs`): their sandbox image is the suite's own pause program, imported once
//! under a name of the suite's (no registry is reached for it); a pod is bound to its node by
//! name (no scheduler) on the host network (no CNI plugin runs).

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use super::control_plane::{wait_until, ControlPlane};
use super::kubelet::{tail, Kubelet};
use super::tls::sh;

/// The sandbox image containerd's CRI plugin is configured with.
pub const SANDBOX_IMAGE: &str = "eks-nodeinit.test/pause:1";

/// `ctr` (Debian's) on the shared containerd in the namespace `ns`.
pub fn ctr(cp: &ControlPlane, ns: &str) -> Command {
    let mut c = Command::new("ctr");
    c.arg("--address").arg(&cp.cri).args(["--namespace", ns]);
    c
}

/// The images the CRI plugin holds, one reference a line.
pub fn images(cp: &ControlPlane) -> String {
    sh(ctr(cp, "k8s.io").args(["images", "ls", "-q"]))
}

/// The pause program (built once per control plane) with the sandbox image imported: the
/// program's path, for images of its own.
pub fn ensure_sandbox(cp: &ControlPlane) -> PathBuf {
    let dir = cp.dir.path().join("sandbox");
    let pause = dir.join("pause");
    if pause.exists() && images(cp).lines().any(|l| l == SANDBOX_IMAGE) {
        return pause;
    }
    std::fs::create_dir_all(&dir).unwrap();
    let pause = super::registry::pause_program(&dir);
    let tar = dir.join("pause.tar");
    sh(Command::new("python3")
        .arg(super::manifest_dir().join("tests/registry/oci_archive.py"))
        .arg(&tar)
        .arg(SANDBOX_IMAGE)
        .arg(&pause));
    sh(ctr(cp, "k8s.io").args(["images", "import"]).arg(&tar));
    pause
}

/// Pod `name` in `default` with one container of `image`, bound to node `node`.
pub fn run(cp: &ControlPlane, node: &str, name: &str, image: &str) {
    // The service-account admission needs `default` (no controller manager makes it here).
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
    let (s, body) = cp.call(
        "POST",
        "/api/v1/namespaces/default/serviceaccounts",
        Some(&sa),
    );
    assert!(
        s == 201 || s == 409,
        "the default service account: {s} {body}"
    );
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeName": node, "hostNetwork": true, "automountServiceAccountToken": false,
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "c", "image": image, "imagePullPolicy": "Always"}],
        },
    });
    let (s, body) = cp.call("POST", "/api/v1/namespaces/default/pods", Some(&pod));
    assert_eq!(s, 201, "pod {name}: {body}");
}

/// Pod `name` once its container runs (within 90 s), else a failure with its status and the
/// kubelet's log.
pub fn wait_running(cp: &ControlPlane, name: &str, kubelet: &Kubelet) -> Value {
    let path = format!("/api/v1/namespaces/default/pods/{name}");
    let mut pod = Value::Null;
    let running = wait_until(Duration::from_secs(90), || {
        pod = cp.get(&path).1;
        pod["status"]["containerStatuses"][0]["state"]["running"].is_object()
    });
    assert!(
        running,
        "pod {name} not running: {}\n{}",
        pod["status"],
        tail(&kubelet.log_text())
    );
    pod
}

/// Delete pod `name` at once and wait until containerd runs no task of the suite's kubelets.
pub fn remove(cp: &ControlPlane, name: &str) {
    let path = format!("/api/v1/namespaces/default/pods/{name}?gracePeriodSeconds=0");
    let (s, body) = cp.call("DELETE", &path, None);
    assert_eq!(s, 200, "deleting pod {name}: {body}");
    let gone = wait_until(Duration::from_secs(60), || {
        sh(ctr(cp, "k8s.io").args(["tasks", "ls", "-q"]))
            .trim()
            .is_empty()
    });
    assert!(gone, "pod {name}'s containers still run");
}

/// Whether `ctr images pull` of `image` (plain HTTP, no credentials) in namespace `ns`
/// succeeds, and what it said.
pub fn anonymous_pull(cp: &ControlPlane, ns: &str, image: &str) -> (bool, String) {
    let out = ctr(cp, ns)
        .args(["images", "pull", "--plain-http", image])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.success(), said)
}
