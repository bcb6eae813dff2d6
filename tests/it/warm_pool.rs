//! Auto Scaling warm pools: the target lifecycle state read from the strict IMDSv2 server, the
//! hand-off held while the instance is warmed to be stopped (no bootstrap.sh on AL2; the
//! NodeConfig drop-in complete but nodeadm-run held on AL2023), no first-boot marker in that
//! boot, and exactly one hand-off in the boot after the start into service.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::dbus::{serve_manager, start_bus};
use common::imds_server::ImdsServer;
use common::{cmd, counting_bootstrap, run, sample_root, stdout};
use eks_nodeinit::instance::lifecycle::{Hold, HOLD_MARKER};
use eks_nodeinit::plan::aspects::warm_pool::NODEADM_RUN;
use serde_json::{json, Value};

const STATE: &str = "autoscaling/target-lifecycle-state";
const DONE: &str = "var/lib/eks-nodeinit/done";

/// The scaler example without tagging (no EC2 here), written beside the root.
fn config(dir: &Path, edit: impl FnOnce(&mut Value)) -> PathBuf {
    common::config_with(dir, "config.json", |v| {
        v["tagging"] = json!({"enabled": false});
        // The hold alone: the proof's job the run in service adds is tests/it/join.rs's.
        v["verify"] = json!({"join": "off"});
        edit(v);
    })
}

/// An AL2 sample node whose bootstrap.sh counts its calls, and the config (with `edit`) beside
/// it: the root, the call log, the config.
fn al2_node(edit: impl FnOnce(&mut Value)) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let root = sample_root("al2-root");
    let log = counting_bootstrap(root.path(), "");
    let cfg = config(root.path(), edit);
    (root, log, cfg)
}

fn imds(state: Option<&str>) -> ImdsServer {
    let s = ImdsServer::start();
    set_state(&s, state);
    s
}

fn set_state(s: &ImdsServer, state: Option<&str>) {
    let mut st = s.state.lock().unwrap();
    match state {
        Some(v) => st.data.insert(STATE.into(), v.into()),
        None => st.data.remove(STATE),
    };
}

fn init(s: &ImdsServer, root: &Path, cfg: &Path, extra: &[&str]) -> Output {
    run(cmd()
        .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", s.url())
        .arg("init")
        .args(extra)
        .arg("--config")
        .arg(cfg)
        .arg("--root")
        .arg(root))
}

fn mark_done(root: &Path) -> Output {
    run(cmd().args(["mark-done", "--root"]).arg(root))
}

/// A reboot as the node sees it: /run is a tmpfs.
fn reboot(root: &Path) {
    let _ = std::fs::remove_dir_all(root.join("run"));
}

fn calls(log: &Path) -> usize {
    std::fs::read_to_string(log).map_or(0, |t| t.lines().count())
}

fn lifecycle_gets(s: &ImdsServer) -> usize {
    let want = format!("GET /latest/meta-data/{STATE}");
    s.state
        .lock()
        .unwrap()
        .paths
        .iter()
        .filter(|p| **p == want)
        .count()
}

#[test]
fn al2_warmed_stopped_prepares_without_bootstrap_then_the_boot_in_service_hands_off_once() {
    let (root, log, cfg) = al2_node(|_| {});
    let r = root.path();
    let kubelet = r.join("etc/kubernetes/kubelet/kubelet-config.json");
    let before = std::fs::read(&kubelet).unwrap();
    let s = imds(Some("Warmed:Stopped"));

    // Boot 1, warmed: every node-local step, no hand-off, no first-boot marker.
    let out = init(&s, r, &cfg, &[]);
    assert!(out.status.success());
    let o = stdout(&out);
    assert!(
        o.contains("target lifecycle state (Auto Scaling): Warmed:Stopped"),
        "{o}"
    );
    assert!(
        o.contains("hand-off held: target lifecycle state Warmed:Stopped"),
        "{o}"
    );
    assert!(!o.contains("hand-off: exec"), "{o}");
    assert_eq!(calls(&log), 0, "bootstrap.sh must not run while warmed");
    assert_ne!(
        std::fs::read(&kubelet).unwrap(),
        before,
        "the kubelet config is prepared"
    );
    let marker = r.join(&HOLD_MARKER[1..]);
    let hold = Hold::from_text(&std::fs::read_to_string(&marker).unwrap()).unwrap();
    assert_eq!(hold.state, "Warmed:Stopped");
    let rep = common::report(r);
    assert!(
        rep["handoff"]
            .as_str()
            .unwrap()
            .starts_with("held: Warmed:Stopped"),
        "{rep:#}"
    );
    assert!(mark_done(r).status.success());
    assert!(
        !r.join(DONE).exists(),
        "the boot in service must run the agent again"
    );

    // A rerun in the same boot changes nothing and still holds.
    let again = stdout(&init(&s, r, &cfg, &[]));
    assert!(again.contains("no changes"), "{again}");
    assert!(again.contains("hand-off held"), "{again}");
    assert_eq!(calls(&log), 0);

    // Boot 2, started into service: exactly one hand-off, nothing else to change.
    reboot(r);
    set_state(&s, Some("InService"));
    let out = init(&s, r, &cfg, &[]);
    assert!(out.status.success());
    let o = stdout(&out);
    assert!(o.contains("no changes"), "{o}");
    assert!(o.contains("hand-off: exec"), "{o}");
    assert_eq!(calls(&log), 1, "exactly one hand-off");
    assert!(mark_done(r).status.success());
    assert!(r.join(DONE).exists());
    assert_eq!(lifecycle_gets(&s), 3, "one read of the state per run");
}

