//! The hardened-AMI checks through the binary (docs/hardening.md): a node whose kernel settings
//! and mounts a hardening changed stops before any change in `fail` mode, naming each cause and
//! its fix, and hands off once they are fixed.

use std::path::Path;

use serde_json::{json, Value};

use crate::common::{config_with, init, run, sample_root, stderr, stdout};

/// The kernel settings the kubelet's protectKernelDefaults demands, as a STIG-like hardening
/// leaves them (`kernel.panic = 0`).
fn hardened_kernel(root: &Path) {
    for (key, value) in [
        ("vm/overcommit_memory", "1"),
        ("vm/panic_on_oom", "0"),
        ("kernel/panic", "0"),
        ("kernel/panic_on_oops", "1"),
        ("kernel/keys/root_maxkeys", "1000000"),
        ("kernel/keys/root_maxbytes", "25000000"),
    ] {
        let p = root.join("proc/sys").join(key);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, format!("{value}\n")).unwrap();
    }
}

/// The node's mounts: `/opt` noexec or not.
fn mounts(root: &Path, opt_noexec: bool) {
    let opt = if opt_noexec {
        "rw,nosuid,nodev,noexec"
    } else {
        "rw,nosuid,nodev"
    };
    let text = format!(
        "22 1 259:1 / / rw,relatime shared:1 - xfs /dev/nvme0n1p1 rw\n\
         30 22 259:3 / /opt {opt} shared:2 - xfs /dev/nvme0n1p3 rw\n"
    );
    std::fs::create_dir_all(root.join("proc/self")).unwrap();
    std::fs::write(root.join("proc/self/mountinfo"), text).unwrap();
}

fn report(root: &Path) -> Value {
    let text = std::fs::read_to_string(root.join("var/lib/eks-nodeinit/report.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

const DROPIN: &str = "etc/eks/nodeadm.d/10-eks-nodeinit.json";

/// `field` of each of the report's check results (by name) that `keep` keeps.
fn results<'a>(rep: &'a Value, keep: impl Fn(&Value) -> bool, field: &str) -> Vec<&'a str> {
    let all = rep["checks"].as_object().unwrap().values();
    all.filter(|c| keep(c))
        .map(|c| c[field].as_str().unwrap())
        .collect()
}

#[test]
fn a_hardened_ami_stops_before_any_change_naming_each_cause_and_hands_off_once_fixed() {
    let root = sample_root("al2023-root");
    let r = root.path();
    hardened_kernel(r);
    mounts(r, true);
    let cfg = config_with(r, "c.json", |v| {
        v["tagging"] = json!({"enabled": false});
        v["verify"] = json!({"hardening": "fail", "join": "off"});
    });
    let out = init(r, &cfg, &[]);
    assert_eq!(out.status.code(), Some(1));
    let e = stderr(&out);
    for needle in [
        "2 checks before the changes failed: no hand-off, nothing was changed",
        "kernel.panic is 0 (live), not 10; the kubelet's protectKernelDefaults is on (nodeadm's generated kubelet config)",
        "/opt/cni/bin is on the noexec mount /opt (containerd runs the CNI plugins from it for every pod's network)",
        "mount it without noexec",
    ] {
        assert!(e.contains(needle), "`{needle}` in:\n{e}");
    }
    assert!(!r.join(DROPIN).exists(), "no hand-off");
    let rep = report(r);
    assert_eq!(rep["join"]["verdict"], "checks-failed", "{rep:#}");
    let failed = results(&rep, |c| c["result"] == "failed", "cause");
    assert_eq!(failed, ["kernel-defaults", "noexec"], "{rep:#}");
    assert_eq!(
        rep["checks"]["kernel settings protectKernelDefaults demands"]["phase"],
        "first"
    );
    // `status` leads with the cause that decided, and says each failure once.
    let status = run(crate::common::cmd().args(["status", "--root"]).arg(r));
    let text = stdout(&status);
    assert!(!status.status.success());
    assert!(
        text.contains("verdict: checks-failed\ncause: kernel settings"),
        "{text}"
    );
    assert_eq!(text.matches("mount it without noexec").count(), 1, "{text}");

    // The fix: the agent sets the kernel value itself (and persists it), /opt mounted with exec.
    mounts(r, false);
    let cfg = config_with(r, "c.json", |v| {
        v["tagging"] = json!({"enabled": false});
        v["verify"] = json!({"hardening": "fail", "join": "off"});
        v["sysctls"]["kernel.panic"] = json!(10);
    });
    let out = init(r, &cfg, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(r.join(DROPIN).exists(), "handed off");
    let rep = report(r);
    let first = results(&rep, |c| c["phase"] == "first", "result");
    assert_eq!(first, ["passed"; 4], "{rep:#}");
    // The fix as the kernel and the next boot's systemd-sysctl read it: set live, and in the
    // agent's file, which sorts after a hardening file such as 99-stig.conf.
    let live = std::fs::read_to_string(r.join("proc/sys/kernel/panic")).unwrap();
    assert_eq!(live.trim(), "10");
    let persisted =
        std::fs::read_to_string(r.join("etc/sysctl.d/99-zz-eks-nodeinit.conf")).unwrap();
    assert!(
        persisted.lines().any(|l| l == "kernel.panic = 10"),
        "{persisted}"
    );
}

/// A check planned after the hand-off, as this boot's job holds it (the plan's own step type),
/// run by `complete-hook` once kubelet is active, under the root.
#[test]
fn a_check_after_the_hand_off_runs_in_the_units_job_and_its_failure_fails_the_unit() {
    use eks_nodeinit::plan::after::{AfterJob, AFTER_JOB};
    use eks_nodeinit::plan::step::{After, CheckStep, When};
    use eks_nodeinit::verify::{hardening::Exec, Check};
    let Some(bus) = crate::common::dbus::start_bus() else {
        return;
    };
    let kubelet = std::sync::Arc::new(std::sync::Mutex::new("active".to_string()));
    crate::common::dbus::serve_unit_states(&bus.address, &[("kubelet.service", kubelet)]);
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    mounts(r, true);
    let check = Exec {
        dirs: [("/opt/cni/bin".to_string(), "the CNI plugins".to_string())].into(),
        programs: Default::default(),
    };
    let job = AfterJob {
        steps: vec![After::Check(CheckStep::new(
            Check::new(check),
            When::After,
            std::time::Duration::from_millis(2000),
        ))],
    };
    let path = r.join(&AFTER_JOB[1..]);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, job.to_text()).unwrap();
    let complete = || {
        run(crate::common::cmd()
            .args(["complete-hook", "--root"])
            .arg(r)
            .args(["--system-bus-address", &bus.address]))
    };
    let out = complete();
    assert!(!out.status.success());
    let e = stderr(&out);
    assert!(
        e.contains("after the hand-off, programs executable where the node runs them (noexec): /opt/cni/bin is on the noexec mount /opt"),
        "{e}"
    );
    let step = |rep: &Value| {
        rep["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| {
                s["step"]
                    == "after the hand-off: check programs executable where the node runs them"
            })
            .map(|s| s["outcome"].as_str().unwrap().to_string())
            .unwrap_or_default()
    };
    assert!(step(&report(r)).starts_with("failed: "), "{:#}", report(r));
    mounts(r, false);
    let out = complete();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(step(&report(r)).starts_with("done"), "{:#}", report(r));
}

