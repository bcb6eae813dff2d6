//! The first boot for real: a Debian bookworm VM (systemd, dbus, cloud-init, Debian's kernel)
//! under QEMU, with the agent installed from its DEB. The guest's 169.254.169.254:80 reaches the
//! strict IMDSv2 server of this test suite, and `ec2.eu-west-1.amazonaws.com` (through the
//! guest's /etc/hosts and a CA the guest trusts) reaches moto behind a TLS terminator: the
//! agent runs with no test-only setting, from the shipped user-data examples.
//!
//! Twelve boots-and-reboots, each checked from the host through the guest's second serial port
//! (see guest/e2e-report): the AL2 user-data script with a recording bootstrap.sh, the AL2023
//! MIME user data with a recording nodeadm, and the packaged unit with a cloud-config only, on
//! AL2023 and on AL2; on AL2023 the two warm-pool paths (warm.rs): warmed and stopped, then in
//! service after the reboot; warmed and running, in service without one; and on AL2023 a node in
//! a private network (private.rs): a proxy, a CA bundle and a registry mirror, with containerd
//! pulling through them; and on AL2023 a node that joins a real kube-apiserver and proves it
//! (join.rs), and one whose role the cluster does not map, abandoned before the hand-off; and on
//! AL2023 a node hardened as a STIG image (hardened.rs): `kernel.panic = 0` and /opt `noexec`
//! stop the first boot before any change, and after the fix the second boot hands off; and on
//! AL2023 a node on an IPv6-only network (ipv6.rs), IMDS at `[fd00:ec2::254]` alone.
//!
//! Run with `make e2e-vm` (root, QEMU, debootstrap, socat, moto; see tests/e2e/vm/README.md).
//! Without them each test says why it is skipped; with `E2E_REQUIRED=1` it fails instead.

mod aws;
mod checks;
// The integration suites' shared helpers, of which this binary uses a part.
#[path = "../../common/mod.rs"]
#[allow(dead_code)]
mod common;
mod guest;
mod hardened;
mod ipv6;
mod join;
mod private;
mod retired;
mod unfit;
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
use eks_nodeinit::exec::report::REPORT_PATH;
use eks_nodeinit::os::fsutil::under;
use eks_nodeinit::plan::aspects::{logind, sysctls};
use eks_nodeinit::plan::handoff::al2023 as nodeconfig;

use aws::{Ec2, TagMirror};
use checks::check;
use common::tls::{certificates_for, sh};
use guest::{boot, disk, imds};

