//! A Node Ready whose check before the kubelet found a fault of the instance's own (a GPU
//! missing): `unfit`, judged with the fleet's guard. Against moto as in `retire.rs`: two like
//! peers joined (they passed the same check), the node retires with the cause on its console
//! and its startup condition `False`; no like peer joined (a wrong expectation every instance
//! meets), it is kept as a `mismatch`, never retired. A check before the kubelet that failed for
//! the image's cause is a `mismatch` too, and this node is not counted as joined.

use std::path::Path;

use serde_json::json;

use super::retire::{console, failed_proof, join_of, stopped, world, Api, Run};

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
    let Some(w) = world(true, false, 3) else {
        return;
    };
    w.joined(2);
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
    let (root, units) = failed_proof(&w, run(|r| gate_failed(r, "gpu-missing", true)));
    // Not retired, not tagged: a table row every instance fails alike retires no fleet.
    assert!(w.calls().is_empty(), "{:?}", w.calls());
    assert!(!stopped(&units), "{units:?}");
    assert!(console(root.path()).is_empty());
    let join = join_of(root.path());
    assert_eq!(join["verdict"], "mismatch", "{join:#}");
    let causes = join["causes"].to_string();
    assert!(causes.contains("0 like instances of its group"), "{causes}");
    let conditions = join["conditions"].to_string();
    assert!(
        conditions.contains("eks-nodeinit.io/AcceleratorsReady=False"),
        "{conditions}"
    );
}

#[test]
fn the_images_fault_before_the_kubelet_is_a_mismatch_that_counts_no_peer() {
    let Some(w) = world(true, false, 3) else {
        return;
    };
    w.joined(2);
    let (root, _) = failed_proof(&w, run(|r| gate_failed(r, "driver-mismatch", false)));
    // Neither retired nor marked joined (no CreateTags of eks-nodeinit/joined).
    assert!(w.calls().is_empty(), "{:?}", w.calls());
    let join = join_of(root.path());
    assert_eq!(join["verdict"], "mismatch", "{join:#}");
    assert!(
        join["causes"]
            .to_string()
            .contains("before the kubelet, accelerators of p5.48xlarge (driver-mismatch)"),
        "{join:#}"
    );
}
