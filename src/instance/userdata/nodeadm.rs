//! nodeadm's reading of the user data (the rules in [`super`]), reduced at once to what the plan
//! needs: where each NodeConfig is, and the taints kubelet registers from their merge.

use serde::Deserialize as _;
use serde_json::Value;

use crate::base::k8s::{self, Taint};

use super::{
    decode_if_base64, decompress_if_gzip, mime, multipart_boundary, part_body, parts, NoNodeConfig,
    UserDataError, Where, API_VERSION, KIND, MAX_DECOMPRESSED, NODECONFIG_MEDIA_TYPE,
};

const FLAG: &str = "--register-with-taints";
const HOSTNAME_FLAG: &str = "--hostname-override";
const INSTANCE_ID_GATE: &str = "InstanceIdNodeName";

/// What the user data's NodeConfigs tell the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeConfigs {
    /// Where each NodeConfig is, in nodeadm's merge order.
    pub documents: Vec<Where>,
    /// The taints kubelet registers with from the user data's merged NodeConfig alone; `None`
    /// when it registers none.
    pub taints: Option<EffectiveTaints>,
    /// Where the NodeConfigs set max pods or kube-reserved (`kubelet.config.maxPods of the
    /// NodeConfig in MIME part 2 of the user data`), by KubeletConfiguration key.
    pub pod_capacity: Vec<(&'static str, String)>,
    /// What names the Node, from the merged NodeConfig.
    pub naming: Naming,
    /// Whether a NodeConfig's `containerd.config` names a table of containerd's config version
    /// 3 (nodeadm's `Version3configInNodeConfig`): nodeadm then uses its version-3 template and
    /// merges the agent's fragment into it without migrating, so the fragment must name the
    /// same tables.
    pub containerd_v3: bool,
    /// The reservations besides kube-reserved the user data gives the kubelet, merged as the
    /// kubelet merges its drop-ins (key by key, later documents winning).
    pub reserved: Box<UserReserved>,
    /// Whether the user data turns the kubelet's `protectKernelDefaults` on or off, and where:
    /// the last `--protect-kernel-defaults` flag, else the last document's
    /// `kubelet.config.protectKernelDefaults`. `None`: nodeadm's own (on).
    pub protect_kernel_defaults: Option<(bool, String)>,
}

/// `kubelet.config.systemReserved` and `evictionHard` of the merged NodeConfig, and whether a
/// flag sets either (`--system-reserved`, `--eviction-hard`: the flag replaces the map).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UserReserved {
    pub system_reserved: serde_json::Map<String, Value>,
    pub eviction_hard: serde_json::Map<String, Value>,
    /// Where a flag sets one of them, or one is not a mapping: what the agent does not model.
    pub unmodeled: Option<String>,
}

const RESERVED_FLAGS: [&str; 2] = ["--system-reserved", "--eviction-hard"];

/// The names nodeadm looks for in `containerd.config` to take it as version 3.
const CONTAINERD_V3_TABLES: [&str; 2] = [
    "io.containerd.cri.v1.images",
    "io.containerd.cri.v1.runtime",
];

/// What in the user data's NodeConfigs decides the Node's name: nodeadm names it by EC2's
/// `PrivateDnsName`, by the instance id with the `InstanceIdNodeName` feature gate, and kubelet
/// takes the last `--hostname-override` of the flags over either.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Naming {
    /// The last `--hostname-override` among the flags: its value (`None`: the flag has none)
    /// and where it is.
    pub hostname_override: Option<(Option<String>, String)>,
    /// `featureGates.InstanceIdNodeName` of the merged NodeConfig (later documents win).
    pub instance_id_node_name: bool,
}

/// KubeletConfiguration keys for max pods and kube-reserved, and their kubelet flags.
const POD_CAPACITY: [(&str, &str); 2] = [
    ("maxPods", "--max-pods"),
    ("kubeReserved", "--kube-reserved"),
];

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
    #[cfg(test)]
    pub(crate) fn has_node_config(&self) -> Option<bool> {
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
        pod_capacity: docs
            .iter()
            .flat_map(|d| d.pod_capacity.iter().cloned())
            .collect(),
        naming: naming(&docs),
        containerd_v3: docs.iter().any(|d| d.containerd_v3),
        reserved: Box::new(reserved(&docs)),
        protect_kernel_defaults: protect_kernel_defaults(&docs),
    })
}

const PROTECT_FLAG: &str = "--protect-kernel-defaults";

/// A boolean flag's value as pflag parses it (Go's `strconv.ParseBool`); a bare flag is true.
pub fn go_bool_flag(word: &str, flag: &str) -> Option<Option<bool>> {
    if word == flag {
        return Some(Some(true));
    }
    let v = word.strip_prefix(flag)?.strip_prefix('=')?;
    Some(match v {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    })
}

/// `protectKernelDefaults` as the merged documents set it: a flag wins over the config.
fn protect_kernel_defaults(docs: &[Document]) -> Option<(bool, String)> {
    let mut flag = None;
    for d in docs {
        for (i, f) in d.flags.iter().enumerate() {
            let words = f.split_ascii_whitespace().take_while(|w| *w != "--");
            for v in words
                .filter_map(|w| go_bool_flag(w, PROTECT_FLAG))
                .flatten()
            {
                flag = Some((
                    v,
                    format!("kubelet.flags[{i}] of the NodeConfig in {}", d.at),
                ));
            }
        }
    }
    flag.or_else(|| {
        docs.iter().rev().find_map(|d| {
            let v = yaml11_bool(d.protect_kernel_defaults.as_ref()?)?;
            Some((
                v,
                format!(
                    "kubelet.config.protectKernelDefaults of the NodeConfig in {}",
                    d.at
                ),
            ))
        })
    })
}

