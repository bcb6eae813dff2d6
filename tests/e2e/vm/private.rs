//! The private-network scenario of the VM e2e (docs/private-networks.md): the shipped
//! `examples/cloud-init/al2023-proxied.mime` (proxy, NO_PROXY entries, a docker.io mirror) with
//! the suite's CA added as `trust.caBundles`, run by the packaged unit on AL2023.
//!
//! On the host, beside moto: Debian's `docker-registry` serving TLS from the suite's CA with a
//! small image, and Debian's `tinyproxy`, which resolves names from an /etc/hosts of its own (a
//! mount namespace): the AWS endpoints to a relay on port 443 in front of moto's TLS terminator,
//! `registry.e2e.test` to the registry. The guest reaches the proxy as `proxy.corp.example:3128`
//! and the mirror as `mirror.corp.example:443` (its /etc/hosts, QEMU's forwards). Its /etc/hosts
//! does not name the AWS endpoints, so the agent's calls reach moto only through the proxy; and
//! it does not trust the suite's CA until the agent installs it.
//!
//! In the guest, after the hand-off (the nodeadm stand-in's run phase starts containerd, as
//! nodeadm does), containerd pulls through CRI as kubelet does: `docker.io/library/tiny:1`
//! through the mirror the agent configured (NO_PROXY names `.corp.example`: directly), and
//! `registry.e2e.test:<port>/library/tiny:1` through the proxy (no NO_PROXY entry names it);
//! both over TLS the guest trusts only through the agent's trust step. The agent's own EC2 call
//! goes through the proxy; IMDS does not.

use super::*;
use crate::common::{peers, registry, tinyproxy};
use eks_nodeinit::plan::aspects::{proxy, trust};

pub(super) const PROXY_HOST: &str = "proxy.corp.example";
pub(super) const MIRROR_HOST: &str = "mirror.corp.example";
/// A registry no NO_PROXY entry names: reached only through the proxy.
pub(super) const REGISTRY_HOST: &str = "registry.e2e.test";
/// Where the guest reaches the proxy and the mirror (QEMU forwards them to the host's).
const GUEST_PROXY_ADDR: &str = "169.254.170.98";
const GUEST_MIRROR_ADDR: &str = "169.254.170.97";
/// Where the proxy's /etc/hosts puts the AWS endpoints: a relay on port 443 (loopback, this
/// address only) to moto's TLS terminator.
const AWS_RELAY_ADDR: &str = "127.0.0.44";
/// The VPC's IPv4 block IMDS reports for the instance's interface.
pub(super) const VPC_CIDR: &str = "10.0.0.0/16";
const REPO: &str = "library/tiny";
const TAG: &str = "1";

pub(super) fn is_private(name: &str) -> bool {
    name == "al2023-private"
}

/// What this scenario needs beside the others: its peers (make deps), and a mount namespace for
/// the proxy's own /etc/hosts.
pub(super) fn prerequisites() -> Result<(), String> {
    let missing = missing_commands(&["docker-registry", "tinyproxy", "unshare", "python3"]);
    if !missing.is_empty() {
        return Err(format!("{missing:?} not installed (make deps)"));
    }
    let probe = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "true"])
        .output();
    match probe {
        Ok(o) if o.status.success() => Ok(()),
        other => Err(format!("`unshare --mount true` failed: {other:?}")),
    }
}

/// The host's side of the private network, stopped when dropped.
pub(super) struct Network {
    _registry: Proc,
    _relay: Proc,
    _proxy: Proc,
    registry_port: u16,
    proxy_port: u16,
    proxy_log: PathBuf,
    registry_log: PathBuf,
}

impl Network {
    pub(super) fn start(work: &Path, ca: &Path, crt: &Path, key: &Path, ec2: &Ec2) -> Network {
        let dir = work.join("private");
        std::fs::create_dir_all(&dir).unwrap();
        let (registry, registry_port, registry_log) = registry::start(&dir, crt, key);
        let base = format!("https://127.0.0.1:{registry_port}");
        registry::push_image(&base, REPO, TAG, ca);
        let mut relay = Proc(
            Command::new("socat")
                .arg(format!(
                    "TCP-LISTEN:443,bind={AWS_RELAY_ADDR},reuseaddr,fork"
                ))
                .arg(format!("TCP:127.0.0.1:{}", ec2.tls_port))
                .stdin(Stdio::null())
                .spawn()
                .unwrap(),
        );
        peers::wait_for("the relay to moto", || {
            std::net::TcpStream::connect((AWS_RELAY_ADDR, 443)).is_ok()
        });
        // Listening, and ours: a socat that could not bind (something else on port 443) exits.
        assert!(
            relay.0.try_wait().unwrap().is_none(),
            "the relay could not listen on {AWS_RELAY_ADDR}:443"
        );
        let hosts = dir.join("hosts");
        std::fs::write(
            &hosts,
            format!(
                "127.0.0.1 localhost\n{AWS_RELAY_ADDR} {EC2_HOST} {SSM_HOST} {PREFLIGHT_HOSTS}\n127.0.0.1 {REGISTRY_HOST}\n"
            ),
        )
        .unwrap();
        let (proxy, proxy_port, proxy_log) = tinyproxy::start(&dir, "", Some(&hosts));
        Network {
            _registry: registry,
            _relay: relay,
            _proxy: proxy,
            registry_port,
            proxy_port,
            proxy_log,
            registry_log,
        }
    }

