//! The proof after the hand-off (`verify.join`, docs/join.md): the run leaves the proof its job,
//! a per-boot file (mode 0600: it holds the cluster CA), with what the Node must show: the
//! kubelet intent's labels and taints, its max pods, and the reservations the plan set. The
//! packaged eks-nodeinit-launch-hook.service proves the join from it. A held hand-off (a warm
//! pool) joins later and leaves none.

use std::collections::BTreeMap;

use crate::base::podcap::{node::cpu_list, EVICTION_HARD_MEMORY_MIB};
use crate::facts::Family;
use crate::plan::kubelet::KubeletIntent;
use crate::plan::step::{File, IfFailed, Mode, Step, Unit, UnitJob};
use crate::spec::pod_capacity::milli_value;
use crate::spec::Spec;
use crate::verify::proof::{Expect, JoinJob, JOIN_JOB};

use super::{Aspect, Input, Out, Reads};

pub(crate) const ASPECT: Aspect = Aspect {
    name: "join",
    reads,
    plan,
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
pub(crate) fn expect(k: &KubeletIntent) -> Expect {
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

fn plan(i: &Input, out: &mut Out) {
    let (spec, facts) = (i.spec, i.facts);
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
    if super::warm_pool::held(spec, facts).is_some() {
        return;
    }
    let job = JoinJob {
        cluster: c.name.clone(),
        region: md.region.clone(),
        endpoint: endpoint.clone(),
        certificate_authority: ca.clone(),
        node_name: md.local_hostname.clone(),
        sts_url: reach.sts_url(&md.region),
        imds_endpoint: reach.imds_endpoint.clone(),
        deadline_secs: deadline.as_secs(),
        expect: expect(&i.handoff.kubelet),
    };
    out.secrets.push(ca.clone());
    let Some(current) = facts.current_file(JOIN_JOB, "verify.join", &mut out.findings) else {
        return;
    };
    if let Some(step) = File::wanted(
        JOIN_JOB,
        "the proof's job: what the Node must show, for eks-nodeinit-launch-hook.service",
        (current.content, current.mode),
        job.to_text(),
        Mode::Exact(0o600),
    ) {
        out.steps.push(step);
        // The launch hook's aspect starts the unit when there is a hook; a run from a user-data
        // script (not the agent's unit, which pulls it in) has it started here otherwise.
        if spec.launch_hook.is_none() {
            out.steps.push(Step::Unit(Unit {
                job: UnitJob::Start {
                    unit: super::launch_hook::UNIT.into(),
                },
                why: "it proves the join once kubelet is active (in the packaged unit's run it is already pulled in, and this is the same job)".into(),
                required: false,
                if_failed: IfFailed::new(format!("{} not started", super::launch_hook::UNIT), ""),
            }));
        }
    }
}
