//! Live kernel values under `<root>/proc/sys`: read through a key that cannot leave it, and set
//! in two steps (opened or staged first, written second) so the executor's first phase finds
//! every failure before anything changes.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::os::fsutil::under;

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
    Replace(#[from] crate::os::fsutil::FsError),
    #[error("cannot set sysctl `{key}` via {path}: {source}")]
    Write {
        key: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Normalise a value for comparison: the kernel prints multi-value sysctls with tabs.
pub(crate) fn normalize(v: &str) -> String {
    v.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `<root>/proc/sys/<key with dots as slashes>`. The key must already have passed
/// [`check_key`] (no `/`, no `..`).
pub(crate) fn proc_path(root: &Path, key: &str) -> PathBuf {
    under(root, Path::new("/proc/sys").join(key.replace('.', "/")))
}

/// Read a live value, checking that the key exists and stays inside `<root>/proc/sys`
/// even through symlinks.
pub(crate) fn read_live(root: &Path, key: &str) -> Result<String, SysctlError> {
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
#[cfg(test)]
pub(crate) fn write_live(root: &Path, key: &str, value: &str) -> Result<(), SysctlError> {
    prepare_live(root, key, value)?.apply()
}

/// A live value ready to set, everything that can fail before the write already done: on
/// procfs the file is open for writing (nothing written), anywhere else (a test root, a copy of
/// /proc) its replacement is staged beside it.
#[derive(Debug)]
pub(crate) struct PreparedSysctl {
    key: String,
    path: PathBuf,
    line: String,
    target: LiveTarget,
}

#[derive(Debug)]
enum LiveTarget {
    Proc(std::fs::File),
    Staged(crate::os::fsutil::Staged),
}

#[cfg(test)]
pub(crate) fn prepare_live(
    root: &Path,
    key: &str,
    value: &str,
) -> Result<PreparedSysctl, SysctlError> {
    prepare_at(proc_path(root, key), key, value)
}

/// Like [`prepare_live`], for a kernel value at `path` (already under the root), named `key`.
pub(crate) fn prepare_at(
    path: PathBuf,
    key: &str,
    value: &str,
) -> Result<PreparedSysctl, SysctlError> {
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
        LiveTarget::Staged(crate::os::fsutil::stage_volatile(
            &path,
            line.as_bytes(),
            0o644,
        )?)
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
