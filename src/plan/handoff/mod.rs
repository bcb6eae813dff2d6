//! The hand-off model: one [`HandoffIntent`] — the cluster's values, the kubelet intent and the
//! node settings the hand-off target applies itself (the instance store) — filled by small
//! contributors in `CONTRIBUTORS` order and rendered by each family's hand-off: bootstrap.sh's
//! argv on AL2 (`aspects::bootstrap`), the NodeConfig on AL2023 (`aspects::nodeconfig`). A
//! setting both targets apply is a contributor, its config section, and a line in each renderer;
//! a renderer refuses, as a finding, what its target cannot do.

use crate::config::LocalStorageSettings;
use crate::discovery::ClusterFact;
use crate::facts::Facts;
use crate::plan::kubelet::KubeletIntent;
use crate::spec::Spec;

/// What the agent hands the node's bootstrapper.
#[derive(Debug, Clone, PartialEq)]
pub struct HandoffIntent {
    /// The cluster's values: the config's with what discovery found.
    pub cluster: ClusterFact,
    pub kubelet: KubeletIntent,
    /// The instance store's disks, set up by bootstrap.sh or nodeadm.
    pub local_storage: Option<LocalStorageSettings>,
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
            hold: None,
        }
    }
}
