//! TLS for the tests' peers: a CA and a server certificate (for 127.0.0.1, or given names) made
//! with openssl, and commands that must succeed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Run `c`; it must succeed. Its standard output.
pub fn sh(c: &mut Command) -> String {
    let out = c
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{c:?}: {e}"));
    assert!(
        out.status.success(),
        "{c:?} failed ({:?}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A CA and a server certificate for 127.0.0.1: (ca.crt, server.crt, server.key).
pub fn certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    certificates_for(dir, &["IP:127.0.0.1".into()])
}

/// A CA and a server certificate signed by it for `names` (subjectAltName entries:
/// `DNS:host`, `IP:address`), valid two days: (ca.crt, server.crt, server.key).
pub fn certificates_for(dir: &Path, names: &[String]) -> (PathBuf, PathBuf, PathBuf) {
    let p = |n: &str| dir.join(n);
    let openssl = |args: &[&str], files: &[(&str, &str)]| {
        let mut c = Command::new("openssl");
        c.args(args);
        for (flag, file) in files {
            c.arg(flag).arg(p(file));
        }
        sh(&mut c);
    };
    let req = ["req", "-newkey", "rsa:2048", "-nodes", "-subj"];
    openssl(
        &[
            &req[..],
            &["/CN=eks-nodeinit test CA", "-x509", "-days", "2"],
        ]
        .concat(),
        &[("-keyout", "ca.key"), ("-out", "ca.crt")],
    );
    openssl(
        &[&req[..], &["/CN=eks-nodeinit test server"]].concat(),
        &[("-keyout", "srv.key"), ("-out", "srv.csr")],
    );
    std::fs::write(
        p("ext"),
        format!(
            "subjectAltName={}\nextendedKeyUsage=serverAuth\n",
            names.join(",")
        ),
    )
    .unwrap();
    openssl(
        &["x509", "-req", "-days", "2", "-CAcreateserial"],
        &[
            ("-in", "srv.csr"),
            ("-CA", "ca.crt"),
            ("-CAkey", "ca.key"),
            ("-extfile", "ext"),
            ("-out", "srv.crt"),
        ],
    );
    (p("ca.crt"), p("srv.crt"), p("srv.key"))
}
