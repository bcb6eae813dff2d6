//! Paths under `--root` and atomic file writes.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Join an absolute node path (`/etc/sysctl.d/x.conf`) under `root`.
pub fn under(root: &Path, path: impl AsRef<Path>) -> PathBuf {
    let mut out = root.to_path_buf();
    for c in path.as_ref().components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            // Config paths are validated to hold no `..`; drop it defensively anyway.
            Component::ParentDir => {}
        }
    }
    out
}

/// Read a file that may be absent. Anything but a regular file (a directory, a FIFO that would
/// block the read, a device) is an error, never read.
pub(crate) fn read_optional(path: &Path) -> Result<Option<String>, FsError> {
    if let Ok(m) = fs::metadata(path) {
        if !m.is_file() {
            return Err(FsError::Read {
                path: path.to_path_buf(),
                source: std::io::Error::other(format!(
                    "is {}, not a regular file",
                    kind_of(&m.file_type())
                )),
            });
        }
    }
    match fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(FsError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

const TMP_SUFFIX: &str = ".tmp";

fn tmp_prefix(name: &str) -> String {
    format!(".{name}.eks-nodeinit.")
}

/// Remove temp files an earlier, killed run left for `name` in `dir` (only the agent's own
/// pattern; the run lock keeps a live run's temp file out of reach).
fn remove_leftovers(dir: &Path, name: &str) {
    let prefix = tmp_prefix(name);
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if n.starts_with(&prefix) && n.ends_with(TMP_SUFFIX) {
            match fs::remove_file(e.path()) {
                Ok(()) => {
                    tracing::info!(path = %e.path().display(), "removed a leftover temp file")
                }
                Err(err) => {
                    tracing::warn!(path = %e.path().display(), "cannot remove a leftover temp file: {err}")
                }
            }
        }
    }
}

/// Write `content` to `path` atomically: a temp file in the same directory, fsync, rename over
/// the target, fsync the directory. An existing file's mode and owner are kept; a new file
/// gets `new_mode`. Parent directories are created (0755).
pub fn write_atomic(path: &Path, content: &[u8], new_mode: u32) -> Result<(), FsError> {
    stage(path, content, new_mode)?.commit()
}

/// A file's new content, written beside it under a temp name with its final mode and owner, not
/// yet visible: [`Staged::commit`] renames it over the target. Its fsync is [`sync_all`]'s,
/// with the other files staged in the same phase, else the commit's, before the rename.
/// Dropped without a commit, the temp file is removed. Staging every file first (and
/// [`sync_all`]) makes a full disk, a read-only or unwritable directory surface before anything
/// the node reads has changed.
#[derive(Debug)]
pub(crate) struct Staged {
    tmp: PathBuf,
    path: PathBuf,
    committed: bool,
    /// Fsynced before the rename, its directory after; `false`: see [`stage_volatile`].
    durable: bool,
    /// The temp file, open until it is fsynced.
    unsynced: Option<File>,
}

/// Stage `content` for `path` (see [`Staged`]), keeping an existing file's mode; parent
/// directories are created (0755).
pub(crate) fn stage(path: &Path, content: &[u8], new_mode: u32) -> Result<Staged, FsError> {
    stage_as(path, content, new_mode, false, true)
}

/// Stage `content` for `path` with exactly `mode`, whatever the existing file's.
pub(crate) fn stage_exact(path: &Path, content: &[u8], mode: u32) -> Result<Staged, FsError> {
    stage_as(path, content, mode, true, true)
}

/// [`stage`] for a file that stands for a kernel value (a `/proc/sys` file under a root that
/// is not procfs): replaced atomically as well, but neither it nor its directory fsynced. The
/// value it stands for is lost at every reboot, and the kernel's own file is written with no
/// fsync: a crash-safe copy of it is two fsyncs for nothing.
pub(crate) fn stage_volatile(
    path: &Path,
    content: &[u8],
    new_mode: u32,
) -> Result<Staged, FsError> {
    stage_as(path, content, new_mode, false, false)
}

fn stage_as(
    path: &Path,
    content: &[u8],
    new_mode: u32,
    exact: bool,
    durable: bool,
) -> Result<Staged, FsError> {
    let werr = |source| FsError::Write {
        path: path.to_path_buf(),
        source,
    };
    let dir = path
        .parent()
        .ok_or_else(|| werr(std::io::Error::other("no parent directory")))?;
    fs::create_dir_all(dir).map_err(werr)?;
    let existing = fs::symlink_metadata(path).ok();
    if let Some(m) = existing.as_ref().filter(|m| !m.is_file()) {
        return Err(werr(std::io::Error::other(format!(
            "is {}: the agent replaces regular files only",
            kind_of(&m.file_type())
        ))));
    }
    let mode = existing
        .as_ref()
        .filter(|_| !exact)
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(new_mode);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    remove_leftovers(dir, &name);
    // A name no other run can have: the PID alone repeats after a reboot or in a namespace.
    let mut staged = Staged {
        tmp: dir.join(format!(
            "{}{}.{:016x}{TMP_SUFFIX}",
            tmp_prefix(&name),
            std::process::id(),
            rand::random::<u64>()
        )),
        path: path.to_path_buf(),
        committed: false,
        durable,
        unsynced: None,
    };
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&staged.tmp)
        .map_err(werr)?;
    // From here on, dropping `staged` removes the temp file.
    (|| {
        f.write_all(content)?;
        // The umask may have narrowed the mode: set it exactly.
        f.set_permissions(fs::Permissions::from_mode(mode))?;
        if let Some(m) = &existing {
            if m.uid() != nix::unistd::geteuid().as_raw()
                || m.gid() != nix::unistd::getegid().as_raw()
            {
                std::os::unix::fs::fchown(&f, Some(m.uid()), Some(m.gid()))?;
            }
        }
        Ok(())
    })()
    .map_err(werr)?;
    staged.unsynced = durable.then_some(f);
    Ok(staged)
}

