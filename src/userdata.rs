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
//! ([`MAX_DECOMPRESSED`]) and nothing panics on any input.
//!
//! Differences from nodeadm, all in input nodeadm users do not write: YAML scalars follow YAML
//! 1.2's core schema (`yes` is a string here, a boolean to Go's YAML 1.1), header values that are
//! not UTF-8 are read lossily, and a `--register-with-taints` consumed as the value of a preceding
//! flag that takes one is still read as the flag.

use std::borrow::Cow;
use std::fmt;
use std::io::Read as _;

use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine as _;
use serde::Deserialize as _;
use serde_json::Value;

use crate::k8s::{self, Taint};

/// The media type of a NodeConfig part.
pub const NODECONFIG_MEDIA_TYPE: &str = "application/node.eks.aws";
/// The one NodeConfig version nodeadm decodes.
pub const API_VERSION: &str = "node.eks.aws/v1alpha1";
pub const KIND: &str = "NodeConfig";
/// The most bytes all decompression of one user data may produce. EC2 user data is at most
/// 16 KiB, which deflate cannot expand past about 16 MiB, so real user data never comes near.
pub const MAX_DECOMPRESSED: usize = 32 << 20;
/// Go's limit on the header lines of all parts together (`mime/multipart`'s maxMIMEHeaders).
const MAX_PART_HEADERS: usize = 10_000;
const FLAG: &str = "--register-with-taints";

/// Where in the user data something is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Where {
    /// The user data as a whole (not a MIME multipart document).
    Whole,
    /// The n-th part (from 1, counting every part) of its MIME multipart document.
    Part(usize),
}

impl fmt::Display for Where {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Where::Whole => f.write_str("the user data"),
            Where::Part(n) => write!(f, "MIME part {n} of the user data"),
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

/// What the user data's NodeConfigs tell the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeConfigs {
    /// Where each NodeConfig is, in nodeadm's merge order.
    pub documents: Vec<Where>,
    /// The taints kubelet registers with from the user data's merged NodeConfig alone; `None`
    /// when it registers none.
    pub taints: Option<EffectiveTaints>,
}

/// The user data's taints as kubelet takes them, from one place.
#[derive(Debug, Clone, PartialEq)]
pub struct EffectiveTaints {
    /// Where kubelet takes them from, e.g. `kubelet.flags[2] of the NodeConfig in MIME part 3
    /// of the user data`.
    pub source: String,
    /// Each taint, or why kubelet would refuse it (without its text).
    pub entries: Vec<Result<Taint, String>>,
}

/// What the agent knows of the instance's user data.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum UserDataFact {
    /// Not read: a `--metadata` file without `userData`, or no instance (`validate`).
    #[default]
    Unknown,
    /// Read and decoded as nodeadm does.
    Read(Result<NodeConfigs, UserDataError>),
}

impl UserDataFact {
    /// From the user data's bytes; `None` when the instance has none.
    pub fn from_bytes(user_data: Option<&[u8]>) -> UserDataFact {
        UserDataFact::Read(match user_data {
            None => Err(UserDataError::NoNodeConfig(NoNodeConfig::Absent)),
            Some(b) => read(b),
        })
    }

    /// Whether nodeadm finds a NodeConfig in it; `None` when unknown or unreadable.
    pub fn has_node_config(&self) -> Option<bool> {
        match self {
            UserDataFact::Read(Ok(_)) => Some(true),
            UserDataFact::Read(Err(UserDataError::NoNodeConfig(_))) => Some(false),
            _ => None,
        }
    }
}

/// Read user data as nodeadm does.
pub fn read(user_data: &[u8]) -> Result<NodeConfigs, UserDataError> {
    let docs = documents(user_data)?;
    Ok(NodeConfigs {
        documents: docs.iter().map(|d| d.at).collect(),
        taints: effective_taints(&docs),
    })
}

/// One NodeConfig, reduced to the fields the taints come from.
#[derive(Debug, Clone, PartialEq)]
struct Document {
    at: Where,
    flags: Vec<String>,
    /// `kubelet.config.registerWithTaints` when the document has the key (`null` included).
    register_with_taints: Option<Value>,
}

/// The NodeConfig documents nodeadm finds, in merge order.
fn documents(user_data: &[u8]) -> Result<Vec<Document>, UserDataError> {
    let mut budget = MAX_DECOMPRESSED;
    let data = decode_if_base64(user_data);
    let data = decompress_if_gzip(data, Where::Whole, &mut budget)?;
    match multipart_boundary(&data) {
        Some((boundary, body)) => from_multipart(&data[body..], &boundary, &mut budget),
        None => whole(&data).map(|d| vec![d]),
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
            at,
            reason: crate::text::printable(&e.to_string()),
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

fn from_multipart(
    body: &[u8],
    boundary: &str,
    budget: &mut usize,
) -> Result<Vec<Document>, UserDataError> {
    let mut reader = mime::Multipart::new(body, boundary).map_err(multipart_error)?;
    let mut docs = Vec::new();
    while let Some(part) = reader.next_part().map_err(multipart_error)? {
        let at = Where::Part(part.number);
        let content_type = part.headers.get("Content-Type");
        if content_type.is_empty() {
            continue;
        }
        let (media_type, _) =
            mime::parse_media_type(&content_type).map_err(|e| UserDataError::Part {
                at,
                reason: format!("its Content-Type is not a media type nodeadm accepts ({e})"),
            })?;
        if media_type != NODECONFIG_MEDIA_TYPE {
            continue;
        }
        let raw = part
            .content()
            .map_err(|reason| UserDataError::Part { at, reason })?;
        let data = decode_if_base64(&raw);
        let data = decompress_if_gzip(data, at, budget)?;
        let value = parse(&data).map_err(|reason| UserDataError::Document { at, reason })?;
        let doc = match kind(&value) {
            Kind::NodeConfig => document(&value, at),
            Kind::Other(why) => Err(why),
        };
        docs.push(doc.map_err(|reason| UserDataError::Document { at, reason })?);
    }
    if docs.is_empty() {
        return Err(UserDataError::NoNodeConfig(NoNodeConfig::NoPart {
            parts: reader.parts(),
        }));
    }
    Ok(docs)
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

/// The whole user data as one document: not a NodeConfig at all (a script, say) is "no
/// NodeConfig"; a NodeConfig nodeadm cannot decode is an error.
fn whole(data: &[u8]) -> Result<Document, UserDataError> {
    let not_one = |why: String| UserDataError::NoNodeConfig(NoNodeConfig::NotANodeConfig { why });
    if data.iter().all(u8::is_ascii_whitespace) {
        return Err(not_one("it is empty".into()));
    }
    let value = parse(data).map_err(not_one)?;
    match kind(&value) {
        Kind::Other(why) => Err(not_one(why)),
        Kind::NodeConfig => {
            document(&value, Where::Whole).map_err(|reason| UserDataError::Document {
                at: Where::Whole,
                reason,
            })
        }
    }
}

/// The first YAML (or JSON) document, as sigs.k8s.io/yaml reads it. The error says where, not
/// what (a YAML error's own text may quote the input).
fn parse(data: &[u8]) -> Result<Value, String> {
    let Some(first) = yaml_serde::Deserializer::from_slice(data).next() else {
        return Ok(Value::Null);
    };
    Value::deserialize(first).map_err(|e| match e.location() {
        Some(l) => format!(
            "not YAML or JSON nodeadm can read (line {}, column {})",
            l.line(),
            l.column()
        ),
        None => "not YAML or JSON nodeadm can read".into(),
    })
}

enum Kind {
    NodeConfig,
    /// Not a NodeConfig, and why.
    Other(String),
}

fn kind(v: &Value) -> Kind {
    let Some(m) = v.as_object() else {
        return Kind::Other("not a YAML or JSON mapping".into());
    };
    if m.get("kind").and_then(Value::as_str) != Some(KIND) {
        return Kind::Other(format!("no `kind: {KIND}`"));
    }
    match m.get("apiVersion").and_then(Value::as_str) {
        Some(API_VERSION) => Kind::NodeConfig,
        _ => Kind::Other(format!(
            "`apiVersion` is not {API_VERSION}, the one version nodeadm decodes"
        )),
    }
}

/// The fields the taints come from, typed as nodeadm's Go types require.
fn document(v: &Value, at: Where) -> Result<Document, String> {
    let object = |v: Option<&Value>, field: &str| match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m.clone())),
        Some(_) => Err(format!("`{field}` is not a mapping")),
    };
    let spec = object(v.get("spec"), "spec")?.unwrap_or_default();
    let kubelet = object(spec.get("kubelet"), "spec.kubelet")?.unwrap_or_default();
    let flags = match kubelet.get("flags") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(i, f)| {
                f.as_str()
                    .map(String::from)
                    .ok_or_else(|| format!("`spec.kubelet.flags[{i}]` is not a string"))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("`spec.kubelet.flags` is not a list of strings".into()),
    };
    let config = object(kubelet.get("config"), "spec.kubelet.config")?;
    Ok(Document {
        at,
        flags,
        register_with_taints: config.and_then(|c| c.get("registerWithTaints").cloned()),
    })
}

