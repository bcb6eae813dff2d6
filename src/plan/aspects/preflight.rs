//! The checks before the hand-off (`verify.preflight`, docs/join.md): one step per check, each
//! changing nothing. The executor runs them all under the preflight's budget, before any change
//! in `fail` mode, beside the run's work in `warn` mode. A config whose cluster has no endpoint
//! or CA yet plans none (the hand-off's findings say what is missing).

use std::sync::Arc;

use base64::Engine;

use crate::facts::{Facts, Family, Reach};
use crate::instance::metadata::Metadata;
use crate::plan::join;
use crate::plan::step::When;
use crate::spec::Spec;
use crate::verify::preflight as probes;
use crate::verify::{Check, Context};

use super::{Aspect, Input, Out, Reads};

pub(crate) const ASPECT: Aspect = Aspect {
    name: "preflight",
    reads,
    plan,
    contribute: super::Contribution::Nothing,
};

fn reads(_: &Spec, _: Option<Family>, _: &mut Reads) {}

/// `https://<service host>` for the Region, or the endpoint the service is given (the SDK's
/// `AWS_ENDPOINT_URL_<SERVICE>` or `AWS_ENDPOINT_URL`, ECR's for both of ECR's;
/// `tagging.ec2Endpoint` for EC2), which the agent's calls take over the dual-stack names too.
fn aws_url(reach: &Reach, service: &str, host: &str, region: &str) -> String {
    if let Some(o) = reach.overrides.get(service) {
        return o.trim_end_matches('/').to_string();
    }
    // The agent's own calls (EC2) take the dual-stack name when the run chose it; kubelet's
    // credential provider and containerd keep the names they are given.
    let suffix = match service == "EC2" && reach.dual_stack == Some(true) {
        true => crate::base::ecr::dual_stack_suffix(region),
        false => crate::base::ecr::dns_suffix(region),
    };
    format!("https://{host}.{region}.{suffix}")
}

/// What the checks share.
fn context(spec: &Spec, facts: &Facts, md: &Metadata, reach: &Reach) -> Option<Context> {
    let c = &facts.cluster;
    let endpoint = c.api_server_endpoint.clone()?;
    let ca = base64::engine::general_purpose::STANDARD
        .decode(c.certificate_authority.as_deref()?)
        .ok()?;
    let region = md.region.as_str();
    let t = join::node_transport(spec, facts, md).unwrap_or_default();
    Some(Context {
        cluster: c.name.clone(),
        region: region.to_string(),
        endpoint,
        ca_pem: String::from_utf8_lossy(&ca).into_owned(),
        node: Some(join::node_name(spec, facts, md)),
        imds_endpoint: reach.imds_endpoint.clone(),
        dual_stack: reach.dual_stack,
        imds_v1_fallback: spec.imds.allow_v1_fallback,
        proxy: t.proxy,
        ca_bundles: t.ca_bundles,
        sts_url: reach.sts_url(region),
    })
}

/// The checks that need the network and the instance, in the order they are shown.
fn network_checks(ctx: &Arc<Context>, md: &Metadata, reach: &Reach, guarded: bool) -> Vec<Check> {
    let region = md.region.as_str();
    let name = ctx.node.as_ref().map_or("<name>".into(), |n| n.describe());
    let expect = format!("system:node:{name} in system:nodes");
    // EKS's images come from the registry of its account for the Region (nodeadm's choice);
    // the check reaches the endpoint, the same for every account of a Region.
    let (account, ecr_region) = crate::base::ecr::eks_registry(region);
    let dkr = format!("{account}.dkr.ecr");
    let ctx = || ctx.clone();
    let mut v = vec![
        Check::new(probes::Credentials { ctx: ctx() }),
        Check::new(probes::ApiServerReady { ctx: ctx() }),
        Check::new(probes::Identity { ctx: ctx(), expect }),
    ];
    if guarded {
        v.push(Check::new(probes::FleetGuard {
            ctx: ctx(),
            instance_id: md.instance_id.clone(),
            endpoint: reach.overrides.get("EC2").cloned(),
        }));
    }
    for (service, name, host) in [
        ("STS", "STS", "sts"),
        ("EC2", "EC2", "ec2"),
        ("ECR", "ECR API", "api.ecr"),
        ("ECR", "ECR registry", dkr.as_str()),
    ] {
        let at = match name {
            "ECR registry" => ecr_region.as_str(),
            _ => region,
        };
        v.push(Check::new(probes::AwsEndpoint {
            ctx: ctx(),
            service: name.to_string(),
            url: aws_url(reach, service, host, at),
        }));
    }
    v
}

