//! Crash injection: `init` killed with SIGKILL before each system call of its run and at random
//! moments, on the AL2 sample root (a bootstrap.sh stand-in that counts its calls and records
//! its argv) and the AL2023 one.
//!
//! How: one clean run under `strace` counts, per system call name, how often the agent's main
//! thread (it does all the work: no thread is followed) makes it before the hand-off (AL2: up to
//! and including the `execve` of bootstrap.sh; AL2023: up to `exit_group`). Then, for every name
//! and every N up to that count, a run on a fresh copy of the root under
//! `strace -e inject=NAME:signal=KILL:when=N` dies on entering its Nth NAME call (which never
//! happens). At random moments: a kill after a random delay (AL2: under strace holding the
//! hand-off's `execve`, so that the kill always lands in the agent, never in bootstrap.sh).
//!
//! After each kill:
//! * every file under the root is byte for byte its old content (the fresh copy) or its new one
//!   (a clean run's), the agent's temp files aside; bootstrap.sh has not run;
//! * a rerun without injection exits 0 and leaves the node as the clean run did: every file equal
//!   (times masked; the report, which records the last run, lists a subsequence of the clean
//!   run's steps), the recording bootstrap.sh's argv equal, no `*.eks-nodeinit.*.tmp` anywhere;
//! * exactly one hand-off per boot: bootstrap.sh runs once in all, also when the kill came
//!   after the marker was written (between it and the `execve`): the rerun sees that the
//!   marker's process is gone and bootstrap.sh changed nothing after it, and hands off; a third
//!   run in that boot does not;
//! * a further `--dry-run --output json` plans no change step and no second hand-off.
//!
//! Without strace the tests skip with a note, and fail when `CI` is set. `CRASH_SEED` repeats a
//! run's random moments; `CRASH_MOMENTS` sets how many (default 100 per family).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::faults::*;
use common::*;
use rand::{Rng, SeedableRng};

/// System calls that write or decide what is written: the class reported separately.
const WRITE_CLASS: &[&str] = &[
    "openat",
    "open",
    "creat",
    "write",
    "pwrite64",
    "writev",
    "fsync",
    "fdatasync",
    "rename",
    "renameat",
    "renameat2",
    "unlink",
    "unlinkat",
    "mkdir",
    "mkdirat",
    "fchmod",
    "fchmodat",
    "fchown",
    "fchownat",
    "ftruncate",
    "flock",
    "fcntl",
    "close",
    "execve",
];

fn strace_usable() -> bool {
    if std::env::var_os("EKS_NODEINIT_RUNNER").is_some_and(|r| !r.is_empty()) {
        eprintln!("SKIP: crash injection counts the agent's own system calls, not an emulator's");
        return false;
    }
    let ok = Command::new("strace")
        .args(["-o", "/dev/null", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "strace is required in CI (.ci/deps installs it)"
        );
        eprintln!("SKIP: strace is missing or cannot trace here (`bash .ci/deps` installs it)");
    }
    ok
}

/// One sample root and what a clean run does to it.
struct Family {
    name: &'static str,
    al2: bool,
    dir: tempfile::TempDir,
    template: PathBuf,
    cfg: PathBuf,
    /// The fresh copy's files, and the clean run's (masked).
    before: State,
    after: State,
    /// System call name → how many times the agent makes it before the hand-off.
    syscalls: BTreeMap<String, u32>,
    /// A clean run's wall time up to the hand-off, under the launcher of the random kills.
    run_time: Duration,
}

#[derive(Default)]
struct Stats {
    syscall_kills: usize,
    per_syscall: BTreeMap<String, usize>,
    write_class: usize,
    other_class: usize,
    not_landed: usize,
    moment_kills: usize,
    moment_landed: usize,
    temps_after_kill: usize,
    marker_after_kill: usize,
    /// AL2 boots checked (one per kill), and those that ended with no hand-off.
    boots: usize,
    boots_without_handoff: usize,
    report_exact: usize,
    report_remaining: usize,
    converged: usize,
    failures: Vec<String>,
}

const CALLS: &str = "etc/eks/calls.log";

