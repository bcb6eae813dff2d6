//! Fit for service on the real control plane (docs/lifecycle.md#a-startup-taint): a node
//! registers with the startup taint, the agent sets its Node conditions with the node's own
//! identity after the proof (the real aws-iam-authenticator maps its token), the node's own
//! credentials may set conditions and may not remove the taint (NodeRestriction), and the
//! shipped NodeReadinessRule (examples/readiness/), applied as the Node Readiness Controller
//! would with the suite's own credentials, removes the taint once the conditions hold: the
//! real kube-scheduler binds the waiting pod only then. The initialisation deadline ends with
//! its own verdict when another reporter's condition stays False.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::join::{
    bus_with_kubelet_active, complete_hook_command, init, instance_mapped, report, told, Joining,
    VPC,
};
use crate::common;
use common::control_plane::{in_netns, wait_until, ControlPlane, ADMIN_TOKEN, NODE_IP};
use common::iam_authenticator::Mapping;
use common::kubelet::Kubelet;
use common::scheduler::Scheduler;
use common::*;

const TAINT: &str = "readiness.k8s.io/eks-nodeinit";
const JOINED: &str = "eks-nodeinit.io/Joined";
const BOOT_STEPS: &str = "eks-nodeinit.io/BootStepsDone";
const HARDENING: &str = "eks-nodeinit.io/HardeningFit";

/// The suite's control plane and instance `tag` with the startup taint, its label for the
/// rule's selector, and `verify` as given.
fn joining(
    tag: &str,
    verify: Value,
) -> Option<(std::sync::MutexGuard<'static, ControlPlane>, Joining)> {
    if !super::ready() {
        return None;
    }
    let cp = ControlPlane::shared();
    let j = instance_mapped(&cp, tag, VPC, Mapping::Ec2Linux, |v| {
        v["lifecycle"]["startupTaint"] = json!(format!("{TAINT}=pending:NoSchedule"));
        v["labels"] = json!({"eks-nodeinit.io/readiness": "v2"});
        for (k, x) in verify.as_object().unwrap() {
            v["verify"][k] = x.clone();
        }
    });
    Some((cp, j))
}

/// `method path` with `body` as the bearer of `auth` (curl's own options: a client certificate
/// or a token), a strategic-merge patch for PATCH: (status, body).
fn call(
    cp: &ControlPlane,
    auth: &[String],
    method: &str,
    path: &str,
    body: &Value,
) -> (u16, Value) {
    let out = tempfile::NamedTempFile::new().unwrap();
    let mut c = in_netns(&cp.netns, "curl");
    c.args(["-sS", "--max-time", "10", "-w", "%{http_code}", "--cacert"])
        .arg(cp.ca())
        .args(auth)
        .args([
            "-X",
            method,
            "-H",
            "Content-Type: application/strategic-merge-patch+json",
        ])
        .arg("--data-binary")
        .arg(body.to_string())
        .arg("-o")
        .arg(out.path())
        .arg(format!("{}{path}", cp.endpoint()));
    let status = tls::sh(&mut c).trim().parse().unwrap();
    let text = std::fs::read_to_string(out.path()).unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn admin() -> Vec<String> {
    vec!["-H".into(), format!("Authorization: Bearer {ADMIN_TOKEN}")]
}

/// The kubelet's own client certificate: the node's credentials, `system:node:<name>`.
fn node_credentials(k: &Kubelet) -> Vec<String> {
    let d = k.dir.path();
    ["--cert", "node.crt", "--key", "node.key"]
        .chunks(2)
        .flat_map(|p| [p[0].to_string(), d.join(p[1]).display().to_string()])
        .collect()
}

fn condition<'a>(node: &'a Value, kind: &str) -> Option<&'a Value> {
    node["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

fn has_taint(node: &Value) -> bool {
    let taints = node["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    taints.iter().any(|t| t["key"] == TAINT)
}

/// A pod for node `name` (by its hostname label) that tolerates what a kubelet registers with
/// here and no other taint: only the scheduler binds it.
fn waiting_pod(cp: &ControlPlane, pod: &str, name: &str) {
    let tolerate = |k: &str| json!({"key": k, "operator": "Exists", "effect": "NoSchedule"});
    let body = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": name},
            "tolerations": [tolerate("node.kubernetes.io/not-ready"), tolerate("node.cloudprovider.kubernetes.io/uninitialized")],
            "containers": [{"name": "c", "image": common::pods::SANDBOX_IMAGE}],
        },
    });
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
    cp.call(
        "POST",
        "/api/v1/namespaces/default/serviceaccounts",
        Some(&sa),
    );
    let (s, b) = cp.call("POST", "/api/v1/namespaces/default/pods", Some(&body));
    assert_eq!(s, 201, "{b}");
}