/// The taints kubelet registers with from the merged documents: the last
/// `--register-with-taints` among the flags (nodeadm joins the flags with spaces into kubelet's
/// command line, which systemd splits at white space), else the last document's
/// `kubelet.config.registerWithTaints`.
fn effective_taints(docs: &[Document]) -> Option<EffectiveTaints> {
    let words: Vec<(&str, Where, usize)> = docs
        .iter()
        .flat_map(|d| {
            d.flags
                .iter()
                .enumerate()
                .flat_map(move |(i, f)| f.split_ascii_whitespace().map(move |w| (w, d.at, i)))
        })
        .collect();
    let mut last: Option<(Option<&str>, Where, usize)> = None;
    let mut n = 0;
    while let Some(&(w, at, i)) = words.get(n) {
        if w == "--" {
            break; // pflag: the rest are arguments
        }
        if let Some(v) = w.strip_prefix(FLAG).and_then(|r| r.strip_prefix('=')) {
            last = Some((Some(v), at, i));
        } else if w == FLAG {
            n += 1;
            last = Some((words.get(n).map(|x| x.0), at, i));
        }
        n += 1;
    }
    let (source, entries) = match last {
        Some((value, at, i)) => {
            let source = format!("kubelet.flags[{i}] of the NodeConfig in {at}");
            let entries = match value {
                None => vec![Err(format!(
                    "`{FLAG}` is the last flag and has no value; kubelet refuses to start"
                ))],
                Some("") => Vec::new(),
                Some(v) => v
                    .split(',')
                    .map(|t| k8s::parse_taint_quiet(t).map_err(|p| p.to_string()))
                    .collect(),
            };
            (source, entries)
        }
        None => {
            let (doc, value) = docs
                .iter()
                .rev()
                .find_map(|d| d.register_with_taints.as_ref().map(|v| (d, v)))?;
            let source = format!(
                "kubelet.config.registerWithTaints of the NodeConfig in {}",
                doc.at
            );
            (source, config_taints(value))
        }
    };
    (!entries.is_empty()).then_some(EffectiveTaints { source, entries })
}

/// `registerWithTaints`: a list of `{key, value, effect}` (`timeAdded` is ignored).
fn config_taints(v: &Value) -> Vec<Result<Taint, String>> {
    let list = match v {
        Value::Null => return Vec::new(),
        Value::Array(a) => a,
        _ => return vec![Err("it is not a list of {key, value, effect}".into())],
    };
    list.iter()
        .map(|e| {
            let Some(m) = e.as_object() else {
                return Err("the entry is not a mapping of key, value and effect".into());
            };
            let field = |name: &str| match m.get(name) {
                None | Some(Value::Null) => Ok(""),
                Some(Value::String(s)) => Ok(s.as_str()),
                Some(_) => Err(format!("its `{name}` is not a string")),
            };
            k8s::taint_from_parts(field("key")?, field("value")?, field("effect")?)
                .map_err(|p| p.to_string())
        })
        .collect()
}

/// MIME as Go reads it: `net/mail` and `net/textproto` headers, `mime.ParseMediaType`,
/// `mime/multipart` and `mime/quotedprintable`, over a complete message in memory.
mod mime {
    use std::collections::BTreeMap;

    /// Header fields in order, keys as written.
    #[derive(Debug, Default)]
    pub struct Headers(Vec<(Vec<u8>, Vec<u8>)>);

