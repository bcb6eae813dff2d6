//! The AL2 hand-off's per-boot marker, and how a later run in the same boot tells from it
//! whether bootstrap.sh really started.
//!
//! The marker is committed just before `execve`, so a kill between the two leaves a marker
//! for a hand-off that never happened. It therefore records what a rerun can verify: the
//! process that was to become bootstrap.sh (`execve` keeps the pid and its start time, field 22
//! of `/proc/<pid>/stat`) and the boot id. A rerun in the same boot reads the marker, then:
//!
//! * that process still exists (same pid, same start time): bootstrap.sh is running;
//! * else, when one of the files every AL2 bootstrap.sh rewrites on every run ([`EVIDENCE`]) is
//!   newer than the marker, bootstrap.sh ran after the marker was written: handed off;
//! * else bootstrap.sh never got as far as its first change: the run hands off again;
//! * a marker that cannot be read or parsed, or evidence that cannot be examined: the run
//!   cannot tell, says so as a finding and changes nothing (exit non-zero, never a silent 0).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::base::text::printable;
use crate::os::fsutil::under;

/// Written (per boot: /run is a tmpfs) just before bootstrap.sh is exec'd.
pub const MARKER: &str = "/run/eks-nodeinit/bootstrap-exec";

/// The boot id the kernel draws at boot.
pub(crate) const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

/// Files the AL2 bootstrap.sh (awslabs/amazon-eks-ami, templates/al2/runtime/bootstrap.sh)
/// rewrites on every run that gets past reading its options, the instance's metadata and
/// kubelet's version, whatever its flags: `cp -v` of configure-clocksource.service (releases
/// since it was added: the first file written), `echo "$B64_CLUSTER_CA" | base64 -d >` the
/// CA file, and `sed -i` (a new file) of the kubelet kubeconfig. The agent writes none of them.
pub const EVIDENCE: [&str; 3] = [
    "/etc/systemd/system/configure-clocksource.service",
    "/etc/kubernetes/pki/ca.crt",
    "/var/lib/kubelet/kubeconfig",
];

/// What the marker records.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Record {
    /// The agent's pid: bootstrap.sh's after `execve`.
    pub pid: u32,
    /// That process's start time, in clock ticks after boot (`/proc/<pid>/stat` field 22).
    pub start_time: u64,
    /// The boot id at the time (`None` where the root has none, as test roots).
    pub boot_id: Option<String>,
    pub at_unix_ms: u64,
}

impl Record {
    /// This process, about to exec bootstrap.sh.
    pub(crate) fn this_process(root: &Path, at_unix_ms: u64) -> Result<Record, MarkerError> {
        let stat = Path::new("/proc/self/stat");
        let text = std::fs::read_to_string(stat).map_err(|e| MarkerError::Read {
            path: stat.into(),
            source: e,
        })?;
        let start_time = start_time(&text).ok_or(MarkerError::Stat(stat.into()))?;
        Ok(Record {
            pid: std::process::id(),
            start_time,
            boot_id: boot_id(root)?,
            at_unix_ms,
        })
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec(self).unwrap_or_default();
        v.push(b'\n');
        v
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MarkerError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0} does not hold a process start time")]
    Stat(PathBuf),
}

/// Whether bootstrap.sh was handed the node in this boot, as far as the node shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandoffState {
    /// No marker: not handed off in this boot.
    None,
    /// A marker from another boot (a /run that is not a tmpfs): not handed off in this boot.
    OtherBoot { recorded: String },
    /// The marker's process still runs: bootstrap.sh is under way.
    Running { record: Record },
    /// bootstrap.sh changed `evidence` after the marker was written: handed off.
    Done { record: Record, evidence: PathBuf },
    /// The marker's process is gone and bootstrap.sh changed nothing after it: the exec never
    /// happened (or bootstrap.sh died before its first change): hand off again.
    NotStarted { record: Record },
    /// The run cannot tell; the message says why and what to do.
    Unknown(String),
}

/// Read the marker under `root` and decide.
pub(crate) fn read_state(root: &Path) -> HandoffState {
    let path = under(root, MARKER);
    let (text, written) = match read_marker(&path) {
        Ok(Some(x)) => x,
        Ok(None) => return HandoffState::None,
        Err(e) => return unknown(&path, &e),
    };
    let record: Record = match serde_json::from_str(text.trim()) {
        Ok(r) => r,
        Err(e) => {
            return unknown(
                &path,
                &format!(
                    "`{}` is not a hand-off record ({e})",
                    printable(text.trim())
                ),
            )
        }
    };
    let now_boot = match boot_id(root) {
        Ok(b) => b,
        Err(e) => return unknown(&path, &e.to_string()),
    };
    if record.boot_id != now_boot {
        return HandoffState::OtherBoot {
            recorded: record.boot_id.unwrap_or_else(|| "none".into()),
        };
    }
    if alive(root, &record) {
        return HandoffState::Running { record };
    }
    for e in EVIDENCE {
        let full = under(root, e);
        match std::fs::metadata(&full).and_then(|m| m.modified()) {
            Ok(t) if t >= written => {
                return HandoffState::Done {
                    record,
                    evidence: e.into(),
                }
            }
            Ok(_) => {}
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => {
                return unknown(&path, &format!("cannot examine {}: {err}", full.display()))
            }
        }
    }
    HandoffState::NotStarted { record }
}