/// The shipped rule applied as the controller applies it: the Node selected by its labels, each
/// of its conditions at its required status, then its taint removed (with the suite's own
/// credentials, as the controller's). Whether it removed the taint.
fn apply_rule(cp: &ControlPlane, name: &str) -> bool {
    let path = manifest_dir().join("examples/readiness/node-readiness-rule.yaml");
    let rule: Value = yaml_serde::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let spec = &rule["spec"];
    let node = cp.get(&format!("/api/v1/nodes/{name}")).1;
    let selected = spec["nodeSelector"]["matchLabels"]
        .as_object()
        .unwrap()
        .iter()
        .all(|(k, v)| node["metadata"]["labels"][k] == *v);
    let held = spec["conditions"].as_array().unwrap().iter().all(|c| {
        condition(&node, c["type"].as_str().unwrap())
            .is_some_and(|n| n["status"] == c["requiredStatus"])
    });
    assert_eq!(
        spec["taint"]["key"], TAINT,
        "the rule names the config's taint"
    );
    if !(selected && held) {
        return false;
    }
    let rest: Vec<&Value> = node["spec"]["taints"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["key"] != spec["taint"]["key"])
        .collect();
    let patch = json!({"spec": {"taints": rest}});
    let (s, b) = call(
        cp,
        &admin(),
        "PATCH",
        &format!("/api/v1/nodes/{name}"),
        &patch,
    );
    assert_eq!(s, 200, "{b}");
    true
}

/// The agent's conditions on the Node after the proof, the kubelet's beside them, and the
/// report saying so: the Node as read.
fn assert_conditions(cp: &ControlPlane, j: &Joining) -> Value {
    let node = cp.get(&format!("/api/v1/nodes/{}", j.name)).1;
    let joined = condition(&node, JOINED).unwrap_or_else(|| panic!("{}", node["status"]));
    assert_eq!(
        (joined["status"].as_str(), joined["reason"].as_str()),
        (Some("True"), Some("JoinedAsPlanned")),
        "{joined}"
    );
    let steps = condition(&node, BOOT_STEPS).unwrap();
    assert_eq!(steps["status"], "True", "{steps}");
    // A condition of checks that ran beside the changes, before the hand-off (the hardened-AMI
    // checks, `warn` by default), set once the Node existed, as their results say.
    let rep = report(j);
    let checks = rep["checks"].as_object().unwrap();
    let hardening: Vec<&Value> = checks
        .values()
        .filter(|c| c["condition"] == HARDENING)
        .collect();
    assert!(hardening.len() >= 3, "{checks:?}");
    assert!(
        hardening.iter().all(|c| c["phase"] == "beside"),
        "{hardening:?}"
    );
    // The first that did not pass decides (the root holds no live kernel, so the kernel
    // settings' check is not run here).
    let first = hardening
        .iter()
        .map(|c| c["result"].as_str().unwrap())
        .find(|r| !matches!(*r, "passed" | "skipped"));
    let fit = condition(&node, HARDENING).unwrap_or_else(|| panic!("{}", node["status"]));
    assert_eq!(
        (
            fit["status"].as_str().unwrap(),
            fit["reason"].as_str().unwrap()
        ),
        match first {
            None => ("True", "CheckPassed"),
            Some("failed") => ("False", "CheckFailed"),
            Some(_) => ("False", "NotRun"),
        },
        "{fit} {hardening:?}"
    );
    // The kubelet's own conditions are still there beside them.
    assert_eq!(condition(&node, "Ready").unwrap()["status"], "True");
    let rep = report(j);
    let conditions = rep["join"]["conditions"].to_string();
    assert!(
        conditions.contains(&format!("{JOINED}=True (JoinedAsPlanned)")),
        "{conditions}"
    );
    let phases = rep["join"]["phases"].to_string();
    assert!(phases.contains("\"initialised\""), "{phases}");
    node
}

