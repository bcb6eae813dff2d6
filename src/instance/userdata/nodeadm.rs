//! nodeadm's reading of its NodeConfigs (the rules in [`super`]): the user data's, then every
//! drop-in of `/etc/eks/nodeadm.d/` in name order, the agent's own among them. Reduced at once
//! to what the plan needs: where each NodeConfig is, the taints kubelet registers from their
//! merge, what names the Node, and what another document sets that the agent's sets too.

use serde_json::Value;

use crate::base::k8s::{self, Taint};

use super::documents::{self, yaml11_bool, Document};
use super::{NoNodeConfig, UserDataError, Where};

const FLAG: &str = "--register-with-taints";
const HOSTNAME_FLAG: &str = "--hostname-override";

/// nodeadm's drop-in directory, which `nodeadm-run.service` reads after the user data.
pub const NODEADM_DIR: &str = "/etc/eks/nodeadm.d";
/// The agent's own drop-in in it: `10-` lets an operator's own later drop-in win.
pub const AGENT_DROPIN: &str = "/etc/eks/nodeadm.d/10-eks-nodeinit.json";

/// The agent's drop-in's name in nodeadm's directory.
fn own_name() -> &'static str {
    AGENT_DROPIN.rsplit('/').next().unwrap_or(AGENT_DROPIN)
}

/// What the NodeConfigs beside the agent's tell the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeConfigs {
    /// Where each NodeConfig is, in nodeadm's merge order (the agent's own left out).
    pub documents: Vec<Where>,
    /// The taints kubelet registers with from the documents merged before the agent's drop-in;
    /// `None` when they register none.
    pub taints: Option<EffectiveTaints>,
    /// Where a document merged after the agent's drop-in gives `--register-with-taints`: kubelet
    /// keeps that flag over the agent's.
    pub taints_after: Option<String>,
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
    /// The reservations besides kube-reserved the NodeConfigs give the kubelet, merged as the
    /// kubelet merges its drop-ins (key by key, later documents winning).
    pub reserved: Box<UserReserved>,
    /// Whether the NodeConfigs turn the kubelet's `protectKernelDefaults` on or off, and where:
    /// the last `--protect-kernel-defaults` flag, else the last document's
    /// `kubelet.config.protectKernelDefaults`. `None`: nodeadm's own (on).
    pub protect_kernel_defaults: Option<(bool, String)>,
    /// The last non-empty `instance.localStorage.disabledMounts` merged before the agent's
    /// drop-in, and where: nodeadm's merge replaces the list, so the agent's carries it.
    pub disabled_mounts: Option<(Vec<String>, Where)>,
    docs: Vec<Document>,
    /// How many of `docs` nodeadm merges before the agent's drop-in.
    own_at: usize,
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

/// What in the NodeConfigs decides the Node's name: nodeadm names it by EC2's
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

/// The NodeConfigs' taints as kubelet takes them, from one place.
#[derive(Debug, Clone, PartialEq)]
pub struct EffectiveTaints {
    /// Where kubelet takes them from, e.g. `kubelet.flags[2] of the NodeConfig in MIME part 3
    /// of the user data`.
    pub source: String,
    /// Each taint, or why kubelet would refuse it (without its text).
    pub entries: Vec<Result<Taint, String>>,
}

/// A value the agent's drop-in and another NodeConfig both set, differently.
#[derive(Debug, Clone, PartialEq)]
pub struct Conflict {
    /// Its path, e.g. `spec.kubelet.config.maxPods`.
    pub path: String,
    /// The other document.
    pub other: Where,
    /// Whether nodeadm merges the other after the agent's drop-in, so that the other's wins.
    pub other_wins: bool,
}

/// A drop-in of nodeadm's directory by name, as nodeadm reads it.
pub type DropIn = (String, Result<NodeConfigs, UserDataError>);

/// What the agent knows of the instance's user data.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum UserDataFact {
    /// Not read: a `--metadata` file without `userData`, or no instance (`validate`).
    #[default]
    Unknown,
    /// Read and decoded as nodeadm does.
    Read(Result<Box<NodeConfigs>, UserDataError>),
}

