//! systemd over D-Bus, generically: restart a unit through systemd's manager and read a property
//! back until it holds the expected value. The executor runs this effect for any step that
//! asks for it (logind rereading its drop-ins, systemd-resolved its servers) without knowing
//! which aspect planned it.

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
    pub expected: Expected,
    /// The report property that keeps the value read back, if any.
    #[serde(skip)]
    pub record_as: Option<&'static str>,
}

/// The value a property must reach, by the property's D-Bus type.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(untagged)]
pub enum Expected {
    /// A `t`.
    Number(u64),
    /// An `a(iiay)` list of (interface index, address family, address), as systemd-resolved's
    /// `DNS`: the addresses of interface index 0 (the global ones, from its configuration), in
    /// order; the interfaces' own are left out.
    Addresses(Vec<String>),
    /// An `a(isb)` list of (interface index, domain, routing-only), as systemd-resolved's
    /// `Domains`: those of interface index 0, `~` before a routing-only one, in order.
    Domains(Vec<String>),
}

impl std::fmt::Display for Expected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Expected::Number(n) => write!(f, "{n}"),
            Expected::Addresses(a) | Expected::Domains(a) if a.is_empty() => f.write_str("(none)"),
            Expected::Addresses(a) | Expected::Domains(a) => f.write_str(&a.join(" ")),
        }
    }
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
) -> Result<Expected, SystemdError> {
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

/// Read a property of the expected value's type (no property cache).
pub(crate) async fn read_property(
    conn: &zbus::Connection,
    c: &PropertyCheck,
) -> Result<Expected, SystemdError> {
    let err = |message: String| SystemdError::Read {
        service: c.service,
        property: c.property,
        message,
    };
    let v = get(conn, c.service, c.path, c.interface, c.property)
        .await
        .map_err(err)?;
    match c.expected {
        Expected::Number(_) => u64::try_from(v)
            .map(Expected::Number)
            .map_err(|e| err(format!("not a u64: {e}"))),
        Expected::Addresses(_) => global_addresses(v).map(Expected::Addresses).map_err(err),
        Expected::Domains(_) => global_domains(v).map(Expected::Domains).map_err(err),
    }
}

/// The domains of interface index 0 in an `a(isb)` value.
fn global_domains(v: OwnedValue) -> Result<Vec<String>, String> {
    let entries =
        <Vec<(i32, String, bool)>>::try_from(v).map_err(|e| format!("not an a(isb) list: {e}"))?;
    Ok(entries
        .into_iter()
        .filter(|e| e.0 == 0)
        .map(|(_, d, route_only)| match route_only {
            true => format!("~{d}"),
            false => d,
        })
        .collect())
}

/// The addresses of interface index 0 in an `a(iiay)` value, each as its family's text.
fn global_addresses(v: OwnedValue) -> Result<Vec<String>, String> {
    let entries =
        <Vec<(i32, i32, Vec<u8>)>>::try_from(v).map_err(|e| format!("not an a(iiay) list: {e}"))?;
    let mut out = Vec::new();
    for (ifindex, _family, bytes) in entries.into_iter().filter(|e| e.0 == 0) {
        let a: std::net::IpAddr = match bytes.len() {
            4 => <[u8; 4]>::try_from(bytes.as_slice()).map(Into::into),
            16 => <[u8; 16]>::try_from(bytes.as_slice()).map(Into::into),
            n => return Err(format!("an address of {n} bytes on interface {ifindex}")),
        }
        .map_err(|e| e.to_string())?;
        out.push(a.to_string());
    }
    Ok(out)
}
