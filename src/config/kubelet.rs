//! The `kubelet` section as written: image GC, shutdown periods, pod capacity, the CPU and
//! memory managers, image credential providers.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::schema;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubeletSettings {
    #[serde(
        default,
        rename = "imageGCHighThresholdPercent",
        skip_serializing_if = "Option::is_none"
    )]
    pub image_gc_high_threshold_percent: Option<i64>,
    #[serde(
        default,
        rename = "imageGCLowThresholdPercent",
        skip_serializing_if = "Option::is_none"
    )]
    pub image_gc_low_threshold_percent: Option<i64>,
    /// Kubernetes duration, e.g. `"90s"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shutdown_grace_period: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shutdown_grace_period_critical_pods: Option<String>,
    /// Replace values the operator already set in the kubelet config. Default: never.
    #[serde(default)]
    pub overwrite: bool,
    /// The AL2 kubelet config file (inside `--root`).
    #[serde(default = "default_kubelet_config_path")]
    pub config_path: PathBuf,
    /// Extra kubelet flags in `--flag=value` form, passed through bootstrap.sh's
    /// `--kubelet-extra-args` (AL2) or NodeConfig `kubelet.flags` (AL2023).
    #[serde(default)]
    pub extra_args: Vec<String>,
    /// The kubelet's max pods: a number, or how to compute it from the instance type and the
    /// VPC CNI's mode (docs/pod-capacity.md). Unset: the family's own value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<schema::MaxPodsSetting>")]
    pub max_pods: Option<serde_json::Value>,
    /// `"auto"` (the default with `maxPods`: derived from it as bootstrap.sh derives it) or
    /// explicit quantities (`cpu`, `memory`, `ephemeral-storage`, `pid`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<schema::KubeReservedSetting>")]
    pub kube_reserved: Option<serde_json::Value>,
    /// The kubelet's CPU manager (docs/resources.md): its policy, the CPUs reserved for the
    /// system (`auto`: derived from the reservation), the static policy's options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_manager: Option<CpuManagerSettings>,
    /// The kubelet's memory manager (docs/resources.md): its policy; with `Static` the
    /// per-NUMA-node `reservedMemory` is derived from the reservation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_manager: Option<MemoryManagerSettings>,
    /// Image credential providers added after the node's own ECR provider
    /// (docs/credential-providers.md); each is the kubelet's `CredentialProvider` less its
    /// `apiVersion`, which the agent chooses from the kubelet's version.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub credential_providers: Vec<CredentialProviderSettings>,
    /// KubeletConfiguration keys passed to the kubelet as given (docs/config.md#kubeletconfig):
    /// `podPidsLimit`, `evictionHard`, `systemReserved`, `clusterDNS`, … — the kubelet's own
    /// names, checked against its config type; a key another field sets is refused with that
    /// field. AL2023: the NodeConfig's `kubelet.config`; AL2: the kubelet config file, or a
    /// kubelet flag for `clusterDNS` and `evictionHard`, which bootstrap.sh rewrites.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub config: serde_json::Map<String, serde_json::Value>,
    /// What names the Node: `privateDnsName` (EC2's, both hand-offs' own default) or
    /// `instanceId` (nodeadm's `InstanceIdNodeName`; on AL2 `--hostname-override` with the
    /// instance id). The node role's access entry must map that name (`{{SessionName}}` is the
    /// instance id). Absent: the NodeConfigs' own choice stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<NodeNaming>,
}

/// What names the Node (`kubelet.nodeName`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum NodeNaming {
    PrivateDnsName,
    InstanceId,
}

impl Default for KubeletSettings {
    fn default() -> Self {
        KubeletSettings {
            image_gc_high_threshold_percent: None,
            image_gc_low_threshold_percent: None,
            shutdown_grace_period: None,
            shutdown_grace_period_critical_pods: None,
            overwrite: false,
            config_path: default_kubelet_config_path(),
            extra_args: Vec::new(),
            max_pods: None,
            kube_reserved: None,
            cpu_manager: None,
            memory_manager: None,
            credential_providers: Vec::new(),
            config: serde_json::Map::new(),
            node_name: None,
        }
    }
}

pub fn default_kubelet_config_path() -> PathBuf {
    PathBuf::from("/etc/kubernetes/kubelet/kubelet-config.json")
}

/// `kubelet.cpuManager`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CpuManagerSettings {
    /// The kubelet's `cpuManagerPolicy`: `none` or `static`.
    pub policy: String,
    /// `auto` (the default with `static`: the whole CPUs the reservation rounds up to, the
    /// lowest-numbered online ones) or a CPU list such as `0-1`.
    #[serde(
        default,
        rename = "reservedSystemCPUs",
        skip_serializing_if = "Option::is_none"
    )]
    pub reserved_system_cpus: Option<String>,
    /// The static policy's options (`cpuManagerPolicyOptions`), e.g. `full-pcpus-only: "true"`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub options: BTreeMap<String, String>,
}

/// `kubelet.memoryManager`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemoryManagerSettings {
    /// The kubelet's `memoryManagerPolicy`: `None` or `Static`.
    pub policy: String,
}

/// One of `kubelet.credentialProviders`: written to the kubelet's `CredentialProviderConfig` as
/// it is, field for field, so its names are the kubelet's.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CredentialProviderSettings {
    /// The plugin's file name in the node's plugin directory
    /// (`/etc/eks/image-credential-provider`).
    pub name: String,
    /// The images it is asked for: registry host globs with an optional port and path
    /// (`*.example.com`, `registry.example.com:5000/team`).
    pub match_images: Vec<String>,
    /// How long the kubelet keeps its answer when the answer names no duration (a Go
    /// duration, e.g. `"12h"`).
    pub default_cache_duration: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<ExecEnvVar>,
    /// A service-account token passed to the plugin (kubelet 1.34 or later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_attributes: Option<TokenAttributes>,
}

/// An environment variable of a credential provider's process.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecEnvVar {
    pub name: String,
    pub value: String,
}

/// `tokenAttributes`: the service-account token the kubelet passes to the plugin.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenAttributes {
    pub service_account_token_audience: String,
    /// Required by the kubelet: whether a pod without a service account is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_service_account: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_service_account_annotation_keys: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub optional_service_account_annotation_keys: Vec<String>,
    /// Required by the kubelet: `ServiceAccount` or `Token`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_type: Option<String>,
}
