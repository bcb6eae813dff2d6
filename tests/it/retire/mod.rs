//! Failing fast where no launch hook waits (`verify.onFailure`, docs/join.md), and the guard
//! that keeps a fleet from retiring itself for a cause it shares. Against moto
//! (tests/moto/lifecycle_actions.py logs every SetInstanceHealth, TerminateInstances and
//! CreateTags in the order moto served them), the node's instance among others of its group
//! (or, outside a group, of the account), launched together from one image into one subnet:
//! - a node whose kubelet never starts while two like peers joined is its own cause: set
//!   `Unhealthy` (in a group) or terminated (outside one) once, kubelet stopped first, the cause
//!   tagged before either and its line on the console (the root's `/dev/console`);
//! - an API server that stalls, refuses connections, answers 503 or 401 after every peer joined
//!   is the fleet's: nothing retires;
//! - one like peer is not enough, a spent budget keeps the node, an unknown group keeps it;
//! - a refused retirement is tried again, as many times as asked.
//!
//! The world and the proof are here; the cases that retire are in `own_cause`, those that keep
//! the node in `kept`.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::join_proof::{
    complete_hook, imds, join_job, lines, report, stalling, write, DEADLINE, INSTANCE,
};
use crate::common;
use common::dbus::{serve_unit_states, start_bus};
use eks_nodeinit::instance::lifecycle::{CompleteAfter, LaunchHookJob, LAUNCH_HOOK_JOB};
use eks_nodeinit::verify::proof::JOIN_JOB;

const CLUSTER: &str = "prod";

/// moto logging the calls, its instances: `n` in group `asg-nodes` (with a hook named
/// `other` the node completes only when its job says so), or `n` outside any group.
pub(crate) struct World {
    pub(crate) moto: common::Moto,
    pub(crate) ids: Vec<String>,
    pub(crate) calls: PathBuf,
    pub(crate) _dir: tempfile::TempDir,
}

pub(crate) fn world(in_group: bool, deny_terminate: bool, n: i32) -> Option<World> {
    let deny = if deny_terminate { "1" } else { "0" };
    world_with(in_group, &[("MOTO_DENY_TERMINATE", deny)], n)
}

/// [`world`] with moto's environment `env` beside its logs.
pub(crate) fn world_with(in_group: bool, env: &[(&str, &str)], n: i32) -> Option<World> {
    let dir = tempfile::tempdir().unwrap();
    let calls = dir.path().join("calls.jsonl");
    let script = common::manifest_dir().join("tests/moto/lifecycle_actions.py");
    let lifecycle = dir.path().join("c.jsonl");
    let logs = [
        ("MOTO_LIFECYCLE_LOG", lifecycle.to_str().unwrap()),
        ("MOTO_CALL_LOG", calls.to_str().unwrap()),
    ];
    let env = [&logs[..], env].concat();
    let moto = common::start_moto_as(&[script.to_str().unwrap()], &env)?;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let ids = rt.block_on(async {
        let conf = common::moto_sdk_config(&moto.url, "us-east-1").await;
        if in_group {
            let a =
                common::group_with_launch_hook(&conf, "asg-nodes", "other", "us-east-1a", n).await;
            let out = a.describe_auto_scaling_instances().send().await.unwrap();
            let ids = out.auto_scaling_instances().iter();
            return ids.map(|i| i.instance_id().unwrap().to_string()).collect();
        }
        let ec2 = aws_sdk_ec2::Client::new(&conf);
        let out = ec2
            .run_instances()
            .image_id("ami-12c6146b")
            .min_count(n)
            .max_count(n)
            .send()
            .await
            .unwrap();
        let ids = out.instances().iter();
        ids.map(|i| i.instance_id().unwrap().to_string())
            .collect::<Vec<_>>()
    });
    Some(World {
        moto,
        ids,
        calls,
        _dir: dir,
    })
}

impl World {
    /// Instances `which` marked `key` = `value` by their own agents (not the node's calls: the
    /// log starts after).
    fn mark(&self, which: std::ops::Range<usize>, key: &str, value: &str) {
        let ids = self.ids[which].to_vec();
        self.ec2(|c| async move {
            let tag = aws_sdk_ec2::types::Tag::builder()
                .key(key)
                .value(value)
                .build();
            let r = c.create_tags().set_resources(Some(ids)).tags(tag);
            r.send().await.unwrap();
        });
        let _ = std::fs::remove_file(&self.calls);
    }

