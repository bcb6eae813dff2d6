//! The `localStorage` section: the instance store's NVMe disks, set up by the hand-off target
//! (bootstrap.sh's `--local-disks` on AL2, nodeadm's `instance.localStorage` on AL2023).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LocalStorageSettings {
    /// One RAID-0 (or, on AL2023, RAID-10) array for kubelet and containerd, or each disk
    /// mounted for pods.
    pub strategy: LocalStorageStrategy,
    /// Where the file systems are mounted (AL2023 only; nodeadm's default `/mnt/k8s-disks/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_path: Option<String>,
    /// Directories not moved onto the array (AL2023 only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disabled_mounts: Vec<DisabledMount>,
}

/// nodeadm's `LocalStorageStrategy`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub enum LocalStorageStrategy {
    #[serde(rename = "RAID0")]
    Raid0,
    /// At least 4 disks (AL2023 only).
    #[serde(rename = "RAID10")]
    Raid10,
    Mount,
}

/// nodeadm's `DisabledMount` (nodeadm/api/v1alpha1/nodeconfig_types.go): `Containerd` is
/// /var/lib/containerd, `PodLogs` /var/log/pods, `SOCI` /var/lib/soci-snapshotter-grpc (SOCI's
/// content on the root volume: an instance store can be slower than EBS for its lazy pulls).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub enum DisabledMount {
    Containerd,
    PodLogs,
    #[serde(rename = "SOCI")]
    Soci,
}
