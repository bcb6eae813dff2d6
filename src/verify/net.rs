//! The network under the checks: a name resolved, a TCP connection (direct, or through the
//! config's HTTP proxy with `CONNECT` unless NO_PROXY names the host, as Go's
//! `ProxyFromEnvironment` decides for kubelet), TLS with given roots, and one HTTP/1.1 request
//! on it. Each failure is a [`Cause`] naming the layer that failed.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::Cause;
use crate::base::text::printable;

/// Anything a request can go over: a TCP stream, or TLS on one.
pub trait Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Stream for T {}

/// An `https://host[:port]` or `http://host[:port]` URL split (a path after it is ignored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    pub tls: bool,
    pub host: String,
    pub port: u16,
}

impl Url {
    pub fn parse(url: &str) -> Option<Url> {
        let (tls, rest) = match url.split_once("://")? {
            ("https", r) => (true, r),
            ("http", r) => (false, r),
            _ => return None,
        };
        let authority = rest.split(['/', '?', '#']).next()?;
        let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
        let (host, port) = match authority.strip_prefix('[') {
            Some(v6) => {
                let (h, after) = v6.split_once(']')?;
                (h, after.strip_prefix(':'))
            }
            None => match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            },
        };
        let port = match port {
            Some(p) => p.parse().ok()?,
            None if tls => 443,
            None => 80,
        };
        (!host.is_empty()).then(|| Url {
            tls,
            host: host.to_ascii_lowercase(),
            port,
        })
    }

    /// `host:port`, an IPv6 host in brackets.
    pub fn authority(&self) -> String {
        match self.host.contains(':') {
            true => format!("[{}]:{}", self.host, self.port),
            false => format!("{}:{}", self.host, self.port),
        }
    }
}

/// Whether NO_PROXY (comma-separated) names `host` on `port`, as Go's httpproxy reads it: `*`
/// for every host; an IP or CIDR for addresses; `example.com` for itself and its subdomains,
/// `.example.com` and `*.example.com` for its subdomains only; an entry's `:port` for that port
/// only.
pub fn no_proxy_matches(no_proxy: &str, host: &str, port: u16) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let ip = host.parse::<IpAddr>().ok();
    no_proxy
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .any(|entry| {
            if entry == "*" {
                return true;
            }
            if let (Some(ip), true) = (ip, entry.contains('/')) {
                return in_cidr(ip, entry);
            }
            let (name, eport) = match entry.strip_prefix('[').and_then(|e| e.split_once(']')) {
                Some((v6, rest)) => (v6, rest.strip_prefix(':').and_then(|p| p.parse().ok())),
                None => match entry.rsplit_once(':') {
                    Some((h, p)) if !h.contains(':') => (h, p.parse::<u16>().ok()),
                    _ => (entry, None),
                },
            };
            if let Ok(e) = name.parse::<IpAddr>() {
                return Some(e) == ip && eport.map_or(true, |p| p == port);
            }
            if eport.is_some_and(|p| p != port) {
                return false;
            }
            let name = name.to_ascii_lowercase();
            let name = name.strip_prefix('*').unwrap_or(&name);
            match name.strip_prefix('.') {
                Some(suffix) => host.ends_with(&format!(".{suffix}")),
                None => host == name || host.ends_with(&format!(".{name}")),
            }
        })
}

/// Whether `ip` is in the block `cidr` (`a.b.c.d/n` or IPv6, as the spec reads blocks).
pub fn in_cidr(ip: IpAddr, cidr: &str) -> bool {
    let Some((net, bits)) = crate::base::cidr::parse_cidr(cidr) else {
        return false;
    };
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

/// The addresses `host` resolves to (an address is itself).
pub async fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>, Cause> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    match tokio::net::lookup_host((host, port)).await {
        Ok(a) => {
            let all: Vec<_> = a.collect();
            match all.is_empty() {
                true => Err(Cause::dns(host, "no addresses")),
                false => Ok(all),
            }
        }
        Err(e) => Err(Cause::dns(host, &e.to_string())),
    }
}

/// How long one address may take to accept a connection: a port that drops packets costs this,
/// not the kernel's SYN retries (about two minutes), before the next address is tried.
pub const CONNECT_EACH: Duration = Duration::from_secs(5);

