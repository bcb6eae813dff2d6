//! EKS's token webhook for the control plane: the real `aws-iam-authenticator server`
//! (`tools/peers/build`), reaching STS and EC2 by their real names through a TLS front
//! (`tests/moto/aws_front.py`) that checks each presigned `GetCallerIdentity` as STS does and
//! answers from moto.
//!
//! The names: a mount namespace of the suite's own whose /etc/hosts maps
//! `sts.<region>.amazonaws.com` and `ec2.<region>.amazonaws.com` to the front's loopback
//! address, held by a process that dies with the test process; the authenticator runs in it, and
//! so does the agent (`Authenticator::in_names`), whose token must name the real STS host (the
//! authenticator refuses any other). Both trust the front through its CA in `SSL_CERT_FILE`: Go's
//! system roots for the authenticator (its STS call and its EC2 client), the platform's roots for
//! the agent.
//!
//! The mappings: the authenticator's `DynamicFile` backend (EKS's access entries), a file it
//! watches; each change is written in place with a new `Version`, and `map` returns once the
//! authenticator logged that version as loaded.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value};

use super::control_plane::{in_netns, peers_bin, tied};
use super::peers::Proc;

/// The static credentials the authenticator calls EC2 with (the front does not check EC2's
/// signatures; moto reads the caller from them).
const OWN_KEY: &str = "AKIAAUTHENTICATOR000";

/// How a role is mapped: an aws-auth `mapRoles` entry or an access entry, as the
/// authenticator's mapping file holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mapping {
    /// An `EC2_LINUX` access entry: `system:node:{{EC2PrivateDNSName}}` in
    /// `system:bootstrappers` and `system:nodes` (EC2 asked for the private DNS name).
    Ec2Linux,
    /// `system:node:{{SessionName}}` in the same groups: the Node named by the instance id
    /// (nodeadm's `InstanceIdNodeName`).
    SessionName,
    /// A node's username in `system:bootstrappers` only.
    WithoutNodes,
    /// A `STANDARD` access entry's default username: the assumed role's ARN; no group.
    Standard,
    /// No entry: the authenticator refuses the role.
    Unmapped,
}

impl Mapping {
    fn entry(self, arn: &str) -> Option<Value> {
        let node_groups = ["system:bootstrappers", "system:nodes"];
        let (user, groups): (String, &[&str]) = match self {
            Mapping::Ec2Linux => ("system:node:{{EC2PrivateDNSName}}".into(), &node_groups),
            Mapping::SessionName => ("system:node:{{SessionName}}".into(), &node_groups),
            Mapping::WithoutNodes => (
                "system:node:{{EC2PrivateDNSName}}".into(),
                &node_groups[..1],
            ),
            Mapping::Standard => {
                let (account, role) = arn
                    .strip_prefix("arn:aws:iam::")
                    .and_then(|r| r.split_once(":role/"))
                    .expect("a role ARN");
                (
                    format!("arn:aws:sts::{account}:assumed-role/{role}/{{{{SessionName}}}}"),
                    &[],
                )
            }
            Mapping::Unmapped => return None,
        };
        Some(json!({"rolearn": arn, "username": user, "groups": groups}))
    }
}

/// One TokenReview as the authenticator logged it: the user it came to, or why it refused.
#[derive(Debug, Clone, PartialEq)]
pub enum Review {
    Granted {
        username: String,
        groups: Vec<String>,
    },
    Denied {
        error: String,
        arn: Option<String>,
    },
}

#[derive(Default)]
struct State {
    version: u64,
    roles: BTreeMap<String, Mapping>,
    secrets: BTreeMap<String, Value>,
}

pub struct Authenticator {
    pub region: String,
    pub cluster: String,
    /// The webhook kubeconfig the authenticator wrote, which kube-apiserver reads.
    pub kubeconfig: PathBuf,
    /// The front's CA: what makes `sts.<region>.amazonaws.com` trusted here.
    pub front_ca: PathBuf,
    netns: PathBuf,
    /// The names' mount namespace (`/proc/PID/ns/mnt`).
    names: PathBuf,
    dir: PathBuf,
    state: Mutex<State>,
    _procs: Vec<Proc>,
}

/// Where the front listens in the network namespace: a loopback address of this process's
/// own (the host's loopback is shared between test processes), and of this front's own (two
/// control planes on the host in one process, the VM e2e's, each have theirs: a second front
/// on the first's address would leave the second authenticator asking the first's moto).
fn front_addr() -> String {
    static FRONTS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = FRONTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let p = std::process::id();
    let second = match n {
        0 => 100 + (p >> 16) % 100,
        n => 200 + (n - 1) % 50,
    };
    format!("127.{second}.{}.{}", (p >> 8) & 255, (p & 255).max(1))
}

/// `program` in the network namespace `netns` and the mount namespace `names`, in this
/// process's working directory.
pub fn names_command(netns: &Path, names: &Path, program: impl AsRef<OsStr>) -> Command {
    let mut c = Command::new("nsenter");
    c.arg(format!("--net={}", netns.display()))
        .arg(format!("--mount={}", names.display()))
        .args(["--wd=.", "--"])
        .arg(program);
    c
}

