//! A real control plane on loopback for the kubelet suites (tests/it/control_plane/): Debian's
//! etcd, and kube-apiserver and containerd 2 built from upstream's modules by
//! `tools/peers/build` (`make peers-k8s`). One instance per test process, shared by the cases,
//! which take turns (`ControlPlane::shared`); a case starts only a kubelet (`kubelet.rs`).
//!
//! The API server has its own CA, the Node authorizer with RBAC and NodeRestriction; kubelets
//! authenticate with a node client certificate (`CN=system:node:NAME`, `O=system:nodes`), the
//! suite with a static token in `system:masters`. Every process runs in a network namespace of the suite's own (fixed ports, the node's
//! address on `lo`) and dies with the test process
//! (`PR_SET_PDEATHSIG`, set from a thread that lives as long as it).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use super::containerd::start_containerd;
use super::peers::{logged, Proc};
use super::tls::sh;

/// The service CIDR of the suite's cluster, the one the agent's config names.
pub const SERVICE_CIDR: &str = "172.20.0.0/16";
pub const ADMIN_TOKEN: &str = "control-plane-suite-admin";

/// Where `tools/peers/build` links the binaries it built (`PEERS_BIN` overrides).
pub fn peers_bin() -> PathBuf {
    std::env::var_os("PEERS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| super::manifest_dir().join("target/peers/bin"))
}

/// The peers this suite needs that are not there: the built ones and Debian's etcd.
pub fn missing() -> Vec<String> {
    let built = [
        "kubelet",
        "kube-apiserver",
        "kube-scheduler",
        "containerd",
        "containerd-shim-runc-v2",
        "aws-iam-authenticator",
    ];
    let mut m: Vec<String> = built
        .iter()
        .filter(|b| !peers_bin().join(b).exists())
        .map(|b| format!("{b} (make peers-k8s)"))
        .collect();
    if Command::new("etcd").arg("--version").output().is_err() {
        m.push("etcd (make deps)".into());
    }
    let moto = Command::new("python3")
        .args(["-c", "import moto.server"])
        .output();
    if !moto.is_ok_and(|o| o.status.success()) {
        m.push("moto[server] (make deps)".into());
    }
    m
}

/// The node's address in the suite's network namespace: the sample metadata's private IP. A
/// kubelet refuses a loopback node IP, so the control plane and the kubelets share a network
/// namespace of the suite's own, where this address is on `lo`.
pub const NODE_IP: &str = "10.0.12.34";

/// An IPv6 cluster's service CIDR (the suite's IPv6 control plane), and the node's address
/// there: the IPv6-only sample instance's.
pub const SERVICE_CIDR6: &str = "fd00:10:20::/108";
pub const NODE_IP6: &str = "2600:1f18:4a:7e00::12";

/// A control plane's addresses: where the API server binds (its URLs' host), the cluster's
/// service CIDR, the node's address.
#[derive(Debug, Clone, Copy)]
pub struct Net {
    pub bind: &'static str,
    pub host: &'static str,
    pub service_cidr: &'static str,
    pub node_ip: &'static str,
}

pub const V4: Net = Net {
    bind: "127.0.0.1",
    host: "127.0.0.1",
    service_cidr: SERVICE_CIDR,
    node_ip: NODE_IP,
};

/// The API server on `::1` alone, an IPv6 service CIDR, the node's IPv6 address.
pub const V6: Net = Net {
    bind: "::1",
    host: "[::1]",
    service_cidr: SERVICE_CIDR6,
    node_ip: NODE_IP6,
};

pub struct ControlPlane {
    pub dir: tempfile::TempDir,
    pub port: u16,
    pub net: Net,
    /// The network namespace's holder: its `/proc/PID/ns/net`.
    pub netns: PathBuf,
    /// containerd's socket.
    pub cri: PathBuf,
    /// What a kubelet leaves on the host whatever its config says, where this host had none
    /// before the suite: removed after each kubelet (`kubelet.rs`).
    pub leftovers: Vec<PathBuf>,
    /// moto and the EKS authenticator beside the shared control plane (`None` on the host's).
    pub eks: Option<Eks>,
    _procs: Vec<Proc>,
}

/// What authenticates nodes as EKS does: moto (EC2, STS, IAM, Auto Scaling with
/// CompleteLifecycleAction logged) and aws-iam-authenticator as the token webhook, reaching
/// moto's STS and EC2 by their real names through the STS front (`iam_authenticator.rs`), all
/// in the suite's network namespace.
pub struct Eks {
    pub moto: String,
    pub auth: super::iam_authenticator::Authenticator,
    /// Each CompleteLifecycleAction moto took, one JSON object a line.
    pub hook_log: PathBuf,
}

/// The cluster and Region the EKS authenticator serves (a token signed for another cluster
/// fails STS's signature check: the authenticator sends its own cluster's `x-k8s-aws-id`).
pub const CLUSTER: &str = "prod-eu";
pub const EKS_REGION: &str = "us-east-1";

static SHARED: OnceLock<Mutex<ControlPlane>> = OnceLock::new();
static SHARED6: OnceLock<Mutex<ControlPlane>> = OnceLock::new();

impl ControlPlane {
    /// The process's control plane, started at the first call; the caller holds it until the
    /// guard drops, so kubelets take turns (they share ports 10250 and 10248).
    pub fn shared() -> MutexGuard<'static, ControlPlane> {
        Self::shared_of(&SHARED, ControlPlane::start)
    }

    /// The process's IPv6 control plane ([`V6`]: no EKS authenticator), as [`Self::shared`].
    #[allow(dead_code)] // the host suites', not the benches' or the VM suite's
    pub fn shared_ipv6() -> MutexGuard<'static, ControlPlane> {
        Self::shared_of(&SHARED6, ControlPlane::start_ipv6)
    }

    fn shared_of(
        cell: &'static OnceLock<Mutex<ControlPlane>>,
        start: fn() -> ControlPlane,
    ) -> MutexGuard<'static, ControlPlane> {
        let m = cell.get_or_init(|| {
            let (tx, rx) = std::sync::mpsc::channel();
            // The children's parent-death signal fires when the thread that started them ends:
            // this one lives until the process exits.
            std::thread::spawn(move || {
                tx.send(start()).unwrap();
                loop {
                    std::thread::park();
                }
            });
            Mutex::new(rx.recv().expect("the control plane starts"))
        });
        m.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn start_ipv6() -> ControlPlane {
        let dir = tempfile::Builder::new()
            .prefix("control-plane-v6")
            .tempdir()
            .unwrap();
        let d = dir.path();
        pki(d, &["IP:::1", "IP:fd00:10:20::1"]);
        let (holder, netns) = network_namespace(d);
        let (etcd, apiserver) = start_etcd_and_apiserver(d, &netns, 2379, 6443, V6);
        let (containerd, cri) = start_containerd(d);
        ControlPlane {
            dir,
            port: 6443,
            net: V6,
            netns,
            cri,
            leftovers: super::kubelet::leftovers(),
            eks: None,
            _procs: vec![etcd, apiserver, containerd, holder],
        }
    }

    fn start() -> ControlPlane {
        let dir = tempfile::Builder::new()
            .prefix("control-plane")
            .tempdir()
            .unwrap();
        let d = dir.path();
        pki(d, &[]);
        let (holder, netns) = network_namespace(d);
        let (moto, eks) = start_eks(d, &netns, None);
        let (etcd, apiserver) = start_etcd_and_apiserver(d, &netns, 2379, 6443, V4);
        let (containerd, cri) = start_containerd(d);
        eprintln!("control plane: containerd {}", cri.display());
        ControlPlane {
            dir,
            port: 6443,
            net: V4,
            netns,
            cri,
            leftovers: super::kubelet::leftovers(),
            eks: Some(eks),
            _procs: [etcd, apiserver, containerd]
                .into_iter()
                .chain(moto)
                .chain([holder])
                .collect(),
        }
    }

    /// etcd and kube-apiserver in this process's network namespace, on free loopback ports,
    /// the API server's certificate naming `sans` too (where a VM reaches it); no containerd.
    /// Stopped when dropped.
    pub fn on_host(sans: &[&str]) -> ControlPlane {
        Self::host(sans, None)
    }

    /// [`ControlPlane::on_host`] with the EKS authenticator (and its STS front on a loopback
    /// address of this process's) calling `at`'s moto, or a moto of its own.
    #[allow(dead_code)] // the startup bench's and the VM suite's, not the host suites'
    pub fn on_host_with_eks(sans: &[&str], at: Option<EksAt>) -> ControlPlane {
        Self::host(sans, Some(at))
    }

    fn host(sans: &[&str], with_eks: Option<Option<EksAt>>) -> ControlPlane {
        let dir = tempfile::Builder::new()
            .prefix("control-plane")
            .tempdir()
            .unwrap();
        let d = dir.path();
        pki(d, sans);
        let netns = PathBuf::from(format!("/proc/{}/ns/net", std::process::id()));
        let mut procs = Vec::new();
        let eks = with_eks.map(|at| {
            let (moto, eks) = start_eks(d, &netns, at);
            procs.extend(moto);
            eks
        });
        let port = super::peers::free_port();
        let (etcd, apiserver) =
            start_etcd_and_apiserver(d, &netns, super::peers::free_port(), port, V4);
        procs.extend([etcd, apiserver]);
        ControlPlane {
            dir,
            port,
            net: V4,
            netns,
            cri: PathBuf::new(),
            leftovers: vec![],
            eks,
            _procs: procs,
        }
    }

    pub fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    pub fn endpoint(&self) -> String {
        format!("https://{}:{}", self.net.host, self.port)
    }

    /// A kubeconfig for node `name`, with a client certificate the API server maps to
    /// `system:node:NAME` in `system:nodes`.
    pub fn node_kubeconfig(&self, name: &str, dir: &Path) -> PathBuf {
        let cn = format!("system:node:{name}");
        let (crt, key) = client_certificate(self.dir.path(), dir, "node", &cn, "system:nodes");
        let k = dir.join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: suite\n  cluster:\n    server: {}\n    certificate-authority: {}\ncontexts:\n- name: node\n  context: {{cluster: suite, user: node}}\ncurrent-context: node\nusers:\n- name: node\n  user:\n    client-certificate: {}\n    client-key: {}\n",
            self.endpoint(),
            self.ca().display(),
            crt.display(),
            key.display()
        );
        std::fs::write(&k, text).unwrap();
        k
    }

    /// `GET path` as the suite's administrator: (status, body).
    pub fn get(&self, path: &str) -> (u16, serde_json::Value) {
        self.call("GET", path, None)
    }

    /// `method path` with a JSON body as the administrator: (status, body).
    pub fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> (u16, serde_json::Value) {
        let d = self.dir.path();
        let out_file = tempfile::NamedTempFile::new_in(d).unwrap();
        let mut c = curl(d, &self.netns, self.net.host, self.port, path);
        c.args(["-o"]).arg(out_file.path()).args(["-X", method]);
        if let Some(b) = body {
            let kind = if method == "PATCH" {
                "merge-patch+json"
            } else {
                "json"
            };
            c.args(["-H", &format!("Content-Type: application/{kind}")])
                .arg("--data-binary")
                .arg(b.to_string());
        }
        let status: u16 = sh(&mut c).trim().parse().unwrap();
        let text = std::fs::read_to_string(out_file.path()).unwrap_or_default();
        (
            status,
            serde_json::from_str(&text).unwrap_or(serde_json::Value::Null),
        )
    }

    /// What the cloud controller manager does for a node registered with
    /// `--cloud-provider=external`: its addresses (the kubelet waits for them before it asks for
    /// a serving certificate). The `uninitialized` taint is left: the suite asserts around it.
    pub fn set_addresses(&self, name: &str, ip: &str) {
        let patch = serde_json::json!({"status": {"addresses": [
            {"type": "InternalIP", "address": ip},
            {"type": "Hostname", "address": name},
        ]}});
        let (s, body) = self.call(
            "PATCH",
            &format!("/api/v1/nodes/{name}/status"),
            Some(&patch),
        );
        assert_eq!(s, 200, "the addresses of {name}: {body}");
    }

    /// The kubelet-serving CSR of node `name`, once the kubelet has asked for one (under
    /// `serverTLSBootstrap: true` it serves nothing until it is signed).
    pub fn serving_csr(&self, name: &str) -> Option<serde_json::Value> {
        let user = format!("system:node:{name}");
        let (_, list) = self.get("/apis/certificates.k8s.io/v1/certificatesigningrequests");
        list["items"]
            .as_array()?
            .iter()
            .find(|c| {
                c["spec"]["username"] == user.as_str()
                    && c["spec"]["signerName"] == "kubernetes.io/kubelet-serving"
            })
            .cloned()
    }

    /// Approve and sign `csr` of node `name` as the cluster's signer would.
    pub fn approve_and_sign(&self, csr: &serde_json::Value, name: &str) {
        let csr_name = csr["metadata"]["name"].as_str().unwrap().to_string();
        let base = format!("/apis/certificates.k8s.io/v1/certificatesigningrequests/{csr_name}");
        let mut approved = csr.clone();
        approved["status"]["conditions"] = serde_json::json!([{
            "type": "Approved", "status": "True", "reason": "ControlPlaneSuite",
            "message": "the suite signs the kubelet's serving certificate"
        }]);
        let (s, body) = self.call("PUT", &format!("{base}/approval"), Some(&approved));
        assert_eq!(s, 200, "approving {csr_name}: {body}");
        let pem = self.sign(csr, name);
        let mut signed = body;
        signed["status"]["certificate"] = base64_encode(pem.as_bytes()).into();
        let (s, body) = self.call("PUT", &format!("{base}/status"), Some(&signed));
        assert_eq!(s, 200, "signing {csr_name}: {body}");
    }

    fn sign(&self, csr: &serde_json::Value, name: &str) -> String {
        let d = self.dir.path();
        let req = base64_decode(csr["spec"]["request"].as_str().unwrap());
        let csr_file = d.join(format!("{name}.csr"));
        std::fs::write(&csr_file, req).unwrap();
        let ext = d.join(format!("{name}.ext"));
        std::fs::write(&ext, "extendedKeyUsage=serverAuth\n").unwrap();
        let crt = d.join(format!("{name}.serving.crt"));
        sign_request(d, &csr_file, &ext, &crt, &["-copy_extensions", "copyall"]);
        std::fs::read_to_string(crt).unwrap()
    }
}

