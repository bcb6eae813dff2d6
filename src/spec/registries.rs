//! The `registries` section checked: registry names as images use them, mirror URLs containerd
//! can reach, CAs that are PEM certificates. Every problem a finding naming its field.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::base::findings::Findings;
use crate::base::text::printable;
use crate::config::{MirrorDetail, RegistrySettings};

/// One registry's `hosts.toml`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistrySpec {
    /// As images name it, and the directory under certs.d: `docker.io`, `registry.corp:5000`.
    pub name: String,
    /// The registry itself: `https://registry-1.docker.io` for `docker.io`, else `https://<name>`.
    pub server: String,
    pub ca: Option<String>,
    pub skip_verify: bool,
    pub mirrors: Vec<MirrorSpec>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorSpec {
    /// Without a trailing `/`.
    pub url: String,
    pub ca: Option<String>,
    pub skip_verify: bool,
}

/// Every registry that passed its checks, in name order.
pub(crate) fn spec(c: &BTreeMap<String, RegistrySettings>, f: &mut Findings) -> Vec<RegistrySpec> {
    let mut out = Vec::new();
    for (name, r) in c {
        let field = format!("registries.\"{}\"", printable(name));
        let before = f.0.len();
        f.check(&field, check_name(name));
        let ca = check_ca(r.ca.as_deref(), &format!("{field}.ca"), f);
        let mirrors: Vec<MirrorSpec> = r
            .mirrors
            .iter()
            .enumerate()
            .filter_map(|(i, m)| mirror(m, &format!("{field}.mirrors[{i}]"), f))
            .collect();
        if f.0.len() == before {
            out.push(RegistrySpec {
                name: name.clone(),
                server: server_of(name),
                ca,
                skip_verify: r.skip_verify,
                mirrors,
            });
        }
    }
    out
}

fn server_of(name: &str) -> String {
    match name {
        "docker.io" => "https://registry-1.docker.io".into(),
        n => format!("https://{n}"),
    }
}

/// `host[:port]`: DNS labels or an IPv4 address, a port from 1 to 65535.
pub(super) fn check_host_port(s: &str) -> bool {
    let (host, port) = match s.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (s, None),
    };
    let label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    let host_ok = !host.is_empty() && host.len() <= 253 && host.split('.').all(label);
    let port_ok = port.map_or(true, |p| {
        !p.is_empty()
            && p.bytes().all(|b| b.is_ascii_digit())
            && p.parse::<u16>().is_ok_and(|n| n > 0)
    });
    host_ok && port_ok
}

fn check_name(name: &str) -> Result<(), String> {
    if check_host_port(name) {
        return Ok(());
    }
    let hint = if name.contains("://") {
        ": a registry is named without a scheme, as images name it (`registry.corp.example:5000`)"
    } else if name.contains('/') {
        ": a registry name has no path (`registry.corp.example:5000`)"
    } else {
        ": `host` or `host:port`, as images name the registry (`docker.io`, `registry.corp.example:5000`)"
    };
    Err(format!(
        "`{}` is not a registry name{hint}",
        printable(name)
    ))
}

