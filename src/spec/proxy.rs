//! The `proxy` section checked, and the one NO_PROXY every boot-time client gets: what must
//! never go through a proxy on an EKS node (docs/private-networks.md says why each entry is
//! there). Credentials in a proxy URL are secrets: never echoed, redacted wherever shown.

use crate::base::findings::Findings;
use crate::base::text::printable;
use crate::config::ProxySettings;

/// The proxies, checked. At least one of `http` and `https` is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxySpec {
    pub http: Option<ProxyUrl>,
    pub https: Option<ProxyUrl>,
    /// The config's own NO_PROXY entries, after the computed ones.
    pub no_proxy: Vec<String>,
}

/// A proxy URL: `http[s]://[userinfo@]host[:port]`, without a trailing `/`.
#[derive(Clone, PartialEq, Eq)]
pub struct ProxyUrl {
    pub url: String,
    /// `user:password` as written (percent-encoded): a secret.
    pub userinfo: Option<String>,
}

impl std::fmt::Debug for ProxyUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown())
    }
}

impl ProxyUrl {
    /// The URL with its credentials replaced by `***`, for messages and logs.
    pub fn shown(&self) -> String {
        match &self.userinfo {
            Some(u) => self.url.replacen(&format!("{u}@"), "***@", 1),
            None => self.url.clone(),
        }
    }
}

/// What the computed NO_PROXY is made from beside the config: the Region, the VPC's CIDR
/// blocks (IMDS) and the cluster's service CIDR (configured or discovered), each when known.
#[derive(Debug, Clone, Copy)]
pub struct NoProxyInputs<'a> {
    pub region: &'a str,
    pub vpc_cidrs: &'a [String],
    pub service_cidr: Option<&'a str>,
}

/// Never through a proxy, first in every NO_PROXY: loopback, then IMDS (IPv4 and IPv6; Go's
/// NO_PROXY parser reads an IPv6 address without brackets, and one in brackets without a port
/// as a domain that never matches).
pub const ALWAYS_DIRECT: &[&str] = &[
    "localhost",
    "127.0.0.1",
    "::1",
    "169.254.169.254",
    "fd00:ec2::254",
];

impl ProxySpec {
    /// The NO_PROXY list: loopback and IMDS, the VPC's CIDR blocks, the service CIDR, `.internal`
    /// and the Region's EC2 domain, then the config's entries; each once, in that order.
    pub fn no_proxy_list(&self, n: NoProxyInputs) -> Vec<String> {
        let mut all: Vec<String> = ALWAYS_DIRECT.iter().map(|s| s.to_string()).collect();
        all.extend(n.vpc_cidrs.iter().filter(|c| is_cidr(c)).cloned());
        all.extend(n.service_cidr.filter(|c| is_cidr(c)).map(String::from));
        all.push(".internal".into());
        if check_entry(n.region).is_ok() {
            all.push(ec2_domain(n.region));
        }
        all.extend(self.no_proxy.iter().cloned());
        let mut seen = std::collections::BTreeSet::new();
        all.retain(|e| seen.insert(e.to_ascii_lowercase()));
        all
    }

    /// The credentials of each proxy, as written: what every rendering redacts.
    pub fn secrets(&self) -> Vec<String> {
        [&self.http, &self.https]
            .into_iter()
            .flatten()
            .filter_map(|p| p.userinfo.clone())
            .collect()
    }

    /// The agent's own AWS calls: the same proxies, and the NO_PROXY known before them (no VPC
    /// blocks or discovered service CIDR: those calls name hosts, not addresses).
    pub fn for_agent(&self, region: &str, service_cidr: Option<&str>) -> crate::aws::http::Proxy {
        crate::aws::http::Proxy {
            http: self.http.as_ref().map(|p| p.url.clone()),
            https: self.https.as_ref().map(|p| p.url.clone()),
            no_proxy: self
                .no_proxy_list(NoProxyInputs {
                    region,
                    vpc_cidrs: &[],
                    service_cidr,
                })
                .join(","),
        }
    }
}

/// The private DNS domain of EC2 instances in `region`: `ec2.internal` in us-east-1, else
/// `<region>.compute.internal`.
fn ec2_domain(region: &str) -> String {
    match region {
        "us-east-1" => ".ec2.internal".into(),
        r => format!(".{r}.compute.internal"),
    }
}

/// `a.b.c.d/n` or an IPv6 block: what may go into a NO_PROXY from IMDS or the cluster.
pub(crate) fn is_cidr(s: &str) -> bool {
    let Some((ip, bits)) = s.split_once('/') else {
        return false;
    };
    let max = match ip.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => 32,
        Ok(std::net::IpAddr::V6(_)) => 128,
        Err(_) => return false,
    };
    !bits.is_empty()
        && bits.len() <= 3
        && bits.bytes().all(|b| b.is_ascii_digit())
        && bits.parse::<u8>().is_ok_and(|b| b <= max)
}

