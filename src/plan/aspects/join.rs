//! The proof after the hand-off (`verify.join`, docs/join.md): the run leaves the proof its job,
//! a per-boot file (mode 0600: it holds the cluster CA), with what the Node must show: the
//! kubelet intent's labels and taints, its max pods, and the reservations the plan set. The
//! packaged eks-nodeinit-launch-hook.service proves the join from it. A held hand-off (a warm
//! pool) joins later and leaves none.

use std::collections::BTreeMap;

use crate::base::k8s::milli_value;
use crate::base::node::cpu_list;
use crate::config::OnFailure;
use crate::facts::Facts;
use crate::facts::Family;
use crate::instance::userdata::UserReserved;
use crate::plan::join;
use crate::plan::kubelet::{KubeletIntent, EVICTION_HARD_MEMORY_MIB};
use crate::plan::step::{File, Mode, Record, Step};
use crate::spec::Spec;
use crate::verify::proof::{Expect, JoinJob, JOIN_JOB};
use crate::verify::record::JoinVerdict;
use crate::verify::retire::Retire;

use super::{Aspect, Input, Out, Reads};

pub(crate) const ASPECT: Aspect = Aspect {
    name: "join",
    reads,
    plan,
    contribute: super::Contribution::Nothing,
};

fn reads(spec: &Spec, family: Option<Family>, r: &mut Reads) {
    if spec.verify.join_deadline.is_some() && family.is_some() {
        r.file(JOIN_JOB);
    }
}

/// A quantity in whole units (cores × 1000 for CPU: millicores).
fn quantity_milli(v: Option<&str>) -> Option<u128> {
    milli_value(v?)
}

/// What the Node must show, from the kubelet intent.
fn expect(k: &KubeletIntent) -> Expect {
    let config: BTreeMap<&str, &serde_json::Value> =
        k.config.iter().map(|(n, v)| (*n, v)).collect();
    let pods = config.get("maxPods").and_then(|v| v.as_u64());
    let cpus = config
        .get("reservedSystemCPUs")
        .and_then(|v| v.as_str())
        .and_then(|l| cpu_list(l).ok())
        .map(|l| l.len() as u64 * 1000);
    let cpu =
        cpus.or_else(|| quantity_milli(k.kube_reserved("cpu")).and_then(|m| u64::try_from(m).ok()));
    let memory = quantity_milli(k.kube_reserved("memory"))
        .map(|m| m / 1000)
        .and_then(|b| u64::try_from(b).ok())
        .map(|b| b.saturating_add(EVICTION_HARD_MEMORY_MIB << 20));
    Expect {
        labels: k.labels.iter().cloned().collect(),
        taints: k
            .taints
            .iter()
            .map(|t| match t.value.is_empty() {
                true => format!("{}:{}", t.key, t.effect),
                false => format!("{}={}:{}", t.key, t.value, t.effect),
            })
            .collect(),
        pods,
        cpu_reserved_millis: cpu,
        memory_reserved_bytes: memory,
    }
}

/// How the node retires itself on a failed join of its own cause (`verify.onFailure`): in an
/// Auto Scaling group (IMDS gives its target lifecycle state, or its tags the group) by its
/// health, whether a launch
/// hook waits or not (the hook's `ABANDON` comes first; a verdict after the hook's completion,
/// the initialisation deadline's, needs the health); outside one only with `terminate`.
fn retire(spec: &Spec, facts: &Facts, warnings: &mut Vec<String>) -> Option<Retire> {
    let in_group = in_group(facts);
    match (spec.verify.on_failure, in_group) {
        (OnFailure::Report, _) => None,
        (_, true) if facts.autoscaling_group().is_none() => {
            warnings.push(format!("verify.onFailure is `{}`, but the instance's Auto Scaling group is not known (no instance-metadata tags, and DescribeTags gave no `aws:autoscaling:groupName`): its peers cannot be told from the rest of the account, so a failed join is only reported; turn on instance-metadata tags (`InstanceMetadataTags=enabled`)", spec.verify.on_failure.as_str()));
            None
        }
        (_, true) => Some(Retire::Unhealthy),
        (OnFailure::Terminate, false) => Some(Retire::Terminate),
        (OnFailure::Replace, false) => {
            warnings.push("verify.onFailure is `replace`, but the instance is in no Auto Scaling group (IMDS has no target lifecycle state): nothing would replace it, so a failed join is only reported; `terminate` has it terminate itself".into());
            None
        }
    }
}

