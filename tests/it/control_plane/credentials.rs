//! Image credential providers (`kubelet.credentialProviders`) proven by the real kubelet on both
//! families: the suite's registry refuses every request without its user's password; the
//! agent merges the suite's provider (tests/registry/credential_provider.py, which hands the
//! kubelet that password) after the node's ECR provider and points the kubelet at the result;
//! the kubelet starts with it, and a pod's image from that registry is pulled and runs — only
//! through the provider, which logs each call. And the kubelet refuses at start what the agent
//! refuses before any change.
//!
//! The node's paths move under the case's root, as `99-host.conf` moves the kubelet's: the
//! plugin directory both hand-offs pass, the node's config they name first, the agent's after.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::{agent, al2023_start, al2_start, config, ready};
use crate::common;
use common::control_plane::ControlPlane;
use common::kubelet::{Kubelet, Start};
use common::pods;
use common::registry;
use common::{example, init, recording_bootstrap, sample_root, stderr};
use eks_nodeinit::os::fsutil::under;
use eks_nodeinit::plan::aspects::credential_providers::{BIN_DIR, KUBELET_VERSION, OWN_CONFIG};

const USER: &str = "suite";
const PASSWORD: &str = "only-the-provider-knows";
const PLUGIN: &str = "suite-credentials";
const FLAG: &str = "--image-credential-provider-config=";

/// The ECR provider config an AL2 image ships (bootstrap.sh's kubelet unit names it).
const AL2_ECR: &str = r#"{"apiVersion": "kubelet.config.k8s.io/v1", "kind": "CredentialProviderConfig",
  "providers": [{"name": "ecr-credential-provider", "matchImages": ["*.dkr.ecr.*.amazonaws.com"],
    "defaultCacheDuration": "12h", "apiVersion": "credentialprovider.kubelet.k8s.io/v1"}]}"#;

/// Whether the tools beyond the control plane's are here.
fn have_tools() -> bool {
    ready() && common::peer_present(&common::missing_commands(&["docker-registry", "ctr", "go"]))
}