/// The documents' reservations merged in order.
fn reserved(docs: &[Document]) -> UserReserved {
    let mut r = UserReserved::default();
    for d in docs {
        for (key, value, into) in [
            ("systemReserved", &d.system_reserved, &mut r.system_reserved),
            ("evictionHard", &d.eviction_hard, &mut r.eviction_hard),
        ] {
            match value {
                None => {}
                Some(Value::Object(m)) => into.extend(m.clone()),
                Some(_) => {
                    r.unmodeled = Some(format!(
                        "kubelet.config.{key} of the NodeConfig in {} (not a mapping)",
                        d.at
                    ));
                }
            }
        }
        for (i, f) in d.flags.iter().enumerate() {
            let words = f.split_ascii_whitespace();
            if words.clone().any(|w| {
                RESERVED_FLAGS
                    .iter()
                    .any(|x| w == *x || w.starts_with(&format!("{x}=")))
            }) {
                r.unmodeled = Some(format!("kubelet.flags[{i}] of the NodeConfig in {}", d.at));
            }
        }
    }
    r
}

/// A boolean as nodeadm's YAML reader (YAML 1.1) takes it: `true`, `yes`, `on`, `y` and their
/// negations in any case.
fn yaml11_bool(v: &Value) -> Option<bool> {
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

/// The Node's name as the merged documents decide it.
fn naming(docs: &[Document]) -> Naming {
    let hostname_override = last_flag(docs, HOSTNAME_FLAG).map(|(v, at, i)| {
        (
            v.map(String::from),
            format!("kubelet.flags[{i}] of the NodeConfig in {at}"),
        )
    });
    let instance_id_node_name = docs
        .iter()
        .rev()
        .find_map(|d| d.instance_id_node_name)
        .unwrap_or(false);
    Naming {
        hostname_override,
        instance_id_node_name,
    }
}

/// One NodeConfig, reduced to the fields the taints come from.
#[derive(Debug, Clone, PartialEq)]
struct Document {
    at: Where,
    flags: Vec<String>,
    /// `kubelet.config.registerWithTaints` when the document has the key (`null` included).
    register_with_taints: Option<Value>,
    /// Where it sets max pods or kube-reserved, by key.
    pod_capacity: Vec<(&'static str, String)>,
    /// `spec.featureGates.InstanceIdNodeName` when the document sets it.
    instance_id_node_name: Option<bool>,
    /// Whether its `spec.containerd.config` names a version-3 table.
    containerd_v3: bool,
    /// `kubelet.config.systemReserved` and `evictionHard` when it sets them (nodeadm passes
    /// them to the kubelet unread).
    system_reserved: Option<Value>,
    eviction_hard: Option<Value>,
    /// `kubelet.config.protectKernelDefaults` when it sets it.
    protect_kernel_defaults: Option<Value>,
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
                at,
                reason: format!("its Content-Type is not a media type nodeadm accepts ({e})"),
            })?;
        if media_type != NODECONFIG_MEDIA_TYPE {
            continue;
        }
        let data = part_body(&part, at, budget)?;
        let value = parse(&data).map_err(|reason| UserDataError::Document { at, reason })?;
        let doc = match kind(&value) {
            Kind::NodeConfig => document(&value, at),
            Kind::Other(why) => Err(why),
        };
        docs.push(doc.map_err(|reason| UserDataError::Document { at, reason })?);
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
    let mut pod_capacity = Vec::new();
    for (key, flag) in POD_CAPACITY {
        if config.as_ref().is_some_and(|c| c.contains_key(key)) {
            pod_capacity.push((
                key,
                format!("kubelet.config.{key} of the NodeConfig in {at}"),
            ));
        }
        for (i, f) in flags.iter().enumerate() {
            if f.split_ascii_whitespace()
                .any(|w| w == flag || w.starts_with(&format!("{flag}=")))
            {
                pod_capacity.push((
                    key,
                    format!("kubelet.flags[{i}] ({flag}) of the NodeConfig in {at}"),
                ));
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
    Ok(Document {
        at,
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

/// The taints kubelet registers with from the merged documents: the last
/// `--register-with-taints` among the flags (nodeadm joins the flags with spaces into kubelet's
/// command line, which systemd splits at white space), else the last document's
/// `kubelet.config.registerWithTaints`.
fn effective_taints(docs: &[Document]) -> Option<EffectiveTaints> {
    let (source, entries) = match last_flag(docs, FLAG) {
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

/// The last `flag` among the documents' kubelet flags as kubelet parses them (`--flag=v` or
/// `--flag v`): its value (`None` when it is the last word), the document and the flag's index.
fn last_flag<'a>(docs: &'a [Document], flag: &str) -> Option<(Option<&'a str>, Where, usize)> {
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
        if let Some(v) = w.strip_prefix(flag).and_then(|r| r.strip_prefix('=')) {
            last = Some((Some(v), at, i));
        } else if w == flag {
            n += 1;
            last = Some((words.get(n).map(|x| x.0), at, i));
        }
        n += 1;
    }
    last
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
