//! The `imds` section: where the instance metadata is read and how long it may take.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImdsSettings {
    /// IMDS endpoint: a URL (`http://[fd00:ec2::254]` on an IPv6-only subnet), or `auto`:
    /// http://169.254.169.254 (or `AWS_EC2_METADATA_SERVICE_ENDPOINT`), then IPv6's when that is
    /// never reached, within the one deadline. Absent: `AWS_EC2_METADATA_SERVICE_ENDPOINT` when
    /// set, else as `auto`. The AWS calls take the role's credentials where it was found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Allow IMDSv1 (no token) when the token PUT is refused. Default: IMDSv2 only.
    #[serde(default)]
    pub allow_v1_fallback: bool,
    /// Total deadline for all metadata reads, in milliseconds.
    #[serde(default = "default_imds_deadline_ms")]
    pub deadline_ms: u64,
}

impl Default for ImdsSettings {
    fn default() -> Self {
        ImdsSettings {
            endpoint: None,
            allow_v1_fallback: false,
            deadline_ms: default_imds_deadline_ms(),
        }
    }
}

fn default_imds_deadline_ms() -> u64 {
    10_000
}