/// Wait until `ok`, at most `within`, else fail naming `what`.
pub fn wait_long(what: &str, within: Duration, ok: impl FnMut() -> bool) {
    assert!(wait_until(within, ok), "{what}: not there after {within:?}");
}

/// Whether `ok` came true within `within`.
pub fn wait_until(within: Duration, mut ok: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while !ok() {
        if t.elapsed() >= within {
            return false;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    true
}

fn openssl(dir: &Path, args: &[&str]) {
    sh(Command::new("openssl").current_dir(dir).args(args));
}

/// The cluster's CA, the API server's serving certificate, its kubelet client certificate, the
/// service-account key pair and the administrator's static token; `sans`: more names the
/// API server's certificate holds.
fn pki(d: &Path, sans: &[&str]) {
    let mut names = [
        "IP:127.0.0.1",
        "IP:172.20.0.1",
        "DNS:localhost",
        "DNS:kubernetes",
        "DNS:kubernetes.default.svc",
    ]
    .map(String::from)
    .to_vec();
    names.extend(sans.iter().map(|s| s.to_string()));
    super::tls::certificates_for(d, &names);
    client_certificate(
        d,
        d,
        "apiserver-kubelet",
        "kube-apiserver",
        "system:masters",
    );
    openssl(d, &["genrsa", "-out", "sa.key", "2048"]);
    openssl(d, &["rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub"]);
    std::fs::write(
        d.join("tokens.csv"),
        format!("{ADMIN_TOKEN},suite-admin,suite-admin,\"system:masters\"\n"),
    )
    .unwrap();
}

/// A client certificate `NAME.crt`/`NAME.key` in `out`, signed by the CA in `ca_dir`.
pub fn client_certificate(
    ca_dir: &Path,
    out: &Path,
    name: &str,
    cn: &str,
    org: &str,
) -> (PathBuf, PathBuf) {
    let (key, csr, crt, ext) = (
        out.join(format!("{name}.key")),
        out.join(format!("{name}.csr")),
        out.join(format!("{name}.crt")),
        out.join(format!("{name}.ext")),
    );
    sh(Command::new("openssl")
        .args(["req", "-newkey", "rsa:2048", "-nodes", "-subj"])
        .arg(format!("/O={org}/CN={cn}"))
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&csr));
    std::fs::write(&ext, "extendedKeyUsage=clientAuth\n").unwrap();
    sign_request(ca_dir, &csr, &ext, &crt, &[]);
    (crt, key)
}

/// Sign the request `csr` with the CA in `ca_dir` (two days, the extensions in `ext`, `extra`
/// options of `openssl x509`) into `crt`.
fn sign_request(ca_dir: &Path, csr: &Path, ext: &Path, crt: &Path, extra: &[&str]) {
    sh(Command::new("openssl")
        .args(["x509", "-req", "-days", "2", "-CAcreateserial"])
        .args(extra)
        .arg("-in")
        .arg(csr)
        .arg("-CA")
        .arg(ca_dir.join("ca.crt"))
        .arg("-CAkey")
        .arg(ca_dir.join("ca.key"))
        .arg("-extfile")
        .arg(ext)
        .arg("-out")
        .arg(crt));
}

/// `cmd` started so that it dies with the thread that started it.
pub fn tied(mut cmd: Command, log: &Path) -> Proc {
    use std::os::unix::process::CommandExt;
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(std::io::Error::from)
        });
    }
    logged(cmd, log)
}

