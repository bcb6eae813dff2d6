//! The instance-type cache: a DescribeInstanceTypes answer kept on the node
//! (`/var/lib/eks-nodeinit/instance-type.json`) so that a reboot asks EC2 nothing, used only for
//! the same instance type.

use super::TypeInfo;

/// Where the answer is kept (a node path, under `--root`).
pub const CACHE: &str = "/var/lib/eks-nodeinit/instance-type.json";
const KIND: &str = "InstanceTypeCache";

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Doc {
    api_version: String,
    kind: String,
    instance_type: String,
    #[serde(flatten)]
    info: TypeInfo,
}

/// The cache document for this answer.
pub fn text(instance_type: &str, info: TypeInfo) -> String {
    let doc = Doc {
        api_version: "eks-nodeinit/v1".into(),
        kind: KIND.into(),
        instance_type: instance_type.into(),
        info,
    };
    let mut s = serde_json::to_string_pretty(&doc).unwrap_or_default();
    s.push('\n');
    s
}

/// The cached numbers, when the file holds them for this type (anything else is ignored and
/// rewritten after asking again).
pub fn cached(text: &str, instance_type: &str) -> Option<TypeInfo> {
    let doc: Doc = serde_json::from_str(text).ok()?;
    (doc.kind == KIND
        && doc.instance_type == instance_type
        && doc.info.enis > 0
        && doc.info.ipv4_per_eni > 0)
        .then_some(doc.info)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_back_only_for_the_same_type() {
        let info = TypeInfo {
            enis: 4,
            ipv4_per_eni: 15,
        };
        let t = text("x9.large", info);
        assert_eq!(cached(&t, "x9.large"), Some(info));
        assert_eq!(cached(&t, "x9.xlarge"), None);
        assert_eq!(cached("{}", "x9.large"), None);
        assert_eq!(cached(&t.replace("15", "0"), "x9.large"), None);
    }
}
