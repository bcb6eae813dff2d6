//! kube-scheduler, built from the kubernetes module beside the kubelet (tools/peers/build),
//! against the suite's API server as its administrator: it binds a pod to a Node only where the
//! pod tolerates every NoSchedule taint, as on a cluster.

use std::path::PathBuf;

use super::control_plane::{in_netns, peers_bin, tied, ControlPlane, ADMIN_TOKEN};
use super::peers::Proc;

pub struct Scheduler {
    pub log: PathBuf,
    _proc: Proc,
    _dir: tempfile::TempDir,
}

impl Scheduler {
    /// The scheduler in the suite's network namespace, no leader election, no serving port.
    pub fn start(cp: &ControlPlane) -> Scheduler {
        let dir = tempfile::Builder::new()
            .prefix("scheduler")
            .tempdir()
            .unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: suite\n  cluster:\n    server: {}\n    certificate-authority: {}\ncontexts:\n- name: admin\n  context: {{cluster: suite, user: admin}}\ncurrent-context: admin\nusers:\n- name: admin\n  user:\n    token: {ADMIN_TOKEN}\n",
            cp.endpoint(),
            cp.ca().display()
        );
        std::fs::write(&kubeconfig, text).unwrap();
        let mut c = in_netns(&cp.netns, peers_bin().join("kube-scheduler"));
        c.arg("--kubeconfig").arg(&kubeconfig).args([
            "--leader-elect=false",
            "--secure-port=0",
            "--v=2",
        ]);
        let log = dir.path().join("scheduler.log");
        let proc = tied(c, &log);
        Scheduler {
            log,
            _proc: proc,
            _dir: dir,
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}