/// Fsync every staged file not fsynced yet, at once (one thread each): the filesystem writes
/// them back together (on a journalled filesystem, in one commit) instead of one flush after
/// another. The first failure, in the order given, is the error.
pub(crate) fn sync_all<'a>(
    staged: impl IntoIterator<Item = &'a mut Staged>,
) -> Result<(), FsError> {
    let mut pending: Vec<&mut Staged> = staged
        .into_iter()
        .filter(|s| s.unsynced.is_some())
        .collect();
    let results: Vec<std::io::Result<()>> = std::thread::scope(|scope| {
        let started: Vec<_> = pending
            .iter()
            .map(|s| {
                let f = s.unsynced.as_ref();
                let sync = move || f.map_or(Ok(()), File::sync_all);
                // A thread that cannot be started: fsync here, after the others have begun.
                std::thread::Builder::new()
                    .spawn_scoped(scope, sync)
                    .map_err(|_| sync)
            })
            .collect();
        started
            .into_iter()
            .map(|t| match t {
                Ok(h) => h
                    .join()
                    .unwrap_or_else(|_| Err(std::io::Error::other("the fsync thread failed"))),
                Err(sync) => sync(),
            })
            .collect()
    });
    for (s, r) in pending.iter_mut().zip(results) {
        r.map_err(|source| FsError::Write {
            path: s.path.clone(),
            source,
        })?;
        s.unsynced = None;
    }
    Ok(())
}

impl Staged {
    /// Replace the staged (not yet committed) content with `content`, fsynced: for a file whose
    /// final bytes are known only at the end (the report), staged with what was known first.
    pub(crate) fn rewrite(&mut self, content: &[u8]) -> Result<(), FsError> {
        let werr = |source| FsError::Write {
            path: self.path.clone(),
            source,
        };
        let mut f = OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&self.tmp)
            .map_err(werr)?;
        f.write_all(content)
            .and_then(|_| f.sync_all())
            .map_err(werr)?;
        self.unsynced = None;
        Ok(())
    }

    /// Rename the staged file over its target, fsynced first if [`sync_all`] did not, and fsync
    /// the directory (neither for a file staged volatile).
    pub(crate) fn commit(mut self) -> Result<(), FsError> {
        let werr = |source| FsError::Write {
            path: self.path.clone(),
            source,
        };
        if let Some(f) = self.unsynced.take() {
            f.sync_all().map_err(werr)?;
        }
        fs::rename(&self.tmp, &self.path).map_err(werr)?;
        self.committed = true;
        if !self.durable {
            return Ok(());
        }
        let dir = self.path.parent().unwrap_or(Path::new("/"));
        File::open(dir).and_then(|d| d.sync_all()).map_err(werr)
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// Remove a file (gone already is fine) and fsync its directory, so the removal survives a crash
/// as a committed write does.
pub(crate) fn remove(path: &Path) -> Result<(), FsError> {
    let werr = |source| FsError::Write {
        path: path.to_path_buf(),
        source,
    };
    match fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(werr(e)),
    }
    let dir = path.parent().unwrap_or(Path::new("/"));
    File::open(dir).and_then(|d| d.sync_all()).map_err(werr)
}

