//! The `proxy` section: the HTTP proxy every boot-time client uses, and the hosts reached without
//! it (docs/private-networks.md).

use serde::{Deserialize, Serialize};

#[derive(Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProxySettings {
    /// The proxy for `https://` requests: `http://[user:password@]host[:port]` (or `https://`
    /// to reach the proxy over TLS). Credentials (percent-encoded, no `'`) are secrets: kept in
    /// /etc/eks-nodeinit/proxy.env (mode 0600), never in a unit's `Environment=`, and redacted
    /// in plans and the report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub https: Option<String>,
    /// The proxy for `http://` requests, in the same form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<String>,
    /// Hosts, domains (`.corp.example`), IP addresses and CIDR blocks reached without the
    /// proxy, added after the computed ones (loopback, IMDS, the VPC's CIDR blocks, the service
    /// CIDR, `.internal` and the Region's EC2 domain).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub no_proxy: Vec<String>,
}

/// Without the URLs: they may hold credentials.
impl std::fmt::Debug for ProxySettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxySettings")
            .field("https", &self.https.as_ref().map(|_| "…"))
            .field("http", &self.http.as_ref().map(|_| "…"))
            .field("no_proxy", &self.no_proxy)
            .finish()
    }
}
