//! A Node Ready whose check before the kubelet found a fault of the instance's own (a GPU
//! missing): `unfit`, judged with the fleet's guard. Against moto as in `retire/`: two like
//! peers joined (they passed the same check), the node retires with the cause on its console
//! and its startup condition `False`; no like peer joined (a wrong expectation every instance
//! meets), it is kept as a `mismatch`, never retired. A check before the kubelet that failed for
//! the image's cause is a `mismatch` too, and this node is not counted as joined.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use super::retire::{console, failed_proof, join_of, stopped, world, Api, Run, World};

/// The run's report: its gate check of the accelerators failed with `cause` (the instance's
/// own fault or not), naming the condition.
fn gate_failed(root: &Path, cause: &str, own: bool) {
    let result = json!({
        "check": "accelerators of p5.48xlarge",
        "result": "failed",
        "cause": cause,
        "detail": "7 NVIDIA GPU(s) on PCI of the 8 the instance type carries",
        "todo": "a replacement gets other GPUs",
        "ms": 1200,
        "phase": "gate",
        "condition": "eks-nodeinit.io/AcceleratorsReady",
        "ownFault": own,
    });
    let report = json!({
        "version": "0", "instanceId": "", "startedAtUnixMs": 0, "finishedAtUnixMs": 0,
        "steps": [], "handoff": "", "warnings": [],
        "checks": {"accelerators of p5.48xlarge": result},
    });
    super::join_proof::write(
        root,
        "/var/lib/eks-nodeinit/report.json",
        &report.to_string(),
    );
}

/// The proof of `r` keeps the node as a `mismatch`: neither retired (kubelet left running) nor
/// marked joined (no call to AWS), a cause saying `says`; the root and the join record.
fn kept_as_mismatch(w: &World, r: Run, says: &str) -> (tempfile::TempDir, serde_json::Value) {
    let (root, units) = failed_proof(w, r);
    let calls = w.calls();
    assert!(
        calls.is_empty(),
        "neither retired nor marked joined: {calls:?}"
    );
    assert!(!stopped(&units), "{units:?}");
    let join = join_of(root.path());
    assert_eq!(join["verdict"], "mismatch", "{join:#}");
    let causes = join["causes"].to_string();
    assert!(causes.contains(says), "{causes}");
    (root, join)
}

/// This boot's gate job holding `check`, and no result of it in a report.
fn gate_job(root: &Path, check: eks_nodeinit::verify::Check) {
    let when = eks_nodeinit::plan::step::When::Gate;
    let step = eks_nodeinit::plan::step::CheckStep::new(check, when, Duration::from_secs(5));
    let job = eks_nodeinit::plan::gate::GateJob { steps: vec![step] };
    let path = eks_nodeinit::plan::gate::GATE_JOB;
    super::join_proof::write(root, path, &job.to_text());
}

/// A group of three, two of which joined: the like peers an `unfit` verdict is judged by.
fn two_like_peers_joined() -> Option<World> {
    let w = world(true, false, 3)?;
    w.joined(2);
    Some(w)
}

fn run<'a>(prep: fn(&Path)) -> Run<'a> {
    Run {
        kubelet: "active",
        api: Api::ReporterFalse,
        prep,
        ..Run::default()
    }
}

#[test]
fn a_gpu_missing_while_like_peers_joined_retires_the_node_saying_why() {
    let Some(w) = two_like_peers_joined() else {
        return;
    };
    let (root, units) = failed_proof(&w, run(|r| gate_failed(r, "gpu-missing", true)));
    let calls = w.calls();
    let actions: Vec<&str> = calls.iter().map(|(a, _)| a.as_str()).collect();
    assert_eq!(actions, ["CreateTags", "SetInstanceHealth"], "{calls:?}");
    assert!(stopped(&units), "{units:?}");
    let line = console(root.path());
    assert!(
        line.starts_with(&format!("eks-nodeinit: retiring {}: verdict unfit: before the kubelet, accelerators of p5.48xlarge (gpu-missing)", w.ids[0])),
        "{line}"
    );
    let join = join_of(root.path());
    assert_eq!(
        (join["verdict"].as_str(), join["blame"].as_str()),
        (Some("unfit"), Some("node")),
        "{join:#}"
    );
    let conditions = join["conditions"].to_string();
    assert!(
        conditions.contains("eks-nodeinit.io/Joined=False (Unfit)"),
        "{conditions}"
    );
    assert!(
        conditions.contains("eks-nodeinit.io/AcceleratorsReady=False (CheckFailed)"),
        "{conditions}"
    );
}

#[test]
fn a_gpu_missing_with_no_like_peer_joined_is_kept_as_a_mismatch() {
    let Some(w) = world(true, false, 3) else {
        return;
    };
    // Not retired, not tagged: a table row every instance fails alike retires no fleet.
    let r = run(|r| gate_failed(r, "gpu-missing", true));
    let (root, join) = kept_as_mismatch(&w, r, "0 like instances of its group");
    assert!(console(root.path()).is_empty());
    let conditions = join["conditions"].to_string();
    assert!(
        conditions.contains("eks-nodeinit.io/AcceleratorsReady=False"),
        "{conditions}"
    );
}