/// The node's own credentials: its conditions yes, its taints no (NodeRestriction).
fn assert_node_may_not_untaint(cp: &ControlPlane, j: &Joining, kubelet: &Kubelet) {
    let creds = node_credentials(kubelet);
    let mine = json!({"status": {"conditions": [{"type": "eks-nodeinit.io/Probe", "status": "True", "reason": "Test", "message": "set by the node"}]}});
    let (s, b) = call(
        cp,
        &creds,
        "PATCH",
        &format!("/api/v1/nodes/{}/status", j.name),
        &mine,
    );
    assert_eq!(s, 200, "{b}");
    let untaint = json!({"spec": {"taints": []}});
    let (s, b) = call(
        cp,
        &creds,
        "PATCH",
        &format!("/api/v1/nodes/{}", j.name),
        &untaint,
    );
    assert_eq!(s, 403, "{b}");
    assert!(
        b.to_string().contains("is not allowed to modify taints"),
        "{b}"
    );
    assert!(has_taint(&cp.get(&format!("/api/v1/nodes/{}", j.name)).1));
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn a_node_registers_tainted_and_serves_only_once_its_conditions_hold() {
    let verify = json!({"initDeadline": "60s", "hardening": "warn"});
    let Some((cp, j)) = joining("ready", verify) else {
        return;
    };
    let (out, _) = init(&cp, &j);
    assert!(out.status.success(), "{}", stderr(&out));
    let Some(bus) = bus_with_kubelet_active() else {
        return;
    };
    let scheduler = Scheduler::start(&cp);
    common::pods::ensure_sandbox(&cp);
    waiting_pod(&cp, "after-boot", &j.name);
    let proof = {
        let mut c = complete_hook_command(&cp, &j, &bus.address);
        std::thread::spawn(move || run(&mut c))
    };
    let start = super::al2023_start_of(j.root.path(), None, &j.instance);
    let mut kubelet = Kubelet::start(&cp, &j.name, &start);
    let node = kubelet.node(&cp);
    cp.set_addresses(&j.name, NODE_IP);
    assert!(
        has_taint(&node),
        "registered with the startup taint: {}",
        node["spec"]
    );
    let out = proof.join().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(told(&cp, &j), ["CONTINUE"]);
    let node = assert_conditions(&cp, &j);
    // Tainted, the pod waits: the scheduler finds a taint it does not tolerate, and the
    // startup taint is the only one it does not.
    let untolerated: Vec<Value> = node["spec"]["taints"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| !t["key"].as_str().unwrap().starts_with("node."))
        .cloned()
        .collect();
    assert_eq!(untolerated.len(), 1, "{untolerated:?}");
    assert_eq!(untolerated[0]["key"], TAINT);
    let pod_path = "/api/v1/namespaces/default/pods/after-boot";
    let mut pod = Value::Null;
    let refused = wait_until(Duration::from_secs(30), || {
        pod = cp.get(pod_path).1;
        pod["status"]["conditions"]
            .to_string()
            .contains("had untolerated taint")
    });
    assert!(
        refused,
        "{}\n{}",
        pod["status"],
        kubelet::tail(&scheduler.log_text())
    );
    assert!(pod["spec"]["nodeName"].is_null(), "{}", pod["spec"]);
    assert_node_may_not_untaint(&cp, &j, &kubelet);
    // The rule, as the controller: the taint goes, and the scheduler binds the pod.
    let removed_at = Instant::now();
    assert!(
        apply_rule(&cp, &j.name),
        "the conditions hold, the rule applies"
    );
    let bound = wait_until(Duration::from_secs(30), || {
        pod = cp.get(pod_path).1;
        pod["spec"]["nodeName"] == j.name.as_str()
    });
    assert!(
        bound,
        "{}\n{}",
        pod["status"],
        kubelet::tail(&scheduler.log_text())
    );
    eprintln!("pod bound {:?} after the taint went", removed_at.elapsed());
    cp.call("DELETE", &format!("{pod_path}?gracePeriodSeconds=0"), None);
    drop(kubelet);
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn a_condition_that_stays_false_meets_the_initialisation_deadline_with_its_own_cause() {
    let verify = json!({"initDeadline": "30s", "initConditions": ["gpu.example/Ready"]});
    let Some((cp, j)) = joining("uninit", verify) else {
        return;
    };
    let (out, _) = init(&cp, &j);
    assert!(out.status.success(), "{}", stderr(&out));
    let Some(bus) = bus_with_kubelet_active() else {
        return;
    };
    let t = Instant::now();
    let proof = {
        let mut c = complete_hook_command(&cp, &j, &bus.address);
        std::thread::spawn(move || run(&mut c))
    };
    let start = super::al2023_start_of(j.root.path(), None, &j.instance);
    let mut kubelet = Kubelet::start(&cp, &j.name, &start);
    kubelet.node(&cp);
    cp.set_addresses(&j.name, NODE_IP);
    // Another reporter (a GPU operator's) says its part is not done.
    let gpu = json!({"status": {"conditions": [{"type": "gpu.example/Ready", "status": "False", "reason": "NoDriver", "message": "no driver loaded"}]}});
    let (s, b) = call(
        &cp,
        &admin(),
        "PATCH",
        &format!("/api/v1/nodes/{}/status", j.name),
        &gpu,
    );
    assert_eq!(s, 200, "{b}");
    let out = proof.join().unwrap();
    let took = t.elapsed();
    assert!(!out.status.success(), "{}", stderr(&out));
    assert!(took >= Duration::from_secs(30), "{took:?}");
    // The join itself was fine: the hook went on at the verdict.
    assert_eq!(told(&cp, &j), ["CONTINUE"]);
    let join = &report(&j)["join"];
    assert_eq!(join["verdict"], "init-deadline", "{join:#}");
    let causes = join["causes"].to_string();
    assert!(
        causes.contains("gpu.example/Ready is False (NoDriver): no driver loaded"),
        "{causes}"
    );
    assert!(causes.contains("verify.initDeadline"), "{causes}");
    // No like instance of its group initialised (joined ones tell nothing: every Node Ready
    // is marked joined): the cluster's as far as can be told.
    assert_eq!(join["blame"], "cluster", "{join:#}");
    assert!(causes.contains("0 like instances of its group"), "{causes}");
    let status = run(super::join::agent(&cp, &j, &["status", "--root"]).arg(j.root.path()));
    assert!(!status.status.success());
    assert!(
        stdout(&status).contains("verdict: init-deadline"),
        "{}",
        stdout(&status)
    );
}

/// The node's proof against the suite's kubelet: `edit` changes the job `init` left before
/// `complete-hook` runs; the kubelet registers the Node while the proof waits. The proof's
/// output and the kubelet (kept running).
fn proven(
    cp: &ControlPlane,
    j: &Joining,
    edit: impl FnOnce(&mut Value),
) -> Option<(std::process::Output, Kubelet)> {
    let (out, _) = init(cp, j);
    assert!(out.status.success(), "{}", stderr(&out));
    let path = j.root.path().join("run/eks-nodeinit/join.json");
    let mut job: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut job);
    std::fs::write(&path, job.to_string()).unwrap();
    let bus = bus_with_kubelet_active()?;
    let proof = {
        let mut c = complete_hook_command(cp, j, &bus.address);
        std::thread::spawn(move || run(&mut c))
    };
    let start = super::al2023_start_of(j.root.path(), None, &j.instance);
    let mut kubelet = Kubelet::start(cp, &j.name, &start);
    kubelet.node(cp);
    cp.set_addresses(&j.name, NODE_IP);
    let out = proof.join().unwrap();
    drop(bus);
    Some((out, kubelet))
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn a_node_not_as_planned_joined_and_the_shipped_rule_releases_it() {
    let Some((cp, j)) = joining("mismatch", json!({"initDeadline": "60s"})) else {
        return;
    };
    // The plan says a label the Node will not have: the Node is Ready, not as planned.
    let Some((out, kubelet)) = proven(&cp, &j, |job| {
        job["expect"]["labels"]["example.com/planned"] = json!("but-absent");
    }) else {
        return;
    };
    assert!(!out.status.success(), "a mismatch is a finding");
    let join = &report(&j)["join"];
    assert_eq!(join["verdict"], "mismatch", "{join:#}");
    assert_eq!(told(&cp, &j), ["CONTINUE"]);
    let node = cp.get(&format!("/api/v1/nodes/{}", j.name)).1;
    let joined = condition(&node, JOINED).unwrap();
    assert_eq!(
        (joined["status"].as_str(), joined["reason"].as_str()),
        (Some("True"), Some("NotAsPlanned")),
        "{joined}"
    );
    let planned = condition(&node, "eks-nodeinit.io/AsPlanned").unwrap();
    assert_eq!(planned["status"], "False", "{planned}");
    assert!(
        planned["message"]
            .to_string()
            .contains("example.com/planned"),
        "{planned}"
    );
    assert!(has_taint(&node), "{}", node["spec"]);
    // The shipped rule, as the controller applies it: a node that joined is released.
    assert!(apply_rule(&cp, &j.name), "the rule releases a mismatch");
    assert!(!has_taint(&cp.get(&format!("/api/v1/nodes/{}", j.name)).1));
    // It initialised: Joined is True.
    let phases = join["phases"].to_string();
    assert!(phases.contains("\"initialised\""), "{phases}");
    drop(kubelet);
}

/// A ValidatingAdmissionPolicy refusing Node `name` any condition of the agent's: the node's
/// condition patches answered 403. Removed when dropped (the control plane is the suite's).
struct Refusing<'a> {
    cp: &'a ControlPlane,
}

const POLICIES: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
const BINDINGS: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";

fn refusing<'a>(cp: &'a ControlPlane, name: &str) -> Refusing<'a> {
    let policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "refuse-eks-nodeinit-conditions"},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["UPDATE"], "resources": ["nodes/status"]}]},
            "validations": [{
                "expression": format!("object.metadata.name != '{name}' || !has(object.status.conditions) || !object.status.conditions.exists(c, c.type.startsWith('eks-nodeinit.io/'))"),
                "reason": "Forbidden",
                "message": "the test refuses the agent's conditions",
            }],
        },
    });
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "refuse-eks-nodeinit-conditions"},
        "spec": {"policyName": "refuse-eks-nodeinit-conditions", "validationActions": ["Deny"]},
    });
    for (path, body) in [(POLICIES, &policy), (BINDINGS, &binding)] {
        let (s, b) = cp.call("POST", path, Some(body));
        assert_eq!(s, 201, "{b}");
    }
    // In force once a condition of the agent's is refused to the administrator too. The probe
    // is a dry run: one let through before the policy took effect must not stay on the Node,
    // where it made the policy refuse the kubelet's own status updates (never Ready).
    let probe = json!({"status": {"conditions": [{"type": "eks-nodeinit.io/Probe", "status": "True", "reason": "Probe", "message": "m"}]}});
    let path = format!("/api/v1/nodes/{name}/status?dryRun=All");
    let refused = common::control_plane::wait_until(Duration::from_secs(30), || {
        call(cp, &admin(), "PATCH", &path, &probe).0 == 403
    });
    assert!(refused, "the policy never took effect");
    Refusing { cp }
}