/// What a non-regular file is, for messages.
pub(crate) fn kind_of(t: &fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() || t.is_char_device() {
        "a device"
    } else {
        "a regular file"
    }
}

/// Where `path` is a symbolic link, its target (as stored in the link).
pub(crate) fn link_target(path: &Path) -> Option<PathBuf> {
    fs::symlink_metadata(path)
        .ok()
        .filter(|m| m.file_type().is_symlink())
        .and_then(|_| fs::read_link(path).ok())
}

/// File mode for the plan: the existing file's, else the default for a new one.
pub(crate) fn mode_of(path: &Path) -> Option<u32> {
    fs::metadata(path)
        .ok()
        .map(|m| m.permissions().mode() & 0o7777)
}

/// A file as found: its content (`None`: absent; `Err`: could not be read), mode, and where
/// the path is a symbolic link, the link's target (the content is then the target's).
#[derive(Debug, Clone, PartialEq)]
pub struct FileFact {
    pub content: Result<Option<String>, String>,
    pub mode: Option<u32>,
    pub link: Option<PathBuf>,
}

/// One file as found under `root`.
pub(crate) fn read_file(root: &Path, p: &Path) -> FileFact {
    let full = under(root, p);
    FileFact {
        content: read_optional(&full).map_err(|e| e.to_string()),
        mode: mode_of(&full),
        link: link_target(&full),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn under_keeps_paths_inside_root() {
        let r = Path::new("/tmp/r");
        assert_eq!(under(r, "/etc/x"), PathBuf::from("/tmp/r/etc/x"));
        assert_eq!(
            under(r, "/../../etc/passwd"),
            PathBuf::from("/tmp/r/etc/passwd")
        );
        assert_eq!(under(Path::new("/"), "/etc/x"), PathBuf::from("/etc/x"));
    }

    #[test]
    fn leftovers_of_a_killed_run_are_removed_and_never_collide() {
        // A killed run left its temp file; a rerun with the same PID (after a reboot, or in a
        // PID namespace) used to fail with `File exists` on the same name.
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.conf");
        let stale = d
            .path()
            .join(format!(".x.conf.eks-nodeinit.{}.tmp", std::process::id()));
        let stale2 = d.path().join(".x.conf.eks-nodeinit.1.0123456789abcdef.tmp");
        fs::write(&stale, "half").unwrap();
        fs::write(&stale2, "half").unwrap();
        fs::write(
            d.path().join(".other.eks-nodeinit.1.tmp"),
            "not ours to clean",
        )
        .unwrap();
        write_atomic(&p, b"new\n", 0o644).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "new\n");
        let mut names: Vec<_> = fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, [".other.eks-nodeinit.1.tmp", "x.conf"]);
    }

    #[test]
    fn files_staged_together_are_fsynced_together_and_shown_only_by_their_commit() {
        let d = tempfile::tempdir().unwrap();
        let paths: Vec<PathBuf> = (0..4).map(|i| d.path().join(format!("d{i}/f"))).collect();
        let mut staged: Vec<Staged> = paths
            .iter()
            .map(|p| stage(p, p.to_string_lossy().as_bytes(), 0o644).unwrap())
            .collect();
        assert!(staged.iter().all(|s| s.unsynced.is_some()));
        sync_all(staged.iter_mut()).unwrap();
        assert!(staged.iter().all(|s| s.unsynced.is_none()), "{staged:?}");
        assert!(
            paths.iter().all(|p| !p.exists()),
            "not shown before the commit"
        );
        for s in staged {
            s.commit().unwrap();
        }
        for p in &paths {
            assert_eq!(fs::read_to_string(p).unwrap(), p.to_string_lossy());
        }
    }

    #[test]
    fn a_kernel_value_stand_in_is_replaced_atomically_and_not_made_durable() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("proc/sys/vm/max_map_count");
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, "65530\n").unwrap();
        let s = stage_volatile(&p, b"262144\n", 0o644).unwrap();
        assert!(s.unsynced.is_none() && !s.durable);
        assert_eq!(fs::read_to_string(&p).unwrap(), "65530\n");
        s.commit().unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "262144\n");
        assert_eq!(fs::read_dir(p.parent().unwrap()).unwrap().count(), 1);
    }

    #[test]
    fn atomic_write_keeps_mode_and_leaves_no_temp() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a/b.conf");
        write_atomic(&p, b"one\n", 0o644).unwrap();
        assert_eq!(mode_of(&p), Some(0o644));
        fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
        write_atomic(&p, b"two\n", 0o644).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "two\n");
        assert_eq!(mode_of(&p), Some(0o600));
        let names: Vec<_> = fs::read_dir(p.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }
}
