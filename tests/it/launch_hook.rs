//! The Auto Scaling launch lifecycle hook (`lifecycle.completeLaunchHook`) against moto's Auto
//! Scaling (a real group with a launch hook and its instance; moto lacks the action itself, which
//! tests/moto/lifecycle_actions.py adds, checked against moto's model and logged per call) and
//! a real dbus-daemon carrying a stand-in for systemd's view of kubelet.service: the run leaves
//! a job; `complete-hook` waits for kubelet to be active in service, then completes the hook
//! exactly once with CONTINUE; in a warm pool it completes it once the node is prepared.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::dbus::{serve_unit_states, start_bus, Bus};
use common::{cmd, run, sample_root, stderr, stdout, Moto};
use eks_nodeinit::instance::lifecycle::{
    CompleteAfter, LaunchHookJob, LAUNCH_HOOK_DONE, LAUNCH_HOOK_JOB,
};
use eks_nodeinit::plan::after::{AfterJob, AFTER_JOB};
use serde_json::{json, Value};

const HOOK: &str = "eks-node-ready";
const GROUP: &str = "asg-nodes";
const REGION: &str = "us-east-1";

/// moto with CompleteLifecycleAction, a group of one instance with a launch hook `HOOK`, and the
/// file each completion is logged to: (moto, instance id, log).
struct Asg {
    moto: Moto,
    instance_id: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

fn asg() -> Option<Asg> {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("completed.jsonl");
    let script = common::manifest_dir().join("tests/moto/lifecycle_actions.py");
    let moto = common::start_moto_as(
        &[script.to_str().unwrap()],
        &[("MOTO_LIFECYCLE_LOG", log.to_str().unwrap())],
    )?;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let instance_id = rt.block_on(group_with_hook(&moto.url));
    Some(Asg {
        moto,
        instance_id,
        log,
        _dir: dir,
    })
}

async fn group_with_hook(url: &str) -> String {
    let conf = common::moto_sdk_config(url, REGION).await;
    let a = common::group_with_launch_hook(&conf, GROUP, HOOK, "us-east-1a", 1).await;
    let out = a.describe_auto_scaling_instances().send().await.unwrap();
    out.auto_scaling_instances()[0]
        .instance_id()
        .unwrap()
        .to_string()
}

/// Every completion moto accepted.
fn completed(a: &Asg) -> Vec<Value> {
    std::fs::read_to_string(&a.log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// An AL2023 sample node (no EC2 tagging here) with the hook configured, and its metadata file
/// in `state`, naming the group or not.
fn node(a: &Asg, state: &str, group: bool) -> (tempfile::TempDir, PathBuf, PathBuf) {
    node_of("al2023-root", a, state, group)
}

/// [`node`] from the sample root `sample`.
fn node_of(
    sample: &str,
    a: &Asg,
    state: &str,
    group: bool,
) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let root = sample_root(sample);
    let cfg = common::config_with(root.path(), "config.json", |v| {
        v["tagging"] = json!({"enabled": false});
        v["lifecycle"] = json!({"completeLaunchHook": HOOK});
        // The hook alone, completed once kubelet is active: the proof before it (on by default)
        // has its own suite against a real API server (tests/it/control_plane/join.rs).
        v["verify"] = json!({"join": "off"});
    });
    let mut md = json!({
        "instanceId": a.instance_id, "privateIpv4": "10.0.1.2", "instanceType": "m6i.large",
        "region": REGION, "availabilityZone": "us-east-1a", "targetLifecycleState": state
    });
    if group {
        md["autoscalingGroupName"] = json!(GROUP);
    }
    let mdp = root.path().join("md.json");
    std::fs::write(&mdp, md.to_string()).unwrap();
    (root, cfg, mdp)
}

/// A private bus whose systemd stand-in reports kubelet.service in the state the cell holds.
fn kubelet_bus(state: &str) -> Option<(Bus, Arc<Mutex<String>>)> {
    let bus = start_bus()?;
    let cell = Arc::new(Mutex::new(state.to_string()));
    serve_unit_states(&bus.address, &[("kubelet.service", cell.clone())]);
    Some((bus, cell))
}

fn complete_hook(a: &Asg, root: &Path, bus: &str, extra: &[&str]) -> Output {
    run(cmd()
        .env("AWS_ENDPOINT_URL_AUTO_SCALING", &a.moto.url)
        .args(["complete-hook", "--root"])
        .arg(root)
        .args(["--system-bus-address", bus, "--deadline-sec", "20"])
        .args(extra))
}

fn job(root: &Path) -> LaunchHookJob {
    let text = std::fs::read_to_string(root.join(&LAUNCH_HOOK_JOB[1..])).unwrap();
    LaunchHookJob::from_text(&text).unwrap()
}

#[test]
fn in_service_the_hook_is_completed_once_kubelet_is_active_and_only_once() {
    let Some(a) = asg() else { return };
    let Some((bus, kubelet)) = kubelet_bus("activating") else {
        return;
    };
    let (root, cfg, md) = node(&a, "InService", true);
    let r = root.path();
    let out = common::init_with(r, &cfg, &md, &[]);
    assert!(out.status.success());
    assert!(
        stdout(&out).contains("completes `eks-node-ready` of asg-nodes with CONTINUE once this run has handed off and kubelet is active"),
        "{}",
        stdout(&out)
    );
    let j = job(r);
    assert_eq!(
        (j.after, j.group.as_deref()),
        (CompleteAfter::Kubelet, Some(GROUP))
    );

    // kubelet becomes active a second into the wait: moto's log, read just before, is empty.
    let log = a.log.clone();
    let flip = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1200));
        let before = std::fs::read_to_string(&log).unwrap_or_default();
        *kubelet.lock().unwrap() = "active".into();
        before
    });
    let out = complete_hook(&a, r, &bus.address, &[]);
    assert_eq!(
        flip.join().unwrap(),
        "",
        "a call while kubelet was activating"
    );
    assert!(out.status.success());
    assert_eq!(
        completed(&a),
        vec![
            json!({"AutoScalingGroupName": GROUP, "LifecycleHookName": HOOK,
                    "InstanceId": a.instance_id, "LifecycleActionResult": "CONTINUE",
                    "Host": a.moto.url.trim_start_matches("http://")})
        ]
    );
    let done = std::fs::read_to_string(r.join(&LAUNCH_HOOK_DONE[1..])).unwrap();
    assert_eq!(LaunchHookJob::from_text(&done).unwrap(), j);
    // With the proof off, `status` says no verdict comes and passes (it failed for ever).
    let st = run(cmd().args(["status", "--root"]).arg(r));
    assert!(st.status.success(), "{}{}", stdout(&st), stderr(&st));
    assert!(
        stdout(&st).contains("verdict: none: the join is not proven (verify.join is off)"),
        "{}",
        stdout(&st)
    );

    // Again in this boot: no call; a rerun of the agent plans nothing for the hook.
    assert!(complete_hook(&a, r, &bus.address, &[]).status.success());
    assert_eq!(completed(&a).len(), 1);
    let out = common::init_with(r, &cfg, &md, &["--dry-run"]);
    assert!(
        !stdout(&out).contains("launch-hook job"),
        "{}",
        stdout(&out)
    );
}

