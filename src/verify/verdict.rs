//! Whose cause a failed join is, and what the launch is told. An `ABANDON` terminates the
//! instance and Auto Scaling launches another just like it: that helps only when the cause is
//! the node's own (a kubelet that never became active, a node that never registers or stays
//! NotReady while other Nodes of the cluster are Ready, a clock far off). A cause every node of
//! the group meets alike (the role's mapping, the cluster's CA, a network setting, a cluster
//! without a working network plugin) is named at error priority and the launch goes on
//! (`CONTINUE`): abandoning would only replace node after node. `verify.join: strict` abandons
//! on every verdict but `joined`. A Node Ready but not as planned (`mismatch`) is a finding.

use serde::{Deserialize, Serialize};

use super::record::JoinVerdict;
use super::Cause;
use crate::aws::autoscaling::HookResult;

/// Whose cause it is.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum Blame {
    /// This node's own: a replacement may join.
    Node,
    /// The cluster's or the group's: a replacement would meet it too.
    Cluster,
}

impl Blame {
    pub fn as_str(self) -> &'static str {
        match self {
            Blame::Node => "node",
            Blame::Cluster => "cluster",
        }
    }
}

/// What the proof saw at its last read of the Node.
#[derive(Debug, Default)]
pub struct Seen {
    /// The last read's failure.
    cause: Option<Cause>,
    /// The Node registered, not Ready: its Ready condition's message.
    not_ready: Option<String>,
    /// The last read's line.
    last: String,
}

/// The causes that the cluster's or the group's configuration gives every node alike.
const CLUSTER_CAUSES: &[&str] = &[
    "unauthenticated",
    "wrong-identity",
    "not-node",
    "tls-untrusted",
    "tls-name",
    "readyz",
    "unavailable",
    "credentials",
    "dns",
    "tcp",
    "timeout",
    "proxy",
    "tls",
    "http",
];

impl Seen {
    pub fn not_ready(&mut self, name: &str, message: String) {
        self.last = format!("the Node {name} is registered but not Ready: {message}");
        self.not_ready = Some(message);
        self.cause = None;
    }

    pub fn absent(&mut self, why: String) {
        self.last = why;
        self.not_ready = None;
        self.cause = None;
    }

    pub fn failed(&mut self, c: Cause) {
        self.last = format!("({}) {}; {}", c.code, c.detail, c.todo());
        self.cause = Some(c);
    }

    /// The last read's line.
    pub fn last(&self) -> &str {
        &self.last
    }

    /// Whether the last read reached the API server as the node (the cluster's Nodes can be
    /// listed).
    pub fn reached(&self) -> bool {
        self.cause.is_none()
    }
}

/// Whose cause it is, and why, from what the proof saw and how many other Nodes of the cluster
/// are Ready (`None`: unknown).
pub fn blame(seen: &Seen, others_ready: Option<usize>) -> (Blame, String) {
    if let Some(c) = &seen.cause {
        if c.code == "clock-skew" {
            return (
                Blame::Node,
                "this instance's clock is off: a replacement gets its own".into(),
            );
        }
        let why = match CLUSTER_CAUSES.contains(&c.code) {
            true => format!("({}) is the group's or the cluster's: every node of this launch template meets it alike, so a replacement would not join either", c.code),
            false => format!("({}) cannot be told apart: the launch goes on", c.code),
        };
        return (Blame::Cluster, why);
    }
    match others_ready {
        Some(n) if n > 0 => (
            Blame::Node,
            format!("{n} other Node{} of the cluster {} Ready: the cause is this node's own, and a replacement may join", plural(n), if n == 1 { "is" } else { "are" }),
        ),
        _ if seen.not_ready.as_deref().is_some_and(network_plugin) => (
            Blame::Cluster,
            "no other Node of the cluster is Ready and kubelet says the network plugin is not ready: the cluster has no working CNI yet (the VPC CNI add-on, its IAM role, or free addresses in the subnet), which a replacement would meet too".into(),
        ),
        Some(_) => (
            Blame::Cluster,
            "no other Node of the cluster is Ready: the cause is likely the cluster's, which a replacement would meet too".into(),
        ),
        None => (
            Blame::Cluster,
            "the cluster's other Nodes could not be read: the cause cannot be told to be this node's own".into(),
        ),
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// kubelet's Ready message when the container runtime's network is not ready (no CNI config).
fn network_plugin(message: &str) -> bool {
    [
        "NetworkPluginNotReady",
        "network plugin",
        "cni plugin not initialized",
        "NetworkReady=false",
    ]
    .iter()
    .any(|m| message.contains(m))
}

/// What the launch is told for a verdict.
pub fn hook_result(verdict: JoinVerdict, blame: Option<Blame>, strict: bool) -> HookResult {
    match (verdict, blame) {
        (JoinVerdict::Joined, _) => HookResult::Continue,
        _ if strict => HookResult::Abandon,
        (_, Some(Blame::Node)) => HookResult::Abandon,
        _ => HookResult::Continue,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(code: &'static str) -> Seen {
        let mut s = Seen::default();
        s.failed(Cause::new(code, "x".into()));
        s
    }

    #[test]
    fn only_a_cause_of_the_node_itself_abandons() {
        // Registered, NotReady while others are Ready: the node's own.
        let mut s = Seen::default();
        s.not_ready(
            "n",
            "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady"
                .into(),
        );
        assert_eq!(blame(&s, Some(3)).0, Blame::Node);
        // The same with no other Node Ready: the cluster has no CNI yet.
        let (b, why) = blame(&s, Some(0));
        assert_eq!(b, Blame::Cluster);
        assert!(why.contains("no working CNI"), "{why}");
        assert_eq!(blame(&s, None).0, Blame::Cluster);
        // Never registered while others are: the node's own.
        let mut s = Seen::default();
        s.absent("no Node n registered yet".into());
        assert_eq!(blame(&s, Some(1)).0, Blame::Node);
        assert_eq!(blame(&s, Some(0)).0, Blame::Cluster);
        for code in [
            "unauthenticated",
            "tls-untrusted",
            "timeout",
            "dns",
            "not-node",
        ] {
            assert_eq!(blame(&failed(code), Some(5)).0, Blame::Cluster, "{code}");
        }
        assert_eq!(blame(&failed("clock-skew"), None).0, Blame::Node);
    }

    #[test]
    fn the_hook_is_abandoned_for_the_node_or_when_strict() {
        use JoinVerdict::*;
        let r = |v, b, strict| hook_result(v, b, strict);
        assert_eq!(r(Joined, None, true), HookResult::Continue);
        assert_eq!(r(Mismatch, None, false), HookResult::Continue);
        assert_eq!(r(Mismatch, None, true), HookResult::Abandon);
        assert_eq!(r(Deadline, Some(Blame::Node), false), HookResult::Abandon);
        assert_eq!(
            r(Deadline, Some(Blame::Cluster), false),
            HookResult::Continue
        );
        assert_eq!(r(NotReady, Some(Blame::Cluster), true), HookResult::Abandon);
    }
}
