//! Log lines as an operator reads them: no colour in a file or a pipe (cloud-init's output
//! log), colour on a terminal unless NO_COLOR, sd-daemon priority prefixes when standard error
//! is the journal stream that JOURNAL_STREAM names, and only then.

use crate::common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::*;

const ESC: u8 = 0x1b;

/// An AL2023 node root and a config without tagging: `init` logs infos ("wrote file") and a
/// warning (logind not notified under another root) with no network.
fn node() -> (tempfile::TempDir, std::path::PathBuf) {
    let root = sample_root("al2023-root");
    let cfg = config_with(root.path(), "c.json", |v| {
        v["tagging"] = serde_json::json!({"enabled": false});
    });
    (root, cfg)
}

/// `init --metadata examples/metadata.json --config CFG --root ROOT`.
fn init_args(root: &Path, cfg: &Path) -> Vec<std::ffi::OsString> {
    let md = example("metadata.json");
    let words: [&std::ffi::OsStr; 7] = [
        "init".as_ref(),
        "--metadata".as_ref(),
        md.as_os_str(),
        "--config".as_ref(),
        cfg.as_os_str(),
        "--root".as_ref(),
        root.as_os_str(),
    ];
    words.iter().map(|w| w.to_os_string()).collect()
}

fn init_cmd(root: &Path, cfg: &Path) -> Command {
    let mut c = cmd();
    c.args(init_args(root, cfg));
    c
}

/// Run with standard error appended to `log`; returns what the run added to it.
fn stderr_to_file(c: &mut Command, log: &Path) -> (Output, Vec<u8>) {
    let before = std::fs::metadata(log).map(|m| m.len()).unwrap_or(0) as usize;
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    let out = c.stderr(Stdio::from(f)).output().unwrap();
    let all = std::fs::read(log).unwrap();
    eprintln!(
        "--- exit {:?}\n--- stderr (file)\n{}",
        out.status.code(),
        String::from_utf8_lossy(&all[before..])
    );
    (out, all[before..].to_vec())
}

/// `JOURNAL_STREAM` as systemd sets it for a stream: "<dev>:<ino>".
fn journal_stream(p: &Path) -> String {
    let m = std::fs::metadata(p).unwrap();
    format!("{}:{}", m.dev(), m.ino())
}

fn lines(b: &[u8]) -> Vec<String> {
    String::from_utf8(b.to_vec())
        .expect("log lines are UTF-8")
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn standard_error_to_a_file_has_no_escape_byte() {
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("stderr.log");
    let (root, cfg) = node();
    let (out, err) = stderr_to_file(&mut init_cmd(root.path(), &cfg), &log);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&err);
    assert!(
        text.contains(" WARN not notifying systemd-logind"),
        "{text}"
    );
    assert!(text.contains(" INFO wrote file"), "{text}");
    assert!(!err.contains(&ESC), "an ESC byte in a file:\n{text:?}");

    // JSON lines and main's error chain too.
    let (root, cfg) = node();
    let (out, err) = stderr_to_file(
        init_cmd(root.path(), &cfg).args(["--log-format", "json"]),
        &log,
    );
    assert!(out.status.success());
    for l in lines(&err) {
        let v: serde_json::Value = serde_json::from_str(&l).unwrap_or_else(|e| panic!("{e}: {l}"));
        assert!(v["level"].is_string(), "{l}");
    }
    assert!(!err.contains(&ESC));
    let (out, err) = stderr_to_file(
        cmd().args(["init", "--config", "/nonexistent/config.json"]),
        &log,
    );
    assert_eq!(out.status.code(), Some(5));
    assert!(lines(&err)[0].starts_with("error: cannot read config"));
    assert!(!err.contains(&ESC));
}

