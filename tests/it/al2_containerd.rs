//! AL2's containerd config over several boots, with bootstrap.sh's own handling of it: the
//! stand-in does what the AL2 bootstrap.sh does with `--containerd-config-file` (amazon-eks-ami,
//! `templates/al2/runtime/bootstrap.sh`, modelled from reading it, not copied): copy the file
//! over the node's template `/etc/eks/containerd/containerd-config.toml`, substitute the sandbox
//! image for `SANDBOX_IMAGE` in the template in place, then copy the template to
//! `/etc/containerd/config.toml` when they differ. So from the second boot on, the template is
//! the agent's own output: the agent keeps the AMI's template aside the first time and merges
//! into that, a second boot plans nothing, and leaving `images.pull` out puts the AMI's values
//! back.

use std::path::Path;

use serde_json::{json, Value};

use crate::common::*;

const PAUSE: &str = "602401143452.dkr.ecr.eu-west-1.amazonaws.com/eks/pause:3.5";
const TEMPLATE: &str = "etc/eks/containerd/containerd-config.toml";
const CONFIG: &str = "etc/containerd/config.toml";
const KEPT: &str = "etc/eks-nodeinit/containerd-config.ami.toml";

/// bootstrap.sh's containerd step, under the script's root (`$(dirname "$0")/../..`).
fn containerd_step() -> String {
    format!(
        r#"r="$(cd "$(dirname "$0")/../.." && pwd)"
cfg=""; prev=""
for a in "$@"; do [ "$prev" = --containerd-config-file ] && cfg="$a"; prev="$a"; done
[ -n "$cfg" ] && cp "$r$cfg" "$r/{TEMPLATE}"
sed -i "s,SANDBOX_IMAGE,{PAUSE},g" "$r/{TEMPLATE}"
mkdir -p "$r/etc/containerd"
cmp -s "$r/{TEMPLATE}" "$r/{CONFIG}" || cp "$r/{TEMPLATE}" "$r/{CONFIG}"
"#
    )
}

/// A boot: /run emptied (a tmpfs), then the agent's run with `cfg`.
fn boot(r: &Path, cfg: &Path) {
    let _ = std::fs::remove_dir_all(r.join("run"));
    let out = init(r, cfg, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// The steps a dry run at the next boot would plan, as `kind path` lines, and its change count.
fn next_boot(r: &Path, cfg: &Path) -> (u64, Vec<String>) {
    let _ = std::fs::remove_dir_all(r.join("run"));
    let out = init(r, cfg, &["--dry-run", "--output", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let plan: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let steps = plan["steps"].as_array().unwrap().iter();
    let paths = steps
        .filter_map(|s| s["path"].as_str())
        .filter(|p| !p.starts_with("/run/"))
        .map(String::from)
        .collect();
    (plan["changes"].as_u64().unwrap(), paths)
}

fn read(r: &Path, p: &str) -> String {
    std::fs::read_to_string(r.join(p)).unwrap()
}

#[test]
fn a_second_boot_plans_nothing_and_leaving_the_settings_out_restores_the_ami() {
    let root = sample_root("al2-root");
    let r = root.path();
    install_bootstrap(r, &bootstrap_standin(BOOTSTRAP_OPTIONS, &containerd_step()));
    let ami = read(r, TEMPLATE);
    let pull = config_with(r, "pull.json", |v| {
        v["tagging"] = json!({"enabled": false});
        v["images"] = json!({"pull": {"maxConcurrentDownloads": 8}});
    });
    boot(r, &pull);
    let config = read(r, CONFIG);
    assert!(config.contains("max_concurrent_downloads = 8"), "{config}");
    assert!(
        config.contains(&format!("sandbox_image = \"{PAUSE}\"")),
        "{config}"
    );
    assert_eq!(read(r, KEPT), ami, "the AMI's template kept as it was");
    assert_ne!(
        read(r, TEMPLATE),
        ami,
        "bootstrap.sh copied the agent's file over it"
    );
    // The next boots: the template is the agent's output now, and nothing is planned.
    assert_eq!(next_boot(r, &pull), (0, vec![]));
    boot(r, &pull);
    assert_eq!(read(r, CONFIG), config);
    // Another value: merged into the AMI's template, not into the last boot's output.
    let more = config_with(r, "more.json", |v| {
        v["tagging"] = json!({"enabled": false});
        v["images"] = json!({"pull": {"maxConcurrentDownloads": 4}});
    });
    boot(r, &more);
    let config = read(r, CONFIG);
    assert!(config.contains("max_concurrent_downloads = 4"), "{config}");
    assert_eq!(config.matches("max_concurrent_downloads").count(), 1);
    // images.pull left out: the AMI's template is back, and so are its values.
    let none = config_with(r, "none.json", |v| {
        v["tagging"] = json!({"enabled": false});
        v.as_object_mut().unwrap().remove("images");
    });
    boot(r, &none);
    assert!(!r.join(KEPT).exists() && !r.join("etc/eks-nodeinit/containerd-config.toml").exists());
    let config = read(r, CONFIG);
    assert_eq!(config, ami.replace("SANDBOX_IMAGE", PAUSE));
    assert_eq!(next_boot(r, &none), (0, vec![]));
}
