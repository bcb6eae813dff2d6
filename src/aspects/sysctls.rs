//! Kernel sysctls: set live under `<root>/proc/sys` and persisted in one file under
//! `/etc/sysctl.d/`, rewritten whole on every change (never appended to). Values that kubelet's
//! `protectKernelDefaults` would refuse are findings before anything changes.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::facts::{Facts, Family};
use crate::fsutil::under;
use crate::spec::Spec;
use crate::step::Step;
use crate::text::printable;

pub use crate::spec::sysctls::{check_key, normalize, SysctlSpec};

use super::{Aspect, Out, Reads};

pub const ASPECT: Aspect = Aspect {
    name: "sysctls",
    reads,
    plan,
};

/// The persisted file. `99-zz-` sorts after the distribution's `99-sysctl.conf`, so a later file
/// does not silently undo the agent's values.
pub const PERSIST_PATH: &str = "/etc/sysctl.d/99-zz-eks-nodeinit.conf";

/// Sysctls kubelet checks when `protectKernelDefaults` is on, with the value it requires
/// (kubernetes pkg/kubelet/cm: setupKernelTunables; component-helpers/node/util/sysctl).
pub const PROTECTED_KERNEL_DEFAULTS: [(&str, &str); 6] = [
    ("vm.overcommit_memory", "1"),
    ("vm.panic_on_oom", "0"),
    ("kernel.panic", "10"),
    ("kernel.panic_on_oops", "1"),
    ("kernel.keys.root_maxkeys", "1000000"),
    ("kernel.keys.root_maxbytes", "25000000"),
];

