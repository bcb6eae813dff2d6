//! The configuration document: the product's public contract.
//!
//! One JSON document (what Terraform's `jsonencode` writes). Field names are camelCase like
//! Kubernetes and nodeadm's `NodeConfig`. Unknown fields are errors that name their JSON path.
//! Nothing in here does I/O beyond reading the document; `spec` checks it and resolves it into
//! what the node should be.

mod aws;
mod cluster;
mod handoff;
mod host;
mod images;
mod imds;
mod kernel;
mod kubelet;
mod lifecycle;
mod local_storage;
mod logind;
mod network;
mod node_group;
mod proxy;
mod registries;
mod schema;
mod sysctls;
mod tagging;
mod trust;
mod verify;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::base::text::{escaped, printable, serde_message};

pub use aws::AwsSettings;
pub use cluster::{
    Cluster, DescribeClusterSource, Discovery, DiscoverySource, IpFamily, ParameterNames,
    SsmParameters, SsmPath,
};
pub use handoff::{HandoffMode, HandoffSettings};
pub use host::{HostSettings, HugepageAmount, HugepagesSettings, SwapSettings};
pub use images::{ImagesSettings, PullSettings};
pub use imds::ImdsSettings;
pub use kernel::KernelSettings;
pub use kubelet::{
    default_kubelet_config_path, CpuManagerSettings, CredentialProviderSettings, ExecEnvVar,
    KubeletSettings, MemoryManagerSettings, NodeNaming, TokenAttributes,
};
pub use lifecycle::{LifecycleSettings, WarmPool};
pub use local_storage::{DisabledMount, LocalStorageSettings, LocalStorageStrategy};
pub use logind::LogindSettings;
pub use network::NetworkSettings;
pub use node_group::{NodeGroup, Role};
pub use proxy::ProxySettings;
pub use registries::{MirrorDetail, RegistrySettings};
pub use sysctls::SysctlValue;
pub use tagging::TaggingSettings;
pub use trust::TrustSettings;
pub use verify::{CheckMode, JoinMode, MismatchMode, OnFailure, VerifySettings};

/// Where the agent reads its configuration when `--config` is not given.
pub(crate) const DEFAULT_CONFIG_PATH: &str = "/etc/eks-nodeinit/config.json";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file itself could not be read (missing, unreadable): nothing is wrong with a config,
    /// so `main` gives this its own exit status. The cause is printed once, here.
    #[error("cannot read config {path}: {cause}")]
    Read { path: String, cause: std::io::Error },
    #[error("config {path}: line {line}, column {column}: {message}")]
    Syntax {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("config {path}: not UTF-8 at byte offset {offset}; save it as UTF-8")]
    Encoding { path: String, offset: usize },
    #[error("config {path}: field `{field}`: {message}")]
    Field {
        path: String,
        field: String,
        message: String,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// The config's version. Optional: absent means `eks-nodeinit/v1`, the only version so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<ApiVersion>,
    pub cluster: Cluster,
    /// Optional: every field has a default (the Name tag's prefix is then the ASG's name).
    #[serde(default)]
    pub node_group: NodeGroup,
    /// Labels merged over the role preset's labels. A `null` value removes a preset label.
    #[serde(default, deserialize_with = "unique_keys")]
    pub labels: BTreeMap<String, Option<String>>,
    /// Taints as `key[=value]:Effect`. When present, replaces the role preset's taints
    /// (an empty list removes them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taints: Option<Vec<String>>,
    /// Node-level sysctls: set live and persisted under /etc/sysctl.d.
    #[serde(default, deserialize_with = "unique_keys")]
    pub sysctls: BTreeMap<String, SysctlValue>,
    #[serde(default)]
    pub kubelet: KubeletSettings,
    #[serde(default)]
    pub logind: LogindSettings,
    #[serde(default)]
    pub handoff: HandoffSettings,
    #[serde(default)]
    pub tagging: TaggingSettings,
    #[serde(default)]
    pub imds: ImdsSettings,
    /// How the agent's own AWS calls find the services (docs/ipv6.md).
    #[serde(default, skip_serializing_if = "AwsSettings::is_default")]
    pub aws: AwsSettings,
    /// Auto Scaling warm pools: hold the hand-off while the instance is warmed.
    #[serde(default)]
    pub lifecycle: LifecycleSettings,
    /// Container registry mirrors and CAs, by registry name (`docker.io`,
    /// `registry.corp.example:5000`): one containerd `hosts.toml` each.
    #[serde(
        default,
        deserialize_with = "unique_keys",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub registries: BTreeMap<String, RegistrySettings>,
    /// The HTTP proxy for containerd, kubelet, nodeadm (AL2023), sandbox-image (AL2) and the
    /// agent's own AWS calls, with a computed NO_PROXY.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<ProxySettings>,
    /// CA certificates for the whole node and the agent's own calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust: Option<TrustSettings>,
    /// Kernel modules loaded now and at every boot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelSettings>,
    /// How the node pulls images: containerd's and the kubelet's pull settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<ImagesSettings>,
    /// What the node's kernel holds for pods before the kubelet starts: huge pages, swap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostSettings>,
    /// The instance store's NVMe disks, set up by the hand-off target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_storage: Option<LocalStorageSettings>,
    /// The checks before the hand-off and the proof of the join after it (docs/join.md).
    #[serde(default, skip_serializing_if = "VerifySettings::is_default")]
    pub verify: VerifySettings,
    /// The node's name servers and search domains (nodeadm's `instance.network`), in force
    /// before the agent's discovery and checks (docs/config.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkSettings>,
}

