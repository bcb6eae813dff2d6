//! The first boot for real: a Debian bookworm VM (systemd, dbus, cloud-init, Debian's kernel)
//! under QEMU, with the agent installed from its DEB. The guest's 169.254.169.254:80 reaches the
//! strict IMDSv2 server of this test suite, and `ec2.eu-west-1.amazonaws.com` (through the
//! guest's /etc/hosts and a CA the guest trusts) reaches moto behind a TLS terminator: the
//! agent runs with no test-only setting, from the shipped user-data examples.
//!
//! Six boots-and-reboots, each checked from the host through the guest's second serial port
//! (see guest/e2e-report): the AL2 user-data script with a recording bootstrap.sh, the AL2023
//! MIME user data with a recording nodeadm, and the packaged unit with a cloud-config only, on
//! AL2023 and on AL2; and on AL2023 the two warm-pool paths (warm.rs): warmed and stopped, then
//! in service after the reboot; warmed and running, in service without one.
//!
//! Run with `make e2e-vm` (root, QEMU, debootstrap, socat, moto; see tests/e2e/vm/README.md).
//! Without them each test says why it is skipped; with `E2E_REQUIRED=1` it fails instead.

#[path = "../../common/mod.rs"]
mod common;
mod warm;

/// What the guest's bootstrap.sh records per call: the unit it ran in (cgroup), then the argv
/// one word per line.
const GUEST_RECORD_ARGV: &str = r#"{
  echo "bootstrap.sh cgroup=$(cut -d: -f3 /proc/self/cgroup | head -1) uptime=$(cut -d' ' -f1 /proc/uptime)"
  for a in "$@"; do printf 'arg %s\n' "$a"; done
} >> /var/lib/e2e/handoff.log
"#;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use base64::Engine;
use common::imds_server::{ImdsServer, State};
use common::*;
use eks_nodeinit::aspects::{logind, nodeconfig, sysctls};
use eks_nodeinit::fsutil::under;
use eks_nodeinit::report::REPORT_PATH;

const REGION: &str = "eu-west-1";
const EC2_HOST: &str = "ec2.eu-west-1.amazonaws.com";
/// Where the guest reaches the EC2 API (its /etc/hosts maps EC2_HOST here).
const GUEST_EC2_ADDR: &str = "169.254.170.99";
const CLUSTER: &str = "prod-eu";
/// Parameter Store, reached like the EC2 API (its name mapped to GUEST_EC2_ADDR, moto behind TLS).
const SSM_HOST: &str = "ssm.eu-west-1.amazonaws.com";
/// What the name-only scenarios' Parameter Store holds under /eks/prod-eu (the CA: the suite's
/// real test certificate, as the agent checks it is PEM).
const SSM_ENDPOINT: &str =
    "https://E2E0E2E0E2E0E2E0E2E0E2E0E2E0E2E0.gr7.eu-west-1.eks.amazonaws.com";
const SSM_CIDR: &str = "172.20.0.0/16";
/// The DMI identity that makes cloud-init's Ec2 datasource use IMDSv2 (uuid == serial, "ec2…").
const DMI_UUID: &str = "ec2e1916-9099-7caf-fd21-01234567abcd";
/// One boot to the report takes about a minute under TCG; two boots with margin.
const VM_TIMEOUT: Duration = Duration::from_secs(20 * 60);

fn e2e_dir() -> PathBuf {
    manifest_dir().join("tests/e2e/vm")
}

fn required() -> bool {
    std::env::var_os("E2E_REQUIRED").is_some_and(|v| v != "0")
}

/// Skip (or, with E2E_REQUIRED, fail) with the reason.
fn skip(why: &str) {
    assert!(!required(), "VM e2e cannot run: {why}");
    eprintln!("SKIP VM e2e: {why}");
}

fn sh(cmd: &mut Command) -> String {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({:?}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Is `tool` an executable on PATH?
fn have(tool: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|d| {
            std::fs::metadata(d.join(tool))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// What the VM needs from this machine, or why it cannot run here.
fn prerequisites() -> Result<PathBuf, String> {
    let uid = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_string))
        })
        .unwrap_or_default();
    if uid != "0" {
        return Err(format!(
            "needs root (debootstrap, chroot, dpkg into the guest's root); running as uid {uid}"
        ));
    }
    for tool in [
        "qemu-system-x86_64",
        "debootstrap",
        "socat",
        "mkfs.ext4",
        "openssl",
        "chroot",
    ] {
        if !have(tool) {
            return Err(format!("{tool} is not installed (make e2e-vm-deps)"));
        }
    }
    let cache = cache_root();
    std::fs::create_dir_all(&cache).map_err(|e| format!("{}: {e}", cache.display()))?;
    let avail: u64 = sh(Command::new("df")
        .args(["--output=avail", "-B1"])
        .arg(&cache))
    .lines()
    .nth(1)
    .and_then(|l| l.trim().parse().ok())
    .unwrap_or(0);
    // A cached image (~0.5 GB) plus two 3 GB sparse disks at a time, about 1 GB each written.
    if avail < 4 << 30 {
        return Err(format!(
            "{} has {} MiB free; the VM e2e needs 4 GiB",
            cache.display(),
            avail >> 20
        ));
    }
    deb_path()
}

/// The DEB under test: `E2E_DEB`, else the newest amd64 one under `target/packages/` (make
/// package; the guest is x86_64, and package-all leaves an arm64 DEB beside it).
fn deb_path() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("E2E_DEB") {
        return Ok(PathBuf::from(p));
    }
    // Where `make package` writes, whatever CARGO_TARGET_DIR says.
    let dir = manifest_dir().join("target/packages");
    let newest = std::fs::read_dir(&dir)
        .ok()
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with("_amd64.deb"))
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok());
    newest.ok_or_else(|| format!("no amd64 .deb under {} (run `make package`)", dir.display()))
}

fn cache_root() -> PathBuf {
    std::env::var_os("E2E_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp/eks-nodeinit-e2e"))
}

