//! CA bundles (`trust`) against real parts started here: moto serving Parameter Store over TLS on
//! 127.0.0.1 with a server certificate from a CA the test makes (openssl), and Debian's own
//! `update-ca-certificates` rebuilding a Debian-like trust store under the test's root. Without
//! the CA the agent's discovery cannot reach moto; with it in `trust.caBundles` the agent's call
//! trusts it, the CA lands in the root's anchors, the rebuilt bundle holds it (openssl verifies
//! the server certificate against that bundle), and a rerun plans nothing.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::tls::{certificates, sh};
use common::*;
use eks_nodeinit::os::fsutil::under;
use eks_nodeinit::plan::aspects::trust::{anchor, DEBIAN, RECORD};
use serde_json::{json, Value};

const CLUSTER: &str = "prod-eu";
const TOOL: &str = "/usr/sbin/update-ca-certificates";

fn have_tools() -> bool {
    let mut missing = missing_commands(&["openssl"]);
    if !Path::new(TOOL).exists() {
        missing.push(TOOL);
    }
    peer_present(&missing)
}

async fn tls_sdk_config(url: &str, ca: &[u8]) -> aws_config::SdkConfig {
    common::moto_tls_sdk_config(url, "eu-west-1", ca).await
}

/// The Debian trust store's layout under `root`, with the host's own update-ca-certificates.
fn debian_store(root: &Path) {
    for d in [
        "usr/sbin",
        "usr/share/ca-certificates",
        "usr/local/share/ca-certificates",
        "etc/ssl/certs",
    ] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::write(root.join("etc/ca-certificates.conf"), "").unwrap();
    std::fs::copy(TOOL, root.join(&TOOL[1..])).unwrap();
}

/// The cluster's endpoint, service CIDR and CA in Parameter Store, put over TLS trusting `ca_pem`.
fn put_discovery_parameters(url: &str, ca_pem: &str) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        use aws_sdk_ssm::types::ParameterType::{SecureString, String as Plain};
        let ssm = aws_sdk_ssm::Client::new(&tls_sdk_config(url, ca_pem.as_bytes()).await);
        let b64 = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, ca_pem);
        for (name, value, kind) in [
            ("APISERVER_ENDPOINT", "https://k.example", Plain),
            ("SERVICE_CIDR", "172.20.0.0/16", Plain),
            ("B64_CLUSTER_CA", b64.as_str(), SecureString),
        ] {
            ssm.put_parameter()
                .name(format!("/eks/{CLUSTER}/{name}"))
                .value(value)
                .r#type(kind)
                .send()
                .await
                .unwrap();
        }
    });
}

/// The anchor and the rebuilt bundle under `root` hold the CA (openssl verifies the server's
/// certificate `srv` against the bundle), the rebuild done and the tool recorded.
fn store_holds_the_ca(root: &Path, rep: &Value, ca_pem: &str, srv: &Path) {
    let anchor = under(root, anchor(DEBIAN, 0));
    assert_eq!(
        std::fs::read_to_string(&anchor).unwrap().trim_end(),
        ca_pem.trim_end()
    );
    let bundle = root.join("etc/ssl/certs/ca-certificates.crt");
    let body = ca_pem.lines().nth(1).unwrap();
    assert!(
        std::fs::read_to_string(&bundle).unwrap().contains(body),
        "the rebuilt bundle holds the CA"
    );
    let verified = sh(Command::new("openssl")
        .arg("verify")
        .arg("-CAfile")
        .arg(&bundle)
        .arg(srv));
    assert!(verified.contains(": OK"), "{verified}");
    assert_eq!(
        report_outcome(rep, "rebuild the trust store"),
        Some(json!("done")),
        "{rep}"
    );
    let record = std::fs::read_to_string(under(root, RECORD)).unwrap();
    assert!(
        record.contains("update-ca-certificates sha256:"),
        "{record}"
    );
}