/// The section checked; `None` (with findings) when any part fails.
pub(crate) fn spec(c: Option<&ProxySettings>, f: &mut Findings) -> Option<ProxySpec> {
    let c = c?;
    let before = f.0.len();
    let http = c
        .http
        .as_deref()
        .and_then(|u| f.check("proxy.http", check_url(u)));
    let https = c
        .https
        .as_deref()
        .and_then(|u| f.check("proxy.https", check_url(u)));
    if c.http.is_none() && c.https.is_none() {
        f.push(
            "proxy",
            "give `https` (and `http`) as `http://host:port`: a NO_PROXY alone configures nothing",
        );
    }
    let no_proxy: Vec<String> = c
        .no_proxy
        .iter()
        .enumerate()
        .filter_map(|(i, e)| f.check(format!("proxy.noProxy[{i}]"), check_entry(e)))
        .collect();
    (f.0.len() == before).then_some(ProxySpec {
        http,
        https,
        no_proxy,
    })
}

/// RFC 3986 userinfo: unreserved, sub-delims but `'`, `:` and percent-encoded octets.
fn userinfo_ok(u: &str) -> bool {
    let b = u.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if b.len() > i + 2
                && b[i + 1].is_ascii_hexdigit()
                && b[i + 2].is_ascii_hexdigit() =>
            {
                i += 3
            }
            // RFC 3986's sub-delims but `'`: the credentials are written single-quoted in an
            // environment file (percent-encode a quote as %27).
            c if c.is_ascii_alphanumeric() || b"-._~!$&()*+,;=:".contains(&c) => i += 1,
            _ => return false,
        }
    }
    true
}

/// `host[:port]` or `[IPv6][:port]`.
fn host_port_ok(hp: &str) -> bool {
    let Some(v6) = hp.strip_prefix('[') else {
        return super::registries::check_host_port(hp);
    };
    let Some((addr, rest)) = v6.split_once(']') else {
        return false;
    };
    let port_ok = match rest.strip_prefix(':') {
        None => rest.is_empty(),
        Some(p) => {
            !p.is_empty()
                && p.bytes().all(|c| c.is_ascii_digit())
                && p.parse::<u16>().is_ok_and(|n| n > 0)
        }
    };
    addr.parse::<std::net::Ipv6Addr>().is_ok() && port_ok
}

/// A proxy URL: the scheme `http` or `https`, a host, an optional port and credentials, no path.
/// A message never shows the credentials: everything between the scheme and the last `@` of the
/// value is hidden, wherever the value would have them.
fn check_url(url: &str) -> Result<ProxyUrl, String> {
    let shown = printable(&hide_userinfo(url));
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(format!(
            "`{shown}` has no scheme: a proxy URL is `http://host:port` (or `https://`)"
        ));
    };
    if scheme != "http" && scheme != "https" {
        return Err(format!(
            "`{shown}` has the scheme `{}`: a proxy URL is `http://` or `https://` (the scheme is how the agent reaches the proxy)",
            printable(scheme)
        ));
    }
    let (userinfo, host_part) = match rest.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, rest),
    };
    if userinfo.is_some_and(|u| u.is_empty() || !userinfo_ok(u)) {
        return Err(format!(
            "`{shown}`: the credentials are not `user:password` as a URL holds them (percent-encode `@`, `/`, `?`, `#`, `%`, quotes and spaces)"
        ));
    }
    let end = host_part.find(['/', '?', '#']).unwrap_or(host_part.len());
    let (host_port, tail) = host_part.split_at(end);
    if !tail.is_empty() && tail != "/" {
        return Err(format!(
            "`{shown}` has a path, query or fragment: a proxy URL is `{scheme}://host[:port]` alone"
        ));
    }
    if !host_port_ok(host_port) {
        return Err(format!(
            "`{shown}` does not name a host: `{scheme}://host[:port]`, the host a DNS name or an IP address (`[…]` for IPv6), the port 1 to 65535"
        ));
    }
    Ok(ProxyUrl {
        url: match userinfo {
            Some(u) => format!("{scheme}://{u}@{host_port}"),
            None => format!("{scheme}://{host_port}"),
        },
        userinfo: userinfo.map(String::from),
    })
}

/// A value with everything between its scheme (or its start) and its last `@` replaced by `***`.
fn hide_userinfo(s: &str) -> String {
    let Some((before, host)) = s.rsplit_once('@') else {
        return s.to_string();
    };
    match before.split_once("://") {
        Some((scheme, _)) => format!("{scheme}://***@{host}"),
        None => format!("***@{host}"),
    }
}

