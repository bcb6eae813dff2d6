//! Facts: everything the plan knows about the world, as one typed value — the instance (IMDS or
//! `--metadata`), its tags, the node family and why, live sysctls, the current content of every
//! file an aspect may touch, the cluster's values, the hand-off marker. [`crate::gather`] reads
//! them once, before planning; planning never reads the disk or the network.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::base::findings::Findings;
use crate::base::podcap::TypeFact;
use crate::discovery::ClusterFact;
use crate::instance::metadata::Metadata;
use crate::instance::userdata::{DropIn, NodeConfigs, UserDataFact};
pub(crate) use crate::os::fsutil::read_file;
pub use crate::os::fsutil::FileFact;
use crate::os::marker::HandoffState;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    Al2,
    Al2023,
}

/// Why the node family could not be told; each says what to set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FamilyError {
    #[error("handoff.mode is \"al2\" but {} does not exist; check handoff.bootstrapPath or use \"al2023\"", .bootstrap.display())]
    NoBootstrap { bootstrap: PathBuf },
    #[error("{} is the Amazon Linux 2023 stub (it exits 1) and {} is missing; this image cannot join a cluster: install nodeadm or use an EKS AL2023 AMI", .bootstrap.display(), .nodeadm.display())]
    Al2023Stub {
        bootstrap: PathBuf,
        nodeadm: PathBuf,
    },
    #[error("cannot tell Amazon Linux 2 from 2023 under {}: no {} and {} cannot be read ({cause}); set handoff.mode to \"al2\" or \"al2023\"", .root.display(), .nodeadm.display(), .bootstrap.display())]
    Unknown {
        root: PathBuf,
        nodeadm: PathBuf,
        bootstrap: PathBuf,
        cause: String,
    },
}

/// The node family and why it was chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FamilyFact {
    pub family: Family,
    pub reason: String,
}

/// The tag Auto Scaling puts on its instances: the group's name.
pub const ASG_TAG: &str = "aws:autoscaling:groupName";

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
    /// The tag's value, when the tags are known and it is set.
    pub fn value(&self, key: &str) -> Option<&str> {
        match self {
            InstanceTags::Unknown => None,
            InstanceTags::Known(m) => m.get(key).map(String::as_str),
        }
    }

    pub fn get(&self, key: &str) -> TagState {
        match self {
            InstanceTags::Unknown => TagState::Unknown,
            InstanceTags::Known(m) => m
                .get(key)
                .map_or(TagState::Absent, |v| TagState::Is(v.clone())),
        }
    }
}

/// One fact asked of the node, by value (node paths and program paths without the root: each is
/// read under `--root`). Gathering answers each distinct read once, by one `match`
/// ([`crate::gather`]), into [`Facts`]' one map of answers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Read {
    /// A file's content (or absence) and mode, which the plan compares against.
    File(PathBuf),
    /// The names in a directory ending in `suffix`, sorted; each named file is read too.
    Dir { path: PathBuf, suffix: String },
    /// The names in a directory, sorted, none of them read (a store of many files, such as
    /// containerd's content blobs).
    Names(PathBuf),
    /// A text file inside a tar archive on the node (an image archive's `index.json`): its
    /// content, or absence when the archive or the member is missing.
    TarMember { path: PathBuf, member: String },
    /// A live kernel value (a key the spec checked), under `<root>/proc/sys`.
    Sysctl(String),
    /// Does the path exist?
    Exists(PathBuf),
    /// May this process execute it (a regular file and `access(X_OK)`)?
    Executable(PathBuf),
    /// A file's size and the room on its filesystem ([`Space`]).
    Space(PathBuf),
    /// A program's standard output: `argv[0]` a node path, run with `argv` (no shell) under a
    /// short timeout; a failure to start, a timeout or a failed exit is the answer, never a panic.
    Output { argv: Vec<String> },
    /// The AL2 hand-off's per-boot marker and what it proves ([`crate::os::marker`]).
    HandoffMarker,
}

impl Read {
    /// A directory's `*.conf` files (a systemd drop-in directory).
    pub fn conf_dir(path: impl Into<PathBuf>) -> Read {
        Read::Dir {
            path: path.into(),
            suffix: ".conf".into(),
        }
    }
}

/// What a [`Read`] found: one arm per kind of read.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    File(FileFact),
    Dir(Vec<String>),
    Sysctl(Result<String, String>),
    Exists(bool),
    Executable(bool),
    Space(Space),
    /// The program's standard output when it exited 0; else why not.
    Output(Result<String, String>),
    HandoffMarker(HandoffState),
}