/// A node image's root (no live kernel: no /proc/sys), with the AMI's `99-amazon.conf` and,
/// when `hardened`, a STIG file after it setting `kernel.panic = 0`.
fn image_root(hardened: bool) -> tempfile::TempDir {
    let root = sample_root("al2023-root");
    let r = root.path();
    std::fs::remove_dir_all(r.join("proc/sys")).unwrap();
    let d = r.join("etc/sysctl.d");
    std::fs::create_dir_all(&d).unwrap();
    let ami = "vm.overcommit_memory=1\nkernel.panic=10\nkernel.panic_on_oops=1\n";
    std::fs::write(d.join("99-amazon.conf"), ami).unwrap();
    if hardened {
        std::fs::write(d.join("99-stig.conf"), "# STIG\nkernel.panic = 0\n").unwrap();
    }
    root
}

#[test]
fn the_dry_run_runs_the_checks_that_read_only_the_node_and_names_a_hardening_file() {
    let root = image_root(true);
    let r = root.path();
    // No sysctls of its own: the image root has no live kernel to set them on.
    let cfg = config_with(r, "c.json", |v| {
        v["tagging"] = json!({"enabled": false});
        v["sysctls"] = json!({});
    });
    let before = crate::common::snapshot(r);
    let out = init(r, &cfg, &["--dry-run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let o = stdout(&out);
    let section = o
        .split("checks run by this dry run (each reads only the node under the root):\n")
        .nth(1)
        .unwrap_or_else(|| panic!("{o}"));
    let line = section
        .lines()
        .find(|l| l.contains("kernel settings protectKernelDefaults demands"))
        .unwrap_or_else(|| panic!("{o}"));
    assert!(
        line.starts_with("  - failed: ") && line.contains("(kernel-defaults)"),
        "{line}"
    );
    assert!(
        line.contains("kernel.panic is 0 (/etc/sysctl.d/99-stig.conf at boot), not 10; the kubelet's protectKernelDefaults is on (nodeadm's generated kubelet config)"),
        "{line}"
    );
    assert_eq!(
        crate::common::snapshot(r),
        before,
        "a dry run changes nothing"
    );

    let out = init(r, &cfg, &["--dry-run", "--output", "json"]);
    let plan: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let results = plan["checkResults"].as_array().unwrap();
    let kernel = results
        .iter()
        .find(|c| c["cause"] == "kernel-defaults")
        .unwrap_or_else(|| panic!("{plan:#}"));
    assert_eq!(kernel["result"], "failed");
    assert!(kernel.get("ms").is_none(), "no times: {kernel}");
    // Only checks that read the node: none of the join's (they need the instance or cluster).
    assert!(
        results
            .iter()
            .all(|c| !c["check"].as_str().unwrap().starts_with("API server")),
        "{plan:#}"
    );

    // The image as shipped: the AMI's file alone passes.
    let root = image_root(false);
    let cfg = config_with(root.path(), "c.json", |v| {
        v["tagging"] = json!({"enabled": false});
        v["sysctls"] = json!({});
    });
    let o = stdout(&init(root.path(), &cfg, &["--dry-run"]));
    assert!(
        o.contains("  - passed: kernel settings protectKernelDefaults demands: "),
        "{o}"
    );
}
