//! Faults the node holds, found before any change: a bootstrap.sh that cannot run or read the
//! argv, an argv execve would refuse, and hostile filesystems (full, read-only, wrong file
//! types, symbolic links, a lock path that is a directory). Each is a named error, and the
//! node's files are byte-identical afterwards (only the run lock and the report may appear).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use serde_json::{json, Value};

fn no_tagging(v: &mut Value) {
    v["tagging"] = json!({"enabled": false});
}

/// The node's files, without what a refused run may leave: the lock and the report.
fn node_files(root: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut s = snapshot(root);
    s.remove(Path::new("var/lib/eks-nodeinit/report.json"));
    s
}

/// Run `init` on an AL2 sample root changed by `setup`, expecting `code` and nothing changed;
/// gives stderr.
fn refused(
    code: i32,
    edit: impl FnOnce(&mut Value),
    setup: impl FnOnce(&Path),
) -> (tempfile::TempDir, String) {
    let root = sample_root("al2-root");
    let r = root.path();
    recording_bootstrap(r);
    let cfg = config_with(r, "c.json", |v| {
        no_tagging(v);
        edit(v);
    });
    setup(r);
    let before = node_files(r);
    let out = init(r, &cfg, &[]);
    assert_eq!(out.status.code(), Some(code), "{}", stderr(&out));
    assert_eq!(node_files(r), before, "nothing on the node changed");
    assert!(!r.join("etc/eks/argv.txt").exists(), "no hand-off");
    (root, stderr(&out))
}

#[test]
fn a_bootstrap_sh_that_is_not_executable_is_refused_before_any_change() {
    // Before: everything applied, then `EACCES` at the exec, and the report said handed off.
    use std::os::unix::fs::PermissionsExt;
    let (_root, err) = refused(
        3,
        |_| {},
        |r| {
            let p = r.join("etc/eks/bootstrap.sh");
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        },
    );
    assert!(
        err.contains("handoff.bootstrapPath:") && err.contains("is not executable (mode 0644)"),
        "{err}"
    );
}

#[test]
fn an_argv_word_over_128_kib_is_refused_before_any_change() {
    // Before: validate accepted it, everything applied, then `E2BIG` at the exec.
    let (_root, err) = refused(
        3,
        |v| v["kubelet"]["extraArgs"] = json!([format!("--v={}", "9".repeat(131_072))]),
        |_| {},
    );
    assert!(
        err.contains("MAX_ARG_STRLEN") && err.contains("--kubelet-extra-args value"),
        "{err}"
    );
}

#[test]
fn thousands_of_labels_over_the_argument_limit_are_refused_before_any_change() {
    let labels: serde_json::Map<String, Value> = (0..10_000)
        .map(|i| {
            (
                format!("example.com/label-{i:05}"),
                json!("a-value-of-some-length"),
            )
        })
        .collect();
    let (_root, err) = refused(3, |v| v["labels"] = Value::Object(labels), |_| {});
    assert!(err.contains("MAX_ARG_STRLEN"), "{err}");
}

#[test]
fn extra_bootstrap_args_bootstrap_sh_would_misread_are_refused() {
    for (extra, says) in [
        (
            json!(["--use-max-pod", "false"]),
            "did you mean `--use-max-pods`?",
        ),
        (json!(["--use-max-pods"]), "`$2: unbound variable`"),
        (
            json!(["--use-max-pods", "--dns-cluster-ip", "10.100.0.10"]),
            "would take the option `--dns-cluster-ip` as its value",
        ),
        (json!(["--help"]), "print its usage and exit 1"),
    ] {
        let (_root, err) = refused(
            3,
            |v| v["handoff"] = json!({"extraBootstrapArgs": extra}),
            |_| {},
        );
        assert!(
            err.contains("handoff.extraBootstrapArgs[") && err.contains(says),
            "{err}"
        );
    }
}