/// Whether the instance is in an Auto Scaling group: IMDS gives its target lifecycle state (a
/// detached instance left its group: nothing would replace it on its health), else its tags
/// name the group.
fn in_group(facts: &Facts) -> bool {
    let state = facts
        .instance
        .as_ref()
        .and_then(|m| m.target_lifecycle_state.as_deref());
    match state {
        Some("Detached") => false,
        Some(_) => true,
        None => facts.autoscaling_group().is_some(),
    }
}

/// `verify.initDeadline`; with a startup taint and none set,
/// [`STARTUP_INIT_DEADLINE`](crate::spec::verify::STARTUP_INIT_DEADLINE), so that a node
/// whose conditions cannot be set meets a verdict.
fn init_deadline(spec: &Spec) -> Option<std::time::Duration> {
    let tainted = spec.registration.startup_taint.is_some();
    spec.verify
        .init_deadline
        .or(tainted.then_some(crate::spec::verify::STARTUP_INIT_DEADLINE))
}

/// What the Node must show on this node: [`expect`], with the reservations the user data's
/// NodeConfig gives the kubelet beside the agent's (AL2023), and without the startup taint (a
/// controller removes it when it will).
fn expect_on(k: &KubeletIntent, facts: &Facts, spec: &Spec) -> Expect {
    let mut e = expect(k);
    if let Some(t) = &spec.registration.startup_taint {
        let text = match t.value.is_empty() {
            true => format!("{}:{}", t.key, t.effect),
            false => format!("{}={}:{}", t.key, t.value, t.effect),
        };
        e.taints.retain(|x| *x != text);
    }
    // The NodeConfigs' reservations, then the config's own `kubelet.config` ones over them.
    let mut r = facts
        .node_configs
        .as_ref()
        .map(|nc| (*nc.reserved).clone())
        .unwrap_or_default();
    for (key, into) in [
        ("systemReserved", &mut r.system_reserved),
        ("evictionHard", &mut r.eviction_hard),
    ] {
        if let Some(serde_json::Value::Object(m)) = k.passed(key) {
            into.extend(m.clone());
        }
    }
    let reserved_cpus = k.config.iter().any(|(n, _)| *n == "reservedSystemCPUs");
    user_reserved(&mut e, &r, reserved_cpus);
    e
}

/// The user data's system-reserved added, and its `evictionHard` `memory.available` in place
/// of the default 100Mi (the kubelet merges the user's map over nodeadm's key by key); a
/// reservation the agent cannot model (a flag, a percentage, a value it cannot read) leaves
/// that resource uncompared rather than a false mismatch. With `reservedSystemCPUs` the
/// kubelet holds back those CPUs instead of the reserved CPU quantities.
fn user_reserved(e: &mut Expect, r: &UserReserved, reserved_cpus: bool) {
    if r.unmodeled.is_some() {
        e.cpu_reserved_millis = None;
        e.memory_reserved_bytes = None;
        return;
    }
    // Absent: `Some(0)`; set but not an exact quantity: `None`.
    let milli = |v: Option<&serde_json::Value>| match v {
        None => Some(0),
        Some(v) => v.as_str().and_then(milli_value),
    };
    let cpu = milli(r.system_reserved.get("cpu"));
    if !reserved_cpus {
        e.cpu_reserved_millis = match (e.cpu_reserved_millis, cpu) {
            (Some(c), Some(s)) => u64::try_from(s).ok().and_then(|s| c.checked_add(s)),
            _ => None,
        };
    }
    let system = milli(r.system_reserved.get("memory")).map(|m| m / 1000);
    let threshold = match r.eviction_hard.get("memory.available") {
        None => Some(u128::from(EVICTION_HARD_MEMORY_MIB) << 20),
        v => milli(v).map(|m| m / 1000),
    };
    let default = EVICTION_HARD_MEMORY_MIB << 20;
    e.memory_reserved_bytes = match (e.memory_reserved_bytes, system, threshold) {
        (Some(m), Some(s), Some(t)) => u128::from(m.saturating_sub(default))
            .checked_add(s)
            .and_then(|x| x.checked_add(t))
            .and_then(|x| u64::try_from(x).ok()),
        _ => None,
    };
}