/// What the aspects and kubelet contributors ask to be read from the node, in the order asked
/// (a read asked twice is still read once).
#[derive(Debug, Default)]
pub(crate) struct Reads(Vec<Read>);

impl Extend<Read> for Reads {
    fn extend<I: IntoIterator<Item = Read>>(&mut self, reads: I) {
        self.0.extend(reads);
    }
}

impl Reads {
    pub fn ask(&mut self, read: Read) {
        self.0.push(read);
    }

    /// A file's content, the read asked most.
    pub fn file(&mut self, p: impl Into<PathBuf>) {
        self.ask(Read::File(p.into()));
    }

    pub fn into_vec(self) -> Vec<Read> {
        self.0
    }
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

/// A file asked about for its size and the room its filesystem has: its size in bytes (`None`:
/// absent) and the bytes free to unprivileged users (`f_bavail`) on the filesystem of its
/// nearest existing directory.
#[derive(Debug, Clone, PartialEq)]
pub struct Space {
    pub size: Option<u64>,
    pub free: Result<u64, String>,
}

/// The file a plan compares against, once known to be readable.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Current {
    pub content: Option<String>,
    pub mode: Option<u32>,
}

#[derive(Debug, Clone)]
pub struct Facts {
    pub root: PathBuf,
    /// `None` when only checking a config (no instance to tag).
    pub instance: Option<Metadata>,
    pub tags: InstanceTags,
    pub family: Result<FamilyFact, FamilyError>,
    /// What the node answered to every [`Read`] asked; read them through the accessors
    /// ([`Facts::file`], [`Facts::sysctl`], …), set them in tests through the setters.
    pub answers: BTreeMap<Read, Answer>,
    pub exec_limits: ExecLimits,
    /// The cluster's values: the config's, with what discovery found (its outcome `NotAsked`
    /// when it was not configured or not run).
    pub cluster: ClusterFact,
    /// The instance's user data as nodeadm reads it (`Unknown` without an instance).
    pub user_data: UserDataFact,
    /// The files of nodeadm's drop-in directory it reads (when the plan asked for the directory),
    /// the agent's own left out, by name, each as nodeadm reads it.
    pub dropins: Vec<DropIn>,
    /// What nodeadm merges: the user data's NodeConfigs, then the drop-ins', the agent's place
    /// among them kept ([`NodeConfigs::merged`]); `None` when there is none.
    pub node_configs: Option<NodeConfigs>,
    /// The instance type's ENIs and IPv4 addresses per ENI, when pod capacity needs them.
    pub type_info: Option<TypeFact>,
    /// What the join checks reach and how (`None` without an instance).
    pub reach: Option<Reach>,
}

/// Where the join checks go: IMDS, the AWS endpoints (the SDK's `AWS_ENDPOINT_URL_*` when set,
/// read once here), and whether the instance is really one (`--metadata` names a file).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Reach {
    pub imds_endpoint: String,
    /// The metadata file, when the instance's metadata came from one.
    pub metadata_file: Option<PathBuf>,
    /// Endpoint overrides by service (`STS`, `EC2`, `ECR`).
    pub overrides: BTreeMap<String, String>,
    /// Whether the AWS calls take the services' dual-stack names (`None`: the SDK's choice).
    pub dual_stack: Option<bool>,
}

impl Reach {
    /// The STS endpoint a token is presigned for in `region` (never the override: see
    /// [`crate::verify::token::sts_url`]).
    pub fn sts_url(&self, region: &str) -> String {
        crate::verify::token::sts_url(region)
    }

    /// Where the boot's AWS calls went, for the units that call AWS after the run.
    pub fn endpoints(&self) -> crate::aws::Endpoints {
        crate::aws::Endpoints {
            imds: Some(self.imds_endpoint.clone()),
            dual_stack: self.dual_stack,
        }
    }

    /// The endpoints the services the checks reach are given, as the agent's clients take them
    /// ([`crate::aws::custom_endpoint`]): EC2's `ec2` (`tagging.ec2Endpoint`), else the
    /// environment's.
    pub fn from_env(
        imds_endpoint: String,
        metadata_file: Option<PathBuf>,
        ec2: Option<&str>,
    ) -> Reach {
        let overrides = [("STS", None), ("EC2", ec2), ("ECR", None)]
            .into_iter()
            .filter_map(|(s, given)| Some((s.to_string(), crate::aws::custom_endpoint(s, given)?)))
            .collect();
        Reach {
            imds_endpoint,
            metadata_file,
            overrides,
            dual_stack: None,
        }
    }
}