impl Family {
    fn new(name: &'static str, sample: &str, al2: bool) -> Family {
        let dir = tempfile::tempdir().unwrap();
        let template = dir.path().join("template");
        copy_tree(&example(sample), &template);
        if al2 {
            counting_bootstrap(&template, "");
        }
        let cfg = config_with(dir.path(), "c.json", |v| {
            v["tagging"] = serde_json::json!({"enabled": false})
        });
        let mut f = Family {
            name,
            al2,
            before: masked_state(&template),
            template,
            cfg,
            dir,
            after: State::new(),
            syscalls: BTreeMap::new(),
            run_time: Duration::ZERO,
        };
        // The clean run: the new content of every file.
        let clean = f.fresh();
        let out = f.agent(clean.path(), &[]).output().unwrap();
        assert!(out.status.success(), "clean run: {}", stderr(&out));
        assert!(temp_leftovers(clean.path()).is_empty());
        f.after = masked_state(clean.path());
        if al2 {
            assert_eq!(f.after[Path::new(CALLS)], b"call\n");
            assert!(f.after.contains_key(Path::new(MARKER)));
        }
        assert_ne!(f.before, f.after, "the clean run changes the node");
        // Count the system calls of one run.
        let traced = f.fresh();
        let trace = f.dir.path().join("trace.txt");
        let mut o = vec![OsString::from("-o"), trace.clone().into()];
        o.push("--".into());
        let st = f.strace(traced.path(), &o).status().unwrap();
        assert!(st.success(), "traced run: {st:?}");
        f.syscalls = count_syscalls(&std::fs::read_to_string(&trace).unwrap(), al2);
        assert!(f.syscalls.values().sum::<u32>() > 50, "{:?}", f.syscalls);
        // How long a run takes to its hand-off under the random kills' launcher.
        let timed = f.fresh();
        let t = Instant::now();
        let _ = f.moment_launcher(timed.path(), true).status().unwrap();
        f.run_time = t.elapsed();
        f
    }

