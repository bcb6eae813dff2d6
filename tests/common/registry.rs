//! Debian's `docker-registry`, started by the tests on loopback serving TLS, or plain HTTP
//! behind basic auth, with a small image pushed over its API; its request log for the tests to
//! read.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::tls::sh;
use super::{free_port, listening, logged, manifest_dir, wait_for, Proc};

/// The registry on 127.0.0.1 with TLS: (the process, its port, its request log).
pub fn start(dir: &Path, crt: &Path, key: &Path) -> (Proc, u16, PathBuf) {
    let tls = format!(
        "  tls:\n    certificate: {}\n    key: {}\n",
        crt.display(),
        key.display()
    );
    serve(dir, &tls, "")
}

/// The registry on 127.0.0.1 over plain HTTP, every request refused (401) without `user`'s
/// `password` (htpasswd, bcrypt as the registry needs it: libcrypt's, through Python):
/// (the process, its port, its request log).
pub fn start_with_basic_auth(dir: &Path, user: &str, password: &str) -> (Proc, u16, PathBuf) {
    let hash = sh(Command::new("python3").args([
        "-W",
        "ignore",
        "-c",
        "import crypt, sys; print(crypt.crypt(sys.argv[1], crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16)))",
        password,
    ]));
    let htpasswd = dir.join("htpasswd");
    std::fs::write(&htpasswd, format!("{user}:{}\n", hash.trim())).unwrap();
    let auth = format!(
        "auth:\n  htpasswd:\n    realm: suite\n    path: {}\n",
        htpasswd.display()
    );
    serve(dir, "", &auth)
}

/// The registry on 127.0.0.1 over plain HTTP, open to all: (the process, its port, its request
/// log).
pub fn start_plain(dir: &Path) -> (Proc, u16, PathBuf) {
    serve(dir, "", "")
}

/// `docker-registry serve` with its storage under `dir`, `http` added to its `http` section and
/// `rest` after it.
fn serve(dir: &Path, http: &str, rest: &str) -> (Proc, u16, PathBuf) {
    let port = free_port();
    let cfg = dir.join("registry.yml");
    std::fs::write(
        &cfg,
        format!(
            "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n{http}{rest}",
            dir.join("data").display(),
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
    push(base, repo, tag, &ca.display().to_string(), None, None)
}

/// Push an image of `layers` (`COUNTxMIB`: COUNT layers of MIB MiB of random bytes each) as
/// `repo:tag` to the open plain-HTTP registry at `base`. The manifest's digest.
pub fn push_layers(base: &str, repo: &str, tag: &str, layers: &str) -> String {
    let mut c = Command::new("python3");
    c.arg(manifest_dir().join("tests/registry/push_image.py"))
        .args([base, repo, tag, "-"])
        .env("PUSH_LAYERS", layers);
    sh(&mut c).trim().to_string()
}

/// Push the small image with `program` in it as its command to the plain-HTTP registry at
/// `base`, as `auth` (`user:password`). The manifest's digest.
pub fn push_program(base: &str, repo: &str, tag: &str, auth: &str, program: &Path) -> String {
    push(base, repo, tag, "-", Some(auth), Some(program))
}

fn push(
    base: &str,
    repo: &str,
    tag: &str,
    ca: &str,
    auth: Option<&str>,
    program: Option<&Path>,
) -> String {
    let mut c = Command::new("python3");
    c.arg(manifest_dir().join("tests/registry/push_image.py"))
        .args([base, repo, tag, ca])
        .args(program);
    if let Some(a) = auth {
        c.env("REGISTRY_AUTH", a);
    }
    sh(&mut c).trim().to_string()
}

/// The suite's sandbox program (tests/registry/pause.go), built into `dir` with the Go that
/// builds the peers.
pub fn pause_program(dir: &Path) -> PathBuf {
    let out = dir.join("pause");
    sh(Command::new("go")
        .args(["build", "-trimpath", "-ldflags", "-s -w", "-o"])
        .arg(&out)
        .arg(manifest_dir().join("tests/registry/pause.go"))
        .env("CGO_ENABLED", "0")
        .env("GOFLAGS", "")
        .env("GO111MODULE", "off"));
    out
}
