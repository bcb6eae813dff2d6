//! The node aspects. Each is one module that owns what it needs read from the node (`reads`),
//! its planning from the spec, the facts and the kubelet intent (`plan`), its constants and its
//! errors; its config section's checks are in `spec/`. The plan runs them in `REGISTRY` order;
//! adding an aspect is a new module and one line there (and, for a new config section, its
//! checks in `spec/` and its field in `Spec`).

use crate::base::findings::Findings;
pub(crate) use crate::facts::Reads;
use crate::facts::{Facts, Family};
pub(crate) use crate::plan::handoff::Input;
use crate::plan::handoff::{self, HandoffIntent};
use crate::plan::kubelet::KubeletIntent;
pub(crate) use crate::plan::out::Out;
use crate::spec::Spec;

pub mod accelerators;
pub mod cluster;
pub mod containerd;
pub mod credential_providers;
pub mod hardening;
pub mod hugepages;
pub mod image_gc;
pub mod imds_endpoint;
pub mod join;
pub mod kernel_modules;
pub mod kubelet_config;
pub mod launch_hook;
pub mod logind;
pub mod name_tag;
pub mod pod_capacity;
pub mod preflight;
pub mod proxy;
pub mod registration;
pub mod resolver;
pub mod resource_managers;
pub mod shutdown;
pub mod swap;
pub mod sysctls;
pub mod trust;
pub mod warm_pool;

/// One node setting: what it reads, what it contributes to the hand-off intent, what it
/// plans. Every contribution runs before every plan, so a setting's plan sees the whole intent.
pub(crate) struct Aspect {
    pub name: &'static str,
    /// What the aspect needs read from the node, given the detected family.
    pub reads: fn(&Spec, Option<Family>, &mut Reads),
    /// Its part of the hand-off intent.
    pub contribute: Contribution,
    /// Its steps, warnings and findings. Pure: everything it knows is in its input.
    pub plan: fn(&Input, &mut Out),
}

/// What a setting sets in the hand-off intent.
pub(crate) enum Contribution {
    Nothing,
    /// Its KubeletConfiguration keys, labels, taints or flags.
    Kubelet(fn(&Spec, &Facts, &mut KubeletIntent, &mut Findings)),
    /// Another part of the hand-off intent (the hold).
    Handoff(fn(&Spec, &Facts, &mut HandoffIntent, &mut Findings)),
}

impl Aspect {
    /// A setting that reads nothing, contributes nothing and plans nothing: the base of the
    /// registry's entries (`..Aspect::BASE`).
    pub const BASE: Aspect = Aspect {
        name: "",
        reads: |_, _, _| {},
        contribute: Contribution::Nothing,
        plan: |_, _| {},
    };
}

/// The hand-off intent for this spec on this node: the cluster's values, then every
/// setting's contribution in registry order, then the config's own kubelet keys.
pub(crate) fn intent(spec: &Spec, facts: &Facts, f: &mut Findings) -> HandoffIntent {
    let mut h = HandoffIntent::new(spec, facts);
    for a in REGISTRY {
        match a.contribute {
            Contribution::Nothing => {}
            Contribution::Kubelet(c) => c(spec, facts, &mut h.kubelet, f),
            Contribution::Handoff(c) => c(spec, facts, &mut h, f),
        }
    }
    h.kubelet.pass(&spec.kubelet.config, f);
    h
}

/// AL2's hand-off, bootstrap.sh's argv ([`handoff::al2`]).
pub(crate) const AL2_HANDOFF: Aspect = Aspect {
    name: "bootstrap",
    reads: handoff::al2::reads,
    plan: handoff::al2::plan,
    ..Aspect::BASE
};

/// AL2023's hand-off, the NodeConfig ([`handoff::al2023`]).
pub(crate) const AL2023_HANDOFF: Aspect = Aspect {
    name: "nodeconfig",
    reads: handoff::al2023::reads,
    plan: handoff::al2023::plan,
    ..Aspect::BASE
};

/// containerd's part of the hand-off, on both families ([`containerd::render`]).
pub(crate) const CONTAINERD_HANDOFF: Aspect = Aspect {
    name: "containerd",
    reads: containerd::render::reads,
    plan: containerd::render::plan,
    ..Aspect::BASE
};

/// The aspects, in the order their steps run.
pub(crate) const REGISTRY: &[Aspect] = &[
    resolver::ASPECT,
    preflight::ASPECT,
    hardening::ASPECT,
    accelerators::ASPECT,
    cluster::ASPECT,
    image_gc::ASPECT,
    shutdown::ASPECT,
    pod_capacity::ASPECT,
    resource_managers::ASPECT,
    name_tag::ASPECT,
    kernel_modules::ASPECT,
    sysctls::ASPECT,
    hugepages::ASPECT,
    swap::ASPECT,
    registration::ASPECT,
    kubelet_config::ASPECT,
    logind::ASPECT,
    containerd::images::ASPECT,
    containerd::pause::ASPECT,
    containerd::image_cache::ASPECT,
    containerd::registries::ASPECT,
    CONTAINERD_HANDOFF,
    proxy::ASPECT,
    imds_endpoint::ASPECT,
    trust::ASPECT,
    credential_providers::ASPECT,
    AL2_HANDOFF,
    AL2023_HANDOFF,
    warm_pool::ASPECT,
    join::ASPECT,
    launch_hook::ASPECT,
];

