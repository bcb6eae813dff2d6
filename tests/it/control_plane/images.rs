//! `images.pull` read by the real containerd 2 (`containerd config dump`: the config with its
//! imports, migrated to version 3, every plugin's section over its defaults): the file the agent
//! gives AL2's bootstrap.sh, from a version-3 and a version-2 template, and the fragment the
//! NodeConfig carries for nodeadm to merge, each shows the settings in the CRI images plugin,
//! and the template's own settings kept.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use super::ready;
use crate::common::control_plane::peers_bin;
use crate::common::*;

const PULL: &str = r#"{"maxConcurrentDownloads": 8, "progressTimeout": "2m"}"#;

/// `containerd --config FILE config dump`, which must succeed.
fn dump(dir: &Path, config: &str) -> String {
    let f = dir.join("containerd.toml");
    std::fs::write(&f, config).unwrap();
    let out = Command::new(peers_bin().join("containerd"))
        .arg("--config")
        .arg(&f)
        .args(["config", "dump"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}\n{config}", stderr(&out));
    stdout(&out)
}

/// The lines of the dump's `[plugins.'io.containerd.cri.v1.images']` table.
fn images_table(dump: &str) -> Vec<String> {
    dump.lines()
        .skip_while(|l| l.trim() != "[plugins.'io.containerd.cri.v1.images']")
        .skip(1)
        .take_while(|l| !l.trim_start().starts_with('['))
        .map(|l| l.trim().to_string())
        .collect()
}

fn assert_pull_settings(dump: &str) {
    let t = images_table(dump);
    for want in [
        "max_concurrent_downloads = 8",
        "image_pull_progress_timeout = '2m'",
    ] {
        assert!(t.iter().any(|l| l == want), "{want} not in {t:?}\n{dump}");
    }
}

/// The dry run's file or drop-in at `path`.
fn planned(root: &Path, family: &str, path: &str) -> String {
    let cfg = config_with(root, "c.json", |v| {
        v["tagging"] = json!({"enabled": false});
        v["images"] = json!({ "pull": serde_json::from_str::<Value>(PULL).unwrap() });
    });
    let out = init(root, &cfg, &["--dry-run", "--output", "json"]);
    assert!(out.status.success(), "{family}: {}", stderr(&out));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let step = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["path"] == path);
    step.unwrap_or_else(|| panic!("{family}: no step writes {path}"))["new"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
#[ignore = "needs the control-plane peers: make control-plane"]
fn containerd_2_reads_the_pull_settings_as_each_family_renders_them() {
    if !ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = |p: &str| dir.path().join(p).display().to_string();
    let v3 = format!("version = 3\nroot = \"{}\"\nstate = \"{}\"\n[plugins.'io.containerd.cri.v1.images'.pinned_images]\n  sandbox = \"registry.example/pause:3.10\"\n", d("root"), d("state"));
    let v2 = format!("version = 2\nroot = \"{}\"\nstate = \"{}\"\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"registry.example/pause:3.10\"\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  discard_unpacked_layers = true\n", d("root"), d("state"));
    for template in [v3, v2] {
        let root = sample_root("al2-root");
        std::fs::write(
            root.path()
                .join("etc/eks/containerd/containerd-config.toml"),
            &template,
        )
        .unwrap();
        let given = planned(
            root.path(),
            "al2",
            "/etc/eks-nodeinit/containerd-config.toml",
        );
        let out = dump(dir.path(), &given);
        assert_pull_settings(&out);
        let kept = images_table(&out).join("\n");
        assert!(
            out.contains("sandbox = 'registry.example/pause:3.10'"),
            "{kept}\n{out}"
        );
    }
    let root = sample_root("al2023-root");
    let dropin = planned(
        root.path(),
        "al2023",
        "/etc/eks/nodeadm.d/10-eks-nodeinit.json",
    );
    let doc: Value = serde_json::from_str(&dropin).unwrap();
    let fragment = doc["spec"]["containerd"]["config"].as_str().unwrap();
    let own = format!("root = \"{}\"\nstate = \"{}\"\n", d("root"), d("state"));
    let out = dump(
        dir.path(),
        &fragment.replacen("version = 2\n", &format!("version = 2\n{own}"), 1),
    );
    assert_pull_settings(&out);
}