fn unknown(path: &Path, why: &str) -> HandoffState {
    HandoffState::Unknown(format!(
        "{why}: the agent cannot tell whether bootstrap.sh was handed the node in this boot ({}); check the journal for bootstrap.sh's `[eks-bootstrap]` lines, then remove the marker to hand off again, or reboot",
        path.display()
    ))
}

/// The marker's text and modification time; `None` when absent.
fn read_marker(path: &Path) -> Result<Option<(String, SystemTime)>, String> {
    let text = match crate::os::fsutil::read_optional(path) {
        Ok(Some(t)) => t,
        Ok(None) => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let written = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .map_err(|e| format!("cannot read the time of {}: {e}", path.display()))?;
    Ok(Some((text, written)))
}

fn boot_id(root: &Path) -> Result<Option<String>, MarkerError> {
    let path = under(root, BOOT_ID);
    match std::fs::read_to_string(&path) {
        Ok(t) => Ok(Some(t.trim().to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(MarkerError::Read { path, source: e }),
    }
}

/// Whether the recorded process still exists: the same pid with the same start time.
fn alive(root: &Path, r: &Record) -> bool {
    let stat = under(root, format!("/proc/{}/stat", r.pid));
    std::fs::read_to_string(stat)
        .ok()
        .and_then(|t| start_time(&t))
        == Some(r.start_time)
}

/// Field 22 of a `/proc/<pid>/stat` line; the command name (field 2) may hold spaces and
/// parentheses, so fields are counted after its last `)`.
fn start_time(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // After the name: field 3 (state) is the first; field 22 is the 20th.
    rest.split_ascii_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn root_with(record: &Record) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let m = under(d.path(), MARKER);
        std::fs::create_dir_all(m.parent().unwrap()).unwrap();
        std::fs::write(&m, record.to_bytes()).unwrap();
        d
    }

    fn record(pid: u32) -> Record {
        Record {
            pid,
            start_time: 4242,
            boot_id: None,
            at_unix_ms: 1,
        }
    }

    fn write(root: &Path, rel: &str, text: &str) -> PathBuf {
        let p = under(root, rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    fn set_mtime(p: &Path, t: SystemTime) {
        std::fs::File::options()
            .write(true)
            .open(p)
            .unwrap()
            .set_modified(t)
            .unwrap();
    }

    #[test]
    fn start_time_is_field_22_after_a_name_with_spaces_and_parentheses() {
        let line = "77 (a) b) (c) S 1 77 77 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        assert_eq!(start_time(line), Some(98765));
        assert_eq!(start_time("1 (x"), None);
        assert_eq!(start_time("1 (x) S 1"), None);
    }

    #[test]
    fn this_process_reads_its_own_start_time() {
        let d = tempfile::tempdir().unwrap();
        let r = Record::this_process(d.path(), 5).unwrap();
        assert_eq!(r.pid, std::process::id());
        assert!(alive(Path::new("/"), &r));
        assert_eq!(r.boot_id, None);
    }

    #[test]
    fn no_marker_is_none() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(read_state(d.path()), HandoffState::None);
    }

    #[test]
    fn a_marker_without_evidence_after_it_is_not_started() {
        let d = root_with(&record(u32::MAX));
        // Written by a previous boot's bootstrap.sh: older than the marker.
        let old = write(d.path(), EVIDENCE[1], "ca");
        set_mtime(&old, SystemTime::now() - Duration::from_secs(3600));
        assert_eq!(
            read_state(d.path()),
            HandoffState::NotStarted {
                record: record(u32::MAX)
            }
        );
    }

    #[test]
    fn evidence_newer_than_the_marker_is_done() {
        for e in EVIDENCE {
            let d = root_with(&record(u32::MAX));
            let p = write(d.path(), e, "x");
            set_mtime(&p, SystemTime::now() + Duration::from_secs(1));
            assert_eq!(
                read_state(d.path()),
                HandoffState::Done {
                    record: record(u32::MAX),
                    evidence: e.into()
                },
                "{e}"
            );
        }
    }

    #[test]
    fn a_live_process_with_the_recorded_start_time_is_running() {
        let d = root_with(&record(7));
        write(
            d.path(),
            "/proc/7/stat",
            "7 (bash) S 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 4242 0",
        );
        assert!(matches!(read_state(d.path()), HandoffState::Running { .. }));
        // The pid reused by another process: not the marker's.
        write(
            d.path(),
            "/proc/7/stat",
            "7 (bash) S 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 9999 0",
        );
        assert!(matches!(
            read_state(d.path()),
            HandoffState::NotStarted { .. }
        ));
    }

    #[test]
    fn another_boots_marker_is_not_this_boots_hand_off() {
        let mut r = record(7);
        r.boot_id = Some("old-boot".into());
        let d = root_with(&r);
        write(d.path(), BOOT_ID, "new-boot\n");
        assert_eq!(
            read_state(d.path()),
            HandoffState::OtherBoot {
                recorded: "old-boot".into()
            }
        );
    }

    #[test]
    fn an_unparseable_marker_cannot_be_told_and_is_escaped() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), MARKER, "exec'd at unix ms 5\u{1b}[2J\n");
        match read_state(d.path()) {
            HandoffState::Unknown(m) => {
                assert!(m.contains("cannot tell"), "{m}");
                assert!(!m.contains('\u{1b}'), "{m}");
            }
            s => panic!("{s:?}"),
        }
    }
}
