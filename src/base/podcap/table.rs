//! The embedded instance-type table: the ENIs of each type's default network card and the IPv4
//! addresses per ENI, for every type nodeadm knows (its `internal/kubelet/instance-info.jsonl`,
//! one JSON object per line, sorted by type). `tools/instance-table.py` rebuilds it from
//! `aws ec2 describe-instance-types` output.

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
    /// `VCpuInfo.DefaultVCpus`, where the table's source had them.
    #[serde(default, rename = "defaultVCpus")]
    default_vcpus: Option<u64>,
}

/// One row, when it parses and has at least one ENI and one address.
#[cfg(test)]
fn row(line: &str) -> Option<(String, TypeInfo)> {
    let r: Row = serde_json::from_str(line).ok()?;
    typed(r)
}

fn typed(r: Row) -> Option<(String, TypeInfo)> {
    let info = TypeInfo {
        enis: r.default_max_enis,
        ipv4_per_eni: r.ipv4_addresses_per_interface,
    };
    (info.enis > 0 && info.ipv4_per_eni > 0).then_some((r.instance_type, info))
}

/// Every row of the JSON-lines text that parses and has at least one ENI and one address.
#[cfg(test)]
pub(crate) fn parse(text: &str) -> std::collections::HashMap<String, TypeInfo> {
    text.lines().filter_map(row).collect()
}

/// The type's row of the embedded table: the one line that names it is parsed (the table is
/// written by `tools/instance-table.py`, one compact object per line).
fn table_row(instance_type: &str) -> Option<Row> {
    let key = serde_json::to_string(instance_type).ok()?;
    let prefix = format!("{{\"instanceType\":{key},");
    TABLE
        .lines()
        .filter(|l| l.starts_with(&prefix))
        .find_map(|l| serde_json::from_str::<Row>(l).ok())
        .filter(|r| r.instance_type == instance_type)
}

/// The type's numbers, when the embedded table has it.
pub fn lookup(instance_type: &str) -> Option<TypeInfo> {
    typed(table_row(instance_type)?).map(|(_, info)| info)
}

/// The type's vCPUs (`VCpuInfo.DefaultVCpus`), when the embedded table has them.
pub fn vcpus(instance_type: &str) -> Option<u64> {
    table_row(instance_type)?.default_vcpus
}

/// Whether `instance_type` is a name EC2 could give a type: a family, a dot, a size, each of
/// lowercase letters, digits and hyphens (`m6i.large`, `u-6tb1.metal`, `x8i.metal-48xl`).
pub fn well_formed(instance_type: &str) -> bool {
    let part = |p: &str| {
        !p.is_empty()
            && p.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    instance_type
        .split_once('.')
        .is_some_and(|(family, size)| part(family) && part(size))
}

/// How many types the table holds.
pub fn len() -> usize {
    TABLE.lines().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_of_the_embedded_table_is_a_type() {
        assert_eq!(parse(TABLE).len(), len());
        for (t, info) in parse(TABLE) {
            assert_eq!(lookup(&t), Some(info), "{t}");
        }
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
    fn every_type_of_the_table_is_well_formed_and_typos_are_not() {
        for t in parse(TABLE).keys() {
            assert!(well_formed(t), "{t}");
        }
        for bad in [
            "*m6i.large",
            "m6i",
            "m6i.",
            ".large",
            "m6i.large.x",
            "M6i.large",
            "m6i large",
            "m6i.large\n",
            "m6i_x.large",
            "",
        ] {
            assert!(!well_formed(bad), "{bad:?}");
        }
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
