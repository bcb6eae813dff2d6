//! Facts: everything the plan knows about the world, read once before planning into one typed
//! value — the instance (IMDS or `--metadata`), its tags, the node family and why, the kubelet
//! config and its `protectKernelDefaults`, live sysctls, and the current content of every file
//! an aspect may touch. Planning never reads the disk or the network.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use crate::aspects::{kubelet_config, sysctls, Reads, REGISTRY};
use crate::config::HandoffMode;
use crate::discovery::{self, ClusterFact};
use crate::ec2::Ec2;
use crate::findings::Findings;
use crate::fsutil::{self, under};
use crate::imds;
use crate::marker::{self, HandoffState};
use crate::metadata::{self, Metadata};
use crate::retry::RetryPolicy;
use crate::spec::Spec;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    Al2,
    Al2023,
}

/// The node family and why it was chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FamilyFact {
    pub family: Family,
    pub reason: String,
}

/// One tag's state: not known (tags not readable), known absent, or this value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TagState {
    Unknown,
    Absent,
    Is(String),
}

impl serde::Serialize for TagState {
    /// As `current` (the value or null) and `currentKnown`, the plan's stable JSON form.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("TagState", 2)?;
        let current = match self {
            TagState::Is(v) => Some(v.as_str()),
            _ => None,
        };
        st.serialize_field("current", &current)?;
        st.serialize_field("currentKnown", &!matches!(self, TagState::Unknown))?;
        st.end()
    }
}

/// The instance's tags: unknown (IMDS tags off and DescribeTags not answered), or all of them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", tag = "state", content = "tags")]
pub enum InstanceTags {
    #[default]
    Unknown,
    Known(BTreeMap<String, String>),
}

impl InstanceTags {
    pub fn get(&self, key: &str) -> TagState {
        match self {
            InstanceTags::Unknown => TagState::Unknown,
            InstanceTags::Known(m) => m
                .get(key)
                .map_or(TagState::Absent, |v| TagState::Is(v.clone())),
        }
    }
}

/// A file as found: its content (`None`: absent; `Err`: could not be read), mode, and where
/// the path is a symbolic link, the link's target (the content is then the target's).
#[derive(Debug, Clone, PartialEq)]
pub struct FileFact {
    pub content: Result<Option<String>, String>,
    pub mode: Option<u32>,
    pub link: Option<PathBuf>,
}

/// What `execve` accepts on this machine, for checking the hand-off's argv before any change.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecLimits {
    /// `sysconf(_SC_ARG_MAX)`: the argv and the environment, strings and pointers, in bytes.
    pub arg_max: Option<usize>,
    /// The longest single argv or environment string, its NUL included (Linux's
    /// MAX_ARG_STRLEN: 32 pages).
    pub max_arg_strlen: Option<usize>,
    /// What this process's environment (inherited by bootstrap.sh) takes of `arg_max`.
    pub env_bytes: usize,
}

impl ExecLimits {
    pub fn read() -> ExecLimits {
        use nix::unistd::{sysconf, SysconfVar};
        let var = |v| {
            sysconf(v)
                .ok()
                .flatten()
                .and_then(|n| usize::try_from(n).ok())
        };
        let ptr = std::mem::size_of::<usize>();
        let env_bytes = std::env::vars_os().fold(0usize, |n, (k, v)| {
            // `KEY=VALUE`, its NUL and its pointer.
            n.saturating_add(k.len() + v.len() + 2 + ptr)
        });
        ExecLimits {
            arg_max: var(SysconfVar::ARG_MAX),
            max_arg_strlen: var(SysconfVar::PAGE_SIZE).and_then(|p| p.checked_mul(32)),
            env_bytes,
        }
    }
}

/// The file a plan compares against, once known to be readable.
#[derive(Debug, Clone, PartialEq)]
pub struct Current {
    pub content: Option<String>,
    pub mode: Option<u32>,
}

/// The AL2 kubelet config file.
#[derive(Debug, Clone)]
pub struct KubeletFact {
    /// Its path under the root, as messages show it.
    pub shown: String,
    pub text: Result<Option<String>, String>,
    /// The parsed document when the file was read.
    pub doc: Option<Result<Map<String, Value>, kubelet_config::KubeletError>>,
    pub mode: Option<u32>,
}