#[test]
fn al2023_warmed_stopped_writes_the_complete_dropin_and_holds_nodeadm_run() {
    let root = sample_root("al2023-root");
    let r = root.path();
    let cfg = config(root.path(), |_| {});
    let s = imds(Some("Warmed:Stopped"));
    let out = init(&s, r, &cfg, &["--output", "json"]);
    assert!(out.status.success());
    let plan: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(plan["instance"]["targetLifecycleState"], "Warmed:Stopped");
    let kinds = common::step_kinds(&plan);
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("handoff:hold"),
        "{kinds:?}"
    );
    assert!(!kinds.iter().any(|k| k == "handoff:dropin"), "{kinds:?}");
    let hold = plan["steps"].as_array().unwrap().last().unwrap();
    assert_eq!(hold["family"], "al2023");
    assert_eq!(hold["marker"], HOLD_MARKER);
    // The drop-in is complete: the boot in service only has to run nodeadm.
    let dropin = r.join(&eks_nodeinit::plan::handoff::al2023::DROPIN[1..]);
    let nc: Value = serde_json::from_str(&std::fs::read_to_string(&dropin).unwrap()).unwrap();
    assert_eq!(nc["spec"]["cluster"]["name"], "prod-eu");
    assert!(r.join(&HOLD_MARKER[1..]).exists());
    assert!(mark_done(r).status.success());
    assert!(!r.join(DONE).exists());
    // The packaged condition names the marker the agent writes.
    let unit = std::fs::read_to_string(
        common::manifest_dir().join("systemd/nodeadm-run.service.d/50-eks-nodeinit.conf"),
    )
    .unwrap();
    assert!(
        unit.contains(&format!("\nConditionPathExists=!{HOLD_MARKER}\n")),
        "{unit}"
    );

    reboot(r);
    set_state(&s, Some("InService"));
    let out = init(&s, r, &cfg, &[]);
    let o = stdout(&out);
    assert!(o.contains("no changes"), "{o}");
    assert!(o.contains("hand-off: NodeConfig drop-in"), "{o}");
    assert!(!r.join(&HOLD_MARKER[1..]).exists());
}

#[test]
fn every_warmed_state_holds_and_the_hold_turned_off_hands_off_now_with_a_warning() {
    for (state, off) in [
        ("Warmed:Running", false),
        ("Warmed:Hibernated", false),
        ("Warmed:Stopped", true),
    ] {
        let (root, log, cfg) = al2_node(|v| {
            if off {
                v["lifecycle"] = json!({"warmPool": "off"});
            }
        });
        let r = root.path();
        let out = init(&imds(Some(state)), r, &cfg, &[]);
        assert!(out.status.success(), "{state}");
        assert_eq!(calls(&log), usize::from(off), "{state}");
        assert_eq!(stdout(&out).contains("joins now"), off, "{state}");
        assert_eq!(r.join(&HOLD_MARKER[1..]).exists(), !off, "{state}");
    }
}

