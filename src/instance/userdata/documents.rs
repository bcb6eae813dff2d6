//! One NodeConfig document as nodeadm decodes it (`internal/api/bridge/decode.go`), reduced to
//! the fields the plan reads, from the user data or from a drop-in file in nodeadm's directory
//! (`internal/configprovider/file.go`: each file read by `ParseMaybeMultipart`, no base64 or
//! gzip of the whole file).

use std::hash::{Hash as _, Hasher as _};

use serde::Deserialize as _;
use serde_json::{Map, Value};

use super::{
    decode_if_base64, decompress_if_gzip, mime, multipart_boundary, part_body, parts, NoNodeConfig,
    UserDataError, Where, API_VERSION, KIND, MAX_DECOMPRESSED, NODECONFIG_MEDIA_TYPE,
};

const INSTANCE_ID_GATE: &str = "InstanceIdNodeName";

/// KubeletConfiguration keys for max pods and kube-reserved, and their kubelet flags.
const POD_CAPACITY: [(&str, &str); 2] = [
    ("maxPods", "--max-pods"),
    ("kubeReserved", "--kube-reserved"),
];

/// The names nodeadm looks for in `containerd.config` to take it as version 3.
const CONTAINERD_V3_TABLES: [&str; 2] = [
    "io.containerd.cri.v1.images",
    "io.containerd.cri.v1.runtime",
];

/// One NodeConfig, reduced to the fields the plan reads.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Document {
    pub at: Where,
    pub flags: Vec<String>,
    /// `kubelet.config.registerWithTaints` when the document has the key (`null` included).
    pub register_with_taints: Option<Value>,
    /// Where in it it sets max pods or kube-reserved (`kubelet.config.maxPods`), by key.
    pub pod_capacity: Vec<(&'static str, String)>,
    /// `spec.featureGates.InstanceIdNodeName` when the document sets it.
    pub instance_id_node_name: Option<bool>,
    /// Whether its `spec.containerd.config` names a version-3 table.
    pub containerd_v3: bool,
    /// `kubelet.config.systemReserved` and `evictionHard` when it sets them (nodeadm passes
    /// them to the kubelet unread).
    pub system_reserved: Option<Value>,
    pub eviction_hard: Option<Value>,
    /// `kubelet.config.protectKernelDefaults` when it sets it.
    pub protect_kernel_defaults: Option<Value>,
    /// `spec.instance.localStorage.disabledMounts` when it sets a non-empty list (nodeadm's
    /// merge replaces a list, and an empty one replaces nothing).
    pub disabled_mounts: Option<Vec<String>>,
    /// Every value the document sets besides `kubelet.flags`, by path
    /// (`spec.kubelet.config.evictionHard."memory.available"`, containerd's TOML keys under
    /// `spec.containerd.config`), each kept as a hash: what two documents set differently is
    /// found without keeping what either holds.
    pub leaves: Vec<(String, u64)>,
}

/// The NodeConfig documents nodeadm finds in the user data, in merge order.
pub(super) fn of_user_data(user_data: &[u8]) -> Result<Vec<Document>, UserDataError> {
    let mut budget = MAX_DECOMPRESSED;
    let data = decode_if_base64(user_data);
    let data = decompress_if_gzip(data, Where::Whole, &mut budget)?;
    match multipart_boundary(&data) {
        Some((boundary, body)) => from_multipart(&data[body..], &boundary, &mut budget),
        None => whole(&data).map(|d| vec![d]),
    }
}

