//! The `trust` section: CA certificates the whole node trusts (docs/private-networks.md).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TrustSettings {
    /// PEM bundles of CA certificates (each with basicConstraints CA:TRUE): added to the node's
    /// trust store (the distribution's anchors, then `update-ca-trust extract` or
    /// `update-ca-certificates`) before containerd and kubelet start, and trusted by the agent's
    /// own AWS calls.
    #[serde(default)]
    pub ca_bundles: Vec<String>,
}
