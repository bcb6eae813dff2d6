//! The `registries` section: container registry mirrors and CAs, as containerd's `hosts.toml`
//! files under `/etc/containerd/certs.d` (docs/private-networks.md).

use serde::{Deserialize, Serialize};

/// One registry, by the name images use (`docker.io`, `registry.corp.example:5000`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegistrySettings {
    /// Mirrors tried in order before the registry itself: a URL (`https://mirror.corp.example`)
    /// or `{ "url", "ca", "skipVerify", "insecure" }`.
    // JSON values, each read by the spec (a URL, else a MirrorDetail), so that a problem names
    // its mirror: serde's untagged enums cannot.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<super::schema::MirrorSetting>")]
    pub mirrors: Vec<serde_json::Value>,
    /// PEM certificates the registry's own server certificate is checked against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<String>,
    /// Do not verify the registry's server certificate (a warning every run).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skip_verify: bool,
}

/// A mirror given as an object (a mirror may also be its URL alone).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MirrorDetail {
    /// `https://host[:port][/path]`; `http://` only with `insecure`.
    pub url: String,
    /// PEM certificates the mirror's server certificate is checked against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<String>,
    /// Do not verify the mirror's server certificate (a warning every run).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skip_verify: bool,
    /// Allow an `http://` URL.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
}
