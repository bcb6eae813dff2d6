//! The join's parts that several settings share: the name the hand-off gives the Node, how
//! the node's own calls go after the hand-off, the report property that holds the boot's join
//! record, and the packaged unit that runs the work after the hand-off. They sit here, below
//! the settings, so that no setting imports another for them.

use crate::facts::{Facts, Family};
use crate::instance::metadata::Metadata;
use crate::plan::out::Out;
use crate::plan::step::{CheckStep, Step, Unit, When};
use crate::spec::Spec;
use crate::verify::name::NodeName;

/// The report property of the join: the boot's join record, with the run's phases.
pub const RECORD: &str = "join";

/// The join record's key for the results of the checks that the join needs.
pub const PREFLIGHT: &str = "preflight";

/// A check the join needs, run in `when` under the checks' budget, its result in the join
/// record's `preflight`.
pub fn check_step(check: crate::verify::Check, when: When, spec: &Spec) -> Step {
    let step = CheckStep::new(check, when, spec.verify.budget);
    Step::Check(step.recorded_at(RECORD, PREFLIGHT))
}

/// `key` = `value` in the join record as the plan knows it before the run.
pub(crate) fn record(out: &mut Out, key: &str, value: serde_json::Value) {
    let rec = out
        .record
        .entry(RECORD.into())
        .or_insert_with(|| serde_json::json!({}));
    if !rec.is_object() {
        *rec = serde_json::json!({});
    }
    rec[key] = value;
}

/// The packaged unit that runs this boot's work after the hand-off once kubelet is active: the
/// steps after the hand-off, the proof, the launch hook's completion.
pub const UNIT: &str = "eks-nodeinit-launch-hook.service";

/// [`UNIT`] started because `why`: the run of a user-data script (cloud-final) is not the agent's
/// unit, which pulls it in.
pub fn start_unit(why: &str) -> Step {
    Unit::start(UNIT, why)
}

/// The name the hand-off gives the Node: the last `--hostname-override` kubelet is given (the
/// config's `kubelet.extraArgs`, which both hand-offs append last, or on AL2023 the user data's
/// NodeConfig flags), else on AL2023 the instance id when the user data's NodeConfig turns on
/// `InstanceIdNodeName`, else EC2's `PrivateDnsName` — never IMDS `local-hostname`. kubelet
/// trims and lower-cases an override.
pub fn node_name(spec: &Spec, facts: &Facts, md: &Metadata) -> NodeName {
    const FLAG: &str = "--hostname-override=";
    let overridden = |v: &str, source: String| NodeName::Override {
        name: v.trim().to_ascii_lowercase(),
        source,
    };
    let extra = spec.registration.extra_args.iter().enumerate().rev();
    if let Some((i, v)) = extra
        .filter_map(|(i, a)| a.strip_prefix(FLAG).map(|v| (i, v)))
        .find(|(_, v)| !v.trim().is_empty())
    {
        return overridden(v, format!("kubelet.extraArgs[{i}]"));
    }
    let naming = match (&facts.node_configs, facts.family()) {
        (Some(nc), Some(Family::Al2023)) => Some(&nc.naming),
        _ => None,
    };
    if let Some((Some(v), source)) = naming.and_then(|n| n.hostname_override.as_ref()) {
        if !v.trim().is_empty() {
            return overridden(v, source.clone());
        }
    }
    let by_id = match spec.registration.node_name {
        Some(n) => n == crate::config::NodeNaming::InstanceId,
        None => naming.is_some_and(|n| n.instance_id_node_name),
    };
    match by_id {
        true => NodeName::InstanceId {
            name: md.instance_id.clone(),
        },
        false => NodeName::PrivateDnsName {
            instance_id: md.instance_id.clone(),
        },
    }
}

/// How the node's own calls after the hand-off go: the config's proxy (with the NO_PROXY
/// kubelet gets) and CA bundles, whatever the proof's unit environment holds.
pub fn node_transport(spec: &Spec, facts: &Facts, md: &Metadata) -> Option<crate::aws::Transport> {
    let cidr = facts.cluster.cidr.as_ref().map(|c| c.text.as_str());
    let proxy = spec.proxy.as_ref().map(|p| crate::aws::http::Proxy {
        http: p.http.as_ref().map(|u| u.url.clone()),
        https: p.https.as_ref().map(|u| u.url.clone()),
        no_proxy: p
            .no_proxy_list(crate::spec::proxy::NoProxyInputs {
                region: &md.region,
                vpc_cidrs: md.vpc_cidr_blocks.as_deref().unwrap_or_default(),
                service_cidr: cidr,
            })
            .join(","),
    });
    let t = crate::aws::Transport {
        proxy,
        ca_bundles: spec.ca_bundles(),
        ..Default::default()
    };
    crate::aws::Transport::with_endpoints(Some(t), facts.endpoints())
}
