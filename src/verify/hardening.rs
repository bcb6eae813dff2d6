//! The hardened-AMI checks (docs/hardening.md): what a CIS- or STIG-hardened custom AMI changes
//! that stops the kubelet, containerd or nodeadm, read live on the node before the hand-off,
//! each failure with its fix. The kernel settings the kubelet's `protectKernelDefaults`
//! demands; `noexec` mounts under the directories the kubelet, containerd and the CNI execute
//! from, and the hand-off's programs not executable; SELinux enforcing without the container
//! policy; FIPS mode while the agent's own AWS calls would not use FIPS endpoints. Each reads
//! only under the root, and every probe here can also run after the hand-off.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::check::{load_as, Env, Outcome, Probe, Stop};
use super::Cause;
use crate::base::text::printable;
use crate::os::fsutil::under;

pub use crate::base::k8s::KUBELET_KERNEL_DEFAULTS as KERNEL_DEFAULTS;

/// The loaders of this module's probes, for a job after the hand-off.
pub const LOADERS: [(&str, super::check::Loader); 4] = [
    (KernelDefaults::KIND, load_as::<KernelDefaults>),
    (Exec::KIND, load_as::<Exec>),
    (Selinux::KIND, load_as::<Selinux>),
    (Fips::KIND, load_as::<Fips>),
];

fn fields(v: &impl Serialize) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or_default()
}

/// A file under the root, trimmed: `None` when it is absent or unreadable.
fn read(root: &Path, node_path: &str) -> Option<String> {
    std::fs::read_to_string(under(root, node_path))
        .ok()
        .map(|s| s.trim().to_string())
}

/// Whether the root has a live kernel (`/proc/sys`): a node, or a test root standing for one;
/// without, a node image, judged by what its next boot sets.
fn live(root: &Path) -> bool {
    root == Path::new("/") || under(root, "/proc/sys").is_dir()
}

/// The kernel settings `protectKernelDefaults` demands, each as the kubelet will find it: the
/// value the agent sets itself, else the live one.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KernelDefaults {
    /// What turns `protectKernelDefaults` on (nodeadm's generated config, a kubelet config).
    pub protected_by: String,
    /// The values of these keys the agent sets before the hand-off (`sysctls`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub agent_sets: BTreeMap<String, String>,
    /// Judge what the next boot sets (the last sysctl.d assignment) before the live value:
    /// `eks-nodeinit check`, where the image is built.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub next_boot: bool,
}

impl KernelDefaults {
    pub const KIND: &'static str = "kernelDefaults";

    /// Each demanded setting the kubelet would not find: `key is v (where), not n`. A root
    /// without a live kernel (a node image) is judged by what its next boot sets: the last
    /// sysctl.d assignment of each key; a key no file sets keeps the kernel's built-in value,
    /// which is not read here.
    fn differences(&self, root: &Path) -> Result<Vec<String>, Stop> {
        let mut out = Vec::new();
        let live = live(root);
        let boot =
            |key| crate::os::sysctl_d::at_boot(root, key).filter(|_| self.next_boot || !live);
        let (mut unset, mut missing) = (0, None);
        for (key, want) in KERNEL_DEFAULTS {
            let (value, whose) = match (self.agent_sets.get(key), boot(key)) {
                (Some(v), _) => (v.clone(), "the agent's sysctls".to_string()),
                (None, Some((v, file))) => (v, format!("{} at boot", file.display())),
                (None, None) if !live => {
                    unset += 1;
                    continue;
                }
                (None, None) => match crate::os::procsys::read_live(root, key) {
                    Ok(v) => (v.trim().to_string(), "live".to_string()),
                    Err(e) if root != Path::new("/") => {
                        missing = Some(format!("{e}: the root holds no live kernel"));
                        continue;
                    }
                    Err(e) => {
                        out.push(format!("{key} cannot be read ({e})"));
                        continue;
                    }
                },
            };
            if value.parse::<i64>().ok() != Some(want) {
                out.push(format!(
                    "{key} is {} ({whose}), not {want}",
                    printable(&value)
                ));
            }
        }
        match missing {
            Some(why) if out.is_empty() => return Err(Stop::NotRun(why)),
            _ => {}
        }
        if unset == KERNEL_DEFAULTS.len() {
            return Err(Stop::NotRun(
                "the root holds no live kernel and no sysctl.d file sets any of them".into(),
            ));
        }
        Ok(out)
    }
}