#[derive(Debug, Clone)]
pub struct Facts {
    pub root: PathBuf,
    /// `None` when only checking a config (no instance to tag).
    pub instance: Option<Metadata>,
    pub tags: InstanceTags,
    pub family: Result<FamilyFact, String>,
    /// AL2 only.
    pub kubelet: Option<KubeletFact>,
    pub sysctls: BTreeMap<String, Result<String, String>>,
    pub files: BTreeMap<PathBuf, FileFact>,
    /// `*.conf` names in each directory asked for.
    pub dirs: BTreeMap<PathBuf, Vec<String>>,
    pub exists: BTreeMap<PathBuf, bool>,
    /// Whether this process may execute each path asked for (`access(X_OK)` on a regular file).
    pub executable: BTreeMap<PathBuf, bool>,
    pub exec_limits: ExecLimits,
    /// The cluster's values as discovery left them (`None`: not run; the config's values alone).
    pub cluster: Option<ClusterFact>,
    /// Whether bootstrap.sh was handed the node in this boot (AL2; `None` elsewhere).
    pub handoff: HandoffState,
}

impl Facts {
    /// Read what every aspect asks for from the node under `root`.
    pub fn read_node(
        root: &Path,
        spec: &Spec,
        instance: Option<Metadata>,
        tags: InstanceTags,
    ) -> Facts {
        let family = detect_family(root, spec);
        let fam = family.as_ref().ok().map(|f| f.family);
        let mut reads = Reads::default();
        for a in REGISTRY {
            (a.reads)(spec, fam, &mut reads);
        }
        let mut files = BTreeMap::new();
        let mut dirs = BTreeMap::new();
        for d in &reads.conf_dirs {
            let names = conf_names(&under(root, d));
            reads.files.extend(names.iter().map(|n| d.join(n)));
            dirs.insert(d.clone(), names);
        }
        for p in reads.files {
            files
                .entry(p.clone())
                .or_insert_with(|| read_file(root, &p));
        }
        Facts {
            root: root.to_path_buf(),
            kubelet: (fam == Some(Family::Al2))
                .then(|| read_kubelet(root, &spec.kubelet.config_path)),
            sysctls: reads
                .sysctls
                .iter()
                .map(|k| {
                    (
                        k.clone(),
                        sysctls::read_live(root, k).map_err(|e| e.to_string()),
                    )
                })
                .collect(),
            exists: reads
                .exists
                .iter()
                .map(|p| (p.clone(), under(root, p).exists()))
                .collect(),
            executable: reads
                .executables
                .iter()
                .map(|p| (p.clone(), is_executable(&under(root, p))))
                .collect(),
            exec_limits: ExecLimits::read(),
            cluster: None,
            handoff: if reads.handoff_marker {
                marker::read_state(root)
            } else {
                HandoffState::None
            },
            files,
            dirs,
            family,
            instance,
            tags,
        }
    }

    pub fn family(&self) -> Option<Family> {
        self.family.as_ref().ok().map(|f| f.family)
    }

    /// Where kubelet's `protectKernelDefaults` is on, if it is: the AL2 kubelet config when it
    /// says so; on AL2023, nodeadm's generated config (its default).
    pub fn protect_kernel_defaults(&self) -> Option<String> {
        match self.family() {
            Some(Family::Al2023) => Some("nodeadm's generated kubelet config".into()),
            Some(Family::Al2) => {
                let k = self.kubelet.as_ref()?;
                let on =
                    matches!(&k.doc, Some(Ok(m)) if kubelet_config::protects_kernel_defaults(m));
                on.then(|| k.shown.clone())
            }
            None => None,
        }
    }

    /// A file the plan may replace. An unreadable file is a finding under `field` (the agent
    /// never overwrites what it cannot read), never "absent".
    pub fn current_file(&self, path: &str, field: &str, f: &mut Findings) -> Option<Current> {
        current_of(self.files.get(Path::new(path)), path, field, f)
    }

    /// These facts with the cluster as discovery found it.
    pub fn with_cluster(mut self, cluster: ClusterFact) -> Facts {
        self.cluster = Some(cluster);
        self
    }