/// The proof's job from the spec and the facts, for the cluster's (endpoint, CA, the proof's
/// deadline in seconds).
fn job_of(
    i: &Input,
    (md, reach): (&crate::instance::metadata::Metadata, &crate::facts::Reach),
    (endpoint, certificate_authority, deadline_secs): (String, String, u64),
    warnings: &mut Vec<String>,
) -> JoinJob {
    let (spec, facts) = (i.spec, i.facts);
    JoinJob {
        cluster: facts.cluster.name.clone(),
        region: md.region.clone(),
        endpoint,
        certificate_authority,
        node: join::node_name(spec, facts, md),
        instance_id: md.instance_id.clone(),
        group: facts.autoscaling_group().map(String::from),
        sts_url: reach.sts_url(&md.region),
        imds_endpoint: reach.imds_endpoint.clone(),
        dual_stack: reach.dual_stack,
        imds_v1_fallback: spec.imds.allow_v1_fallback,
        deadline_secs,
        strict: spec.verify.join_strict,
        // The job names the endpoints itself (`imdsEndpoint`, `dualStack`).
        transport: join::node_transport(spec, facts, md)
            .and_then(|t| crate::aws::Transport::with_endpoints(Some(t), Default::default())),
        expect: expect_on(&i.handoff.kubelet, facts, spec),
        init_deadline_secs: init_deadline(spec).map(|d| d.as_secs()),
        init_conditions: spec.verify.init_conditions.clone(),
        retire: retire(spec, facts, warnings),
        group_unknown: in_group(facts) && facts.autoscaling_group().is_none(),
        late_join_secs: spec.verify.late_join.as_secs(),
        hold_mismatch: spec.verify.hold_mismatch,
    }
}

