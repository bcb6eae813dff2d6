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
}

impl KernelDefaults {
    pub const KIND: &'static str = "kernelDefaults";

    /// Each demanded setting the kubelet would not find: `key is v (where), not n`.
    fn differences(&self, root: &Path) -> Result<Vec<String>, Stop> {
        let mut out = Vec::new();
        for (key, want) in KERNEL_DEFAULTS {
            let (value, whose) = match self.agent_sets.get(key) {
                Some(v) => (v.clone(), "the agent's sysctls"),
                None => match crate::os::procsys::read_live(root, key) {
                    Ok(v) => (v.trim().to_string(), "live"),
                    Err(e) if root != Path::new("/") => {
                        return Err(Stop::NotRun(format!("{e}: the root holds no live kernel")))
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
        Ok(out)
    }
}

impl Probe for KernelDefaults {
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
                None => return Err(Stop::NotRun("the root has no /proc/self/mountinfo".into())),
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

fn selinux(root: &Path) -> Result<String, Cause> {
    match read(root, "/sys/fs/selinux/enforce").as_deref() {
        Some("1") => {}
        Some(_) => return Ok("SELinux is not enforcing".into()),
        None => return Ok("SELinux is off (no /sys/fs/selinux)".into()),
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
            if read(&env.root, "/proc/sys/crypto/fips_enabled").as_deref() != Some("1") {
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
mod tests {
    use super::*;
    use crate::verify::check::run;
    use crate::verify::{Check, Verdict};

    fn write(root: &Path, path: &str, text: &str) {
        let p = under(root, path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    async fn one(root: &Path, probe: impl Probe + 'static) -> crate::verify::CheckResult {
        let checks = [Check::new(probe)];
        let budget = std::time::Duration::from_secs(5);
        run(&checks, budget, root.to_path_buf()).await.remove(0)
    }

    const MOUNTS: &str = "\
22 1 259:1 / / rw,relatime shared:1 - ext4 /dev/root rw
30 22 0:26 / /opt rw,nosuid,nodev,noexec shared:2 - xfs /dev/opt rw
31 22 0:27 / /var/lib/kube\\040let rw,noexec shared:3 - tmpfs tmpfs rw
32 30 0:28 / /opt/cni rw shared:4 - xfs /dev/cni rw
";

    #[test]
    fn the_mount_that_holds_a_path_is_the_deepest_and_escapes_are_read() {
        let root = tempfile::tempdir().unwrap();
        write(root.path(), "/proc/self/mountinfo", MOUNTS);
        let m = mounts(root.path()).unwrap();
        assert_eq!(
            mount_of(&m, "/opt/cni/bin"),
            Some(&("/opt/cni".to_string(), false))
        );
        assert_eq!(
            mount_of(&m, "/opt/other"),
            Some(&("/opt".to_string(), true))
        );
        assert_eq!(mount_of(&m, "/optional"), Some(&("/".to_string(), false)));
        assert_eq!(
            mount_of(&m, "/var/lib/kube let/x"),
            Some(&("/var/lib/kube let".to_string(), true))
        );
    }

    #[tokio::test]
    async fn noexec_directories_and_programs_without_execute_bits_are_named() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        write(r, "/proc/self/mountinfo", MOUNTS);
        write(r, "/usr/bin/kubelet", "");
        std::fs::set_permissions(
            under(r, "/usr/bin/kubelet"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        write(r, "/opt/tool", "");
        std::fs::set_permissions(
            under(r, "/opt/tool"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let probe = Exec {
            dirs: BTreeMap::from([
                ("/opt/cni/bin".into(), "CNI".into()),
                ("/opt/x".into(), "x".into()),
            ]),
            programs: BTreeMap::from([
                ("/usr/bin/kubelet".into(), "kubelet".into()),
                ("/opt/tool".into(), "tool".into()),
                ("/usr/bin/absent".into(), "absent".into()),
            ]),
        };
        let r = one(r, probe).await;
        assert_eq!(
            (r.result, r.cause.as_deref()),
            (Verdict::Failed, Some("noexec"))
        );
        assert_eq!(
            r.detail,
            "/opt/x is on the noexec mount /opt (x); tool (/opt/tool) is on the noexec mount /opt; kubelet (/usr/bin/kubelet) is not executable (mode 0644)"
        );
        assert!(r.todo.unwrap().contains("without noexec"));
    }

    #[tokio::test]
    async fn the_kernel_settings_are_judged_as_the_kubelet_reads_them() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        for (k, v) in KERNEL_DEFAULTS {
            write(
                r,
                &format!("/proc/sys/{}", k.replace('.', "/")),
                &format!("{v}\n"),
            );
        }
        let probe = || KernelDefaults {
            protected_by: "nodeadm's generated kubelet config".into(),
            agent_sets: BTreeMap::new(),
        };
        assert_eq!(one(r, probe()).await.result, Verdict::Passed);
        // A STIG-like value, and one larger than demanded: the kubelet wants each equal.
        write(r, "/proc/sys/kernel/panic", "0\n");
        write(r, "/proc/sys/kernel/keys/root_maxkeys", "2000000\n");
        let failed = one(r, probe()).await;
        assert_eq!(failed.cause.as_deref(), Some("kernel-defaults"));
        assert!(failed.detail.starts_with("kernel.panic is 0 (live), not 10; kernel.keys.root_maxkeys is 2000000 (live), not 1000000;"), "{}", failed.detail);
        assert!(!failed.advisory);
        // What the agent sets itself before the hand-off counts instead of the live value.
        let mut fixed = probe();
        fixed.agent_sets.insert("kernel.panic".into(), "10".into());
        fixed
            .agent_sets
            .insert("kernel.keys.root_maxkeys".into(), "1000000".into());
        assert_eq!(one(r, fixed).await.result, Verdict::Passed);
        // A root without a live kernel: not run, not failed.
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(one(empty.path(), probe()).await.result, Verdict::NotRun);
    }

    #[tokio::test]
    async fn selinux_enforcing_needs_the_container_module_and_fips_is_advisory() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        assert_eq!(one(r, Selinux {}).await.result, Verdict::Passed);
        write(r, "/sys/fs/selinux/enforce", "1");
        write(
            r,
            "/etc/selinux/config",
            "SELINUX=enforcing\nSELINUXTYPE=targeted\n",
        );
        let failed = one(r, Selinux {}).await;
        assert_eq!(failed.cause.as_deref(), Some("selinux"));
        write(
            r,
            "/var/lib/selinux/targeted/active/modules/200/container/cil",
            "",
        );
        assert_eq!(one(r, Selinux {}).await.result, Verdict::Passed);
        write(
            r,
            "/var/lib/selinux/targeted/active/modules/disabled/container",
            "",
        );
        assert_eq!(one(r, Selinux {}).await.result, Verdict::Failed);
        write(r, "/proc/sys/crypto/fips_enabled", "1\n");
        let fips = one(r, Fips {}).await;
        if std::env::var_os("AWS_USE_FIPS_ENDPOINT").is_none() {
            assert_eq!(
                (fips.result, fips.advisory),
                (Verdict::Failed, true),
                "{fips:?}"
            );
        }
    }

    #[test]
    fn each_probe_reads_back_from_a_job_as_it_was_planned() {
        let checks = vec![
            Check::new(KernelDefaults {
                protected_by: "x".into(),
                agent_sets: BTreeMap::from([("kernel.panic".into(), "10".into())]),
            }),
            Check::new(Exec {
                dirs: BTreeMap::from([("/opt/cni/bin".into(), "CNI".into())]),
                programs: BTreeMap::new(),
            }),
            Check::new(Selinux {}),
            Check::new(Fips {}),
        ];
        let text = serde_json::to_string(&checks).unwrap();
        let back: Vec<Check> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, checks);
        let e = serde_json::from_str::<Check>(
            r#"{"check":"exec","dirs":{},"programs":{},"shell":"x"}"#,
        );
        assert!(e.unwrap_err().to_string().contains("shell"));
    }

    /// On the node itself the kernel says: a real `noexec` tmpfs, mounted for the test (root).
    #[test]
    fn on_the_node_a_noexec_mount_is_found_by_the_kernel_through_a_missing_path() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIP: mounting a noexec tmpfs needs root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap().to_string();
        let mount = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "noexec,size=1m", "tmpfs", &d])
            .status();
        if !mount.is_ok_and(|s| s.success()) {
            eprintln!("SKIP: mount -t tmpfs failed here");
            return;
        }
        let below = format!("{d}/cni/bin");
        let found = noexec_mount(Path::new("/"), &[], &below);
        let exec_dir = noexec_mount(Path::new("/"), &[], "/usr/bin");
        let _ = std::process::Command::new("umount").arg(&d).status();
        assert_eq!(found.as_deref(), Some("(not in mountinfo)"));
        assert_eq!(exec_dir, None);
    }
}