/// `program` with `args` run to success in the network namespace `netns`.
pub fn sh_in(netns: &Path, program: &str, args: &[&str]) {
    sh(in_netns(netns, program).args(args));
}

/// `program` run in the network namespace `netns` (by `nsenter`).
pub fn in_netns(netns: &Path, program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new("nsenter");
    c.arg(format!("--net={}", netns.display()))
        .arg("--")
        .arg(program);
    c
}

/// A network namespace of the suite's own, held by a process that dies with the test process:
/// `lo` up, with the node's address. (holder, its `/proc/PID/ns/net`).
pub fn network_namespace(d: &Path) -> (Proc, PathBuf) {
    let mut c = Command::new("unshare");
    c.args(["--net", "--", "sleep", "infinity"]);
    let holder = tied(c, &d.join("netns.log"));
    let ns = PathBuf::from(format!("/proc/{}/ns/net", holder.0.id()));
    let own = std::fs::read_link("/proc/self/ns/net").unwrap();
    wait_long("the network namespace", Duration::from_secs(10), || {
        std::fs::read_link(&ns).is_ok_and(|l| l != own)
    });
    sh(in_netns(&ns, "ip").args(["link", "set", "lo", "up"]));
    sh(in_netns(&ns, "ip").args(["addr", "add", &format!("{NODE_IP}/32"), "dev", "lo"]));
    let v6 = format!("{NODE_IP6}/128");
    sh(in_netns(&ns, "ip").args(["-6", "addr", "add", &v6, "dev", "lo", "nodad"]));
    (holder, ns)
}