#[test]
fn an_older_bootstrap_sh_without_the_cidr_flag_gets_the_dns_address() {
    // Before amazon-eks-ami PR #2264 (2025-05) there was no --service-ipv4-cidr: the flag and
    // its value were lost among the positional words. The stand-in has that release's options
    // and fails like the real one on anything it cannot read.
    let root = sample_root("al2-root");
    let r = root.path();
    let options: Vec<&str> = BOOTSTRAP_OPTIONS
        .iter()
        .copied()
        .filter(|o| *o != "--service-ipv4-cidr")
        .collect();
    install_bootstrap(r, &bootstrap_standin(&options, RECORD_ARGV));
    let cfg = config_with(r, "c.json", |v| {
        no_tagging(v);
        v["cluster"]["cidr"] = json!("10.100.0.0/16");
    });
    let out = init(r, &cfg, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let argv = std::fs::read_to_string(r.join("etc/eks/argv.txt")).unwrap();
    let words: Vec<&str> = argv.lines().collect();
    assert!(
        words
            .windows(2)
            .any(|w| w == ["--dns-cluster-ip", "10.100.0.10"]),
        "{argv}"
    );
    assert!(!words.contains(&"--service-ipv4-cidr"), "{argv}");
}

#[test]
fn a_symlinked_kubelet_config_is_refused_and_its_target_left_alone() {
    // Before: the link was replaced by a regular file and its target never patched.
    let target = PathBuf::from("etc/kubernetes/kubelet/real-config.json");
    let (root, err) = refused(
        3,
        |v| v["kubelet"] = json!({"shutdownGracePeriod": "90s"}),
        |r| {
            let link = r.join("etc/kubernetes/kubelet/kubelet-config.json");
            std::fs::rename(&link, r.join(&target)).unwrap();
            std::os::unix::fs::symlink("real-config.json", &link).unwrap();
        },
    );
    assert!(
        err.contains("is a symbolic link to real-config.json"),
        "{err}"
    );
    let link = root
        .path()
        .join("etc/kubernetes/kubelet/kubelet-config.json");
    assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
}

#[test]
fn a_symlinked_drop_in_is_refused() {
    let (_root, err) = refused(
        3,
        |_| {},
        |r| {
            std::fs::create_dir_all(r.join("etc/sysctl.d")).unwrap();
            std::fs::write(r.join("elsewhere.conf"), "x = 1\n").unwrap();
            std::os::unix::fs::symlink(
                "../../elsewhere.conf",
                r.join("etc/sysctl.d/99-zz-eks-nodeinit.conf"),
            )
            .unwrap();
        },
    );
    assert!(
        err.contains("99-zz-eks-nodeinit.conf is a symbolic link to ../../elsewhere.conf"),
        "{err}"
    );
}

#[test]
fn wrong_file_types_are_findings_and_a_fifo_is_never_read() {
    // A FIFO where the logind drop-in goes would block a read forever.
    let (_root, err) = refused(
        3,
        |_| {},
        |r| {
            let d = r.join("etc/systemd/logind.conf.d");
            std::fs::create_dir_all(&d).unwrap();
            nix::unistd::mkfifo(
                &d.join("99-zz-eks-nodeinit.conf"),
                nix::sys::stat::Mode::from_bits_truncate(0o644),
            )
            .unwrap();
            std::fs::create_dir_all(r.join("etc/sysctl.d/99-zz-eks-nodeinit.conf")).unwrap();
        },
    );
    assert!(err.contains("is a FIFO, not a regular file"), "{err}");
    assert!(err.contains("is a directory, not a regular file"), "{err}");
}

#[test]
fn a_lock_path_that_is_a_directory_is_a_named_error() {
    let (_root, err) = refused(
        1,
        |_| {},
        |r| std::fs::create_dir_all(r.join("run/lock/eks-nodeinit.lock")).unwrap(),
    );
    assert!(
        err.contains("cannot take the lock") && err.contains("remove whatever is there"),
        "{err}"
    );
}

/// A tmpfs mounted for one test, unmounted when dropped; `None` without root (or mount).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Option<Tmpfs> {
        if !nix::unistd::geteuid().is_root() {
            return None;
        }
        std::fs::create_dir_all(at).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(at.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Skip without root, but not in CI: there the suite runs as root and must run these.
fn needs_root(what: &str) -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "{what} needs root in CI");
    eprintln!("SKIP {what}: needs root to mount a tmpfs");
    false
}