    fn fresh(&self) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        copy_tree(&self.template, d.path());
        d
    }

    fn agent_args(&self, root: &Path, extra: &[&str]) -> Vec<OsString> {
        let mut a: Vec<OsString> = vec!["init".into()];
        a.extend(extra.iter().map(OsString::from));
        a.extend([
            "--metadata".into(),
            example("metadata.json").into(),
            "--config".into(),
            self.cfg.clone().into(),
            "--root".into(),
            root.into(),
        ]);
        a
    }

    fn agent(&self, root: &Path, extra: &[&str]) -> Command {
        let mut c = cmd();
        c.args(self.agent_args(root, extra))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    /// `strace OPTIONS… init …` (the options end with `--`).
    fn strace(&self, root: &Path, options: &[OsString]) -> Command {
        let mut c = with_clean_env(Command::new("strace"));
        c.args(options)
            .args(agent_argv(&bin()))
            .args(self.agent_args(root, &[]))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    }

    /// The random kills' launcher: on AL2 strace holds the hand-off's `execve` (a minute, or
    /// kills it at once when `measure`), so that a kill lands in the agent, never in bootstrap.sh.
    fn moment_launcher(&self, root: &Path, measure: bool) -> Command {
        if !self.al2 {
            let mut c = self.agent(root, &[]);
            c.stdout(Stdio::null()).stderr(Stdio::null());
            return c;
        }
        let hold = if measure {
            "inject=execve:signal=KILL:when=1"
        } else {
            "inject=execve:delay_enter=10s:when=1"
        };
        let o: Vec<OsString> = ["-o", "/dev/null", "-e", "trace=execve", "-e", hold, "--"]
            .iter()
            .map(OsString::from)
            .collect();
        self.strace(root, &o)
    }

    /// Kill the agent on entering its `n`th `name` call; then check.
    fn syscall_kill(&self, name: &str, n: u32, st: &mut Stats) {
        let root = self.fresh();
        let o: Vec<OsString> = [
            "-o".to_string(),
            "/dev/null".into(),
            "-e".into(),
            format!("trace={name}"),
            "-e".into(),
            format!("inject={name}:signal=KILL:when={n}"),
            "--".into(),
        ]
        .iter()
        .map(OsString::from)
        .collect();
        let status = self.strace(root.path(), &o).status().unwrap();
        st.syscall_kills += 1;
        *st.per_syscall.entry(name.to_string()).or_default() += 1;
        if WRITE_CLASS.contains(&name) {
            st.write_class += 1;
        } else {
            st.other_class += 1;
        }
        let landed = status.signal() == Some(9);
        if !landed {
            st.not_landed += 1;
        }
        let what = format!("{} killed at {name} #{n}", self.name);
        if !landed && !status.success() {
            st.failures.push(format!(
                "{what}: the run neither died nor succeeded: {status:?}"
            ));
            return;
        }
        if landed {
            // strace reports the death of the thread it traces, the group's leader; the other
            // threads may still hold the run lock for a moment (longer on a loaded machine),
            // and the rerun would find it taken.
            wait_agents_gone(root.path());
            self.check(root.path(), &what, st);
        } else {
            // The run made fewer `name` calls than the counted one (futex and the like vary
            // with thread timing) and finished: it must have left what a clean run leaves.
            match compare_states(&self.after, &masked_state(root.path()), &[]) {
                Ok(_) => st.converged += 1,
                Err(e) => st
                    .failures
                    .push(format!("{what} (the kill did not land): {e}")),
            }
        }
    }

    /// Kill the agent `delay` after its start; then check.
    fn moment_kill(&self, delay: Duration, st: &mut Stats) {
        let root = self.fresh();
        let start = Instant::now();
        let mut child = self.moment_launcher(root.path(), false).spawn().unwrap();
        let pid = if self.al2 {
            tracee_of(child.id())
        } else {
            child.id()
        };
        if let Some(rest) = delay.checked_sub(start.elapsed()) {
            std::thread::sleep(rest);
        }
        kill9(pid);
        st.moment_kills += 1;
        if self.al2 {
            // A tracee held in a ptrace stop dies when its tracer lets go: kill strace too (the
            // held `execve` is not made: a fatal signal is pending when the stop ends).
            kill9(child.id());
            let _ = child.wait();
            wait_dead(pid);
            if !root.path().join(MARKER).exists() {
                st.moment_landed += 1;
            }
        } else if child.wait().unwrap().signal() == Some(9) {
            st.moment_landed += 1;
        }
        let what = format!(
            "{} killed {} µs after its start",
            self.name,
            delay.as_micros()
        );
        self.check(root.path(), &what, st);
    }

    /// Everything that must hold after a kill, and after the rerun.
    fn check(&self, root: &Path, what: &str, st: &mut Stats) {
        match self.check_inner(root, st) {
            Ok(()) => st.converged += 1,
            Err(e) => st.failures.push(format!("{what}: {e}")),
        }
    }

    fn check_inner(&self, root: &Path, st: &mut Stats) -> Result<(), String> {
        // Right after the kill: every file old or new, bootstrap.sh not run.
        if !temp_leftovers(root).is_empty() {
            st.temps_after_kill += 1;
        }
        let killed = masked_state(root);
        let paths: BTreeSet<&PathBuf> = self
            .before
            .keys()
            .chain(self.after.keys())
            .chain(killed.keys())
            .collect();
        for p in paths {
            let (k, b, a) = (killed.get(p), self.before.get(p), self.after.get(p));
            if k != b && k != a {
                return Err(format!(
                    "after the kill {} is {}: neither its old content ({}) nor its new ({})",
                    p.display(),
                    shown(k),
                    shown(b),
                    shown(a)
                ));
            }
        }
        if root.join(CALLS).exists() {
            return Err("bootstrap.sh ran although the agent was killed before handing off".into());
        }
        let marker = root.join(MARKER).exists();
        // The rerun, in the same boot.
        self.rerun(root)?;
        if self.al2 {
            st.boots += 1;
            if marker {
                // The marker was committed but the kill came before (or at) the execve.
                st.marker_after_kill += 1;
            }
            let ran = calls(root);
            if ran == 0 {
                st.boots_without_handoff += 1;
            }
            if ran != 1 {
                return Err(format!(
                    "the boot got {ran} hand-offs from the killed run and its rerun; exactly one was expected{}",
                    if marker { " (the kill came after the hand-off marker was written)" } else { "" }
                ));
            }
            // A further run in the same boot finds bootstrap.sh's own change after the marker:
            // the dry run below plans no second hand-off.
        }
        match compare_states(&self.after, &masked_state(root), &[])? {
            Some(ReportMatch::Exact) => st.report_exact += 1,
            Some(ReportMatch::Remaining) => st.report_remaining += 1,
            None => return Err("no report after the rerun".into()),
        }
        // Nothing left to do.
        let out = self
            .agent(root, &["--dry-run", "--output", "json"])
            .output()
            .unwrap();
        if !out.status.success() {
            return Err(format!(
                "the dry run after the rerun failed: {}",
                stderr(&out)
            ));
        }
        let (changes, kinds) = planned_changes(&stdout(&out))?;
        if !changes.is_empty() {
            return Err(format!("the converged node still plans {changes:?}"));
        }
        if kinds.iter().any(|k| k == "handoff:exec") {
            return Err("the converged node plans a second hand-off in the same boot".into());
        }
        Ok(())
    }

    fn rerun(&self, root: &Path) -> Result<(), String> {
        let out = self.agent(root, &[]).output().unwrap();
        if !out.status.success() {
            return Err(format!(
                "the rerun failed ({:?}): {}",
                out.status.code(),
                stderr(&out)
            ));
        }
        let left = temp_leftovers(root);
        if !left.is_empty() {
            return Err(format!("temp files left after the rerun: {left:?}"));
        }
        Ok(())
    }
}