/// One NO_PROXY entry, as every client on the node reads it the same way: a host or domain
/// (`.corp.example`; `*.corp.example` is written `.corp.example`, which Go reads alike and the
/// agent's own client understands), an IP address or a CIDR block, or `*`. No port (the agent's
/// client never matches one) and no brackets (Go reads `[fd00::1]` as a domain that matches
/// nothing): nothing a unit file or a comma-separated list would split or quote.
fn check_entry(e: &str) -> Result<String, String> {
    let shown = printable(e);
    let charset = !e.is_empty()
        && e.len() <= 255
        && e.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(b, b'.' | b'-' | b'_' | b':' | b'*' | b'/' | b'[' | b']')
        });
    if !charset {
        return Err(format!(
            "`{shown}` is not a NO_PROXY entry: a host, a domain (`.corp.example`), an IP address or a CIDR block (`10.0.0.0/8`), one per list item"
        ));
    }
    if e.contains(['[', ']']) {
        return Err(format!(
            "`{shown}`: write an IPv6 address without brackets (`fd00:ec2::254`); Go reads a bracketed one as a name that matches nothing"
        ));
    }
    let ip_like = e.parse::<std::net::IpAddr>().is_ok() || is_cidr(e);
    if e.contains(':') && !ip_like {
        return Err(format!(
            "`{shown}` has a port: a NO_PROXY entry applies to every port (the agent's own client matches no entry with a port)"
        ));
    }
    if e == "*" {
        return Ok(e.into());
    }
    let leading_wildcard = e.starts_with("*.") && e.matches('*').count() == 1;
    if e.contains('*') && !leading_wildcard {
        return Err(format!(
            "`{shown}`: `*` is the whole entry (no proxy at all) or a leading `*.` (`*.corp.example`)"
        ));
    }
    Ok(e.strip_prefix('*').unwrap_or(e).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(json: &str) -> (Option<ProxySpec>, Vec<String>) {
        let c: ProxySettings = serde_json::from_str(json).unwrap();
        let mut f = Findings::default();
        let s = spec(Some(&c), &mut f);
        (s, f.0.iter().map(|x| x.to_string()).collect())
    }

    #[test]
    fn urls_with_credentials_a_port_ipv6_and_a_trailing_slash() {
        let (s, f) = run(
            r#"{"https": "http://svc:p%40ss@proxy.corp:3128/", "http": "https://[fd00::1]:8443", "noProxy": [".corp.example", "10.9.0.0/16", "*"]}"#,
        );
        assert!(f.is_empty(), "{f:?}");
        let s = s.unwrap();
        let https = s.https.as_ref().unwrap();
        assert_eq!(https.url, "http://svc:p%40ss@proxy.corp:3128");
        assert_eq!(https.shown(), "http://***@proxy.corp:3128");
        assert_eq!(format!("{https:?}"), "http://***@proxy.corp:3128");
        assert_eq!(s.http.as_ref().unwrap().url, "https://[fd00::1]:8443");
        assert_eq!(s.secrets(), ["svc:p%40ss"]);
    }

    /// Each case is refused, names its field and says why, and echoes no piece of any password:
    /// `secret`, or a cut one after its user (`svc:sec…`).
    fn refused(cases: &[(&str, &str, &str)]) {
        for &(json, field, needle) in cases {
            let (s, f) = run(json);
            assert!(s.is_none(), "{json}");
            assert!(
                f.iter().any(|x| x.starts_with(field) && x.contains(needle)),
                "{json}: want {field} / {needle}, got {f:?}"
            );
            assert!(
                f.iter()
                    .all(|x| !x.contains("secret") && !x.contains(":sec") && !x.contains("ret@")),
                "echoed: {f:?}"
            );
        }
    }

    #[test]
    fn bad_urls_are_named_errors_that_never_echo_credentials() {
        refused(&[
            (
                r#"{"https": "http://proxy.corp:3128/path"}"#,
                "proxy.https",
                "has a path",
            ),
            (
                r#"{"https": "http://proxy.corp:3128?x=1"}"#,
                "proxy.https",
                "has a path",
            ),
            (
                r#"{"https": "socks5://u:secret@proxy.corp:1080"}"#,
                "proxy.https",
                "scheme `socks5`",
            ),
            (
                r#"{"https": "u:secret@proxy.corp:3128"}"#,
                "proxy.https",
                "no scheme",
            ),
            (r#"{"http": "proxy.corp:3128"}"#, "proxy.http", "no scheme"),
            (
                r#"{"https": "http://proxy.corp:0"}"#,
                "proxy.https",
                "does not name a host",
            ),
            (
                r#"{"https": "http://[zz::1]:80"}"#,
                "proxy.https",
                "does not name a host",
            ),
            (
                r#"{"https": "ftp://svc:secret@proxy.corp"}"#,
                "proxy.https",
                "scheme `ftp`",
            ),
        ]);
    }

    #[test]
    fn bad_credentials_are_named_errors_that_never_echo_them() {
        refused(&[
            (
                r#"{"https": "http://u:sec ret@proxy.corp"}"#,
                "proxy.https",
                "credentials",
            ),
            (
                r#"{"https": "http://u:secret\"@proxy.corp"}"#,
                "proxy.https",
                "credentials",
            ),
            (
                r#"{"https": "http://@proxy.corp"}"#,
                "proxy.https",
                "credentials",
            ),
            (
                r#"{"https": "http://svc:sec/ret@proxy.corp:3128"}"#,
                "proxy.https",
                "credentials",
            ),
            (
                r#"{"https": "http://svc:sec#ret@proxy.corp:3128"}"#,
                "proxy.https",
                "credentials",
            ),
            (
                r#"{"https": "http://svc:sec?ret@proxy.corp:3128"}"#,
                "proxy.https",
                "credentials",
            ),
            (
                r#"{"https": "http://svc:sec'ret@proxy.corp:3128"}"#,
                "proxy.https",
                "credentials",
            ),
        ]);
    }

    #[test]
    fn bad_no_proxy_entries_and_a_list_without_a_proxy_are_named_errors() {
        refused(&[
            (
                r#"{"https": "http://p.corp", "noProxy": ["a b"]}"#,
                "proxy.noProxy[0]",
                "not a NO_PROXY entry",
            ),
            (
                r#"{"https": "http://p.corp", "noProxy": ["a,b"]}"#,
                "proxy.noProxy[0]",
                "not a NO_PROXY entry",
            ),
            (
                r#"{"https": "http://p.corp", "noProxy": [""]}"#,
                "proxy.noProxy[0]",
                "not a NO_PROXY entry",
            ),
            (
                r#"{"https": "http://p.corp", "noProxy": ["[fd00::1]"]}"#,
                "proxy.noProxy[0]",
                "without brackets",
            ),
            (
                r#"{"https": "http://p.corp", "noProxy": ["git.corp:443"]}"#,
                "proxy.noProxy[0]",
                "has a port",
            ),
            (
                r#"{"https": "http://p.corp", "noProxy": ["a*.corp"]}"#,
                "proxy.noProxy[0]",
                "leading `*.`",
            ),
            (r#"{"noProxy": [".corp"]}"#, "proxy", "give `https`"),
        ]);
    }

    #[test]
    fn no_proxy_computed_in_order_once_each_with_the_regions_domain() {
        let (s, f) = run(
            r#"{"https": "http://p.corp:3128", "noProxy": ["*.corp.example", "10.0.0.0/16", "LOCALHOST", "fd00::1", "*"]}"#,
        );
        assert!(f.is_empty(), "{f:?}");
        let list = s.unwrap().no_proxy_list(NoProxyInputs {
            region: "eu-west-1",
            vpc_cidrs: &[
                "10.0.0.0/16".into(),
                "not-a-cidr".into(),
                "2600:1f14::/56".into(),
            ],
            service_cidr: Some("172.20.0.0/16"),
        });
        assert_eq!(
        list.join(","),
        "localhost,127.0.0.1,::1,169.254.169.254,fd00:ec2::254,10.0.0.0/16,2600:1f14::/56,172.20.0.0/16,.internal,.eu-west-1.compute.internal,.corp.example,fd00::1,*"
    );
        assert_eq!(ec2_domain("us-east-1"), ".ec2.internal");
    }

    #[test]
    fn the_agents_own_calls_get_the_same_urls_and_the_fixed_entries() {
        let (s, _) = run(r#"{"https": "http://u:pw@p.corp:3128", "noProxy": [".corp.example"]}"#);
        let p = s.unwrap().for_agent("us-east-1", Some("10.100.0.0/16"));
        assert_eq!(p.https.as_deref(), Some("http://u:pw@p.corp:3128"));
        assert_eq!(p.http, None);
        assert_eq!(
        p.no_proxy,
        "localhost,127.0.0.1,::1,169.254.169.254,fd00:ec2::254,10.100.0.0/16,.internal,.ec2.internal,.corp.example"
    );
        assert!(
            !format!("{p:?}").contains("pw"),
            "Debug shows no credentials"
        );
    }

    #[test]
    fn cidrs() {
        for ok in [
            "10.0.0.0/16",
            "0.0.0.0/0",
            "fd00::/8",
            "2600:1f14:abc::/128",
        ] {
            assert!(is_cidr(ok), "{ok}");
        }
        for bad in [
            "10.0.0.0",
            "10.0.0.0/33",
            "fd00::/129",
            "10.0.0.0/",
            "x/8",
            "10.0.0.0/+8",
        ] {
            assert!(!is_cidr(bad), "{bad}");
        }
    }
}
