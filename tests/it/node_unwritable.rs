//! The agent against sample node roots it cannot fully write or read: an unwritable
//! directory or report directory found mid-apply, an unreadable current file. Nothing
//! changes, and the run stops before the hand-off.

use crate::common;

use super::node::no_tagging;
type Snapshot = std::collections::BTreeMap<std::path::PathBuf, Vec<u8>>;
use common::*;

/// A node root where the agent, run as nobody, can read everything and write the sysctl, the
/// lock and each of `writable`, but no other directory; the run's output, the root and the
/// bootstrap.sh recording and its files before the run. `None` (with a note) when this test
/// process is not root and so cannot run the agent as another user.
fn run_as_nobody(
    writable: &[&str],
) -> Option<(
    std::process::Output,
    tempfile::TempDir,
    std::path::PathBuf,
    Snapshot,
)> {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIP: needs root to run the agent as another user");
        return None;
    }
    use std::os::unix::fs::PermissionsExt;
    let root = sample_root("al2-root");
    let r = root.path();
    let argv_file = recording_bootstrap(r);
    let cfg = config_with(r, "c.json", |v| {
        no_tagging(v);
        v["sysctls"] = serde_json::json!({"fs.inotify.max_user_watches": 524288});
    });
    for d in ["etc/sysctl.d", "run/lock", "var/lib/eks-nodeinit"] {
        std::fs::create_dir_all(r.join(d)).unwrap();
    }
    let mode = |p: &std::path::Path, m: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
    };
    mode(r, 0o755);
    mode(&r.join("run/lock"), 0o777);
    for d in writable {
        mode(&r.join(d), 0o777);
    }
    mode(&r.join("proc/sys/fs/inotify/max_user_watches"), 0o666);
    // Outside procfs a live value is replaced atomically, keeping its owner: nobody owns it.
    mode(&r.join("proc/sys/fs/inotify"), 0o777);
    std::os::unix::fs::chown(
        r.join("proc/sys/fs/inotify/max_user_watches"),
        Some(65534),
        Some(65534),
    )
    .unwrap();
    mode(&cfg, 0o644);
    // nobody may not reach the checkout (e.g. under /root): run copies from inside the root.
    let agent = r.join("eks-nodeinit");
    // A hard link where the root shares the build's filesystem: no copy of the binary.
    std::fs::hard_link(bin(), &agent)
        .or_else(|_| std::fs::copy(bin(), &agent).map(drop))
        .unwrap();
    let md = r.join("metadata.json");
    std::fs::copy(example("metadata.json"), &md).unwrap();
    mode(&md, 0o644);
    let before = snapshot(r);
    let out = run(std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .args(agent_argv(&agent))
        .args(["init", "--metadata"])
        .arg(&md)
        .arg("--config")
        .arg(&cfg)
        .arg("--root")
        .arg(r)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .current_dir("/"));
    Some((out, root, argv_file, before))
}

/// The sample root's live `fs.inotify.max_user_watches` as the sample has it.
fn assert_live_untouched(r: &std::path::Path) {
    assert_eq!(
        std::fs::read_to_string(r.join("proc/sys/fs/inotify/max_user_watches")).unwrap(),
        "8192\n",
        "the live value was not touched"
    );
}

#[test]
fn an_unwritable_directory_found_mid_apply_changes_nothing_and_stops_before_the_hand_off() {
    // A write that fails after a clean plan: the agent runs as an unprivileged user (nobody)
    // who can read the node root and write the sysctl, the lock and the report, but not
    // /etc/sysctl.d. Apply is two-phase: every new file is written beside its target first, so
    // the failure surfaces before the live sysctl (or any file) has changed.
    let Some((out, root, argv_file, before)) = run_as_nobody(&["var/lib/eks-nodeinit"]) else {
        return;
    };
    let r = root.path();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("cannot write"), "{}", stderr(&out));
    assert!(!argv_file.exists(), "no hand-off after a failed step");
    let rep = report(r);
    let steps = rep["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1, "{rep:#}");
    assert_eq!(steps[0]["step"], "prepare");
    let outcome = steps[0]["outcome"].as_str().unwrap();
    assert!(
        outcome.starts_with("failed: nothing was changed: cannot write")
            && outcome.contains("etc/sysctl.d"),
        "{rep:#}"
    );
    let mut after = snapshot(r);
    after.remove(std::path::Path::new("var/lib/eks-nodeinit/report.json"));
    assert_eq!(
        after, before,
        "nothing changed but the report (no temp file either)"
    );
    assert_live_untouched(r);
}

#[test]
fn an_unwritable_report_directory_changes_nothing_and_stops_before_the_hand_off() {
    // /var/lib/eks-nodeinit read-only (or full): the report is staged in the first phase with
    // the other files, so the run stops before any file, sysctl or hand-off; a rerun likewise.
    let Some((out, root, argv_file, before)) = run_as_nobody(&["etc/sysctl.d"]) else {
        return;
    };
    let r = root.path();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("nothing was changed: cannot write") && err.contains("report.json"),
        "{err}"
    );
    assert!(!argv_file.exists(), "no hand-off");
    assert_eq!(
        snapshot(r),
        before,
        "nothing changed (no file, no report, no temp file)"
    );
    assert_live_untouched(r);
}

#[test]
fn an_unreadable_current_file_is_a_finding_not_absent() {
    let root = sample_root("al2023-root");
    // Where the logind drop-in should be, something that cannot be read as a file.
    std::fs::create_dir_all(
        root.path()
            .join("etc/systemd/logind.conf.d/99-zz-eks-nodeinit.conf"),
    )
    .unwrap();
    let cfg = config_with(root.path(), "c.json", no_tagging);
    let before = snapshot(root.path());
    let out = init(root.path(), &cfg, &[]);
    assert_eq!(out.status.code(), Some(3));
    let err = stderr(&out);
    assert!(err.contains("logind: cannot read"), "{err}");
    assert!(
        err.contains("will not overwrite a file it cannot read"),
        "{err}"
    );
    assert_eq!(before, snapshot(root.path()));
}