fn plan(i: &Input, out: &mut Out) {
    let (spec, facts) = (i.spec, i.facts);
    out.warnings
        .extend(crate::spec::registration::startup_advice(
            &spec.registration,
        ));
    // A check before the changes that fails, whichever setting planned it, is the join's
    // verdict: no hand-off. The executor runs this only then.
    if facts.family().is_some() {
        out.on_failure.push(Step::Record(Record {
            property: join::RECORD.into(),
            key: "verdict".into(),
            value: serde_json::json!(JoinVerdict::ChecksFailed.as_str()),
        }));
    }
    if spec.verify.join_deadline.is_none() && facts.family().is_some() && i.handoff.hold.is_none() {
        // No proof comes: `status` says so instead of waiting for a verdict for ever.
        join::record(out, "unproven", serde_json::json!(true));
    }
    let (Some(deadline), Some(_), Some(md), Some(reach)) = (
        spec.verify.join_deadline,
        facts.family(),
        &facts.instance,
        &facts.reach,
    ) else {
        return;
    };
    let c = &facts.cluster;
    let (Some(endpoint), Some(ca)) = (&c.api_server_endpoint, &c.certificate_authority) else {
        return;
    };
    if i.handoff.hold.is_some() {
        return;
    }
    let cluster = (endpoint.clone(), ca.clone(), deadline.as_secs());
    let job = job_of(i, (md, reach), cluster, &mut out.warnings);
    out.secrets.push(ca.clone());
    let Some(current) = facts.current_file(JOIN_JOB, "verify.join", &mut out.findings) else {
        return;
    };
    // The proxy's credentials, new and old (a changed password or a proxy removed), are never
    // shown in the job's diff.
    let new_text = job.to_text();
    for text in [Some(new_text.as_str()), current.content.as_deref()] {
        out.secrets.extend(
            text.map(crate::base::text::credentials_in)
                .unwrap_or_default(),
        );
    }
    if let Some(step) = File::wanted(
        JOIN_JOB,
        "the proof's job: what the Node must show, for eks-nodeinit-launch-hook.service",
        (current.content, current.mode),
        new_text,
        Mode::Exact(0o600),
    ) {
        out.steps.push(step);
        // The report's join record, which the proof completes, holds this run's phases.
        out.timelines.insert(join::RECORD.into());
        // The launch hook's aspect starts the unit when there is a hook; a run from a user-data
        // script (not the agent's unit, which pulls it in) has it started here otherwise.
        if spec.launch_hook.is_none() {
            out.steps.push(join::start_unit(
                "it proves the join once kubelet is active",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{complete, instance, run, spec};
    use super::*;
    use crate::plan::step::{Step, UnitJob};

    /// The user data's NodeConfig with this `kubelet` section, read as nodeadm reads it.
    fn user_reserved_of(kubelet: &str) -> UserReserved {
        let doc = format!("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster: {{name: c}}\n  kubelet: {kubelet}\n");
        *crate::instance::userdata::read(doc.as_bytes())
            .unwrap()
            .reserved
    }

    #[test]
    fn the_user_datas_system_reserved_and_eviction_hard_are_in_what_the_node_must_show() {
        let base = || Expect {
            cpu_reserved_millis: Some(70),
            memory_reserved_bytes: Some((574 + 100) << 20),
            ..Expect::default()
        };
        let mut e = base();
        let r = user_reserved_of(
            r#"{config: {systemReserved: {cpu: 100m, memory: 256Mi}, evictionHard: {memory.available: 200Mi}}}"#,
        );
        user_reserved(&mut e, &r, false);
        assert_eq!(e.cpu_reserved_millis, Some(170));
        assert_eq!(e.memory_reserved_bytes, Some((574 + 256 + 200) << 20));
        // evictionHard without memory.available keeps nodeadm's 100Mi (maps merge by key).
        let mut e = base();
        user_reserved(
            &mut e,
            &user_reserved_of(r#"{config: {evictionHard: {nodefs.available: 5%}}}"#),
            false,
        );
        assert_eq!(e.memory_reserved_bytes, Some((574 + 100) << 20));
        // Reserved CPUs replace the CPU quantities.
        let mut e = base();
        user_reserved(
            &mut e,
            &user_reserved_of(r#"{config: {systemReserved: {cpu: "1"}}}"#),
            true,
        );
        assert_eq!(e.cpu_reserved_millis, Some(70));
        // What the agent cannot model is not compared: a percentage, a flag.
        for k in [
            r#"{config: {evictionHard: {memory.available: 5%}}}"#,
            r#"{flags: ["--system-reserved=memory=1Gi"]}"#,
        ] {
            let mut e = base();
            user_reserved(&mut e, &user_reserved_of(k), false);
            assert_eq!(e.memory_reserved_bytes, None, "{k}");
        }
    }

    #[test]
    fn the_configs_own_reservations_are_in_what_the_node_must_show() {
        let s = crate::plan::aspects::testing::spec(
            r#"{"cluster":{"name":"c"},"kubelet":{"config":{"systemReserved":{"memory":"256Mi"},"evictionHard":{"memory.available":"200Mi"}}}}"#,
        );
        let facts = crate::facts::Facts::builder(Family::Al2).build();
        let mut k = KubeletIntent::default();
        k.set(
            "kubeReserved",
            serde_json::json!({"cpu": "70m", "memory": "574Mi"}),
        );
        k.pass(
            &s.kubelet.config,
            &mut crate::base::findings::Findings::default(),
        );
        let e = expect_on(&k, &facts, &s);
        assert_eq!(e.memory_reserved_bytes, Some((574 + 256 + 200) << 20));
        assert_eq!(e.cpu_reserved_millis, Some(70));
    }

    /// The sample instance for `s`, with no proof's job written yet.
    fn without_a_job(s: &Spec) -> Facts {
        let mut facts = instance(s, None);
        facts.set_file(
            JOIN_JOB,
            crate::os::fsutil::FileFact {
                content: Ok(None),
                mode: None,
                link: None,
            },
        );
        facts
    }

    #[test]
    fn with_the_proof_off_the_report_says_no_verdict_comes() {
        let s = spec(&complete(r#""verify":{"join":"off"}"#));
        let out = run(&ASPECT, &s, &instance(&s, None));
        assert!(out.steps.is_empty(), "{:?}", out.steps);
        assert_eq!(
            out.record.get("join"),
            Some(&serde_json::json!({"unproven": true}))
        );
        let s = spec(&complete(""));
        let facts = without_a_job(&s);
        assert!(!run(&ASPECT, &s, &facts).record.contains_key("join"));
    }

    #[test]
    fn the_proofs_job_is_written_0600_and_its_unit_started_the_ca_a_secret() {
        let s = spec(&complete(r#""labels":{"team":"a"}"#));
        let facts = without_a_job(&s);
        let out = run(&ASPECT, &s, &facts);
        let [Step::File(f), Step::Unit(u)] = &out.steps[..] else {
            panic!("{:?}", out.steps)
        };
        assert_eq!(
            (f.path.as_path(), f.mode),
            (std::path::Path::new(JOIN_JOB), 0o600)
        );
        let job: serde_json::Value = serde_json::from_str(&f.new).unwrap();
        assert_eq!(job["endpoint"], "https://k.example", "{job:#}");
        assert_eq!(job["instanceId"], "i-1", "{job:#}");
        assert!(
            matches!(&u.job, UnitJob::Start { unit } if unit == crate::plan::join::UNIT),
            "{u:?}"
        );
        assert_eq!(out.secrets, ["Q0E="]);
    }

    /// The job planned for `extra` on the sample instance, its target lifecycle state `state`:
    /// the job and the warnings.
    fn job_with(extra: &str, state: Option<&str>) -> (serde_json::Value, Vec<String>) {
        job_in(extra, state, None)
    }

    /// [`job_with`], the instance's group named by its tags (`group`).
    fn job_in(
        extra: &str,
        state: Option<&str>,
        group: Option<&str>,
    ) -> (serde_json::Value, Vec<String>) {
        let s = spec(&complete(extra));
        let mut facts = without_a_job(&s);
        if let Some(md) = facts.instance.as_mut() {
            md.target_lifecycle_state = state.map(String::from);
            md.autoscaling_group_name = group.map(String::from);
        }
        let out = run(&ASPECT, &s, &facts);
        let Some(Step::File(f)) = out.steps.first() else {
            panic!("{:?}", out.steps)
        };
        (serde_json::from_str(&f.new).unwrap(), out.warnings)
    }

    #[test]
    fn the_node_retires_by_its_health_in_a_group_and_terminates_outside_only_when_asked() {
        let on = |mode: &str| format!(r#""verify":{{"onFailure":"{mode}"}}"#);
        for mode in ["replace", "terminate"] {
            let (job, w) = job_in(&on(mode), Some("InService"), Some("asg-a"));
            assert_eq!(
                (job["retire"].as_str(), w.len()),
                (Some("unhealthy"), 0),
                "{mode}"
            );
            // In a group whose name is unknown: its peers cannot be told, so no retirement,
            // and the plan says why.
            let (job, w) = job_with(&on(mode), Some("InService"));
            assert!(job.get("retire").is_none(), "{job:#}");
            assert_eq!(job["groupUnknown"], true, "{job:#}");
            assert!(w[0].contains("group is not known"), "{w:?}");
        }
        let (job, w) = job_with(&on("terminate"), None);
        assert_eq!((job["retire"].as_str(), w.len()), (Some("terminate"), 0));
        // The late join's watch by default; a held mismatch only when the config asks.
        assert_eq!(job["lateJoinSecs"], 1800);
        assert!(job.get("holdMismatch").is_none(), "{job:#}");
        let (job, _) = job_with(r#""verify":{"mismatch":"hold","lateJoin":"0s"}"#, None);
        assert_eq!(
            (job["holdMismatch"].as_bool(), job["lateJoinSecs"].as_u64()),
            (Some(true), Some(0))
        );
        // A group its tags name is a group, whatever IMDS says of its lifecycle; a detached
        // instance is in none, whatever its tags still say.
        let (job, _) = job_in(&on("terminate"), None, Some("asg-a"));
        assert_eq!(job["retire"], "unhealthy");
        let (job, _) = job_in(&on("terminate"), Some("Detached"), Some("asg-a"));
        assert_eq!(job["retire"], "terminate");
        // `replace` outside a group: nothing would replace it; said.
        let (job, w) = job_with(&on("replace"), None);
        assert!(job.get("retire").is_none(), "{job:#}");
        assert!(w[0].contains("in no Auto Scaling group"), "{w:?}");
        let (job, _) = job_with("", Some("InService"));
        assert!(job.get("retire").is_none(), "{job:#}");
    }

    #[test]
    fn the_startup_taint_is_not_expected_on_the_node_and_the_deadline_is_carried() {
        let (job, _) = job_with(
            r#""taints":["a=b:NoSchedule"],"lifecycle":{"startupTaint":"readiness.k8s.io/boot=pending:NoSchedule"},"verify":{"initDeadline":"10m","initConditions":["gpu.example/Ready"]}"#,
            None,
        );
        assert_eq!(
            job["expect"]["taints"],
            serde_json::json!(["a=b:NoSchedule"])
        );
        assert_eq!(job["initDeadlineSecs"], 600);
        assert_eq!(
            job["initConditions"],
            serde_json::json!(["gpu.example/Ready"])
        );
    }

    #[test]
    fn join_off_plans_nothing() {
        let s = spec(&complete(r#""verify":{"join":"off"}"#));
        assert!(run(&ASPECT, &s, &instance(&s, None)).steps.is_empty());
    }
}