/// How many times bootstrap.sh ran under `root`.
fn calls(root: &Path) -> usize {
    std::fs::read_to_string(root.join(CALLS))
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

fn kill9(pid: u32) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
}

/// Wait until `pid` (no longer our child) has died: gone, or a zombie with no thread left (a
/// thread-group leader shows `Z` while its other threads still hold the files, the lock too).
fn wait_dead(pid: u32) {
    let t = Instant::now();
    loop {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .next();
        if tasks.count() <= 1 && matches!(state, Some("Z" | "X") | None) {
            return;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "{pid} does not die");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Wait until no process runs the agent on `root` (its argv names the root): every one killed
/// has died, all its threads too ([`wait_dead`]).
fn wait_agents_gone(root: &Path) {
    let needle = root.as_os_str().as_encoded_bytes();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return;
    };
    for e in procs.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        // A leader that has exited shows no command line; its remaining threads still do.
        let tasks = std::fs::read_dir(e.path().join("task"))
            .into_iter()
            .flatten();
        let runs_here = tasks.flatten().any(|t| {
            let cmdline = std::fs::read(t.path().join("cmdline")).unwrap_or_default();
            cmdline.split(|b| *b == 0).any(|a| a == needle)
        });
        if runs_here {
            wait_dead(pid);
        }
    }
}

