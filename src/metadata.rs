//! What the agent knows about the instance: read from IMDS (`imds` module) or, on a dev box and
//! in tests, from a JSON file given with `--metadata`.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Metadata {
    pub instance_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_ipv4: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<String>,
    pub instance_type: String,
    pub region: String,
    pub availability_zone: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaling_group_name: Option<String>,
    /// Instance tags as IMDS shows them when instance-metadata tags are on; `None` when off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, String>>,
    /// Whether the instance's user data carries a nodeadm `NodeConfig` (nodeadm refuses to run
    /// without one); `None` when unknown (no user data read, or compressed/encoded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data_has_node_config: Option<bool>,
}

/// Does this user data carry a NodeConfig, as nodeadm looks for one: a MIME part of type
/// `application/node.eks.aws`, or a NodeConfig document as the whole user data. `None` when
/// it cannot tell (gzip or base64 content). The user data itself is never logged.
pub fn user_data_has_node_config(user_data: &str) -> Option<bool> {
    let t = user_data.trim_start();
    if t.is_empty() {
        return Some(false);
    }
    if t.starts_with('\u{1f}') {
        return None; // gzip: nodeadm decompresses it; the agent does not look inside
    }
    let lower = t.to_ascii_lowercase();
    if lower.contains("content-type: multipart/") {
        return Some(lower.contains("content-type: application/node.eks.aws"));
    }
    if t.starts_with("#!") || t.starts_with("#cloud-config") {
        return Some(false);
    }
    if t.contains("kind: NodeConfig")
        || t.contains("\"kind\": \"NodeConfig\"")
        || t.contains("\"kind\":\"NodeConfig\"")
    {
        return Some(true);
    }
    None
}

#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    #[error("cannot read metadata file {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("metadata file {path}: {message}")]
    Parse { path: String, message: String },
}

pub fn load_file(path: &Path) -> Result<Metadata, MetadataError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| MetadataError::Read {
        path: shown.clone(),
        source,
    })?;
    let de = &mut serde_json::Deserializer::from_str(&text);
    let md = serde_path_to_error::deserialize(&mut *de).map_err(|e| MetadataError::Parse {
        path: shown.clone(),
        message: format!("field `{}`: {}", e.path(), e.inner()),
    })?;
    // One document: trailing data is refused, not ignored.
    de.end().map_err(|e| MetadataError::Parse {
        path: shown,
        message: format!("data after the end of the JSON document ({e})"),
    })?;
    Ok(md)
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
    fn nodeconfig_in_user_data() {
        let mime = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: application/node.eks.aws\n\nkind: NodeConfig\n--B--\n";
        assert_eq!(user_data_has_node_config(mime), Some(true));
        let mime_shell_only = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: text/x-shellscript\n\n#!/bin/bash\n--B--\n";
        assert_eq!(user_data_has_node_config(mime_shell_only), Some(false));
        assert_eq!(
            user_data_has_node_config("#!/bin/bash\neks-nodeinit init\n"),
            Some(false)
        );
        assert_eq!(
            user_data_has_node_config("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n"),
            Some(true)
        );
        assert_eq!(user_data_has_node_config("H4sIAAAAAAAA"), None);
    }
}