impl Facts {
    pub fn family(&self) -> Option<Family> {
        self.family.as_ref().ok().map(|f| f.family)
    }

    /// The text of a file read from the node: `None` when absent, an error (saying which)
    /// when unreadable or not read.
    pub fn file_text(&self, path: &str) -> Result<Option<String>, String> {
        match self.file(path) {
            Some(ff) => ff
                .content
                .clone()
                .map_err(|e| format!("cannot read {path}: {e}")),
            None => Err(format!("{path} was not read")),
        }
    }

    /// The text of a file read from the node; None when absent, unreadable or not read.
    pub fn text(&self, path: &str) -> Option<String> {
        self.file_text(path).ok()?
    }

    /// A file the plan may replace. An unreadable file is a finding under `field` (the agent
    /// never overwrites what it cannot read), never "absent".
    pub(crate) fn current_file(
        &self,
        path: &str,
        field: &str,
        f: &mut Findings,
    ) -> Option<Current> {
        current_of(self.file(path), path, field, f)
    }

    /// The instance's Auto Scaling group: as the metadata file names it, else its
    /// `aws:autoscaling:groupName` tag (from IMDS, the metadata file or DescribeTags).
    pub fn autoscaling_group(&self) -> Option<&str> {
        let md = self.instance.as_ref()?;
        md.autoscaling_group_name
            .as_deref()
            .or_else(|| self.tags.value(ASG_TAG))
    }
}

impl Facts {
    /// The user data as read, and what nodeadm merges with it.
    pub fn set_user_data(&mut self, u: UserDataFact) {
        self.user_data = u;
        self.merge_node_configs();
    }

    /// The drop-ins of nodeadm's directory read from the answers, and what nodeadm merges.
    pub fn merge_node_configs(&mut self) {
        let text = |p: &str| match &self.file(p)?.content {
            Ok(t) => t.clone().map(Ok),
            Err(e) => Some(Err(e.clone())),
        };
        let names = self.dir(crate::instance::userdata::NODEADM_DIR, "");
        let (dropins, merged) = self.user_data.with_dropins(names, text);
        (self.dropins, self.node_configs) = (dropins, merged);
    }

    // The answers by kind: `None` (or `false`, or nothing) for what was not asked.
    /// A file as read.
    pub fn file(&self, p: impl AsRef<Path>) -> Option<&FileFact> {
        match self.answers.get(&Read::File(p.as_ref().into())) {
            Some(Answer::File(f)) => Some(f),
            _ => None,
        }
    }

    /// The names ending in `suffix` in the directory at `p`, sorted.
    pub fn dir(&self, p: impl AsRef<Path>, suffix: &str) -> &[String] {
        let read = Read::Dir {
            path: p.as_ref().into(),
            suffix: suffix.into(),
        };
        match self.answers.get(&read) {
            Some(Answer::Dir(names)) => names,
            _ => &[],
        }
    }

    /// The names in the directory at `p`, sorted ([`Read::Names`]); none when it is missing.
    pub fn names(&self, p: impl AsRef<Path>) -> &[String] {
        match self.answers.get(&Read::Names(p.as_ref().into())) {
            Some(Answer::Dir(names)) => names,
            _ => &[],
        }
    }

    /// The text of `member` in the tar archive at `p` ([`Read::TarMember`]).
    pub fn tar_member(&self, p: impl AsRef<Path>, member: &str) -> Option<&FileFact> {
        let read = Read::TarMember {
            path: p.as_ref().into(),
            member: member.into(),
        };
        match self.answers.get(&read) {
            Some(Answer::File(f)) => Some(f),
            _ => None,
        }
    }

    /// Where the boot's AWS calls went (IMDS, the dual-stack choice), for the units that call
    /// AWS after the run; the SDK's defaults when the instance was not read.
    pub fn endpoints(&self) -> crate::aws::Endpoints {
        self.reach
            .as_ref()
            .map(Reach::endpoints)
            .unwrap_or_default()
    }

    /// A live kernel value, or why it could not be read.
    pub fn sysctl(&self, key: &str) -> Option<&Result<String, String>> {
        match self.answers.get(&Read::Sysctl(key.into())) {
            Some(Answer::Sysctl(v)) => Some(v),
            _ => None,
        }
    }

    pub fn exists(&self, p: &Path) -> bool {
        matches!(
            self.answers.get(&Read::Exists(p.into())),
            Some(Answer::Exists(true))
        )
    }