#[test]
fn a_full_disk_changes_nothing() {
    if !needs_root("a_full_disk_changes_nothing") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let Some(fs) = Tmpfs::mount(&d.path().join("root"), "2m") else {
        panic!("cannot mount a tmpfs as root");
    };
    let r = fs.0.clone();
    copy_tree(&manifest_dir().join("examples/al2-root"), &r);
    recording_bootstrap(&r);
    let cfg = config_with(&r, "c.json", no_tagging);
    // The lock must be takeable: the disk fills after it exists.
    std::fs::create_dir_all(r.join("run/lock")).unwrap();
    std::fs::write(r.join("run/lock/eks-nodeinit.lock"), "").unwrap();
    let fill = std::fs::File::create(r.join("filler")).unwrap();
    let mut fill = std::io::BufWriter::new(fill);
    let chunk = vec![0u8; 4096];
    while std::io::Write::write_all(&mut fill, &chunk).is_ok() {}
    drop(fill);
    let before = node_files(&r);
    let out = init(&r, &cfg, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("nothing was changed") && err.contains("No space left on device"),
        "{err}"
    );
    assert_eq!(node_files(&r), before, "nothing changed, no temp file left");
    assert_eq!(
        std::fs::read_to_string(r.join("proc/sys/fs/inotify/max_user_watches")).unwrap(),
        "8192\n"
    );
}

#[test]
fn a_read_only_etc_changes_nothing() {
    if !needs_root("a_read_only_etc_changes_nothing") {
        return;
    }
    let root = sample_root("al2-root");
    let r = root.path();
    recording_bootstrap(r);
    let cfg = config_with(r, "c.json", no_tagging);
    // /etc on a file system mounted read-only over the root's own, with the same files.
    let saved = tempfile::tempdir().unwrap();
    copy_tree(&r.join("etc"), saved.path());
    let Some(_etc) = Tmpfs::mount(&r.join("etc"), "8m") else {
        panic!("cannot mount a tmpfs as root");
    };
    copy_tree(saved.path(), &r.join("etc"));
    let remount = Command::new("mount")
        .args(["-o", "remount,ro"])
        .arg(r.join("etc"))
        .status()
        .unwrap();
    assert!(remount.success());
    let before = node_files(r);
    let out = init(r, &cfg, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("nothing was changed") && err.contains("Read-only file system"),
        "{err}"
    );
    assert_eq!(node_files(r), before);
    assert_eq!(
        std::fs::read_to_string(r.join("proc/sys/fs/inotify/max_user_watches")).unwrap(),
        "8192\n",
        "the live sysctl was not set"
    );
}

#[test]
fn a_failed_exec_is_recorded_and_the_next_run_hands_off() {
    // Before: the report said "exec bootstrap.sh" with no failed step, and the per-boot marker
    // kept every later run from handing off.
    let root = sample_root("al2-root");
    let r = root.path();
    let script = bootstrap_standin(BOOTSTRAP_OPTIONS, RECORD_ARGV);
    install_bootstrap(r, &script.replacen("#!/bin/bash", "#!/nonexistent/bash", 1));
    let cfg = config_with(r, "c.json", no_tagging);
    let out = init(r, &cfg, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("cannot exec"), "{}", stderr(&out));
    let rep = report(r);
    assert_eq!(rep["handoff"], "", "{rep:#}");
    let last = rep["steps"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["step"], "hand-off");
    assert!(last["outcome"]
        .as_str()
        .unwrap()
        .starts_with("failed: cannot exec"));
    assert!(!r.join("run/eks-nodeinit/bootstrap-exec").exists());
    // Fixed, the next run hands off (and changes nothing else: it was all applied).
    install_bootstrap(r, &script);
    let out = init(r, &cfg, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(r.join("etc/eks/argv.txt").exists());
}
