//! Exactly one run at a time: an exclusive `flock` on `/run/lock/eks-nodeinit.lock` under the root.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use crate::os::fsutil::under;

pub(crate) const LOCK_PATH: &str = "/run/lock/eks-nodeinit.lock";

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("another eks-nodeinit run holds {0}; wait for it to finish")]
    Locked(PathBuf),
    #[error("cannot take the lock {path}: {source}; it must be a regular file this run can create and write (remove whatever is there)")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The run lock; released when dropped (and on exec: the fd is close-on-exec).
pub struct RunLock {
    _lock: nix::fcntl::Flock<std::fs::File>,
}

impl RunLock {
    /// Let the lock outlive an `execv`: the hand-off's bootstrap.sh inherits the descriptor and
    /// holds the lock until it exits, so no second run can start while it runs.
    pub(crate) fn keep_across_exec(&self) -> std::io::Result<()> {
        use nix::fcntl::{fcntl, FcntlArg, FdFlag};
        fcntl(&*self._lock, FcntlArg::F_SETFD(FdFlag::empty()))
            .map(|_| ())
            .map_err(std::io::Error::from)
    }
}

/// Take the run lock: refuse at once when another run holds it, or, with `wait`, block until
/// it is released (the background tagging continuation waits for the foreground run).
pub fn take(root: &Path, wait: bool) -> Result<RunLock, LockError> {
    let path = under(root, LOCK_PATH);
    let err = |source| LockError::Io {
        path: path.clone(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    use std::os::unix::fs::OpenOptionsExt;
    let f = OpenOptions::new()
        // A link there is refused (ELOOP), never followed.
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(err)?;
    let how = if wait {
        nix::fcntl::FlockArg::LockExclusive
    } else {
        nix::fcntl::FlockArg::LockExclusiveNonblock
    };
    match nix::fcntl::Flock::lock(f, how) {
        Ok(l) => Ok(RunLock { _lock: l }),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Err(LockError::Locked(path)),
        Err((_, e)) => Err(err(std::io::Error::from(e))),
    }
}