/// Where an authenticator finds an existing moto: its URL, the Region (whose STS and EC2 names
/// the front answers for) and the cluster.
pub struct EksAt {
    pub moto: String,
    pub region: String,
    pub cluster: String,
}

/// aws-iam-authenticator and its STS front calling `at`'s moto, or moto started in the
/// namespace; the webhook's kubeconfig where the API server looks for it.
fn start_eks(d: &Path, netns: &Path, at: Option<EksAt>) -> (Option<Proc>, Eks) {
    let hook_log = d.join("completed.jsonl");
    if let Some(at) = at {
        let auth = super::iam_authenticator::Authenticator::start(
            d,
            netns,
            &at.moto,
            &at.region,
            &at.cluster,
        );
        let eks = Eks {
            moto: at.moto,
            auth,
            hook_log,
        };
        return (None, eks);
    }
    let port = super::netns::free_port(netns);
    let script = super::manifest_dir().join("tests/moto/lifecycle_actions.py");
    let mut c = in_netns(netns, "python3");
    c.arg(script)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .env("MOTO_LIFECYCLE_LOG", &hook_log);
    let moto_proc = tied(c, &d.join("moto.log"));
    let moto = format!("http://127.0.0.1:{port}");
    // The front and the authenticator start while moto imports itself: neither calls it yet.
    let t = Instant::now();
    let auth = super::iam_authenticator::Authenticator::start(d, netns, &moto, EKS_REGION, CLUSTER);
    let took = t.elapsed();
    wait_long("moto", Duration::from_secs(30), || {
        super::netns::listening(netns, port)
    });
    eprintln!(
        "control plane: moto {moto}, aws-iam-authenticator and its STS front (started in {took:?})"
    );
    let eks = Eks {
        moto,
        auth,
        hook_log,
    };
    (Some(moto_proc), eks)
}