#[test]
fn under_the_journal_every_line_starts_with_its_priority() {
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("journal-stream");
    std::fs::write(&log, "").unwrap();
    let stream = journal_stream(&log);

    let (root, cfg) = node();
    let (out, err) = stderr_to_file(
        init_cmd(root.path(), &cfg).env("JOURNAL_STREAM", &stream),
        &log,
    );
    assert!(out.status.success());
    let got = lines(&err);
    assert!(
        got.iter()
            .any(|l| l.starts_with("<4>WARN not notifying systemd-logind: --root is")),
        "{got:#?}"
    );
    assert!(
        got.iter()
            .any(|l| l.starts_with("<6>INFO wrote file path=/etc/eks/nodeadm.d/")),
        "{got:#?}"
    );
    // journald stamps each entry: no timestamp of our own, no colour.
    for l in &got {
        assert!(
            l.starts_with("<4>WARN ") || l.starts_with("<6>INFO "),
            "{l:?}"
        );
    }
    assert!(!err.contains(&ESC));

    // -v: debug lines at <7>.
    let (root, cfg) = node();
    let (_, err) = stderr_to_file(
        init_cmd(root.path(), &cfg)
            .arg("-v")
            .env("JOURNAL_STREAM", &stream),
        &log,
    );
    assert!(
        lines(&err).iter().any(|l| l.starts_with("<7>DEBUG ")),
        "{:#?}",
        lines(&err)
    );

    // main's error chain: every line at error priority, the invalid config's list included.
    let (root, _) = node();
    let bad = config_with(root.path(), "bad.json", |v| {
        v["labels"]["kubernetes.io/role"] = "master".into();
        v["taints"] = serde_json::json!(["dedicated=infra:NoSchedul"]);
    });
    let bad = bad.to_str().unwrap();
    let got = journal_errors(&["validate", "--config", bad], &log, 3);
    assert!(got[0].starts_with("<3>error: the config is invalid (2 problems):"));
    assert!(
        got.len() >= 3,
        "the two problems on their own lines: {got:#?}"
    );
    let got = journal_errors(&["init", "--config", "/nonexistent/config.json"], &log, 5);
    assert!(got[0].starts_with("<3>error: cannot read config"));
    assert!(
        got[0].contains("No such file or directory"),
        "error and cause on one line: {got:#?}"
    );
    // A usage error, before logging is set up.
    let got = journal_errors(&["init", "--no-such-flag"], &log, 2);
    assert!(got[0].starts_with("<3>error: unexpected argument"));
}

/// Run `args` failing with `code`, standard error the journal stream in `log`: its lines,
/// every one at error priority.
fn journal_errors(args: &[&str], log: &Path, code: i32) -> Vec<String> {
    let (out, err) = stderr_to_file(
        cmd().args(args).env("JOURNAL_STREAM", journal_stream(log)),
        log,
    );
    assert_eq!(out.status.code(), Some(code));
    let got = lines(&err);
    assert!(!got.is_empty());
    assert!(got.iter().all(|l| l.starts_with("<3>")), "{got:#?}");
    got
}

#[test]
fn a_journal_stream_that_is_not_standard_error_is_ignored() {
    // cloud-final's user-data script inherits JOURNAL_STREAM, but its standard error is
    // cloud-init's pipe to cloud-init-output.log: plain lines there.
    let d = tempfile::tempdir().unwrap();
    let other = d.path().join("the-unit-stream");
    std::fs::write(&other, "").unwrap();
    let log = d.path().join("cloud-init-output.log");
    let (root, cfg) = node();
    let (out, err) = stderr_to_file(
        init_cmd(root.path(), &cfg).env("JOURNAL_STREAM", journal_stream(&other)),
        &log,
    );
    assert!(out.status.success());
    let got = lines(&err);
    assert!(!got.is_empty());
    for l in &got {
        assert!(!l.starts_with('<'), "{l:?}");
        // Plain lines keep their timestamp: no journal adds one.
        assert!(l.starts_with("20"), "{l:?}");
    }
    assert!(got.iter().any(|l| l.contains(" WARN not notifying")));
}

/// `init` on a pseudo-terminal (Python's pty module; no shell); what it printed.
fn init_on_a_terminal(env: &[(&str, &str)]) -> Vec<u8> {
    let (root, cfg) = node();
    let mut c = Command::new("python3");
    c.args([
        "-c",
        "import os,pty,sys\nst=pty.spawn(sys.argv[1:])\nsys.exit(os.waitstatus_to_exitcode(st))",
    ])
    .args(agent_argv(&bin()))
    .args(init_args(root.path(), &cfg))
    .env_clear()
    .env("PATH", std::env::var("PATH").unwrap_or_default())
    .current_dir(manifest_dir())
    .stdin(Stdio::null())
    .envs(env.iter().copied());
    let out = run(&mut c);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("not notifying systemd-logind"), "{text}");
    out.stdout
}

#[test]
fn colour_on_a_terminal_unless_no_color() {
    let coloured = init_on_a_terminal(&[]);
    assert!(
        coloured.contains(&ESC),
        "no colour on a terminal:\n{}",
        String::from_utf8_lossy(&coloured)
    );
    let plain = init_on_a_terminal(&[("NO_COLOR", "1")]);
    assert!(
        !plain.contains(&ESC),
        "colour despite NO_COLOR:\n{:?}",
        String::from_utf8_lossy(&plain)
    );
}