/// Versions of the config document this agent reads.
#[derive(
    Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default, schemars::JsonSchema,
)]
pub enum ApiVersion {
    #[default]
    #[serde(rename = "eks-nodeinit/v1")]
    V1,
}

/// `true`, for serde's `default = "yes"` on the sections whose switch is on by default.
fn yes() -> bool {
    true
}

/// A JSON object into a map, refusing a key given twice (serde's maps keep the last silently,
/// while a struct's duplicate field is an error: both are now errors).
fn unique_keys<'de, D, V>(d: D) -> Result<BTreeMap<String, V>, D::Error>
where
    D: serde::Deserializer<'de>,
    V: Deserialize<'de>,
{
    struct Unique<V>(std::marker::PhantomData<V>);
    impl<'de, V: Deserialize<'de>> serde::de::Visitor<'de> for Unique<V> {
        type Value = BTreeMap<String, V>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut m: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some(k) = m.next_key::<String>()? {
                if out.contains_key(&k) {
                    return Err(serde::de::Error::custom(format!(
                        "duplicate key `{}`; give each key once",
                        crate::base::text::printable(&k)
                    )));
                }
                let v = m.next_value()?;
                out.insert(k, v);
            }
            Ok(out)
        }
    }
    d.deserialize_map(Unique(std::marker::PhantomData))
}

/// The JSON Schema of the config document (docs/config.schema.json), for editors and CI.
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(Config);
    let mut s = serde_json::to_string_pretty(&schema).expect("a schema serialises");
    s.push('\n');
    s
}

/// Parse a config document. `path` is only used in messages.
pub fn parse(text: &str, path: &str) -> Result<Config, ConfigError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    let result: Result<Config, _> = serde_path_to_error::deserialize(&mut *de);
    // The document, then nothing but whitespace: trailing data is refused, not ignored.
    let result = result.map(|c| (c, de.end()));
    match result {
        Ok((c, Ok(()))) => Ok(c),
        Ok((_, Err(e))) => Err(ConfigError::Syntax {
            path: path.to_string(),
            line: e.line(),
            column: e.column(),
            message: "data after the end of the JSON document; a config is one JSON object".into(),
        }),
        Err(e) => {
            let field = escaped(&e.path().to_string());
            let inner = e.into_inner();
            if inner.is_syntax() || inner.is_eof() || field == "." {
                Err(ConfigError::Syntax {
                    path: path.to_string(),
                    line: inner.line(),
                    column: inner.column(),
                    message: serde_message(&inner),
                })
            } else {
                let mut message = serde_message(&inner);
                let mut field = field;
                if field.starts_with("proxy") {
                    // A proxy URL may hold credentials: serde quotes the value it refused, and
                    // a URL given as a key is in the path and the message.
                    message = crate::base::text::without_quoted(&message);
                    if field.contains('@') {
                        field = "proxy".into();
                    }
                }
                Err(ConfigError::Field {
                    path: path.to_string(),
                    field,
                    message: format!(
                        "{message} (line {}, column {})",
                        inner.line(),
                        inner.column()
                    ),
                })
            }
        }
    }
}

