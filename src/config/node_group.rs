//! The `nodeGroup` section: the Name tag's prefix and the role preset.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeGroup {
    /// Prefix of the instance's Name tag. When absent, the ASG name is used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default)]
    pub role: Role,
}

#[derive(
    Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum Role {
    /// Always-on capacity for system pods: tainted so only pods that tolerate
    /// `CriticalAddonsOnly` land there.
    Master,
    /// Autoscaled, spot-friendly capacity for workloads.
    Scaler,
    /// No preset: only what the config says.
    #[default]
    None,
}
