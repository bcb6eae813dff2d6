//! The warm-pool scenarios of the VM e2e (docs/lifecycle.md): AL2023 name-only user data on
//! an instance whose target lifecycle state (IMDS `autoscaling/target-lifecycle-state`) starts
//! warmed.
//!
//! * `Warmed:Stopped`: the first boot prepares the node and holds the hand-off (the package's
//!   drop-in skips nodeadm-run on the real systemd); the host turns the state to `InService`
//!   when that boot has reported, as Auto Scaling does before it starts the instance again;
//!   the second boot hands off exactly once and changes nothing else.
//! * `Warmed:Running`: the host turns the state to `InService` once the waiter
//!   (eks-nodeinit-await-service.service) has polled it; in the same boot the waiter has systemd
//!   run the agent's unit again, which releases the hold and starts nodeadm-run over D-Bus. The
//!   guest's reporter waits for that release before it reports.

use crate::common::imds_server::ImdsServer;
use crate::{Run, Scenario};
use eks_nodeinit::exec::report::REPORT_PATH;
use eks_nodeinit::instance::lifecycle::{Hold, HOLD_MARKER, IMDS_PATH};
use eks_nodeinit::plan::aspects::{logind, sysctls};
use eks_nodeinit::plan::handoff::al2023 as nodeconfig;

/// The guest's flag file that makes its reporter wait for the release of a held hand-off.
pub const WAIT_RELEASE_FLAG: &str = "etc/e2e/wait-release";

const DONE: &str = "/var/lib/eks-nodeinit/done";

/// Each scenario's first state.
pub fn initial_state(name: &str) -> Option<&'static str> {
    match name {
        "al2023-warm-stopped" => Some("Warmed:Stopped"),
        "al2023-warm-running" => Some("Warmed:Running"),
        _ => None,
    }
}

/// Turn the state to `InService` when Auto Scaling would: after the first boot's report when
/// the instance is stopped in the pool (it reboots itself then); when it keeps running, once
/// the guest has said that the boot holds the hand-off (the waiter is polling by then). The
/// number of reads says nothing: cloud-init's crawl of the metadata reads the state too.
/// Returns whether it did now.
pub fn advance(sc: &Scenario, report_so_far: &str, imds: &ImdsServer) -> bool {
    let mut s = imds.state.lock().unwrap();
    if s.data.get(IMDS_PATH).map(String::as_str) == Some("InService") {
        return false;
    }
    let reads = s.paths.iter().filter(|p| p.ends_with(IMDS_PATH)).count();
    let now = match sc.warm {
        Some("Warmed:Stopped") => report_so_far.contains("E2E 1 end "),
        Some("Warmed:Running") => report_so_far.contains("E2E 1 held "),
        _ => false,
    };
    if now {
        s.data.insert(IMDS_PATH.into(), "InService".into());
        eprintln!(
            "[{}] target lifecycle state now InService (after {reads} reads)",
            sc.name
        );
    }
    now
}

/// The hand-off log's records of `unit` as the guest reported it at `boot` (one per call of
/// the stand-in nodeadm in that unit).
fn records(run: &Run, boot: u32, unit: &str) -> Vec<String> {
    run.handoff_records(boot)
        .into_iter()
        .filter(|r| r.lines().next().unwrap_or("").contains(unit))
        .collect()
}

fn report(run: &Run, boot: u32) -> serde_json::Value {
    serde_json::from_str(&run.file(boot, REPORT_PATH))
        .unwrap_or_else(|e| panic!("boot {boot}: report.json: {e}\n{}", run.debug(boot)))
}

/// Both scenarios: the checks of their own, after the common clean-boot checks.
pub fn check(sc: &Scenario, run: &Run) {
    match sc.warm {
        Some("Warmed:Stopped") => check_stopped(sc, run),
        Some("Warmed:Running") => check_running(sc, run),
        other => unreachable!("{other:?}"),
    }
}

