//! The node's facts: every [`Read`] the registry asks, answered by one `match` ([`answer`]),
//! each distinct read once, every path under the root; and the node family, found before the
//! registry is asked (the aspects' reads depend on it).

use std::collections::{BTreeMap, VecDeque};
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::base::podcap::TypeFact;
use crate::config::HandoffMode;
use crate::discovery::ClusterFact;
use crate::facts::Reads;
use crate::facts::{read_file, Answer, ExecLimits, Facts, Family, FamilyError, FamilyFact};
use crate::facts::{InstanceTags, Read, Space};
use crate::instance::metadata::Metadata;
use crate::instance::userdata::UserDataFact;
use crate::os::fsutil::under;
use crate::os::{marker, procsys};
use crate::spec::Spec;

/// How long a program asked for its output ([`Read::Output`]) may run: a query such as
/// `kubelet --version`, not work.
pub const OUTPUT_TIMEOUT: Duration = Duration::from_secs(5);

/// The most of a program's standard output kept; the rest is read and dropped.
const OUTPUT_MAX: u64 = 64 * 1024;

/// The node under `root` as the registry asks it read: every fact but the instance's.
pub(super) struct NodeRead {
    pub root: PathBuf,
    pub family: Result<FamilyFact, FamilyError>,
    pub answers: BTreeMap<Read, Answer>,
}

impl NodeRead {
    /// Read what every aspect and kubelet contributor asks for from the node under `root`.
    pub fn of(root: &Path, spec: &Spec) -> NodeRead {
        let family = detect_family(root, spec);
        let fam = family.as_ref().ok().map(|f| f.family);
        let mut reads = Reads::default();
        crate::plan::reads(spec, fam, &mut reads);
        NodeRead {
            root: root.to_path_buf(),
            family,
            answers: answer_all(root, reads.into_vec()),
        }
    }

    /// The facts: the node's, with the instance's (`None`: checking a config alone).
    pub fn facts(
        self,
        instance: Option<Metadata>,
        tags: InstanceTags,
        cluster: ClusterFact,
        type_info: Option<TypeFact>,
    ) -> Facts {
        let mut facts = Facts {
            root: self.root,
            answers: self.answers,
            exec_limits: exec_limits(),
            // The user data parsed once, here, as nodeadm reads it.
            user_data: instance
                .as_ref()
                .map_or(UserDataFact::Unknown, |m| m.user_data.fact()),
            cluster,
            type_info,
            family: self.family,
            instance,
            tags,
            reach: None,
            dropins: Vec::new(),
            node_configs: None,
        };
        facts.merge_node_configs();
        facts
    }
}

/// Every read answered once, in the order asked; a directory's listed files are read after it.
pub(super) fn answer_all(root: &Path, asked: Vec<Read>) -> BTreeMap<Read, Answer> {
    let mut answers = BTreeMap::new();
    let mut queue = VecDeque::from(asked);
    while let Some(read) = queue.pop_front() {
        if answers.contains_key(&read) {
            continue;
        }
        let answer = answer(root, &read);
        if let (Read::Dir { path, .. }, Answer::Dir(names)) = (&read, &answer) {
            queue.extend(names.iter().map(|n| Read::File(path.join(n))));
        }
        answers.insert(read, answer);
    }
    answers
}

/// What the node under `root` answers to one read: the one place a kind of fact is read.
fn answer(root: &Path, read: &Read) -> Answer {
    match read {
        Read::File(p) => Answer::File(read_file(root, p)),
        Read::Dir { path, suffix } => Answer::Dir(names(&under(root, path), suffix, true)),
        Read::Names(path) => Answer::Dir(names(&under(root, path), "", false)),
        Read::TarMember { path, member } => Answer::File(tar_member(root, path, member)),
        Read::Sysctl(key) => {
            Answer::Sysctl(procsys::read_live(root, key).map_err(|e| e.to_string()))
        }
        Read::Exists(p) => Answer::Exists(under(root, p).exists()),
        Read::Executable(p) => Answer::Executable(is_executable(&under(root, p))),
        Read::Space(p) => Answer::Space(space(&under(root, p))),
        Read::Output { argv } => Answer::Output(output(root, argv, OUTPUT_TIMEOUT)),
        Read::HandoffMarker => Answer::HandoffMarker(marker::read_state(root)),
    }
}

