//! `network`: the node's resolvers in force before the agent's discovery and checks. A real
//! dbus-daemon carries the suite's stand-ins for systemd's manager and systemd-resolved:
//! `RestartUnit("systemd-resolved.service")` reads the node root's resolved configuration the
//! way systemd-resolved does (the main file, then every `resolved.conf.d` drop-in by file name;
//! `DNS=` and `Domains=` add to the list, an empty one clears it) and notes how many discovery
//! calls the suite's Parameter Store had answered by then; `org.freedesktop.resolve1.Manager`
//! shows the result as `DNS` (`a(iiay)`, an interface's own server beside the global ones) and
//! `Domains` (`a(isb)`).

use crate::common;

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use common::discovery_server::{DiscoveryServer, DiscoveryState};
use common::*;
use serde_json::{json, Value};
use zbus::zvariant::OwnedObjectPath;

const CLUSTER: &str = "prod-eu";
const FILE: &str = "run/systemd/resolved.conf.d/40-eks.conf";

/// systemd-resolved's global servers and domains from the node root's configuration.
fn resolved_config(root: &Path) -> (Vec<IpAddr>, Vec<(String, bool)>) {
    let mut files = vec![root.join("etc/systemd/resolved.conf")];
    let mut dropins: Vec<(String, PathBuf)> = Vec::new();
    for dir in ["etc", "run", "usr/lib"] {
        let Ok(rd) = std::fs::read_dir(root.join(dir).join("systemd/resolved.conf.d")) else {
            continue;
        };
        for e in rd.flatten() {
            let name = e.file_name().into_string().unwrap();
            if name.ends_with(".conf") && !dropins.iter().any(|(n, _)| *n == name) {
                dropins.push((name, e.path()));
            }
        }
    }
    dropins.sort();
    files.extend(dropins.into_iter().map(|(_, p)| p));
    let (mut dns, mut domains) = (Vec::new(), Vec::new());
    for f in files {
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        for line in text.lines() {
            if let Some(v) = line.strip_prefix("DNS=") {
                if v.trim().is_empty() {
                    dns.clear();
                }
                dns.extend(v.split_whitespace().map(|a| a.parse::<IpAddr>().unwrap()));
            } else if let Some(v) = line.strip_prefix("Domains=") {
                if v.trim().is_empty() {
                    domains.clear();
                }
                for d in v.split_whitespace() {
                    let (name, route) = match d.strip_prefix('~') {
                        Some(n) => (n, true),
                        None => (d, false),
                    };
                    let name = match name {
                        "." => ".",
                        n => n.trim_end_matches('.'),
                    };
                    domains.push((name.to_string(), route));
                }
            }
        }
    }
    (dns, domains)
}

#[derive(Default)]
struct Seen {
    /// Each restart: the unit, and the discovery calls answered before it.
    restarts: Vec<(String, usize)>,
    dns: Vec<IpAddr>,
    domains: Vec<(String, bool)>,
}

struct Systemd {
    root: PathBuf,
    seen: Arc<Mutex<Seen>>,
    discovery: Arc<Mutex<DiscoveryState>>,
}

#[zbus::interface(name = "org.freedesktop.systemd1.Manager")]
impl Systemd {
    async fn restart_unit(
        &self,
        name: String,
        _mode: String,
    ) -> zbus::fdo::Result<OwnedObjectPath> {
        let answered = self.discovery.lock().unwrap().calls.len();
        let mut seen = self.seen.lock().unwrap();
        seen.restarts.push((name.clone(), answered));
        if name != "systemd-resolved.service" {
            // logind's restart fails at once: no wait for a property no one serves here.
            return Err(zbus::fdo::Error::Failed(format!("unit {name} not loaded")));
        }
        (seen.dns, seen.domains) = resolved_config(&self.root);
        Ok(OwnedObjectPath::try_from("/org/freedesktop/systemd1/job/7").unwrap())
    }
}

struct Resolve {
    seen: Arc<Mutex<Seen>>,
}

#[zbus::interface(name = "org.freedesktop.resolve1.Manager")]
impl Resolve {
    #[zbus(property(emits_changed_signal = "false"), name = "DNS")]
    async fn dns(&self) -> Vec<(i32, i32, Vec<u8>)> {
        let seen = self.seen.lock().unwrap();
        // An interface's own server (DHCP's), which is not the configuration's.
        let mut v = vec![(2, 2, vec![10, 0, 0, 2])];
        v.extend(seen.dns.iter().map(|a| match a {
            IpAddr::V4(a) => (0, 2, a.octets().to_vec()),
            IpAddr::V6(a) => (0, 10, a.octets().to_vec()),
        }));
        v
    }

