//! The `lifecycle` section: how the agent behaves in an Auto Scaling warm pool.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LifecycleSettings {
    /// `auto` (default): while the instance's target lifecycle state (IMDS
    /// `autoscaling/target-lifecycle-state`) is `Warmed:Stopped` or `Warmed:Terminated`, do every
    /// node-local step and set the Name tag but hold the hand-off (no bootstrap.sh, nodeadm does
    /// not start kubelet); the boot after the instance is started into service hands off.
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
