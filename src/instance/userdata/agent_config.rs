//! The agent's own config in the user data (`--config imds://user-data`): the one MIME part of
//! type [`AGENT_MEDIA_TYPE`], or the whole user data when it is the JSON config.

use std::fmt;

use serde_json::Value;

use super::{
    decode_if_base64, decompress_if_gzip, mime, multipart_boundary, part_body, parts,
    UserDataError, Where, MAX_DECOMPRESSED,
};

/// The media type of the agent's own config in a MIME multipart user data.
pub const AGENT_MEDIA_TYPE: &str = "application/vnd.eks-nodeinit+json";

/// The agent's own config, found in the user data. Its text is the config, which may hold the
/// cluster CA: `Debug` shows where it is, never what it holds.
#[derive(Clone, PartialEq)]
pub struct AgentConfig {
    pub at: Where,
    pub text: String,
}

impl fmt::Debug for AgentConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AgentConfig({}, {} bytes)", self.at, self.text.len())
    }
}

/// The agent's config in the user data (`--config imds://user-data`), decoded as nodeadm decodes
/// the user data (base64, then gzip): the one MIME part of type [`AGENT_MEDIA_TYPE`] (its body
/// decoded the same way), or else the whole user data when it is a JSON object that is not a
/// NodeConfig. `Ok(None)`: the user data holds none (a script, cloud-config, a NodeConfig).
/// A part whose type names the agent but is not exactly [`AGENT_MEDIA_TYPE`], two agent parts,
/// or a config that is not UTF-8 are errors: a typo must not silently leave the node unconfigured.
pub fn agent_config(user_data: &[u8]) -> Result<Option<AgentConfig>, UserDataError> {
    let mut budget = MAX_DECOMPRESSED;
    let data = decode_if_base64(user_data);
    let data = decompress_if_gzip(data, Where::Whole, &mut budget)?;
    match multipart_boundary(&data) {
        None => whole(&data),
        Some((boundary, body)) => from_parts(&data[body..], &boundary, &mut budget),
    }
}

/// The whole user data as the config: a JSON object that is not nodeadm's (no `kind`, no
/// NodeConfig `apiVersion`; the agent's may pin `"apiVersion": "eks-nodeinit/v1"`).
fn whole(data: &[u8]) -> Result<Option<AgentConfig>, UserDataError> {
    let text = String::from_utf8_lossy(data);
    let trimmed = text.trim_start_matches(|c: char| c.is_ascii_whitespace() || c == '\u{feff}');
    if !trimmed.starts_with('{') {
        return Ok(None);
    }
    if let Ok(Value::Object(m)) = serde_json::from_str::<Value>(trimmed) {
        let nodeadm_version = m
            .get("apiVersion")
            .and_then(Value::as_str)
            .is_some_and(|v| !v.starts_with("eks-nodeinit/"));
        if m.contains_key("kind") || nodeadm_version {
            return Ok(None);
        }
    }
    let at = Where::Whole;
    utf8(at.clone(), data.to_vec()).map(|text| Some(AgentConfig { at, text }))
}

/// The one part of type [`AGENT_MEDIA_TYPE`]; a part naming the agent with another type, or a
/// second such part, is an error.
fn from_parts(
    body: &[u8],
    boundary: &str,
    budget: &mut usize,
) -> Result<Option<AgentConfig>, UserDataError> {
    let mut found: Option<AgentConfig> = None;
    for part in parts(body, boundary)?.0 {
        let at = Where::Part(part.number);
        let Ok((media_type, _)) = mime::parse_media_type(&part.headers.get("Content-Type")) else {
            continue;
        };
        let reason = if media_type == AGENT_MEDIA_TYPE {
            match &found {
                Some(first) => format!(
                    "a second {AGENT_MEDIA_TYPE} part ({} is the first): give the config once",
                    first.at
                ),
                None => {
                    let text = utf8(at.clone(), part_body(&part, at.clone(), budget)?)?;
                    found = Some(AgentConfig { at, text });
                    continue;
                }
            }
        } else if media_type.contains("eks-nodeinit") {
            format!("its Content-Type names eks-nodeinit but is not {AGENT_MEDIA_TYPE}: fix the part's Content-Type")
        } else {
            continue;
        };
        return Err(UserDataError::Part { at, reason });
    }
    Ok(found)
}

/// The config's text, which must be UTF-8.
fn utf8(at: Where, bytes: Vec<u8>) -> Result<String, UserDataError> {
    String::from_utf8(bytes).map_err(|e| UserDataError::Part {
        at,
        reason: format!(
            "the eks-nodeinit config is not UTF-8 (at byte offset {}); save it as UTF-8",
            e.utf8_error().valid_up_to()
        ),
    })
}