    #[zbus(property(emits_changed_signal = "false"), name = "Domains")]
    async fn domains(&self) -> Vec<(i32, String, bool)> {
        let seen = self.seen.lock().unwrap();
        let mut v = vec![(2, "eu-west-1.compute.internal".to_string(), false)];
        v.extend(seen.domains.iter().map(|(d, r)| (0, d.clone(), *r)));
        v
    }
}

fn start_services(address: &str, root: &Path, discovery: &DiscoveryServer) -> Arc<Mutex<Seen>> {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let systemd = Systemd {
        root: root.to_path_buf(),
        seen: seen.clone(),
        discovery: discovery.state.clone(),
    };
    let resolve = Resolve { seen: seen.clone() };
    common::dbus::serve(address, move |b| {
        b.name("org.freedesktop.systemd1")?
            .name("org.freedesktop.resolve1")?
            .serve_at("/org/freedesktop/systemd1", systemd)?
            .serve_at("/org/freedesktop/resolve1", resolve)
    });
    seen
}

/// The cluster's values in the suite's Parameter Store.
fn parameter_store() -> DiscoveryServer {
    let ca = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        std::fs::read(manifest_dir().join("tests/fixtures/cluster-ca.pem")).unwrap(),
    );
    let p = format!("/eks/{CLUSTER}");
    DiscoveryServer::start(DiscoveryState {
        parameters: [
            (
                format!("{p}/APISERVER_ENDPOINT"),
                "https://k.example".to_string(),
            ),
            (format!("{p}/B64_CLUSTER_CA"), ca),
            (format!("{p}/SERVICE_CIDR"), "10.100.0.0/16".to_string()),
        ]
        .into_iter()
        .collect(),
        ..Default::default()
    })
}

fn config(root: &Path, ssm: &str, network: Value) -> PathBuf {
    config_with(root, "c.json", |v| {
        v["cluster"] = json!({"name": CLUSTER, "discovery": {"ssmEndpoint": ssm}});
        v["tagging"] = json!({"enabled": false});
        v["network"] = network;
    })
}

/// nodeadm's merge of the root's drop-ins, in name order.
fn merged_dropins(root: &Path) -> Value {
    let dir = root.join("etc/eks/nodeadm.d");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    let docs: Vec<Value> = names
        .iter()
        .map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
        .collect();
    handoff_models::nodeadm_merge(&docs)
}

