//! The `lifecycle` section: how the agent behaves in an Auto Scaling warm pool.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LifecycleSettings {
    /// `auto` (default): while the instance's target lifecycle state (IMDS
    /// `autoscaling/target-lifecycle-state`) is `Warmed:*`, do every node-local step and set the
    /// Name tag but hold the hand-off (no bootstrap.sh, nodeadm does not start kubelet) until the
    /// instance is in service: the boot after a start into service hands off, or, without a
    /// reboot, eks-nodeinit-await-service.service has the agent's unit run again at `InService`.
    /// `off`: hand off whatever the state.
    #[serde(default)]
    pub warm_pool: WarmPool,
}

#[derive(
    Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum WarmPool {
    #[default]
    Auto,
    Off,
}
