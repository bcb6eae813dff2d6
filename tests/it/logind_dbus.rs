//! The logind step against a real dbus-daemon on a private bus. A small service on that bus
//! implements the two methods the agent uses, the way systemd and logind do: systemd1's
//! `Manager.RestartUnit` (which makes the logind side re-read its drop-ins from the node root)
//! and login1's `InhibitDelayMaxUSec` property.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use common::dbus::start_bus;
use common::*;
use zbus::zvariant::OwnedObjectPath;

#[derive(Default)]
struct Calls {
    restarts: Vec<(String, String)>,
}

/// What logind would take from the node root: the last InhibitDelayMaxSec in the drop-ins
/// under etc/systemd/logind.conf.d, in file-name order; 5 s by default.
fn logind_delay_usec(root: &Path) -> u64 {
    let mut names: Vec<PathBuf> = std::fs::read_dir(root.join("etc/systemd/logind.conf.d"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "conf"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let mut sec = 5u64;
    for n in names {
        for l in std::fs::read_to_string(n).unwrap().lines() {
            if let Some(v) = l.strip_prefix("InhibitDelayMaxSec=") {
                sec = v.trim().parse().unwrap();
            }
        }
    }
    sec * 1_000_000
}

struct Systemd {
    root: PathBuf,
    calls: Arc<Mutex<Calls>>,
    delay: Arc<Mutex<u64>>,
}

#[zbus::interface(name = "org.freedesktop.systemd1.Manager")]
impl Systemd {
    async fn restart_unit(&self, name: String, mode: String) -> zbus::fdo::Result<OwnedObjectPath> {
        self.calls
            .lock()
            .unwrap()
            .restarts
            .push((name.clone(), mode));
        if name != "systemd-logind.service" {
            return Err(zbus::fdo::Error::Failed(format!("unit {name} not loaded")));
        }
        *self.delay.lock().unwrap() = logind_delay_usec(&self.root);
        Ok(OwnedObjectPath::try_from("/org/freedesktop/systemd1/job/42").unwrap())
    }
}

struct Login {
    delay: Arc<Mutex<u64>>,
}

#[zbus::interface(name = "org.freedesktop.login1.Manager")]
impl Login {
    #[zbus(property(emits_changed_signal = "false"), name = "InhibitDelayMaxUSec")]
    async fn inhibit_delay_max_usec(&self) -> u64 {
        *self.delay.lock().unwrap()
    }
}

/// Run the fake systemd + logind on the bus from a thread of its own.
fn start_services(address: String, root: PathBuf) -> Arc<Mutex<Calls>> {
    let calls = Arc::new(Mutex::new(Calls::default()));
    let delay = Arc::new(Mutex::new(5_000_000u64));
    let systemd = Systemd {
        root,
        calls: calls.clone(),
        delay: delay.clone(),
    };
    common::dbus::serve(&address, move |b| {
        b.name("org.freedesktop.systemd1")?
            .name("org.freedesktop.login1")?
            .serve_at("/org/freedesktop/systemd1", systemd)?
            .serve_at("/org/freedesktop/login1", Login { delay })
    });
    calls
}

fn config(root: &Path) -> PathBuf {
    config_with(root, "c.json", |v| {
        v["tagging"] = serde_json::json!({"enabled": false})
    })
}

#[test]
fn logind_takes_the_dropin_over_dbus() {
    let Some(bus) = start_bus() else { return };
    let root = sample_root("al2023-root");
    let calls = start_services(bus.address.clone(), root.path().to_path_buf());
    let cfg = config(root.path());
    let out = init(root.path(), &cfg, &["--system-bus-address", &bus.address]);
    assert!(out.status.success());
    assert_eq!(
        calls.lock().unwrap().restarts,
        [("systemd-logind.service".to_string(), "replace".to_string())]
    );
    let rep = report(root.path());
    assert_eq!(rep["logindInhibitDelayMaxUsec"], 90_000_000u64);
    assert!(rep["steps"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["outcome"] == "done: InhibitDelayMaxUSec=90000000"));

    // A second run: the drop-in is in place, logind is not restarted again.
    let out = init(root.path(), &cfg, &["--system-bus-address", &bus.address]);
    assert!(out.status.success());
    assert_eq!(calls.lock().unwrap().restarts.len(), 1);
}

#[test]
fn a_later_dropin_with_a_smaller_value_is_reported() {
    let Some(bus) = start_bus() else { return };
    let root = sample_root("al2023-root");
    let d = root.path().join("etc/systemd/logind.conf.d");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("zzz-override.conf"),
        "[Login]\nInhibitDelayMaxSec=10\n",
    )
    .unwrap();
    let calls = start_services(bus.address.clone(), root.path().to_path_buf());
    let out = init(
        root.path(),
        &config(root.path()),
        &["--system-bus-address", &bus.address],
    );
    assert!(out.status.success());
    assert_eq!(calls.lock().unwrap().restarts.len(), 1);
    assert!(
        stdout(&out).contains("/etc/systemd/logind.conf.d/zzz-override.conf sorts after"),
        "the plan warns"
    );
    let rep = report(root.path());
    assert_eq!(rep["logindInhibitDelayMaxUsec"], 10_000_000u64);
    assert!(rep["warnings"]
        .to_string()
        .contains("logind reports InhibitDelayMaxUSec=10000000, expected 90000000"));
}

#[test]
fn no_bus_skips_only_the_notification() {
    let root = sample_root("al2023-root");
    let out = run(cmd()
        .args([
            "init",
            "--system-bus-address",
            "unix:path=/nonexistent/bus",
            "--metadata",
        ])
        .arg(example("metadata.json"))
        .arg("--config")
        .arg(config(root.path()))
        .arg("--root")
        .arg(root.path()));
    assert!(out.status.success(), "a missing bus must not fail the boot");
    assert!(root
        .path()
        .join("etc/systemd/logind.conf.d/99-zz-eks-nodeinit.conf")
        .exists());
    assert!(root
        .path()
        .join("etc/eks/nodeadm.d/10-eks-nodeinit.json")
        .exists());
    assert!(stderr(&out).contains("not notifying systemd-logind: cannot connect to the system D-Bus (unix:path=/nonexistent/bus)"));
}
