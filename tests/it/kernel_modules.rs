//! `kernel.modules` against Debian's real kmod: `modprobe --dry-run` resolves each module in a
//! root's own module tree (indexed by the real `depmod`) before any change, and stops the run
//! while nothing has changed when one is not there; the `modules-load.d` file is written, and a
//! second run plans nothing. (Under a root other than `/` nothing is loaded into the running
//! kernel: that load is the node's.)

use crate::common;

use common::*;
use serde_json::Value;

const RELEASE: &str = "6.1.0-eks-test";

/// An AL2023 sample root with a module tree for RELEASE (br_netfilter built in, indexed by
/// depmod) and the host's modprobe as its own. `None` where kmod is not installed.
fn kmod_root() -> Option<tempfile::TempDir> {
    if !peer_present(&missing_commands(&["modprobe", "depmod"])) {
        return None;
    }
    let root = sample_root("al2023-root");
    let r = root.path();
    std::fs::write(r.join("proc/sys/kernel/osrelease"), format!("{RELEASE}\n")).unwrap();
    let tree = r.join("lib/modules").join(RELEASE);
    std::fs::create_dir_all(&tree).unwrap();
    std::fs::write(
        tree.join("modules.builtin"),
        "kernel/net/bridge/br_netfilter.ko\n",
    )
    .unwrap();
    let depmod = std::process::Command::new("depmod")
        .arg("-b")
        .arg(r)
        .arg(RELEASE)
        .output()
        .unwrap();
    assert!(depmod.status.success(), "{depmod:?}");
    let sbin = r.join("usr/sbin");
    std::fs::create_dir_all(&sbin).unwrap();
    let host = String::from_utf8(
        std::process::Command::new("which")
            .arg("modprobe")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    std::os::unix::fs::symlink(host.trim(), sbin.join("modprobe")).unwrap();
    Some(root)
}

fn config(root: &std::path::Path, modules: &[&str]) -> std::path::PathBuf {
    config_with(root, "c.json", |v| {
        v["tagging"] = serde_json::json!({"enabled": false});
        v["kernel"] = serde_json::json!({ "modules": modules });
    })
}

#[test]
fn modules_checked_by_modprobe_then_persisted_and_a_rerun_plans_nothing() {
    let Some(root) = kmod_root() else { return };
    let r = root.path();
    let cfg = config(r, &["br-netfilter"]);
    let out = init(r, &cfg, &["--dry-run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("create /etc/modules-load.d/eks-nodeinit.conf"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "checked before any change: exec {}/usr/sbin/modprobe --dry-run -d",
            r.display()
        )),
        "{text}"
    );
    let out = init(r, &cfg, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let conf = std::fs::read_to_string(r.join("etc/modules-load.d/eks-nodeinit.conf")).unwrap();
    assert_eq!(conf.lines().last(), Some("br-netfilter"));
    let rep = report(r);
    let load = report_outcome(&rep, "load kernel modules").unwrap_or_else(|| panic!("{rep}"));
    assert!(
        load.as_str().unwrap().starts_with("skipped: --root is"),
        "{rep}"
    );
    let out = init(r, &cfg, &["--dry-run", "--output", "json"]);
    let plan: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(plan["changes"], 0, "{plan:#}");
}

#[test]
fn a_module_the_node_does_not_have_stops_the_run_before_any_change() {
    let Some(root) = kmod_root() else { return };
    let r = root.path();
    let cfg = config(r, &["br_netfilter", "nope_mod"]);
    let before = snapshot(r);
    let out = init(r, &cfg, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("nothing was changed"), "{err}");
    assert!(err.contains("kernel modules not loaded"), "{err}");
    assert!(err.contains("nope_mod not found"), "{err}");
    let mut after = snapshot(r);
    after.remove(&std::path::PathBuf::from(
        "var/lib/eks-nodeinit/report.json",
    ));
    assert_eq!(
        before, after,
        "a module that is not there must change nothing"
    );
}

#[test]
fn names_modprobe_would_misread_are_refused_by_validate() {
    let root = tempfile::tempdir().unwrap();
    let cfg = config(root.path(), &["-r", "x.ko"]);
    let out = run(cmd().arg("validate").arg("--config").arg(&cfg));
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("kernel.modules[0]: `-r` starts with `-`"),
        "{err}"
    );
    assert!(err.contains("kernel.modules[1]: `x.ko` holds `.`"), "{err}");
}
