//! A private dbus-daemon for the tests (the real one, from Debian's dbus package), and a
//! stand-in for the part of systemd's manager the agent calls to start or restart a unit.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use zbus::zvariant::OwnedObjectPath;

pub struct Bus {
    child: Child,
    pub address: String,
    _dir: tempfile::TempDir,
}

impl Drop for Bus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start a private dbus-daemon. In CI it must exist; on a developer box without it, say so.
pub fn start_bus() -> Option<Bus> {
    if !super::peer_present(&super::missing_commands(&["dbus-daemon"])) {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("bus");
    let conf = dir.path().join("bus.conf");
    std::fs::write(
        &conf,
        format!(
            r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>custom</type>
  <listen>unix:path={}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
"#,
            sock.display()
        ),
    )
    .unwrap();
    let mut child = Command::new("dbus-daemon")
        .arg(format!("--config-file={}", conf.display()))
        .args(["--nofork", "--print-address=1"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let address = super::peers::first_line(&mut child);
    Some(Bus {
        child,
        address,
        _dir: dir,
    })
}

/// One call to the stand-in manager: method, unit, mode.
pub type UnitCall = (String, String, String);

struct Manager {
    calls: Arc<Mutex<Vec<UnitCall>>>,
    /// Units it answers "not loaded" for, and `Reload` when that method is refused.
    refuse: Vec<String>,
    /// Units with `ConditionPathExists=!PATH`: started while PATH exists, systemd queues the job
    /// and skips the unit, recorded here as `StartUnit (condition failed)`.
    skip_while: Vec<(String, PathBuf)>,
}

impl Manager {
    fn record(
        &self,
        method: &str,
        name: String,
        mode: String,
    ) -> zbus::fdo::Result<OwnedObjectPath> {
        let refused = self.refuse.contains(&name);
        let skipped = self
            .skip_while
            .iter()
            .any(|(unit, path)| *unit == name && path.exists());
        let method = if skipped {
            format!("{method} (condition failed)")
        } else {
            method.to_string()
        };
        self.calls
            .lock()
            .unwrap()
            .push((method, name.clone(), mode));
        if refused {
            return Err(zbus::fdo::Error::Failed(format!("Unit {name} not loaded.")));
        }
        Ok(OwnedObjectPath::try_from("/org/freedesktop/systemd1/job/7").unwrap())
    }
}

#[zbus::interface(name = "org.freedesktop.systemd1.Manager")]
impl Manager {
    async fn start_unit(&self, name: String, mode: String) -> zbus::fdo::Result<OwnedObjectPath> {
        self.record("StartUnit", name, mode)
    }
    async fn restart_unit(&self, name: String, mode: String) -> zbus::fdo::Result<OwnedObjectPath> {
        self.record("RestartUnit", name, mode)
    }
    /// Recorded as `("Reload", "", "")`; refused when `refuse` names the method `Reload`.
    async fn reload(&self) -> zbus::fdo::Result<()> {
        self.calls
            .lock()
            .unwrap()
            .push(("Reload".into(), String::new(), String::new()));
        match self.refuse.iter().any(|r| r == "Reload") {
            true => Err(zbus::fdo::Error::AccessDenied("Reload refused".into())),
            false => Ok(()),
        }
    }
}

/// Serve the stand-in manager as org.freedesktop.systemd1 on `address`; every call is
/// recorded, units in `refuse` are answered as not loaded (and `Reload` in it refuses the
/// method), and each `(unit, path)` in
/// `skip_while` is a unit with `ConditionPathExists=!path`.
pub fn serve_manager(
    address: &str,
    refuse: &[&str],
    skip_while: &[(&str, &Path)],
) -> Arc<Mutex<Vec<UnitCall>>> {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let manager = Manager {
        calls: calls.clone(),
        refuse: refuse.iter().map(|s| s.to_string()).collect(),
        skip_while: skip_while
            .iter()
            .map(|(u, p)| (u.to_string(), p.to_path_buf()))
            .collect(),
    };
    serve(address, move |b| {
        b.name("org.freedesktop.systemd1")?
            .serve_at("/org/freedesktop/systemd1", manager)
    });
    calls
}

/// Serve what `build` adds to a connection to `address`, from a thread of its own, until the
/// test ends; returns once the names are owned.
pub fn serve<F>(address: &str, build: F)
where
    F: FnOnce(
            zbus::connection::Builder<'static>,
        ) -> zbus::Result<zbus::connection::Builder<'static>>
        + Send
        + 'static,
{
    let address = address.to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let builder = zbus::connection::Builder::address(address.as_str()).unwrap();
            let _conn = build(builder).unwrap().build().await.unwrap();
            tx.send(()).unwrap();
            std::future::pending::<()>().await;
        });
    });
    rx.recv().unwrap();
}

