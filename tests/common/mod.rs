//! Helpers shared by the integration tests: sample node roots, running the binary with a
//! clean environment, and small real HTTP peers (an IMDSv2 server, an EC2 Query API server).
#![allow(dead_code)]

pub mod bootstrap_sh;
pub mod dbus;
pub mod discovery_server;
pub mod ec2_server;
pub mod faults;
pub mod imds_server;
pub mod peers;
pub mod tls;

use std::collections::BTreeMap;
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

pub fn copy_tree(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        let ft = e.file_type().unwrap();
        if ft.is_dir() {
            copy_tree(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), &to).unwrap();
        }
    }
}

/// A temp copy of one of the sample node roots under examples/.
pub fn sample_root(name: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    copy_tree(&manifest_dir().join("examples").join(name), d.path());
    d
}

/// The options of the newest AL2 bootstrap.sh, each taking one value (checked against every
/// upstream release's script; `--service-ipv4-cidr` is the newest, 2025-05).
pub const BOOTSTRAP_OPTIONS: &[&str] = &eks_nodeinit::aspects::bootstrap::NEWEST_OPTIONS;

/// A bootstrap.sh stand-in with the real script's option grammar (a `while`/`case $key in` loop:
/// each option takes the next word, `-h | --help` exits 1, other words are positional, `$2` under
/// `set -o nounset`) for `options`; `record` (shell) runs first with the argv untouched.
pub fn bootstrap_standin(options: &[&str], record: &str) -> String {
    let mut s = String::from(
        "#!/bin/bash\n# Stand-in for the EKS AL2 AMI's /etc/eks/bootstrap.sh: its option grammar, no node setup.\nset -o nounset\n",
    );
    s.push_str(record);
    s.push_str("\nPOSITIONAL=()\nwhile [[ $# -gt 0 ]]; do\n  key=\"$1\"\n  case $key in\n    -h | --help)\n      echo \"usage: $0 [options] <cluster-name>\"\n      exit 1\n      ;;\n");
    for o in options {
        s.push_str(&format!(
            "    {o})\n      VALUE=\"$2\"\n      shift\n      shift\n      ;;\n"
        ));
    }
    s.push_str("    *)\n      POSITIONAL+=(\"$1\")\n      shift\n      ;;\n  esac\ndone\n");
    s.push_str(STANDIN_EVIDENCE);
    s
}

/// What every real bootstrap.sh does once past its options, and the agent reads as proof that
/// the hand-off happened (`eks_nodeinit::marker::EVIDENCE`): it rewrites the cluster CA file
/// (`/etc/kubernetes/pki/ca.crt`, beside the script's `/etc/eks`, so under a test root too).
pub const STANDIN_EVIDENCE: &str = "pki=\"$(dirname \"$0\")/../kubernetes/pki\"\nmkdir -p \"$pki\"\necho stand-in > \"$pki/ca.crt\"\n";