/// The steps after the hand-off run once kubelet is active, before the hook is completed. One
/// that fails is named, and the unit fails; the hook still gets CONTINUE, since a node not as
/// planned is a finding, not a cause a replacement escapes. The AL2 node's step is the pause
/// image pinned by the root's agent (this build), which finds no containerd config here:
/// bootstrap.sh's stand-in writes none.
#[test]
fn a_failed_step_after_the_hand_off_is_named_and_the_hook_still_completed() {
    let Some(a) = asg() else { return };
    let Some((bus, _kubelet)) = kubelet_bus("active") else {
        return;
    };
    let (root, cfg, md) = node_of("al2-root", &a, "InService", true);
    let r = root.path();
    std::fs::create_dir_all(r.join("usr/bin")).unwrap();
    std::os::unix::fs::symlink(common::bin(), r.join("usr/bin/eks-nodeinit")).unwrap();
    let out = common::init_with(r, &cfg, &md, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(r.join(&AFTER_JOB[1..])).unwrap();
    let after = AfterJob::from_text(&text).unwrap();
    assert_eq!(after.steps.len(), 1);
    let eks_nodeinit::plan::step::After::Run(pin) = &after.steps[0] else {
        panic!("{after:?}")
    };
    assert_eq!(pin.argv[1..3], ["pin-sandbox-image", "--root"]);

    let out = complete_hook(&a, r, &bus.address, &[]);
    assert!(!out.status.success());
    let e = stderr(&out);
    assert!(
        e.contains("after the hand-off, the sandbox image is not in containerd's store, pinned (")
            && e.contains("etc/containerd/config.toml is missing"),
        "{e}"
    );
    assert_eq!(
        completed(&a),
        vec![
            json!({"AutoScalingGroupName": GROUP, "LifecycleHookName": HOOK,
                    "InstanceId": a.instance_id, "LifecycleActionResult": "CONTINUE",
                    "Host": a.moto.url.trim_start_matches("http://")})
        ]
    );
    let rep = common::report(r);
    let said =
        common::report_outcome(&rep, "after the hand-off: the sandbox image").unwrap_or_default();
    assert!(
        said.as_str().is_some_and(
            |s| s.starts_with("failed: the sandbox image is not in containerd's store, pinned")
        ),
        "{rep:#}"
    );
    let status = run(cmd().args(["status", "--root"]).arg(r));
    assert!(
        stdout(&status).contains(
            "after the hand-off: the sandbox image in containerd's store, pinned: failed: "
        ),
        "{}",
        stdout(&status)
    );
    // A rerun of the agent in this boot plans nothing for the job, which stays for the unit.
    let again = common::init_with(r, &cfg, &md, &["--dry-run"]);
    assert!(
        !stdout(&again).contains("after-handoff.json"),
        "{}",
        stdout(&again)
    );
}

#[test]
fn a_kubelet_that_never_becomes_active_completes_nothing_and_fails() {
    let Some(a) = asg() else { return };
    let Some((bus, _kubelet)) = kubelet_bus("failed") else {
        return;
    };
    let (root, cfg, md) = node(&a, "InService", true);
    let r = root.path();
    assert!(common::init_with(r, &cfg, &md, &[]).status.success());
    let out = complete_hook(&a, r, &bus.address, &["--kubelet-wait-sec", "1"]);
    assert!(!out.status.success());
    let e = stderr(&out);
    assert!(e.contains("kubelet.service is failed"), "{e}");
    assert!(e.contains("default result"), "{e}");
    assert!(completed(&a).is_empty());
    assert!(!r.join(&LAUNCH_HOOK_DONE[1..]).exists());
}

#[test]
fn warmed_the_hook_is_completed_after_the_prep_without_kubelet_and_the_group_asked_when_unknown() {
    let Some(a) = asg() else { return };
    let (root, cfg, md) = node(&a, "Warmed:Stopped", false);
    let r = root.path();
    let out = common::init_with(r, &cfg, &md, &[]);
    assert!(out.status.success());
    assert!(stdout(&out).contains("hand-off held"), "{}", stdout(&out));
    let j = job(r);
    assert_eq!((j.after, j.group.as_deref()), (CompleteAfter::Prep, None));
    // No bus at all: a warmed node's hook does not wait for kubelet.
    let out = complete_hook(&a, r, "unix:path=/nonexistent/bus", &[]);
    assert!(out.status.success());
    let e = stderr(&out);
    assert!(
        e.contains("complete_lifecycle_action=1 describe_auto_scaling_instances=1"),
        "{e}"
    );
    let calls = completed(&a);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["AutoScalingGroupName"], GROUP);

    // The done record gone, the same job again: Auto Scaling has no launch waiting any more
    // (ValidationError), which is nothing left to do, not a failure.
    std::fs::remove_file(r.join(&LAUNCH_HOOK_DONE[1..])).unwrap();
    let out = complete_hook(&a, r, "unix:path=/nonexistent/bus", &[]);
    assert!(out.status.success());
    assert!(
        stderr(&out).contains("no launch waiting"),
        "{}",
        stderr(&out)
    );
    assert_eq!(completed(&a).len(), 1);
}