/// The NodeConfig documents of one drop-in file at `path`, which nodeadm reads as a MIME
/// multipart document or else as one NodeConfig; any error, no NodeConfig part among them,
/// fails nodeadm's config phase.
pub(super) fn of_dropin(path: &str, data: &[u8]) -> Result<Vec<Document>, UserDataError> {
    let origin = Where::File {
        path: path.into(),
        part: None,
    };
    let mut budget = MAX_DECOMPRESSED;
    let docs = match multipart_boundary(data) {
        Some((boundary, body)) => from_multipart(&data[body..], &boundary, &mut budget),
        None => {
            let value = parse(data).map_err(|reason| UserDataError::Document {
                at: Where::Whole,
                reason,
            })?;
            let doc = match kind(&value) {
                Kind::NodeConfig => document(&value, Where::Whole),
                Kind::Other(why) => Err(why),
            };
            doc.map(|d| vec![d])
                .map_err(|reason| UserDataError::Document {
                    at: Where::Whole,
                    reason,
                })
        }
    };
    match docs {
        Ok(docs) => Ok(docs
            .into_iter()
            .map(|mut d| {
                d.at = d.at.within(&origin);
                d
            })
            .collect()),
        Err(e) => Err(e.within(&origin)),
    }
}

fn from_multipart(
    body: &[u8],
    boundary: &str,
    budget: &mut usize,
) -> Result<Vec<Document>, UserDataError> {
    let (parts, count) = parts(body, boundary)?;
    let mut docs = Vec::new();
    for part in parts {
        let at = Where::Part(part.number);
        let content_type = part.headers.get("Content-Type");
        if content_type.is_empty() {
            continue;
        }
        let (media_type, _) =
            mime::parse_media_type(&content_type).map_err(|e| UserDataError::Part {
                at: at.clone(),
                reason: format!("its Content-Type is not a media type nodeadm accepts ({e})"),
            })?;
        if media_type != NODECONFIG_MEDIA_TYPE {
            continue;
        }
        let data = part_body(&part, at.clone(), budget)?;
        let document_error = |reason| UserDataError::Document {
            at: at.clone(),
            reason,
        };
        let value = parse(&data).map_err(document_error)?;
        let doc = match kind(&value) {
            Kind::NodeConfig => document(&value, at.clone()),
            Kind::Other(why) => Err(why),
        };
        docs.push(doc.map_err(document_error)?);
    }
    if docs.is_empty() {
        return Err(UserDataError::NoNodeConfig(NoNodeConfig::NoPart {
            parts: count,
        }));
    }
    Ok(docs)
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

/// The fields the plan reads, typed as nodeadm's Go types require.
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
    let mut pod_capacity = Vec::new();
    for (key, flag) in POD_CAPACITY {
        if config.as_ref().is_some_and(|c| c.contains_key(key)) {
            pod_capacity.push((key, format!("kubelet.config.{key}")));
        }
        for (i, f) in flags.iter().enumerate() {
            if f.split_ascii_whitespace()
                .any(|w| w == flag || w.starts_with(&format!("{flag}=")))
            {
                pod_capacity.push((key, format!("kubelet.flags[{i}] ({flag})")));
            }
        }
    }
    let gates = object(spec.get("featureGates"), "spec.featureGates")?.unwrap_or_default();
    let instance_id_node_name =
        match gates.get(INSTANCE_ID_GATE) {
            None | Some(Value::Null) => None,
            Some(v) => Some(yaml11_bool(v).ok_or_else(|| {
                format!("`spec.featureGates.{INSTANCE_ID_GATE}` is not a boolean")
            })?),
        };
    let containerd = object(spec.get("containerd"), "spec.containerd")?.unwrap_or_default();
    let containerd_v3 = match containerd.get("config") {
        None | Some(Value::Null) => false,
        Some(Value::String(c)) => CONTAINERD_V3_TABLES.iter().any(|t| c.contains(t)),
        Some(_) => return Err("`spec.containerd.config` is not a string".into()),
    };
    let map = |key: &str| config.as_ref().and_then(|c| c.get(key)).cloned();
    let disabled_mounts = disabled_mounts(&spec)?;
    let mut leaves = Vec::new();
    for (key, value) in &spec {
        let path = format!("spec.{}", segment(key));
        match (key.as_str(), value) {
            ("kubelet", Value::Object(k)) => {
                for (key, value) in k.iter().filter(|(key, _)| *key != "flags") {
                    flatten(&format!("{path}.{}", segment(key)), value, &mut leaves);
                }
            }
            ("containerd", Value::Object(c)) => containerd_leaves(&path, c, &mut leaves),
            _ => flatten(&path, value, &mut leaves),
        }
    }
    Ok(Document {
        at,
        disabled_mounts,
        leaves,
        system_reserved: map("systemReserved"),
        eviction_hard: map("evictionHard"),
        protect_kernel_defaults: map("protectKernelDefaults"),
        flags,
        containerd_v3,
        register_with_taints: config.and_then(|c| c.get("registerWithTaints").cloned()),
        pod_capacity,
        instance_id_node_name,
    })
}