/// Install `script` as the root's bootstrap.sh (mode 0755).
pub fn install_bootstrap(root: &Path, script: &str) -> PathBuf {
    let p = root.join("etc/eks/bootstrap.sh");
    std::fs::write(&p, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// The shell that records the argv, one word per line, in `argv.txt` beside the script.
pub const RECORD_ARGV: &str = "out=\"$(dirname \"$0\")/argv.txt\"\n: > \"$out\"\nfor a in \"$@\"; do printf '%s\\n' \"$a\" >> \"$out\"; done\n";

/// Replace bootstrap.sh with a stand-in (the newest option grammar) that records its argv, one
/// word per line, in `argv.txt` beside it.
pub fn recording_bootstrap(root: &Path) -> PathBuf {
    install_bootstrap(root, &bootstrap_standin(BOOTSTRAP_OPTIONS, RECORD_ARGV));
    root.join("etc/eks/argv.txt")
}

/// The shell that appends one line per call to `calls.log` beside the script: how many times
/// bootstrap.sh was exec'd.
pub const RECORD_CALL: &str = "echo call >> \"$(dirname \"$0\")/calls.log\"\n";

/// Replace bootstrap.sh with a stand-in (the newest option grammar) that appends a line per call
/// to `calls.log` and records its argv in `argv.txt`, both beside it, then runs `then` (shell,
/// e.g. `sleep 0.3`) before reading its options.
pub fn counting_bootstrap(root: &Path, then: &str) -> PathBuf {
    let record = format!("{RECORD_CALL}{RECORD_ARGV}{then}\n");
    install_bootstrap(root, &bootstrap_standin(BOOTSTRAP_OPTIONS, &record));
    root.join("etc/eks/calls.log")
}

/// Every regular file under `root` and its bytes, but the run lock: it is taken before the node
/// is read (exactly one run plans and applies), and holding it changes nothing on the node.
pub fn snapshot(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut m = BTreeMap::new();
    fn walk(base: &Path, dir: &Path, m: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                walk(base, &p, m);
            } else if e.file_type().unwrap().is_file() {
                m.insert(
                    p.strip_prefix(base).unwrap().to_path_buf(),
                    std::fs::read(&p).unwrap(),
                );
            }
        }
    }
    walk(root, root, &mut m);
    m.remove(Path::new("run/lock/eks-nodeinit.lock"));
    m
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
pub fn step_kinds(plan: &serde_json::Value) -> Vec<String> {
    plan["steps"]
        .as_array()
        .map(|steps| steps.iter().map(step_kind).collect())
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

/// The report the last run left under `root`.
pub fn report(root: &Path) -> serde_json::Value {
    let p = root.join("var/lib/eks-nodeinit/report.json");
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

/// The outcome the report gives the first step whose name starts with `prefix`.
pub fn report_outcome(rep: &serde_json::Value, prefix: &str) -> Option<serde_json::Value> {
    rep["steps"]
        .as_array()?
        .iter()
        .find(|s| s["step"].as_str().is_some_and(|n| n.starts_with(prefix)))
        .map(|s| s["outcome"].clone())
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

/// moto's server on 127.0.0.1 with a free port, stopped when dropped. `None` (with a note) when
/// moto is not installed on a developer box; in CI its absence fails the test.
pub struct Moto {
    _child: Proc,
    pub url: String,
}

/// A child process, killed and reaped when dropped.
pub struct Proc(pub std::process::Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Whether a peer the suite starts is installed: true, else a note and false on a developer box;
/// in CI its absence fails the test. `missing` names what is not there (empty: all present).
pub fn peer_present(missing: &[&str]) -> bool {
    if missing.is_empty() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{missing:?} required in CI (make deps)"
    );
    eprintln!("SKIP: {missing:?} not installed (run `make deps`)");
    false
}

/// The commands of `tools` that cannot be run (`<tool> --version` fails to start).
pub fn missing_commands<'a>(tools: &[&'a str]) -> Vec<&'a str> {
    tools
        .iter()
        .copied()
        .filter(|t| Command::new(t).arg("--version").output().is_err())
        .collect()
}

/// A TCP port free on 127.0.0.1 at the time of asking.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn start_moto() -> Option<Moto> {
    start_moto_with(&[])
}

/// moto with extra environment (e.g. `MOTO_ENABLE_RECORDING=1` and `MOTO_RECORDER_FILEPATH`
/// to log every request it serves).
pub fn start_moto_with(env: &[(&str, &str)]) -> Option<Moto> {
    start_moto_as(&["-m", "moto.server"], env)
}

/// moto's server started by `python3 <args>` (a module or a script that runs moto.server's main
/// with an action moto lacks: tests/moto/), with extra environment.
pub fn start_moto_as(args: &[&str], env: &[(&str, &str)]) -> Option<Moto> {
    start_moto_at("127.0.0.1", args, env)
}