#[test]
fn the_images_fault_before_the_kubelet_is_a_mismatch_that_counts_no_peer() {
    let Some(w) = two_like_peers_joined() else {
        return;
    };
    let says = "before the kubelet, accelerators of p5.48xlarge (driver-mismatch)";
    kept_as_mismatch(&w, run(|r| gate_failed(r, "driver-mismatch", false)), says);
}

#[test]
fn a_gate_that_recorded_nothing_is_no_pass_and_counts_no_peer() {
    let Some(w) = two_like_peers_joined() else {
        return;
    };
    // This boot's gate job holds the check; the gate unit never recorded its result (it did
    // not run, or was stopped). It used to count as passed: the node was marked joined.
    let prep = |r: &Path| {
        let probe = eks_nodeinit::verify::accelerators::Accelerators {
            instance_type: "p5.48xlarge".into(),
            gpus: 8,
            efa: Some(0),
            ask: None,
            operator_driver: false,
            mig: None,
            nvidia_smi: "/usr/bin/nvidia-smi".into(),
        };
        gate_job(r, eks_nodeinit::verify::Check::new(probe));
    };
    let says = "before the kubelet, accelerators of p5.48xlarge: no result in the report";
    kept_as_mismatch(&w, run(prep), says);
}

#[test]
fn an_unfit_node_nothing_would_retire_is_kept_as_a_mismatch_not_held_for_ever() {
    let Some(w) = two_like_peers_joined() else {
        return;
    };
    // `verify.onFailure: report` (the job names no retirement) and no launch hook: an `unfit`
    // verdict kept `Joined=False`, and the startup taint, with nothing to end it.
    let r = Run {
        job: |j| {
            j.as_object_mut().unwrap().remove("retire");
        },
        ..run(|r| gate_failed(r, "gpu-missing", true))
    };
    let (_, join) = kept_as_mismatch(&w, r, "nothing would make this node leave");
    let conditions = join["conditions"].to_string();
    assert!(
        conditions.contains("eks-nodeinit.io/Joined=True"),
        "{conditions}"
    );
}

#[test]
fn an_unfit_node_the_launch_hook_did_not_take_is_kept_as_a_mismatch() {
    let Some(w) = two_like_peers_joined() else {
        return;
    };
    // A launch hook job, but no launch waits on that hook (timed out, completed already, or
    // not the group's): ABANDON takes nothing, and no retirement is asked. The verdict was
    // `unfit`, `Joined=False` and the taint with nothing to end them.
    let r = Run {
        hook: Some("not-the-groups"),
        job: |j| {
            j.as_object_mut().unwrap().remove("retire");
        },
        ..run(|r| gate_failed(r, "gpu-missing", true))
    };
    let (root, units) = failed_proof(&w, r);
    // The cause was tagged for the budget before ABANDON was tried (as every abandoning node
    // does): the only call. Not retired, kubelet left running.
    let calls = w.calls();
    assert!(calls.iter().all(|c| c.0 == "CreateTags"), "{calls:?}");
    assert!(!stopped(&units), "{units:?}");
    let join = join_of(root.path());
    assert_eq!(join["verdict"], "mismatch", "{join:#}");
    let causes = join["causes"].to_string();
    assert!(causes.contains("no launch hook took it"), "{causes}");
    let hook = join["hook"].as_str().unwrap_or("");
    assert!(hook.contains("not taken"), "{join:#}");
    let conditions = join["conditions"].to_string();
    assert!(
        conditions.contains("eks-nodeinit.io/Joined=True"),
        "{conditions}"
    );
}

#[test]
fn nodeadms_check_without_a_result_counts_against_nothing() {
    let Some(w) = two_like_peers_joined() else {
        return;
    };
    // The gate held only nodeadm's check of the merge, whose failures never count (the image's
    // or the config's): recording nothing is no fault either.
    let prep = |r: &Path| {
        let probe = eks_nodeinit::verify::nodeadm::NodeadmConfig {
            program: "/usr/bin/nodeadm".into(),
            sources: vec![
                "imds://user-data".into(),
                "file:///etc/eks/nodeadm.d/".into(),
            ],
            env: Default::default(),
        };
        gate_job(r, eks_nodeinit::verify::Check::new(probe));
    };
    let r = Run {
        joins: true,
        ..run(prep)
    };
    let (root, units) = failed_proof(&w, r);
    assert!(!stopped(&units), "{units:?}");
    let join = join_of(root.path());
    assert_eq!(join["verdict"], "joined", "{join:#}");
    let calls = w.calls();
    assert_eq!(calls.len(), 1, "marked joined, nothing else: {calls:?}");
    assert_eq!(calls[0].0, "CreateTags", "{calls:?}");
}