/// `spec.instance.localStorage.disabledMounts`, when a non-empty list of strings.
fn disabled_mounts(spec: &Map<String, Value>) -> Result<Option<Vec<String>>, String> {
    let list = spec
        .get("instance")
        .and_then(|i| i.get("localStorage"))
        .and_then(|l| l.get("disabledMounts"));
    match list {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(a)) if a.is_empty() => Ok(None),
        Some(Value::Array(a)) => a
            .iter()
            .map(|m| m.as_str().map(String::from))
            .collect::<Option<Vec<_>>>()
            .map(Some)
            .ok_or_else(|| {
                "`spec.instance.localStorage.disabledMounts` is not a list of strings".into()
            }),
        Some(_) => Err("`spec.instance.localStorage.disabledMounts` is not a list".into()),
    }
}

/// Every value a NodeConfig (the agent's own) sets besides `kubelet.flags`, by path.
pub(super) fn leaves_of(v: &Value) -> Vec<(String, u64)> {
    document(v, Where::Whole)
        .map(|d| d.leaves)
        .unwrap_or_default()
}

/// A path segment: the key as it is, quoted when it holds a dot or a quote.
pub(super) fn segment(key: &str) -> String {
    match key.contains(['.', '"']) {
        true => format!("{:?}", key),
        false => key.to_string(),
    }
}

/// Every value under `path` that is not a mapping, hashed; an empty value (null, `""`, `[]`)
/// replaces nothing in nodeadm's merge of its typed fields and is left out.
fn flatten(path: &str, v: &Value, out: &mut Vec<(String, u64)>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                flatten(&format!("{path}.{}", segment(k)), v, out);
            }
        }
        Value::Null => {}
        Value::String(s) if s.is_empty() => {}
        Value::Array(a) if a.is_empty() => {}
        _ => out.push((path.to_string(), hash(&v.to_string()))),
    }
}

/// `spec.containerd`: `config` is TOML, which nodeadm merges table by table; each of its keys
/// is a leaf of its own. TOML nodeadm cannot read is one leaf, the whole text.
fn containerd_leaves(path: &str, c: &Map<String, Value>, out: &mut Vec<(String, u64)>) {
    for (key, value) in c {
        let path = format!("{path}.{}", segment(key));
        match (key.as_str(), value) {
            ("config", Value::String(text)) => match text.parse::<toml_edit::DocumentMut>() {
                Ok(doc) => toml_leaves(&path, doc.as_table(), out),
                Err(_) => out.push((path, hash(text))),
            },
            _ => flatten(&path, value, out),
        }
    }
}

fn toml_leaves(path: &str, t: &toml_edit::Table, out: &mut Vec<(String, u64)>) {
    for (k, item) in t.iter() {
        let path = format!("{path}.{}", segment(k));
        match item {
            toml_edit::Item::Table(t) => toml_leaves(&path, t, out),
            toml_edit::Item::Value(toml_edit::Value::InlineTable(t)) => {
                toml_leaves(&path, &t.clone().into_table(), out)
            }
            toml_edit::Item::Value(v) => {
                out.push((path, hash(&v.clone().decorated("", "").to_string())))
            }
            toml_edit::Item::ArrayOfTables(a) => out.push((path, hash(&a.to_string()))),
            toml_edit::Item::None => {}
        }
    }
}

fn hash(text: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

/// A boolean as nodeadm's YAML reader (YAML 1.1) takes it: `true`, `yes`, `on`, `y` and their
/// negations in any case.
pub(super) fn yaml11_bool(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::String(s) => match s.to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" | "y" => Some(true),
            "false" | "no" | "off" | "n" => Some(false),
            _ => None,
        },
        _ => None,
    }
}