/// A unit's state as the stand-in serves it: `org.freedesktop.systemd1.Unit.ActiveState`.
struct UnitObject {
    state: Arc<Mutex<String>>,
}

#[zbus::interface(name = "org.freedesktop.systemd1.Unit")]
impl UnitObject {
    #[zbus(property)]
    async fn active_state(&self) -> String {
        self.state.lock().unwrap().clone()
    }
}

/// The manager's `LoadUnit` for the units the stand-in knows (any other: `NoSuchUnit`), and
/// its `StartUnit` and `StopUnit`, recorded (a power-off's `poweroff.target`, kubelet stopped).
struct Loader {
    units: Vec<String>,
    calls: Arc<Mutex<Vec<UnitCall>>>,
}

/// A unit's object path as systemd writes it: every byte but letters and digits as `_xx`.
fn unit_path(name: &str) -> OwnedObjectPath {
    let escaped: String = name
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' => (b as char).to_string(),
            _ => format!("_{b:02x}"),
        })
        .collect();
    OwnedObjectPath::try_from(format!("/org/freedesktop/systemd1/unit/{escaped}")).unwrap()
}

#[zbus::interface(name = "org.freedesktop.systemd1.Manager")]
impl Loader {
    async fn load_unit(&self, name: String) -> zbus::fdo::Result<OwnedObjectPath> {
        if self.units.contains(&name) {
            Ok(unit_path(&name))
        } else {
            Err(zbus::fdo::Error::Failed(format!("Unit {name} not found.")))
        }
    }

    async fn start_unit(&self, name: String, mode: String) -> zbus::fdo::Result<OwnedObjectPath> {
        let call = ("StartUnit".to_string(), name, mode);
        self.calls.lock().unwrap().push(call);
        Ok(OwnedObjectPath::try_from("/org/freedesktop/systemd1/job/7").unwrap())
    }

    async fn stop_unit(&self, name: String, mode: String) -> zbus::fdo::Result<OwnedObjectPath> {
        let call = ("StopUnit".to_string(), name, mode);
        self.calls.lock().unwrap().push(call);
        Ok(OwnedObjectPath::try_from("/org/freedesktop/systemd1/job/8").unwrap())
    }
}

/// Serve, as org.freedesktop.systemd1 on `address`, the manager's `LoadUnit` and each unit's
/// `ActiveState`, read from its cell whenever asked (a test changes it while the agent waits);
/// the manager's `StartUnit` calls are recorded in what it returns.
pub fn serve_unit_states(
    address: &str,
    units: &[(&str, Arc<Mutex<String>>)],
) -> Arc<Mutex<Vec<UnitCall>>> {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let loader = Loader {
        units: units.iter().map(|(n, _)| n.to_string()).collect(),
        calls: calls.clone(),
    };
    let objects: Vec<_> = units
        .iter()
        .map(|(n, s)| (unit_path(n), UnitObject { state: s.clone() }))
        .collect();
    serve(address, move |b| {
        let mut b = b
            .name("org.freedesktop.systemd1")?
            .serve_at("/org/freedesktop/systemd1", loader)?;
        for (path, object) in objects {
            b = b.serve_at(path, object)?;
        }
        Ok(b)
    });
    calls
}