/// moto as [`start_moto_as`] on another loopback address (`127.0.0.2`: a host that a NO_PROXY
/// naming `127.0.0.1` does not cover).
pub fn start_moto_at(host: &str, args: &[&str], env: &[(&str, &str)]) -> Option<Moto> {
    let have = Command::new("python3")
        .args(["-c", "import moto.server"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !peer_present(if have { &[] } else { &["moto[server]"] }) {
        return None;
    }
    let port = free_port();
    let child = Command::new("python3")
        .args(args)
        .args(["-H", host, "-p", &port.to_string()])
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    while std::net::TcpStream::connect((host, port)).is_err() {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(30),
            "moto did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    Some(Moto {
        _child: Proc(child),
        url: format!("http://{host}:{port}"),
    })
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

/// SDK settings for a local endpoint (moto) with its test credentials.
pub async fn moto_sdk_config(url: &str, region: &str) -> aws_config::SdkConfig {
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(region.to_string()))
        .credentials_provider(aws_sdk_ec2::config::Credentials::new(
            "testing", "testing", None, None, "test",
        ))
        .endpoint_url(url)
        .load()
        .await
}

/// Put `(name, value, SecureString?)` parameters into Parameter Store (moto at `url`), in order.
pub async fn put_parameters(url: &str, parameters: &[(String, String, bool)]) {
    let ssm = aws_sdk_ssm::Client::new(&moto_sdk_config(url, "eu-west-1").await);
    for (name, value, secure) in parameters {
        ssm.put_parameter()
            .name(name)
            .value(value)
            .r#type(if *secure {
                aws_sdk_ssm::types::ParameterType::SecureString
            } else {
                aws_sdk_ssm::types::ParameterType::String
            })
            .send()
            .await
            .unwrap();
    }
}

/// Publish a cluster's values in Parameter Store as the agent's `ssmPath` source reads them by
/// default (`<prefix>/APISERVER_ENDPOINT`, `<prefix>/B64_CLUSTER_CA` as a SecureString,
/// `<prefix>/SERVICE_CIDR`), in moto at `url`.
pub async fn put_cluster_parameters(url: &str, prefix: &str, endpoint: &str, ca: &str, cidr: &str) {
    let p =
        |name: &str, value: &str, secure| (format!("{prefix}/{name}"), value.to_string(), secure);
    put_parameters(
        url,
        &[
            p("APISERVER_ENDPOINT", endpoint, false),
            p("B64_CLUSTER_CA", ca, true),
            p("SERVICE_CIDR", cidr, false),
        ],
    )
    .await
}

/// An EC2 client for a local endpoint (moto) with test credentials.
pub async fn ec2_client(url: &str, region: &str) -> aws_sdk_ec2::Client {
    aws_sdk_ec2::Client::new(&moto_sdk_config(url, region).await)
}

/// moto's first image.
pub async fn first_image(ec2: &aws_sdk_ec2::Client) -> String {
    let images = ec2.describe_images().send().await.unwrap();
    images.images()[0].image_id().unwrap().to_string()
}

/// One run-instances instance from moto's first image: (instance id, private IPv4).
pub async fn run_instance(ec2: &aws_sdk_ec2::Client) -> (String, String) {
    let image = first_image(ec2).await;
    let ran = ec2
        .run_instances()
        .image_id(image)
        .instance_type(aws_sdk_ec2::types::InstanceType::M6iLarge)
        .min_count(1)
        .max_count(1)
        .send()
        .await
        .unwrap();
    let inst = &ran.instances()[0];
    (
        inst.instance_id().unwrap().to_string(),
        inst.private_ip_address().unwrap().to_string(),
    )
}

/// Every tag on an instance, as DescribeTags reports it.
pub async fn instance_tags(
    ec2: &aws_sdk_ec2::Client,
    id: &str,
) -> Result<BTreeMap<String, String>, String> {
    let out = ec2
        .describe_tags()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("resource-id")
                .values(id)
                .build(),
        )
        .send()
        .await
        .map_err(|e| e.to_string())?;
    Ok(out
        .tags()
        .iter()
        .filter_map(|t| Some((t.key()?.to_string(), t.value()?.to_string())))
        .collect())
}