const REGION: &str = "eu-west-1";
const EC2_HOST: &str = "ec2.eu-west-1.amazonaws.com";
/// Where the guest reaches the EC2 API (its /etc/hosts maps EC2_HOST here).
const GUEST_EC2_ADDR: &str = "169.254.170.99";
const CLUSTER: &str = "prod-eu";
/// Parameter Store, reached like the EC2 API (its name mapped to GUEST_EC2_ADDR, moto behind TLS).
const SSM_HOST: &str = "ssm.eu-west-1.amazonaws.com";
/// The endpoints the agent's preflight reaches beside EC2 (docs/join.md), reached like it: STS
/// and ECR's API and registry.
const PREFLIGHT_HOSTS: &str =
    "sts.eu-west-1.amazonaws.com api.ecr.eu-west-1.amazonaws.com 602401143452.dkr.ecr.eu-west-1.amazonaws.com autoscaling.eu-west-1.amazonaws.com";
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
    let missing = missing_commands(&[
        "qemu-system-x86_64",
        "debootstrap",
        "socat",
        "mkfs.ext4",
        "openssl",
        "chroot",
    ]);
    if !missing.is_empty() {
        return Err(format!("{missing:?} not installed (make e2e-vm-deps)"));
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

/// What the guest reaches over TLS, in the suite's server certificate: the AWS endpoints, and
/// the private-network scenario's registry (as the mirror, by its own name, and on 127.0.0.1,
/// where the test pushes its image).
fn tls_names() -> Vec<String> {
    let mut names: Vec<String> = [
        EC2_HOST,
        SSM_HOST,
        private::MIRROR_HOST,
        private::REGISTRY_HOST,
    ]
    .into_iter()
    .chain(PREFLIGHT_HOSTS.split(' '))
    .chain(ipv6::DUAL_STACK_HOSTS.split(' '))
    .map(|h| format!("DNS:{h}"))
    .collect();
    names.push("IP:127.0.0.1".into());
    names
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
    /// The private-network scenario (private.rs): proxy, CA bundle and mirror.
    private: bool,
    /// What Parameter Store holds when not the constants (the scenario that joins: its API
    /// server's endpoint and CA): (endpoint, CA base64, CIDR).
    ssm: Option<(String, String, String)>,
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
        "al2023-private" => ("cloud-init/al2023-proxied.mime", Flavour::Al2023, true),
        "al2023-warm-stopped"
        | "al2023-warm-running"
        | "al2023-joins"
        | "al2023-unmapped"
        | "al2023-hardened"
        | "al2023-retired"
        | "al2023-unfit"
        | "al2023-ipv6-only" => ("cloud-init/al2023-name-only.mime", Flavour::Al2023, true),
        _ => unreachable!("{name}"),
    };
    let user_data = read_example(file);
    // A script carries the config in a heredoc; for the unit, the user data holds it as the
    // agent reads it.
    let config = match by_unit {
        true => {
            eks_nodeinit::instance::userdata::agent_config(user_data.as_bytes())
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
        private: private::is_private(name),
        ssm: None,
    }
}

/// The agent's part of a name-only user data written again from `sc.config` (a scenario that
/// edits the shipped config).
fn rewrite_config(sc: &mut Scenario) {
    let part = serde_json::to_string_pretty(&sc.config).unwrap();
    let start = sc.user_data.find("{\n").unwrap();
    let end = sc.user_data.rfind("}\n").unwrap() + 1;
    sc.user_data.replace_range(start..end, &part);
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
        if let Some(ssm) = &self.ssm {
            return ssm.clone();
        }
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

/// Facts the guest reported: (boot, name) → bytes.
type Facts = BTreeMap<(u32, String), Vec<u8>>;

struct Run {
    facts: Facts,
    /// CreateTags calls moto had served when the first boot's report ended.
    create_tags_after_boot1: usize,
    boot1_secs: f64,
    total_secs: f64,
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
    /// The file at `path` is on both boots, the same inode with the same mtime and mode: the
    /// reboot did not rewrite it.
    fn unchanged(&self, path: &str) {
        let stat = format!("stat:{path}");
        assert_eq!(self.must(1, &stat), self.must(2, &stat), "{path}");
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

/// What the scenario needs on the host: the DEB, and a private network's or a cluster's tools.
fn ready(name: &str) -> Result<PathBuf, String> {
    match (private::is_private(name), join::needs_cluster(name)) {
        (true, _) => prerequisites().and_then(|deb| private::prerequisites().map(|()| deb)),
        (_, true) => prerequisites().and_then(|deb| join::prerequisites().map(|()| deb)),
        _ => prerequisites(),
    }
}

/// The name-only scenarios' values, in moto before the boot (the CA a SecureString).
async fn put_discovered(sc: &Scenario, ec2: &Ec2) {
    let prefix = format!("/eks/{CLUSTER}");
    let (endpoint, ca, cidr) = sc.cluster();
    put_cluster_parameters(&ec2._moto.url, &prefix, &endpoint, &ca, &cidr).await;
}

fn e2e(name: &'static str) {
    let deb = match ready(name) {
        Ok(d) => d,
        Err(why) => return skip(&why),
    };
    let t = Instant::now();
    let mut sc = scenario(name);
    hardened::edit_user_data(&mut sc);
    retired::edit_user_data(&mut sc);
    ipv6::edit(&mut sc);
    let image = image();
    let work = tempfile::Builder::new()
        .prefix(&format!("e2e-{name}-"))
        .tempdir_in(cache_root())
        .unwrap();
    let (ca, crt, key) = certificates_for(work.path(), &tls_names());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let ec2 = Ec2::start(&rt, work.path(), &crt, &key);
    let _front6 = ipv6::front(&sc, &ec2, &crt, &key);
    let net = sc.private.then(|| {
        private::add_trust(&mut sc, &ca);
        private::Network::start(work.path(), &ca, &crt, &key, &ec2)
    });
    let unmapped = join::is_unmapped(name);
    let cluster = join::cluster_for(&mut sc, &ec2, &rt);
    unfit::edit_user_data(&mut sc);
    if sc.discovered {
        rt.block_on(put_discovered(&sc, &ec2));
    }
    let imds = imds(&ec2, &sc);
    if let Some(c) = &cluster {
        c.serve_role(&imds, unmapped);
    }
    let _mirror = TagMirror::start(&rt, &ec2, &imds);
    let disk = disk(
        &sc,
        &image,
        work.path(),
        &ca,
        &deb,
        net.as_ref(),
        cluster.as_ref(),
    );
    let prepared = t.elapsed().as_secs_f64();
    let mut forwards = net.as_ref().map(|n| n.forwards()).unwrap_or_default();
    forwards.extend(cluster.as_ref().map(|c| c.forward()));
    let host = guest::HostPeers {
        imds: &imds,
        ec2: &ec2,
        forwards,
        cluster: cluster.as_ref(),
    };
    unfit::before_boot(&sc, &ec2, &rt);
    let before = retired::before_boot(&sc, &ec2, &rt);
    let run = boot(&sc, &image, &disk, work.path(), &host);
    let console = std::fs::read_to_string(work.path().join("console.log")).unwrap_or_default();
    // The work directory holds the peers' logs the checks read: kept, or removed after them.
    if std::env::var_os("E2E_KEEP").is_some() {
        eprintln!("[{name}] kept {}", work.keep().display());
    }
    if unmapped {
        join::check_abandoned(&sc, &run, &ec2, &console);
    } else if hardened::is_hardened(name) {
        hardened::check(&sc, &run, &ec2, &console);
    } else if retired::is_retired(name) {
        retired::check(&sc, &run, (&ec2, &rt), &console, before);
    } else if unfit::is_unfit(name) {
        let c = cluster.as_ref().unwrap();
        unfit::check(&sc, &run, (&ec2, &rt), (&console, before), c);
    } else {
        let peers = (net.as_ref(), cluster.as_ref(), &imds);
        common_checks(&sc, &run, (&ec2, &rt), peers, prepared);
    }
}

/// The checks of the scenarios that hand off and join as planned, then the run's figures.
fn common_checks(
    sc: &Scenario,
    run: &Run,
    (ec2, rt): (&Ec2, &tokio::runtime::Runtime),
    (net, cluster, imds): (
        Option<&private::Network>,
        Option<&join::Cluster>,
        &ImdsServer,
    ),
    prepared: f64,
) {
    let name = sc.name;
    check(sc, run, ec2, rt);
    if ipv6::is_ipv6(name) {
        ipv6::check(sc, run, ec2);
    }
    if let Some(net) = net {
        private::check(sc, run, net);
    }
    if let Some(c) = cluster {
        join::check(sc, run, c);
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

#[test]
#[ignore = "boots a VM: make e2e-vm"]
fn al2023_on_an_ipv6_only_network_finds_imds_and_aws_by_their_ipv6_names() {
    e2e("al2023-ipv6-only");
}

#[test]
#[ignore = "boots a VM: make e2e-vm"]
fn al2023_private_network_proxy_ca_and_mirror_reach_containerd() {
    e2e("al2023-private");
}

#[test]
#[ignore = "boots a VM: make e2e-vm"]
fn al2023_node_joins_a_real_api_server_and_shuts_down_gracefully() {
    e2e("al2023-joins");
}

#[test]
#[ignore = "boots a VM: make e2e-vm"]
fn al2023_unmapped_role_fails_the_preflight_and_abandons_the_launch() {
    e2e("al2023-unmapped");
}

#[test]
#[ignore = "boots a VM: make e2e-vm"]
fn al2023_hardened_ami_stops_before_any_change_then_hands_off_once_fixed() {
    e2e("al2023-hardened");
}

#[test]
#[ignore = "boots a VM: make e2e-vm"]
fn al2023_node_that_cannot_join_says_why_on_the_console_then_terminates_itself() {
    e2e("al2023-retired");
}

#[test]
#[ignore = "boots a VM: make e2e-vm"]
fn al2023_node_missing_its_gpu_starts_the_kubelet_after_the_gate_stays_tainted_and_retires() {
    e2e("al2023-unfit");
}
