//! The agent's command runner: the binary under test (through an emulator when one is set), run
//! with a clean environment from the checkout, its output and report, the sample configs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The binary under test: `EKS_NODEINIT_BIN` when set (e.g. the aarch64 release build, run
/// through `EKS_NODEINIT_RUNNER`), else this build's.
pub fn bin() -> PathBuf {
    std::env::var_os("EKS_NODEINIT_BIN")
        .filter(|b| !b.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_eks-nodeinit")))
}

/// The words that start `agent`: `EKS_NODEINIT_RUNNER` first when set (an emulator such as
/// `qemu-aarch64-static`, for a binary of another architecture).
pub fn agent_argv(agent: &Path) -> Vec<std::ffi::OsString> {
    let mut v: Vec<std::ffi::OsString> = std::env::var_os("EKS_NODEINIT_RUNNER")
        .filter(|r| !r.is_empty())
        .into_iter()
        .collect();
    v.push(agent.into());
    v
}

/// `agent` (through the runner, when one is set), with the environment untouched.
pub fn agent_command(agent: &Path) -> Command {
    let argv = agent_argv(agent);
    let mut c = Command::new(&argv[0]);
    c.args(&argv[1..]);
    c
}

/// The binary with a clean environment (no AWS settings from the developer's shell).
pub fn cmd() -> Command {
    with_clean_env(agent_command(&bin()))
}

/// `c` with the environment `cmd()` gives the binary under test, run from the checkout.
pub fn with_clean_env(mut c: Command) -> Command {
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_CONFIG_FILE", "/nonexistent")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
        .current_dir(manifest_dir())
        .stdin(Stdio::null());
    c
}

pub fn run(c: &mut Command) -> Output {
    let out = c.output().expect("the binary runs");
    eprintln!(
        "--- exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A config document for tests: the scaler example with changes applied.
pub fn config_with(root: &Path, name: &str, edit: impl FnOnce(&mut serde_json::Value)) -> PathBuf {
    let text = std::fs::read_to_string(manifest_dir().join("examples/scaler.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    edit(&mut v);
    let p = root.join(name);
    std::fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    p
}

pub fn example(p: &str) -> PathBuf {
    manifest_dir().join("examples").join(p)
}

/// `eks-nodeinit init [extra…] --metadata examples/metadata.json --config CFG --root ROOT`.
pub fn init(root: &Path, cfg: &Path, extra: &[&str]) -> Output {
    init_with(root, cfg, &example("metadata.json"), extra)
}

pub fn init_with(root: &Path, cfg: &Path, metadata: &Path, extra: &[&str]) -> Output {
    run(cmd()
        .arg("init")
        .args(extra)
        .arg("--metadata")
        .arg(metadata)
        .arg("--config")
        .arg(cfg)
        .arg("--root")
        .arg(root))
}

/// None of `secrets` appears in the run's stdout or stderr, or in the report it left under `root`.
pub fn assert_unprinted(out: &Output, root: &Path, secrets: &[&str]) {
    let report =
        std::fs::read_to_string(root.join("var/lib/eks-nodeinit/report.json")).unwrap_or_default();
    for (what, text) in [
        ("stdout", stdout(out)),
        ("stderr", stderr(out)),
        ("report", report),
    ] {
        for (i, secret) in secrets.iter().enumerate() {
            assert!(!text.contains(secret), "secret {i} shows in {what}");
        }
    }
}

/// The `kind` of each step of a JSON plan, in order.
/// The plan's steps but its checks (which change nothing; tests/it/join.rs lists those).
pub fn step_kinds(plan: &serde_json::Value) -> Vec<String> {
    plan["steps"]
        .as_array()
        .map(|steps| {
            steps
                .iter()
                .filter(|s| s["kind"] != "check")
                .map(step_kind)
                .collect()
        })
        .unwrap_or_default()
}

/// A step's kind as the tests name it: `file`, `live`, `run`; a unit job and a hand-off with
/// what they are (`unit:reload`, `handoff:exec`).
pub fn step_kind(step: &serde_json::Value) -> String {
    let kind = step["kind"].as_str().unwrap_or("?");
    match step[kind].as_str().or(step["job"].as_str()) {
        Some(what) => format!("{kind}:{what}"),
        None => kind.to_string(),
    }
}

/// The outcome the report gives the first step whose name starts with `prefix`.
pub fn report_outcome(rep: &serde_json::Value, prefix: &str) -> Option<serde_json::Value> {
    rep["steps"]
        .as_array()?
        .iter()
        .find(|s| s["step"].as_str().is_some_and(|n| n.starts_with(prefix)))
        .map(|s| s["outcome"].clone())
}

/// The report the last run left under `root`.
pub fn report(root: &Path) -> serde_json::Value {
    let p = root.join("var/lib/eks-nodeinit/report.json");
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

/// Run a command with `input` on its standard input; capture the rest.
pub fn run_with_stdin(c: &mut Command, input: &str) -> Output {
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the command starts");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// The JSON documents between `<<'JSON'` and `JSON` in a user-data script.
pub fn heredocs(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    for line in text.lines() {
        match &mut cur {
            None if line.trim_end().ends_with("<<'JSON'") => cur = Some(String::new()),
            Some(doc) if line.trim() == "JSON" => {
                out.push(std::mem::take(doc));
                cur = None;
            }
            Some(doc) => {
                doc.push_str(line);
                doc.push('\n');
            }
            None => {}
        }
    }
    out
}