    impl Headers {
        /// The first value of `name` (Go's `Header.Get`: canonical keys, so case does not
        /// matter, and a key Go leaves uncanonical, such as one with a space, never matches).
        pub fn get(&self, name: &str) -> String {
            self.0
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name.as_bytes()))
                .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
                .unwrap_or_default()
        }
        pub fn is_empty(&self) -> bool {
            self.0.is_empty()
        }
    }

    /// How a header block ended.
    #[derive(Debug, PartialEq, Eq)]
    pub enum End {
        Blank,
        Eof,
    }

    /// One line from `pos` without its `\n` or `\r\n` (bufio's `ReadLine`); `None` at the end.
    fn take_line<'a>(data: &'a [u8], pos: &mut usize) -> Option<&'a [u8]> {
        let rest = data.get(*pos..).filter(|r| !r.is_empty())?;
        let (line, used) = match memchr::memchr(b'\n', rest) {
            Some(i) => {
                let l = &rest[..i];
                (l.strip_suffix(b"\r").unwrap_or(l), i + 1)
            }
            None => (rest, rest.len()),
        };
        *pos += used;
        Some(line)
    }

    fn trim(s: &[u8]) -> &[u8] {
        let start = s.iter().position(|c| !matches!(c, b' ' | b'\t'));
        let Some(start) = start else { return &[] };
        let end = s
            .iter()
            .rposition(|c| !matches!(c, b' ' | b'\t'))
            .map_or(start, |e| e + 1);
        &s[start..end]
    }

    /// RFC 7230 `tchar`, Go's `validHeaderFieldByte`.
    fn field_byte(c: u8) -> bool {
        c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)
    }

    /// Go's `validHeaderValueByte`: VCHAR, SP, HTAB and obs-text.
    fn value_byte(c: u8) -> bool {
        matches!(c, b'\t' | b' ' | 0x21..=0x7e | 0x80..=0xff)
    }

    /// A header block from `pos`, as Go's `net/mail` (`strict` false: any key, any value) or
    /// `net/textproto` (`strict`: token keys, visible values) reads it. Continuation lines
    /// (starting with a space or tab) join the previous line with one space. `pos` ends after
    /// the blank line.
    pub fn read_headers(
        data: &[u8],
        pos: &mut usize,
        strict: bool,
    ) -> Result<(Headers, End), String> {
        let mut h = Headers::default();
        if matches!(data.get(*pos), Some(b' ' | b'\t')) {
            return Err("the first header line starts with white space".into());
        }
        loop {
            let Some(line) = take_line(data, pos) else {
                return Ok((h, End::Eof));
            };
            if line.is_empty() {
                return Ok((h, End::Blank));
            }
            if strict && !line.contains(&b':') {
                return Err("a header line has no colon".into());
            }
            let mut kv = trim(line).to_vec();
            while matches!(data.get(*pos), Some(b' ' | b'\t')) {
                while matches!(data.get(*pos), Some(b' ' | b'\t')) {
                    *pos += 1;
                }
                kv.push(b' ');
                let Some(l) = take_line(data, pos) else { break };
                kv.extend_from_slice(trim(l));
            }
            let Some(colon) = kv.iter().position(|c| *c == b':') else {
                return Err("a header line has no colon".into());
            };
            let (key, value) = (&kv[..colon], &kv[colon + 1..]);
            if strict {
                if key.is_empty() || !key.iter().all(|c| field_byte(*c) || *c == b' ') {
                    return Err("a header name holds characters a header name cannot".into());
                }
                if !value.iter().all(|c| value_byte(*c)) {
                    return Err("a header value holds a control character".into());
                }
                if h.0.len() >= super::MAX_PART_HEADERS {
                    return Err(format!(
                        "more than {} header lines",
                        super::MAX_PART_HEADERS
                    ));
                }
            } else if key.is_empty() {
                continue;
            }
            let start = value
                .iter()
                .position(|c| !matches!(c, b' ' | b'\t'))
                .unwrap_or(value.len());
            h.0.push((key.to_vec(), value[start..].to_vec()));
        }
    }

    /// `mime.ParseMediaType`'s error.
    #[derive(Debug, PartialEq, Eq)]
    pub struct MediaTypeError(&'static str);

    impl std::fmt::Display for MediaTypeError {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    fn tspecial(c: char) -> bool {
        "()<>@,;:\\\"/[]?=".contains(c)
    }

    fn token_char(c: char) -> bool {
        c.is_ascii() && c > ' ' && c != '\x7f' && !tspecial(c)
    }

    fn consume_token(v: &str) -> (&str, &str) {
        let end = v.find(|c| !token_char(c)).unwrap_or(v.len());
        v.split_at(end)
    }

    /// A token or a quoted string; `None` when neither.
    fn consume_value(v: &str) -> Option<(String, &str)> {
        let Some(q) = v.strip_prefix('"') else {
            let (t, rest) = consume_token(v);
            return (!t.is_empty()).then(|| (t.to_string(), rest));
        };
        let b = q.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while let Some(&c) = b.get(i) {
            match c {
                b'"' => {
                    let value = String::from_utf8_lossy(&out).into_owned();
                    return Some((value, q.get(i + 1..).unwrap_or("")));
                }
                b'\\' if b.get(i + 1).is_some_and(|n| tspecial(char::from(*n))) => {
                    out.push(b[i + 1]);
                    i += 2;
                    continue;
                }
                b'\r' | b'\n' => return None,
                _ => out.push(c),
            }
            i += 1;
        }
        None
    }

    fn consume_param(v: &str) -> Option<(String, String, &str)> {
        let rest = v.trim_start().strip_prefix(';')?.trim_start();
        let (key, rest) = consume_token(rest);
        if key.is_empty() {
            return None;
        }
        let rest = rest.trim_start().strip_prefix('=')?.trim_start();
        let (value, rest) = consume_value(rest)?;
        Some((key.to_ascii_lowercase(), value, rest))
    }

    fn check_type(t: &str) -> Result<(), MediaTypeError> {
        let (typ, rest) = consume_token(t);
        if typ.is_empty() {
            return Err(MediaTypeError("no media type"));
        }
        if rest.is_empty() {
            return Ok(());
        }
        let Some(rest) = rest.strip_prefix('/') else {
            return Err(MediaTypeError("expected slash after first token"));
        };
        let (sub, rest) = consume_token(rest);
        if sub.is_empty() {
            return Err(MediaTypeError("expected token after slash"));
        }
        if !rest.is_empty() {
            return Err(MediaTypeError("unexpected content after media subtype"));
        }
        Ok(())
    }

    fn unhex(c: u8) -> Option<u8> {
        char::from(c)
            .to_digit(16)
            .and_then(|d| u8::try_from(d).ok())
    }

    fn percent_unescape(s: &str) -> Option<String> {
        let b = s.as_bytes();
        let mut out = Vec::with_capacity(b.len());
        let mut i = 0;
        while let Some(&c) = b.get(i) {
            if c == b'%' {
                let hi = b.get(i + 1).copied().and_then(unhex)?;
                let lo = b.get(i + 2).copied().and_then(unhex)?;
                out.push(hi << 4 | lo);
                i += 3;
            } else {
                out.push(c);
                i += 1;
            }
        }
        Some(String::from_utf8_lossy(&out).into_owned())
    }

    /// RFC 2231 `charset'language'value` (us-ascii and utf-8 only, as Go).
    fn decode_2231(v: &str) -> Option<String> {
        let mut it = v.splitn(3, '\'');
        let (charset, _lang, value) = (it.next()?, it.next()?, it.next()?);
        let charset = charset.to_ascii_lowercase();
        if charset != "us-ascii" && charset != "utf-8" {
            return None;
        }
        percent_unescape(value)
    }

    /// `mime.ParseMediaType`: the lower-case media type and its parameters (keys lower-case),
    /// RFC 2231 continuations stitched.
    pub fn parse_media_type(v: &str) -> Result<(String, Vec<(String, String)>), MediaTypeError> {
        let (base, mut rest) = v.split_at(v.find(';').unwrap_or(v.len()));
        let media_type = base.to_lowercase().trim().to_string();
        check_type(&media_type)?;
        let mut params: BTreeMap<String, String> = BTreeMap::new();
        let mut continued: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        loop {
            rest = rest.trim_start();
            if rest.is_empty() {
                break;
            }
            let Some((key, value, next)) = consume_param(rest) else {
                if rest.trim() == ";" {
                    break; // a trailing semicolon is not an error
                }
                return Err(MediaTypeError("invalid media parameter"));
            };
            let map = match key.find('*') {
                Some(star) => continued.entry(key[..star].to_string()).or_default(),
                None => &mut params,
            };
            if map.insert(key, value).is_some() {
                return Err(MediaTypeError("duplicate parameter name"));
            }
            rest = next;
        }
        for (base, pieces) in continued {
            if let Some(v) = pieces.get(&format!("{base}*")) {
                if let Some(d) = decode_2231(v) {
                    params.insert(base, d);
                }
                continue;
            }
            let mut value = String::new();
            let mut valid = false;
            for n in 0..pieces.len() {
                if let Some(v) = pieces.get(&format!("{base}*{n}")) {
                    value.push_str(v);
                } else if let Some(v) = pieces.get(&format!("{base}*{n}*")) {
                    let d = if n == 0 {
                        decode_2231(v)
                    } else {
                        percent_unescape(v)
                    };
                    value.push_str(&d.unwrap_or_default());
                } else {
                    break;
                }
                valid = true;
            }
            if valid {
                params.insert(base, value);
            }
        }
        Ok((media_type, params.into_iter().collect()))
    }

    /// Why a multipart body cannot be read.
    #[derive(Debug)]
    pub enum MultipartError {
        Body(String),
        /// In part n (from 1).
        Part(usize, String),
    }

    /// One part: its headers and raw body.
    pub struct Part<'a> {
        pub number: usize,
        pub headers: Headers,
        body: &'a [u8],
    }

    impl Part<'_> {
        /// The body, quoted-printable decoded when its Content-Transfer-Encoding says so.
        pub fn content(&self) -> Result<Vec<u8>, String> {
            if self
                .headers
                .get("Content-Transfer-Encoding")
                .eq_ignore_ascii_case("quoted-printable")
            {
                quoted_printable(self.body)
            } else {
                Ok(self.body.to_vec())
            }
        }
    }

    /// Go's `mime/multipart` Reader over a whole body.
    pub struct Multipart<'a> {
        data: &'a [u8],
        pos: usize,
        parts: usize,
        headers: usize,
        crlf: bool,
        dash: Vec<u8>,
        finder_crlf: memchr::memmem::Finder<'static>,
        finder_lf: memchr::memmem::Finder<'static>,
    }

    /// How the bytes after a possible boundary decide it (Go's `matchAfterPrefix` at the end of
    /// the input).
    enum After {
        Boundary,
        NotBoundary,
        Unterminated,
    }

    fn after(buf: &[u8], prefix: usize) -> After {
        match (buf.get(prefix), buf.get(prefix + 1)) {
            (None, _) => After::Boundary,
            (Some(b' ' | b'\t' | b'\r' | b'\n'), _) => After::Boundary,
            (Some(b'-'), None) => After::Unterminated,
            (Some(b'-'), Some(b'-')) => After::Boundary,
            _ => After::NotBoundary,
        }
    }

    fn skip_lwsp(b: &[u8]) -> &[u8] {
        let n = b.iter().take_while(|c| matches!(c, b' ' | b'\t')).count();
        &b[n..]
    }

    impl<'a> Multipart<'a> {
        pub fn new(data: &'a [u8], boundary: &str) -> Result<Multipart<'a>, MultipartError> {
            if boundary.is_empty() {
                return Err(MultipartError::Body(
                    "the Content-Type has no boundary parameter (or an empty one)".into(),
                ));
            }
            let dash = format!("--{boundary}").into_bytes();
            let with = |nl: &[u8]| {
                memchr::memmem::Finder::new(&[nl, dash.as_slice()].concat()).into_owned()
            };
            Ok(Multipart {
                data,
                pos: 0,
                parts: 0,
                headers: 0,
                crlf: true,
                finder_crlf: with(b"\r\n"),
                finder_lf: with(b"\n"),
                dash,
            })
        }

        /// Parts seen so far.
        pub fn parts(&self) -> usize {
            self.parts
        }

        fn nl(&self) -> &'static [u8] {
            if self.crlf {
                b"\r\n"
            } else {
                b"\n"
            }
        }

        fn is_final(&self, line: &[u8]) -> bool {
            let Some(rest) = line
                .strip_prefix(self.dash.as_slice())
                .and_then(|r| r.strip_prefix(b"--"))
            else {
                return false;
            };
            let rest = skip_lwsp(rest);
            rest.is_empty() || rest == self.nl()
        }

        fn is_delimiter(&mut self, line: &[u8]) -> bool {
            let Some(rest) = line.strip_prefix(self.dash.as_slice()) else {
                return false;
            };
            let rest = skip_lwsp(rest);
            if self.parts == 0 && rest == b"\n" {
                self.crlf = false; // LF line ends, as Go allows from the first boundary on
            }
            rest == self.nl()
        }

        fn unterminated(&self) -> MultipartError {
            MultipartError::Part(
                self.parts,
                "the part does not end: no boundary line follows it".into(),
            )
        }

        /// The body of the part whose headers end at `pos`: up to the first new line followed
        /// by the boundary (or the boundary right away, for an empty part).
        fn body(&mut self) -> Result<&'a [u8], MultipartError> {
            let data = self.data;
            let start = self.pos;
            let rest = data.get(start..).unwrap_or_default();
            let mut from = start;
            if rest.starts_with(&self.dash) {
                match after(rest, self.dash.len()) {
                    After::Boundary => return Ok(&data[start..start]),
                    After::NotBoundary => from = start + self.dash.len(),
                    After::Unterminated => return Err(self.unterminated()),
                }
            } else if self.dash.starts_with(rest) {
                return Err(self.unterminated());
            }
            let finder = if self.crlf {
                &self.finder_crlf
            } else {
                &self.finder_lf
            };
            let len = finder.needle().len();
            loop {
                let tail = data.get(from..).unwrap_or_default();
                let Some(i) = finder.find(tail) else {
                    return Err(self.unterminated());
                };
                let at = from + i;
                match after(&data[at..], len) {
                    After::Boundary => {
                        self.pos = at;
                        return Ok(&data[start..at]);
                    }
                    After::NotBoundary => from = at + len,
                    After::Unterminated => return Err(self.unterminated()),
                }
            }
        }

        /// The next part, `None` after the closing delimiter (or, as Go, when a part's headers
        /// run into the end of the input).
        pub fn next_part(&mut self) -> Result<Option<Part<'a>>, MultipartError> {
            let mut expect_new = false;
            loop {
                let rest = self.data.get(self.pos..).unwrap_or_default();
                let Some(end) = memchr::memchr(b'\n', rest) else {
                    if self.is_final(rest) {
                        self.pos = self.data.len();
                        return Ok(None);
                    }
                    return Err(MultipartError::Body(if self.parts == 0 {
                        "no boundary line: the boundary parameter names none of its lines".into()
                    } else {
                        "it ends before the closing boundary line (`--boundary--`)".into()
                    }));
                };
                let line = &rest[..=end];
                self.pos += end + 1;
                if self.is_delimiter(line) {
                    self.parts += 1;
                    let n = self.parts;
                    let (headers, how) = read_headers(self.data, &mut self.pos, true)
                        .map_err(|e| MultipartError::Part(n, e))?;
                    if how == End::Eof {
                        return Ok(None);
                    }
                    self.headers += headers.0.len();
                    if self.headers > super::MAX_PART_HEADERS {
                        return Err(MultipartError::Body(format!(
                            "more than {} header lines",
                            super::MAX_PART_HEADERS
                        )));
                    }
                    let body = self.body()?;
                    return Ok(Some(Part {
                        number: n,
                        headers,
                        body,
                    }));
                }
                if self.is_final(line) {
                    return Ok(None);
                }
                if expect_new {
                    return Err(MultipartError::Body(format!(
                        "after part {} a line is neither a boundary nor the closing boundary",
                        self.parts
                    )));
                }
                if self.parts == 0 {
                    continue; // the preamble
                }
                if line == self.nl() {
                    expect_new = true;
                    continue;
                }
                return Err(MultipartError::Body(format!(
                    "after part {} an unexpected line where a boundary belongs",
                    self.parts
                )));
            }
        }
    }

    /// Go's `mime/quotedprintable` Reader over a whole body: `=XX` escapes, soft line breaks
    /// (`=` at the end of a line), trailing white space dropped, a `=` not followed by two hex
    /// digits kept as it is (but not at the end of a line).
    pub fn quoted_printable(data: &[u8]) -> Result<Vec<u8>, String> {
        let invalid = |what: &str| format!("the quoted-printable body holds {what}");
        let mut out = Vec::with_capacity(data.len());
        let mut pos = 0;
        while pos < data.len() {
            let rest = &data[pos..];
            let (whole, eof) = match memchr::memchr(b'\n', rest) {
                Some(i) => (&rest[..=i], false),
                None => (rest, true),
            };
            pos += whole.len();
            let kept = whole
                .iter()
                .rposition(|c| !matches!(c, b'\n' | b'\r' | b' ' | b'\t'))
                .map_or(0, |i| i + 1);
            let mut line = whole[..kept].to_vec();
            let mut after_soft_break_error = false;
            if line.last() == Some(&b'=') {
                line.pop();
                let right = skip_lwsp(&whole[kept..]);
                let ok = right.starts_with(b"\n")
                    || right.starts_with(b"\r\n")
                    || (right.is_empty() && !line.is_empty() && eof);
                after_soft_break_error = !ok;
            } else if whole.ends_with(b"\r\n") {
                line.extend_from_slice(b"\r\n");
            } else if whole.ends_with(b"\n") {
                line.push(b'\n');
            }
            let mut i = 0;
            while let Some(&c) = line.get(i) {
                match c {
                    b'=' => {
                        let hex = line
                            .get(i + 1)
                            .copied()
                            .and_then(unhex)
                            .zip(line.get(i + 2).copied().and_then(unhex));
                        match hex {
                            Some((hi, lo)) => {
                                out.push(hi << 4 | lo);
                                i += 3;
                                continue;
                            }
                            None if line.get(i + 1).is_some_and(|n| *n != b'\r' && *n != b'\n') => {
                                out.push(b'=');
                            }
                            None => return Err(invalid("a `=` at the end of a line")),
                        }
                    }
                    b'\t' | b'\r' | b'\n' | 0x80..=0xff | b' '..=b'~' => out.push(c),
                    _ => return Err(invalid("a control character")),
                }
                i += 1;
            }
            if after_soft_break_error {
                return Err(invalid("characters after a soft line break (`=`)"));
            }
        }
        Ok(out)
    }
}

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
    let utf8 = |at: Where, bytes: Vec<u8>| {
        String::from_utf8(bytes).map_err(|e| UserDataError::Part {
            at,
            reason: format!(
                "the eks-nodeinit config is not UTF-8 (at byte offset {}); save it as UTF-8",
                e.utf8_error().valid_up_to()
            ),
        })
    };
    let Some((boundary, body)) = multipart_boundary(&data) else {
        let text = String::from_utf8_lossy(&data);
        let trimmed = text.trim_start_matches(|c: char| c.is_ascii_whitespace() || c == '\u{feff}');
        if !trimmed.starts_with('{') {
            return Ok(None);
        }
        // A JSON NodeConfig (or any document with a `kind`) is nodeadm's, not the agent's; the
        // agent's config has no `kind` and may pin `"apiVersion": "eks-nodeinit/v1"`.
        if let Ok(Value::Object(m)) = serde_json::from_str::<Value>(trimmed) {
            let nodeadm_version = m
                .get("apiVersion")
                .and_then(Value::as_str)
                .is_some_and(|v| !v.starts_with("eks-nodeinit/"));
            if m.contains_key("kind") || nodeadm_version {
                return Ok(None);
            }
        }
        return utf8(Where::Whole, data.into_owned()).map(|text| {
            Some(AgentConfig {
                at: Where::Whole,
                text,
            })
        });
    };
    let mut reader = mime::Multipart::new(&data[body..], &boundary).map_err(multipart_error)?;
    let mut found: Option<AgentConfig> = None;
    while let Some(part) = reader.next_part().map_err(multipart_error)? {
        let at = Where::Part(part.number);
        let content_type = part.headers.get("Content-Type");
        let Ok((media_type, _)) = mime::parse_media_type(&content_type) else {
            continue;
        };
        if media_type != AGENT_MEDIA_TYPE {
            if media_type.contains("eks-nodeinit") {
                return Err(UserDataError::Part {
                    at,
                    reason: format!(
                        "its Content-Type names eks-nodeinit but is not {AGENT_MEDIA_TYPE}: fix the part's Content-Type"
                    ),
                });
            }
            continue;
        }
        if let Some(first) = &found {
            return Err(UserDataError::Part {
                at,
                reason: format!(
                    "a second {AGENT_MEDIA_TYPE} part ({} is the first): give the config once",
                    first.at
                ),
            });
        }
        let raw = part
            .content()
            .map_err(|reason| UserDataError::Part { at, reason })?;
        let decoded = decode_if_base64(&raw);
        let decoded = decompress_if_gzip(decoded, at, &mut budget)?;
        found = Some(AgentConfig {
            at,
            text: utf8(at, decoded.into_owned())?,
        });
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    const CA: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCmZha2UtY2EtZm9yLXRlc3RzCg==";

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn b64(data: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(data)
    }

    fn yaml(flags: &[&str]) -> String {
        let mut s = format!(
            "---\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: prod\n    certificateAuthority: {CA}\n"
        );
        if !flags.is_empty() {
            s.push_str("  kubelet:\n    flags:\n");
            for f in flags {
                s.push_str(&format!("      - \"{f}\"\n"));
            }
        }
        s
    }

    /// A MIME multipart document of (content type, extra headers, body) parts, with `nl` line
    /// ends.
    fn mime(parts: &[(&str, &str, &str)], nl: &str) -> String {
        let mut s = format!(
            "MIME-Version: 1.0{nl}Content-Type: multipart/mixed; boundary=\"==BOUNDARY==\"{nl}{nl}preamble{nl}"
        );
        for (ct, extra, body) in parts {
            s.push_str(&format!(
                "--==BOUNDARY=={nl}Content-Type: {ct}{nl}{extra}{nl}"
            ));
            s.push_str(&body.replace('\n', nl));
            s.push_str(nl);
        }
        s.push_str(&format!("--==BOUNDARY==--{nl}"));
        s
    }

    fn taints(r: &Result<NodeConfigs, UserDataError>) -> (String, Vec<String>) {
        let t = r.as_ref().unwrap().taints.as_ref().unwrap();
        let texts = t
            .entries
            .iter()
            .map(|e| match e {
                Ok(t) => t.text.clone(),
                Err(e) => format!("ERR {e}"),
            })
            .collect();
        (t.source.clone(), texts)
    }

    #[test]
    fn mime_with_several_parts_merges_in_order_and_the_last_flag_wins() {
        for nl in ["\n", "\r\n"] {
            let ud = mime(
                &[
                    (
                        "text/x-shellscript; charset=\"us-ascii\"",
                        "",
                        "#!/bin/bash\necho hi\n",
                    ),
                    (
                        "application/node.eks.aws",
                        "",
                        &yaml(&["--v=2", "--register-with-taints=a=1:NoSchedule,b:NoExecute"]),
                    ),
                    (
                        "APPLICATION/Node.EKS.AWS; charset=utf-8",
                        "",
                        &yaml(&[
                            "--node-labels=x=y",
                            "--register-with-taints c=3:PreferNoSchedule",
                        ]),
                    ),
                ],
                nl,
            );
            let r = read(ud.as_bytes());
            assert_eq!(
                r.as_ref().unwrap().documents,
                [Where::Part(2), Where::Part(3)],
                "{nl:?}"
            );
            assert_eq!(
                taints(&r),
                (
                    "kubelet.flags[1] of the NodeConfig in MIME part 3 of the user data".into(),
                    vec!["c=3:PreferNoSchedule".to_string()]
                ),
                "kubelet keeps the last --register-with-taints ({nl:?})"
            );
        }
    }

    #[test]
    fn config_taints_count_only_without_a_flag_and_the_last_document_wins() {
        let with_config = |taints: &str| {
            format!(
                "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      maxPods: 20\n      registerWithTaints: {taints}\n"
            )
        };
        let ud = mime(
            &[
                (
                    "application/node.eks.aws",
                    "",
                    &with_config("[{key: a, value: \"1\", effect: NoSchedule}]"),
                ),
                (
                    "application/node.eks.aws",
                    "",
                    &with_config("[{key: b, effect: NoExecute, timeAdded: null}]"),
                ),
            ],
            "\n",
        );
        let r = read(ud.as_bytes());
        assert_eq!(
            taints(&r),
            (
                "kubelet.config.registerWithTaints of the NodeConfig in MIME part 2 of the user data"
                    .into(),
                vec!["b:NoExecute".to_string()]
            )
        );
        // A flag anywhere overrides the config's list.
        let ud = mime(
            &[
                (
                    "application/node.eks.aws",
                    "",
                    &yaml(&["--register-with-taints=f:NoSchedule"]),
                ),
                (
                    "application/node.eks.aws",
                    "",
                    &with_config("[{key: c, effect: NoSchedule}]"),
                ),
            ],
            "\n",
        );
        assert_eq!(taints(&read(ud.as_bytes())).1, ["f:NoSchedule"]);
        // An empty flag clears them: nothing to carry.
        let ud = mime(
            &[
                (
                    "application/node.eks.aws",
                    "",
                    &with_config("[{key: c, effect: NoSchedule}]"),
                ),
                (
                    "application/node.eks.aws",
                    "",
                    &yaml(&["--register-with-taints="]),
                ),
            ],
            "\n",
        );
        assert_eq!(read(ud.as_bytes()).unwrap().taints, None);
        // Entries kubelet would refuse say why, without their text.
        let ud = with_config("[{key: \"bad key\", effect: NoSchedule}, {key: k, effect: 3}, x]");
        let (_, got) = taints(&read(ud.as_bytes()));
        assert!(
            got.iter()
                .all(|g| g.starts_with("ERR ") && !g.contains("bad key")),
            "{got:?}"
        );
        assert_eq!(got.len(), 3);
    }

    #[test]
    fn base64_whole_gzip_whole_and_gzip_part() {
        let doc = yaml(&["--register-with-taints=g:NoSchedule"]);
        let want = vec!["g:NoSchedule".to_string()];
        // base64 with line breaks, as `base64` writes it (Go skips \r and \n).
        let wrapped: String = b64(doc.as_bytes())
            .as_bytes()
            .chunks(76)
            .map(|c| format!("{}\r\n", String::from_utf8_lossy(c)))
            .collect();
        assert_eq!(taints(&read(wrapped.as_bytes())).1, want);
        assert_eq!(taints(&read(&gzip(doc.as_bytes()))).1, want);
        // base64 of gzip, as the EC2 API is given compressed user data.
        assert_eq!(taints(&read(b64(&gzip(doc.as_bytes())).as_bytes())).1, want);
        // gzip of MIME whose NodeConfig part is itself base64 of gzip.
        let part = b64(&gzip(doc.as_bytes()));
        let ud = mime(
            &[(
                "application/node.eks.aws",
                "Content-Transfer-Encoding: base64\n",
                &part,
            )],
            "\r\n",
        );
        let r = read(&gzip(ud.as_bytes()));
        assert_eq!(taints(&r).1, want);
        assert_eq!(
            taints(&r).0,
            "kubelet.flags[0] of the NodeConfig in MIME part 1 of the user data"
        );
        // Two gzip members are one stream, as Go reads them.
        let (a, b) = doc.split_at(20);
        let two = [gzip(a.as_bytes()), gzip(b.as_bytes())].concat();
        assert_eq!(taints(&read(&two)).1, want);
    }

    #[test]
    fn plain_yaml_and_plain_json() {
        let r = read(yaml(&[]).as_bytes()).unwrap();
        assert_eq!(r.documents, [Where::Whole]);
        assert_eq!(r.taints, None);
        let json = r#"{"apiVersion":"node.eks.aws/v1alpha1","kind":"NodeConfig","spec":{"kubelet":{"flags":["--register-with-taints","j=1:NoExecute"]}}}"#;
        assert_eq!(
            taints(&read(json.as_bytes())),
            (
                "kubelet.flags[0] of the NodeConfig in the user data".into(),
                vec!["j=1:NoExecute".to_string()]
            )
        );
    }

    #[test]
    fn no_nodeconfig() {
        let no = |ud: &[u8]| match read(ud) {
            Err(UserDataError::NoNodeConfig(why)) => why,
            other => panic!("{other:?}"),
        };
        assert!(matches!(no(b""), NoNodeConfig::NotANodeConfig { .. }));
        assert!(matches!(
            no(b"#!/bin/bash\neks-nodeinit init\n"),
            NoNodeConfig::NotANodeConfig { .. }
        ));
        assert!(matches!(
            no(b"#cloud-config\nruncmd: [ls]\n"),
            NoNodeConfig::NotANodeConfig { .. }
        ));
        let shell = mime(&[("text/x-shellscript", "", "#!/bin/bash\n")], "\n");
        assert_eq!(no(shell.as_bytes()), NoNodeConfig::NoPart { parts: 1 });
        // A single-part MIME message is no multipart: read whole, not a NodeConfig.
        let single = "MIME-Version: 1.0\nContent-Type: text/x-shellscript\n\n#!/bin/bash\n";
        assert!(matches!(
            no(single.as_bytes()),
            NoNodeConfig::NotANodeConfig { .. }
        ));
        let e = read(shell.as_bytes()).unwrap_err().to_string();
        assert!(
            e.starts_with("could not find NodeConfig within UserData"),
            "{e}"
        );
    }

    #[test]
    fn malformed_user_data_says_where_and_never_what() {
        let secret = format!("token-{CA}");
        let cases: Vec<(Vec<u8>, &str)> = vec![
            // The gzip magic, then garbage.
            ([&[0x1f, 0x8b, 8, 0][..], secret.as_bytes()].concat(), "the user data starts with the gzip magic"),
            // Gzip followed by other bytes (Go reads on for a next member and fails).
            ([gzip(yaml(&[]).as_bytes()), secret.clone().into_bytes()].concat(), "the user data starts with the gzip magic"),
            // A NodeConfig part that is not YAML.
            (
                mime(&[("application/node.eks.aws", "", &format!("kind: [{secret}\n"))], "\n").into_bytes(),
                "MIME part 1 of the user data is not a NodeConfig nodeadm can decode: not YAML or JSON nodeadm can read (line",
            ),
            // A NodeConfig part of another kind.
            (
                mime(&[("text/plain", "", "x"), ("application/node.eks.aws", "", "apiVersion: v1\nkind: ConfigMap\n")], "\n").into_bytes(),
                "MIME part 2 of the user data is not a NodeConfig nodeadm can decode: no `kind: NodeConfig`",
            ),
            // Flags that are not a list.
            (
                mime(&[("application/node.eks.aws", "", &format!("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flags: {secret}\n"))], "\n").into_bytes(),
                "`spec.kubelet.flags` is not a list of strings",
            ),
            // No closing boundary.
            (
                format!("Content-Type: multipart/mixed; boundary=B\n\n--B\nContent-Type: application/node.eks.aws\n\n{secret}\n").into_bytes(),
                "MIME part 1 of the user data: the part does not end",
            ),
            // No boundary parameter.
            (b"Content-Type: multipart/mixed\n\n--B\n".to_vec(), "no boundary parameter"),
            // A part's Content-Type that is not a media type.
            (
                mime(&[("application/node.eks.aws; x=\"unterminated", "", "x")], "\n").into_bytes(),
                "MIME part 1 of the user data: its Content-Type is not a media type",
            ),
            // A gzip part that is not gzip.
            (
                mime(&[("application/node.eks.aws", "", &b64(&[&[0x1f, 0x8b][..], secret.as_bytes()].concat()))], "\n").into_bytes(),
                "MIME part 1 of the user data starts with the gzip magic",
            ),
            // A whole NodeConfig of another version.
            (b"apiVersion: node.eks.aws/v9\nkind: NodeConfig\n".to_vec(), "`apiVersion` is not node.eks.aws/v1alpha1"),
            // Junk between parts.
            (
                format!("Content-Type: multipart/mixed; boundary=B\n\n--B\n\nx\n--B {secret}\n--B--\n").into_bytes(),
                "the user data's MIME multipart body: after part 1",
            ),
        ];
        for (ud, want) in cases {
            let e = read(&ud).unwrap_err();
            let s = e.to_string();
            assert!(s.contains(want), "`{s}` should contain `{want}`");
            assert!(!s.contains("token-") && !s.contains(CA), "{s}");
        }
    }

    #[test]
    fn mime_edges_follow_go() {
        let doc = yaml(&["--register-with-taints=e:NoSchedule"]);
        // Folded Content-Type header, upper-case keys, a quoted boundary with a space, an empty
        // part, and text after the closing boundary.
        let ud = format!(
            "CONTENT-TYPE: multipart/mixed;\n boundary=\"a b\"\nMIME-Version: 1.0\n\n--a b\nContent-Type: text/plain\n\n--a b  \ncontent-type: application/node.eks.aws\n\n{doc}\n--a b--\nepilogue\n"
        );
        let r = read(ud.as_bytes()).unwrap();
        assert_eq!(r.documents, [Where::Part(2)]);
        // A boundary-like line that is longer is body, not a boundary.
        let ud = format!(
            "Content-Type: multipart/mixed; boundary=B\n\n--B\nContent-Type: application/node.eks.aws\n\n{doc}--Bx\n\n--B--"
        );
        assert!(
            read(ud.as_bytes()).is_err(),
            "`--Bx` is YAML in the part, which breaks it"
        );
        // Quoted-printable NodeConfig parts are decoded.
        let qp = doc
            .replace('=', "=3D")
            .replace("kind: NodeConfig", "kind: Node=\nConfig");
        let ud = mime(
            &[(
                "application/node.eks.aws",
                "Content-Transfer-Encoding: Quoted-Printable\n",
                &qp,
            )],
            "\r\n",
        );
        assert_eq!(taints(&read(ud.as_bytes())).1, ["e:NoSchedule"]);
        // RFC 2231 continuations for the boundary.
        let ud = format!(
            "Content-Type: multipart/mixed; boundary*0=\"X\"; boundary*1=\"Y\"\n\n--XY\nContent-Type: application/node.eks.aws\n\n{doc}\n--XY--\n"
        );
        assert_eq!(read(ud.as_bytes()).unwrap().documents, [Where::Part(1)]);
        // A part whose headers run into the end stops the parts, as Go's NextPart says io.EOF.
        let ud = "Content-Type: multipart/mixed; boundary=B\n\n--B\nContent-Type: application/node.eks.aws";
        assert_eq!(
            read(ud.as_bytes()),
            Err(UserDataError::NoNodeConfig(NoNodeConfig::NoPart {
                parts: 1
            }))
        );
    }

    #[test]
    fn media_types_as_go_parses_them() {
        use mime::parse_media_type as p;
        assert_eq!(
            p(" Multipart/Mixed ; Boundary=\"x\\\"y\" ;").unwrap(),
            (
                "multipart/mixed".into(),
                vec![("boundary".into(), "x\"y".into())]
            )
        );
        assert!(p("multipart/mixed; boundary=a; boundary=b").is_err());
        assert!(p("multipart/mixed; boundary").is_err());
        assert!(p("multipart").is_ok());
        assert!(p("multi part/mixed").is_err());
        assert!(p("").is_err());
        assert_eq!(
            p("a/b; name*=utf-8''%41%42").unwrap().1,
            [("name".to_string(), "AB".to_string())]
        );
    }

    #[test]
    fn bounded_and_panic_free() {
        // A gzip bomb past the budget is refused.
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..=(MAX_DECOMPRESSED >> 20) {
            e.write_all(&zeros).unwrap();
        }
        let bomb = e.finish().unwrap();
        assert!(matches!(read(&bomb), Err(UserDataError::TooLarge { .. })));
        // Every prefix of a valid MIME document, and some byte soup, reads without a panic.
        let ud = mime(
            &[(
                "application/node.eks.aws",
                "Content-Transfer-Encoding: quoted-printable\n",
                &yaml(&["--register-with-taints=a:NoSchedule"]),
            )],
            "\r\n",
        );
        for n in 0..ud.len() {
            let _ = read(&ud.as_bytes()[..n]);
        }
        let mut x: u32 = 1;
        for _ in 0..2000 {
            let bytes: Vec<u8> = (0..64)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    b"-B\r\n:=; \"\\a"[(x % 11) as usize]
                })
                .collect();
            let mut ud = b"Content-Type: multipart/mixed; boundary=B\n\n".to_vec();
            ud.extend(bytes);
            let _ = read(&ud);
        }
        for qp in [
            &b"="[..],
            b"a=",
            b"=\n",
            b"==",
            b"=4",
            b"=4\n",
            b"\x01",
            b"a=\r\n=",
            b"= \n",
        ] {
            let _ = mime::quoted_printable(qp);
        }
    }

    fn multipart(parts: &[(&str, &str)]) -> String {
        let mut s =
            String::from("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n");
        for (ct, body) in parts {
            s.push_str(&format!("--B\nContent-Type: {ct}\n\n{body}\n"));
        }
        s + "--B--\n"
    }

    const AGENT: &str = r#"{"cluster": {"name": "prod"}, "nodeGroup": {"role": "scaler"}}"#;

    #[test]
    fn the_agents_config_is_its_mime_part_or_the_whole_json_user_data() {
        let ud = multipart(&[
            ("text/x-shellscript", "#!/bin/sh\necho hi"),
            (AGENT_MEDIA_TYPE, AGENT),
            ("application/node.eks.aws", &yaml(&[])),
        ]);
        let c = agent_config(ud.as_bytes()).unwrap().unwrap();
        assert_eq!(c.at, Where::Part(2));
        assert_eq!(c.text.trim(), AGENT);
        // Its body may be base64 of gzip, as nodeadm's parts may.
        let ud = multipart(&[(
            &format!("{AGENT_MEDIA_TYPE}; charset=utf-8"),
            &b64(&gzip(AGENT.as_bytes())),
        )]);
        assert_eq!(agent_config(ud.as_bytes()).unwrap().unwrap().text, AGENT);
        // A pinned version is the agent's own.
        let pinned = format!(r#"{{"apiVersion": "eks-nodeinit/v1", {}"#, &AGENT[1..]);
        let c = agent_config(pinned.as_bytes()).unwrap().unwrap();
        assert_eq!(c.text, pinned);
        // The whole user data, plain, base64, or base64 of gzip.
        for ud in [
            AGENT.as_bytes().to_vec(),
            b64(AGENT.as_bytes()).into_bytes(),
            b64(&gzip(AGENT.as_bytes())).into_bytes(),
            gzip(format!("\n  {AGENT}\n").as_bytes()),
        ] {
            let c = agent_config(&ud).unwrap().unwrap();
            assert_eq!((c.at, c.text.trim()), (Where::Whole, AGENT));
        }
        // Its Debug names where, never what.
        assert!(!format!("{c:?}").contains("prod"), "{c:?}");
    }

    #[test]
    fn user_data_without_the_agents_config_holds_none() {
        let json_nodeconfig = r#"{"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig"}"#;
        for ud in [
            "#!/bin/bash\neks-nodeinit init --config /etc/x.json\n".to_string(),
            "#cloud-config\nwrite_files: []\n".into(),
            yaml(&[]),
            json_nodeconfig.into(),
            multipart(&[("application/node.eks.aws", &yaml(&[]))]),
            String::new(),
        ] {
            assert_eq!(agent_config(ud.as_bytes()).unwrap(), None, "{ud}");
        }
    }

    #[test]
    fn a_mistyped_or_repeated_agent_part_is_an_error_not_nothing() {
        let typo = multipart(&[("application/vnd.eks-nodeinit+jsn", AGENT)]);
        let e = agent_config(typo.as_bytes()).unwrap_err().to_string();
        assert!(
            e.contains("MIME part 1") && e.contains(AGENT_MEDIA_TYPE),
            "{e}"
        );
        let two = multipart(&[(AGENT_MEDIA_TYPE, AGENT), (AGENT_MEDIA_TYPE, AGENT)]);
        let e = agent_config(two.as_bytes()).unwrap_err().to_string();
        assert!(e.contains("MIME part 2") && e.contains("second"), "{e}");
        let latin1 = [b"{\"cluster\": \"".as_slice(), &[0xe9], b"\"}"].concat();
        let e = agent_config(&latin1).unwrap_err().to_string();
        assert!(e.contains("not UTF-8"), "{e}");
        assert!(!e.contains("cluster"), "never echoes the config: {e}");
    }
}