#[derive(Debug, thiserror::Error)]
pub enum SysctlError {
    #[error("sysctl `{key}` does not exist on this kernel (no {path}); check the name, or load the module that provides it")]
    Missing { key: String, path: PathBuf },
    #[error("sysctl `{key}` resolves outside {root}/proc/sys; refusing it")]
    Escape { key: String, root: PathBuf },
    #[error("cannot read sysctl `{key}` from {path}: {source}")]
    Read {
        key: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Outside procfs (a test root): the file could not be replaced.
    #[error(transparent)]
    Replace(#[from] crate::fsutil::FsError),
    #[error("cannot set sysctl `{key}` via {path}: {source}")]
    Write {
        key: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn reads(spec: &Spec, _: Option<Family>, r: &mut Reads) {
    r.sysctls.extend(spec.sysctls.keys().cloned());
    r.file(PERSIST_PATH);
}

fn plan(spec: &Spec, facts: &Facts, out: &mut Out) {
    let mut wanted = BTreeMap::new();
    for (k, v) in &spec.sysctls {
        let field = format!("sysctls[\"{}\"]", printable(k));
        if let Some(protector) = facts.protect_kernel_defaults() {
            if let Some((_, need)) = PROTECTED_KERNEL_DEFAULTS.iter().find(|(pk, _)| pk == k) {
                if v != need {
                    out.findings.push(field, format!(
                        "{v} contradicts kubelet's protectKernelDefaults (on in {protector}), which requires {k} = {need}: kubelet would refuse to start; remove it or use {need}"
                    ));
                    continue;
                }
            }
        }
        match facts.sysctls.get(k) {
            Some(Ok(old)) => {
                if old != v {
                    out.steps.push(Step::Sysctl {
                        key: k.clone(),
                        path: Path::new("/proc/sys").join(k.replace('.', "/")),
                        old: old.clone(),
                        new: v.clone(),
                    });
                }
                wanted.insert(k.clone(), v.clone());
            }
            Some(Err(e)) => out.findings.push(field, e.clone()),
            None => out.findings.push(field, "was not read from the node"),
        }
    }
    let Some(existing) = facts.current_file(PERSIST_PATH, "sysctls", &mut out.findings) else {
        return;
    };
    if spec.sysctls.is_empty() && existing.content.is_none() {
        return;
    }
    let new = persisted_content(&wanted);
    if existing.content.as_deref() != Some(new.as_str()) {
        out.steps.push(Step::File {
            purpose: "persisted sysctls".into(),
            path: PathBuf::from(PERSIST_PATH),
            old: existing.content.clone(),
            new,
            mode: existing.mode.unwrap_or(0o644),
            backup: None,
        });
    }
}

/// `<root>/proc/sys/<key with dots as slashes>`. The key must already have passed
/// [`check_key`] (no `/`, no `..`).
pub fn proc_path(root: &Path, key: &str) -> PathBuf {
    under(root, Path::new("/proc/sys").join(key.replace('.', "/")))
}

/// Read a live value, checking that the key exists and stays inside `<root>/proc/sys`
/// even through symlinks.
pub fn read_live(root: &Path, key: &str) -> Result<String, SysctlError> {
    let path = proc_path(root, key);
    let missing = || SysctlError::Missing {
        key: key.into(),
        path: path.clone(),
    };
    let real = std::fs::canonicalize(&path).map_err(|_| missing())?;
    let base = std::fs::canonicalize(under(root, "/proc/sys")).map_err(|_| missing())?;
    if !real.starts_with(&base) || real == base {
        return Err(SysctlError::Escape {
            key: key.into(),
            root: root.to_path_buf(),
        });
    }
    if real.is_dir() {
        return Err(missing());
    }
    std::fs::read_to_string(&real)
        .map(|s| normalize(&s))
        .map_err(|source| SysctlError::Read {
            key: key.into(),
            path,
            source,
        })
}

/// Set a live value now (see [`prepare_live`]).
pub fn write_live(root: &Path, key: &str, value: &str) -> Result<(), SysctlError> {
    prepare_live(root, key, value)?.apply()
}

/// A live value ready to set, everything that can fail before the write already done: on
/// procfs the file is open for writing (nothing written), anywhere else (a test root, a copy of
/// /proc) its replacement is staged beside it.
#[derive(Debug)]
pub struct PreparedSysctl {
    key: String,
    path: PathBuf,
    line: String,
    target: LiveTarget,
}

#[derive(Debug)]
enum LiveTarget {
    Proc(std::fs::File),
    Staged(crate::fsutil::Staged),
}

pub fn prepare_live(root: &Path, key: &str, value: &str) -> Result<PreparedSysctl, SysctlError> {
    let path = proc_path(root, key);
    let line = format!("{value}\n");
    let procfs = nix::sys::statfs::statfs(&path)
        .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::PROC_SUPER_MAGIC);
    let target = if procfs {
        let f = OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|source| SysctlError::Write {
                key: key.into(),
                path: path.clone(),
                source,
            })?;
        LiveTarget::Proc(f)
    } else {
        LiveTarget::Staged(crate::fsutil::stage(&path, line.as_bytes(), 0o644)?)
    };
    Ok(PreparedSysctl {
        key: key.into(),
        path,
        line,
        target,
    })
}

impl PreparedSysctl {
    /// Set it. On procfs the kernel takes a value from one `write`: it is written in one call
    /// and a short write is an error. Elsewhere the staged file replaces the old one atomically,
    /// so no reader ever sees it empty.
    pub fn apply(self) -> Result<(), SysctlError> {
        let werr = |source| SysctlError::Write {
            key: self.key.clone(),
            path: self.path.clone(),
            source,
        };
        match self.target {
            LiveTarget::Staged(s) => Ok(s.commit()?),
            LiveTarget::Proc(mut f) => match f.write(self.line.as_bytes()) {
                Ok(n) if n == self.line.len() => Ok(()),
                Ok(n) => Err(werr(std::io::Error::other(format!(
                    "the kernel took {n} of {} bytes",
                    self.line.len()
                )))),
                Err(e) => Err(werr(e)),
            },
        }
    }
}

/// The persisted file's content for these sysctls (sorted by key).
pub fn persisted_content(sysctls: &BTreeMap<String, String>) -> String {
    let mut s = String::from(
        "# Written by eks-nodeinit from its config; rewritten on every run. Do not edit:\n# change the config's `sysctls` instead.\n",
    );
    for (k, v) in sysctls {
        s.push_str(&format!("{k} = {v}\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_traversal() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("proc/sys/fs")).unwrap();
        std::fs::write(d.path().join("secret"), "x").unwrap();
        std::os::unix::fs::symlink(d.path().join("secret"), d.path().join("proc/sys/fs/link"))
            .unwrap();
        assert!(matches!(
            read_live(d.path(), "fs.link"),
            Err(SysctlError::Escape { .. })
        ));
        assert!(matches!(
            read_live(d.path(), "fs.nope"),
            Err(SysctlError::Missing { .. })
        ));
        assert!(matches!(
            read_live(d.path(), "fs"),
            Err(SysctlError::Missing { .. })
        ));
    }

    #[test]
    fn a_reader_never_sees_a_test_root_value_empty() {
        // Truncate-then-write left a window where the file is empty (and a kill there left it
        // so); the value is now replaced atomically outside procfs.
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("proc/sys/vm")).unwrap();
        let file = d.path().join("proc/sys/vm/max_map_count");
        std::fs::write(&file, "65530\n").unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (file, stop) = (file.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut empty = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    if std::fs::read_to_string(&file)
                        .unwrap_or_default()
                        .is_empty()
                    {
                        empty += 1;
                    }
                }
                empty
            })
        };
        for i in 0..3000 {
            write_live(d.path(), "vm.max_map_count", &(262144 + i).to_string()).unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(reader.join().unwrap(), 0, "a reader saw the value empty");
        assert_eq!(read_live(d.path(), "vm.max_map_count").unwrap(), "265143");
    }

    #[test]
    fn multi_value_is_normalised() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("proc/sys/net/ipv4")).unwrap();
        std::fs::write(
            d.path().join("proc/sys/net/ipv4/ip_local_port_range"),
            "32768\t60999\n",
        )
        .unwrap();
        assert_eq!(
            read_live(d.path(), "net.ipv4.ip_local_port_range").unwrap(),
            "32768 60999"
        );
        write_live(d.path(), "net.ipv4.ip_local_port_range", "1024 65000").unwrap();
        assert_eq!(
            read_live(d.path(), "net.ipv4.ip_local_port_range").unwrap(),
            "1024 65000"
        );
    }
}