fn start_etcd_and_apiserver(
    d: &Path,
    netns: &Path,
    etcd_port: u16,
    port: u16,
    net: Net,
) -> (Proc, Proc) {
    let etcd = start_etcd(d, netns, etcd_port);
    let apiserver = start_apiserver(d, netns, port, etcd_port, net);
    wait_long("kube-apiserver /readyz", Duration::from_secs(90), || {
        curl_status(d, netns, net.host, port, "/readyz") == 200
    });
    let host = net.host;
    eprintln!("control plane: etcd 127.0.0.1:{etcd_port}, kube-apiserver https://{host}:{port}");
    (etcd, apiserver)
}

fn start_etcd(d: &Path, netns: &Path, port: u16) -> Proc {
    let client = format!("http://127.0.0.1:{port}");
    let peer = format!("http://127.0.0.1:{}", super::peers::free_port());
    let mut c = in_netns(netns, "etcd");
    c.arg("--data-dir")
        .arg(d.join("etcd"))
        .args([
            "--listen-client-urls",
            &client,
            "--advertise-client-urls",
            &client,
        ])
        .args([
            "--listen-peer-urls",
            &peer,
            "--initial-advertise-peer-urls",
            &peer,
        ])
        .arg(format!("--initial-cluster=default={peer}"))
        .env("ETCD_UNSUPPORTED_ARCH", "");
    tied(c, &d.join("etcd.log"))
}

