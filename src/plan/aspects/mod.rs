//! The node aspects. Each is one module that owns what it needs read from the node (`reads`),
//! its planning from the spec, the facts and the kubelet intent (`plan`), its constants and its
//! errors; its config section's checks are in `spec/`. The plan runs them in `REGISTRY` order;
//! adding an aspect is a new module and one line there (and, for a new config section, its
//! checks in `spec/` and its field in `Spec`).

use crate::base::findings::Findings;
pub(crate) use crate::facts::Reads;
use crate::facts::{Facts, Family};
use crate::plan::handoff::HandoffIntent;
use crate::plan::step::{File, Mode, Step};
use crate::spec::Spec;

pub mod bootstrap;
pub mod cluster;
pub mod hugepages;
pub mod join;
pub mod kernel_modules;
pub mod kubelet_config;
pub mod launch_hook;
pub mod logind;
pub mod name_tag;
pub mod nodeconfig;
pub mod pod_capacity;
pub mod preflight;
pub mod proxy;
pub mod registries;
pub mod swap;
pub mod sysctls;
pub mod trust;
pub mod warm_pool;

/// One node aspect.
pub(crate) struct Aspect {
    pub name: &'static str,
    /// What the aspect needs read from the node, given the detected family.
    pub reads: fn(&Spec, Option<Family>, &mut Reads),
    /// Its steps, warnings and findings. Pure: everything it knows is in its input.
    pub plan: fn(&Input, &mut Out),
}

/// What an aspect plans from: the checked config, the world as read, and the hand-off intent
/// built from both once.
pub(crate) struct Input<'a> {
    pub spec: &'a Spec,
    pub facts: &'a Facts,
    pub handoff: &'a HandoffIntent,
}

/// The aspects, in the order their steps run.
pub(crate) const REGISTRY: &[Aspect] = &[
    preflight::ASPECT,
    cluster::ASPECT,
    pod_capacity::ASPECT,
    name_tag::ASPECT,
    kernel_modules::ASPECT,
    sysctls::ASPECT,
    hugepages::ASPECT,
    swap::ASPECT,
    kubelet_config::ASPECT,
    logind::ASPECT,
    registries::ASPECT,
    proxy::ASPECT,
    trust::ASPECT,
    bootstrap::ASPECT,
    nodeconfig::ASPECT,
    warm_pool::ASPECT,
    join::ASPECT,
    launch_hook::ASPECT,
];

/// What one aspect's planning produced.
#[derive(Debug, Default)]
pub(crate) struct Out {
    pub steps: Vec<Step>,
    pub warnings: Vec<String>,
    pub findings: Findings,
    /// Values the aspect put into a step that must never be shown (the cluster CA).
    pub secrets: Vec<String>,
    /// What the aspect says beside its steps ([`crate::plan::Note`]).
    pub notes: Vec<crate::plan::Note>,
    /// Steps run when a step before the changes fails (the plan's `on_failure`).
    pub on_failure: Vec<Step>,
    /// Report properties known before the run, by key.
    pub record: std::collections::BTreeMap<String, serde_json::Value>,
    /// Report properties that receive the run's phases.
    pub timelines: std::collections::BTreeSet<String>,
}

impl Out {
    /// Plan `path` to hold `new` with `mode`'s rule ([`File::wanted`]), from the file as the
    /// facts hold it; one the agent cannot replace is a finding for `field`. Whether a step was
    /// planned.
    pub fn file(
        &mut self,
        facts: &Facts,
        field: &str,
        path: &str,
        purpose: impl Into<String>,
        new: String,
        mode: Mode,
    ) -> bool {
        let Some(cur) = facts.current_file(path, field, &mut self.findings) else {
            return false;
        };
        self.file_from(cur, path, purpose, new, mode)
    }

    /// [`Out::file`] for a file already read from the facts.
    pub fn file_from(
        &mut self,
        cur: crate::facts::Current,
        path: &str,
        purpose: impl Into<String>,
        new: String,
        mode: Mode,
    ) -> bool {
        let step = File::wanted(path, purpose, (cur.content, cur.mode), new, mode);
        let planned = step.is_some();
        self.steps.extend(step);
        planned
    }
}

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
        let handoff = crate::plan::handoff::intent(spec, facts, &mut out.findings);
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
        });
        f
    }
}
