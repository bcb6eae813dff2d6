//! The `network` section: the name servers and search domains the node resolves with
//! (nodeadm's `instance.network`), in force before the agent's discovery and checks.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkSettings {
    /// DNS servers by IP address (IPv4 or IPv6), in the order systemd-resolved tries them:
    /// its global `DNS=`, before the addresses DHCP gives each interface.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nameservers: Vec<String>,
    /// Search domains (`corp.example`), or routing-only domains (`~corp.example`, `~.`):
    /// systemd-resolved's global `Domains=`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub domains: Vec<String>,
}
