//! The `images` section: how the node pulls images (docs/images.md).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImagesSettings {
    /// The containerd and kubelet settings that decide pull speed. Left out, the node's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull: Option<PullSettings>,
}

/// A pull profile: each field left out keeps the node's value.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PullSettings {
    /// containerd's CRI `max_concurrent_downloads`: layers fetched at once per pull
    /// (containerd's default 3), 1 to 64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent_downloads: Option<i64>,
    /// containerd's CRI `image_pull_progress_timeout`, a Go duration of at least 1s (`5m`,
    /// containerd's default): a pull that makes no progress for this long is cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_timeout: Option<String>,
    /// The kubelet's `serializeImagePulls`: one pull at a time. Both AMIs set `false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serialize: Option<bool>,
    /// The kubelet's `maxParallelImagePulls`: pulls at once (needs `serialize` off), 1 to 64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_parallel: Option<i64>,
    /// The kubelet's `registryPullQPS`: pulls started per second, 0 for no limit (kubelet's
    /// default 5).
    #[serde(
        default,
        rename = "registryQPS",
        skip_serializing_if = "Option::is_none"
    )]
    pub registry_qps: Option<i64>,
    /// The kubelet's `registryBurst`: pulls above `registryPullQPS` in a burst (kubelet's
    /// default 10), 1 to 64 (the kubelet reads 0 as its default); used only when `registryQPS`
    /// is above 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry_burst: Option<i64>,
    /// AL2023: nodeadm's `FastImagePull` feature gate (SOCI's parallel pull and unpack), which
    /// nodeadm applies only on a node with at least 4 vCPUs and 7 GiB of memory online.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fast_image_pull: Option<bool>,
}
