//! The instance's user data, read the way nodeadm reads it, reduced to what the plan needs.
//!
//! nodeadm (amazon-eks-ami `nodeadm/internal/configprovider/{userdata,mime,encoding}.go`,
//! `internal/api/bridge/decode.go`, `internal/api/merge.go`):
//!
//! 1. the whole user data is base64-decoded when it is valid standard base64 (Go's
//!    `StdEncoding`: padding required, `\r` and `\n` ignored, non-zero trailing bits allowed);
//! 2. then gunzipped when it starts with the gzip magic (every member of a multi-member stream);
//! 3. then, when it is a MIME message (Go's `net/mail`) whose `Content-Type` is `multipart/*`,
//!    every part (Go's `mime/multipart`) whose media type is `application/node.eks.aws` is one
//!    NodeConfig, itself base64-decoded and gunzipped the same way; none is "could not find
//!    NodeConfig within UserData";
//! 4. otherwise the whole user data is one NodeConfig document, YAML or JSON.
//!
//! The documents merge in order: `kubelet.flags` lists are appended, `kubelet.config` maps merge
//! key by key (a later document's key replaces an earlier one's). Of that merged config, the
//! agent keeps only the taints kubelet would register with: kubelet takes the last
//! `--register-with-taints` among its flags (which replaces, never adds to, any earlier one), and
//! without one `kubelet.config.registerWithTaints`.
//!
//! Nothing here keeps, logs or returns the user data: errors and findings name where a problem is
//! (the user data, MIME part 2, line 3 column 1), never what it holds. Decompression is bounded
//! (`MAX_DECOMPRESSED`) and nothing panics on any input.
//!
//! Differences from nodeadm, all in input nodeadm users do not write: YAML scalars follow YAML
//! 1.2's core schema (`yes` is a string here, a boolean to Go's YAML 1.1), header values that are
//! not UTF-8 are read lossily, and a `--register-with-taints` consumed as the value of a preceding
//! flag that takes one is still read as the flag.

mod agent_config;
mod documents;
mod mime;
mod nodeadm;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::fmt;
use std::io::Read as _;

use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine as _;

pub use agent_config::{agent_config, AGENT_MEDIA_TYPE};

pub(crate) use nodeadm::EffectiveTaints;
pub use nodeadm::{
    go_bool_flag, is_config_file, read, read_dropin, read_dropins, Conflict, DropIn, NodeConfigs,
    UserDataFact, UserReserved, AGENT_DROPIN, NODEADM_DIR,
};

/// The media type of a NodeConfig part.
pub(crate) const NODECONFIG_MEDIA_TYPE: &str = "application/node.eks.aws";
/// The one NodeConfig version nodeadm decodes.
pub(crate) const API_VERSION: &str = "node.eks.aws/v1alpha1";
pub(crate) const KIND: &str = "NodeConfig";
/// The most bytes all decompression of one user data may produce. EC2 user data is at most
/// 16 KiB, which deflate cannot expand past about 16 MiB, so real user data never comes near.
pub(crate) const MAX_DECOMPRESSED: usize = 32 << 20;
/// Go's limit on the header lines of all parts together (`mime/multipart`'s maxMIMEHeaders).
pub(crate) const MAX_PART_HEADERS: usize = 10_000;

/// Where a NodeConfig, or a problem with one, is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Where {
    /// The user data as a whole (not a MIME multipart document).
    Whole,
    /// The n-th part (from 1, counting every part) of its MIME multipart document.
    Part(usize),
    /// A drop-in file of nodeadm's directory, or the n-th part of its MIME multipart document.
    File {
        path: std::sync::Arc<str>,
        part: Option<usize>,
    },
}

impl Where {
    /// Where this place of a document is, the document being at `origin` (a drop-in file):
    /// the whole of it is the file, its n-th part the file's n-th part.
    fn within(self, origin: &Where) -> Where {
        match (self, origin) {
            (Where::Whole, o) => o.clone(),
            (Where::Part(n), Where::File { path, .. }) => Where::File {
                path: path.clone(),
                part: Some(n),
            },
            (w, _) => w,
        }
    }
}

impl fmt::Display for Where {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Where::Whole => f.write_str("the user data"),
            Where::Part(n) => write!(f, "MIME part {n} of the user data"),
            Where::File { path, part: None } => f.write_str(&crate::base::text::printable(path)),
            Where::File {
                path,
                part: Some(n),
            } => write!(f, "MIME part {n} of {}", crate::base::text::printable(path)),
        }
    }
}

/// Why nodeadm finds no NodeConfig in the user data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoNodeConfig {
    /// The instance has no user data (IMDS answers 404).
    Absent,
    /// A MIME multipart document without an `application/node.eks.aws` part.
    NoPart { parts: usize },
    /// Not MIME multipart, and as a whole not a NodeConfig document.
    NotANodeConfig { why: String },
}

impl fmt::Display for NoNodeConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoNodeConfig::Absent => f.write_str("the instance has no user data"),
            NoNodeConfig::NoPart { parts } => write!(
                f,
                "its MIME multipart document has {parts} part{} and none of type {NODECONFIG_MEDIA_TYPE}",
                if *parts == 1 { "" } else { "s" }
            ),
            NoNodeConfig::NotANodeConfig { why } => write!(
                f,
                "it is not a MIME multipart document, and as a whole not a NodeConfig ({why})"
            ),
        }
    }
}

