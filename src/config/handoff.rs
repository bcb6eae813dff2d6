//! The `handoff` section: which hand-off (bootstrap.sh or nodeadm), where it lives, and the
//! extra arguments it is given.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[derive(
    Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum HandoffMode {
    #[default]
    Auto,
    Al2,
    Al2023,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HandoffSettings {
    #[serde(default)]
    pub mode: HandoffMode,
    #[serde(default = "default_bootstrap_path")]
    pub bootstrap_path: PathBuf,
    #[serde(default = "default_nodeadm_path")]
    pub nodeadm_path: PathBuf,
    /// Extra bootstrap.sh arguments, each flag and value as separate elements:
    /// `["--use-max-pods", "false"]`. The `--flag=value` form is refused.
    #[serde(default)]
    pub extra_bootstrap_args: Vec<String>,
}

impl Default for HandoffSettings {
    fn default() -> Self {
        HandoffSettings {
            mode: HandoffMode::Auto,
            bootstrap_path: default_bootstrap_path(),
            nodeadm_path: default_nodeadm_path(),
            extra_bootstrap_args: Vec::new(),
        }
    }
}

fn default_bootstrap_path() -> PathBuf {
    PathBuf::from("/etc/eks/bootstrap.sh")
}
fn default_nodeadm_path() -> PathBuf {
    PathBuf::from("/usr/bin/nodeadm")
}