#[test]
fn the_node_store_and_the_agents_own_calls_trust_the_configured_ca() {
    if !have_tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (ca, srv, key) = certificates(dir.path());
    let Some(moto) = start_moto_at(
        "127.0.0.1",
        &[
            "-m",
            "moto.server",
            "-c",
            srv.to_str().unwrap(),
            "-k",
            key.to_str().unwrap(),
        ],
        &[],
    ) else {
        return;
    };
    let url = moto.url.replace("http://", "https://");
    let ca_pem = std::fs::read_to_string(&ca).unwrap();
    put_discovery_parameters(&url, &ca_pem);
    let root = sample_root("al2023-root");
    debian_store(root.path());
    let config = |trust: bool| {
        config_with(root.path(), "c.json", |v| {
            v["cluster"] =
                json!({"name": CLUSTER, "discovery": {"ssmEndpoint": url, "deadlineSec": 3}});
            v["tagging"] = json!({"enabled": false});
            if trust {
                v["trust"] = json!({"caBundles": [ca_pem]});
            }
        })
    };

    // Without the CA: the agent's call cannot trust moto's certificate; nothing changes.
    let before = snapshot(root.path());
    let out = init(root.path(), &config(false), &[]);
    assert!(!out.status.success(), "{}", stdout(&out));
    // Not retried until the deadline: an untrusted certificate does not heal; the error says
    // where the CA goes.
    let err = stderr(&out);
    assert!(
        err.contains("(1 call)") && err.contains("trust.caBundles"),
        "{err}"
    );
    let mut after = snapshot(root.path());
    after.remove(Path::new("c.json"));
    let mut before = before;
    before.remove(Path::new("c.json"));
    assert_eq!(after, before, "nothing changed");

    // With it: discovery over TLS works, the anchor and the rebuilt bundle hold the CA.
    let out = init(root.path(), &config(true), &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rep = report(root.path());
    assert_eq!(rep["discovery"]["calls"]["getParametersByPath"], 1, "{rep}");
    store_holds_the_ca(root.path(), &rep, &ca_pem, &srv);

    // A rerun (the discovery cache answers) plans nothing.
    let out = init(
        root.path(),
        &config(true),
        &["--dry-run", "--output", "json"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let plan: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(plan["changes"], 0, "{plan}");
}

#[test]
fn a_trust_tool_that_fails_fails_the_run_and_says_what_to_do() {
    let root = sample_root("al2023-root");
    std::fs::create_dir_all(root.path().join("usr/sbin")).unwrap();
    let tool = root.path().join(&TOOL[1..]);
    let install = |script: &str| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(&tool, script).unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    let ca = std::fs::read_to_string(manifest_dir().join("tests/fixtures/cluster-ca.pem")).unwrap();
    let cfg = config_with(root.path(), "c.json", |v| {
        v["tagging"] = json!({"enabled": false});
        v["trust"] = json!({"caBundles": [ca]});
    });
    // A first run whose rebuild succeeded left its record; then the anchor is lost and the
    // tool fails: that record must not stand for the failed rebuild.
    install("#!/bin/sh\nexit 0\n");
    assert!(init(root.path(), &cfg, &[]).status.success());
    let record = under(root.path(), RECORD);
    assert!(record.exists());
    let anchor = under(root.path(), anchor(DEBIAN, 0));
    std::fs::remove_file(&anchor).unwrap();
    std::fs::remove_file(root.path().join("var/lib/eks-nodeinit/done")).ok();
    install("#!/bin/sh\necho 'cannot write /etc/ssl/certs: read-only' >&2\nexit 1\n");
    let out = init(root.path(), &cfg, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("the CA trust store was not rebuilt"), "{err}");
    assert!(
        err.contains("cannot write /etc/ssl/certs: read-only"),
        "{err}"
    );
    assert!(err.contains("run it by hand"), "{err}");
    assert!(anchor.exists());
    assert!(!record.exists(), "the stale record was removed");
    // Not recorded as rebuilt: a rerun plans the rebuild again (and only that, with its record).
    let out = init(root.path(), &cfg, &["--dry-run", "--output", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let plan: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(plan["changes"], 2, "{plan}");
    assert_eq!(
        step_kinds(&plan),
        ["run", "file", "handoff:dropin"],
        "{plan}"
    );
}