fn start_apiserver(d: &Path, netns: &Path, port: u16, etcd: u16, net: Net) -> Proc {
    let f = |n: &str| d.join(n).display().to_string();
    let mut c = in_netns(netns, peers_bin().join("kube-apiserver"));
    c.arg(format!("--etcd-servers=http://127.0.0.1:{etcd}"))
        .arg(format!("--bind-address={}", net.bind))
        .arg(format!("--advertise-address={}", net.bind))
        .arg(format!("--secure-port={port}"))
        .arg(format!("--service-cluster-ip-range={}", net.service_cidr))
        .arg(format!("--client-ca-file={}", f("ca.crt")))
        .arg(format!("--tls-cert-file={}", f("srv.crt")))
        .arg(format!("--tls-private-key-file={}", f("srv.key")))
        .arg(format!(
            "--kubelet-client-certificate={}",
            f("apiserver-kubelet.crt")
        ))
        .arg(format!(
            "--kubelet-client-key={}",
            f("apiserver-kubelet.key")
        ))
        .arg(format!("--service-account-key-file={}", f("sa.pub")))
        .arg(format!(
            "--service-account-signing-key-file={}",
            f("sa.key")
        ))
        .arg("--service-account-issuer=https://kubernetes.default.svc")
        .arg(format!("--token-auth-file={}", f("tokens.csv")))
        .args([
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
        ])
        .arg("--kubelet-preferred-address-types=InternalIP,Hostname")
        .arg(format!("--cert-dir={}", f("apiserver-certs")));
    if d.join("authn-webhook.kubeconfig").exists() {
        // The webhook's answers are not cached (a refusal is never cached); kube-apiserver still
        // keeps a good token's user 10 s whatever this says (its TokenSuccessCacheTTL).
        c.arg(format!(
            "--authentication-token-webhook-config-file={}",
            f("authn-webhook.kubeconfig")
        ))
        .args([
            "--authentication-token-webhook-version=v1",
            "--authentication-token-webhook-cache-ttl=0s",
        ]);
    }
    tied(c, &d.join("kube-apiserver.log"))
}

fn curl(d: &Path, netns: &Path, host: &str, port: u16, path: &str) -> Command {
    let mut c = in_netns(netns, "curl");
    c.args(["-sS", "--max-time", "10", "-w", "%{http_code}", "--cacert"])
        .arg(d.join("ca.crt"))
        .args(["-H", &format!("Authorization: Bearer {ADMIN_TOKEN}")])
        .arg(format!("https://{host}:{port}{path}"));
    c
}

fn curl_status(d: &Path, netns: &Path, host: &str, port: u16, path: &str) -> u16 {
    let out = curl(d, netns, host, port, path)
        .args(["-o", "/dev/null"])
        .output();
    out.ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(0)
}

pub fn base64_encode(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(b)
}

fn base64_decode(s: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}
