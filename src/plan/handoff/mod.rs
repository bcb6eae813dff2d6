//! The hand-off model: one [`HandoffIntent`] — the cluster's values, the kubelet intent and the
//! node settings the hand-off target applies itself (the instance store) — filled by small
//! contributors in `CONTRIBUTORS` order and rendered by each family's hand-off: bootstrap.sh's
//! argv on AL2 (`aspects::bootstrap`), the NodeConfig on AL2023 (`aspects::nodeconfig`). A
//! setting both targets apply is a contributor, its config section, and a line in each renderer;
//! a renderer refuses, as a finding, what its target cannot do.

use crate::base::findings::Findings;
use crate::config::LocalStorageSettings;
use crate::discovery::ClusterFact;
use crate::facts::Facts;
use crate::instance::lifecycle::holds;
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

/// One contributor: reads the spec and the facts, sets what it owns, reports what is wrong.
pub(crate) type Contributor = fn(&Spec, &Facts, &mut HandoffIntent, &mut Findings);

/// Every contributor after the cluster's values, in order.
pub(crate) const CONTRIBUTORS: &[Contributor] = &[kubelet, local_storage, hold];

/// The intent for this spec on this node: the cluster's values as the facts hold them, then
/// each contributor's part.
pub(crate) fn intent(spec: &Spec, facts: &Facts, f: &mut Findings) -> HandoffIntent {
    let mut h = HandoffIntent {
        cluster: facts.cluster.clone(),
        kubelet: KubeletIntent::default(),
        local_storage: None,
        hold: None,
    };
    for c in CONTRIBUTORS {
        c(spec, facts, &mut h, f);
    }
    h
}

fn kubelet(spec: &Spec, facts: &Facts, h: &mut HandoffIntent, f: &mut Findings) {
    h.kubelet = crate::plan::kubelet::intent(spec, facts, f);
}

fn local_storage(spec: &Spec, _: &Facts, h: &mut HandoffIntent, _: &mut Findings) {
    h.local_storage = spec.local_storage.clone();
}

/// Held in any state but those that serve, when the config lets a warm pool hold it.
fn hold(spec: &Spec, facts: &Facts, h: &mut HandoffIntent, _: &mut Findings) {
    let state = facts
        .instance
        .as_ref()
        .and_then(|m| m.target_lifecycle_state.as_deref());
    h.hold = state
        .filter(|s| spec.warm_pool == crate::config::WarmPool::Auto && holds(s))
        .map(String::from);
}