impl Probe for KernelDefaults {
    fn local(&self) -> bool {
        true
    }
    fn kind(&self) -> &'static str {
        Self::KIND
    }
    fn describe(&self) -> String {
        "kernel settings protectKernelDefaults demands".into()
    }
    fn fields(&self) -> serde_json::Value {
        fields(self)
    }
    fn run<'a>(&'a self, env: &'a Env) -> Outcome<'a> {
        Box::pin(async move {
            let wrong = self.differences(&env.root)?;
            if wrong.is_empty() {
                return Ok(format!("all {} as the kubelet demands", KERNEL_DEFAULTS.len()).into());
            }
            Err(Cause::advised(
                "kernel-defaults",
                format!("{}; the kubelet's protectKernelDefaults is on ({}) and it exits at start on any of these", wrong.join("; "), self.protected_by),
                "a hardening file in /etc/sysctl.d (or /etc/sysctl.conf) changes what the kubelet demands: remove or reorder that file, or set each key in the config's `sysctls` (the agent sets them live and persists them in 99-zz-eks-nodeinit.conf, read last); turning protectKernelDefaults off is the last resort",
            ).into())
        })
    }
}

/// The node's mounts: each mount point with whether it is `noexec`, in mountinfo's order.
fn mounts(root: &Path) -> Option<Vec<(String, bool)>> {
    let text = std::fs::read_to_string(under(root, "/proc/self/mountinfo")).ok()?;
    let mounts = text.lines().filter_map(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        let point = unescape(f.get(4)?);
        let noexec = f.get(5)?.split(',').any(|o| o == "noexec");
        Some((point, noexec))
    });
    Some(mounts.collect())
}

/// A node image's mounts at its next boot, from its `/etc/fstab`: each mount point with whether
/// its options hold `noexec`, in the file's order (swap and `none` left out). Mount units are
/// not read.
fn fstab(root: &Path) -> Option<Vec<(String, bool)>> {
    let text = std::fs::read_to_string(under(root, "/etc/fstab")).ok()?;
    let mounts = text.lines().filter_map(|l| {
        let l = l.trim();
        if l.starts_with('#') {
            return None;
        }
        let f: Vec<&str> = l.split_whitespace().collect();
        let point = unescape(f.get(1)?);
        let noexec = f.get(3)?.split(',').any(|o| o == "noexec");
        point.starts_with('/').then_some((point, noexec))
    });
    Some(mounts.collect())
}

/// A mountinfo path with its octal escapes (`\040` for a space) read.
fn unescape(s: &str) -> String {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                let v = d.iter().fold(0u32, |a, c| a * 8 + u32::from(c - b'0'));
                out.push(u8::try_from(v).unwrap_or(b'?'));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The mount that holds `path`: the last one listed whose mount point is `path` or above it.
fn mount_of<'a>(mounts: &'a [(String, bool)], path: &str) -> Option<&'a (String, bool)> {
    let holds = |m: &&(String, bool)| {
        let p = m.0.trim_end_matches('/');
        path == p || path.starts_with(&format!("{p}/")) || p.is_empty()
    };
    mounts
        .iter()
        .filter(holds)
        .max_by_key(|m| m.0.trim_end_matches('/').len())
}

/// The directories programs are executed from, and the hand-off's programs: none on a `noexec`
/// mount, each program executable.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Exec {
    /// Node directories, each with who executes from it.
    pub dirs: BTreeMap<String, String>,
    /// The hand-off's programs by node path, each with its name.
    pub programs: BTreeMap<String, String>,
}

impl Exec {
    pub const KIND: &'static str = "exec";

    fn problems(&self, root: &Path, mounts: &[(String, bool)]) -> Vec<String> {
        let mut out = Vec::new();
        for (dir, who) in &self.dirs {
            if let Some(point) = noexec_mount(root, mounts, dir) {
                out.push(format!("{dir} is on the noexec mount {point} ({who})"));
            }
        }
        for (path, name) in &self.programs {
            let Ok(meta) = std::fs::metadata(under(root, path)) else {
                continue;
            };
            let mode = meta.permissions().mode();
            if mode & 0o111 == 0 {
                out.push(format!(
                    "{name} ({path}) is not executable (mode {:04o})",
                    mode & 0o7777
                ));
            }
            if let Some(point) = noexec_mount(root, mounts, path) {
                out.push(format!("{name} ({path}) is on the noexec mount {point}"));
            }
        }
        out
    }
}