/// What `execve` accepts here, and what this process's environment takes of it.
fn exec_limits() -> ExecLimits {
    use nix::unistd::{sysconf, SysconfVar};
    let var = |v| {
        sysconf(v)
            .ok()
            .flatten()
            .and_then(|n| usize::try_from(n).ok())
    };
    let ptr = std::mem::size_of::<usize>();
    let env_bytes = std::env::vars_os().fold(0usize, |n, (k, v)| {
        // `KEY=VALUE`, its NUL and its pointer.
        n.saturating_add(k.len() + v.len() + 2 + ptr)
    });
    ExecLimits {
        arg_max: var(SysconfVar::ARG_MAX),
        max_arg_strlen: var(SysconfVar::PAGE_SIZE).and_then(|p| p.checked_mul(32)),
        env_bytes,
    }
}

fn is_executable(p: &Path) -> bool {
    p.is_file() && nix::unistd::access(p, nix::unistd::AccessFlags::X_OK).is_ok()
}

/// The names in `dir` ending in `suffix`, sorted (none when it cannot be listed); with
/// `files`, no directory among them (as systemd and nodeadm pass over a directory there).
fn names(dir: &Path, suffix: &str, files: bool) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| !files || !e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(suffix))
        .collect();
    names.sort();
    names
}

/// The largest archive a [`Read::TarMember`] opens (an image archive of the pause image is
/// well under 1 MiB).
const TAR_MAX: u64 = 64 << 20;

/// The text of `member` in the tar archive at `p` under `root`.
fn tar_member(root: &Path, p: &Path, member: &str) -> crate::os::fsutil::FileFact {
    use std::io::Read as _;
    let full = under(root, p);
    let content = match std::fs::File::open(&full) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", full.display())),
        Ok(f) => {
            let mut bytes = Vec::new();
            match f.take(TAR_MAX).read_to_end(&mut bytes) {
                Err(e) => Err(format!("{}: {e}", full.display())),
                Ok(_) => crate::plan::aspects::containerd::config::tar_member(&bytes, member)
                    .map(|b| {
                        String::from_utf8(b)
                            .map_err(|_| format!("{}: {member} is not UTF-8", full.display()))
                    })
                    .transpose(),
            }
        }
    };
    crate::os::fsutil::FileFact {
        content,
        mode: None,
        link: None,
    }
}

/// The size of the file at `full` and the room on the filesystem of its nearest existing
/// directory.
fn space(full: &Path) -> Space {
    let size = std::fs::symlink_metadata(full).ok().map(|m| m.len());
    let dir = full.ancestors().skip(1).find(|d| d.is_dir());
    let free = match dir {
        Some(d) => nix::sys::statvfs::statvfs(d)
            .map(|s| free_bytes(s.blocks_available(), s.fragment_size()))
            .map_err(|e| format!("statvfs {}: {e}", d.display())),
        None => Err(format!("no directory above {}", full.display())),
    };
    Space { size, free }
}

/// Blocks times their size, whatever width the target's `fsblkcnt_t` and `c_ulong` have.
#[allow(clippy::useless_conversion)]
fn free_bytes(blocks: nix::libc::fsblkcnt_t, size: nix::libc::c_ulong) -> u64 {
    u64::from(blocks).saturating_mul(u64::from(size))
}

/// The standard output of the node's program `argv[0]` (under `root`), run with `argv`, no
/// shell, stdin empty, stderr dropped, in a process group of its own so that a timeout ends it
/// and anything it started. Its failure (cannot start, killed at `timeout`, a failed exit) is
/// the answer.
fn output(root: &Path, argv: &[String], timeout: Duration) -> Result<String, String> {
    let Some((program, args)) = argv.split_first() else {
        return Err("no program named".into());
    };
    let full = under(root, program);
    let shown = crate::base::text::printable(&full.display().to_string());
    let mut child = {
        use std::os::unix::process::CommandExt;
        Command::new(&full)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot run {shown}: {e}"))?
    };
    let group = i32::try_from(child.id()).map_err(|e| format!("{shown}: {e}"))?;
    let stdout = child.stdout.take();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut out) = stdout {
            let _ = (&mut out).take(OUTPUT_MAX).read_to_end(&mut buf);
            let _ = std::io::copy(&mut out, &mut std::io::sink());
        }
        let _ = tx.send((child.wait(), buf));
    });
    let done = match rx.recv_timeout(timeout) {
        Ok(done) => done,
        Err(_) => {
            use nix::sys::signal::{killpg, Signal};
            let _ = killpg(nix::unistd::Pid::from_raw(group), Signal::SIGKILL);
            // Its output closes when the group is gone; a process that left it may hold it.
            let _ = rx.recv_timeout(Duration::from_secs(1));
            return Err(format!(
                "{shown} did not finish within {} s",
                timeout.as_secs_f32()
            ));
        }
    };
    match done {
        (Ok(status), buf) if status.success() => Ok(String::from_utf8_lossy(&buf).into_owned()),
        (Ok(status), _) => Err(format!("{shown} failed: {status}")),
        (Err(e), _) => Err(format!("waiting for {shown}: {e}")),
    }
}

