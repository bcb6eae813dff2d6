//! Schema-only types: the JSON Schema of settings the spec checks field by field from JSON
//! values (so each problem gets a named error, which serde's untagged enums cannot give).

/// The schema of `kubelet.maxPods` (checked field by field by the spec, with named errors).
#[allow(dead_code)]
#[derive(schemars::JsonSchema)]
#[serde(untagged)]
pub(super) enum MaxPodsSetting {
    Count(#[schemars(range(min = 1, max = 2147483647))] u32),
    Computed(MaxPodsComputed),
}

#[allow(dead_code)]
#[derive(schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct MaxPodsComputed {
    /// `secondaryIPs` (default), `prefixDelegation` or `ipv6` (the VPC CNI's IPv6 mode: one /80
    /// prefix per node, so the ceiling alone sets max pods).
    cni: Option<CniSetting>,
    /// The VPC CNI's custom networking: the primary ENI carries no pods.
    custom_networking: Option<bool>,
    /// The CNI's MAX_ENI: at most this many ENIs for pods.
    #[serde(rename = "maxENIs")]
    #[schemars(range(min = 1))]
    max_enis: Option<u32>,
    /// `recommended` (default: 110, or 250 with more than 30 vCPUs), `none`, or a number.
    ceiling: Option<CeilingSetting>,
}

#[allow(dead_code)]
#[derive(schemars::JsonSchema)]
pub(super) enum CniSetting {
    #[serde(rename = "secondaryIPs")]
    SecondaryIps,
    #[serde(rename = "prefixDelegation")]
    PrefixDelegation,
    #[serde(rename = "ipv6")]
    Ipv6,
}

#[allow(dead_code)]
#[derive(schemars::JsonSchema)]
#[serde(untagged)]
pub(super) enum CeilingSetting {
    Word(CeilingWord),
    Count(#[schemars(range(min = 1, max = 2147483647))] u32),
}

#[allow(dead_code)]
#[derive(schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(super) enum CeilingWord {
    Recommended,
    None,
}

#[allow(dead_code)]
#[derive(schemars::JsonSchema)]
pub(super) enum AutoWord {
    #[serde(rename = "auto")]
    Auto,
}

#[allow(dead_code)]
#[derive(schemars::JsonSchema)]
#[serde(untagged)]
pub(super) enum KubeReservedSetting {
    Auto(AutoWord),
    Quantities(std::collections::BTreeMap<String, String>),
}

/// The schema of one of `registries.<name>.mirrors` (checked one by one by the spec).
#[allow(dead_code)]
#[derive(schemars::JsonSchema)]
#[serde(untagged)]
pub(super) enum MirrorSetting {
    /// `https://host[:port][/path]`.
    Url(String),
    Detailed(super::registries::MirrorDetail),
}