/// What planning tests of one aspect share: a spec from JSON, one aspect run on built facts.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    pub use crate::facts::Facts;

    /// The spec of this config (JSON text); it must be valid.
    pub fn spec(config: &str) -> Spec {
        crate::spec::from_config(&crate::config::parse(config, "t.json").unwrap()).unwrap()
    }

    /// What `aspect` plans for `spec` on a node with these facts (the hand-off intent built as
    /// the plan builds it).
    pub fn run(aspect: &Aspect, spec: &Spec, facts: &Facts) -> Out {
        let mut out = Out::default();
        let handoff = intent(spec, facts, &mut out.findings);
        let input = Input {
            spec,
            facts,
            handoff: &handoff,
        };
        (aspect.plan)(&input, &mut out);
        out
    }

    /// The findings as `field: message` lines.
    pub fn findings(out: &Out) -> Vec<String> {
        out.findings.0.iter().map(ToString::to_string).collect()
    }

    /// A config with a complete cluster (endpoint, CA, service CIDR) and `extra` top-level keys
    /// (JSON members, `""` for none).
    pub fn complete(extra: &str) -> String {
        let sep = if extra.is_empty() { "" } else { "," };
        format!(
            r#"{{"cluster":{{"name":"prod","apiServerEndpoint":"https://k.example","certificateAuthority":"Q0E=","cidr":"172.20.0.0/16"}}{sep}{extra}}}"#
        )
    }

    /// An AL2023 instance in eu-west-1 (VPC 10.0.0.0/16) with `spec`'s cluster values, its
    /// metadata from IMDS or (`metadata_file`) from a file, no endpoint overridden.
    pub fn instance(spec: &Spec, metadata_file: Option<&str>) -> Facts {
        let md = crate::instance::metadata::Metadata {
            instance_id: "i-1".into(),
            private_ipv4: Some("10.0.12.34".into()),
            instance_type: "m6i.large".into(),
            region: "eu-west-1".into(),
            availability_zone: "eu-west-1a".into(),
            vpc_cidr_blocks: Some(vec!["10.0.0.0/16".into()]),
            ..Default::default()
        };
        let mut f = Facts::builder(crate::facts::Family::Al2023)
            .instance(md)
            .cluster(crate::discovery::ClusterFact::from_spec(&spec.cluster))
            .build();
        f.reach = Some(crate::facts::Reach {
            imds_endpoint: "http://169.254.169.254".into(),
            metadata_file: metadata_file.map(Into::into),
            overrides: Default::default(),
            dual_stack: None,
        });
        f
    }

    /// What one kubelet contribution sets for `config` on an AL2 node (no finding expected).
    pub fn contributed(
        c: fn(&Spec, &Facts, &mut KubeletIntent, &mut Findings),
        config: &str,
    ) -> KubeletIntent {
        let spec = crate::spec::from_config(&crate::config::parse(config, "t").unwrap()).unwrap();
        let facts = Facts::builder(crate::facts::Family::Al2).build();
        let mut k = KubeletIntent::default();
        let mut f = Findings::default();
        c(&spec, &facts, &mut k, &mut f);
        assert!(f.is_empty(), "{:?}", f.0);
        k
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(v: serde_json::Value) -> Spec {
        crate::spec::from_config(&crate::config::parse(&v.to_string(), "t").unwrap()).unwrap()
    }

    #[test]
    fn contributors_fill_one_intent_in_order() {
        let s = spec(serde_json::json!({
            "cluster": {"name": "c"},
            "nodeGroup": {"role": "master"},
            "labels": {"team": "a"},
            "kubelet": {"imageGCHighThresholdPercent": 90, "shutdownGracePeriod": "90s", "extraArgs": ["--v=2"]}
        }));
        let facts = Facts::builder(Family::Al2).build();
        let mut f = Findings::default();
        let k = intent(&s, &facts, &mut f).kubelet;
        assert!(f.is_empty());
        let keys: Vec<&str> = k.config.iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, ["imageGCHighThresholdPercent", "shutdownGracePeriod"]);
        assert_eq!(
            k.kubelet_flags(),
            [
                "--node-labels=node.kubernetes.io/role=master,team=a",
                "--register-with-taints=CriticalAddonsOnly=true:NoSchedule",
                "--v=2"
            ]
        );
    }
}
