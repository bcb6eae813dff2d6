//! The proof after the hand-off: with the node's own token (the Node authorizer lets a node
//! read its own Node), wait for the Node until it is `Ready=True` or the deadline, then compare
//! its labels, taints and allocatable with the plan. The job the run leaves for it is
//! [`JoinJob`], a per-boot file that `eks-nodeinit complete-hook` reads.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use base64::Engine;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::conditions::Condition;
use super::kube::ApiServer;
use super::name::{is_node_name, NodeName};
use super::record::JoinVerdict;
use super::verdict::{Blame, Seen};
use super::{token, Cause, Context};
use crate::base::k8s::milli_value;
use crate::base::text::{escaped, printable};

/// The per-boot job (mode 0600: it holds the cluster CA).
pub const JOIN_JOB: &str = "/run/eks-nodeinit/join.json";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JoinJob {
    pub cluster: String,
    pub region: String,
    pub endpoint: String,
    /// base64 of the PEM, as the config and EKS give it (a secret).
    pub certificate_authority: String,
    /// The name the hand-off gives the Node.
    pub node: NodeName,
    /// The instance the Node must be (its `spec.providerID` ends with it).
    pub instance_id: String,
    /// Its Auto Scaling group, whose other instances' joins tell whose a failure is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    pub sts_url: String,
    pub imds_endpoint: String,
    /// Whether the AWS calls take the services' dual-stack names, as the boot's did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dual_stack: Option<bool>,
    /// `imds.allowV1Fallback`: the proof reads the role's credentials as the boot did.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub imds_v1_fallback: bool,
    pub deadline_secs: u64,
    /// `verify.join: strict`: every verdict but `joined` abandons the launch.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub strict: bool,
    /// How the node reaches the API server and AWS: the config's proxy and CA bundles (the
    /// proof's unit need not have them in its environment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<crate::aws::Transport>,
    pub expect: Expect,
    /// `verify.initDeadline`: how long after kubelet is active the Node's watched conditions
    /// may take to be all True.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_deadline_secs: Option<u64>,
    /// `verify.initConditions`: other reporters' condition types it waits for too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub init_conditions: Vec<String>,
    /// `verify.onFailure`: how the node retires itself on a failed join of its own cause where
    /// no launch hook waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retire: Option<super::retire::Retire>,
    /// In an Auto Scaling group whose name the boot could not read: its peers cannot be told,
    /// so no verdict is the node's own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub group_unknown: bool,
    /// `verify.lateJoin` in seconds: how long a node kept after a failed join is watched.
    #[serde(default)]
    pub late_join_secs: u64,
    /// `verify.mismatch: hold`: a mismatch's `Joined` condition is `False`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hold_mismatch: bool,
}

/// What the Node must show.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expect {
    pub labels: BTreeMap<String, String>,
    /// `key[=value]:Effect`.
    pub taints: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<u64>,
    /// CPU held back from pods, in millicores (kube-reserved, system-reserved, or the reserved
    /// CPUs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_reserved_millis: Option<u64>,
    /// Memory held back from pods besides huge pages: kube- and system-reserved and the hard
    /// eviction threshold, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_reserved_bytes: Option<u64>,
}

impl JoinJob {
    pub fn to_text(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }

    /// What the proof's calls share: the job's cluster, name and transport.
    pub fn context(&self) -> Context {
        let ca = base64::engine::general_purpose::STANDARD
            .decode(&self.certificate_authority)
            .unwrap_or_default();
        let t = self.transport.clone().unwrap_or_default();
        Context {
            cluster: self.cluster.clone(),
            region: self.region.clone(),
            endpoint: self.endpoint.clone(),
            ca_pem: String::from_utf8_lossy(&ca).into_owned(),
            node: Some(self.node.clone()),
            imds_endpoint: self.imds_endpoint.clone(),
            dual_stack: self.dual_stack,
            imds_v1_fallback: self.imds_v1_fallback,
            proxy: t.proxy,
            ca_bundles: t.ca_bundles,
            sts_url: self.sts_url.clone(),
        }
    }
}

