//! The hand-off room: one [`HandoffIntent`] — the cluster's values, the kubelet intent, the
//! containerd part and the node settings the hand-off target applies itself (the instance
//! store, the warm-pool hold) — filled by the settings' contributions (`Contribution::Handoff`,
//! `Contribution::Kubelet` in `plan::aspects`) before any setting plans, and rendered here:
//! bootstrap.sh's argv on AL2 ([`al2`]), the NodeConfig on AL2023 ([`al2023`]); containerd's
//! files on both are rendered in containerd's own room (`plan::aspects::containerd::render`). A setting both targets apply is a contribution, its config
//! section, and a line in each renderer; a renderer refuses, as a finding, what its target
//! cannot do. Nothing here imports a setting's module (`plan::aspects` imports this room); the
//! CRI pull settings' type comes from containerd's TOML grammar (`aspects::containerd::pull`).

use crate::config::LocalStorageSettings;
use crate::discovery::ClusterFact;
use crate::facts::Facts;
use crate::plan::aspects::containerd::pull::CriPull;
use crate::plan::kubelet::KubeletIntent;
use crate::spec::registries::RegistrySpec;
use crate::spec::Spec;

pub mod al2;
pub mod al2023;

/// What the agent hands the node's bootstrapper.
#[derive(Debug, Clone, PartialEq)]
pub struct HandoffIntent {
    /// The cluster's values: the config's with what discovery found.
    pub cluster: ClusterFact,
    pub kubelet: KubeletIntent,
    /// The instance store's disks, set up by bootstrap.sh or nodeadm.
    pub local_storage: Option<LocalStorageSettings>,
    /// containerd's settings the hand-off leaves on the node.
    pub containerd: ContainerdIntent,
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
            containerd: ContainerdIntent::default(),
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
