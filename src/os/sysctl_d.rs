//! What `systemd-sysctl` sets at boot, read from the files of a node root: every `*.conf` of
//! `/etc/sysctl.d`, `/run/sysctl.d`, `/usr/local/lib/sysctl.d` and `/usr/lib/sysctl.d` (a name
//! in an earlier directory masks the same name in a later one), in file-name order, the last
//! assignment of a key winning; keys spelled with `.` or `/` alike; `#` and `;` comments; a `-`
//! before a key only quiets an error. `/etc/sysctl.conf` is read where a file of those
//! directories links to it (`99-sysctl.conf`, as distributions ship it). For a root that is a
//! node image, not a running node: the values its next boot sets.

use std::path::{Path, PathBuf};

use crate::os::fsutil::under;

/// systemd's `CONF_PATHS("sysctl.d")`, from the one that masks to the one masked.
const DIRS: [&str; 4] = [
    "/etc/sysctl.d",
    "/run/sysctl.d",
    "/usr/local/lib/sysctl.d",
    "/usr/lib/sysctl.d",
];

/// The files systemd-sysctl reads, in its order (node paths).
pub fn files(root: &Path) -> Vec<PathBuf> {
    let mut by_name: Vec<(String, PathBuf)> = Vec::new();
    for dir in DIRS {
        let Ok(rd) = std::fs::read_dir(under(root, dir)) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(name) = e.file_name().into_string() else {
                continue;
            };
            if name.ends_with(".conf") && !by_name.iter().any(|(n, _)| *n == name) {
                by_name.push((name.clone(), Path::new(dir).join(&name)));
            }
        }
    }
    by_name.sort();
    by_name.into_iter().map(|(_, p)| p).collect()
}

/// The key as systemd-sysctl compares it: `/` read as `.`.
fn normal(key: &str) -> String {
    key.trim().trim_start_matches('-').replace('/', ".")
}

/// The value the next boot sets for `key`, and the file whose assignment is the last; `None`
/// when no file sets it (the kernel's built-in value then stands).
pub fn at_boot(root: &Path, key: &str) -> Option<(String, PathBuf)> {
    let want = normal(key);
    let mut last = None;
    for file in files(root) {
        let Some(text) = read_in(root, &file) else {
            continue;
        };
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            let Some((k, v)) = line.split_once('=') else {
                continue;
            };
            if normal(k) == want {
                last = Some((v.trim().to_string(), file.clone()));
            }
        }
    }
    last
}

/// A file of the root, a link followed inside the root (`99-sysctl.conf` →
/// `/etc/sysctl.conf` is the root's, never the host's).
fn read_in(root: &Path, file: &Path) -> Option<String> {
    let full = under(root, file);
    match std::fs::read_link(&full) {
        Ok(target) if target.is_absolute() => std::fs::read_to_string(under(root, &target)).ok(),
        Ok(target) => std::fs::read_to_string(full.parent()?.join(target)).ok(),
        Err(_) => std::fs::read_to_string(full).ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, path: &str, text: &str) {
        let p = under(root, path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn the_last_file_by_name_wins_and_etc_masks_the_same_name() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        write(r, "/usr/lib/sysctl.d/50-default.conf", "kernel.panic = 3\n");
        write(r, "/etc/sysctl.d/99-amazon.conf", "kernel.panic=10\n");
        write(r, "/usr/lib/sysctl.d/99-amazon.conf", "kernel.panic = 7\n");
        assert_eq!(
            at_boot(r, "kernel.panic"),
            Some(("10".into(), "/etc/sysctl.d/99-amazon.conf".into()))
        );
        write(
            r,
            "/run/sysctl.d/99-hardening.conf",
            "# STIG\n; note\n-kernel/panic = 0\n",
        );
        assert_eq!(
            at_boot(r, "kernel.panic"),
            Some(("0".into(), "/run/sysctl.d/99-hardening.conf".into()))
        );
        write(r, "/etc/sysctl.d/README", "kernel.panic = 5\n");
        // The distribution's link to /etc/sysctl.conf: the root's file, not the host's.
        write(r, "/etc/sysctl.conf", "vm.overcommit_memory = 1\n");
        std::os::unix::fs::symlink("/etc/sysctl.conf", under(r, "/etc/sysctl.d/99-sysctl.conf"))
            .unwrap();
        assert_eq!(at_boot(r, "vm.overcommit_memory").unwrap().0, "1");
        std::fs::remove_file(under(r, "/etc/sysctl.d/99-sysctl.conf")).unwrap();
        assert_eq!(at_boot(r, "kernel.panic").unwrap().0, "0");
        assert_eq!(at_boot(r, "vm.overcommit_memory"), None);
        assert_eq!(
            files(r),
            [
                PathBuf::from("/usr/lib/sysctl.d/50-default.conf"),
                "/etc/sysctl.d/99-amazon.conf".into(),
                "/run/sysctl.d/99-hardening.conf".into()
            ]
        );
    }
}