    pub fn executable(&self, p: &Path) -> bool {
        let read = Read::Executable(p.into());
        matches!(self.answers.get(&read), Some(Answer::Executable(true)))
    }

    pub fn space(&self, p: &Path) -> Option<&Space> {
        match self.answers.get(&Read::Space(p.into())) {
            Some(Answer::Space(s)) => Some(s),
            _ => None,
        }
    }

    /// A program's standard output (it exited 0), or why there is none.
    pub fn output<S: AsRef<str>>(&self, argv: &[S]) -> Option<&Result<String, String>> {
        let argv = argv.iter().map(|a| a.as_ref().to_string()).collect();
        match self.answers.get(&Read::Output { argv }) {
            Some(Answer::Output(o)) => Some(o),
            _ => None,
        }
    }

    /// Whether bootstrap.sh was handed the node in this boot (AL2; `None` when not asked).
    pub fn handoff(&self) -> &HandoffState {
        static NOT_ASKED: HandoffState = HandoffState::None;
        match self.answers.get(&Read::HandoffMarker) {
            Some(Answer::HandoffMarker(h)) => h,
            _ => &NOT_ASKED,
        }
    }
}

/// The answers set by hand, for tests: each replaces what was there.
impl Facts {
    pub fn set_file(&mut self, p: impl Into<PathBuf>, f: FileFact) {
        self.answers.insert(Read::File(p.into()), Answer::File(f));
    }
    pub fn set_dir(&mut self, p: impl Into<PathBuf>, suffix: &str, names: Vec<String>) {
        let (path, suffix) = (p.into(), suffix.into());
        let read = Read::Dir { path, suffix };
        self.answers.insert(read, Answer::Dir(names));
    }
    pub fn set_tar_member(&mut self, p: impl Into<PathBuf>, member: &str, f: FileFact) {
        let read = Read::TarMember {
            path: p.into(),
            member: member.into(),
        };
        self.answers.insert(read, Answer::File(f));
    }
    pub fn set_names(&mut self, p: impl Into<PathBuf>, names: Vec<String>) {
        self.answers
            .insert(Read::Names(p.into()), Answer::Dir(names));
    }
    pub fn set_sysctl(&mut self, key: &str, live: Result<String, String>) {
        self.answers
            .insert(Read::Sysctl(key.into()), Answer::Sysctl(live));
    }
    pub fn set_exists(&mut self, p: impl Into<PathBuf>, exists: bool) {
        self.answers
            .insert(Read::Exists(p.into()), Answer::Exists(exists));
    }
    pub fn set_executable(&mut self, p: impl Into<PathBuf>, executable: bool) {
        let answer = Answer::Executable(executable);
        self.answers.insert(Read::Executable(p.into()), answer);
    }
    pub fn set_space(&mut self, p: impl Into<PathBuf>, space: Space) {
        self.answers
            .insert(Read::Space(p.into()), Answer::Space(space));
    }
    pub fn set_output(&mut self, argv: &[&str], out: Result<String, String>) {
        let argv = argv.iter().map(|a| a.to_string()).collect();
        self.answers
            .insert(Read::Output { argv }, Answer::Output(out));
    }
    pub fn set_handoff(&mut self, state: HandoffState) {
        let answer = Answer::HandoffMarker(state);
        self.answers.insert(Read::HandoffMarker, answer);
    }
}