    /// The cluster's values the hand-offs carry: the config's, with what discovery found.
    pub fn cluster(&self, spec: &Spec) -> std::borrow::Cow<'_, ClusterFact> {
        match &self.cluster {
            Some(c) => std::borrow::Cow::Borrowed(c),
            None => std::borrow::Cow::Owned(ClusterFact::from_spec(&spec.cluster)),
        }
    }

    pub fn exists(&self, p: &Path) -> bool {
        self.exists.get(p).copied().unwrap_or(false)
    }

    pub fn executable(&self, p: &Path) -> bool {
        self.executable.get(p).copied().unwrap_or(false)
    }
}

/// A file the plan may replace, as read (`None`: never read). An unreadable file or a link is
/// a finding under `field` (the agent never overwrites what it cannot read), never "absent".
pub fn current_of(
    file: Option<&FileFact>,
    path: &str,
    field: &str,
    f: &mut Findings,
) -> Option<Current> {
    match file {
        Some(FileFact {
            link: Some(target), ..
        }) => {
            f.push(
                field,
                format!(
                    "{path} is a symbolic link to {}: the agent replaces files atomically and will neither replace the link with a file nor write through it; make {path} a regular file",
                    crate::text::printable(&target.display().to_string())
                ),
            );
            None
        }
        Some(FileFact {
            content: Ok(c),
            mode,
            ..
        }) => Some(Current {
            content: c.clone(),
            mode: *mode,
        }),
        Some(FileFact {
            content: Err(e), ..
        }) => {
            f.push(
                field,
                format!("{e}; the agent will not overwrite a file it cannot read"),
            );
            None
        }
        None => {
            f.push(field, format!("{path} was not read from the node"));
            None
        }
    }
}

fn is_executable(p: &Path) -> bool {
    p.is_file() && nix::unistd::access(p, nix::unistd::AccessFlags::X_OK).is_ok()
}

/// One file as found under `root`.
pub fn read_file(root: &Path, p: &Path) -> FileFact {
    let full = under(root, p);
    FileFact {
        content: fsutil::read_optional(&full).map_err(|e| e.to_string()),
        mode: fsutil::mode_of(&full),
        link: fsutil::link_target(&full),
    }
}

fn conf_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".conf"))
        .collect();
    names.sort();
    names
}

fn read_kubelet(root: &Path, path: &Path) -> KubeletFact {
    let full = under(root, path);
    let text = match fsutil::link_target(&full) {
        Some(target) => Err(format!(
            "{} is a symbolic link to {}: the agent replaces files atomically and will neither replace the link with a file nor write through it; point kubelet.configPath at the file itself",
            full.display(),
            crate::text::printable(&target.display().to_string())
        )),
        None => fsutil::read_optional(&full).map_err(|e| e.to_string()),
    };
    let doc = match &text {
        Ok(Some(t)) => Some(kubelet_config::parse(t, &full)),
        _ => None,
    };
    KubeletFact {
        shown: full.display().to_string(),
        text,
        doc,
        mode: fsutil::mode_of(&full),
    }
}

/// The AL2023 bootstrap.sh is a stub that points at nodeadm.
fn is_al2023_stub(text: &str) -> bool {
    text.contains("nodeadm")
}

/// Pick the family, saying why; a failure says what to set.
fn detect_family(root: &Path, spec: &Spec) -> Result<FamilyFact, String> {
    let nodeadm_path = &spec.nodeconfig.nodeadm_path;
    let bootstrap_path = &spec.bootstrap.path;
    let (nodeadm, bootstrap) = (under(root, nodeadm_path), under(root, bootstrap_path));
    let fact = |family, reason: String| Ok(FamilyFact { family, reason });
    match spec.mode {
        HandoffMode::Al2 if !bootstrap.is_file() => Err(format!(
            "handoff.mode is \"al2\" but {} does not exist; check handoff.bootstrapPath or use \"al2023\"",
            bootstrap.display()
        )),
        HandoffMode::Al2 => fact(Family::Al2, "handoff.mode is \"al2\"".into()),
        HandoffMode::Al2023 => fact(Family::Al2023, "handoff.mode is \"al2023\"".into()),
        HandoffMode::Auto if nodeadm.is_file() => fact(
            Family::Al2023,
            format!("auto: found nodeadm at {}", nodeadm_path.display()),
        ),
        HandoffMode::Auto => match std::fs::read_to_string(&bootstrap) {
            Ok(t) if is_al2023_stub(&t) => Err(format!(
                "{} is the Amazon Linux 2023 stub (it exits 1) and {} is missing; this image cannot join a cluster: install nodeadm or use an EKS AL2023 AMI",
                bootstrap.display(),
                nodeadm.display()
            )),
            Ok(_) => fact(
                Family::Al2,
                format!("auto: no nodeadm; found bootstrap.sh at {}", bootstrap_path.display()),
            ),
            Err(e) => Err(format!(
                "cannot tell Amazon Linux 2 from 2023 under {}: no {} and {} cannot be read ({e}); set handoff.mode to \"al2\" or \"al2023\"",
                root.display(),
                nodeadm.display(),
                bootstrap.display()
            )),
        },
    }
}

