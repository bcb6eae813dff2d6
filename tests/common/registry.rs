//! Debian's `docker-registry`, started by the tests on loopback serving TLS, with a small image
//! pushed over its API; its request log for the tests to read.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::tls::sh;
use super::{free_port, listening, logged, manifest_dir, wait_for, Proc};

/// The registry on 127.0.0.1 with TLS: (the process, its port, its request log).
pub fn start(dir: &Path, crt: &Path, key: &Path) -> (Proc, u16, PathBuf) {
    let port = free_port();
    let cfg = dir.join("registry.yml");
    std::fs::write(
        &cfg,
        format!(
            "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n  tls:\n    certificate: {}\n    key: {}\n",
            dir.join("data").display(),
            crt.display(),
            key.display()
        ),
    )
    .unwrap();
    let mut c = Command::new("docker-registry");
    c.arg("serve").arg(&cfg);
    let log = dir.join("registry.log");
    let p = logged(c, &log);
    wait_for("docker-registry", || listening(port));
    (p, port, log)
}

/// Push the suite's small image (tests/registry/push_image.py) as `repo:tag` to the registry at
/// `base` (`https://…`), verified with `ca`. The manifest's digest.
pub fn push_image(base: &str, repo: &str, tag: &str, ca: &Path) -> String {
    sh(Command::new("python3")
        .arg(manifest_dir().join("tests/registry/push_image.py"))
        .args([base, repo, tag])
        .arg(ca))
    .trim()
    .to_string()
}