/// A file the plan may replace, as read (`None`: never read). An unreadable file or a link is
/// a finding under `field` (the agent never overwrites what it cannot read), never "absent".
pub(crate) fn current_of(
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
                    crate::base::text::printable(&target.display().to_string())
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

/// Facts made by hand, for planning tests: a node of one family with nothing read unless said
/// (every file unknown, no sysctl, tags unknown, no instance), `execve` limits as on a typical
/// Linux machine. A new fact gets a default here, so no test breaks when one is added.
#[derive(Debug, Clone)]
pub struct FactsBuilder(Facts);

impl Facts {
    pub fn builder(family: Family) -> FactsBuilder {
        FactsBuilder(Facts {
            root: PathBuf::from("/"),
            instance: None,
            tags: InstanceTags::Unknown,
            family: Ok(FamilyFact {
                family,
                reason: "given".into(),
            }),
            answers: BTreeMap::new(),
            exec_limits: ExecLimits {
                arg_max: Some(2_097_152),
                max_arg_strlen: Some(131_072),
                env_bytes: 0,
            },
            // No cluster values: a test that plans with the config's gives them
            // (`.cluster(ClusterFact::from_spec(&spec.cluster))`).
            cluster: ClusterFact {
                name: String::new(),
                api_server_endpoint: None,
                certificate_authority: None,
                cidr: None,
                outcome: crate::discovery::Outcome::NotAsked,
                cache_file: None,
            },
            user_data: UserDataFact::Unknown,
            dropins: Vec::new(),
            node_configs: None,
            type_info: None,
            reach: None,
        })
    }
}

impl FactsBuilder {
    pub fn instance(mut self, md: Metadata) -> Self {
        self.0.instance = Some(md);
        self
    }
    pub fn tags<'a>(mut self, tags: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let known = tags
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()));
        self.0.tags = InstanceTags::Known(known.collect());
        self
    }
    /// The file at `path` holds `text` (mode 0644).
    pub fn file(self, path: impl Into<PathBuf>, text: &str) -> Self {
        self.file_fact(
            path,
            FileFact {
                content: Ok(Some(text.into())),
                mode: Some(0o644),
                link: None,
            },
        )
    }
    /// There is no file at each of `paths`.
    pub fn absent<P: Into<PathBuf>>(mut self, paths: impl IntoIterator<Item = P>) -> Self {
        for p in paths {
            self = self.file_fact(
                p,
                FileFact {
                    content: Ok(None),
                    mode: None,
                    link: None,
                },
            );
        }
        self
    }
    pub(crate) fn file_fact(mut self, path: impl Into<PathBuf>, f: FileFact) -> Self {
        self.0.set_file(path, f);
        self
    }
    pub fn sysctl(mut self, key: &str, live: Result<&str, &str>) -> Self {
        let v = live.map(String::from).map_err(String::from);
        self.0.set_sysctl(key, v);
        self
    }
    pub fn exists(mut self, path: impl Into<PathBuf>, exists: bool) -> Self {
        self.0.set_exists(path, exists);
        self
    }
    pub fn executable(mut self, path: impl Into<PathBuf>, executable: bool) -> Self {
        self.0.set_executable(path, executable);
        self
    }
    pub fn user_data(mut self, u: UserDataFact) -> Self {
        self.0.user_data = u;
        self
    }
    pub fn type_info(mut self, t: TypeFact) -> Self {
        self.0.type_info = Some(t);
        self
    }
    pub fn cluster(mut self, c: ClusterFact) -> Self {
        self.0.cluster = c;
        self
    }
    pub fn handoff(mut self, state: HandoffState) -> Self {
        self.0.set_handoff(state);
        self
    }
    pub fn build(self) -> Facts {
        let mut facts = self.0;
        facts.merge_node_configs();
        facts
    }
    /// A drop-in of nodeadm's directory named `name` holding `text`, listed in it.
    pub fn dropin(mut self, name: &str, text: &str) -> Self {
        let dir = Path::new(crate::instance::userdata::NODEADM_DIR);
        let mut names = [self.0.dir(dir, ""), &[name.to_string()]].concat();
        names.sort();
        self.0.set_dir(dir, "", names);
        self.file(dir.join(name), text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_asg_name_comes_from_the_metadata_file_else_the_tags() {
        let tags = [(ASG_TAG, "asg-t")];
        let mut md = Metadata::default();
        let with = |md: &Metadata| Facts::builder(Family::Al2).instance(md.clone());
        let facts = with(&md).tags(tags).build();
        assert_eq!(facts.autoscaling_group(), Some("asg-t"));
        assert_eq!(with(&md).build().autoscaling_group(), None, "tags unknown");
        md.autoscaling_group_name = Some("asg-file".into());
        let facts = with(&md).tags(tags).build();
        assert_eq!(facts.autoscaling_group(), Some("asg-file"));
        let no_instance = Facts::builder(Family::Al2).tags(tags).build();
        assert_eq!(no_instance.autoscaling_group(), None);
    }

    #[test]
    fn sts_is_the_partitions_own_name_whatever_the_sdk_override() {
        // The authenticator refuses any other host: an `AWS_ENDPOINT_URL_STS` the agent's
        // environment names (a VPC endpoint's own name, a test's) stays out of the token.
        let reach = Reach {
            overrides: [("STS".to_string(), "http://127.0.0.1:5000".to_string())].into(),
            ..Default::default()
        };
        assert_eq!(
            reach.sts_url("eu-west-1"),
            "https://sts.eu-west-1.amazonaws.com"
        );
    }
}
