//! The hardened-AMI probes on test roots.

use super::*;
use crate::verify::check::run;
use crate::verify::{Check, Verdict};

fn write(root: &Path, path: &str, text: &str) {
    let p = under(root, path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

async fn one(root: &Path, probe: impl Probe + 'static) -> crate::verify::CheckResult {
    let checks = [Check::new(probe)];
    let budget = std::time::Duration::from_secs(5);
    run(&checks, budget, root.to_path_buf()).await.remove(0)
}

const MOUNTS: &str = "\
22 1 259:1 / / rw,relatime shared:1 - ext4 /dev/root rw
30 22 0:26 / /opt rw,nosuid,nodev,noexec shared:2 - xfs /dev/opt rw
31 22 0:27 / /var/lib/kube\\040let rw,noexec shared:3 - tmpfs tmpfs rw
32 30 0:28 / /opt/cni rw shared:4 - xfs /dev/cni rw
";

#[test]
fn the_mount_that_holds_a_path_is_the_deepest_and_escapes_are_read() {
    let root = tempfile::tempdir().unwrap();
    write(root.path(), "/proc/self/mountinfo", MOUNTS);
    let m = mounts(root.path()).unwrap();
    assert_eq!(
        mount_of(&m, "/opt/cni/bin"),
        Some(&("/opt/cni".to_string(), false))
    );
    assert_eq!(
        mount_of(&m, "/opt/other"),
        Some(&("/opt".to_string(), true))
    );
    assert_eq!(mount_of(&m, "/optional"), Some(&("/".to_string(), false)));
    assert_eq!(
        mount_of(&m, "/var/lib/kube let/x"),
        Some(&("/var/lib/kube let".to_string(), true))
    );
}

#[tokio::test]
async fn noexec_directories_and_programs_without_execute_bits_are_named() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    write(r, "/proc/self/mountinfo", MOUNTS);
    write(r, "/usr/bin/kubelet", "");
    std::fs::set_permissions(
        under(r, "/usr/bin/kubelet"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    write(r, "/opt/tool", "");
    std::fs::set_permissions(
        under(r, "/opt/tool"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let probe = Exec {
        dirs: BTreeMap::from([
            ("/opt/cni/bin".into(), "CNI".into()),
            ("/opt/x".into(), "x".into()),
        ]),
        programs: BTreeMap::from([
            ("/usr/bin/kubelet".into(), "kubelet".into()),
            ("/opt/tool".into(), "tool".into()),
            ("/usr/bin/absent".into(), "absent".into()),
        ]),
    };
    let r = one(r, probe).await;
    assert_eq!(
        (r.result, r.cause.as_deref()),
        (Verdict::Failed, Some("noexec"))
    );
    assert_eq!(
        r.detail,
        "/opt/x is on the noexec mount /opt (x); tool (/opt/tool) is on the noexec mount /opt; kubelet (/usr/bin/kubelet) is not executable (mode 0644)"
    );
    assert!(r.todo.unwrap().contains("without noexec"));
}

#[tokio::test]
async fn the_kernel_settings_are_judged_as_the_kubelet_reads_them() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    for (k, v) in KERNEL_DEFAULTS {
        write(
            r,
            &format!("/proc/sys/{}", k.replace('.', "/")),
            &format!("{v}\n"),
        );
    }
    let probe = || KernelDefaults {
        protected_by: "nodeadm's generated kubelet config".into(),
        agent_sets: BTreeMap::new(),
        next_boot: false,
    };
    assert_eq!(one(r, probe()).await.result, Verdict::Passed);
    // A STIG-like value, and one larger than demanded: the kubelet wants each equal.
    write(r, "/proc/sys/kernel/panic", "0\n");
    write(r, "/proc/sys/kernel/keys/root_maxkeys", "2000000\n");
    let failed = one(r, probe()).await;
    assert_eq!(failed.cause.as_deref(), Some("kernel-defaults"));
    assert!(failed.detail.starts_with("kernel.panic is 0 (live), not 10; kernel.keys.root_maxkeys is 2000000 (live), not 1000000;"), "{}", failed.detail);
    assert!(!failed.advisory);
    // What the agent sets itself before the hand-off counts instead of the live value.
    let mut fixed = probe();
    fixed.agent_sets.insert("kernel.panic".into(), "10".into());
    fixed
        .agent_sets
        .insert("kernel.keys.root_maxkeys".into(), "1000000".into());
    assert_eq!(one(r, fixed).await.result, Verdict::Passed);
    // A hardening file the live values do not show yet: the next boot's value, when asked.
    write(r, "/etc/sysctl.d/99-stig.conf", "kernel.panic=0\n");
    assert_eq!(
        one(r, probe()).await.result,
        Verdict::Failed,
        "live: kernel.panic 0"
    );
    write(r, "/proc/sys/kernel/panic", "10\n");
    write(r, "/proc/sys/kernel/keys/root_maxkeys", "1000000\n");
    assert_eq!(
        one(r, probe()).await.result,
        Verdict::Passed,
        "live values rule"
    );
    let next = KernelDefaults {
        next_boot: true,
        ..probe()
    };
    let failed = one(r, next).await;
    assert!(
        failed
            .detail
            .starts_with("kernel.panic is 0 (/etc/sysctl.d/99-stig.conf at boot)"),
        "{failed:?}"
    );
    // A root without a live kernel: not run, not failed.
    let empty = tempfile::tempdir().unwrap();
    assert_eq!(one(empty.path(), probe()).await.result, Verdict::NotRun);
}

#[tokio::test]
async fn a_node_image_is_judged_by_what_its_next_boot_sets_and_mounts() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    let probe = || KernelDefaults {
        protected_by: "nodeadm's generated kubelet config".into(),
        agent_sets: BTreeMap::new(),
        next_boot: false,
    };
    write(
        r,
        "/etc/sysctl.d/99-amazon.conf",
        "vm.overcommit_memory=1\nkernel.panic=10\nkernel.panic_on_oops=1\n",
    );
    let passed = one(r, probe()).await;
    assert_eq!(passed.result, Verdict::Passed, "{passed:?}");
    write(r, "/etc/sysctl.d/99-stig.conf", "kernel.panic = 0\n");
    let failed = one(r, probe()).await;
    assert_eq!(failed.cause.as_deref(), Some("kernel-defaults"));
    assert!(
        failed
            .detail
            .starts_with("kernel.panic is 0 (/etc/sysctl.d/99-stig.conf at boot), not 10;"),
        "{}",
        failed.detail
    );
    write(
        r,
        "/etc/fstab",
        "# /etc/fstab\nUUID=1 / xfs defaults 0 0\n/dev/nvme1n1 /var/lib/kubelet xfs defaults,nodev,noexec 0 2\n/swapfile none swap sw 0 0\n",
    );
    let probe = Exec {
        dirs: BTreeMap::from([("/var/lib/kubelet".into(), "pods".into())]),
        programs: BTreeMap::new(),
    };
    let r = one(r, probe).await;
    assert_eq!(r.cause.as_deref(), Some("noexec"), "{r:?}");
    assert_eq!(
        r.detail,
        "/var/lib/kubelet is on the noexec mount /var/lib/kubelet (pods)"
    );
}

#[tokio::test]
async fn selinux_enforcing_needs_the_container_module_and_fips_is_advisory() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    assert_eq!(one(r, Selinux {}).await.result, Verdict::Passed);
    write(r, "/sys/fs/selinux/enforce", "1");
    write(
        r,
        "/etc/selinux/config",
        "SELINUX=enforcing\nSELINUXTYPE=targeted\n",
    );
    let failed = one(r, Selinux {}).await;
    assert_eq!(failed.cause.as_deref(), Some("selinux"));
    write(
        r,
        "/var/lib/selinux/targeted/active/modules/200/container/cil",
        "",
    );
    assert_eq!(one(r, Selinux {}).await.result, Verdict::Passed);
    write(
        r,
        "/var/lib/selinux/targeted/active/modules/disabled/container",
        "",
    );
    assert_eq!(one(r, Selinux {}).await.result, Verdict::Failed);
    write(r, "/proc/sys/crypto/fips_enabled", "1\n");
    let fips = one(r, Fips {}).await;
    if std::env::var_os("AWS_USE_FIPS_ENDPOINT").is_none() {
        assert_eq!(
            (fips.result, fips.advisory),
            (Verdict::Failed, true),
            "{fips:?}"
        );
    }
}

#[test]
fn each_probe_reads_back_from_a_job_as_it_was_planned() {
    let checks = vec![
        Check::new(KernelDefaults {
            protected_by: "x".into(),
            agent_sets: BTreeMap::from([("kernel.panic".into(), "10".into())]),
            next_boot: true,
        }),
        Check::new(Exec {
            dirs: BTreeMap::from([("/opt/cni/bin".into(), "CNI".into())]),
            programs: BTreeMap::new(),
        }),
        Check::new(Selinux {}),
        Check::new(Fips {}),
    ];
    let text = serde_json::to_string(&checks).unwrap();
    let back: Vec<Check> = serde_json::from_str(&text).unwrap();
    assert_eq!(back, checks);
    let e =
        serde_json::from_str::<Check>(r#"{"check":"exec","dirs":{},"programs":{},"shell":"x"}"#);
    assert!(e.unwrap_err().to_string().contains("shell"));
}

/// On the node itself the kernel says: a real `noexec` tmpfs, mounted for the test (root).
#[test]
fn on_the_node_a_noexec_mount_is_found_by_the_kernel_through_a_missing_path() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIP: mounting a noexec tmpfs needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap().to_string();
    let mount = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "noexec,size=1m", "tmpfs", &d])
        .status();
    if !mount.is_ok_and(|s| s.success()) {
        eprintln!("SKIP: mount -t tmpfs failed here");
        return;
    }
    let below = format!("{d}/cni/bin");
    let found = noexec_mount(Path::new("/"), &[], &below);
    let exec_dir = noexec_mount(Path::new("/"), &[], "/usr/bin");
    let _ = std::process::Command::new("umount").arg(&d).status();
    assert_eq!(found.as_deref(), Some("(not in mountinfo)"));
    assert_eq!(exec_dir, None);
}