/// The guest image, built once per recipe: the cache key is the hash of build-image.sh.
fn image() -> PathBuf {
    static LOCK: Mutex<()> = Mutex::new(());
    let _held = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let recipe = e2e_dir().join("build-image.sh");
    let hash = sh(Command::new("sha256sum").arg(&recipe));
    let dir = cache_root().join(format!("bookworm-{}", &hash[..16]));
    if !dir.join("vmlinuz").exists() {
        // Images of older recipes are not used again.
        for e in std::fs::read_dir(cache_root()).unwrap().flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with("bookworm-") && e.path() != dir {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
        let t = Instant::now();
        eprintln!("building the guest image into {} ...", dir.display());
        sh(Command::new("bash").arg(&recipe).arg(&dir));
        eprintln!("guest image built in {:.0} s", t.elapsed().as_secs_f64());
    } else {
        eprintln!("guest image: {} (cached)", dir.display());
    }
    dir
}

/// QEMU's accelerator: KVM only when a probe boot under it reaches the kernel's panic on a
/// missing root within 30 s (on some machines /dev/kvm exists but a stock kernel hangs).
fn accel(image: &Path) -> &'static str {
    static ACCEL: OnceLock<&'static str> = OnceLock::new();
    ACCEL.get_or_init(|| {
        if !Path::new("/dev/kvm").exists() {
            eprintln!("accelerator: tcg (no /dev/kvm)");
            return "tcg";
        }
        let log = tempfile::NamedTempFile::new().unwrap();
        let mut child = Command::new("qemu-system-x86_64")
            .args([
                "-accel",
                "kvm",
                "-m",
                "512",
                "-nodefaults",
                "-display",
                "none",
            ])
            .arg("-kernel")
            .arg(image.join("vmlinuz"))
            .args([
                "-append",
                "console=ttyS0 panic=-1 root=/dev/nonexistent rootwait=0 rootdelay=0",
                "-no-reboot",
                "-serial",
            ])
            .arg(format!("file:{}", log.path().display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let t = Instant::now();
        let booted = loop {
            let text = std::fs::read_to_string(log.path()).unwrap_or_default();
            if text.contains("Kernel panic") {
                break true;
            }
            if t.elapsed() > Duration::from_secs(30) || child.try_wait().unwrap().is_some() {
                break false;
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        let _ = child.kill();
        let _ = child.wait();
        let a = if booted { "kvm" } else { "tcg" };
        eprintln!("accelerator: {a} (KVM probe booted: {booted})");
        a
    })
}

/// A CA the guest trusts and a certificate for EC2_HOST signed by it.
fn certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let (ca_key, ca, key, csr, crt, ext) = (
        dir.join("ca.key"),
        dir.join("ca.crt"),
        dir.join("ec2.key"),
        dir.join("ec2.csr"),
        dir.join("ec2.crt"),
        dir.join("ec2.ext"),
    );
    sh(Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args(["-subj", "/CN=eks-nodeinit e2e CA", "-keyout"])
        .arg(&ca_key)
        .arg("-out")
        .arg(&ca));
    sh(Command::new("openssl")
        .args(["req", "-newkey", "rsa:2048", "-nodes"])
        .args(["-subj", &format!("/CN={EC2_HOST}"), "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&csr));
    std::fs::write(
        &ext,
        format!("subjectAltName=DNS:{EC2_HOST},DNS:{SSM_HOST}\nextendedKeyUsage=serverAuth\n"),
    )
    .unwrap();
    sh(Command::new("openssl")
        .args(["x509", "-req", "-days", "2", "-CAcreateserial", "-in"])
        .arg(&csr)
        .arg("-CA")
        .arg(&ca)
        .arg("-CAkey")
        .arg(&ca_key)
        .arg("-extfile")
        .arg(&ext)
        .arg("-out")
        .arg(&crt));
    (ca, crt, key)
}

/// The EC2 side: moto (recording every request) on loopback, a TLS terminator in front of it
/// with a certificate for EC2_HOST, and one run-instances instance.
struct Ec2 {
    _moto: Moto,
    _tls: Proc,
    tls_port: u16,
    recording: PathBuf,
    client: aws_sdk_ec2::Client,
    instance_id: String,
    private_ip: String,
}

impl Ec2 {
    fn start(rt: &tokio::runtime::Runtime, dir: &Path, crt: &Path, key: &Path) -> Ec2 {
        let recording = dir.join("moto-recording.jsonl");
        let moto = start_moto_with(&[
            ("MOTO_ENABLE_RECORDING", "1"),
            ("MOTO_RECORDER_FILEPATH", recording.to_str().unwrap()),
        ])
        .expect("moto[server] is installed (make deps)");
        let moto_port = moto.url.rsplit(':').next().unwrap().to_string();
        let tls_port = free_port();
        let tls = Proc(
            Command::new("socat")
                .arg(format!(
                    "OPENSSL-LISTEN:{tls_port},bind=127.0.0.1,reuseaddr,fork,verify=0,cert={},key={}",
                    crt.display(),
                    key.display()
                ))
                .arg(format!("TCP:127.0.0.1:{moto_port}"))
                .stdin(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let client = rt.block_on(ec2_client(&moto.url, REGION));
        let (instance_id, private_ip) = rt.block_on(run_instance(&client));
        Ec2 {
            instance_id,
            private_ip,
            _moto: moto,
            _tls: tls,
            tls_port,
            recording,
            client,
        }
    }

    /// The EC2 actions moto served so far (from its request recording).
    fn actions(&self) -> Vec<String> {
        let text = std::fs::read_to_string(&self.recording).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|e| {
                let body = e["body"].as_str().unwrap_or("");
                let body = if e["body_encoded"] == true {
                    String::from_utf8_lossy(
                        &base64::engine::general_purpose::STANDARD
                            .decode(body)
                            .unwrap_or_default(),
                    )
                    .into_owned()
                } else {
                    body.to_string()
                };
                body.split('&')
                    .find_map(|kv| kv.strip_prefix("Action="))
                    .map(str::to_string)
            })
            .collect()
    }

    fn count(&self, action: &str) -> usize {
        self.actions().iter().filter(|a| *a == action).count()
    }

    /// Parameter Store calls of `operation` moto served (JSON protocol: the X-Amz-Target header).
    fn ssm_count(&self, operation: &str) -> usize {
        let target = format!("AmazonSSM.{operation}");
        std::fs::read_to_string(&self.recording)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|e| {
                e["headers"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .any(|(k, v)| k.eq_ignore_ascii_case("x-amz-target") && v == &target)
            })
            .count()
    }

    fn tags(&self, rt: &tokio::runtime::Runtime) -> Result<BTreeMap<String, String>, String> {
        rt.block_on(instance_tags(&self.client, &self.instance_id))
    }
}

fn utc_in(hours: u32) -> String {
    sh(Command::new("date").args([
        "-u",
        "-d",
        &format!("+{hours} hours"),
        "+%Y-%m-%dT%H:%M:%SZ",
    ]))
    .trim()
    .to_string()
}

/// IMDS for the instance moto launched: the paths the agent reads, what cloud-init's Ec2
/// datasource crawls (listings, the identity document), the instance role's credentials (the
/// SDK's default chain finds them here) and the scenario's user data.
fn imds(ec2: &Ec2, sc: &Scenario) -> ImdsServer {
    let mut s = State::default();
    let host = format!(
        "ip-{}.{REGION}.compute.internal",
        ec2.private_ip.replace('.', "-")
    );
    let creds = serde_json::json!({
        "Code": "Success", "LastUpdated": utc_in(0), "Type": "AWS-HMAC",
        "AccessKeyId": "ASIAE2EEXAMPLE", "SecretAccessKey": "e2e-secret-not-logged",
        "Token": "e2e-session-token", "Expiration": utc_in(6),
    });
    for (k, v) in [
        ("ami-id", "ami-0e2e0e2e0e2e0e2e0".to_string()),
        ("instance-id", ec2.instance_id.clone()),
        ("instance-type", "m6i.large".into()),
        ("local-ipv4", ec2.private_ip.clone()),
        ("local-hostname", host.clone()),
        ("hostname", host),
        ("mac", "52:54:00:12:34:56".into()),
        ("placement/availability-zone", format!("{REGION}a")),
        ("placement/region", REGION.into()),
        ("iam/security-credentials/eks-node-role", creds.to_string()),
    ] {
        s.data.insert(k.to_string(), v);
    }
    s.dynamic.insert(
        "instance-identity/document".into(),
        serde_json::json!({
            "accountId": "123456789012", "architecture": "x86_64",
            "availabilityZone": format!("{REGION}a"), "imageId": "ami-0e2e0e2e0e2e0e2e0",
            "instanceId": ec2.instance_id, "instanceType": "m6i.large",
            "privateIp": ec2.private_ip, "region": REGION, "version": "2017-09-30",
        })
        .to_string(),
    );
    let mut tags = BTreeMap::from([(
        "aws:autoscaling:groupName".to_string(),
        "eks-e2e-asg".to_string(),
    )]);
    if sc.cluster_tag {
        tags.insert(
            format!("kubernetes.io/cluster/{CLUSTER}"),
            "owned".to_string(),
        );
    }
    s.tags = Some(tags);
    s.user_data = Some(sc.user_data.clone().into_bytes());
    if let Some(state) = sc.warm {
        s.data
            .insert(eks_nodeinit::lifecycle::IMDS_PATH.into(), state.into());
    }
    ImdsServer::start_with(s)
}

/// Instance-metadata tags show the instance's EC2 tags: mirror moto's into the IMDS server
/// (beside the launch-time tags above) until dropped.
struct TagMirror(
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    Option<std::thread::JoinHandle<()>>,
);

impl TagMirror {
    fn start(rt: &tokio::runtime::Runtime, ec2: &Ec2, imds: &ImdsServer) -> TagMirror {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (flag, handle, client, id, state) = (
            stop.clone(),
            rt.handle().clone(),
            ec2.client.clone(),
            ec2.instance_id.clone(),
            imds.state.clone(),
        );
        let t = std::thread::spawn(move || {
            let base = state.lock().unwrap().tags.clone().unwrap_or_default();
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(now) = handle.block_on(instance_tags(&client, &id)) {
                    let mut tags = base.clone();
                    tags.extend(now);
                    state.lock().unwrap().tags = Some(tags);
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        });
        TagMirror(stop, Some(t))
    }
}

impl Drop for TagMirror {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.1.take() {
            let _ = t.join();
        }
    }
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Flavour {
    Al2,
    Al2023,
}

struct Scenario {
    name: &'static str,
    flavour: Flavour,
    user_data: String,
    /// The agent's config (from the user data), for the checks and the second-run dry run.
    config: serde_json::Value,
    /// The config is in the user data (`--config imds://user-data`) and the packaged unit runs
    /// the agent; else a user-data script runs it from cloud-final.
    by_unit: bool,
    /// The user data names only the cluster and the node group: the endpoint, CA and service
    /// CIDR come from Parameter Store (moto), looked up once.
    discovered: bool,
    /// The instance carries the `kubernetes.io/cluster/<name>` tag. Without it the agent warns
    /// that the node will not join: the scenario whose journal must show a warning.
    cluster_tag: bool,
    /// The Auto Scaling target lifecycle state at launch, for the warm-pool scenarios (warm.rs).
    warm: Option<&'static str>,
}

/// The AL2 kubelet config the agent patches: the config's default `kubelet.configPath`.
fn kubelet_config() -> String {
    eks_nodeinit::config::default_kubelet_config_path()
        .display()
        .to_string()
}

fn read_example(p: &str) -> String {
    std::fs::read_to_string(example(p)).unwrap()
}

fn scenario(name: &'static str) -> Scenario {
    let (file, flavour, by_unit) = match name {
        "al2-user-data" => ("cloud-init/al2-userdata.sh", Flavour::Al2, false),
        "al2023-user-data" => ("cloud-init/al2023-userdata.mime", Flavour::Al2023, false),
        "al2023-name-only" => ("cloud-init/al2023-name-only.mime", Flavour::Al2023, true),
        "al2-name-only" => ("cloud-init/al2-name-only.json", Flavour::Al2, true),
        "al2023-warm-stopped" | "al2023-warm-running" => {
            ("cloud-init/al2023-name-only.mime", Flavour::Al2023, true)
        }
        _ => unreachable!("{name}"),
    };
    let user_data = read_example(file);
    // A script carries the config in a heredoc; for the unit, the user data holds it as the
    // agent reads it.
    let config = match by_unit {
        true => {
            eks_nodeinit::userdata::agent_config(user_data.as_bytes())
                .unwrap()
                .unwrap_or_else(|| panic!("{file} holds no eks-nodeinit config"))
                .text
        }
        false => heredocs(&user_data).remove(0),
    };
    let config: serde_json::Value = serde_json::from_str(&config).unwrap();
    let discovered = config["cluster"].get("discovery").is_some();
    Scenario {
        name,
        flavour,
        config,
        user_data,
        by_unit,
        discovered,
        cluster_tag: name != "al2-name-only",
        warm: warm::initial_state(name),
    }
}

/// The CA of the suite's test certificate, base64 as Parameter Store holds it.
fn ssm_ca() -> String {
    base64::engine::general_purpose::STANDARD
        .encode(std::fs::read(manifest_dir().join("tests/fixtures/cluster-ca.pem")).unwrap())
}

impl Scenario {
    /// The endpoint, CA and service CIDR the hand-off must carry: the config's, or what
    /// Parameter Store holds. Empty where the config leaves a value to the user data's
    /// NodeConfig (the AL2023 script scenario).
    fn cluster(&self) -> (String, String, String) {
        if self.discovered {
            return (SSM_ENDPOINT.into(), ssm_ca(), SSM_CIDR.into());
        }
        let c = &self.config["cluster"];
        let get = |k: &str| c[k].as_str().unwrap_or_default().to_string();
        (
            get("apiServerEndpoint"),
            get("certificateAuthority"),
            get("cidr"),
        )
    }
}

fn write(path: &Path, text: &str, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn enable(root: &Path, unit: &str, target: &str) {
    let wants = root.join(format!("etc/systemd/system/{target}.wants"));
    std::fs::create_dir_all(&wants).unwrap();
    std::os::unix::fs::symlink(format!("/etc/systemd/system/{unit}"), wants.join(unit)).unwrap();
}

/// The guest's disk for one scenario: the cached root, the DEB installed with dpkg in a chroot,
/// the host's CA trusted, EC2_HOST pointed at the forwarded address, the flavour's recording
/// hand-off, the reporter. Returns the raw ext4 image.
fn disk(sc: &Scenario, image: &Path, work: &Path, ca: &Path, deb: &Path) -> PathBuf {
    let root = work.join("rootfs");
    sh(Command::new("cp")
        .args(["-a", "--reflink=auto"])
        .arg(image.join("rootfs"))
        .arg(&root));
    let guest = e2e_dir().join("guest");
    let copy = |from: &str, to: &str, mode: u32| {
        write(
            &root.join(to),
            &std::fs::read_to_string(guest.join(from)).unwrap(),
            mode,
        )
    };
    copy("e2e-report", "usr/local/sbin/e2e-report", 0o755);
    copy(
        "e2e-report.service",
        "etc/systemd/system/e2e-report.service",
        0o644,
    );
    enable(&root, "e2e-report.service", "cloud-init.target");
    let keys: Vec<&str> = sc.config["sysctls"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    write(
        &root.join("etc/e2e/sysctls"),
        &(keys.join("\n") + "\n"),
        0o644,
    );
    // Where the recording hand-off writes (before the reporter ever runs).
    std::fs::create_dir_all(root.join("var/lib/e2e")).unwrap();
    if sc.warm == Some("Warmed:Running") {
        write(&root.join(warm::WAIT_RELEASE_FLAG), "", 0o644);
    }
    if !sc.by_unit {
        // For the reporter's second-run dry run only; the unit's path stays absent.
        write(
            &root.join("etc/e2e/config.json"),
            &sc.config.to_string(),
            0o600,
        );
    }
    write(
        &root.join("usr/local/share/ca-certificates/eks-nodeinit-e2e.crt"),
        &std::fs::read_to_string(ca).unwrap(),
        0o644,
    );
    sh(Command::new("chroot")
        .arg(&root)
        .args(["update-ca-certificates"]));
    let hosts = std::fs::read_to_string(root.join("etc/hosts")).unwrap_or_default();
    write(
        &root.join("etc/hosts"),
        &format!("{hosts}{GUEST_EC2_ADDR} {EC2_HOST} {SSM_HOST}\n"),
        0o644,
    );
    std::fs::copy(deb, root.join("tmp/eks-nodeinit.deb")).unwrap();
    sh(Command::new("chroot")
        .arg(&root)
        .args(["dpkg", "-i", "/tmp/eks-nodeinit.deb"]));
    std::fs::remove_file(root.join("tmp/eks-nodeinit.deb")).unwrap();
    assert!(
        // An absolute link into the guest's /lib: look at the link itself.
        root.join("etc/systemd/system/multi-user.target.wants/eks-nodeinit.service")
            .symlink_metadata()
            .is_ok(),
        "the DEB's postinst enables the unit"
    );
    // cloud-init's unit as cloud-init renders it for Amazon Linux: Debian's rendering adds
    // `Before=sysinit.target`, which with AL2023's ordering (nodeadm-config.service, and the
    // agent's unit before it, both after sysinit.target, before cloud-init.service) is a cycle.
    let unit = std::fs::read_to_string(root.join("lib/systemd/system/cloud-init.service")).unwrap();
    assert!(unit.contains("\nBefore=sysinit.target\n"), "{unit}");
    write(
        &root.join("etc/systemd/system/cloud-init.service"),
        &unit.replace("\nBefore=sysinit.target\n", "\n"),
        0o644,
    );
    match sc.flavour {
        Flavour::Al2 => {
            // A recording stand-in with the real script's option grammar, which fails as the
            // real one does on a flag without its value (`$2` under nounset) or on --help.
            write(
                &root.join("etc/eks/bootstrap.sh"),
                &common::bootstrap_standin(common::BOOTSTRAP_OPTIONS, GUEST_RECORD_ARGV),
                0o755,
            );
            write(
                &under(&root, kubelet_config()),
                &read_example("al2-root/etc/kubernetes/kubelet/kubelet-config.json"),
                0o644,
            );
        }
        Flavour::Al2023 => {
            copy("nodeadm", "usr/bin/nodeadm", 0o755);
            copy(
                "nodeadm-config.service",
                "etc/systemd/system/nodeadm-config.service",
                0o644,
            );
            copy(
                "nodeadm-run.service",
                "etc/systemd/system/nodeadm-run.service",
                0o644,
            );
            enable(&root, "nodeadm-config.service", "multi-user.target");
            // The AMI's build creates the drop-in directory (templates/al2023/provisioners/
            // install-nodeadm.sh); nodeadm refuses a missing one but passes over an empty one.
            std::fs::create_dir_all(root.join("etc/eks/nodeadm.d")).unwrap();
            enable(&root, "nodeadm-run.service", "cloud-init.target");
        }
    }
    let img = work.join("disk.img");
    sh(Command::new("mkfs.ext4")
        .args(["-q", "-F", "-L", "root", "-d"])
        .arg(&root)
        .arg(&img)
        .arg("3G"));
    sh(Command::new("rm").arg("-rf").arg(&root));
    img
}

/// Facts the guest reported: (boot, name) → bytes.
type Facts = BTreeMap<(u32, String), Vec<u8>>;

fn parse_report(text: &str) -> Facts {
    let mut m = Facts::new();
    for line in text.lines() {
        let mut w = line.trim_end_matches('\r').splitn(4, ' ');
        if w.next() != Some("E2E") {
            continue;
        }
        let (Some(boot), Some(name)) = (w.next().and_then(|b| b.parse().ok()), w.next()) else {
            continue;
        };
        let data = base64::engine::general_purpose::STANDARD
            .decode(w.next().unwrap_or("").trim())
            .unwrap_or_else(|e| format!("<bad base64: {e}>").into_bytes());
        m.insert((boot, name.to_string()), data);
    }
    m
}

struct Run {
    facts: Facts,
    /// CreateTags calls moto had served when the first boot's report ended.
    create_tags_after_boot1: usize,
    boot1_secs: f64,
    total_secs: f64,
}

/// Boot the disk, wait for two reports (the guest reboots itself once, then powers off).
fn boot(
    sc: &Scenario,
    image: &Path,
    disk: &Path,
    work: &Path,
    imds: &ImdsServer,
    ec2: &Ec2,
) -> Run {
    let console = work.join("console.log");
    let report = work.join("report.log");
    let imds_port = imds.addr.port();
    let netdev = format!(
        "user,id=n0,net=169.254.0.0/16,\
         guestfwd=tcp:169.254.169.254:80-cmd:socat - TCP:127.0.0.1:{imds_port},\
         guestfwd=tcp:{GUEST_EC2_ADDR}:443-cmd:socat - TCP:127.0.0.1:{}",
        ec2.tls_port
    );
    let t = Instant::now();
    let mut child = Proc(
        Command::new("qemu-system-x86_64")
            .args(["-accel", accel(image), "-m", "1024", "-smp", "1"])
            .args(["-nodefaults", "-display", "none"])
            .arg("-kernel")
            .arg(image.join("vmlinuz"))
            .arg("-initrd")
            .arg(image.join("initrd.img"))
            .args([
                "-append",
                "root=/dev/vda rw console=ttyS0 net.ifnames=0 systemd.show_status=1",
            ])
            .arg("-drive")
            .arg(format!("file={},format=raw,if=virtio", disk.display()))
            .args(["-netdev", &netdev, "-device", "virtio-net-pci,netdev=n0"])
            .args([
                "-smbios",
                &format!(
                    "type=1,manufacturer=Amazon EC2,product=m6i.large,uuid={DMI_UUID},serial={DMI_UUID}"
                ),
            ])
            .arg("-serial")
            .arg(format!("file:{}", console.display()))
            .arg("-serial")
            .arg(format!("file:{}", report.display()))
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut boot1 = None;
    loop {
        let text = std::fs::read_to_string(&report).unwrap_or_default();
        if sc.warm.is_some() {
            warm::advance(sc, &text, imds);
        }
        if boot1.is_none() && text.contains("E2E 1 end ") {
            boot1 = Some((t.elapsed().as_secs_f64(), ec2.count("CreateTags")));
            eprintln!(
                "[{}] first boot reported after {:.0} s",
                sc.name,
                t.elapsed().as_secs_f64()
            );
        }
        if child.0.try_wait().unwrap().is_some() {
            break;
        }
        if t.elapsed() > VM_TIMEOUT {
            let console = std::fs::read_to_string(&console).unwrap_or_default();
            let tail: Vec<&str> = console.lines().rev().take(60).collect();
            panic!(
                "[{}] the VM did not power off within {VM_TIMEOUT:?}; console tail:\n{}",
                sc.name,
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let total = t.elapsed().as_secs_f64();
    eprintln!("[{}] VM ran {:.0} s in all (two boots)", sc.name, total);
    let facts = parse_report(&std::fs::read_to_string(&report).unwrap_or_default());
    let (boot1_secs, create_tags_after_boot1) = boot1.unwrap_or((f64::NAN, usize::MAX));
    Run {
        facts,
        create_tags_after_boot1,
        boot1_secs,
        total_secs: total,
    }
}

impl Run {
    fn get(&self, boot: u32, name: &str) -> Option<String> {
        self.facts
            .get(&(boot, name.to_string()))
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }
    /// A file the guest reported (guest/e2e-report sends each under `file:<path>`).
    fn file(&self, boot: u32, path: &str) -> String {
        self.must(boot, &format!("file:{path}"))
    }
    fn must(&self, boot: u32, name: &str) -> String {
        self.get(boot, name)
            .unwrap_or_else(|| panic!("boot {boot}: the guest did not report {name}"))
    }
    /// `systemctl show` properties of a unit.
    fn unit(&self, boot: u32, unit: &str) -> BTreeMap<String, String> {
        self.must(boot, &format!("unit:{unit}"))
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }
    /// The stand-ins' hand-off log as the guest reported it at `boot`, one record per call: a
    /// header line, then its `arg`, `dropin` and `result` lines.
    fn handoff_records(&self, boot: u32) -> Vec<String> {
        let mut owned: Vec<String> = Vec::new();
        let log = self
            .get(boot, "file:/var/lib/e2e/handoff.log")
            .unwrap_or_default();
        for l in log.split_inclusive('\n') {
            match owned.last_mut() {
                Some(last)
                    if l.starts_with("arg ")
                        || l.starts_with("dropin ")
                        || l.starts_with("result ") =>
                {
                    last.push_str(l)
                }
                _ => owned.push(l.to_string()),
            }
        }
        owned
    }
    fn debug(&self, boot: u32) -> String {
        format!(
            "--- cloud-init status\n{}\n--- journal\n{}\n--- cloud-init-output.log\n{}",
            self.get(boot, "cloud-init-status").unwrap_or_default(),
            self.get(boot, "journal").unwrap_or_default(),
            self.get(boot, "cloud-init-output").unwrap_or_default()
        )
    }
}

/// Both boots reported to the end, cloud-init done without errors, no unit ordering cycle.
fn check_clean_boots(sc: &Scenario, run: &Run) {
    let ctx = run.debug(1);
    for boot in [1, 2] {
        assert_eq!(
            run.get(boot, "end").as_deref(),
            Some("ok\n"),
            "[{}] boot {boot} did not report to the end\n{ctx}",
            sc.name
        );
    }
    for boot in [1, 2] {
        // A clean boot: cloud-init done without errors, no unit ordering cycle anywhere.
        let status = run.must(boot, "cloud-init-status");
        assert!(
            status.starts_with("status: done"),
            "[{}] boot {boot}: cloud-init {status}\n{}",
            sc.name,
            run.debug(boot)
        );
        let lines: usize = run.must(boot, "journal-lines").trim().parse().unwrap();
        assert!(
            lines > 100,
            "boot {boot}: only {lines} journal lines were readable"
        );
        assert_eq!(
            run.must(boot, "ordering-cycles"),
            "",
            "[{}] boot {boot}: systemd found ordering cycles",
            sc.name
        );
    }
}

/// Every assertion on one scenario's two boots.
fn check(sc: &Scenario, run: &Run, ec2: &Ec2, rt: &tokio::runtime::Runtime) {
    check_clean_boots(sc, run);
    if sc.warm.is_some() {
        return warm::check(sc, run);
    }
    let ctx = run.debug(1);
    let cfg = &sc.config;
    let group = cfg["nodeGroup"]["name"].as_str().unwrap();

    // The agent ran, in the unit or in cloud-final, and recorded success.
    let report: serde_json::Value = serde_json::from_str(&run.file(1, REPORT_PATH))
        .unwrap_or_else(|e| panic!("[{}] report.json: {e}\n{ctx}", sc.name));
    assert_eq!(report["instanceId"], ec2.instance_id.as_str(), "{report:#}");
    assert_eq!(
        report["family"],
        match sc.flavour {
            Flavour::Al2 => "al2",
            Flavour::Al2023 => "al2023",
        },
        "{report:#}"
    );
    let failed: Vec<_> = report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| !s["outcome"].as_str().unwrap_or("").starts_with("done"))
        .collect();
    assert!(failed.is_empty(), "[{}] failed steps: {failed:#?}", sc.name);
    // Created in the foreground, or by the background continuation; `alreadySet` when the
    // continuation found that a CreateTags cut off by the sync budget had landed.
    let outcome = &report["tagging"]["result"]["outcome"];
    assert!(
        outcome == "created"
            || (outcome == "alreadySet" && report["tagging"]["background"] == true),
        "[{}] the report records the tag: {report:#}",
        sc.name
    );

    // Sysctls: live in the kernel on both boots (the second from /etc/sysctl.d via
    // systemd-sysctl), and persisted.
    let persisted = run.file(1, sysctls::PERSIST_PATH);
    for (k, v) in cfg["sysctls"].as_object().unwrap() {
        for boot in [1, 2] {
            assert_eq!(
                run.must(boot, &format!("sysctl:{k}")).trim(),
                v.to_string(),
                "[{}] boot {boot}: live {k}",
                sc.name
            );
        }
        assert!(
            persisted.lines().any(|l| l == format!("{k} = {v}")),
            "[{}] {k} not persisted:\n{persisted}",
            sc.name
        );
    }

    // logind took the drop-in: its InhibitDelayMaxUSec over D-Bus equals the drop-in's value,
    // and covers the grace period. Again after the reboot.
    let grace =
        eks_nodeinit::duration::parse(cfg["kubelet"]["shutdownGracePeriod"].as_str().unwrap())
            .unwrap()
            .as_secs_f64();
    let dropin = run.file(1, logind::DROPIN_PATH);
    let delay: f64 = dropin
        .lines()
        .find_map(|l| l.strip_prefix("InhibitDelayMaxSec="))
        .unwrap_or_else(|| panic!("no InhibitDelayMaxSec in\n{dropin}"))
        .trim()
        .parse()
        .unwrap();
    assert!(delay >= grace, "drop-in {delay} s < grace {grace} s");
    for boot in [1, 2] {
        let got = run.must(boot, "logind");
        assert_eq!(
            got.trim(),
            format!("t {}", (delay * 1e6) as u64),
            "[{}] boot {boot}: logind's InhibitDelayMaxUSec",
            sc.name
        );
    }
    assert_eq!(
        report["logindInhibitDelayMaxUsec"],
        (delay * 1e6) as u64,
        "the agent read back what logind took: {report:#}"
    );

    // The Name tag, set once.
    let want = format!("{group}-{}", ec2.private_ip.replace('.', "x"));
    assert_eq!(
        ec2.tags(rt).unwrap().get("Name"),
        Some(&want),
        "[{}] Name tag",
        sc.name
    );
    assert_eq!(
        run.create_tags_after_boot1,
        1,
        "[{}] CreateTags calls during the first boot; moto saw {:?}",
        sc.name,
        ec2.actions()
    );
    assert_eq!(
        ec2.count("CreateTags"),
        1,
        "[{}] no CreateTags after the reboot: {:?}",
        sc.name,
        ec2.actions()
    );

    // The hand-off, recorded by the stand-ins.
    let owned = run.handoff_records(2);
    let records: Vec<&str> = owned.iter().map(String::as_str).collect();
    match sc.flavour {
        Flavour::Al2 => check_bootstrap(sc, &records, run),
        Flavour::Al2023 => check_nodeadm(sc, &records, run),
    }

    // The packaged unit runs on the first boot in every scenario. With the config in the user
    // data it runs the agent, before nodeadm's config phase; with a user-data script (no config
    // for the unit) it exits 4, which the unit counts as success, and the script runs the agent.
    // After the reboot it does not run again, and systemd reports no failure.
    let u1 = run.unit(1, "eks-nodeinit.service");
    let u2 = run.unit(2, "eks-nodeinit.service");
    assert_eq!(u1["ConditionResult"], "yes", "{u1:?}");
    assert_eq!(u1["ActiveState"], "active", "{u1:?}");
    assert_eq!(u1["Result"], "success", "{u1:?}");
    assert_eq!(
        u1["ExecMainStatus"],
        if sc.by_unit { "0" } else { "4" },
        "[{}] {u1:?}",
        sc.name
    );
    if sc.flavour == Flavour::Al2023 {
        let done: u64 = u1["ExecMainExitTimestampMonotonic"].parse().unwrap();
        for next_unit in ["nodeadm-config.service", "nodeadm-run.service"] {
            let n = run.unit(1, next_unit);
            let next: u64 = n["ExecMainStartTimestampMonotonic"].parse().unwrap();
            assert!(
                done > 0 && done <= next,
                "[{}] eks-nodeinit exited at {done} µs, {next_unit} started at {next} µs",
                sc.name
            );
        }
    }
    // Written by ExecStartPost, after the unit's run (on AL2: bootstrap.sh, exec'd) succeeded.
    assert!(run.get(1, "file:/var/lib/eks-nodeinit/done").is_some());
    assert_eq!(u2["ConditionResult"], "no", "boot 2: {u2:?}");
    assert_eq!(u2["Result"], "success", "boot 2: {u2:?}");
    // Name only: one lookup in Parameter Store, on the first boot; none after the reboot (the
    // unit does not run) nor by the dry runs (the agent's cache).
    assert_eq!(
        ec2.ssm_count("GetParametersByPath"),
        usize::from(sc.discovered),
        "[{}] Parameter Store lookups",
        sc.name
    );

    // The reboot redid nothing: the agent's files are the same inodes with the same mtimes,
    // and a dry run on the configured node plans no change, on both boots.
    for f in [
        sysctls::PERSIST_PATH,
        logind::DROPIN_PATH,
        REPORT_PATH,
        &kubelet_config(),
        nodeconfig::DROPIN,
    ] {
        let name = format!("stat:{f}");
        assert_eq!(run.get(1, &name), run.get(2, &name), "[{}] {f}", sc.name);
    }
    for boot in [1, 2] {
        let plan: serde_json::Value = serde_json::from_str(&run.must(boot, "second-run"))
            .unwrap_or_else(|e| panic!("boot {boot}: second-run plan: {e}\n{}", run.debug(boot)));
        assert_eq!(plan["changes"], 0, "[{}] boot {boot}: {plan:#}", sc.name);
    }

    // The AL2 kubelet config carries the settings; the CA reached nothing the guest printed.
    if sc.flavour == Flavour::Al2 {
        let k: serde_json::Value = serde_json::from_str(&run.file(1, &kubelet_config())).unwrap();
        for key in ["shutdownGracePeriod", "shutdownGracePeriodCriticalPods"] {
            assert_eq!(k[key], cfg["kubelet"][key], "{key}");
        }
    }
    check_logs(sc, run);
    let (_, ca, _) = sc.cluster();
    for name in ["journal", "cloud-init-output", "second-run"] {
        if ca.is_empty() {
            break;
        }
        assert!(
            !run.must(1, name).contains(&ca),
            "[{}] the CA appears in the guest's {name}",
            sc.name
        );
    }
}

/// The agent's logs as an operator reads them: plain lines in cloud-init's output log; in the
/// journal, MESSAGE a string (no colour codes, which journald stores as byte arrays) and the
/// priority the line carries, so `journalctl -u eks-nodeinit -p warning` shows the warning of
/// the scenario that has one and none of the info lines.
fn check_logs(sc: &Scenario, run: &Run) {
    const INFO_LINE: &str = "report written";
    const WARNING: &str = "the instance has no `kubernetes.io/cluster/";
    let output = run.must(1, "cloud-init-output");
    assert!(
        !output.contains('\u{1b}'),
        "[{}] an ESC byte in /var/log/cloud-init-output.log:\n{output:?}",
        sc.name
    );
    let prefixed: Vec<&str> = output
        .lines()
        .filter(|l| l.len() > 3 && l.starts_with('<') && l.as_bytes()[2] == b'>')
        .collect();
    assert!(
        prefixed.is_empty(),
        "[{}] journal priority prefixes in cloud-init's output log: {prefixed:?}",
        sc.name
    );
    // Where the agent's own lines are: cloud-final's output (a script) or the unit's journal.
    let unit = match sc.by_unit {
        true => "eks-nodeinit.service",
        false => "cloud-final.service",
    };
    if !sc.by_unit {
        assert!(output.contains(INFO_LINE), "[{}] {output}", sc.name);
    }
    let entries: Vec<serde_json::Value> = run
        .must(1, "journal-json")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("journal-json: {e}: {l}")))
        .collect();
    for e in &entries {
        assert!(
            e["MESSAGE"].is_string(),
            "[{}] journald stored a MESSAGE as bytes (not a string): {e}",
            sc.name
        );
    }
    // The agent's entries holding `needle` (the plan on standard output repeats its warnings
    // under `warnings:`, at info): their priorities.
    let priorities = |needle: &str| -> Vec<String> {
        let found: Vec<String> = entries
            .iter()
            .filter(|e| {
                e["_SYSTEMD_UNIT"] == unit
                    && e["MESSAGE"].as_str().is_some_and(|m| m.contains(needle))
            })
            .map(|e| e["PRIORITY"].as_str().unwrap_or("").to_string())
            .collect();
        assert!(
            !found.is_empty(),
            "[{}] no `{needle}` from {unit} in the journal:\n{entries:#?}",
            sc.name
        );
        found
    };
    // A unit's stream carries the agent's priority; cloud-init's pipe (tee) logs it all at info.
    let p = priorities(INFO_LINE);
    assert!(p.iter().all(|p| p == "6"), "[{}] {p:?}", sc.name);
    let warnings = run.must(1, "journal-warnings");
    assert!(
        !warnings.contains(INFO_LINE),
        "[{}] info lines at warning priority:\n{warnings}",
        sc.name
    );
    if !sc.cluster_tag {
        assert!(
            warnings.contains(WARNING),
            "[{}] `journalctl -u eks-nodeinit -p warning` lacks the agent's warning:\n{warnings}",
            sc.name
        );
        let p = priorities(WARNING);
        assert!(p.contains(&"4".to_string()), "[{}] {p:?}", sc.name);
    } else {
        assert!(!warnings.contains(WARNING), "[{}] {warnings}", sc.name);
    }
}

fn check_bootstrap(sc: &Scenario, records: &[&str], run: &Run) {
    let calls: Vec<&&str> = records
        .iter()
        .filter(|r| r.starts_with("bootstrap.sh "))
        .collect();
    assert_eq!(
        calls.len(),
        1,
        "bootstrap.sh runs once, not again after the reboot: {records:#?}"
    );
    let rec = calls[0];
    // The agent execs bootstrap.sh from where it ran: the user-data script (cloud-final) or
    // the packaged unit.
    let unit = match sc.by_unit {
        true => "eks-nodeinit.service",
        false => "cloud-final.service",
    };
    assert!(
        rec.lines().next().unwrap().contains(unit),
        "bootstrap.sh should run in {unit}: {rec}"
    );
    let argv: Vec<&str> = rec.lines().filter_map(|l| l.strip_prefix("arg ")).collect();
    let (endpoint, ca, cidr) = sc.cluster();
    assert_eq!(argv[0], sc.config["cluster"]["name"].as_str().unwrap());
    let after = |flag: &str| {
        argv.iter()
            .position(|a| *a == flag)
            .map(|i| argv[i + 1])
            .unwrap_or_else(|| panic!("{flag} missing from {argv:?}"))
    };
    assert_eq!(after("--b64-cluster-ca"), ca);
    assert_eq!(after("--apiserver-endpoint"), endpoint);
    assert_eq!(after("--service-ipv4-cidr"), cidr);
    let extra = after("--kubelet-extra-args");
    for (k, v) in sc.config["labels"].as_object().into_iter().flatten() {
        assert!(
            extra.contains(&format!("{k}={}", v.as_str().unwrap())),
            "{extra}"
        );
    }
    // With kubelet.maxPods, the numbers the node's own files gave (the guest's online CPUs,
    // its DMI vendor) go to the kubelet as flags and bootstrap.sh keeps its own max pods out.
    if !sc.config["kubelet"]["maxPods"].is_null() {
        assert_eq!(after("--use-max-pods"), "false", "{argv:?}");
        let max = pod_capacity_flag(extra, "--max-pods=");
        let reserved = pod_capacity_flag(extra, "--kube-reserved=");
        assert_eq!(max, "29", "m6i.large with secondary IPs: {extra}");
        assert!(reserved.contains("memory=574Mi"), "{extra}");
    }
    // bootstrap.sh takes `--flag value` only: after the cluster name, flags and values
    // alternate and no flag carries `=`.
    assert!(argv.len() % 2 == 1, "{argv:?}");
    assert!(
        argv[1..]
            .iter()
            .step_by(2)
            .all(|f| f.starts_with("--") && !f.contains('=')),
        "{argv:?}"
    );
    // In the boot that handed off, a later run sees the per-boot marker and plans no second
    // exec of bootstrap.sh.
    let again: serde_json::Value = serde_json::from_str(&run.must(1, "second-run")).unwrap();
    assert!(
        !again["steps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["kind"] == "execBootstrap"),
        "boot 1: a second hand-off planned: {again:#}"
    );
    assert!(
        again["warnings"].as_array().unwrap().iter().any(|w| w
            .as_str()
            .unwrap()
            .contains("bootstrap.sh was already exec'd in this boot")),
        "{again:#}"
    );
    // The same argv the plan shows (the CA redacted there): after the reboot (/run is empty)
    // the dry run plans the hand-off again.
    let plan: serde_json::Value = serde_json::from_str(&run.must(2, "second-run")).unwrap();
    let planned: Vec<String> = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["kind"] == "execBootstrap")
        .unwrap()["argv"]
        .as_array()
        .unwrap()
        .iter()
        .skip(1)
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    for (p, a) in planned.iter().zip(&argv) {
        if !p.starts_with("<redacted") {
            assert_eq!(p, a);
        }
    }
    assert_eq!(planned.len(), argv.len());
}

/// The value of one `--flag=value` word in the kubelet's extra arguments.
fn pod_capacity_flag<'a>(extra: &'a str, flag: &str) -> &'a str {
    extra
        .split(' ')
        .find_map(|w| w.strip_prefix(flag))
        .unwrap_or_else(|| panic!("{flag} missing from {extra}"))
}

fn check_nodeadm(sc: &Scenario, records: &[&str], run: &Run) {
    let dropin = run.file(1, nodeconfig::DROPIN);
    let nc: serde_json::Value = serde_json::from_str(&dropin).unwrap();
    assert_eq!(nc["apiVersion"], "node.eks.aws/v1alpha1");
    assert_eq!(nc["kind"], "NodeConfig");
    // With kubelet.maxPods: the computed max pods and the reservation derived from it, in
    // kubelet.config (nodeadm merges it over its own).
    if !sc.config["kubelet"]["maxPods"].is_null() {
        let k = &nc["spec"]["kubelet"]["config"];
        assert_eq!(k["maxPods"], 29, "m6i.large with secondary IPs: {k}");
        assert_eq!(k["kubeReserved"]["memory"], "574Mi", "{k}");
    }
    let dropin_b64 = base64::engine::general_purpose::STANDARD.encode(&dropin);
    let with_dropin = format!("dropin /etc/eks/nodeadm.d/10-eks-nodeinit.json {dropin_b64}");
    let phase = |unit: &str| -> Vec<&&str> {
        records
            .iter()
            .filter(|r| r.lines().next().unwrap_or("").contains(unit))
            .collect()
    };
    // Both phases run on every boot, read the user data and /etc/eks/nodeadm.d/ (the config
    // phase through the package's drop-in), and pass the stand-in's check of nodeadm's own
    // rule: the merged sources hold all four cluster fields.
    for unit in ["nodeadm-config.service", "nodeadm-run.service"] {
        let runs = phase(unit);
        assert_eq!(runs.len(), 2, "[{}] {unit}: {records:#?}", sc.name);
        for r in &runs {
            assert!(r.contains("arg imds://user-data\n"), "{r}");
            assert!(r.contains("arg file:///etc/eks/nodeadm.d/\n"), "{r}");
            assert!(
                r.lines().any(|l| l.starts_with("result ok")),
                "[{}] {unit} failed:\n{r}",
                sc.name
            );
        }
    }
    // The run phase always finds the agent's final drop-in; the config phase too when the
    // unit ran the agent before it (a user-data script runs it later, in cloud-final).
    for r in phase("nodeadm-run.service") {
        assert!(
            r.contains(&with_dropin),
            "[{}] nodeadm-run started without the agent's drop-in:\n{r}",
            sc.name
        );
    }
    if sc.by_unit {
        for r in phase("nodeadm-config.service") {
            assert!(
                r.contains(&with_dropin),
                "[{}] nodeadm-config started without the agent's drop-in:\n{r}",
                sc.name
            );
        }
    }
    if sc.discovered {
        let (endpoint, ca, cidr) = sc.cluster();
        let c = &nc["spec"]["cluster"];
        assert_eq!(c["name"], CLUSTER);
        assert_eq!(c["apiServerEndpoint"], endpoint.as_str());
        assert_eq!(c["certificateAuthority"], ca.as_str());
        assert_eq!(c["cidr"], cidr.as_str());
    }
    let shutdown = sc.config["kubelet"]["shutdownGracePeriod"]
        .as_str()
        .unwrap();
    assert!(dropin.contains(shutdown), "{dropin}");
}

fn e2e(name: &'static str) {
    let deb = match prerequisites() {
        Ok(d) => d,
        Err(why) => return skip(&why),
    };
    let t = Instant::now();
    let sc = scenario(name);
    let image = image();
    let work = tempfile::Builder::new()
        .prefix(&format!("e2e-{name}-"))
        .tempdir_in(cache_root())
        .unwrap();
    let (ca, crt, key) = certificates(work.path());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let ec2 = Ec2::start(&rt, work.path(), &crt, &key);
    if sc.discovered {
        // The name-only scenarios' values, in moto before the boot (the CA a SecureString).
        let prefix = format!("/eks/{CLUSTER}");
        let ca = ssm_ca();
        rt.block_on(put_cluster_parameters(
            &ec2._moto.url,
            &prefix,
            SSM_ENDPOINT,
            &ca,
            SSM_CIDR,
        ));
    }
    let imds = imds(&ec2, &sc);
    let _mirror = TagMirror::start(&rt, &ec2, &imds);
    let disk = disk(&sc, &image, work.path(), &ca, &deb);
    let prepared = t.elapsed().as_secs_f64();
    let run = boot(&sc, &image, &disk, work.path(), &imds, &ec2);
    if std::env::var_os("E2E_KEEP").is_some() {
        let kept = work.keep();
        eprintln!("[{name}] kept {}", kept.display());
        check(&sc, &run, &ec2, &rt);
    } else {
        check(&sc, &run, &ec2, &rt);
    }
    let s = imds.state.lock().unwrap();
    eprintln!(
        "[{name}] passed: prepared in {prepared:.0} s, first report at {:.0} s, two boots {:.0} s; IMDS served {} token PUTs, {} GETs, {} 401s",
        run.boot1_secs, run.total_secs, s.puts, s.gets, s.unauthorized
    );
}

#[test]
#[ignore = "boots a VM: make e2e-vm"]
fn al2_user_data_script_hands_off_to_bootstrap_sh() {
    e2e("al2-user-data");
}

#[test]
#[ignore = "boots a VM: make e2e-vm"]
fn al2023_user_data_writes_the_node_config_before_nodeadm_runs() {
    e2e("al2023-user-data");
}

#[test]
#[ignore = "boots a VM: make e2e-vm"]
fn al2_name_only_user_data_unit_passes_parameter_store_values_to_bootstrap_sh() {
    e2e("al2-name-only");
}

#[test]
#[ignore = "boots a VM: make e2e-vm"]
fn al2023_name_only_user_data_completes_both_nodeadm_phases_from_parameter_store() {
    e2e("al2023-name-only");
}

#[test]
#[ignore = "boots a VM: make e2e-vm"]
fn al2023_warmed_stopped_holds_nodeadm_run_then_hands_off_once_in_service() {
    e2e("al2023-warm-stopped");
}

#[test]
#[ignore = "boots a VM: make e2e-vm"]
fn al2023_warmed_running_hands_off_in_the_same_boot_once_in_service() {
    e2e("al2023-warm-running");
}
