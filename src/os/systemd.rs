//! systemd over D-Bus, generically: restart a unit through systemd's manager and read a property
//! back until it holds the expected value. The executor runs this effect for any step that
//! asks for it (today: logind rereading its drop-ins) without knowing which aspect planned it.

use std::time::Duration;

use zbus::zvariant::OwnedValue;

/// A property read back after a restart, and the value it must reach.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PropertyCheck {
    /// The bus name of the service that owns the object.
    pub service: &'static str,
    pub path: &'static str,
    pub interface: &'static str,
    pub property: &'static str,
    pub expected: u64,
    /// The report property that keeps the value read back, if any.
    #[serde(skip)]
    pub record_as: Option<&'static str>,
}

#[derive(Debug, thiserror::Error)]
pub enum SystemdError {
    #[error("cannot connect to the system D-Bus ({address}): {source}")]
    Connect {
        address: String,
        #[source]
        source: zbus::Error,
    },
    #[error("systemd refused to {job} {unit} over D-Bus: {source}")]
    Refused {
        job: Job,
        unit: String,
        #[source]
        source: zbus::Error,
    },
    #[error("systemd refused to reload its units over D-Bus (Manager.Reload): {source}")]
    Reload {
        #[source]
        source: zbus::Error,
    },
    #[error("cannot read {property} from {service}: {message}")]
    Read {
        service: &'static str,
        property: &'static str,
        message: String,
    },
}

/// The address the agent would use for the system bus.
pub(crate) fn system_bus_address() -> String {
    std::env::var("DBUS_SYSTEM_BUS_ADDRESS")
        .unwrap_or_else(|_| "unix:path=/var/run/dbus/system_bus_socket".to_string())
}

/// Connect to a bus by address.
pub async fn connect(address: &str) -> Result<zbus::Connection, SystemdError> {
    let err = |source| SystemdError::Connect {
        address: address.to_string(),
        source,
    };
    zbus::connection::Builder::address(address)
        .map_err(err)?
        .build()
        .await
        .map_err(err)
}

/// Restart the unit through systemd's manager (so it rereads its configuration), then read the
/// property back, waiting up to `wait` for it to reach the expected value. Returns the value
/// read last.
pub(crate) async fn restart_and_read(
    conn: &zbus::Connection,
    unit: &str,
    check: &PropertyCheck,
    wait: Duration,
) -> Result<u64, SystemdError> {
    queue(conn, unit, Job::Restart).await?;
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let last = read_property(conn, check).await;
        match &last {
            Ok(v) if *v == check.expected => return last,
            _ if tokio::time::Instant::now() >= deadline => return last,
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// A job systemd's manager queues for a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Job {
    Start,
    Restart,
    Stop,
}

impl std::fmt::Display for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Job::Start => "start",
            Job::Restart => "restart",
            Job::Stop => "stop",
        })
    }
}

/// Ask systemd's manager to start, restart or stop a unit, replacing a conflicting job; returns once
/// the job is queued.
pub async fn queue(conn: &zbus::Connection, unit: &str, job: Job) -> Result<(), SystemdError> {
    let method = match job {
        Job::Start => "StartUnit",
        Job::Restart => "RestartUnit",
        Job::Stop => "StopUnit",
    };
    conn.call_method(
        Some("org.freedesktop.systemd1"),
        "/org/freedesktop/systemd1",
        Some("org.freedesktop.systemd1.Manager"),
        method,
        &(unit, "replace"),
    )
    .await
    .map(|_| ())
    .map_err(|source| SystemdError::Refused {
        job,
        unit: unit.to_string(),
        source,
    })
}

/// Power the machine off as `systemctl poweroff` does: `poweroff.target` started, no job may
/// replace it.
pub async fn power_off(conn: &zbus::Connection) -> Result<(), SystemdError> {
    conn.call_method(
        Some("org.freedesktop.systemd1"),
        "/org/freedesktop/systemd1",
        Some("org.freedesktop.systemd1.Manager"),
        "StartUnit",
        &("poweroff.target", "replace-irreversibly"),
    )
    .await
    .map(|_| ())
    .map_err(|source| SystemdError::Refused {
        job: Job::Start,
        unit: "poweroff.target".to_string(),
        source,
    })
}

/// Have systemd's manager reload every unit file and drop-in (`Manager.Reload`); returns once
/// the reload is done (systemd answers after it).
pub async fn reload(conn: &zbus::Connection) -> Result<(), SystemdError> {
    conn.call_method(
        Some("org.freedesktop.systemd1"),
        "/org/freedesktop/systemd1",
        Some("org.freedesktop.systemd1.Manager"),
        "Reload",
        &(),
    )
    .await
    .map(|_| ())
    .map_err(|source| SystemdError::Reload { source })
}

/// A unit's `ActiveState` (`active`, `activating`, `inactive`, `failed`, …), the unit loaded by
/// systemd's manager if it was not (`LoadUnit`: a unit never started reads `inactive`).
pub async fn active_state(conn: &zbus::Connection, unit: &str) -> Result<String, SystemdError> {
    let err = |message: String| SystemdError::Read {
        service: "org.freedesktop.systemd1",
        property: "ActiveState",
        message: format!("{unit}: {message}"),
    };
    let reply = conn
        .call_method(
            Some("org.freedesktop.systemd1"),
            "/org/freedesktop/systemd1",
            Some("org.freedesktop.systemd1.Manager"),
            "LoadUnit",
            &(unit,),
        )
        .await
        .map_err(|e| err(e.to_string()))?;
    let path: zbus::zvariant::OwnedObjectPath =
        reply.body().deserialize().map_err(|e| err(e.to_string()))?;
    let v = get(
        conn,
        "org.freedesktop.systemd1",
        path.as_str(),
        "org.freedesktop.systemd1.Unit",
        "ActiveState",
    )
    .await
    .map_err(err)?;
    String::try_from(v).map_err(|e| err(format!("not a string: {e}")))
}

/// One property through `org.freedesktop.DBus.Properties.Get` (no property cache).
async fn get(
    conn: &zbus::Connection,
    service: &str,
    path: &str,
    interface: &str,
    property: &str,
) -> Result<OwnedValue, String> {
    let reply = conn
        .call_method(
            Some(service),
            path,
            Some("org.freedesktop.DBus.Properties"),
            "Get",
            &(interface, property),
        )
        .await
        .map_err(|e| e.to_string())?;
    reply.body().deserialize().map_err(|e| e.to_string())
}

/// Read a `u64` property (no property cache).
pub(crate) async fn read_property(
    conn: &zbus::Connection,
    c: &PropertyCheck,
) -> Result<u64, SystemdError> {
    let err = |message: String| SystemdError::Read {
        service: c.service,
        property: c.property,
        message,
    };
    let v = get(conn, c.service, c.path, c.interface, c.property)
        .await
        .map_err(err)?;
    u64::try_from(v).map_err(|e| err(format!("not a u64: {e}")))
}
