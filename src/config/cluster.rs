//! The `cluster` section: the cluster's name, endpoint, CA and service CIDR, and the
//! discovery of what they leave out (Parameter Store, DescribeCluster).

use serde::{Deserialize, Serialize};

use super::yes;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Cluster {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_server_endpoint: Option<String>,
    /// Base64 of the cluster CA bundle. A secret: never logged, redacted in plans.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_authority: Option<String>,
    /// The service CIDR (bootstrap.sh `--service-ipv4-cidr`, NodeConfig `cidr`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cidr: Option<String>,
    /// The cluster's IP family (`ipv4` or `ipv6`, as `DescribeCluster`'s
    /// `kubernetesNetworkConfig.ipFamily`): the service CIDR, given or discovered, must be of
    /// it. Absent: the CIDR's own family decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_family: Option<IpFamily>,
    #[serde(default = "default_runtime")]
    pub container_runtime: String,
    /// Look up what the three fields above leave out (Parameter Store, DescribeCluster), so
    /// that user data names only the cluster. Values given above always win and are never
    /// looked up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discovery: Option<Discovery>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum IpFamily {
    Ipv4,
    Ipv6,
}

impl IpFamily {
    pub fn as_str(self) -> &'static str {
        match self {
            IpFamily::Ipv4 => "ipv4",
            IpFamily::Ipv6 => "ipv6",
        }
    }
}

/// Where and how to look up the cluster's endpoint, CA and service CIDR.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Discovery {
    /// Tried in order; the first source that answers every value the config leaves out wins.
    /// Default: `[{"ssmPath": {"path": "/eks/<cluster.name>"}}]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sources: Option<Vec<DiscoverySource>>,
    /// Parameter Store endpoint override (else `AWS_ENDPOINT_URL_SSM` / the SDK default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssm_endpoint: Option<String>,
    /// EKS API endpoint override (else `AWS_ENDPOINT_URL_EKS` / the SDK default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eks_endpoint: Option<String>,
    /// One deadline for every lookup of every source, retries included, in seconds (1–3600).
    #[serde(default = "default_discovery_deadline_sec")]
    pub deadline_sec: u64,
    /// Wait a random time in `[0, spreadSec]` before the first call (0–3600, fractions allowed):
    /// for fleets that launch in bursts larger than the API's bucket. For a burst of B nodes:
    /// 1.1 × (B − 40) ÷ 40 at Parameter Store's default 40 calls/s (docs/performance.md).
    #[serde(default)]
    pub spread_sec: f64,
    /// Keep the answer in /var/lib/eks-nodeinit/discovery.json (mode 0600), so that a reboot
    /// or a rerun makes no call. Default: on.
    #[serde(default = "yes")]
    pub cache: bool,
}

impl Default for Discovery {
    fn default() -> Self {
        Discovery {
            sources: None,
            ssm_endpoint: None,
            eks_endpoint: None,
            deadline_sec: default_discovery_deadline_sec(),
            spread_sec: 0.0,
            cache: true,
        }
    }
}

fn default_discovery_deadline_sec() -> u64 {
    300
}

/// One place the cluster's values can be read from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum DiscoverySource {
    /// SSM `GetParametersByPath` (with decryption, not recursive) on `path`.
    SsmPath(SsmPath),
    /// SSM `GetParameters` (with decryption) by full parameter names.
    SsmParameters(SsmParameters),
    /// EKS `DescribeCluster` on `cluster.name`.
    DescribeCluster(DescribeClusterSource),
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SsmPath {
    /// A parameter hierarchy such as `/eks/prod-eu` (starts with `/`).
    pub path: String,
    /// The parameter names under `path` that hold each value.
    #[serde(default)]
    pub names: ParameterNames,
}

/// Names of the parameters under an `ssmPath`, one per value.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ParameterNames {
    #[serde(default = "default_endpoint_name")]
    pub api_server_endpoint: String,
    #[serde(default = "default_ca_name")]
    pub certificate_authority: String,
    #[serde(default = "default_cidr_name")]
    pub cidr: String,
}

impl Default for ParameterNames {
    fn default() -> Self {
        ParameterNames {
            api_server_endpoint: default_endpoint_name(),
            certificate_authority: default_ca_name(),
            cidr: default_cidr_name(),
        }
    }
}

fn default_endpoint_name() -> String {
    "APISERVER_ENDPOINT".into()
}
fn default_ca_name() -> String {
    "B64_CLUSTER_CA".into()
}
fn default_cidr_name() -> String {
    "SERVICE_CIDR".into()
}

/// Full parameter names (`/eks/prod-eu/endpoint`), one per value; a value without a name is
/// not looked up here.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SsmParameters {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_server_endpoint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_authority: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cidr: Option<String>,
}

/// `DescribeCluster` takes no settings: it reads `cluster.name`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DescribeClusterSource {}

fn default_runtime() -> String {
    "containerd".to_string()
}
