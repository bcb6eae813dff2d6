//! The name the hand-off gives the Node, which is the name the API server must see the node's
//! role as (`system:node:<name>`) and the Node the proof reads. Never IMDS `local-hostname`:
//! bootstrap.sh (AL2) and nodeadm (AL2023) pass kubelet `--hostname-override` with EC2's
//! `PrivateDnsName` from DescribeInstances (it differs from `local-hostname` under a VPC's custom
//! DHCP domain name); nodeadm's `InstanceIdNodeName` feature gate names it by the instance id
//! (mapped as `system:node:{{SessionName}}`); a `--hostname-override` among kubelet's own flags
//! wins over both.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::base::retry::RetryPolicy;
use crate::base::text::printable;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "from", rename_all = "camelCase", deny_unknown_fields)]
pub enum NodeName {
    /// A `--hostname-override` kubelet is given; `source` says where.
    #[serde(rename_all = "camelCase")]
    Override { name: String, source: String },
    /// nodeadm's `InstanceIdNodeName` feature gate: the instance id.
    #[serde(rename_all = "camelCase")]
    InstanceId { name: String },
    /// EC2's `PrivateDnsName` for the instance (DescribeInstances at run time).
    #[serde(rename_all = "camelCase")]
    PrivateDnsName { instance_id: String },
}

impl NodeName {
    /// The name when the plan knows it.
    pub fn known(&self) -> Option<&str> {
        match self {
            NodeName::Override { name, .. } | NodeName::InstanceId { name } => Some(name),
            NodeName::PrivateDnsName { .. } => None,
        }
    }

    /// For the plan and the report: the name or where it comes from.
    pub fn describe(&self) -> String {
        match self {
            NodeName::Override { name, source } => format!("{} ({source})", printable(name)),
            NodeName::InstanceId { name } => {
                format!("{} (the instance id: InstanceIdNodeName)", printable(name))
            }
            NodeName::PrivateDnsName { instance_id } => {
                format!("<PrivateDnsName of {}>", printable(instance_id))
            }
        }
    }

    /// The name now: EC2 asked for the `PrivateDnsName` (through `transport`, before
    /// `deadline`) when the plan could not know it. The error says why it is unknown.
    pub async fn resolve(
        &self,
        region: &str,
        transport: Option<&crate::aws::Transport>,
        deadline: Instant,
    ) -> Result<String, String> {
        let NodeName::PrivateDnsName { instance_id } = self else {
            return Ok(self.known().unwrap_or_default().to_string());
        };
        let mut ec2 = crate::aws::ec2::Ec2::new(region, None, transport).await;
        let policy = RetryPolicy {
            base: Duration::from_millis(300),
            ..RetryPolicy::default()
        };
        match ec2.describe_self(instance_id, policy, deadline).await {
            Ok(crate::aws::ec2::Described {
                private_dns_name: Some(n),
                ..
            }) => Ok(n),
            Ok(_) => Err(format!(
                "EC2 gives {} no PrivateDnsName",
                printable(instance_id)
            )),
            Err(e) => Err(format!("DescribeInstances: {e}")),
        }
    }
}

/// Whether `name` can be a Node's name (a DNS-1123 subdomain): what may go into
/// `/api/v1/nodes/<name>` unescaped.
pub fn is_node_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|l| {
            !l.is_empty()
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_dns_subdomains_are_node_names() {
        assert!(is_node_name("ip-10-0-1-2.eu-west-1.compute.internal"));
        assert!(is_node_name("i-0123456789abcdef0"));
        for bad in ["", "a/../b", "x?y", "A.b", "-a", "a..b", "a.", "a#b"] {
            assert!(!is_node_name(bad), "{bad}");
        }
        assert!(!is_node_name(&"a".repeat(254)));
    }

    #[test]
    fn a_known_name_is_resolved_without_a_call() {
        let n = NodeName::InstanceId {
            name: "i-0abc".into(),
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let got = rt.block_on(n.resolve("us-east-1", None, Instant::now()));
        assert_eq!(got.as_deref(), Ok("i-0abc"));
        assert_eq!(n.known(), Some("i-0abc"));
        let p = NodeName::PrivateDnsName {
            instance_id: "i-0abc".into(),
        };
        assert_eq!(p.known(), None);
        assert!(p.describe().contains("PrivateDnsName of i-0abc"));
    }
}
