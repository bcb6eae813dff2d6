//! The hand-off room: one [`HandoffIntent`] — the cluster's values, the kubelet intent, the
//! containerd part and the node settings the hand-off target applies itself (the instance
//! store, the warm-pool hold) — filled by the settings' contributions (`Contribution::Handoff`,
//! `Contribution::Kubelet` in `plan::aspects`) before any setting plans, and rendered here:
//! bootstrap.sh's argv on AL2 ([`al2`]), the NodeConfig on AL2023 ([`al2023`]); containerd's
//! files on both are rendered in containerd's own room (`plan::aspects::containerd::render`). A setting both targets apply is a contribution, its config
//! section, and a line in each renderer; a renderer refuses, as a finding, what its target
//! cannot do. Nothing here imports a setting's module (`plan::aspects` imports this room); the
//! CRI pull settings' type comes from containerd's TOML grammar (`aspects::containerd::pull`).

use std::collections::BTreeMap;

use crate::config::LocalStorageSettings;
use crate::discovery::ClusterFact;
use crate::facts::Facts;
use crate::plan::aspects::containerd::pull::CriPull;
use crate::plan::kubelet::KubeletIntent;
use crate::spec::registries::RegistrySpec;
use crate::spec::Spec;

pub mod al2;
pub mod al2023;
mod nodeadm_d;

/// The endpoint a hand-off must be told (nodeadm's units here, bootstrap.sh's environment on
/// AL2): the one the boot found, on an instance without IPv4, where it is not IPv4's.
fn untold(facts: &crate::facts::Facts) -> Option<String> {
    let (md, reach) = (facts.instance.as_ref()?, facts.reach.as_ref()?);
    let found = reach.imds_endpoint.trim_end_matches('/');
    (md.private_ipv4.is_none() && found != crate::instance::imds::DEFAULT_ENDPOINT)
        .then(|| found.to_string())
}

/// What the AWS SDKs of a hand-off (nodeadm's, bootstrap.sh's AWS CLI) read to call as the
/// boot did on an instance without IPv4: where IMDS is (`AWS_EC2_METADATA_SERVICE_ENDPOINT`:
/// the role's credentials, and nodeadm's own IMDS reads), and the services' dual-stack names
/// when the boot took them (`AWS_USE_DUALSTACK_ENDPOINT`: nodeadm's DescribeInstances).
pub(crate) fn sdk_env(facts: &crate::facts::Facts) -> BTreeMap<String, String> {
    let Some(endpoint) = untold(facts) else {
        return BTreeMap::new();
    };
    let mut env = BTreeMap::from([(crate::instance::imds::ENDPOINT_ENV.to_string(), endpoint)]);
    if facts.reach.as_ref().and_then(|r| r.dual_stack) == Some(true) {
        env.insert("AWS_USE_DUALSTACK_ENDPOINT".into(), "true".into());
    }
    env
}

/// What the agent hands the node's bootstrapper.
#[derive(Debug, Clone, PartialEq)]
pub struct HandoffIntent {
    /// The cluster's values: the config's with what discovery found.
    pub cluster: ClusterFact,
    pub kubelet: KubeletIntent,
    /// The instance store's disks, set up by bootstrap.sh or nodeadm.
    pub local_storage: Option<LocalStorageSettings>,
    /// The node's resolvers (`network`), for nodeadm's `instance.network`.
    pub network: Option<crate::spec::network::NetworkSpec>,
    /// containerd's settings the hand-off leaves on the node.
    pub containerd: ContainerdIntent,
    /// `kubelet.nodeName` for nodeadm's `InstanceIdNodeName` gate, when the config says.
    pub instance_id_node_name: Option<bool>,
    /// The target lifecycle state that holds the hand-off (a warm pool,
    /// `lifecycle.warmPool: auto`): the steps run, the node does not join yet.
    pub hold: Option<String>,
}

impl HandoffIntent {
    /// The intent before any setting's contribution: the cluster's values as the facts hold
    /// them and the instance store as configured.
    pub(crate) fn new(spec: &Spec, facts: &Facts) -> HandoffIntent {
        HandoffIntent {
            cluster: facts.cluster.clone(),
            kubelet: KubeletIntent::default(),
            local_storage: spec.local_storage.clone(),
            network: spec.network.clone(),
            containerd: ContainerdIntent::default(),
            instance_id_node_name: spec
                .registration
                .node_name
                .map(|n| n == crate::config::NodeNaming::InstanceId),
            hold: None,
        }
    }
}

/// What an aspect plans from: the checked config, the world as read, and the hand-off intent
/// built from both once.
pub(crate) struct Input<'a> {
    pub spec: &'a Spec,
    pub facts: &'a Facts,
    pub handoff: &'a HandoffIntent,
}

/// The containerd part of the hand-off intent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContainerdIntent {
    /// The registries whose hosts directory the hand-off writes (`registries`).
    pub registries: Vec<RegistrySpec>,
    /// The CRI plugin's pull settings.
    pub pull: CriPull,
    /// nodeadm's `FastImagePull` feature gate (AL2023).
    pub fast_image_pull: bool,
    /// The user data's NodeConfig gives containerd a config in version 3's tables (AL2023):
    /// the fragment names the same tables, so nodeadm keeps version 3.
    pub user_config_v3: bool,
}
