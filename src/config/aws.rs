//! The `aws` section: how the agent's own AWS calls find the services.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AwsSettings {
    /// The services' dual-stack names (`ec2.<region>.api.aws`), which answer over IPv6 too, for
    /// every AWS call the agent and its units make: `true`, `false`, or absent: on an instance
    /// without a private IPv4 address (an IPv6-only subnet), else the SDK's
    /// `AWS_USE_DUALSTACK_ENDPOINT`. An endpoint given for a service (`tagging.ec2Endpoint`,
    /// `AWS_ENDPOINT_URL_EC2`) is called as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dual_stack: Option<bool>,
}

impl AwsSettings {
    pub fn is_default(&self) -> bool {
        *self == AwsSettings::default()
    }
}