/// The agent traced by a running `strace`: its child whose executable is the agent (strace also
/// forks short-lived children of its own at start-up, to probe ptrace).
fn tracee_of(strace: u32) -> u32 {
    let t = Instant::now();
    let agent = std::fs::canonicalize(bin()).unwrap();
    loop {
        let children =
            std::fs::read_to_string(format!("/proc/{strace}/task/{strace}/children")).unwrap();
        for pid in children.split_whitespace() {
            if std::fs::read_link(format!("/proc/{pid}/exe")).ok().as_ref() == Some(&agent) {
                return pid.parse().unwrap();
            }
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "strace started no agent"
        );
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// Per system call name, how many calls a strace log (one process, no `-f`) shows before the
/// hand-off: strace's own `execve` of the agent is not counted (nor injected into); on AL2 the
/// count stops at the `execve` of bootstrap.sh, included.
fn count_syscalls(trace: &str, al2: bool) -> BTreeMap<String, u32> {
    let mut counts: BTreeMap<String, u32> = BTreeMap::new();
    let mut execs = 0;
    for line in trace.lines() {
        let name = line.split('(').next().unwrap_or("");
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue; // `+++ exited`, `--- SIG…`
        }
        if name == "execve" {
            execs += 1;
            if execs == 1 {
                continue;
            }
        }
        *counts.entry(name.to_string()).or_default() += 1;
        if al2 && name == "execve" {
            break;
        }
    }
    counts
}

/// What the kills did, on standard error (the test's output), failures first.
fn summarize(name: &str, f: &Family, st: &Stats, seed: u64, window: u64, t0: Instant) {
    let total: u32 = f.syscalls.values().sum();
    let per: Vec<String> = st
        .per_syscall
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    eprintln!(
        "crash {name}: {total} system calls before the hand-off, {} distinct; {} kills at a system call ({} write-class, {} other; {} did not land: the run made fewer calls than the count), {} at random moments (seed {seed}, window {} ms; {} before the agent finished or reached the hand-off); per call: {}",
        f.syscalls.len(),
        st.syscall_kills,
        st.write_class,
        st.other_class,
        st.not_landed,
        st.moment_kills,
        window / 1000,
        st.moment_landed,
        per.join(", ")
    );
    eprintln!(
        "crash {name}: temp files left by the kill in {} cases (all removed by the rerun); marker present after the kill in {} (bootstrap.sh never started: the rerun handed off); boots without a hand-off: {} of {}; reports after the rerun: {} exact, {} with the remaining steps; converged {} of {}; {} failures; {:.1} s",
        st.temps_after_kill,
        st.marker_after_kill,
        st.boots_without_handoff,
        st.boots,
        st.report_exact,
        st.report_remaining,
        st.converged,
        st.syscall_kills + st.moment_kills,
        st.failures.len(),
        t0.elapsed().as_secs_f64()
    );
    for e in st.failures.iter().take(10) {
        eprintln!("  FAIL {e}");
    }
}

fn crash_family(name: &'static str, sample: &str, al2: bool) {
    if !strace_usable() {
        return;
    }
    let t0 = Instant::now();
    let f = Family::new(name, sample, al2);
    let seed = std::env::var("CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    let moments: usize = std::env::var("CRASH_MOMENTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut st = Stats::default();
    for (sc, n) in &f.syscalls {
        for i in 1..=*n {
            f.syscall_kill(sc, i, &mut st);
        }
    }
    let window = f.run_time.as_micros() as u64 * 6 / 5;
    for _ in 0..moments {
        let d = Duration::from_micros(rng.random_range(0..=window));
        f.moment_kill(d, &mut st);
    }
    summarize(name, &f, &st, seed, window, t0);
    // The first failures go into the panic message too: CI keeps the panic line when it cuts
    // the captured output.
    assert!(
        st.failures.is_empty(),
        "{} cases failed (seed {seed}): {}",
        st.failures.len(),
        st.failures
            .iter()
            .take(3)
            .cloned()
            .collect::<Vec<_>>()
            .join(" | ")
    );
    assert_eq!(st.converged, st.syscall_kills + st.moment_kills);
    // The kills reached every write the agent makes (a kill that never lands proves nothing).
    assert!(
        st.not_landed * 20 <= st.syscall_kills,
        "{} of {} syscall kills did not land",
        st.not_landed,
        st.syscall_kills
    );
    for sc in ["rename", "fsync", "write", "openat"] {
        assert!(
            f.syscalls.contains_key(sc),
            "no {sc} counted: {:?}",
            f.syscalls
        );
    }
    if al2 {
        // The window between the marker and the execve was reached, and no boot lacked its
        // hand-off.
        assert!(st.marker_after_kill > 0);
        assert_eq!(st.boots_without_handoff, 0);
        assert_eq!(st.boots, st.syscall_kills - st.not_landed + st.moment_kills);
    }
}

#[test]
fn kill_al2_init_at_every_syscall_and_random_moments() {
    crash_family("al2", "al2-root", true);
}

#[test]
fn kill_al2023_init_at_every_syscall_and_random_moments() {
    crash_family("al2023", "al2023-root", false);
}

/// Two runs' reports that differ only in how long a check took (`"ms"`, 0 on an idle machine,
/// 1 on a loaded one) are the same report: the comparison of every kill relies on it.
#[test]
fn a_checks_duration_is_masked_like_the_times() {
    let report = |ms: u64| {
        serde_json::to_vec(&serde_json::json!({
            "startedAtUnixMs": ms + 5,
            "join": {"preflight": [{"check": "cluster DNS", "result": "passed", "ms": ms}]},
        }))
        .unwrap()
    };
    let rel = Path::new(REPORT);
    let root = Path::new("/r");
    assert_eq!(
        mask(root, rel, report(0)),
        mask(root, rel, report(1)),
        "a check's duration left unmasked"
    );
}
