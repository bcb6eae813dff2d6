//! The `kernel` section: kernel modules the node loads (docs/kernel.md).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KernelSettings {
    /// Kernel modules (`br_netfilter`, `nvme_tcp`): loaded now by `modprobe` before the
    /// hand-off, and at every boot by systemd-modules-load from
    /// `/etc/modules-load.d/eks-nodeinit.conf`. A module the node does not have stops the run
    /// before any change.
    #[serde(default)]
    pub modules: Vec<String>,
}