/// A copy of the sample root as the image leaves it: the plugin directory with the ECR
/// plugin (a stand-in: no ECR image is pulled) and the suite's; on AL2 the ECR config and the
/// recording bootstrap.sh, on AL2023 the kubelet's version where the image build keeps it.
fn node_root(sample: &str) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let root = sample_root(sample);
    let r = root.path();
    let bin = under(r, BIN_DIR);
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(bin.join("ecr-credential-provider"), "#!/bin/sh\nexit 1\n").unwrap();
    let plugin = common::manifest_dir().join("tests/registry/credential_provider.py");
    std::fs::copy(plugin, bin.join(PLUGIN)).unwrap();
    for p in ["ecr-credential-provider", PLUGIN] {
        std::fs::set_permissions(bin.join(p), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    if sample == "al2-root" {
        std::fs::write(bin.join("config.json"), AL2_ECR).unwrap();
        recording_bootstrap(r);
    } else {
        let kubelet = common::control_plane::peers_bin().join("kubelet");
        let version = common::tls::sh(std::process::Command::new(kubelet).arg("--version"));
        std::fs::write(under(r, KUBELET_VERSION), version).unwrap();
    }
    root
}

/// The suite's provider for the registry on `port`, logging to `log`.
fn provider(port: u16, log: &Path) -> Value {
    let host = format!("127.0.0.1:{port}");
    json!({
        "name": PLUGIN,
        "matchImages": [host],
        "defaultCacheDuration": "0s",
        "args": [format!("--registry={host}")],
        "env": [
            {"name": "REGISTRY_USER", "value": USER},
            {"name": "REGISTRY_PASSWORD", "value": PASSWORD},
            {"name": "CREDENTIAL_LOG", "value": log.display().to_string()},
        ],
    })
}

/// The agent run on `root` with `providers`, and the kubelet's start: both hand-offs' own
/// credential-provider flags first, then the agent's, node paths under the root.
fn agent_with(cp: &ControlPlane, root: &Path, al2: bool, providers: Value) -> (Value, Start) {
    let cfg = config(root, cp, |v| {
        v["kubelet"]["credentialProviders"] = providers
    });
    let plan = agent(root, &cfg, &example("metadata.json"));
    let mut start = if al2 {
        al2_start(root)
    } else {
        al2023_start(root, None)
    };
    let node_config = under(root, format!("{BIN_DIR}/config.json"));
    let mut flags = vec![
        format!("{FLAG}{}", node_config.display()),
        format!(
            "--image-credential-provider-bin-dir={}",
            under(root, BIN_DIR).display()
        ),
    ];
    flags.extend(start.flags.iter().map(|f| match f.strip_prefix(FLAG) {
        Some(p) => format!("{FLAG}{}", under(root, p).display()),
        None => f.clone(),
    }));
    start.flags = flags;
    (plan, start)
}

/// The registry demanding credentials, holding an image whose command is the pause program:
/// (the registry, its port, its log, the image).
fn private_registry(dir: &Path, pause: &Path) -> (common::Proc, u16, PathBuf, String) {
    let (proc, port, log) = registry::start_with_basic_auth(dir, USER, PASSWORD);
    let base = format!("http://127.0.0.1:{port}");
    registry::push_program(
        &base,
        "suite/private",
        "1",
        &format!("{USER}:{PASSWORD}"),
        pause,
    );
    (proc, port, log, format!("127.0.0.1:{port}/suite/private:1"))
}

fn prove_pull(sample: &'static str, name: &'static str) {
    if !have_tools() {
        return;
    }
    let cp = ControlPlane::shared();
    let pause = pods::ensure_sandbox(&cp);
    let work = tempfile::tempdir().unwrap();
    let (_registry, port, registry_log, image) = private_registry(work.path(), &pause);
    // containerd alone, without credentials, is refused.
    let (ok, said) = pods::anonymous_pull(&cp, "suite-anonymous", &image);
    assert!(!ok && said.contains("401 Unauthorized"), "{said}");

    let root = node_root(sample);
    let calls = work.path().join("provider.jsonl");
    let providers = json!([provider(port, &calls)]);
    let (plan, start) = agent_with(&cp, root.path(), sample == "al2-root", providers);
    let written = plan.to_string();
    assert!(written.contains(OWN_CONFIG), "{plan}");
    let mut kubelet = Kubelet::start(&cp, name, &start);
    kubelet.node(&cp);
    let pod = format!("private-{}", sample.trim_end_matches("-root"));
    pods::run(&cp, name, &pod, &image);
    pods::wait_running(&cp, &pod, &kubelet);
    let held = pods::images(&cp);
    pods::remove(&cp, &pod);
    assert!(held.lines().any(|l| l == image), "containerd holds {held}");
    let logged = std::fs::read_to_string(&calls).unwrap_or_default();
    eprintln!("the provider was called: {logged}");
    let first: Value = serde_json::from_str(logged.lines().next().unwrap_or("null")).unwrap();
    // The kubelet asks for the repository, its tag left off.
    let repository = format!("127.0.0.1:{port}/suite/private");
    assert_eq!(first["image"], repository, "{logged}");
    assert_eq!(first["apiVersion"], "credentialprovider.kubelet.k8s.io/v1");
    assert_eq!(
        first["args"],
        json!([format!("--registry=127.0.0.1:{port}")])
    );
    // The registry refused the CRI's first, anonymous ask and let the provider's user in.
    let reg = std::fs::read_to_string(&registry_log).unwrap();
    let cri: Vec<&str> = reg
        .lines()
        .filter(|l| l.contains("containerd/v2"))
        .collect();
    assert!(
        cri.first()
            .is_some_and(|l| l.contains("invalid authorization credential")),
        "{reg}"
    );
    assert!(
        cri.iter().any(|l| l.contains("msg=\"authorized request\"")),
        "{reg}"
    );
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn al2_pulls_from_a_private_registry_through_the_configured_provider() {
    prove_pull("al2-root", "al2-credentials.node.test");
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn al2023_pulls_from_a_private_registry_through_the_configured_provider() {
    prove_pull("al2023-root", "al2023-credentials.node.test");
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn the_kubelet_refuses_at_start_the_match_image_the_agent_refuses_first() {
    if !have_tools() {
        return;
    }
    let cp = ControlPlane::shared();
    let root = node_root("al2023-root");
    let r = root.path();
    let log = r.join("provider.jsonl");
    let (_plan, start) = agent_with(&cp, r, false, json!([provider(5000, &log)]));
    // The agent's own file, one pattern made one the agent refuses.
    let own = under(r, OWN_CONFIG);
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&own).unwrap()).unwrap();
    doc["providers"][1]["matchImages"] = json!(["registry example.com"]);
    std::fs::write(&own, doc.to_string()).unwrap();
    let name = "bad-match.node.test";
    super::resources::assert_refused(&cp, name, &start, "match image is invalid");
    // The agent says so before any change, naming the field.
    let mut p = provider(5000, &log);
    p["matchImages"] = json!(["registry example.com"]);
    let cfg = config(r, &cp, |v| v["kubelet"]["credentialProviders"] = json!([p]));
    let out = init(r, &cfg, &["--dry-run"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let want = "kubelet.credentialProviders[0].matchImages[0]: `registry example.com`";
    assert!(stderr(&out).contains(want), "{}", stderr(&out));
}
