//! The `logind` section: systemd-logind's shutdown inhibitor delay.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LogindSettings {
    /// Seconds; defaults to the kubelet shutdownGracePeriod (rounded up). Must be ≥ it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inhibit_delay_max_sec: Option<u64>,
}
