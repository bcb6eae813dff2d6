//! What the agent knows about the instance: read from IMDS (`imds` module) or, on a dev box and
//! in tests, from a JSON file given with `--metadata`.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::instance::userdata::UserDataFact;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Metadata {
    pub instance_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_ipv4: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<String>,
    pub instance_type: String,
    /// The instance's private DNS name (IMDS `local-hostname`): the name EKS gives its Node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_hostname: Option<String>,
    pub region: String,
    pub availability_zone: String,
    /// The Auto Scaling group as a metadata file names it. IMDS names none: the group is one of
    /// the instance's tags, which the facts read it from (`Facts::autoscaling_group`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaling_group_name: Option<String>,
    /// The Auto Scaling target lifecycle state (`InService`, `Warmed:Stopped`, …): IMDS
    /// `autoscaling/target-lifecycle-state`, absent outside an Auto Scaling group
    /// ([`crate::instance::lifecycle`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_lifecycle_state: Option<String>,
    /// The VPC's CIDR blocks (IMDS `network/interfaces/macs/<mac>/vpc-ipv4-cidr-blocks`, then
    /// `vpc-ipv6-cidr-blocks`): read only for a config with a proxy, whose NO_PROXY has them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vpc_cidr_blocks: Option<Vec<String>>,
    /// Instance tags as IMDS shows them when instance-metadata tags are on; `None` when off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, String>>,
    /// The instance's user data as bytes, parsed once by gathering (as nodeadm reads it). In a
    /// metadata file it is `userData`, the user data itself as a string (as EC2 takes it: base64
    /// of gzip'd user data works, as nodeadm decodes base64 first). Never logged or written.
    #[serde(
        default,
        rename = "userData",
        skip_serializing,
        deserialize_with = "user_data_from_text"
    )]
    pub user_data: UserData,
}

/// The instance's user data as read: not read (a metadata file without `userData`, or no
/// instance), none, or its bytes. `Debug` shows only the length: it may hold secrets.
#[derive(Clone, Default, PartialEq, Eq)]
pub enum UserData {
    #[default]
    Unknown,
    Absent,
    Bytes(Vec<u8>),
}

impl std::fmt::Debug for UserData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UserData::Unknown => f.write_str("Unknown"),
            UserData::Absent => f.write_str("Absent"),
            UserData::Bytes(b) => write!(f, "Bytes({} bytes)", b.len()),
        }
    }
}

impl UserData {
    /// The bytes, when read and present.
    pub fn bytes(&self) -> Option<&[u8]> {
        match self {
            UserData::Bytes(b) => Some(b),
            UserData::Unknown | UserData::Absent => None,
        }
    }

    /// Read as nodeadm reads it, reduced to what the plan needs.
    pub fn fact(&self) -> UserDataFact {
        match self {
            UserData::Unknown => UserDataFact::Unknown,
            UserData::Absent => UserDataFact::from_bytes(None),
            UserData::Bytes(b) => UserDataFact::from_bytes(Some(b)),
        }
    }
}

fn user_data_from_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<UserData, D::Error> {
    let text: Option<String> = Option::deserialize(d)?;
    Ok(text.map_or(UserData::Unknown, |t| UserData::Bytes(t.into_bytes())))
}

/// The metadata-file field `userData` replaced.
const REPLACED: &str = "userDataHasNodeConfig";

#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    #[error("cannot read metadata file {path}: {cause}")]
    Read { path: String, cause: std::io::Error },
    #[error("metadata file {path}: {message}")]
    Parse { path: String, message: String },
}

pub fn load_file(path: &Path) -> Result<Metadata, MetadataError> {
    load_file_and_user_data(path).map(|(md, _)| md)
}

/// The metadata file, and its `userData` as bytes (for `--config imds://user-data`), read once.
pub(crate) fn load_file_and_user_data(
    path: &Path,
) -> Result<(Metadata, Option<Vec<u8>>), MetadataError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|cause| MetadataError::Read {
        path: shown.clone(),
        cause,
    })?;
    let de = &mut serde_json::Deserializer::from_str(&text);
    let mut md: Metadata = serde_path_to_error::deserialize(&mut *de).map_err(|e| MetadataError::Parse {
        path: shown.clone(),
        message: if e.inner().to_string().contains(&format!("`{REPLACED}`")) {
            format!("field `{REPLACED}` was replaced by `userData`: give the instance's user data itself as a string (base64 for gzip'd user data), which the agent reads as nodeadm does; or leave both out")
        } else {
            format!(
                "field `{}`: {}",
                crate::base::text::escaped(&e.path().to_string()),
                crate::base::text::escaped(&e.inner().to_string())
            )
        },
    })?;
    // One document: trailing data is refused, not ignored.
    de.end().map_err(|e| MetadataError::Parse {
        path: shown.clone(),
        message: format!(
            "data after the end of the JSON document ({})",
            crate::base::text::escaped(&e.to_string())
        ),
    })?;
    if let Some(state) = md.target_lifecycle_state.take() {
        md.target_lifecycle_state = crate::instance::lifecycle::parse(&state);
    }
    // Valid by now: `userData`, when present, is a string.
    let user_data = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.get("userData")?.as_str().map(|s| s.as_bytes().to_vec()));
    Ok((md, user_data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailing_data_in_a_metadata_file_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("m.json");
        let one = r#"{"instanceId":"i-1","instanceType":"t","region":"r","availabilityZone":"a"}"#;
        std::fs::write(&p, format!("{one}\n")).unwrap();
        assert!(load_file(&p).is_ok());
        std::fs::write(&p, format!("{one} {{\"instanceId\": 1")).unwrap();
        let msg = load_file(&p).unwrap_err().to_string();
        assert!(msg.contains("data after the end"), "{msg}");
    }

    #[test]
    fn user_data_in_a_metadata_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("m.json");
        let base = r#""instanceId":"i-1","instanceType":"t","region":"r","availabilityZone":"a""#;
        std::fs::write(&p, format!("{{{base}}}")).unwrap();
        assert_eq!(load_file(&p).unwrap().user_data, UserData::Unknown);
        let mime = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n--B--\n";
        let doc = serde_json::json!(mime);
        std::fs::write(&p, format!("{{{base},\"userData\":{doc}}}")).unwrap();
        assert_eq!(
            load_file(&p).unwrap().user_data.fact().has_node_config(),
            Some(true)
        );
        let script = serde_json::json!("#!/bin/bash\neks-nodeinit init\n");
        std::fs::write(&p, format!("{{{base},\"userData\":{script}}}")).unwrap();
        assert_eq!(
            load_file(&p).unwrap().user_data.fact().has_node_config(),
            Some(false)
        );
        // The field it replaced says what to use instead.
        std::fs::write(&p, format!("{{{base},\"userDataHasNodeConfig\":true}}")).unwrap();
        let msg = load_file(&p).unwrap_err().to_string();
        assert!(msg.contains("replaced by `userData`"), "{msg}");
    }
}