/// A mirror URL: `https://host[:port][/path]` (`http://` only when `insecure`), without the
/// trailing `/`.
fn check_url(url: &str, insecure: bool) -> Result<String, String> {
    let shown = printable(url);
    let rest = match (url.strip_prefix("https://"), url.strip_prefix("http://")) {
        (Some(r), _) => r,
        (None, Some(r)) if insecure => r,
        (None, Some(_)) => return Err(format!("`{shown}` is http://: say `\"insecure\": true` in the mirror's object to allow it, or use https://")),
        (None, None) => return Err(format!("`{shown}` is not a URL: a mirror is `https://host[:port][/path]`")),
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path_ok = path
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/'));
    if !check_host_port(authority) || !path_ok {
        return Err(format!(
            "`{shown}` is not a mirror URL: `https://host[:port][/path]`, the path of letters, digits and `-._~/`"
        ));
    }
    Ok(url.trim_end_matches('/').to_string())
}

fn check_ca(ca: Option<&str>, field: &str, f: &mut Findings) -> Option<String> {
    let ca = ca?;
    // Never echoed: only why it is not certificates.
    f.check(
        field,
        crate::base::pem::certificates(ca).map_err(|why| format!("the value {why}")),
    )
    .map(|_| ca.to_string())
}

/// A mirror: a URL, or a [`MirrorDetail`] (serde names an unknown or missing field).
fn mirror(v: &Value, field: &str, f: &mut Findings) -> Option<MirrorSpec> {
    let m = match v {
        Value::String(url) => MirrorDetail {
            url: url.clone(),
            ca: None,
            skip_verify: false,
            insecure: false,
        },
        Value::Object(_) => f.check(
            field,
            serde_json::from_value::<MirrorDetail>(v.clone())
                .map_err(|e| crate::base::text::serde_message(&e)),
        )?,
        _ => {
            f.push(field, "a mirror is a URL string or an object with `url`");
            return None;
        }
    };
    let url = f.check(format!("{field}.url"), check_url(&m.url, m.insecure));
    let before = f.0.len();
    let ca = check_ca(m.ca.as_deref(), &format!("{field}.ca"), f);
    (f.0.len() == before).then_some(())?;
    Some(MirrorSpec {
        url: url?,
        ca,
        skip_verify: m.skip_verify,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(json: &str) -> (Vec<RegistrySpec>, Vec<String>) {
        let c: BTreeMap<String, RegistrySettings> = serde_json::from_str(json).unwrap();
        let mut f = Findings::default();
        let s = spec(&c, &mut f);
        (s, f.0.iter().map(|x| x.to_string()).collect())
    }

    #[test]
    fn a_mirror_a_ca_and_docker_hubs_server() {
        let ca = std::fs::read_to_string("tests/fixtures/cluster-ca.pem").unwrap();
        let json = serde_json::json!({
            "docker.io": {"mirrors": ["https://mirror.corp.example/",
                                      {"url": "https://10.1.2.3:5000", "ca": ca}]},
            "registry.corp.example:5000": {"ca": ca}
        });
        let (s, f) = run(&json.to_string());
        assert!(f.is_empty(), "{f:?}");
        assert_eq!(s[0].server, "https://registry-1.docker.io");
        assert_eq!(s[0].mirrors[0].url, "https://mirror.corp.example");
        assert_eq!(s[0].mirrors[1].ca.as_deref(), Some(ca.as_str()));
        assert_eq!(s[1].server, "https://registry.corp.example:5000");
    }

    #[test]
    fn bad_names_urls_and_cas_are_named_errors() {
        for (json, field, needle) in [
            (
                r#"{"https://r.example": {}}"#,
                "registries.\"https://r.example\"",
                "without a scheme",
            ),
            (
                r#"{"r.example/ns": {}}"#,
                "registries.\"r.example/ns\"",
                "no path",
            ),
            (
                r#"{"r.example:0": {}}"#,
                "registries.\"r.example:0\"",
                "not a registry name",
            ),
            (
                r#"{"docker.io": {"mirrors": ["mirror.corp"]}}"#,
                "registries.\"docker.io\".mirrors[0].url",
                "not a URL",
            ),
            (
                r#"{"docker.io": {"mirrors": ["http://m.corp"]}}"#,
                "registries.\"docker.io\".mirrors[0].url",
                "insecure",
            ),
            (
                r#"{"docker.io": {"mirrors": ["https://m.corp/a b"]}}"#,
                "registries.\"docker.io\".mirrors[0].url",
                "not a mirror URL",
            ),
            (
                r#"{"docker.io": {"mirrors": [{"url": "https://m", "tls": 1}]}}"#,
                "registries.\"docker.io\".mirrors[0]",
                "unknown field `tls`",
            ),
            (
                r#"{"docker.io": {"mirrors": [7]}}"#,
                "registries.\"docker.io\".mirrors[0]",
                "URL string",
            ),
            (
                r#"{"docker.io": {"ca": "secret-not-pem"}}"#,
                "registries.\"docker.io\".ca",
                "is not PEM certificates",
            ),
        ] {
            let (s, f) = run(json);
            assert!(s.is_empty(), "{json}");
            assert!(
                f.iter().any(|x| x.starts_with(field) && x.contains(needle)),
                "{json}: want {field} / {needle}, got {f:?}"
            );
            assert!(
                f.iter().all(|x| !x.contains("secret-not-pem")),
                "never echoed: {f:?}"
            );
        }
        let (s, f) = run(
            r#"{"docker.io": {"mirrors": [{"url": "http://10.0.0.1:5000", "insecure": true}]}}"#,
        );
        assert!(f.is_empty(), "{f:?}");
        assert_eq!(s[0].mirrors[0].url, "http://10.0.0.1:5000");
    }
}