#[test]
fn without_a_job_it_does_nothing_and_a_bad_job_says_what_to_do() {
    let Some(a) = asg() else { return };
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    let out = complete_hook(&a, r, "unix:path=/nonexistent/bus", &[]);
    assert!(out.status.success());
    let p = r.join(&LAUNCH_HOOK_JOB[1..]);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, "{\"hook\":\"h\"}\n").unwrap();
    let out = complete_hook(&a, r, "unix:path=/nonexistent/bus", &[]);
    assert!(!out.status.success());
    let e = stderr(&out);
    assert!(
        e.contains("launch-hook.json") && e.contains("systemctl restart eks-nodeinit"),
        "{e}"
    );
    assert!(completed(&a).is_empty());
}

/// Whoever ran the agent (the packaged unit, or a user-data script in cloud-final, which does not
/// pull the hook unit in), the run that leaves a job queues the hook unit's start over D-Bus,
/// once: a rerun with the job in place queues nothing.
#[test]
fn the_run_that_leaves_a_job_starts_the_hook_unit_once() {
    let Some(a) = asg() else { return };
    let Some(bus) = start_bus() else { return };
    let calls = common::dbus::serve_manager(&bus.address, &[], &[]);
    let (root, cfg, md) = node(&a, "InService", true);
    let r = root.path();
    let with_bus = ["--system-bus-address", bus.address.as_str()];
    let out = common::init_with(r, &cfg, &md, &with_bus);
    assert!(out.status.success());
    assert!(
        stdout(&out).contains("start eks-nodeinit-launch-hook.service over D-Bus"),
        "{}",
        stdout(&out)
    );
    // (The run also restarts logind for its drop-in; only the hook unit's calls count here.)
    let hook_calls = || -> Vec<(String, String)> {
        let c = calls.lock().unwrap();
        c.iter()
            .filter(|(_, unit, _)| unit == "eks-nodeinit-launch-hook.service")
            .map(|(m, _, mode)| (m.clone(), mode.clone()))
            .collect()
    };
    let want = vec![("StartUnit".to_string(), "replace".to_string())];
    assert_eq!(hook_calls(), want);
    assert!(common::init_with(r, &cfg, &md, &with_bus).status.success());
    assert_eq!(hook_calls(), want, "a rerun queues nothing");
    // No bus: the job is written all the same, and the report says the start was skipped.
    let (root, cfg, md) = node(&a, "InService", true);
    let out = common::init_with(root.path(), &cfg, &md, &[]);
    assert!(out.status.success());
    assert!(root.path().join(&LAUNCH_HOOK_JOB[1..]).exists());
    let rep = common::report(root.path());
    assert!(
        rep["warnings"]
            .to_string()
            .contains("eks-nodeinit-launch-hook.service not started"),
        "{rep:#}"
    );
}
