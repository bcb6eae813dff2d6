//! TLS for the tests' peers: a CA and a server certificate for 127.0.0.1 made with openssl, and
//! commands that must succeed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Run `c`; it must succeed. Its standard output.
pub fn sh(c: &mut Command) -> String {
    let out = c.stdin(Stdio::null()).output().unwrap();
    assert!(
        out.status.success(),
        "{c:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A CA and a server certificate for 127.0.0.1: (ca.crt, server.crt, server.key).
pub fn certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let p = |n: &str| dir.join(n);
    let req = ["req", "-newkey", "rsa:2048", "-nodes", "-subj"];
    sh(Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=registry test CA",
            "-keyout",
        ])
        .arg(p("ca.key"))
        .arg("-out")
        .arg(p("ca.crt")));
    sh(Command::new("openssl")
        .args(req)
        .arg("/CN=127.0.0.1")
        .arg("-keyout")
        .arg(p("srv.key"))
        .arg("-out")
        .arg(p("srv.csr")));
    std::fs::write(
        p("ext"),
        "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    sh(Command::new("openssl")
        .args(["x509", "-req", "-days", "1", "-CAcreateserial", "-in"])
        .arg(p("srv.csr"))
        .arg("-CA")
        .arg(p("ca.crt"))
        .arg("-CAkey")
        .arg(p("ca.key"))
        .arg("-extfile")
        .arg(p("ext"))
        .arg("-out")
        .arg(p("srv.crt")));
    (p("ca.crt"), p("srv.crt"), p("srv.key"))
}