impl UserDataFact {
    /// From the user data's bytes; `None` when the instance has none.
    pub fn from_bytes(user_data: Option<&[u8]>) -> UserDataFact {
        UserDataFact::Read(match user_data {
            None => Err(UserDataError::NoNodeConfig(NoNodeConfig::Absent)),
            Some(b) => read(b).map(Box::new),
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

    /// The drop-ins of nodeadm's directory ([`read_dropins`]), and what nodeadm merges: the
    /// user data's NodeConfigs, then theirs ([`NodeConfigs::merged`]).
    pub fn with_dropins(
        &self,
        names: &[String],
        text: impl Fn(&str) -> Option<Result<String, String>>,
    ) -> (Vec<DropIn>, Option<NodeConfigs>) {
        let dropins = read_dropins(names, text);
        let readable = dropins
            .iter()
            .filter_map(|(n, r)| Some((n.as_str(), r.as_ref().ok()?)));
        let merged = NodeConfigs::merged(self.node_configs(), readable);
        (dropins, merged)
    }

    /// The NodeConfigs nodeadm takes from the user data: none when it has none, cannot be
    /// read, or is not known.
    pub fn node_configs(&self) -> Option<&NodeConfigs> {
        match self {
            UserDataFact::Read(Ok(nc)) => Some(nc),
            _ => None,
        }
    }
}

/// Read user data as nodeadm does.
pub fn read(user_data: &[u8]) -> Result<NodeConfigs, UserDataError> {
    let docs = documents::of_user_data(user_data)?;
    let own_at = docs.len();
    Ok(NodeConfigs::of(docs, own_at))
}

/// Read one drop-in file of nodeadm's directory as nodeadm does (`path` as it names it).
pub fn read_dropin(path: &str, data: &[u8]) -> Result<NodeConfigs, UserDataError> {
    let docs = documents::of_dropin(path, data)?;
    let own_at = docs.len();
    Ok(NodeConfigs::of(docs, own_at))
}

/// The files of nodeadm's directory it reads, the agent's own left out, by name (`names`
/// sorted), each as nodeadm reads it; `text` gives a file's content (`None`: not read, or
/// gone), or why it cannot be read.
pub fn read_dropins(
    names: &[String],
    text: impl Fn(&str) -> Option<Result<String, String>>,
) -> Vec<DropIn> {
    let own = own_name();
    let mut out = Vec::new();
    for name in names.iter().filter(|n| is_config_file(n) && *n != own) {
        let path = format!("{NODEADM_DIR}/{name}");
        let read = match text(&path) {
            None => continue,
            Some(Ok(t)) => read_dropin(&path, t.as_bytes()),
            Some(Err(e)) => Err(UserDataError::Document {
                at: Where::File {
                    path: path.as_str().into(),
                    part: None,
                },
                reason: format!("it cannot be read ({e})"),
            }),
        };
        out.push((name.clone(), read));
    }
    out
}

/// Whether nodeadm reads a file of its directory by this name (`fileConfigProvider`'s
/// `isConfigFile`: `.yaml`, `.yml` or `.json` in any case).
pub fn is_config_file(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    [".yaml", ".yml", ".json"]
        .iter()
        .any(|e| lower.ends_with(e))
}

impl NodeConfigs {
    fn of(docs: Vec<Document>, own_at: usize) -> NodeConfigs {
        let own_at = own_at.min(docs.len());
        NodeConfigs {
            documents: docs.iter().map(|d| d.at.clone()).collect(),
            taints: effective_taints(&docs[..own_at]),
            taints_after: last_flag(&docs[own_at..], FLAG)
                .map(|(_, at, i)| format!("kubelet.flags[{i}] of the NodeConfig in {at}")),
            pod_capacity: docs
                .iter()
                .flat_map(|d| {
                    let at = &d.at;
                    let place = move |(k, w): &(&'static str, String)| {
                        (*k, format!("{w} of the NodeConfig in {at}"))
                    };
                    d.pod_capacity.iter().map(place)
                })
                .collect(),
            naming: naming(&docs),
            containerd_v3: docs.iter().any(|d| d.containerd_v3),
            reserved: Box::new(reserved(&docs)),
            protect_kernel_defaults: protect_kernel_defaults(&docs),
            disabled_mounts: docs[..own_at]
                .iter()
                .rev()
                .find_map(|d| Some((d.disabled_mounts.clone()?, d.at.clone()))),
            own_at,
            docs,
        }
    }

    /// What nodeadm merges: the user data's NodeConfigs (when it takes them), then each
    /// drop-in's by name, the agent's own ([`AGENT_DROPIN`]) in its place among them and left
    /// out. `None` when there is none.
    pub fn merged<'a>(
        user_data: Option<&NodeConfigs>,
        dropins: impl IntoIterator<Item = (&'a str, &'a NodeConfigs)>,
    ) -> Option<NodeConfigs> {
        let own = own_name();
        let mut docs: Vec<Document> = user_data.map(|u| u.docs.clone()).unwrap_or_default();
        let mut own_at = docs.len();
        for (name, nc) in dropins {
            if name == own {
                continue;
            }
            docs.extend(nc.docs.iter().cloned());
            if name < own {
                own_at = docs.len();
            }
        }
        (!docs.is_empty()).then(|| NodeConfigs::of(docs, own_at))
    }

    /// Whether a NodeConfig sets the value at `path` (`spec.cluster.cidr`).
    pub fn sets(&self, path: &str) -> bool {
        self.docs
            .iter()
            .any(|d| d.leaves.iter().any(|(p, _)| p == path))
    }

    /// The values the agent's drop-in (`own`, its NodeConfig) sets that another NodeConfig sets
    /// differently, in merge order.
    pub fn conflicts(&self, own: &Value) -> Vec<Conflict> {
        let own_leaves = documents::leaves_of(own);
        let mut out = Vec::new();
        for (n, d) in self.docs.iter().enumerate() {
            for (path, hash) in &d.leaves {
                let differs = own_leaves.iter().any(|(p, h)| p == path && h != hash);
                if differs
                    && !out
                        .iter()
                        .any(|c: &Conflict| c.path == *path && c.other == d.at)
                {
                    out.push(Conflict {
                        path: path.clone(),
                        other: d.at.clone(),
                        other_wins: n >= self.own_at,
                    });
                }
            }
        }
        out
    }
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
fn last_flag<'a>(docs: &'a [Document], flag: &str) -> Option<(Option<&'a str>, &'a Where, usize)> {
    let words: Vec<(&str, &Where, usize)> = docs
        .iter()
        .flat_map(|d| {
            d.flags
                .iter()
                .enumerate()
                .flat_map(move |(i, f)| f.split_ascii_whitespace().map(move |w| (w, &d.at, i)))
        })
        .collect();
    let mut last: Option<(Option<&str>, &Where, usize)> = None;
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
