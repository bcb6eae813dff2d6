//! containerd 2 for the kubelet suites: built from upstream's module by `tools/peers/build`,
//! run on this host (no network namespace: its socket is a path) with every directory under the
//! suite's own.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::control_plane::{peers_bin, tied, wait_long};
use super::peers::Proc;

/// containerd 2 with its CRI plugin, every directory under `d`, the cgroupfs driver (the host
/// has no systemd), a loopback-only CNI config (enough for the runtime's network to be ready),
/// the suite's own sandbox image (`pods.rs`), and OOM scores no lower than its own (this host
/// may not lower them: runc's init fails on the sandbox's -998).
pub(crate) fn start_containerd(d: &Path) -> (Proc, PathBuf) {
    let images = format!(
        "[plugins.'io.containerd.cri.v1.images'.pinned_images]\n  sandbox = \"{}\"\n",
        super::pods::SANDBOX_IMAGE
    );
    containerd(d, &images)
}

/// containerd 2 from the peers, its root, state, socket and CNI config under `d/containerd`,
/// with the suite's runtime settings and `images` (TOML: the CRI images plugin's and the
/// transfer service's tables) after them: (the process, its socket). Stopped when dropped.
pub fn containerd(d: &Path, images: &str) -> (Proc, PathBuf) {
    let (cfg, sock) = containerd_config(d, images);
    (start_containerd_with(d, &cfg, &sock), sock)
}

/// The config [`containerd`] starts with, written: (its path, the socket it names).
pub fn containerd_config(d: &Path, images: &str) -> (PathBuf, PathBuf) {
    let c = d.join("containerd");
    let cni = c.join("net.d");
    std::fs::create_dir_all(&cni).unwrap();
    std::fs::write(
        cni.join("10-loopback.conflist"),
        r#"{"cniVersion": "1.0.0", "name": "suite", "plugins": [{"type": "loopback"}]}"#,
    )
    .unwrap();
    let sock = c.join("containerd.sock");
    let cfg = c.join("config.toml");
    let p = |x: &Path| x.display().to_string();
    std::fs::write(
        &cfg,
        format!(
            "version = 3\nroot = \"{root}\"\nstate = \"{state}\"\n[grpc]\n  address = \"{sock}\"\n[ttrpc]\n  address = \"{sock}.ttrpc\"\n[plugins.'io.containerd.cri.v1.runtime']\n  restrict_oom_score_adj = true\n[plugins.'io.containerd.cri.v1.runtime'.cni]\n  conf_dir = \"{cni}\"\n  bin_dirs = [\"/usr/lib/cni\"]\n[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]\n  SystemdCgroup = false\n{images}",
            root = p(&c.join("root")),
            state = p(&c.join("state")),
            sock = p(&sock),
            cni = p(&cni),
        ),
    )
    .unwrap();
    (cfg, sock)
}

/// containerd 2 from the peers with the config at `cfg`, logging under `d`, once `sock` is
/// there. Stopped when dropped.
pub fn start_containerd_with(d: &Path, cfg: &Path, sock: &Path) -> Proc {
    let mut cmd = Command::new(peers_bin().join("containerd"));
    // Its own runc shim first: Debian's (containerd 1.6) cannot start containerd 2's tasks.
    let path = std::env::var("PATH").unwrap_or_default();
    cmd.arg("--config")
        .arg(cfg)
        .env("PATH", format!("{}:{path}", peers_bin().display()));
    let proc = tied(cmd, &d.join("containerd.log"));
    wait_long("containerd's socket", Duration::from_secs(30), || {
        sock.exists()
    });
    proc
}