#[test]
fn the_resolvers_are_in_force_before_discovery_and_nodeadm_writes_the_same_file() {
    let Some(bus) = common::dbus::start_bus() else {
        return;
    };
    let root = sample_root("al2023-root");
    let ssm = parameter_store();
    let seen = start_services(&bus.address, root.path(), &ssm);
    let network =
        json!({"nameservers": ["10.0.0.53", "fd00:ec2::253"], "domains": ["corp.example"]});
    let cfg = config(root.path(), &ssm.url(), network);
    let bus_arg = ["--system-bus-address", bus.address.as_str()];

    // The dry run shows the resolvers first, before the checks and every other step.
    let out = init(root.path(), &cfg, &["--dry-run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let first = text
        .find("run first, before discovery and every check")
        .unwrap_or_else(|| panic!("{text}"));
    let file = text
        .find("/run/systemd/resolved.conf.d/40-eks.conf")
        .unwrap();
    let restart = text
        .find(
            "restart systemd-resolved.service over D-Bus and expect DNS = 10.0.0.53 fd00:ec2::253",
        )
        .unwrap();
    let checks = text.find("checks: ").unwrap();
    let then = text
        .find("then, with the facts read and the checks run:")
        .unwrap();
    assert!(
        first < file && file < restart && restart < checks && checks < then,
        "{text}"
    );
    assert!(
        text.contains("[1] create /run/systemd/resolved.conf.d/40-eks.conf"),
        "{text}"
    );
    let out = init(root.path(), &cfg, &["--dry-run", "--output", "json"]);
    let plan: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        plan["beforeDiscovery"].as_array().unwrap().len(),
        2,
        "{plan:#}"
    );
    assert!(!root.path().join(FILE).exists(), "a dry run writes nothing");
    assert!(seen.lock().unwrap().restarts.is_empty());
    let dry_run_calls = ssm.state.lock().unwrap().calls.len();

    let out = init(root.path(), &cfg, &bus_arg);
    assert!(out.status.success(), "{}", stderr(&out));
    let restarts = seen.lock().unwrap().restarts.clone();
    assert_eq!(
        restarts
            .iter()
            .filter(|(u, _)| u == "systemd-resolved.service")
            .collect::<Vec<_>>(),
        [&("systemd-resolved.service".to_string(), dry_run_calls)],
        "restarted once, before the run's first discovery call"
    );
    assert!(
        ssm.state.lock().unwrap().calls.len() > dry_run_calls,
        "then discovery ran"
    );
    let written = std::fs::read_to_string(root.path().join(FILE)).unwrap();
    assert_eq!(
        Some(written.clone()),
        handoff_models::nodeadm_resolve_file(&merged_dropins(root.path())),
        "nodeadm's config phase writes the same bytes from the merged NodeConfig"
    );
    assert_eq!(
        written,
        "[Resolve]\nDNS=10.0.0.53 fd00:ec2::253\nDomains=corp.example\n"
    );
    let rep = report(root.path());
    assert_eq!(
        rep["resolver"],
        json!(["10.0.0.53", "fd00:ec2::253"]),
        "{rep:#}"
    );
    let steps = rep["steps"].as_array().unwrap();
    assert!(
        steps[0]["step"].as_str().unwrap().contains("40-eks.conf"),
        "{rep:#}"
    );
    assert_eq!(
        steps[1]["outcome"], "done: DNS=10.0.0.53 fd00:ec2::253",
        "{rep:#}"
    );
    assert!(stdout(&out).contains("run before discovery and every check (done)"));

    // A second run: the file is in place, systemd-resolved is not restarted again.
    let out = init(root.path(), &cfg, &bus_arg);
    assert!(out.status.success(), "{}", stderr(&out));
    let n = seen
        .lock()
        .unwrap()
        .restarts
        .iter()
        .filter(|(u, _)| u == "systemd-resolved.service")
        .count();
    assert_eq!(n, 1);
    let out = init(root.path(), &cfg, &["--dry-run", "--output", "json"]);
    let plan: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(plan.get("beforeDiscovery").is_none(), "{plan:#}");
}

#[test]
fn servers_another_file_adds_are_a_mismatch_and_domains_alone_are_read_back() {
    let Some(bus) = common::dbus::start_bus() else {
        return;
    };
    let root = sample_root("al2023-root");
    let d = root.path().join("etc/systemd/resolved.conf.d");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("90-corp.conf"), "[Resolve]\nDNS=192.0.2.1\n").unwrap();
    let ssm = parameter_store();
    let seen = start_services(&bus.address, root.path(), &ssm);
    let cfg = config(
        root.path(),
        &ssm.url(),
        json!({"nameservers": ["10.0.0.53"]}),
    );
    let out = init(root.path(), &cfg, &["--system-bus-address", &bus.address]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rep = report(root.path());
    assert!(
        rep["warnings"]
            .to_string()
            .contains("reports DNS=10.0.0.53 192.0.2.1, expected 10.0.0.53"),
        "{rep:#}"
    );

    assert_eq!(
        seen.lock().unwrap().restarts.len(),
        2,
        "resolved and logind"
    );

    let Some(bus) = common::dbus::start_bus() else {
        return;
    };
    let root = sample_root("al2023-root");
    let seen = start_services(&bus.address, root.path(), &ssm);
    let cfg = config(
        root.path(),
        &ssm.url(),
        json!({"domains": ["corp.example.", "~."]}),
    );
    let out = init(root.path(), &cfg, &["--system-bus-address", &bus.address]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        seen.lock().unwrap().restarts[0].0,
        "systemd-resolved.service"
    );
    let rep = report(root.path());
    assert_eq!(rep["resolver"], json!(["corp.example", "~."]), "{rep:#}");
}

#[test]
fn al2_is_refused_before_anything_changes() {
    let root = sample_root("al2-root");
    let before = snapshot(root.path());
    let cfg = config_with(root.path(), "c.json", |v| {
        v["tagging"] = json!({"enabled": false});
        v["network"] = json!({"nameservers": ["10.0.0.53"]});
    });
    let out = init(root.path(), &cfg, &[]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("network: sets systemd-resolved's servers"),
        "{}",
        stderr(&out)
    );
    let mut after = snapshot(root.path());
    after.remove(Path::new("c.json"));
    let mut before = before;
    before.remove(Path::new("c.json"));
    assert!(before == after, "nothing changed");
}
