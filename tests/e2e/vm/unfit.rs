//! The scenario of an accelerated node missing its GPU (docs/accelerators.md): the join
//! scenario's guest (a real kubelet joining the host's API server) on an instance IMDS says is a
//! `g4dn.xlarge` (one NVIDIA GPU in the agent's table), which has none on its PCI bus, with a
//! startup taint, `verify.onFailure: terminate` and `verify.accelerators.wait: 10s`, outside any
//! group, while two like instances of its cluster carry `eks-nodeinit/joined` (moto).
//!
//! The packaged gate unit runs the check before nodeadm-run starts the kubelet: it fails
//! (`gpu-missing`, the instance's own) once the wait ends, and only then does the kubelet start.
//! The Node registers with the startup taint and turns Ready; the proof finds it `unfit`, blamed
//! on the node (two like peers joined, the budget unspent): `Joined` and `AcceleratorsReady` are
//! `False` on the Node, the taint stays, the cause is one line on the serial console, the
//! instance tagged `eks-nodeinit/retired`, then `TerminateInstances` on its own id, once.

use super::*;

/// What IMDS says the instance is.
pub(super) const INSTANCE_TYPE: &str = "g4dn.xlarge";
const TAINT: &str = "readiness.k8s.io/eks-nodeinit";

pub(super) fn is_unfit(name: &str) -> bool {
    name == "al2023-unfit"
}

/// The scenario's settings on top of the join scenario's.
pub(super) fn edit_user_data(sc: &mut Scenario) {
    if !is_unfit(sc.name) {
        return;
    }
    sc.config["verify"]["onFailure"] = serde_json::json!("terminate");
    sc.config["verify"]["accelerators"] = serde_json::json!({"wait": "10s"});
    sc.config["lifecycle"]["startupTaint"] =
        serde_json::json!(format!("{TAINT}=pending:NoSchedule"));
    sc.config["labels"]["eks-nodeinit.io/readiness"] = serde_json::json!("v2");
    rewrite_config(sc);
}

/// The guest reports when the gate ended and the kubelet started.
pub(super) fn prepare(root: &Path) {
    guest::write(&root.join("etc/e2e/gate"), "", 0o644);
}

/// Two like instances of the cluster joined before the boot.
pub(super) fn before_boot(sc: &Scenario, ec2: &Ec2, rt: &tokio::runtime::Runtime) {
    if is_unfit(sc.name) {
        for _ in 0..2 {
            retired::other_joined(ec2, rt);
        }
    }
}

/// A unit's monotonic timestamp of `property` in the guest's `gate-order` report.
fn at(order: &str, unit: &str, property: &str) -> u64 {
    let key = format!("{unit} {property}=");
    let line = order.lines().find_map(|l| l.strip_prefix(&key));
    line.and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{unit} {property} not reported:\n{order}"))
}

/// The scenario's checks (module comment); `before`: the requests moto had served before.
pub(super) fn check(
    sc: &Scenario,
    run: &Run,
    (ec2, rt): (&Ec2, &tokio::runtime::Runtime),
    (console, before): (&str, usize),
    cluster: &join::Cluster,
) {
    let name = sc.name;
    let waited = check_gate(name, run);
    let r: serde_json::Value = serde_json::from_str(&run.file(1, REPORT_PATH)).unwrap();
    let gate = &r["checks"][format!("accelerators of {INSTANCE_TYPE}")];
    let seen = (
        gate["phase"].as_str(),
        gate["cause"].as_str(),
        gate["ownFault"].as_bool(),
    );
    assert_eq!(
        seen,
        (Some("gate"), Some("gpu-missing"), Some(true)),
        "[{name}] {gate:#}"
    );
    // nodeadm's own check of what it will merge ran in the same gate (the stand-in's `config
    // check`: the user data from IMDS, then the drop-ins) and passed.
    let nodeadm = &r["checks"]["nodeadm config check of the NodeConfigs it will merge"];
    let seen = (nodeadm["phase"].as_str(), nodeadm["result"].as_str());
    assert_eq!(seen, (Some("gate"), Some("passed")), "[{name}] {r:#}");
    let join = &r["join"];
    let verdict = (join["verdict"].as_str(), join["blame"].as_str());
    assert_eq!(verdict, (Some("unfit"), Some("node")), "[{name}] {join:#}");
    let retired = join["retired"].as_str().unwrap_or("");
    assert!(
        retired.starts_with("TerminateInstances"),
        "[{name}] {join:#}"
    );
    // The cause on the console before the node said it retired.
    let id = &ec2.instance_id;
    let line = format!("eks-nodeinit: retiring {id}: verdict unfit: before the kubelet, accelerators of {INSTANCE_TYPE} (gpu-missing)");
    retired::said_first(name, console, &line);
    check_node(name, cluster);
    check_calls(name, (ec2, rt), before);
    eprintln!(
        "[{name}] passed: first report at {:.0} s; the kubelet started {waited:.1} s after the gate ended",
        run.boot1_secs
    );
}

/// The gate ended no later than the kubelet started: how long after, in seconds.
fn check_gate(name: &str, run: &Run) -> f64 {
    let order = run.must(1, "gate-order");
    let gate = "eks-nodeinit-gate.service";
    let gate_done = at(&order, gate, "ExecMainExitTimestampMonotonic");
    let kubelet = at(&order, "kubelet.service", "ExecMainStartTimestampMonotonic");
    let first = gate_done > 0 && gate_done <= kubelet;
    assert!(first, "[{name}] the gate first:\n{order}");
    (kubelet - gate_done) as f64 / 1e6
}

/// The Node as the API server has it: tainted still, its conditions `False`.
fn check_node(name: &str, cluster: &join::Cluster) {
    let (_, node) = cluster.cp.get(&format!("/api/v1/nodes/{}", cluster.node));
    let taints = node["spec"]["taints"].to_string();
    assert!(
        taints.contains(TAINT),
        "[{name}] the startup taint stays: {taints}"
    );
    let conditions = node["status"]["conditions"].as_array().cloned();
    let conditions = conditions.unwrap_or_default();
    let status = |t: &str| {
        let c = conditions.iter().find(|c| c["type"] == t)?;
        let s = |k: &str| c[k].as_str().unwrap_or("").to_string();
        Some((s("status"), s("reason")))
    };
    let joined = status("eks-nodeinit.io/Joined");
    assert_eq!(
        joined,
        Some(("False".into(), "Unfit".into())),
        "[{name}] {conditions:?}"
    );
    let ready = status("eks-nodeinit.io/AcceleratorsReady");
    assert_eq!(
        ready,
        Some(("False".into(), "CheckFailed".into())),
        "[{name}] {conditions:?}"
    );
}

/// The tag, then its own termination, once.
fn check_calls(name: &str, (ec2, rt): (&Ec2, &tokio::runtime::Runtime), before: usize) {
    let id = &ec2.instance_id;
    let mine = retired::retiring_calls(ec2, before);
    let actions: Vec<&str> = mine.iter().map(|(a, _)| a.as_str()).collect();
    assert_eq!(
        actions,
        ["CreateTags", "TerminateInstances"],
        "[{name}] {mine:?}"
    );
    let own = mine[1].1.contains(&format!("InstanceId.1={id}"));
    assert!(own, "[{name}] {}", mine[1].1);
    let tags = ec2.tags(rt).unwrap();
    let tag = tags.get("eks-nodeinit/retired").map_or("", String::as_str);
    assert!(tag.starts_with("unfit: "), "[{name}] the tag: {tags:?}");
}
