//! TLS for the tests' peers: a CA and a server certificate (for 127.0.0.1, or given names) made
//! with openssl, and commands that must succeed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Run `c`; it must succeed. Its standard output.
pub fn sh(c: &mut Command) -> String {
    let out = c
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{c:?}: {e}"));
    assert!(
        out.status.success(),
        "{c:?} failed ({:?}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A CA and a server certificate for 127.0.0.1: (ca.crt, server.crt, server.key).
pub fn certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    certificates_for(dir, &["IP:127.0.0.1".into()])
}

/// A CA and a server certificate signed by it for `names` (subjectAltName entries:
/// `DNS:host`, `IP:address`), valid two days: (ca.crt, server.crt, server.key).
pub fn certificates_for(dir: &Path, names: &[String]) -> (PathBuf, PathBuf, PathBuf) {
    let p = |n: &str| dir.join(n);
    let openssl = |args: &[&str], files: &[(&str, &str)]| {
        let mut c = Command::new("openssl");
        c.args(args);
        for (flag, file) in files {
            c.arg(flag).arg(p(file));
        }
        sh(&mut c);
    };
    let req = ["req", "-newkey", "rsa:2048", "-nodes", "-subj"];
    openssl(
        &[
            &req[..],
            &["/CN=eks-nodeinit test CA", "-x509", "-days", "2"],
        ]
        .concat(),
        &[("-keyout", "ca.key"), ("-out", "ca.crt")],
    );
    openssl(
        &[&req[..], &["/CN=eks-nodeinit test server"]].concat(),
        &[("-keyout", "srv.key"), ("-out", "srv.csr")],
    );
    std::fs::write(
        p("ext"),
        format!(
            "subjectAltName={}\nextendedKeyUsage=serverAuth\n",
            names.join(",")
        ),
    )
    .unwrap();
    openssl(
        &["x509", "-req", "-days", "2", "-CAcreateserial"],
        &[
            ("-in", "srv.csr"),
            ("-CA", "ca.crt"),
            ("-CAkey", "ca.key"),
            ("-extfile", "ext"),
            ("-out", "srv.crt"),
        ],
    );
    (p("ca.crt"), p("srv.crt"), p("srv.key"))
}

/// An HTTPS server on 127.0.0.1 (Python's http.server behind the test CA) that answers every
/// request with `status` and one body: an API server in an outage (503), refusing every token
/// (401), or serving a Node as it is (200 and the Node). Killed when dropped.
pub struct Answering {
    pub port: u16,
    /// The CA's PEM, as a job carries it.
    pub ca_pem: String,
    child: std::process::Child,
    _dir: tempfile::TempDir,
}

impl Drop for Answering {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const ANSWERING: &str = r#"
import http.server, ssl, sys
status = int(sys.argv[3])
given = sys.argv[4].encode() if len(sys.argv) > 4 else None
class H(http.server.BaseHTTPRequestHandler):
    def answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        body = given or b'{"kind":"Status","code":%d}' % status
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST = do_PATCH = answer
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
c.load_cert_chain(sys.argv[1], sys.argv[2])
s.socket = c.wrap_socket(s.socket, server_side=True)
print(s.server_address[1], flush=True)
s.serve_forever()
"#;

/// [`Answering`] with `status`.
pub fn answering(status: u16) -> Answering {
    answering_with(status, None)
}

/// [`Answering`] with `status` and `body` (else a Status of that code).
pub fn answering_with(status: u16, body: Option<&str>) -> Answering {
    let dir = tempfile::tempdir().unwrap();
    let (ca, crt, key) = certificates(dir.path());
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(ANSWERING)
        .arg(&crt)
        .arg(&key)
        .arg(status.to_string())
        .args(body)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    Answering {
        port: super::peers::first_line(&mut child).parse().unwrap(),
        ca_pem: std::fs::read_to_string(ca).unwrap(),
        child,
        _dir: dir,
    }
}