/// The `noexec` mount that holds `path`, by its mount point. On the node itself (`--root /`)
/// the kernel says (statvfs of the deepest part of the path that exists: symlinks and stacked
/// mounts as the kernel resolves them), the mount named from mountinfo; under another root,
/// that root's mountinfo alone.
fn noexec_mount(root: &Path, mounts: &[(String, bool)], path: &str) -> Option<String> {
    let listed = mount_of(mounts, path);
    if root != Path::new("/") {
        return listed.filter(|m| m.1).map(|m| printable(&m.0));
    }
    let mut p = Path::new(path);
    let flags = loop {
        match nix::sys::statvfs::statvfs(p) {
            Ok(v) => break v.flags(),
            Err(_) => p = p.parent()?,
        }
    };
    if !flags.contains(nix::sys::statvfs::FsFlags::ST_NOEXEC) {
        return None;
    }
    Some(listed.map_or_else(|| "(not in mountinfo)".into(), |m| printable(&m.0)))
}

impl Probe for Exec {
    fn local(&self) -> bool {
        true
    }
    fn kind(&self) -> &'static str {
        Self::KIND
    }
    fn describe(&self) -> String {
        "programs executable where the node runs them".into()
    }
    fn fields(&self) -> serde_json::Value {
        fields(self)
    }
    fn run<'a>(&'a self, env: &'a Env) -> Outcome<'a> {
        Box::pin(async move {
            let mounts = match mounts(&env.root) {
                Some(m) => m,
                None if env.root == Path::new("/") => Vec::new(),
                // A node image: what its next boot mounts.
                None => match fstab(&env.root) {
                    Some(m) => m,
                    None => {
                        let why = "the root has neither /proc/self/mountinfo nor /etc/fstab";
                        return Err(Stop::NotRun(why.into()));
                    }
                },
            };
            let wrong = self.problems(&env.root, &mounts);
            if wrong.is_empty() {
                let n = self.dirs.len() + self.programs.len();
                return Ok(format!("{n} directories and programs: none noexec").into());
            }
            Err(Cause::advised(
                "noexec",
                wrong.join("; "),
                "a hardening mount option (noexec in /etc/fstab or a mount unit) covers a place the node executes from: mount it without noexec, or give that directory its own mount without it; a program the hand-off runs must keep its execute bits (chmod 0755)",
            )
            .into())
        })
    }
}

/// SELinux enforcing, and the container policy the runtime needs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Selinux {}

impl Selinux {
    pub const KIND: &'static str = "selinux";
}

impl Probe for Selinux {
    fn local(&self) -> bool {
        true
    }
    fn kind(&self) -> &'static str {
        Self::KIND
    }
    fn describe(&self) -> String {
        "SELinux and the container policy".into()
    }
    fn fields(&self) -> serde_json::Value {
        fields(self)
    }
    fn run<'a>(&'a self, env: &'a Env) -> Outcome<'a> {
        Box::pin(async move { Ok(selinux(&env.root)?.into()) })
    }
}

/// The SELinux policy type `/etc/selinux/config` names (`targeted` when it names none).
fn policy_type(root: &Path) -> String {
    let config = read(root, "/etc/selinux/config").unwrap_or_default();
    let named = config.lines().find_map(|l| {
        let v = l.trim().strip_prefix("SELINUXTYPE=")?;
        Some(v.trim().trim_matches('"').to_string())
    });
    named
        .filter(|t| !t.is_empty() && !t.contains('/') && t != "..")
        .unwrap_or_else(|| "targeted".into())
}

