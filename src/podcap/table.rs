//! The embedded instance-type table: the ENIs of each type's default network card and the IPv4
//! addresses per ENI, for every type nodeadm knows (its `internal/kubelet/instance-info.jsonl`,
//! one JSON object per line, sorted by type). `tools/instance-table.py` rebuilds it from
//! `aws ec2 describe-instance-types` output.

use std::collections::HashMap;
use std::sync::OnceLock;

/// The two numbers of an instance type that max pods is computed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TypeInfo {
    /// `NetworkCards[DefaultNetworkCardIndex].MaximumNetworkInterfaces`.
    pub enis: u32,
    /// `NetworkInfo.Ipv4AddressesPerInterface`.
    pub ipv4_per_eni: u32,
}

/// The instance type's numbers as gathering found them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeFact {
    Known {
        info: TypeInfo,
        source: TypeSource,
    },
    /// Neither the table nor EC2 answered: why, and what to do.
    Unknown(String),
}

/// Where an instance type's numbers came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypeSource {
    /// The embedded table.
    Table,
    /// `ec2:DescribeInstanceTypes`, in this run.
    Ec2,
    /// An earlier run's DescribeInstanceTypes answer, cached on the node.
    Cache,
}

impl TypeSource {
    pub fn name(self) -> &'static str {
        match self {
            TypeSource::Table => "table",
            TypeSource::Ec2 => "DescribeInstanceTypes",
            TypeSource::Cache => "cached DescribeInstanceTypes",
        }
    }
}

pub(crate) const TABLE: &str = include_str!("instance-info.jsonl");

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Row {
    instance_type: String,
    #[serde(rename = "defaultMaxENIs")]
    default_max_enis: u32,
    ipv4_addresses_per_interface: u32,
}

/// The table, parsed once on first use (only runs that compute max pods use it).
fn table() -> &'static HashMap<String, TypeInfo> {
    static T: OnceLock<HashMap<String, TypeInfo>> = OnceLock::new();
    T.get_or_init(|| parse(TABLE))
}

/// Every row of the JSON-lines text that parses and has at least one ENI and one address.
pub(crate) fn parse(text: &str) -> HashMap<String, TypeInfo> {
    text.lines()
        .filter_map(|l| serde_json::from_str::<Row>(l).ok())
        .filter_map(|r| {
            let info = TypeInfo {
                enis: r.default_max_enis,
                ipv4_per_eni: r.ipv4_addresses_per_interface,
            };
            (info.enis > 0 && info.ipv4_per_eni > 0).then_some((r.instance_type, info))
        })
        .collect()
}

/// The type's numbers, when the embedded table has it.
pub fn lookup(instance_type: &str) -> Option<TypeInfo> {
    table().get(instance_type).copied()
}

/// How many types the table holds.
pub fn len() -> usize {
    table().len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_of_the_embedded_table_is_a_type() {
        assert_eq!(len(), TABLE.lines().count());
        assert_eq!(
            lookup("m5.large"),
            Some(TypeInfo {
                enis: 3,
                ipv4_per_eni: 10
            })
        );
        assert_eq!(lookup("m5.huge"), None);
    }

    #[test]
    fn rows_without_an_eni_or_an_address_are_left_out() {
        let t = parse(
            "{\"instanceType\":\"a\",\"defaultMaxENIs\":0,\"ipv4AddressesPerInterface\":4}\n\
             {\"instanceType\":\"b\",\"defaultMaxENIs\":2,\"ipv4AddressesPerInterface\":0}\n\
             not json\n\
             {\"instanceType\":\"c\",\"defaultMaxENIs\":2,\"ipv4AddressesPerInterface\":4}",
        );
        assert_eq!(t.keys().collect::<Vec<_>>(), ["c"]);
    }
}