/// The checks that need only what was read: the CIDRs. The VPC's blocks IMDS gives are its
/// IPv4 ones, against an IPv4 service CIDR only; the DNS address is checked in either family.
fn cidr_checks(facts: &Facts, md: &Metadata) -> Vec<Check> {
    let Some(cidr) = facts.cluster.cidr.as_ref() else {
        return Vec::new();
    };
    let mut v = Vec::new();
    let vpc = md
        .vpc_cidr_blocks
        .as_ref()
        .filter(|v| !v.is_empty() && !cidr.ipv6);
    if let Some(vpc) = vpc {
        v.push(Check::new(probes::ServiceCidr {
            cidr: cidr.text.clone(),
            vpc: vpc.clone(),
        }));
    }
    v.push(Check::new(probes::ClusterDns {
        address: crate::plan::handoff::al2::dns_ip(&cidr.text),
        cidr: cidr.text.clone(),
    }));
    v
}

fn plan(i: &Input, out: &mut Out) {
    let (spec, facts) = (i.spec, i.facts);
    let Some(when) = When::of_checks(spec.verify.preflight) else {
        return;
    };
    let (Some(md), Some(reach)) = (&facts.instance, &facts.reach) else {
        return;
    };
    let Some(ctx) = context(spec, facts, md, reach) else {
        return;
    };
    let skip = reach.metadata_file.as_ref().map(|f| {
        format!(
            "--metadata {}: not an instance (no role credentials; the cluster need not be reachable from here)",
            f.display()
        )
    });
    // The fleet guard matters where a failure may retire a node or abandon its launch: this
    // node's joined tag is what other nodes count.
    let guarded = spec.verify.join_deadline.is_some()
        && (spec.verify.on_failure != crate::config::OnFailure::Report
            || spec.launch_hook.is_some());
    let network = network_checks(&Arc::new(ctx), md, reach, guarded);
    let network = network.into_iter().map(|c| Check {
        skip: skip.clone(),
        ..c
    });
    for check in network.chain(cidr_checks(facts, md)) {
        out.steps.push(join::check_step(check, when, spec));
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{complete, instance, run, spec};
    use super::*;
    use crate::plan::step::Step;

    /// Each check planned, as the plan's JSON shows it.
    fn checks(steps: &[Step]) -> Vec<serde_json::Value> {
        steps
            .iter()
            .map(|s| match s {
                Step::Check(c) => serde_json::to_value(&c.check).unwrap(),
                other => panic!("not a check: {other:?}"),
            })
            .collect()
    }

    #[test]
    fn with_the_dual_stack_names_the_ec2_check_reaches_the_one_the_agent_calls() {
        let s = spec(&complete(""));
        let mut facts = instance(&s, None);
        facts.reach.as_mut().unwrap().dual_stack = Some(true);
        let got = checks(&run(&ASPECT, &s, &facts).steps);
        let url = |service: &str| {
            let c = got.iter().find(|c| c["service"] == service).unwrap();
            c["url"].as_str().unwrap().to_string()
        };
        assert_eq!(url("EC2"), "https://ec2.eu-west-1.api.aws");
        // kubelet's credential provider and containerd keep the names they are given.
        assert_eq!(url("STS"), "https://sts.eu-west-1.amazonaws.com");
        assert_eq!(url("ECR API"), "https://api.ecr.eu-west-1.amazonaws.com");
        // An endpoint given to EC2 (a VPC endpoint's own name) is what the agent calls, over
        // the dual-stack name: the check reaches that.
        let vpce = "https://vpce-1.ec2.eu-west-1.vpce.amazonaws.com";
        facts
            .reach
            .as_mut()
            .unwrap()
            .overrides
            .insert("EC2".into(), vpce.into());
        let got = checks(&run(&ASPECT, &s, &facts).steps);
        let ec2 = got.iter().find(|c| c["service"] == "EC2").unwrap();
        assert_eq!(ec2["url"], vpce);
    }

    #[test]
    fn a_metadata_file_skips_the_network_checks_and_runs_the_cidr_ones() {
        let s = spec(&complete(""));
        let out = run(&ASPECT, &s, &instance(&s, Some("/tmp/md.json")));
        let skip = "--metadata /tmp/md.json: not an instance (no role credentials; the cluster need not be reachable from here)";
        let endpoint = |service: &str, url: &str| serde_json::json!({"check": "awsEndpoint", "service": service, "url": url, "skip": skip});
        let want = [
            serde_json::json!({"check": "credentials", "imds": "http://169.254.169.254", "skip": skip}),
            serde_json::json!({"check": "apiServer", "endpoint": "https://k.example", "skip": skip}),
            serde_json::json!({"check": "identity", "expect": "system:node:<PrivateDnsName of i-1> in system:nodes", "skip": skip}),
            endpoint("STS", "https://sts.eu-west-1.amazonaws.com"),
            endpoint("EC2", "https://ec2.eu-west-1.amazonaws.com"),
            endpoint("ECR API", "https://api.ecr.eu-west-1.amazonaws.com"),
            endpoint(
                "ECR registry",
                "https://602401143452.dkr.ecr.eu-west-1.amazonaws.com",
            ),
            serde_json::json!({"check": "serviceCidr", "cidr": "172.20.0.0/16", "vpc": ["10.0.0.0/16"]}),
            serde_json::json!({"check": "clusterDns", "address": "172.20.0.10", "cidr": "172.20.0.0/16"}),
        ];
        assert_eq!(checks(&out.steps), want);
        // An IPv6 cluster: its DNS address as both hand-offs derive it, checked in its block;
        // the VPC's IPv4 blocks say nothing of an IPv6 service CIDR.
        let v6 = complete("").replace("172.20.0.0/16", "fd00:10:20::/108");
        let s = spec(&v6);
        let out = run(&ASPECT, &s, &instance(&s, Some("/tmp/md.json")));
        let got = checks(&out.steps);
        assert_eq!(
            got[got.len() - 1],
            serde_json::json!({"check": "clusterDns", "address": "fd00:10:20::a", "cidr": "fd00:10:20::/108"})
        );
        assert!(!got.iter().any(|c| c["check"] == "serviceCidr"), "{got:?}");
    }

    #[test]
    fn the_fleet_guard_is_checked_where_a_failure_may_retire_or_abandon() {
        let guard = |extra: &str| {
            let s = spec(&complete(extra));
            let got = checks(&run(&ASPECT, &s, &instance(&s, None)).steps);
            got.iter().any(|c| c["check"] == "fleetGuard")
        };
        assert!(!guard(""));
        assert!(guard(r#""verify":{"onFailure":"replace"}"#));
        assert!(guard(r#""lifecycle":{"completeLaunchHook":"ready"}"#));
        assert!(!guard(r#""verify":{"join":"off"}"#));
    }

    #[test]
    fn off_or_without_the_cluster_s_endpoint_plans_no_check() {
        let off = spec(&complete(r#""verify":{"preflight":"off"}"#));
        assert!(run(&ASPECT, &off, &instance(&off, None)).steps.is_empty());
        let name_only = spec(r#"{"cluster":{"name":"prod"}}"#);
        let out = run(&ASPECT, &name_only, &instance(&name_only, None));
        assert!(out.steps.is_empty(), "{:?}", out.steps);
    }
}