/// What the proof came to.
#[derive(Debug, Clone, PartialEq)]
pub struct Proof {
    pub verdict: JoinVerdict,
    /// Whose cause it is when the node did not join: the node's own (a replacement may join)
    /// or the cluster's (a replacement would meet it too).
    pub blame: Option<Blame>,
    pub causes: Vec<String>,
    /// What was compared and found as planned.
    pub checked: Vec<String>,
    /// When kubelet was active, the Node first seen, and Ready (unix ms).
    pub kubelet_active_at: Option<u64>,
    pub registered_at: Option<u64>,
    pub ready_at: Option<u64>,
    /// What was seen of the Node when it did not join: what the blame is judged from.
    pub seen: Seen,
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The longest one read of the Node may take, everything in it (IMDS, DNS, connect, the
/// proxy's CONNECT, TLS, the answer): a read that stalls is given up for the next one.
pub const LOOK_TIMEOUT: Duration = Duration::from_secs(10);

/// The node's token, made again when older than five minutes (the API server accepts one for
/// fifteen), and the role it is made from.
#[derive(Default)]
struct Tokens {
    made: Option<(Instant, String)>,
    role: String,
}

impl Tokens {
    async fn get(&mut self, ctx: &Context) -> Result<String, Cause> {
        if let Some((at, t)) = &self.made {
            if at.elapsed() < Duration::from_secs(300) {
                return Ok(t.clone());
            }
        }
        let creds = token::credentials(&ctx.imds_endpoint, ctx.imds_v1_fallback).await?;
        let t = ctx.token(&creds)?;
        self.role = creds.role;
        self.made = Some((Instant::now(), t.clone()));
        Ok(t)
    }
}

/// One read of the Node.
enum Look {
    Node(serde_json::Value),
    /// Not (yet) registered by this instance, and what was seen.
    Absent(String),
}

/// The node's own access to its Node: its token (made again when old) and the Node's name
/// (learnt from the identity when the plan could not know it).
#[derive(Default)]
pub struct OwnNode {
    tokens: Tokens,
    name: Option<String>,
}

/// The proof's state between reads.
#[derive(Default)]
struct Prover {
    own: OwnNode,
    seen: Seen,
    registered_at: Option<u64>,
}

/// Wait for the Node (every `every`) until Ready or `deadline` from now, then judge it. Every
/// read is cut at [`LOOK_TIMEOUT`] and at the deadline; a read the deadline cuts keeps what the
/// reads before it saw. Whose cause a failure is, is judged after ([`super::verdict::blame`]).
///
/// `pending`: the conditions the Node gets when first seen (the boot's conditions while the
/// proof runs); the node's access to its Node is given back for the conditions after it.
pub async fn prove(
    job: &JoinJob,
    ctx: &Context,
    every: Duration,
    pending: &[Condition],
) -> (Proof, OwnNode) {
    // The job is the agent's own (the config bounds the deadline to an hour): a day at most.
    let end = Instant::now() + Duration::from_secs(job.deadline_secs.min(86_400));
    let mut p = Prover {
        own: OwnNode::of(job),
        ..Prover::default()
    };
    loop {
        let started = Instant::now();
        let cut = end.min(started + LOOK_TIMEOUT);
        let look = tokio::time::timeout_at(cut, p.own.look(ctx, &job.instance_id));
        let look = look.await;
        if let Ok(Ok(Look::Node(node))) = &look {
            if p.registered_at.is_none() {
                let set = p.own.set_logged(ctx, pending, Some(node));
                let _ = tokio::time::timeout_at(end, set).await;
            }
        }
        match look {
            Ok(Ok(Look::Node(node))) if ready(&node) => return p.judged(&node, &job.expect),
            Ok(Ok(Look::Node(node))) => {
                p.registered_at.get_or_insert_with(now_ms);
                p.seen.not_ready(&p.name_text(), ready_message(&node));
            }
            Ok(Ok(Look::Absent(why))) => p.seen.absent(why),
            Ok(Err(c)) => p.seen.failed(c),
            Err(_) if cut < end || p.seen.is_empty() => p.seen.failed(stalled(cut - started)),
            Err(_) => {}
        }
        let now = Instant::now();
        if now >= end {
            break;
        }
        tokio::time::sleep(every.min(end - now)).await;
    }
    p.timed_out(job.deadline_secs)
}

fn stalled(after: Duration) -> Cause {
    Cause::new(
        "timeout",
        format!("one read of the Node was given up after {}s: the API server, the proxy or IMDS accepted the connection and did not answer", after.as_secs()),
    )
}

impl OwnNode {
    pub fn of(job: &JoinJob) -> OwnNode {
        OwnNode {
            name: job.node.known().map(String::from),
            ..OwnNode::default()
        }
    }

    /// The Node, when this instance's is registered.
    pub async fn node(
        &mut self,
        ctx: &Context,
        instance_id: &str,
    ) -> Result<Option<serde_json::Value>, Cause> {
        match self.look(ctx, instance_id).await? {
            Look::Node(n) => Ok(Some(n)),
            Look::Absent(_) => Ok(None),
        }
    }

    /// Set `conditions` on the Node (`node`: as last read, else read now, for the transition
    /// times of the conditions whose status stays).
    pub async fn set(
        &mut self,
        ctx: &Context,
        conditions: &[Condition],
        node: Option<&serde_json::Value>,
    ) -> Result<(), Cause> {
        let (token, name) = (self.tokens.get(ctx).await?, self.name()?);
        let api = ApiServer::of(ctx)?;
        let read = match node {
            Some(_) => None,
            None => {
                let path = format!("/api/v1/nodes/{name}");
                let a = api.call("GET", &path, Some(&token), None).await?;
                serde_json::from_slice::<serde_json::Value>(&a.body).ok()
            }
        };
        let node = node.or(read.as_ref());
        super::conditions::set(&api, &token, &name, conditions, node).await
    }

    /// [`Self::set`], a failure logged: the conditions inform controllers, the verdict stands.
    pub async fn set_logged(
        &mut self,
        ctx: &Context,
        conditions: &[Condition],
        node: Option<&serde_json::Value>,
    ) -> Option<Cause> {
        if conditions.is_empty() {
            return None;
        }
        let cut = tokio::time::timeout(LOOK_TIMEOUT, self.set(ctx, conditions, node));
        let r = cut.await.unwrap_or_else(|_| Err(stalled(LOOK_TIMEOUT)));
        match r {
            Ok(()) => {
                let set: Vec<String> = conditions.iter().map(Condition::to_string).collect();
                tracing::info!("Node conditions set: {}", set.join(", "));
                None
            }
            Err(c) => {
                tracing::warn!(
                    "the Node's conditions could not be set: ({}) {}",
                    c.code,
                    c.detail
                );
                Some(c)
            }
        }
    }

    fn name(&self) -> Result<String, Cause> {
        self.name
            .clone()
            .ok_or_else(|| Cause::new("name-unknown", "the Node's name is not known yet".into()))
    }

    /// The Node by name (learnt from the identity when the plan could not know it).
    async fn look(&mut self, ctx: &Context, instance_id: &str) -> Result<Look, Cause> {
        let token = self.tokens.get(ctx).await?;
        let api = ApiServer::of(ctx)?;
        let name = match &self.name {
            Some(n) => n.clone(),
            None => {
                let (user, _) = api.whoami(&token, &self.tokens.role).await?;
                let n = user.strip_prefix("system:node:").ok_or_else(|| {
                    Cause::new(
                        "wrong-identity",
                        format!("the API server sees the node as {}", printable(&user)),
                    )
                })?;
                self.name = Some(n.to_string());
                n.to_string()
            }
        };
        if !is_node_name(&name) {
            return Err(Cause::new(
                "wrong-identity",
                format!("`{}` cannot name a Node", printable(&name)),
            ));
        }
        let a = api
            .call("GET", &format!("/api/v1/nodes/{name}"), Some(&token), None)
            .await?;
        let body = || escaped(&String::from_utf8_lossy(&a.body));
        match a.status {
            200 => {
                let node: serde_json::Value = serde_json::from_slice(&a.body)
                    .map_err(|_| Cause::new("http", "the Node is not JSON".into()))?;
                Ok(of_instance(node, &name, instance_id))
            }
            404 => Ok(Look::Absent(format!("no Node {} registered yet", printable(&name)))),
            401 => Err(super::kube::refused(ctx, &self.tokens.role, a.date.as_deref())),
            403 => Err(Cause::new("wrong-identity", format!("the API server forbids the node to read Node {0} (403): its identity is not system:node:{0}: {1}", printable(&name), body()))),
            s @ (429 | 500..=599) => Err(Cause::new("unavailable", format!("GET Node answered {s}: {}", body()))),
            s => Err(Cause::new("http", format!("GET Node answered {s}: {}", body()))),
        }
    }
}

impl Prover {
    fn name_text(&self) -> String {
        printable(self.own.name.as_deref().unwrap_or(""))
    }

    /// Ready: compared with the plan.
    fn judged(mut self, node: &serde_json::Value, e: &Expect) -> (Proof, OwnNode) {
        self.registered_at.get_or_insert_with(now_ms);
        let (checked, diffs) = judge(node, e);
        let verdict = match diffs.is_empty() {
            true => JoinVerdict::Joined,
            false => JoinVerdict::Mismatch,
        };
        let p = Proof {
            verdict,
            blame: None,
            causes: diffs,
            checked,
            kubelet_active_at: None,
            registered_at: self.registered_at,
            ready_at: Some(now_ms()),
            seen: Seen::default(),
        };
        (p, self.own)
    }

    /// The deadline passed: the verdict and what was seen.
    fn timed_out(self, deadline_secs: u64) -> (Proof, OwnNode) {
        let verdict = match self.registered_at.is_some() {
            true => JoinVerdict::NotReady,
            false => JoinVerdict::Deadline,
        };
        let cause = format!(
            "no Ready Node within {deadline_secs}s: {}",
            self.seen.last()
        );
        let p = Proof {
            verdict,
            blame: None,
            causes: vec![cause],
            checked: Vec::new(),
            kubelet_active_at: None,
            registered_at: self.registered_at,
            ready_at: None,
            seen: self.seen,
        };
        (p, self.own)
    }
}

/// The Node read, unless it is another instance's (`spec.providerID` is `aws:///<zone>/<id>`):
/// a stale Node of a terminated instance that had the same name.
fn of_instance(node: serde_json::Value, name: &str, instance_id: &str) -> Look {
    let pid = node["spec"]["providerID"].as_str().unwrap_or("");
    match pid.is_empty() || pid.ends_with(&format!("/{instance_id}")) {
        true => Look::Node(node),
        false => Look::Absent(format!(
            "the Node {} is another instance's (providerID {}), not {}'s",
            printable(name),
            printable(pid),
            printable(instance_id)
        )),
    }
}

fn ready(node: &serde_json::Value) -> bool {
    super::conditions::find(node, "Ready").is_some_and(|c| c["status"] == "True")
}

fn ready_message(node: &serde_json::Value) -> String {
    super::conditions::find(node, "Ready").map_or("no Ready condition yet".into(), |c| {
        escaped(c["message"].as_str().unwrap_or(""))
    })
}

/// The Node against the plan: what matched, and every difference.
pub fn judge(node: &serde_json::Value, e: &Expect) -> (Vec<String>, Vec<String>) {
    let (mut ok, mut diffs) = (Vec::new(), Vec::new());
    let labels = &node["metadata"]["labels"];
    for (k, v) in &e.labels {
        match labels[k].as_str() {
            Some(got) if got == v => {}
            got => diffs.push(format!(
                "label {k}: planned `{v}`, the Node has {}",
                got.map_or("none".into(), |g| format!("`{}`", printable(g)))
            )),
        }
    }
    ok.push(format!("{} planned labels", e.labels.len()));
    let taints: Vec<String> = node["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .map(taint_text)
        .collect();
    for t in &e.taints {
        if !taints.contains(t) {
            diffs.push(format!(
                "taint {t}: planned, the Node has [{}]",
                printable(&taints.join(", "))
            ));
        }
    }
    ok.push(format!("{} planned taints", e.taints.len()));
    allocatable(node, e, &mut ok, &mut diffs);
    (ok, diffs)
}

/// Pods, CPU and memory allocatable against capacity less the plan's reservations (and the
/// huge pages the kubelet takes out of memory).
fn allocatable(
    node: &serde_json::Value,
    e: &Expect,
    ok: &mut Vec<String>,
    diffs: &mut Vec<String>,
) {
    let (cap, alloc) = (&node["status"]["capacity"], &node["status"]["allocatable"]);
    if let Some(p) = e.pods {
        let got = alloc["pods"].as_str().and_then(|s| s.parse::<u64>().ok());
        match got == Some(p) {
            true => ok.push(format!("allocatable pods {p}")),
            false => diffs.push(format!(
                "allocatable pods: planned {p} (maxPods), the Node has {}",
                alloc["pods"]
            )),
        }
    }
    let huge: u128 = cap
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with("hugepages-"))
        .filter_map(|(_, v)| milli(v))
        .sum();
    let pairs = [
        ("cpu", e.cpu_reserved_millis.map(u128::from), 0, "m"),
        (
            "memory",
            e.memory_reserved_bytes.map(|b| u128::from(b) * 1000),
            huge,
            "",
        ),
    ];
    for (res, reserved, more, unit) in pairs {
        let (Some(reserved), Some(c), Some(a)) = (reserved, milli(&cap[res]), milli(&alloc[res]))
        else {
            continue;
        };
        let want = c.saturating_sub(reserved).saturating_sub(more);
        let show = |v: u128| match unit {
            "m" => format!("{v}m"),
            _ => format!("{}", v / 1000),
        };
        match a == want {
            true => ok.push(format!(
                "allocatable {res} {} = capacity − reservation",
                show(a)
            )),
            false => diffs.push(format!(
                "allocatable {res}: planned {} (capacity {} − reserved {}), the Node has {}",
                show(want),
                show(c),
                show(reserved + more),
                show(a)
            )),
        }
    }
}

fn milli(v: &serde_json::Value) -> Option<u128> {
    milli_value(v.as_str()?)
}

/// `key[=value]:Effect`, as the plan writes taints.
fn taint_text(t: &serde_json::Value) -> String {
    let (k, v, e) = (
        t["key"].as_str().unwrap_or(""),
        t["value"].as_str().unwrap_or(""),
        t["effect"].as_str().unwrap_or(""),
    );
    match v.is_empty() {
        true => format!("{k}:{e}"),
        false => format!("{k}={v}:{e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node() -> serde_json::Value {
        json!({
            "metadata": {"labels": {"role": "scaler", "kubernetes.io/hostname": "n"}},
            "spec": {"taints": [{"key": "dedicated", "value": "scaler", "effect": "NoSchedule"}]},
            "status": {
                "capacity": {"cpu": "2", "memory": "8049136Ki", "pods": "29", "hugepages-2Mi": "32Mi"},
                "allocatable": {"cpu": "1930m", "memory": "7326192Ki", "pods": "29"},
                "conditions": [{"type": "Ready", "status": "True"}]
            }
        })
    }

    #[test]
    fn a_node_as_planned_passes_and_every_difference_is_named() {
        // memory: 8049136Ki − (255 + 11×29 + 100) Mi − 32 Mi of huge pages = 7326192Ki.
        let reserved = ((255 + 11 * 29 + 100) << 20) as u64;
        let mut e = Expect {
            labels: BTreeMap::from([("role".into(), "scaler".into())]),
            taints: vec!["dedicated=scaler:NoSchedule".into()],
            pods: Some(29),
            cpu_reserved_millis: Some(70),
            memory_reserved_bytes: Some(reserved),
        };
        let (ok, diffs) = judge(&node(), &e);
        assert!(diffs.is_empty(), "{diffs:?}");
        assert_eq!(ok.len(), 5, "{ok:?}");
        e.pods = Some(110);
        e.labels.insert("team".into(), "a".into());
        e.taints.push("x:NoExecute".into());
        e.cpu_reserved_millis = Some(80);
        let (_, diffs) = judge(&node(), &e);
        assert_eq!(diffs.len(), 4, "{diffs:?}");
        assert!(diffs[0].starts_with("label team"));
        assert!(diffs
            .iter()
            .any(|d| d.starts_with("allocatable cpu: planned 1920m")));
        assert!(ready(&node()));
    }
}