    /// QEMU's forwards for the guest: (guest address:port, host port on 127.0.0.1).
    pub(super) fn forwards(&self) -> Vec<(String, u16)> {
        vec![
            (format!("{GUEST_PROXY_ADDR}:3128"), self.proxy_port),
            (format!("{GUEST_MIRROR_ADDR}:443"), self.registry_port),
        ]
    }

    /// The images the guest pulls: docker.io's through the mirror, the other through the proxy.
    fn images(&self) -> [String; 2] {
        [
            format!("docker.io/{REPO}:{TAG}"),
            format!("{REGISTRY_HOST}:{}/{REPO}:{TAG}", self.registry_port),
        ]
    }

    /// The guest's side: the names of the proxy and the mirror (not the AWS endpoints: only the
    /// proxy reaches those), the CRI client, the images to pull, and containerd started by the
    /// hand-off.
    pub(super) fn prepare(&self, root: &Path) {
        let hosts = std::fs::read_to_string(root.join("etc/hosts")).unwrap_or_default();
        guest::write(
            &root.join("etc/hosts"),
            &format!("{hosts}{GUEST_PROXY_ADDR} {PROXY_HOST}\n{GUEST_MIRROR_ADDR} {MIRROR_HOST}\n"),
            0o644,
        );
        let client = std::fs::read_to_string(e2e_dir().join("guest/e2e-cri-pull")).unwrap();
        guest::write(&root.join("usr/local/sbin/e2e-cri-pull"), &client, 0o755);
        guest::write(
            &root.join("etc/e2e/pulls"),
            &(self.images().join("\n") + "\n"),
            0o644,
        );
        guest::write(&root.join("etc/e2e/start-containerd"), "", 0o644);
    }
}

/// The shipped example with the suite's CA added as `trust.caBundles`, in the user data and in
/// the scenario's copy of the config.
pub(super) fn add_trust(sc: &mut Scenario, ca: &Path) {
    let pem = std::fs::read_to_string(ca).unwrap();
    let anchor = "  \"registries\": {";
    assert!(sc.user_data.contains(anchor), "{}", sc.user_data);
    let bundles = serde_json::json!({ "caBundles": [pem] });
    sc.user_data = sc
        .user_data
        .replacen(anchor, &format!("  \"trust\": {bundles},\n{anchor}"), 1);
    sc.config["trust"] = bundles;
}

/// The NO_PROXY the guest's units must carry: loopback and IMDS, the VPC's block (IMDS), the
/// service CIDR, `.internal` and the Region's EC2 domain, then the example's entries.
fn want_no_proxy(sc: &Scenario) -> String {
    let mut want: Vec<String> = [
        "localhost",
        "127.0.0.1",
        "::1",
        "169.254.169.254",
        "fd00:ec2::254",
        VPC_CIDR,
        sc.config["cluster"]["cidr"].as_str().unwrap(),
        ".internal",
        &format!(".{REGION}.compute.internal"),
    ]
    .map(String::from)
    .to_vec();
    for e in sc.config["proxy"]["noProxy"].as_array().unwrap() {
        want.push(e.as_str().unwrap().to_string());
    }
    want.join(",")
}

/// The proxy variables `unit` has at `boot`, as `systemctl show -p Environment` gives them
/// (none of the values holds a space or a character systemctl would quote).
fn unit_proxy(run: &Run, boot: u32, unit: &str) -> Vec<String> {
    run.unit(boot, unit)["Environment"]
        .split(' ')
        .filter(|kv| kv.to_ascii_lowercase().contains("_proxy="))
        .map(String::from)
        .collect()
}