    /// `n` peers (after the node's own instance) joined.
    pub(crate) fn joined(&self, n: usize) {
        self.mark(1..1 + n, "eks-nodeinit/joined", CLUSTER);
    }

    fn ec2<F, Fut>(&self, f: F)
    where
        F: FnOnce(aws_sdk_ec2::Client) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let conf = common::moto_sdk_config(&self.moto.url, "us-east-1").await;
            f(aws_sdk_ec2::Client::new(&conf)).await
        });
    }

    /// The node's calls, as moto logged them: (action, instance) each.
    pub(crate) fn calls(&self) -> Vec<(String, String)> {
        lines(&self.calls)
            .iter()
            .map(|c| {
                let id = match c["Action"].as_str().unwrap() {
                    "SetInstanceHealth" => c["InstanceId"].clone(),
                    "TerminateInstances" => c["InstanceIds"][0].clone(),
                    _ => c["Resources"][0].clone(),
                };
                (
                    c["Action"].as_str().unwrap().into(),
                    id.as_str().unwrap().into(),
                )
            })
            .collect()
    }
}

/// What the API server does while the proof reads it.
pub(crate) enum Api {
    /// Accepts and never answers.
    Stalls,
    /// Refuses every connection (nothing listens).
    Refused,
    /// Answers every request with this status, over TLS the job trusts.
    Answers(u16),
    /// Serves the node's Node registered and not Ready, its Ready condition's message this.
    NotReady(&'static str),
    /// Serves the node's Node Ready, joined, another reporter's `gpu.example/Ready` False.
    ReporterFalse,
}

/// One failed proof of the world's first instance.
pub(crate) struct Run<'a> {
    pub(crate) group: Option<&'a str>,
    pub(crate) retire: &'a str,
    /// kubelet.service's state: `active`, or `failed` (never starts).
    pub(crate) kubelet: &'a str,
    pub(crate) api: Api,
    /// The launch hook the job names: `other`, which the group has and which waits, or one
    /// the group lacks (nothing waits on it).
    pub(crate) hook: Option<&'a str>,
    pub(crate) job: fn(&mut Value),
    pub(crate) extra: &'a [&'a str],
    /// What the node's root holds before the proof (the run's report).
    pub(crate) prep: fn(&Path),
    /// Whether the proof ends in a join after all (the command succeeds).
    pub(crate) joins: bool,
}

impl Default for Run<'_> {
    fn default() -> Self {
        Run {
            group: Some("asg-nodes"),
            retire: "unhealthy",
            kubelet: "failed",
            api: Api::Stalls,
            hook: None,
            job: |_| {},
            extra: &[],
            prep: |_| {},
            joins: false,
        }
    }
}