impl Authenticator {
    /// The front and the authenticator for `cluster` in `region`, in `netns`, STS and EC2
    /// answered by `moto`; their files under `d`. Returns once the authenticator serves and its
    /// webhook kubeconfig is written.
    pub fn start(d: &Path, netns: &Path, moto: &str, region: &str, cluster: &str) -> Authenticator {
        let dir = d.join("iam-authenticator");
        let addr = front_addr();
        let (names_proc, names) = names_namespace(&dir, netns, region, &addr);
        let front_ca = dir.join("front/ca.crt");
        let a = Authenticator {
            region: region.into(),
            cluster: cluster.into(),
            kubeconfig: d.join("authn-webhook.kubeconfig"),
            front_ca,
            netns: netns.into(),
            names,
            dir,
            state: Mutex::new(State::default()),
            _procs: vec![],
        };
        a.write_secrets(&BTreeMap::new());
        a.write_mappings(&BTreeMap::new(), "suite-0");
        let front = a.start_front(&addr, moto);
        let server = a.start_server();
        Authenticator {
            _procs: vec![server, front, names_proc],
            ..a
        }
    }

    /// `program` run where the Region's STS and EC2 are the front: the suite's network
    /// namespace and the names' mount namespace.
    pub fn in_names(&self, program: impl AsRef<OsStr>) -> Command {
        names_command(&self.netns, &self.names, program)
    }

    /// The front on `addr`:443, once it listens (after its SigV4 self-test).
    fn start_front(&self, addr: &str, moto: &str) -> Proc {
        let d = self.dir.join("front");
        std::fs::create_dir_all(&d).unwrap();
        let names = [
            format!("DNS:sts.{}.amazonaws.com", self.region),
            format!("DNS:ec2.{}.amazonaws.com", self.region),
        ];
        let (_, crt, key) = super::tls::certificates_for(&d, &names);
        let script = super::manifest_dir().join("tests/moto/aws_front.py");
        let mut c = in_netns(&self.netns, "python3");
        c.arg(script)
            .args(["--listen", addr, "--region", &self.region, "--moto", moto])
            .arg("--cert")
            .arg(crt)
            .arg("--key")
            .arg(key)
            .arg("--secrets")
            .arg(self.dir.join("secrets.json"))
            .arg("--calls")
            .arg(self.dir.join("calls.jsonl"));
        let log = self.dir.join("front.log");
        let mut proc = tied(c, &log);
        let what = format!("the STS front on {addr}:443");
        serving(&mut proc, &what, &log, || {
            super::netns::accepts(&self.netns, addr, 443)
        });
        proc
    }