/// What was read of the instance before the config existed (the config was in the user data):
/// read again by no one.
#[derive(Default)]
pub struct Prefetched {
    /// The `--metadata` file.
    pub metadata: Option<Metadata>,
    /// The IMDS client and the user data it read (`None`: the instance has none).
    pub imds: Option<(imds::ImdsClient, Option<Vec<u8>>)>,
}

/// The instance: from `--metadata` or IMDS, and beside it the cluster's values (discovery
/// waits only for the region, and makes no call on a cache hit). With IMDS tags off and tagging
/// on, the tags (and with them the ASG name and the current Name) come from one DescribeTags
/// under the tagging budget; when that fails they stay unknown and tagging reads them again
/// later.
pub async fn read_instance(
    metadata_file: Option<&Path>,
    spec: &Spec,
    root: &Path,
    read: Prefetched,
) -> anyhow::Result<(Metadata, InstanceTags, ClusterFact)> {
    let (mut md, cluster) = match metadata_file {
        Some(f) => {
            let md = match read.metadata {
                Some(md) => md,
                None => metadata::load_file(f)?,
            };
            let region = md.region.clone();
            let cluster = discovery::gather(spec, root, async { Ok(region) }).await;
            (md, cluster)
        }
        None => {
            let endpoint = imds::resolve_endpoint(spec.imds.endpoint.as_deref());
            // The client that read the user data (with the config in it) goes on, token and all,
            // when the config names no other endpoint.
            let (client, user_data) = match read.imds {
                Some((client, user_data)) if client.endpoint() == endpoint => {
                    (client, Some(user_data))
                }
                other => (
                    imds::ImdsClient::new(&endpoint, spec.imds.allow_v1_fallback)?,
                    other.map(|(_, user_data)| user_data),
                ),
            };
            let (md, cluster) = tokio::join!(
                imds::fetch(
                    &client,
                    spec.imds.deadline,
                    user_data.as_ref().map(Option::as_deref)
                ),
                discovery::gather(spec, root, imds::region(&client, spec.imds.deadline)),
            );
            (md?, cluster)
        }
    };
    tracing::debug!(instance_id = %md.instance_id, region = %md.region, "instance metadata read");
    let tags = match md.tags.clone() {
        Some(t) => InstanceTags::Known(t),
        None if metadata_file.is_none() && spec.tagging.enabled => {
            describe_tags(
                &md,
                spec.tagging.ec2_endpoint.as_deref(),
                spec.tagging.sync_budget,
            )
            .await
        }
        None => InstanceTags::Unknown,
    };
    if let InstanceTags::Known(t) = &tags {
        md.autoscaling_group_name = md
            .autoscaling_group_name
            .clone()
            .or_else(|| t.get("aws:autoscaling:groupName").cloned());
    }
    Ok((md, tags, cluster))
}

async fn describe_tags(md: &Metadata, endpoint: Option<&str>, budget: Duration) -> InstanceTags {
    let deadline = tokio::time::Instant::now() + budget;
    let mut ec2 = Ec2::new(&md.region, endpoint).await;
    match ec2
        .describe_tags(&md.instance_id, RetryPolicy::default(), deadline)
        .await
    {
        Ok(t) => InstanceTags::Known(t),
        Err(e) => {
            tracing::warn!("cannot read the instance's tags: {e}");
            InstanceTags::Unknown
        }
    }
}