/// The proof as `r` says: the run's root and the unit calls made over D-Bus.
pub(crate) fn failed_proof(w: &World, r: Run) -> (tempfile::TempDir, Vec<(String, String)>) {
    let bus = start_bus().unwrap();
    let cell = std::sync::Arc::new(std::sync::Mutex::new(r.kubelet.to_string()));
    let units = serve_unit_states(&bus.address, &[("kubelet.service", cell)]);
    let imds = imds();
    let (stall, answer);
    let (endpoint, ca) = match r.api {
        Api::Stalls => {
            stall = stalling();
            (format!("https://127.0.0.1:{}", stall.port), None)
        }
        Api::Refused => {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            (format!("https://127.0.0.1:{port}"), None)
        }
        Api::Answers(_) | Api::NotReady(_) | Api::ReporterFalse => {
            answer = match r.api {
                Api::NotReady(m) => common::tls::answering_with(200, Some(&not_ready(m))),
                Api::ReporterFalse => common::tls::answering_with(200, Some(&reporter_false())),
                Api::Answers(s) => common::tls::answering(s),
                _ => unreachable!(),
            };
            let pem = answer.ca_pem.clone();
            (format!("https://127.0.0.1:{}", answer.port), Some(pem))
        }
    };
    let root = tempfile::tempdir().unwrap();
    // The node's /dev, where its console is.
    std::fs::create_dir(root.path().join("dev")).unwrap();
    join_job(
        root.path(),
        &imds.url(),
        &endpoint,
        None,
        (DEADLINE, r.group),
    );
    let path = root.path().join(&JOIN_JOB[1..]);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut job: Value = serde_json::from_str(&text.replace(INSTANCE, &w.ids[0])).unwrap();
    job["retire"] = json!(r.retire);
    if let Some(pem) = ca {
        use base64::Engine;
        job["certificateAuthority"] = json!(base64::engine::general_purpose::STANDARD.encode(pem));
    }
    (r.job)(&mut job);
    write(root.path(), JOIN_JOB, &job.to_string());
    (r.prep)(root.path());
    if let Some(hook) = r.hook {
        let job = LaunchHookJob {
            hook: hook.into(),
            group: r.group.map(String::from),
            instance_id: w.ids[0].clone(),
            region: "us-east-1".into(),
            state: "InService".into(),
            after: CompleteAfter::Kubelet,
            aws: Default::default(),
        };
        write(root.path(), LAUNCH_HOOK_JOB, &job.to_text());
    }
    let env = [
        ("AWS_ENDPOINT_URL_AUTO_SCALING", w.moto.url.as_str()),
        ("AWS_ENDPOINT_URL_EC2", w.moto.url.as_str()),
    ];
    // One attempt unless the run asks for more (the unit's default: until the instance is gone).
    let once: &[&str] = match r.extra.contains(&"--retire-attempts") {
        true => &[],
        false => &["--retire-attempts", "1"],
    };
    let extra = [once, r.extra].concat();
    let (out, _) = complete_hook(root.path(), &bus.address, &env, &extra);
    assert_eq!(
        out.status.success(),
        r.joins,
        "the node joined, or not, as the run says"
    );
    let units = units.lock().unwrap();
    let units = units.iter().map(|c| (c.0.clone(), c.1.clone())).collect();
    (root, units)
}

/// A Node registered and not Ready, as the API server serves it.
fn not_ready(message: &str) -> String {
    json!({"kind": "Node", "metadata": {"name": "n"}, "spec": {},
        "status": {"conditions": [{"type": "Ready", "status": "False",
            "reason": "KubeletNotReady", "message": message}]}})
    .to_string()
}

/// A Node Ready and joined as the agent set it, whose GPU reporter says `False`.
fn reporter_false() -> String {
    let c = |t: &str, s: &str| json!({"type": t, "status": s, "reason": "R", "message": "m"});
    json!({"kind": "Node", "metadata": {"name": "n"}, "spec": {},
        "status": {"conditions": [c("Ready", "True"), c("eks-nodeinit.io/Joined", "True"),
            c("gpu.example/Ready", "False")]}})
    .to_string()
}

pub(crate) fn console(root: &Path) -> String {
    std::fs::read_to_string(root.join("dev/console")).unwrap_or_default()
}

pub(crate) fn join_of(root: &Path) -> Value {
    report(root)["join"].clone()
}

/// The tag first, on the node's own instance: its value the verdict and the cause.
fn assert_tagged_first(w: &World, calls: &[(String, String)]) {
    assert_eq!(
        calls[0],
        ("CreateTags".into(), w.ids[0].clone()),
        "{calls:?}"
    );
    let log = lines(&w.calls);
    let tag = &log[0]["Tags"][0];
    assert_eq!(tag["Key"], "eks-nodeinit/retired");
    let value = tag["Value"].as_str().unwrap();
    assert!(
        value.starts_with("deadline: kubelet.service is failed"),
        "{value}"
    );
    assert!(value.chars().count() <= 256, "{value}");
}

const KUBELET_STOPPED: (&str, &str) = ("StopUnit", "kubelet.service");

pub(crate) fn stopped(units: &[(String, String)]) -> bool {
    units
        .iter()
        .any(|(m, u)| (m.as_str(), u.as_str()) == KUBELET_STOPPED)
}

/// Nothing retired, tagged or stopped; the verdict's blame `cluster` and its cause saying why.
pub(crate) fn assert_kept(w: &World, root: &Path, units: &[(String, String)], says: &str) {
    assert!(w.calls().is_empty(), "{:?}", w.calls());
    assert!(!stopped(units), "{units:?}");
    assert!(console(root).is_empty());
    let join = join_of(root);
    assert_eq!(join["blame"], "cluster", "{join:#}");
    assert!(join.get("retired").is_none(), "{join:#}");
    let causes = join["causes"].to_string();
    assert!(causes.contains(says), "{causes}");
}

mod kept;
mod own_cause;