/// The AL2023 bootstrap.sh is a stub that points at nodeadm.
fn is_al2023_stub(text: &str) -> bool {
    text.contains("nodeadm")
}

/// Pick the family, saying why; a failure says what to set.
fn detect_family(root: &Path, spec: &Spec) -> Result<FamilyFact, FamilyError> {
    let nodeadm_path = &spec.nodeconfig.nodeadm_path;
    let bootstrap_path = &spec.bootstrap.path;
    let (nodeadm, bootstrap) = (under(root, nodeadm_path), under(root, bootstrap_path));
    let fact = |family, reason: String| Ok(FamilyFact { family, reason });
    match spec.mode {
        HandoffMode::Al2 if !bootstrap.is_file() => Err(FamilyError::NoBootstrap { bootstrap }),
        HandoffMode::Al2 => fact(Family::Al2, "handoff.mode is \"al2\"".into()),
        HandoffMode::Al2023 => fact(Family::Al2023, "handoff.mode is \"al2023\"".into()),
        HandoffMode::Auto if nodeadm.is_file() => fact(
            Family::Al2023,
            format!("auto: found nodeadm at {}", nodeadm_path.display()),
        ),
        HandoffMode::Auto => match std::fs::read_to_string(&bootstrap) {
            Ok(t) if is_al2023_stub(&t) => Err(FamilyError::Al2023Stub { bootstrap, nodeadm }),
            Ok(_) => fact(
                Family::Al2,
                format!(
                    "auto: no nodeadm; found bootstrap.sh at {}",
                    bootstrap_path.display()
                ),
            ),
            Err(e) => Err(FamilyError::Unknown {
                root: root.to_path_buf(),
                nodeadm,
                bootstrap,
                cause: e.to_string(),
            }),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::marker::HandoffState;
    use std::os::unix::fs::PermissionsExt;

    /// `text` at the node path `p` under `root`, with `mode`.
    fn put(root: &Path, p: &str, text: &str, mode: u32) {
        let full = under(root, p);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(&full, text).unwrap();
        std::fs::set_permissions(&full, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn each_kind_of_read_is_answered_under_the_root_by_one_match() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        put(root, "/etc/a", "text", 0o640);
        put(root, "/etc/d/x.conf", "x", 0o644);
        put(root, "/etc/d/y.txt", "y", 0o644);
        put(root, "/proc/sys/kernel/osrelease", "6.1.0\n", 0o444);
        put(root, "/bin/tool", "#!/bin/sh\necho \"v1.30.2 $1\"\n", 0o755);
        let tool = argv(&["/bin/tool", "--version"]);
        let asked = vec![
            Read::File("/etc/a".into()),
            Read::conf_dir("/etc/d"),
            Read::Sysctl("kernel.osrelease".into()),
            Read::Exists("/etc/a".into()),
            Read::Exists("/etc/none".into()),
            Read::Executable("/bin/tool".into()),
            Read::Executable("/etc/a".into()),
            Read::Space("/etc/a".into()),
            Read::Output { argv: tool.clone() },
            Read::HandoffMarker,
        ];
        let answers = answer_all(root, asked);
        let facts = NodeRead {
            root: root.into(),
            family: Ok(FamilyFact {
                family: Family::Al2023,
                reason: "given".into(),
            }),
            answers,
        }
        .facts(None, InstanceTags::Unknown, test_cluster(), None);
        let a = facts.file("/etc/a").unwrap();
        assert_eq!(
            (a.content.clone(), a.mode),
            (Ok(Some("text".into())), Some(0o640))
        );
        assert_eq!(facts.dir("/etc/d", ".conf"), ["x.conf"]);
        assert_eq!(
            facts.text("/etc/d/x.conf").as_deref(),
            Some("x"),
            "listed, so read"
        );
        assert!(facts.file("/etc/d/y.txt").is_none(), "not listed");
        assert_eq!(facts.sysctl("kernel.osrelease"), Some(&Ok("6.1.0".into())));
        assert!(facts.exists(Path::new("/etc/a")) && !facts.exists(Path::new("/etc/none")));
        assert!(facts.executable(Path::new("/bin/tool")));
        assert!(!facts.executable(Path::new("/etc/a")));
        assert_eq!(facts.space(Path::new("/etc/a")).unwrap().size, Some(4));
        assert_eq!(facts.output(&tool), Some(&Ok("v1.30.2 --version\n".into())));
        assert_eq!(facts.handoff(), &HandoffState::None);
        assert_eq!(facts.answers.len(), 11, "the ten asked and the listed file");
    }

    fn test_cluster() -> ClusterFact {
        crate::facts::Facts::builder(Family::Al2023).build().cluster
    }

    #[test]
    fn a_read_asked_twice_is_read_once() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let counter = root.join("runs");
        let script = format!(
            "#!/bin/sh\necho run >> '{}'\necho 1.31\n",
            counter.display()
        );
        put(root, "/usr/bin/kubelet", &script, 0o755);
        let version = Read::Output {
            argv: argv(&["/usr/bin/kubelet", "--version"]),
        };
        let file = Read::File("/runs".into());
        let asked = vec![version.clone(), file.clone(), version.clone(), file];
        let answers = answer_all(root, asked);
        assert_eq!(answers.len(), 2);
        assert_eq!(answers[&version], Answer::Output(Ok("1.31\n".into())));
        assert_eq!(std::fs::read_to_string(&counter).unwrap(), "run\n");
    }

    #[test]
    fn a_programs_failure_is_its_answer() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        put(
            root,
            "/bin/fails",
            "#!/bin/sh\necho partial\nexit 3\n",
            0o755,
        );
        put(
            root,
            "/bin/hangs",
            "#!/bin/sh\nsleep 30 &\nsleep 30\n",
            0o755,
        );
        let run = |words: &[&str]| output(root, &argv(words), Duration::from_millis(300));
        let failed = run(&["/bin/fails"]).unwrap_err();
        assert!(
            failed.ends_with("/bin/fails failed: exit status: 3"),
            "{failed}"
        );
        let missing = run(&["/bin/none"]).unwrap_err();
        assert!(missing.starts_with("cannot run "), "{missing}");
        assert_eq!(run(&[]).unwrap_err(), "no program named");
        let started = std::time::Instant::now();
        let hung = run(&["/bin/hangs"]).unwrap_err();
        assert!(
            hung.ends_with("/bin/hangs did not finish within 0.3 s"),
            "{hung}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "its group was killed"
        );
    }

    #[test]
    fn a_program_is_named_by_its_node_path_under_the_root() {
        let dir = tempfile::tempdir().unwrap();
        put(dir.path(), "/bin/sh", "#!/bin/false\n", 0o644);
        // The root's /bin/sh (not executable) is run, not the machine's.
        let e = output(
            dir.path(),
            &argv(&["/bin/sh", "-c", "echo hi"]),
            OUTPUT_TIMEOUT,
        );
        let want = format!("cannot run {}/bin/sh", dir.path().display());
        assert!(e.unwrap_err().starts_with(&want));
    }

    /// logind's drop-ins as the node reads them, through the setting's reading of them.
    #[test]
    fn later_dropin_wins_and_etc_masks_usr() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        std::fs::create_dir_all(r.join("etc/systemd/logind.conf.d")).unwrap();
        std::fs::create_dir_all(r.join("usr/lib/systemd/logind.conf.d")).unwrap();
        std::fs::write(
            r.join("etc/systemd/logind.conf"),
            "[Login]\nInhibitDelayMaxSec=5\n",
        )
        .unwrap();
        std::fs::write(
            r.join("etc/systemd/logind.conf.d/99-kubelet.conf"),
            "[Login]\nInhibitDelayMaxSec=30\n",
        )
        .unwrap();
        std::fs::write(
            r.join("usr/lib/systemd/logind.conf.d/zzz.conf"),
            "[Login]\nInhibitDelayMaxSec=1\n",
        )
        .unwrap();
        std::fs::write(
            r.join("etc/systemd/logind.conf.d/zzz.conf"),
            "[Login]\nKillUserProcesses=no\n",
        )
        .unwrap();
        let mut spec = crate::spec::resolve(
            &crate::config::parse(
                r#"{"cluster":{"name":"c"},"nodeGroup":{},"logind":{"inhibitDelayMaxSec":90}}"#,
                "t",
            )
            .unwrap(),
        )
        .0;
        spec.mode = crate::config::HandoffMode::Al2023;
        let facts = super::super::node(r, &spec, None, Default::default());
        let s = crate::plan::aspects::logind::effective_settings(
            &facts,
            &crate::plan::aspects::logind::dropin_content(90),
        );
        let secs: Vec<f64> = s.iter().map(|x| x.seconds).collect();
        // main 5, 99-kubelet 30, ours 90; /usr/lib/zzz.conf masked by /etc/zzz.conf (no setting)
        assert_eq!(secs, vec![5.0, 30.0, 90.0]);
    }
}
