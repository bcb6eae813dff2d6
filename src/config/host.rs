//! The `host` section: what the node's kernel holds for pods before the kubelet starts
//! (docs/resources.md).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HostSettings {
    /// Huge pages, set before the kubelet starts (it reads them only then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hugepages: Option<HugepagesSettings>,
    /// A swap file, on before the kubelet starts, the kubelet told to use it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap: Option<SwapSettings>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SwapSettings {
    /// The file's size: a quantity (`"4Gi"`) or a share of the node's memory (`"25%"`).
    pub size: String,
    /// The file (default `/swapfile`), on a filesystem with room for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<std::path::PathBuf>,
    /// The kubelet's `memorySwap.swapBehavior`: `LimitedSwap` (the default: Burstable pods swap
    /// in proportion to their memory request) or `NoSwap`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behavior: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HugepagesSettings {
    /// 2 MiB pages: a count (`512`) or a share of the node's memory (`"10%"`), set live and
    /// persisted as `vm.nr_hugepages`.
    #[serde(default, rename = "2Mi", skip_serializing_if = "Option::is_none")]
    pub pages_2mi: Option<HugepageAmount>,
    /// 1 GiB pages the node must have: reserved only at boot, by the kernel's command line; the
    /// agent checks and says which argument, never sets them.
    #[serde(default, rename = "1Gi", skip_serializing_if = "Option::is_none")]
    pub pages_1gi: Option<u64>,
}

/// A number of pages, or `"N%"` of the node's memory.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(untagged)]
pub enum HugepageAmount {
    Count(u64),
    Share(String),
}