/// A TCP connection to the first of `addrs` that answers, each given [`CONNECT_EACH`].
pub async fn connect(addrs: &[SocketAddr]) -> Result<TcpStream, Cause> {
    let mut last = String::from("no address");
    for a in addrs {
        match tokio::time::timeout(CONNECT_EACH, TcpStream::connect(a)).await {
            Ok(Ok(s)) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Ok(Err(e)) => last = format!("{a}: {e}"),
            Err(_) => {
                last = format!("{a}: no answer within {CONNECT_EACH:?} (a port that drops packets)")
            }
        }
    }
    let code = match last.contains("no answer within") {
        true => "timeout",
        false => "tcp",
    };
    Err(Cause::new(code, last))
}

/// A connection a request goes over: TCP, or TLS on TCP (an `https://` proxy).
pub type Conn = Box<dyn Stream>;

/// A stream to `to`: through `proxy` with `CONNECT`, else direct. An `https://` proxy is spoken
/// to over TLS (trusting the platform's roots and `bundles`), as Go's transport does: its
/// password never crosses the network in clear, and is never echoed.
pub async fn open(to: &Url, proxy: Option<&str>, bundles: &[&str]) -> Result<Conn, Cause> {
    let Some(p) = proxy else {
        let s = connect(&resolve(&to.host, to.port).await?).await?;
        return Ok(Box::new(s));
    };
    let purl = Url::parse(p)
        .ok_or_else(|| Cause::new("proxy", "the proxy URL is not http(s)://host[:port]".into()))?;
    let tcp = connect(
        &resolve(&purl.host, purl.port)
            .await
            .map_err(|c| c.via_proxy())?,
    )
    .await
    .map_err(|c| c.via_proxy())?;
    let mut s: Conn = match purl.tls {
        true => Box::new(
            tls(tcp, &purl.host, roots(bundles, true))
                .await
                .map_err(|c| c.via_proxy())?,
        ),
        false => Box::new(tcp),
    };
    let mut req = format!("CONNECT {0} HTTP/1.1\r\nHost: {0}\r\n", to.authority());
    if let Some(auth) = basic_auth(p) {
        req.push_str(&format!("Proxy-Authorization: Basic {auth}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes())
        .await
        .map_err(|e| Cause::new("proxy", format!("writing CONNECT: {e}")))?;
    let head = read_head(&mut s).await?;
    let status = head.lines().next().unwrap_or_default();
    match status.split_whitespace().nth(1) {
        Some("200") => Ok(s),
        _ => Err(Cause::new(
            "proxy",
            format!(
                "the proxy {} answered CONNECT {} with `{}`",
                purl.authority(),
                to.authority(),
                printable(status)
            ),
        )),
    }
}

/// The `user:password` of a proxy URL, base64 (percent-escapes decoded).
fn basic_auth(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split('/').next()?;
    let (userinfo, _) = authority.rsplit_once('@')?;
    let decoded = percent_decode(userinfo);
    Some(base64::engine::general_purpose::STANDARD.encode(decoded))
}

fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (b[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// A proxy's answer head, up to the blank line (at most 8 KiB).
async fn read_head(s: &mut Conn) -> Result<String, Cause> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if buf.len() > 8192 {
            return Err(Cause::new(
                "proxy",
                "the proxy's answer head is over 8 KiB".into(),
            ));
        }
        match s.read(&mut byte).await {
            Ok(0) => {
                return Err(Cause::new(
                    "proxy",
                    "the proxy closed the connection".into(),
                ))
            }
            Ok(_) => buf.push(byte[0]),
            Err(e) => return Err(Cause::new("proxy", e.to_string())),
        }
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// The roots: the given PEM bundles (each a whole bundle), or the platform's.
pub fn roots(pems: &[&str], platform: bool) -> rustls::RootCertStore {
    let mut store = rustls::RootCertStore::empty();
    for pem in pems {
        for der in crate::base::pem::ders(pem).unwrap_or_default() {
            let _ = store.add(der.into());
        }
    }
    if platform {
        for c in platform_roots() {
            let _ = store.add(c.clone());
        }
    }
    store
}

/// The platform's roots, read once per process (every file of the system store).
fn platform_roots() -> &'static [rustls::pki_types::CertificateDer<'static>] {
    static ROOTS: std::sync::OnceLock<Vec<rustls::pki_types::CertificateDer<'static>>> =
        std::sync::OnceLock::new();
    ROOTS.get_or_init(|| rustls_native_certs::load_native_certs().certs)
}

/// TLS on `s` to `host`, trusting `roots` only: an unknown issuer (a CA of another cluster) and
/// a name the certificate does not hold are causes of their own.
pub async fn tls<S: Stream>(
    s: S,
    host: &str,
    roots: rustls::RootCertStore,
) -> Result<tokio_rustls::client::TlsStream<S>, Cause> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Cause::new("tls", e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from(host.to_string()).map_err(|_| {
        Cause::new(
            "tls",
            format!("`{}` is not a TLS server name", printable(host)),
        )
    })?;
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, s)
        .await
        .map_err(|e| Cause::tls(host, &e))
}

/// What one request returned: the status, the server's `Date` (for clock skew), the body.
pub struct Reply {
    pub status: u16,
    pub date: Option<String>,
    pub body: Vec<u8>,
}

/// One HTTP/1.1 request on `s`: the status, `Date` and the body (at most 1 MiB read).
pub async fn request<S: Stream>(s: S, req: http::Request<Full<Bytes>>) -> Result<Reply, Cause> {
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(s))
        .await
        .map_err(|e| Cause::new("http", e.to_string()))?;
    // Aborted however this ends, a read given up at its deadline included: no connection task
    // or socket outlives the request.
    let driver = AbortOnDrop(tokio::spawn(conn));
    let r = send.send_request(req).await;
    let out = async {
        let resp = r.map_err(|e| Cause::new("http", e.to_string()))?;
        let status = resp.status().as_u16();
        let date = resp
            .headers()
            .get(http::header::DATE)
            .and_then(|v| v.to_str().ok())
            .map(String::from);
        let body = http_body_util::Limited::new(resp.into_body(), 1 << 20)
            .collect()
            .await
            .map_err(|e| Cause::new("http", e.to_string()))?
            .to_bytes();
        Ok(Reply {
            status,
            date,
            body: body.to_vec(),
        })
    }
    .await;
    drop(driver);
    out
}

struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_proxy_reads_domains_ports_addresses_and_blocks_as_go_does() {
        let np = "localhost,.eks.amazonaws.com,10.0.0.0/16,169.254.169.254,corp.example:8443,*.svc.example";
        let m = |h: &str| no_proxy_matches(np, h, 443);
        assert!(m("ABC.gr7.eu-west-1.eks.amazonaws.com"));
        // A leading dot names subdomains only (golang.org/x/net/http/httpproxy).
        assert!(!m("eks.amazonaws.com"));
        assert!(m("10.0.12.34"));
        assert!(!m("10.1.0.1"));
        // `host:port` names that port only.
        assert!(no_proxy_matches(np, "a.corp.example", 8443));
        assert!(no_proxy_matches(np, "corp.example", 8443));
        assert!(!m("corp.example"));
        assert!(m("a.svc.example"));
        assert!(!m("svc.example"));
        assert!(!m("sts.eu-west-1.amazonaws.com"));
        assert!(!no_proxy_matches(np, "xcorp.example", 8443));
        assert!(no_proxy_matches("*", "anything", 1));
        // IPv6 entries, with a port or not.
        assert!(no_proxy_matches("[fd00::1]:443", "fd00::1", 443));
        assert!(!no_proxy_matches("[fd00::1]:443", "fd00::1", 80));
        assert!(no_proxy_matches("fd00::1", "fd00::1", 80));
    }

    #[test]
    fn urls_split_into_scheme_host_and_port() {
        let u = Url::parse("https://ABC.eks.amazonaws.com").unwrap();
        assert_eq!(
            (u.tls, u.host.as_str(), u.port),
            (true, "abc.eks.amazonaws.com", 443)
        );
        let u = Url::parse("http://user:p%40ss@[::1]:3128/x").unwrap();
        assert_eq!((u.tls, u.host.as_str(), u.port), (false, "::1", 3128));
        assert_eq!(u.authority(), "[::1]:3128");
        assert!(Url::parse("ftp://x").is_none());
        assert!(Url::parse("https://x:99999").is_none());
        assert_eq!(
            basic_auth("http://user:p%40ss@proxy:3128").as_deref(),
            Some(
                base64::engine::general_purpose::STANDARD
                    .encode("user:p@ss")
                    .as_str()
            )
        );
    }
}