/// Whether the policy store holds the `container` module, enabled (libsemanage's layout:
/// `active/modules/<priority>/<name>`, a disabled one marked under `active/modules/disabled/`).
fn container_module(root: &Path, policy: &str) -> bool {
    let modules = under(root, format!("/var/lib/selinux/{policy}/active/modules"));
    if modules.join("disabled/container").exists() {
        return false;
    }
    let Ok(priorities) = std::fs::read_dir(&modules) else {
        return false;
    };
    priorities
        .flatten()
        .filter(|p| p.file_name() != "disabled")
        .any(|p| p.path().join("container").is_dir())
}

/// The mode `/etc/selinux/config` gives the next boot (`SELINUX=`), lowercased.
fn boot_mode(root: &Path) -> Option<String> {
    let config = read(root, "/etc/selinux/config")?;
    config.lines().find_map(|l| {
        let v = l.trim().strip_prefix("SELINUX=")?;
        Some(v.trim().trim_matches('"').to_ascii_lowercase())
    })
}

fn selinux(root: &Path) -> Result<String, Cause> {
    match read(root, "/sys/fs/selinux/enforce").as_deref() {
        Some("1") => {}
        Some(_) => return Ok("SELinux is not enforcing".into()),
        None if root == Path::new("/") => return Ok("SELinux is off (no /sys/fs/selinux)".into()),
        // A node image: the mode its next boot takes.
        None => match boot_mode(root).as_deref() {
            Some("enforcing") => {}
            Some(m) => {
                return Ok(format!(
                    "SELinux {} at boot (/etc/selinux/config)",
                    printable(m)
                ))
            }
            None => {
                return Ok("SELinux is off (no /sys/fs/selinux, no /etc/selinux/config)".into())
            }
        },
    }
    let t = policy_type(root);
    if container_module(root, &t) {
        return Ok(format!(
            "SELinux enforcing, the `{t}` policy with the container module"
        ));
    }
    Err(Cause::advised(
        "selinux",
        format!("SELinux is enforcing and the `{t}` policy has no `container` module (/var/lib/selinux/{t}/active/modules/<priority>/container): containerd and its containers run without the types the container policy gives them"),
        "install the container-selinux package in the AMI (the `container` module and the contexts containerd labels containers with), or leave SELinux permissive as the EKS AMIs do (they do not install container-selinux)",
    ))
}

/// FIPS mode on, and whether the agent's own AWS calls would use FIPS endpoints.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Fips {}

impl Fips {
    pub const KIND: &'static str = "fips";
}

impl Probe for Fips {
    fn local(&self) -> bool {
        true
    }
    fn kind(&self) -> &'static str {
        Self::KIND
    }
    fn describe(&self) -> String {
        "FIPS endpoints in FIPS mode".into()
    }
    fn fields(&self) -> serde_json::Value {
        fields(self)
    }
    /// The node joins either way: a finding of compliance, not a stop.
    fn blocks(&self, _: &str) -> bool {
        false
    }
    fn run<'a>(&'a self, env: &'a Env) -> Outcome<'a> {
        Box::pin(async move {
            let enabled = read(&env.root, "/proc/sys/crypto/fips_enabled");
            if enabled.is_none() && !live(&env.root) {
                let why = "the root holds no live kernel: FIPS mode is the boot's kernel command line's (not read)";
                return Err(Stop::NotRun(why.into()));
            }
            if enabled.as_deref() != Some("1") {
                return Ok("the kernel is not in FIPS mode".to_string().into());
            }
            let conf = aws_config::provider_config::ProviderConfig::default();
            let fips = aws_config::default_provider::use_fips::use_fips_provider(&conf).await;
            if fips == Some(true) {
                return Ok("FIPS mode, and the agent's AWS calls use FIPS endpoints"
                    .to_string()
                    .into());
            }
            Err(Cause::advised(
                "fips",
                "the kernel is in FIPS mode (crypto.fips_enabled = 1), and the agent's own AWS calls would use the standard endpoints: neither AWS_USE_FIPS_ENDPOINT=true in its environment nor use_fips_endpoint = true in its AWS config".into(),
                "in a Region with FIPS endpoints (the US, Canada, GovCloud) set AWS_USE_FIPS_ENDPOINT=true in the agent's unit environment (a drop-in under /etc/systemd/system/eks-nodeinit.service.d/), as for nodeadm and the kubelet's credential provider; the node joins either way",
            )
            .into())
        })
    }
}

#[cfg(test)]
#[path = "hardening_tests.rs"]
mod tests;