/// Why the user data cannot be read as nodeadm reads it. Says where, never what it holds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UserDataError {
    #[error("could not find NodeConfig within UserData: {0}")]
    NoNodeConfig(NoNodeConfig),
    #[error("{at} starts with the gzip magic but does not decompress ({reason})")]
    Gzip { at: Where, reason: String },
    #[error("{at} decompresses to more than {max} bytes")]
    TooLarge { at: Where, max: usize },
    #[error("the user data's MIME multipart body: {reason}")]
    Multipart { reason: String },
    #[error("{at}: {reason}")]
    Part { at: Where, reason: String },
    #[error("{at} is not a NodeConfig nodeadm can decode: {reason}")]
    Document { at: Where, reason: String },
}

impl UserDataError {
    /// The error as found in a drop-in at `origin`.
    fn within(mut self, origin: &Where) -> UserDataError {
        let reason = match &mut self {
            UserDataError::Gzip { at, .. }
            | UserDataError::TooLarge { at, .. }
            | UserDataError::Part { at, .. }
            | UserDataError::Document { at, .. } => {
                *at = std::mem::replace(at, Where::Whole).within(origin);
                return self;
            }
            UserDataError::Multipart { reason } => format!("its MIME multipart body: {reason}"),
            UserDataError::NoNodeConfig(why) => format!("no NodeConfig in it ({why})"),
        };
        UserDataError::Document {
            at: origin.clone(),
            reason,
        }
    }
}

/// Go's `base64.StdEncoding`: canonical padding required, trailing bits not checked.
const GO_STD: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::RequireCanonical),
);

/// nodeadm's `decodeIfBase64`: the decoded bytes when `data` is valid standard base64 (Go's
/// decoder skips `\r` and `\n`), else `data` as it is.
fn decode_if_base64(data: &[u8]) -> Cow<'_, [u8]> {
    let stripped: Vec<u8> = data
        .iter()
        .copied()
        .filter(|b| *b != b'\r' && *b != b'\n')
        .collect();
    match GO_STD.decode(&stripped) {
        Ok(v) => Cow::Owned(v),
        Err(_) => Cow::Borrowed(data),
    }
}

/// nodeadm's `decompressIfGZIP`: every member when `data` starts with the gzip magic, within
/// what is left of the decompression budget.
fn decompress_if_gzip<'a>(
    data: Cow<'a, [u8]>,
    at: Where,
    budget: &mut usize,
) -> Result<Cow<'a, [u8]>, UserDataError> {
    if !data.starts_with(&[0x1f, 0x8b]) {
        return Ok(data);
    }
    let limit = u64::try_from(*budget).unwrap_or(u64::MAX).saturating_add(1);
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(&data[..])
        .take(limit)
        .read_to_end(&mut out)
        .map_err(|e| UserDataError::Gzip {
            at: at.clone(),
            reason: crate::base::text::printable(&e.to_string()),
        })?;
    *budget = budget
        .checked_sub(out.len())
        .ok_or(UserDataError::TooLarge {
            at,
            max: MAX_DECOMPRESSED,
        })?;
    Ok(Cow::Owned(out))
}

/// The boundary and where the body starts, when `data` is a MIME message (Go's lenient
/// `net/mail` header reading) of a `multipart/*` type. `None` sends nodeadm to read the whole
/// user data as one NodeConfig.
fn multipart_boundary(data: &[u8]) -> Option<(String, usize)> {
    let mut pos = 0;
    let (headers, _) = mime::read_headers(data, &mut pos, false).ok()?;
    if headers.is_empty() {
        return None;
    }
    let (media_type, params) = mime::parse_media_type(&headers.get("Content-Type")).ok()?;
    if !media_type.starts_with("multipart/") {
        return None;
    }
    let boundary = params
        .into_iter()
        .find(|(k, _)| k == "boundary")
        .map(|(_, v)| v)
        .unwrap_or_default();
    Some((boundary, pos))
}

/// Every MIME part of a multipart body, in order, and how many parts the body has: the one walk
/// both readers make (nodeadm's NodeConfigs, the agent's own config), each then choosing its
/// parts by media type.
fn parts<'a>(
    body: &'a [u8],
    boundary: &str,
) -> Result<(Vec<mime::Part<'a>>, usize), UserDataError> {
    let mut reader = mime::Multipart::new(body, boundary).map_err(multipart_error)?;
    let mut parts = Vec::new();
    while let Some(part) = reader.next_part().map_err(multipart_error)? {
        parts.push(part);
    }
    Ok((parts, reader.parts()))
}

/// A part's body, base64-decoded and gunzipped as nodeadm decodes every part it reads.
fn part_body(
    part: &mime::Part<'_>,
    at: Where,
    budget: &mut usize,
) -> Result<Vec<u8>, UserDataError> {
    let raw = part.content().map_err(|reason| UserDataError::Part {
        at: at.clone(),
        reason,
    })?;
    let data = decode_if_base64(&raw);
    Ok(decompress_if_gzip(data, at, budget)?.into_owned())
}

fn multipart_error(e: mime::MultipartError) -> UserDataError {
    match e {
        mime::MultipartError::Body(reason) => UserDataError::Multipart { reason },
        mime::MultipartError::Part(n, reason) => UserDataError::Part {
            at: Where::Part(n),
            reason,
        },
    }
}
