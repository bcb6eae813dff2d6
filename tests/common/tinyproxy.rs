//! The forward proxy `tinyproxy` (Debian's), started by the tests on loopback, and the requests
//! it forwarded as its log shows them.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{free_port, listening, Proc};

/// tinyproxy on 127.0.0.1 in the foreground, logging each request (`LogLevel Connect`) to
/// `dir/tinyproxy.log`; `extra` is added to its config (e.g. `BasicAuth`). With `hosts`, it runs
/// in a mount namespace of its own whose /etc/hosts is that file, so that names the tests make
/// up resolve to loopback for the proxy alone (needs root). (The process, its port, the log.)
pub fn start(dir: &Path, extra: &str, hosts: Option<&Path>) -> (Proc, u16, PathBuf) {
    start_in(None, dir, extra, hosts)
}

/// [`start`] in the network namespace `netns` (the control-plane suite's), or this process's.
pub fn start_in(
    netns: Option<&Path>,
    dir: &Path,
    extra: &str,
    hosts: Option<&Path>,
) -> (Proc, u16, PathBuf) {
    let port = match netns {
        Some(ns) => super::netns::free_port(ns),
        None => free_port(),
    };
    let up = |port| match netns {
        Some(ns) => super::netns::listening(ns, port),
        None => listening(port),
    };
    let conf = dir.join("tinyproxy.conf");
    std::fs::write(
        &conf,
        format!("Port {port}\nListen 127.0.0.1\nAllow 127.0.0.1\nLogLevel Connect\n{extra}"),
    )
    .unwrap();
    let log = dir.join("tinyproxy.log");
    let mut c = match (hosts, netns) {
        (None, Some(ns)) => super::control_plane::in_netns(ns, "tinyproxy"),
        (None, None) => Command::new("tinyproxy"),
        (Some(hosts), _) => {
            let mut c = Command::new("unshare");
            c.args(["--mount", "--propagation", "private", "--", "sh", "-c"])
                .arg(r#"mount --bind "$0" /etc/hosts && exec tinyproxy "$@""#)
                .arg(hosts);
            c
        }
    };
    c.arg("-d").arg("-c").arg(&conf);
    let err = dir.join("tinyproxy.err");
    let mut child = Proc(
        c.stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let t = Instant::now();
    while !up(port) {
        if let Some(status) = child.0.try_wait().unwrap() {
            let said = std::fs::read_to_string(&err).unwrap_or_default();
            panic!("tinyproxy exited ({status}) before listening: {said}");
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "tinyproxy did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (child, port, log)
}

/// The requests tinyproxy forwarded: each request line's target and method, e.g.
/// `GET http://host:port/path HTTP/1.1` or `CONNECT host:443 HTTP/1.1`.
pub fn proxied(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once("Request (file descriptor ").map(|(_, r)| r))
        .filter_map(|r| r.split_once("): ").map(|(_, req)| req.to_string()))
        .collect()
}