    /// `aws-iam-authenticator server` in the names' namespace, once it serves.
    fn start_server(&self) -> Proc {
        let port = super::netns::free_port(&self.netns);
        let state = self.dir.join("state");
        std::fs::create_dir_all(&state).unwrap();
        let config = self.dir.join("config.json");
        let cfg = json!({"clusterID": self.cluster, "server": {
            "hostname": "127.0.0.1",
            "dynamicfilepath": self.dir.join("mappings.json"),
        }});
        std::fs::write(&config, cfg.to_string()).unwrap();
        let mut c = self.in_names(peers_bin().join("aws-iam-authenticator"));
        c.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &self.dir)
            .env("AWS_REGION", &self.region)
            .env("AWS_ACCESS_KEY_ID", OWN_KEY)
            .env("AWS_SECRET_ACCESS_KEY", "authenticator-secret")
            .env("AWS_CONFIG_FILE", "/nonexistent")
            .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
            // Its Region from the environment, never from instance metadata.
            .env("AWS_EC2_METADATA_DISABLED", "true")
            // Both its STS call (Go's own HTTP client) and its EC2 client (aws-sdk-go) trust
            // Go's system roots, which this names; the environment's AWS_CA_BUNDLE is cleared.
            .env("SSL_CERT_FILE", &self.front_ca)
            .arg("server")
            .arg("--config")
            .arg(&config)
            .args(["--log-format", "json", "--backend-mode", "DynamicFile"])
            .args(["--address", "127.0.0.1", "--port", &port.to_string()])
            .arg("--state-dir")
            .arg(&state)
            .arg("--generate-kubeconfig")
            .arg(&self.kubeconfig);
        let mut proc = tied(c, &self.log_path());
        serving(&mut proc, "aws-iam-authenticator", &self.log_path(), || {
            self.kubeconfig.exists()
                && super::netns::listening(&self.netns, port)
                && self.logged(|v| {
                    v["msg"]
                        .as_str()
                        .is_some_and(|m| m.starts_with("LoadDynamicFile"))
                })
        });
        proc
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("aws-iam-authenticator.log")
    }

    /// The authenticator's log as it wrote it.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Its log's JSON lines (it prints its version as text first).
    fn log_lines(&self) -> Vec<Value> {
        self.log()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    fn logged(&self, f: impl Fn(&Value) -> bool) -> bool {
        self.log_lines().iter().any(f)
    }

    /// Every TokenReview so far, in order.
    pub fn reviews(&self) -> Vec<Review> {
        let strings = |v: &Value| -> Vec<String> {
            v.as_array()
                .into_iter()
                .flatten()
                .filter_map(|g| g.as_str().map(String::from))
                .collect()
        };
        self.log_lines()
            .iter()
            .filter_map(|v| match v["msg"].as_str()? {
                "access granted" => Some(Review::Granted {
                    username: v["username"].as_str()?.to_string(),
                    groups: strings(&v["groups"]),
                }),
                "access denied" => Some(Review::Denied {
                    error: v["error"].as_str().unwrap_or_default().to_string(),
                    arn: v["arn"].as_str().map(String::from),
                }),
                _ => None,
            })
            .collect()
    }

    /// The calls the front took, one JSON object each: `service`, `path`, `action`, `key` (the
    /// access key), `cluster` (the x-k8s-aws-id header), `status`, `code` (STS's error code).
    pub fn front_calls(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.join("calls.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The front's STS calls for the access key `key`.
    pub fn sts_calls(&self, key: &str) -> Vec<Value> {
        self.front_calls()
            .into_iter()
            .filter(|c| c["service"] == "sts" && c["key"] == key)
            .collect()
    }

    /// Tell the front the secret (and session token) of an access key, as IAM knows it.
    pub fn learn(&self, key: &str, secret: &str, token: &str) {
        let mut s = self.state.lock().unwrap();
        s.secrets
            .insert(key.into(), json!({"secret": secret, "token": token}));
        self.write_secrets(&s.secrets);
    }

    fn write_secrets(&self, secrets: &BTreeMap<String, Value>) {
        // Whole or not at all: the front reads the file at each call.
        let tmp = self.dir.join("secrets.json.tmp");
        std::fs::create_dir_all(&self.dir).unwrap();
        std::fs::write(&tmp, serde_json::to_string(secrets).unwrap()).unwrap();
        std::fs::rename(tmp, self.dir.join("secrets.json")).unwrap();
    }

    /// Whether `role_arn` is mapped.
    pub fn maps(&self, role_arn: &str) -> bool {
        self.state.lock().unwrap().roles.contains_key(role_arn)
    }

    /// Map `role_arn` as `m` says (`Mapping::Unmapped` removes its entry); returns once the
    /// authenticator has loaded the change.
    pub fn map(&self, role_arn: &str, m: Mapping) {
        let mut s = self.state.lock().unwrap();
        match m {
            Mapping::Unmapped => s.roles.remove(role_arn),
            _ => s.roles.insert(role_arn.into(), m),
        };
        s.version += 1;
        let version = format!("suite-{}", s.version);
        let t = Instant::now();
        // A write the watcher missed (one made while it was being set up) is written again.
        loop {
            self.write_mappings(&s.roles, &version);
            let written = Instant::now();
            let loaded = loop {
                let seen = self.logged(|v| {
                    v["msg"] == "logging latency metric" && v["Version"] == version.as_str()
                });
                if seen || written.elapsed() > Duration::from_secs(2) {
                    break seen;
                }
                std::thread::sleep(Duration::from_millis(10));
            };
            if loaded {
                eprintln!(
                    "aws-iam-authenticator: mappings {version} loaded in {:?}",
                    t.elapsed()
                );
                return;
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "aws-iam-authenticator did not load mappings {version}:\n{}",
                self.log()
            );
        }
    }

    /// The mapping file (the `DynamicFile` backend's format), written in place: the
    /// authenticator watches the file, not its directory.
    fn write_mappings(&self, roles: &BTreeMap<String, Mapping>, version: &str) {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let entries: Vec<Value> = roles.iter().filter_map(|(a, m)| m.entry(a)).collect();
        let doc = json!({
            "Version": version,
            "LastUpdatedDateTime": (now - 1).to_string(),
            "mapRoles": entries,
            "mapUsers": [],
            "mapAccounts": [],
        });
        std::fs::create_dir_all(&self.dir).unwrap();
        std::fs::write(self.dir.join("mappings.json"), doc.to_string()).unwrap();
    }
}

/// Wait until `ok` (at most 30 s); a process that exits first, or never gets there, fails the
/// test with its log.
fn serving(proc: &mut Proc, what: &str, log: &Path, mut ok: impl FnMut() -> bool) {
    let t = Instant::now();
    while !ok() {
        let exited = proc.0.try_wait().unwrap();
        if exited.is_some() || t.elapsed() > Duration::from_secs(30) {
            let said = std::fs::read_to_string(log).unwrap_or_default();
            panic!("{what} did not start ({exited:?}):\n{said}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A mount namespace whose /etc/hosts names the front as the Region's STS and EC2, held by a
/// process in `netns` that dies with the test process: (the holder, `/proc/PID/ns/mnt`).
fn names_namespace(dir: &Path, netns: &Path, region: &str, addr: &str) -> (Proc, PathBuf) {
    let names = format!("sts.{region}.amazonaws.com ec2.{region}.amazonaws.com");
    super::netns::hosts_namespace(dir, netns, &[(addr, names.as_str())])
}
