//! The `tagging` section: the instance's Name tag, its budget and its background retries.

use serde::{Deserialize, Serialize};

use super::yes;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaggingSettings {
    /// Set the instance's Name tag at all.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Fail the boot when the tag cannot be set. Default: tagging never blocks the join.
    #[serde(default)]
    pub required: bool,
    /// How long the hand-off may wait for tagging, in milliseconds.
    #[serde(default = "default_sync_budget_ms")]
    pub sync_budget_ms: u64,
    /// How long a background continuation keeps retrying, in seconds.
    #[serde(default = "default_background_deadline_sec")]
    pub background_deadline_sec: u64,
    /// The tagging calls' EC2 endpoint (else `AWS_ENDPOINT_URL_EC2` / the SDK default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ec2_endpoint: Option<String>,
    /// Spread the first CreateTags call over a random delay in `[0, spreadSec]`. For fleets
    /// launched in bursts of B nodes: (B − 100) ÷ 10 seconds (CreateTags' bucket holds 100
    /// tokens and refills 10 per second); 0 (the default) for bursts of up to 100.
    #[serde(default)]
    pub spread_sec: u64,
}

impl Default for TaggingSettings {
    fn default() -> Self {
        TaggingSettings {
            enabled: true,
            required: false,
            sync_budget_ms: default_sync_budget_ms(),
            background_deadline_sec: default_background_deadline_sec(),
            ec2_endpoint: None,
            spread_sec: 0,
        }
    }
}

fn default_sync_budget_ms() -> u64 {
    3000
}
fn default_background_deadline_sec() -> u64 {
    600
}