/// `await-service` against the root, the IMDS server (through the marker's endpoint, the
/// environment's here) and the bus.
fn await_service(s: &ImdsServer, root: &Path, bus: &str) -> std::process::Child {
    cmd()
        .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", s.url())
        .args([
            "await-service",
            "--interval-ms",
            "100",
            "--system-bus-address",
            bus,
            "--root",
        ])
        .arg(root)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn warmed_running_waits_for_in_service_then_runs_the_agents_unit_again_once() {
    let Some(bus) = start_bus() else { return };
    let calls = serve_manager(&bus.address, &[], &[]);
    let root = sample_root("al2023-root");
    let r = root.path();
    let cfg = config(r, |_| {});
    let s = imds(Some("Warmed:Running"));
    assert!(init(&s, r, &cfg, &[]).status.success());
    let waiter = await_service(&s, r, &bus.address);
    // It polls while warmed and asks systemd nothing.
    // (the held run's read, then three of the waiter's; a waiter that never polls fails here
    // instead of hanging the suite)
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while lifecycle_gets(&s) < 4 {
        assert!(
            std::time::Instant::now() < deadline,
            "the waiter does not poll"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(calls.lock().unwrap().is_empty());
    set_state(&s, Some("InService"));
    let out = run_to_end(waiter);
    assert!(out.status.success());
    assert!(
        common::stderr(&out).contains("left the warm pool"),
        "{}",
        common::stderr(&out)
    );
    let c = calls.lock().unwrap().clone();
    assert_eq!(
        c,
        vec![(
            "RestartUnit".into(),
            "eks-nodeinit.service".into(),
            "replace".into()
        )]
    );
    // Nothing held (a boot after a stop and start): it returns at once, reading nothing.
    reboot(r);
    let gets = lifecycle_gets(&s);
    let out = run_to_end(await_service(&s, r, &bus.address));
    assert!(out.status.success());
    assert_eq!(lifecycle_gets(&s), gets);
    assert_eq!(calls.lock().unwrap().len(), 1);
}

#[test]
fn a_waiter_whose_restart_systemd_refuses_fails_and_says_restart() {
    let Some(bus) = start_bus() else { return };
    let calls = serve_manager(&bus.address, &["eks-nodeinit.service"], &[]);
    let (root, s, _) = held_then_in_service();
    let out = run_to_end(await_service(&s, root.path(), &bus.address));
    assert!(!out.status.success());
    let e = common::stderr(&out);
    assert!(
        e.contains("systemd refused to restart eks-nodeinit.service"),
        "{e}"
    );
    assert_eq!(calls.lock().unwrap().len(), 1);
}

fn run_to_end(child: std::process::Child) -> Output {
    let out = child.wait_with_output().unwrap();
    eprintln!("--- stderr\n{}", common::stderr(&out));
    out
}

/// An AL2023 node whose run held the hand-off at `Warmed:Running`, now in service: the root,
/// the IMDS server and the config.
fn held_then_in_service() -> (tempfile::TempDir, ImdsServer, PathBuf) {
    let root = sample_root("al2023-root");
    let cfg = config(root.path(), |_| {});
    let s = imds(Some("Warmed:Running"));
    assert!(init(&s, root.path(), &cfg, &[]).status.success());
    assert!(root.path().join(&HOLD_MARKER[1..]).exists());
    set_state(&s, Some("InService"));
    (root, s, cfg)
}

#[test]
fn al2023_in_service_after_a_held_run_releases_the_hold_and_starts_nodeadm_run() {
    let Some(bus) = start_bus() else { return };
    // The waiter saw InService and systemd runs the agent's unit again.
    let (root, s, cfg) = held_then_in_service();
    let r = root.path();
    // nodeadm-run.service carries the package's condition: started while the marker is still
    // there, systemd would skip it.
    let marker = r.join(&HOLD_MARKER[1..]);
    let calls = serve_manager(&bus.address, &[], &[(NODEADM_RUN, &marker)]);
    let out = init(&s, r, &cfg, &["--system-bus-address", &bus.address]);
    assert!(out.status.success());
    let o = stdout(&out);
    assert!(o.contains("release the warm-pool hold"), "{o}");
    assert!(o.contains("hand-off: NodeConfig drop-in"), "{o}");
    assert!(!r.join(&HOLD_MARKER[1..]).exists());
    assert_eq!(
        calls.lock().unwrap().clone(),
        vec![
            // The gate first (nodeadm's check of the merge): systemd orders the two jobs.
            (
                "StartUnit".into(),
                "eks-nodeinit-gate.service".into(),
                "replace".into()
            ),
            (
                "StartUnit".into(),
                "nodeadm-run.service".into(),
                "replace".into()
            )
        ]
    );
    assert!(mark_done(r).status.success());
    assert!(r.join(DONE).exists());
    // Released: a rerun has nothing to do.
    let again = stdout(&init(&s, r, &cfg, &["--system-bus-address", &bus.address]));
    assert!(again.contains("no changes"), "{again}");
    assert_eq!(calls.lock().unwrap().len(), 2);
}

#[test]
fn a_held_unit_that_cannot_be_started_fails_the_run_and_says_how() {
    let Some(bus) = start_bus() else { return };
    let calls = serve_manager(&bus.address, &[NODEADM_RUN], &[]);
    let (root, s, cfg) = held_then_in_service();
    let r = root.path();
    let out = init(&s, r, &cfg, &["--system-bus-address", &bus.address]);
    assert!(!out.status.success());
    let e = common::stderr(&out);
    assert!(e.contains("nodeadm-run.service"), "{e}");
    assert_eq!(calls.lock().unwrap().len(), 2, "the gate, then nodeadm-run");
    // The marker is back, so a rerun releases again: never a silent non-join. Without a bus to
    // ask, the same failure, saying what to run.
    assert!(r.join(&HOLD_MARKER[1..]).exists());
    let out = init(&s, r, &cfg, &[]);
    assert!(!out.status.success());
    let e = common::stderr(&out);
    assert!(e.contains("systemctl start nodeadm-run.service"), "{e}");
    assert!(r.join(&HOLD_MARKER[1..]).exists());
}

#[test]
fn al2_in_service_after_a_held_run_releases_the_hold_and_hands_off_once() {
    let (root, log, cfg) = al2_node(|_| {});
    let r = root.path();
    let s = imds(Some("Warmed:Running"));
    assert!(init(&s, r, &cfg, &[]).status.success());
    assert_eq!(calls(&log), 0);
    set_state(&s, Some("InService"));
    let o = stdout(&init(&s, r, &cfg, &[]));
    assert!(o.contains("release the warm-pool hold"), "{o}");
    assert!(!o.contains("start nodeadm-run"), "{o}");
    assert_eq!(calls(&log), 1);
    assert!(!r.join(&HOLD_MARKER[1..]).exists());
    assert!(mark_done(r).status.success());
    assert!(r.join(DONE).exists());
}

#[test]
fn outside_an_auto_scaling_group_nothing_changes() {
    let (root, log, cfg) = al2_node(|_| {});
    let r = root.path();
    let s = imds(None);
    let out = init(&s, r, &cfg, &[]);
    assert!(out.status.success());
    let o = stdout(&out);
    assert!(!o.contains("target lifecycle state"), "{o}");
    assert!(!o.contains("hand-off held"), "{o}");
    assert_eq!(calls(&log), 1);
    assert_eq!(lifecycle_gets(&s), 1);
}

/// A state the agent does not know (a new one, or bytes that are no state) is taken as not in
/// service: the node is prepared, never handed off, with a warning; the hand-off comes at
/// InService.
#[test]
fn an_unknown_state_prepares_holds_and_warns_and_in_service_hands_off_once() {
    for odd in ["Pending:Proceed", "Warmed Stopped\u{1b}[2J"] {
        let (root, log, cfg) = al2_node(|_| {});
        let r = root.path();
        let s = imds(Some(odd));
        let out = init(&s, r, &cfg, &[]);
        assert!(out.status.success(), "{}", common::stderr(&out));
        let all = format!("{}{}", stdout(&out), common::stderr(&out));
        assert!(all.contains("is not one the agent knows"), "{all}");
        assert!(!all.contains('\u{1b}'), "escaped: {all}");
        assert!(stdout(&out).contains("hand-off held"), "{}", stdout(&out));
        assert_eq!(
            calls(&log),
            0,
            "{odd}: never a hand-off into an unknown state"
        );
        assert!(r.join(&HOLD_MARKER[1..]).exists());
        reboot(r);
        set_state(&s, Some("InService"));
        assert!(init(&s, r, &cfg, &[]).status.success());
        assert_eq!(calls(&log), 1, "{odd}");
    }
}

#[test]
fn mark_done_that_cannot_tell_whether_the_boot_held_fails_and_writes_nothing() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    // The marker's path is a directory: it cannot be read.
    std::fs::create_dir_all(r.join(&HOLD_MARKER[1..])).unwrap();
    let out = mark_done(r);
    assert!(!out.status.success());
    assert!(common::stderr(&out).contains("handoff-held"));
    assert!(!r.join(DONE).exists());
    // Without a marker it writes the first-boot marker, and again is harmless.
    std::fs::remove_dir_all(r.join("run")).unwrap();
    for _ in 0..2 {
        assert!(mark_done(r).status.success());
        assert!(r.join(DONE).is_file());
    }
}

#[test]
fn a_metadata_file_carries_the_state_for_a_dry_run() {
    let root = sample_root("al2-root");
    let r = root.path();
    let cfg = config(r, |_| {});
    let md_text = std::fs::read_to_string(common::example("metadata.json")).unwrap();
    let mut md: Value = serde_json::from_str(&md_text).unwrap();
    md["targetLifecycleState"] = json!("Warmed:Stopped");
    let mdp = r.join("md.json");
    std::fs::write(&mdp, md.to_string()).unwrap();
    let out = common::init_with(r, &cfg, &mdp, &["--dry-run"]);
    assert!(out.status.success());
    assert!(stdout(&out).contains("hand-off held"));
    // As from IMDS: a value that is no state holds, with a warning that shows it escaped.
    md["targetLifecycleState"] = json!("Warmed\nStopped");
    std::fs::write(&mdp, md.to_string()).unwrap();
    let out = common::init_with(r, &cfg, &mdp, &["--dry-run"]);
    assert!(out.status.success());
    assert!(stdout(&out).contains("hand-off held"));
    let all = format!("{}{}", stdout(&out), common::stderr(&out));
    assert!(
        all.contains("`Warmed\\nStopped` is not one the agent knows"),
        "{all}"
    );
}
