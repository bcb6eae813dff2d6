//! Go's `net/url.Parse` (Go 1.26) for an `https://` URL, reduced to its verdict: whether Go
//! parses it, and why not. The kubelet parses each credential provider's `matchImages` entry so
//! (`ParseSchemelessURL`: `url.Parse("https://" + pattern)`) and refuses its whole provider
//! config, and so does not start, when one fails. Written from reading Go's source and checked
//! against Go itself over a generated corpus (tests/it/go_url.rs).

/// Why Go's `url.Parse("https://" + s)` fails; `Ok` when it parses.
pub fn parse_schemeless(s: &str) -> Result<(), String> {
    // `Parse` cuts the fragment off first; the control-character check covers the rest only.
    let (u, fragment) = match s.split_once('#') {
        Some((u, f)) => (u, Some(f)),
        None => (s, None),
    };
    if u.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err("a control character".into());
    }
    let rest = if u.ends_with('?') && u.matches('?').count() == 1 {
        &u[..u.len() - 1]
    } else {
        u.split_once('?').map_or(u, |(r, _)| r)
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    parse_authority(authority)?;
    unescape(path, Mode::Other).map_err(|e| format!("in the path, {e}"))?;
    if let Some(f) = fragment {
        unescape(f, Mode::Other).map_err(|e| format!("in the fragment, {e}"))?;
    }
    Ok(())
}

/// `parseAuthority`: the host after the last `@`, then the user information before it.
fn parse_authority(authority: &str) -> Result<(), String> {
    let (user, host) = match authority.rfind('@') {
        Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
        None => (None, authority),
    };
    parse_host(host)?;
    let Some(user) = user else { return Ok(()) };
    if let Some(c) = user.chars().find(|&c| !userinfo_char(c)) {
        return Err(format!(
            "`{}` in the user information before `@` (net/url: invalid userinfo)",
            c.escape_default()
        ));
    }
    unescape(user, Mode::Other)
        .map(drop)
        .map_err(|e| format!("in the user information, {e}"))
}

/// `validUserinfo`: ASCII letters and digits, `-._:~!$&'()*+,;=%@`.
fn userinfo_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-._:~!$&'()*+,;=%@".contains(c)
}

/// `parseHost` for `https`: an IP literal in brackets with an optional port, or a name whose
/// port, after its first `:`, is digits.
fn parse_host(host: &str) -> Result<(), String> {
    match host.rfind('[') {
        Some(i) if i > 0 => Err("`[` inside the host (invalid IP-literal)".into()),
        Some(_) => ip_literal(host),
        None => {
            if let Some(i) = host.find(':') {
                valid_optional_port(&host[i..])?;
            }
            unescape(host, Mode::Host)
                .map(drop)
                .map_err(|e| format!("in the host, {e}"))
        }
    }
}

/// `[address]` with an optional `:port`; the address an IPv6 one, with an optional zone after
/// `%25`.
fn ip_literal(host: &str) -> Result<(), String> {
    let close = host.rfind(']').ok_or("`[` without `]` in the host")?;
    let colon_port = &host[close + 1..];
    valid_optional_port(colon_port)?;
    let inside = &host[1..close];
    let (addr, zone) = match inside.find("%25") {
        Some(z) => (&inside[..z], Some(&inside[z..])),
        None => (inside, None),
    };
    let addr = unescape(addr, Mode::Host).map_err(|e| format!("in the host, {e}"))?;
    let zone = match zone {
        Some(z) => Some(unescape(z, Mode::Zone).map_err(|e| format!("in the zone, {e}"))?),
        None => None,
    };
    let invalid = || {
        format!(
            "`{}` is not an IPv6 address (invalid host)",
            inside.escape_default()
        )
    };
    // netip.ParseAddr: a zone (after `%`) must not be empty, and only an IPv6 address has one.
    if let Some(z) = &zone {
        if z.len() <= 1 || !addr.contains(':') {
            return Err(invalid());
        }
    }
    match addr.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V6(_)) => Ok(()),
        Ok(std::net::IpAddr::V4(_)) => {
            Err("an IPv4 address in brackets (invalid IP-literal)".into())
        }
        Err(_) => Err(invalid()),
    }
}

/// `validOptionalPort`: nothing, or `:` and digits only.
fn valid_optional_port(p: &str) -> Result<(), String> {
    if p.is_empty() || (p.starts_with(':') && p[1..].bytes().all(|b| b.is_ascii_digit())) {
        return Ok(());
    }
    Err(format!(
        "invalid port `{}` after the host",
        p.escape_default()
    ))
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Host,
    Zone,
    /// The path, the fragment and the user information: only the escapes are checked.
    Other,
}

/// Go's host bytes (`shouldEscape` in host or zone mode says no): ASCII letters and digits and
/// `!"$&'()*+,-.:;<=>[]_~`. Globs (`*`) are among them.
fn host_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!\"$&'()*+,-.:;<=>[]_~".contains(&b)
}

/// `unescape`'s checks: every `%` starts two hex digits; in a host an escape may stand only for
/// a non-ASCII byte or be `%25`, in a zone only for a host byte, a space or `%`; a host or zone
/// holds only host bytes (non-ASCII bytes pass). The unescaped text (lossy), for the address.
fn unescape(s: &str, mode: Mode) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let Some(h) = b
                .get(i + 1..i + 3)
                .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
            else {
                return Err("a `%` not followed by two hex digits".into());
            };
            let v = hex(h[0]) << 4 | hex(h[1]);
            let is_25 = h == b"25";
            if mode == Mode::Host && hex(h[0]) < 8 && !is_25 {
                return Err(format!("`%{}` escapes an ASCII character", escaped(h)));
            }
            if mode == Mode::Zone && !is_25 && v != b' ' && !host_byte(v) {
                return Err(format!(
                    "`%{}` escapes a character a host cannot hold",
                    escaped(h)
                ));
            }
            out.push(v);
            i += 3;
            continue;
        }
        if mode != Mode::Other && b[i] < 0x80 && !host_byte(b[i]) {
            return Err(format!(
                "`{}` cannot be in a host",
                char::from(b[i]).escape_default()
            ));
        }
        out.push(b[i]);
        i += 1;
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

fn escaped(h: &[u8]) -> String {
    String::from_utf8_lossy(h).into_owned()
}

fn hex(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => c - b'A' + 10,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_go_parses_and_refuses() {
        for ok in [
            "*.dkr.ecr.*.amazonaws.com",
            "registry.example:5000/path/to/*",
            "user:pa%20ss@registry.example",
            "[fe80::1%25eth0]:443",
            "[::ffff:1.2.3.4]",
            "host?query#frag%41",
            "a@b@registry.example",
            "",
        ] {
            assert_eq!(parse_schemeless(ok), Ok(()), "{ok}");
        }
        for (bad, says) in [
            ("u ser@registry.acme.example", "invalid userinfo"),
            ("us%zz@registry.example", "two hex digits"),
            ("registry.example:port", "invalid port"),
            ("a:1:2", "invalid port `:1:2`"),
            ("reg%41.example", "escapes an ASCII"),
            ("reg istry", "cannot be in a host"),
            ("x[::1]", "invalid IP-literal"),
            ("[1.2.3.4]", "IPv4"),
            ("[fe80::1%25]", "not an IPv6"),
            ("[::1", "without `]`"),
            ("host/%zz", "in the path"),
            ("host\t", "control character"),
        ] {
            let e = parse_schemeless(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
