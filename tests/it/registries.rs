//! Registry mirrors and CAs against real parts, all started here on loopback: Debian's
//! `docker-registry` serving TLS from a CA the test makes, holding an image the test pushes over
//! the registry API, and Debian's `containerd` with `ctr`, which reads the agent's
//! `certs.d/<registry>/hosts.toml` files (`--hosts-dir`, the same loader as CRI's
//! `config_path`). docker.io pulls through the mirror the agent configured and trusts the CA it
//! wrote beside the hosts.toml; the registry itself is trusted through its own CA; without the
//! agent's files both pulls fail.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::peers::{logged, wait_for};
use common::registry::{self, push_image};
use common::tls::certificates;
use common::{sample_root, Proc};
use serde_json::json;

/// The tools, or (outside CI) a reason to skip.
fn have_tools() -> bool {
    common::peer_present(&common::missing_commands(&[
        "containerd",
        "ctr",
        "docker-registry",
        "openssl",
    ]))
}

/// containerd with its state under `dir`, the CRI plugin off (ctr pulls through the same hosts
/// loader); returns it and its socket.
fn containerd(dir: &Path) -> (Proc, PathBuf) {
    let sock = dir.join("containerd.sock");
    let cfg = dir.join("containerd.toml");
    std::fs::write(
        &cfg,
        format!(
            "version = 2\nroot = \"{}\"\nstate = \"{}\"\ndisabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n[grpc]\n  address = \"{}\"\n",
            dir.join("root").display(),
            dir.join("state").display(),
            sock.display()
        ),
    )
    .unwrap();
    let mut c = Command::new("containerd");
    c.arg("--config").arg(&cfg);
    let p = logged(c, &dir.join("containerd.log"));
    wait_for("containerd", || sock.exists());
    (p, sock)
}

/// `ctr images pull` of `image` with the hosts under `hosts_dir`: success, and what it said.
fn pull(sock: &Path, hosts_dir: &Path, image: &str) -> (bool, String) {
    let out = Command::new("ctr")
        .arg("--address")
        .arg(sock)
        .args(["images", "pull", "--snapshotter", "native", "--hosts-dir"])
        .arg(hosts_dir)
        .arg(image)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

#[test]
fn containerd_pulls_through_the_mirror_and_trusts_the_cas_the_agent_wrote() {
    if !have_tools() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let (ca, crt, key) = certificates(w);
    let (_registry, port, registry_log) = registry::start(w, &crt, &key);
    let base = format!("https://127.0.0.1:{port}");
    push_image(&base, "library/tiny", "1", &ca);
    let (_containerd, sock) = containerd(w);

    // The agent, on an AL2023 sample node: the mirror for docker.io and the registry's own CA.
    let root = sample_root("al2023-root");
    let r = root.path();
    let pem = std::fs::read_to_string(&ca).unwrap();
    let own = format!("127.0.0.1:{port}");
    let cfg = common::config_with(r, "config.json", |v| {
        v["tagging"] = json!({"enabled": false});
        v["registries"] = json!({
            "docker.io": {"mirrors": [{"url": base, "ca": pem}]},
            own.clone(): {"ca": pem},
        });
    });
    let hosts_dir = r.join("etc/containerd/certs.d");
    let docker_io = "docker.io/library/tiny:1";
    let direct = format!("{own}/library/tiny:1");

    // Without the agent's files neither pull works.
    std::fs::create_dir_all(&hosts_dir).unwrap();
    for image in [docker_io, direct.as_str()] {
        let (ok, said) = pull(&sock, &hosts_dir, image);
        assert!(!ok, "{image} pulled without the agent's files: {said}");
    }

    let out = common::init(r, &cfg, &[]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    for image in [docker_io, direct.as_str()] {
        let (ok, said) = pull(&sock, &hosts_dir, image);
        assert!(ok, "{image}: {said}");
    }
    // docker.io's pull went to the mirror (the registry sees containerd's ns=docker.io).
    let log = std::fs::read_to_string(&registry_log).unwrap();
    assert!(
        log.contains("/v2/library/tiny/manifests/1?ns=docker.io"),
        "the mirror was not asked: {log}"
    );
    // A rerun plans nothing for the registries.
    let again = common::init(r, &cfg, &["--dry-run"]);
    assert!(again.status.success(), "{}", common::stderr(&again));
    assert!(
        !common::stdout(&again).contains("containerd registry hosts"),
        "{}",
        common::stdout(&again)
    );
}