impl Drop for Refusing<'_> {
    fn drop(&mut self) {
        let name = "refuse-eks-nodeinit-conditions";
        self.cp.call("DELETE", &format!("{BINDINGS}/{name}"), None);
        self.cp.call("DELETE", &format!("{POLICIES}/{name}"), None);
    }
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn a_node_whose_conditions_are_refused_meets_the_initialisation_deadline_kept() {
    // No watch for a late join: a verdict other than the deadline's fails at once.
    let verify = json!({"initDeadline": "30s", "lateJoin": "0s"});
    let Some((cp, j)) = joining("refused", verify) else {
        return;
    };
    let (out, _) = init(&cp, &j);
    assert!(out.status.success(), "{}", stderr(&out));
    let Some(bus) = bus_with_kubelet_active() else {
        return;
    };
    let start = super::al2023_start_of(j.root.path(), None, &j.instance);
    let mut kubelet = Kubelet::start(&cp, &j.name, &start);
    kubelet.node(&cp);
    cp.set_addresses(&j.name, NODE_IP);
    let _refusing = refusing(&cp, &j.name);
    let out = run(&mut complete_hook_command(&cp, &j, &bus.address));
    assert!(!out.status.success(), "{}", stderr(&out));
    let join = &report(&j)["join"];
    // The Node joined; its conditions were refused at every read, and the deadline says so.
    assert_eq!(join["verdict"], "init-deadline", "{join:#}");
    assert_eq!(join["blame"], "cluster", "{join:#}");
    let causes = join["causes"].to_string();
    assert!(
        causes.contains(&format!("{JOINED} is not on the Node")),
        "{causes}"
    );
    assert!(causes.contains("never set on the Node"), "{causes}");
    assert!(
        join["conditions"]
            .to_string()
            .contains("conditions-forbidden"),
        "{join:#}"
    );
    assert!(join.get("retired").is_none(), "{join:#}");
    assert!(has_taint(&cp.get(&format!("/api/v1/nodes/{}", j.name)).1));
    drop(kubelet);
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn a_node_kept_at_the_deadline_that_registers_later_joins_late_and_is_released() {
    let verify = json!({"joinDeadline": "10s", "lateJoin": "3m"});
    let Some((cp, j)) = joining("late", verify) else {
        return;
    };
    let (out, _) = init(&cp, &j);
    assert!(out.status.success(), "{}", stderr(&out));
    let Some(bus) = bus_with_kubelet_active() else {
        return;
    };
    let proof = {
        let mut c = complete_hook_command(&cp, &j, &bus.address);
        std::thread::spawn(move || run(&mut c))
    };
    // The verdict first: no Node by the deadline, a cause that may be the node's own and no
    // like peer joined: kept.
    let decided = common::control_plane::wait_until(Duration::from_secs(40), || {
        let text = std::fs::read_to_string(j.root.path().join("var/lib/eks-nodeinit/report.json"));
        let rep = text
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok());
        rep.is_some_and(|r| r["join"]["verdict"] == "deadline")
    });
    assert!(decided, "{:#}", report(&j));
    assert_eq!(report(&j)["join"]["blame"], "cluster");
    // Then the kubelet starts, late.
    let start = super::al2023_start_of(j.root.path(), None, &j.instance);
    let mut kubelet = Kubelet::start(&cp, &j.name, &start);
    kubelet.node(&cp);
    cp.set_addresses(&j.name, NODE_IP);
    let out = proof.join().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let join = &report(&j)["join"];
    assert_eq!(join["verdict"], "joined-late", "{join:#}");
    let node = cp.get(&format!("/api/v1/nodes/{}", j.name)).1;
    let joined = condition(&node, JOINED).unwrap();
    assert_eq!(
        (joined["status"].as_str(), joined["reason"].as_str()),
        (Some("True"), Some("JoinedLate")),
        "{joined}"
    );
    assert!(apply_rule(&cp, &j.name), "the rule releases a late join");
    drop(kubelet);
}