/// Boot 1 held (nodeadm-run skipped by its condition, no first-boot marker, the hold marker
/// with the state), boot 2 handed off once with no other change.
fn check_stopped(sc: &Scenario, run: &Run) {
    let name = sc.name;
    let held = run.file(1, HOLD_MARKER);
    assert_eq!(Hold::from_text(&held).unwrap().state, "Warmed:Stopped");
    let r1 = report(run, 1);
    assert!(
        r1["handoff"].as_str().unwrap_or("").starts_with("held"),
        "[{name}] {r1:#}"
    );
    // The held boot prepared the node: every step done, the files in place.
    let steps = r1["steps"].as_array().cloned().unwrap_or_default();
    assert!(!steps.is_empty(), "[{name}] nothing prepared: {r1:#}");
    for st in &steps {
        let outcome = st["outcome"].as_str().unwrap_or("");
        assert!(outcome.starts_with("done"), "[{name}] {st}");
    }
    for path in [
        sysctls::PERSIST_PATH,
        logind::DROPIN_PATH,
        nodeconfig::DROPIN,
    ] {
        assert!(
            run.get(1, &format!("file:{path}")).is_some(),
            "[{name}] boot 1: no {path}"
        );
    }
    assert_eq!(
        run.get(1, &format!("file:{DONE}")),
        None,
        "[{name}] no first-boot marker"
    );
    let run_unit = run.unit(1, "nodeadm-run.service");
    assert_eq!(
        run_unit.get("ConditionResult").map(String::as_str),
        Some("no"),
        "[{name}] nodeadm-run skipped in the held boot: {run_unit:?}"
    );
    // Boot 2: the agent's unit ran again and found everything in place.
    assert_eq!(run.get(2, &format!("file:{HOLD_MARKER}")), None);
    assert!(
        run.get(2, &format!("file:{DONE}")).is_some(),
        "[{name}] first boot done"
    );
    let r2 = report(run, 2);
    // The hand-off's company aside: the preflight's checks and the per-boot jobs of the proof
    // and the gate (and the start of their units), which change nothing the node is
    // configured with.
    let changes: Vec<&serde_json::Value> = r2["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| {
            let step = s["step"].as_str().unwrap_or("");
            !(step.starts_with("check ")
                || step.starts_with("write /run/eks-nodeinit/")
                || step == "start eks-nodeinit-launch-hook.service"
                || step == "start eks-nodeinit-gate.service")
        })
        .collect();
    assert!(changes.is_empty(), "[{name}] no other change: {r2:#}");
    assert!(
        r2["handoff"]
            .as_str()
            .unwrap_or("")
            .starts_with("NodeConfig at"),
        "[{name}] {r2:#}"
    );
    // nodeadm-run: none in the held boot, exactly one in the boot in service, with the drop-in.
    assert_eq!(records(run, 1, "nodeadm-run.service"), Vec::<String>::new());
    let runs = records(run, 2, "nodeadm-run.service");
    assert_eq!(runs.len(), 1, "[{name}] exactly one hand-off: {runs:#?}");
    assert!(runs[0].contains("result ok"), "[{name}] {runs:#?}");
    assert!(runs[0].contains("dropin /etc/eks/nodeadm.d/10-eks-nodeinit.json "));
    assert_eq!(records(run, 2, "nodeadm-config.service").len(), 2);
}

/// One boot: held, the waiter, the release, nodeadm-run started once by the agent; the next
/// boot runs nodeadm as any node does, and not the agent.
fn check_running(sc: &Scenario, run: &Run) {
    let name = sc.name;
    let held = run.must(1, "held");
    assert_eq!(Hold::from_text(&held).unwrap().state, "Warmed:Running");
    assert_eq!(
        run.get(1, &format!("file:{HOLD_MARKER}")),
        None,
        "[{name}] released before the report\n{}",
        run.debug(1)
    );
    assert!(
        run.get(1, &format!("file:{DONE}")).is_some(),
        "[{name}] first boot done"
    );
    let waiter = run.unit(1, "eks-nodeinit-await-service.service");
    assert_eq!(
        waiter.get("Result").map(String::as_str),
        Some("success"),
        "[{name}] the waiter: {waiter:?}\n{}",
        run.debug(1)
    );
    let journal = run.must(1, "journal");
    assert!(journal.contains("hand-off held"), "[{name}] {journal}");
    assert!(
        journal.contains("left the warm pool"),
        "[{name}] the waiter's restart: {journal}"
    );
    let r1 = report(run, 1);
    assert!(
        r1["handoff"]
            .as_str()
            .unwrap_or("")
            .starts_with("NodeConfig at"),
        "[{name}] the release run's report: {r1:#}"
    );
    let agent = run.unit(2, "eks-nodeinit.service");
    assert_eq!(agent.get("ConditionResult").map(String::as_str), Some("no"));
    // nodeadm-run: once in boot 1 (started by the release, with the drop-in), and once more in
    // boot 2 as on any node.
    let runs = records(run, 1, "nodeadm-run.service");
    assert_eq!(runs.len(), 1, "[{name}] {runs:#?}");
    assert!(runs[0].contains("result ok"), "[{name}] {runs:#?}");
    assert!(runs[0].contains("dropin /etc/eks/nodeadm.d/10-eks-nodeinit.json "));
    assert_eq!(records(run, 2, "nodeadm-run.service").len(), 2);
}