/// Load the config from a file, or from standard input when `path` is `-`.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let shown = printable(&path.display().to_string());
    let text = if path == Path::new("-") {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|cause| ConfigError::Read {
                path: "<stdin>".into(),
                cause,
            })?;
        s
    } else {
        let bytes = std::fs::read(path).map_err(|cause| ConfigError::Read {
            path: shown.clone(),
            cause,
        })?;
        String::from_utf8(bytes).map_err(|e| ConfigError::Encoding {
            path: shown.clone(),
            offset: e.utf8_error().valid_up_to(),
        })?
    };
    parse(
        &text,
        if path == Path::new("-") {
            "<stdin>"
        } else {
            &shown
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_field_names_its_path() {
        let err = parse(
            r#"{"cluster":{"name":"c"},"nodeGroup":{"role":"scaler"},"kubelet":{"imageGCHigh":80}}"#,
            "c.json",
        )
        .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("field `kubelet.imageGCHigh`"), "{msg}");
        assert!(msg.contains("unknown field `imageGCHigh`"), "{msg}");
    }

    #[test]
    fn syntax_error_has_line_and_column() {
        let err = parse("{\n  \"cluster\": {\"name\": \"c\",}\n}", "c.json").unwrap_err();
        match err {
            ConfigError::Syntax { line, column, .. } => {
                assert_eq!(line, 2);
                assert!(column > 10);
            }
            other => panic!("expected syntax error, got {other}"),
        }
    }

    #[test]
    fn trailing_data_and_duplicate_keys_are_refused() {
        let ok = r#"{"cluster":{"name":"c"},"nodeGroup":{}}"#;
        assert!(parse(&format!("{ok}\n\n"), "c.json").is_ok());
        let err = parse(&format!("{ok} {{\"labels\": garbage"), "c.json").unwrap_err();
        assert!(matches!(err, ConfigError::Syntax { line: 1, .. }), "{err}");
        assert!(err.to_string().contains("data after the end"), "{err}");
        for field in ["labels", "sysctls"] {
            let doc = format!(
                "{{\"cluster\":{{\"name\":\"c\"}},\"nodeGroup\":{{}},\n\"{field}\":{{\"a.b\":\"1\",\n\"a.b\":\"2\"}}}}"
            );
            let msg = parse(&doc, "c.json").unwrap_err().to_string();
            assert!(msg.contains(&format!("field `{field}`")), "{msg}");
            assert!(msg.contains("duplicate key `a.b`"), "{msg}");
            assert!(msg.contains("line 3"), "{msg}");
        }
    }

    #[test]
    fn not_utf8_names_the_byte_offset() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("c.json");
        std::fs::write(&p, b"{\"cluster\": {\"name\": \"c\xff\"}}").unwrap();
        let msg = load(&p).unwrap_err().to_string();
        assert!(msg.contains("not UTF-8 at byte offset 23"), "{msg}");
    }

    #[test]
    fn defaults_fill_in() {
        let c = parse(r#"{"cluster":{"name":"c"},"nodeGroup":{}}"#, "c.json").unwrap();
        assert_eq!(c.cluster.container_runtime, "containerd");
        assert_eq!(c.node_group.role, Role::None);
        assert!(c.tagging.enabled);
        assert!(!c.kubelet.overwrite);
        assert_eq!(c.handoff.mode, HandoffMode::Auto);
    }
}