/// The scenario's own checks, after the common ones (checks::check).
pub(super) fn check(sc: &Scenario, run: &Run, net: &Network) {
    let name = sc.name;
    let p = &sc.config["proxy"];
    let (https, http) = (p["https"].as_str().unwrap(), p["http"].as_str().unwrap());
    assert_eq!(https, format!("http://{PROXY_HOST}:3128"));
    let no_proxy = want_no_proxy(sc);
    let want: Vec<String> = [
        ("HTTPS_PROXY", https),
        ("https_proxy", https),
        ("HTTP_PROXY", http),
        ("http_proxy", http),
        ("NO_PROXY", &no_proxy),
        ("no_proxy", &no_proxy),
    ]
    .iter()
    .map(|(k, v)| format!("{k}={v}"))
    .collect();
    for boot in [1, 2] {
        // containerd, started by the hand-off, runs with the proxy: as systemd has the unit,
        // and in the running process's environment.
        let unit = run.unit(boot, "containerd.service");
        assert_eq!(
            unit["ActiveState"], "active",
            "[{name}] boot {boot}: {unit:?}"
        );
        let running: Vec<String> = run
            .must(boot, "containerd-environ")
            .lines()
            .map(String::from)
            .collect();
        assert_eq!(sorted(&running), sorted(&want), "[{name}] boot {boot}");
        // Systemd loaded the nodeadm units at boot, before the agent wrote their drop-ins: they
        // hold the proxy only because the agent had systemd reload.
        for unit in [
            "containerd.service",
            "nodeadm-config.service",
            "nodeadm-run.service",
        ] {
            let got = unit_proxy(run, boot, unit);
            assert_eq!(got, want, "[{name}] boot {boot}: {unit}");
        }
        // Both pulls, through CRI, by containerd itself.
        for image in net.images() {
            let got = run.must(boot, &format!("pull:{image}"));
            assert!(
                got.starts_with("ok sha256:"),
                "[{name}] boot {boot}: containerd's pull of {image}: {got}"
            );
        }
    }
    check_logs(sc, net);
    check_files(sc, run);
}

fn sorted(v: &[String]) -> Vec<String> {
    let mut v = v.to_vec();
    v.sort();
    v
}

/// docker.io's pull went to the mirror (containerd adds ns=docker.io for a mirror), directly;
/// the other registry's through the proxy. The proxy carried the agent's EC2 calls and that
/// registry's pulls, nothing else: not IMDS, not the mirror, not docker.io itself.
fn check_logs(sc: &Scenario, net: &Network) {
    let name = sc.name;
    let log = std::fs::read_to_string(&net.registry_log).unwrap();
    assert!(
        log.contains(&format!("/v2/{REPO}/manifests/{TAG}?ns=docker.io")),
        "[{name}] the mirror was not asked: {log}"
    );
    let proxied = tinyproxy::proxied(&net.proxy_log);
    let ec2 = format!("CONNECT {EC2_HOST}:443 ");
    let registry = format!("CONNECT {REGISTRY_HOST}:{} ", net.registry_port);
    assert!(
        proxied.iter().any(|r| r.starts_with(&ec2)),
        "[{name}] the agent's EC2 call did not go through the proxy: {proxied:?}"
    );
    assert!(
        proxied.iter().any(|r| r.starts_with(&registry)),
        "[{name}] containerd's pull did not go through the proxy: {proxied:?}"
    );
    // The preflight reaches the cluster's endpoint and STS as kubelet would: through the proxy,
    // which NO_PROXY does not name them for.
    let preflight = |r: &String| {
        let host = r.split_whitespace().nth(1).unwrap_or("");
        host.ends_with(".eks.amazonaws.com:443")
            || PREFLIGHT_HOSTS
                .split(' ')
                .any(|h| host == format!("{h}:443"))
    };
    assert!(
        proxied
            .iter()
            .any(|r| r.starts_with("CONNECT sts.eu-west-1.amazonaws.com:443 ")),
        "[{name}] the preflight's STS check did not go through the proxy: {proxied:?}"
    );
    let other: Vec<&String> = proxied
        .iter()
        .filter(|r| !r.starts_with(&ec2) && !r.starts_with(&registry) && !preflight(r))
        .collect();
    assert!(other.is_empty(), "[{name}] proxied: {other:?}");
}

/// The agent's files: the mirror's hosts.toml (no CA or skip_verify of its own: the pull trusts
/// the rebuilt store), the anchor holding the CA, the rebuild record, the drop-in; the same
/// files, untouched, after the reboot.
fn check_files(sc: &Scenario, run: &Run) {
    let name = sc.name;
    let hosts_toml = "/etc/containerd/certs.d/docker.io/hosts.toml";
    let hosts = run.file(1, hosts_toml);
    assert!(
        hosts.contains(&format!("[host.\"https://{MIRROR_HOST}\"]")),
        "[{name}] {hosts}"
    );
    assert!(
        !hosts.contains("ca =") && !hosts.contains("skip_verify"),
        "[{name}] {hosts}"
    );
    let anchor = trust::anchor(trust::DEBIAN, 0);
    let pem = sc.config["trust"]["caBundles"][0].as_str().unwrap();
    assert_eq!(
        run.file(1, &anchor).trim(),
        pem.trim(),
        "[{name}] the anchor"
    );
    let record = run.file(1, trust::RECORD);
    assert!(
        record.contains("update-ca-certificates"),
        "[{name}] {record}"
    );
    let dropin = proxy::dropin("containerd.service");
    for f in [hosts_toml, &anchor, trust::RECORD, &dropin] {
        run.unchanged(f);
    }
    assert!(run
        .must(1, &format!("stat:{dropin}"))
        .ends_with(" 644 root:root\n"));
}
