//! Kernel sysctls: live values under `<root>/proc/sys`, persisted in one file under
//! `<root>/etc/sysctl.d/` that is rewritten whole on every change, never appended to.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::fsutil::under;
use crate::validate::normalize_sysctl_value;

/// The persisted file. `99-zz-` sorts after the distribution's `99-sysctl.conf`, so a later file
/// does not silently undo the agent's values.
pub const PERSIST_PATH: &str = "/etc/sysctl.d/99-zz-eks-nodeinit.conf";

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
    #[error("cannot set sysctl `{key}` via {path}: {source}")]
    Write {
        key: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// `<root>/proc/sys/<key with dots as slashes>`. The key must already have passed
/// `validate::check_sysctl_key` (no `/`, no `..`).
pub fn proc_path(root: &Path, key: &str) -> PathBuf {
    under(root, Path::new("/proc/sys").join(key.replace('.', "/")))
}

/// Read a live value, checking that the key exists and stays inside `<root>/proc/sys`
/// even through symlinks.
pub fn read_live(root: &Path, key: &str) -> Result<String, SysctlError> {
    let path = proc_path(root, key);
    let real = std::fs::canonicalize(&path).map_err(|_| SysctlError::Missing {
        key: key.into(),
        path: path.clone(),
    })?;
    let base =
        std::fs::canonicalize(under(root, "/proc/sys")).map_err(|_| SysctlError::Missing {
            key: key.into(),
            path: path.clone(),
        })?;
    if !real.starts_with(&base) || real == base {
        return Err(SysctlError::Escape {
            key: key.into(),
            root: root.to_path_buf(),
        });
    }
    if real.is_dir() {
        return Err(SysctlError::Missing {
            key: key.into(),
            path,
        });
    }
    std::fs::read_to_string(&real)
        .map(|s| normalize_sysctl_value(&s))
        .map_err(|source| SysctlError::Read {
            key: key.into(),
            path,
            source,
        })
}

/// Set a live value.
pub fn write_live(root: &Path, key: &str, value: &str) -> Result<(), SysctlError> {
    let path = proc_path(root, key);
    let werr = |source| SysctlError::Write {
        key: key.into(),
        path: path.clone(),
        source,
    };
    // truncate is a no-op on procfs and needed for regular files in test roots.
    let mut f = OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&path)
        .map_err(werr)?;
    f.write_all(format!("{value}\n").as_bytes()).map_err(werr)?;
    Ok(())
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
