//! Whose cause a failed join is, and what the launch is told. An `ABANDON` terminates the
//! instance and Auto Scaling launches another just like it: that helps only when the cause is
//! the node's own (a clock far off; kubelet never active, a Node never registered or NotReady
//! while other instances of the group joined). A cause every node of the group meets alike
//! (the role's mapping, the cluster's CA, a network setting, a cluster without a working
//! network plugin) is named at error priority and the launch goes on (`CONTINUE`): abandoning
//! would only replace node after node. `verify.join: strict` abandons on every verdict but
//! `joined`. A Node Ready but not as planned (`mismatch`) is a finding.

use serde::{Deserialize, Serialize};

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

/// What the proof saw of the Node, the strongest evidence kept: a Node once seen registered
/// stays so, and its last Ready message is kept when a later read fails.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Seen {
    /// The last read's failure.
    cause: Option<Cause>,
    /// The Node registered, not Ready: its Ready condition's last message.
    not_ready: Option<String>,
    /// kubelet.service never became active (its state and the wait).
    kubelet: Option<String>,
    /// The last read's line.
    last: String,
}

impl Seen {
    pub fn not_ready(&mut self, name: &str, message: String) {
        self.last = format!("the Node {name} is registered but not Ready: {message}");
        self.not_ready = Some(message);
        self.cause = None;
    }

    pub fn absent(&mut self, why: String) {
        self.last = why;
        self.cause = None;
    }

    pub fn failed(&mut self, c: Cause) {
        self.last = format!("({}) {}; {}", c.code, c.detail, c.todo());
        self.cause = Some(c);
    }

    /// kubelet never became active: `why` says in what state after how long.
    pub fn kubelet(why: String) -> Seen {
        Seen {
            last: why.clone(),
            kubelet: Some(why),
            ..Seen::default()
        }
    }

    /// Whether anything was seen yet.
    pub fn is_empty(&self) -> bool {
        self.last.is_empty()
    }

    /// The last read's line.
    pub fn last(&self) -> &str {
        &self.last
    }
}

/// Whose cause it is, and why: this node's own only for its clock, or when other instances of
/// its group (of its cluster outside a group) joined with the same launch template and cluster
/// (`others`: how many the agent marked joined, or why that is unknown).
pub fn blame(seen: &Seen, others: Result<usize, &str>) -> (Blame, String) {
    blame_in(seen, others, "its group")
}

/// [`blame`], the others counted in `scope` (`its group`, or `its cluster` for an instance in
/// no group).
pub fn blame_in(seen: &Seen, others: Result<usize, &str>, scope: &str) -> (Blame, String) {
    if seen.cause.as_ref().is_some_and(|c| c.code == "clock-skew") {
        return (
            Blame::Node,
            "this instance's clock is off: a replacement gets its own".into(),
        );
    }
    if let Ok(n @ 1..) = others {
        let what = match (&seen.kubelet, &seen.not_ready) {
            (Some(_), _) => "kubelet never became active here",
            (None, Some(_)) => "this Node stays NotReady",
            (None, None) => "this node never registered",
        };
        return (
            Blame::Node,
            format!("{what} while {n} other running instance{} of {scope} joined (tagged {}): the cause is this node's own, and a replacement may join", plural(n), super::fleet::JOINED_TAG),
        );
    }
    let others = match others {
        Ok(_) => format!("no other running instance of {scope} has joined"),
        Err(why) => format!("the other instances cannot be counted ({why})"),
    };
    let why = match (&seen.cause, &seen.not_ready) {
        (_, Some(m)) if network_plugin(m) => "kubelet says the network plugin is not ready: the cluster has no working CNI yet (the VPC CNI add-on, its IAM role, or free addresses in the subnet)".to_string(),
        (Some(c), _) => format!("({}) is the group's or the cluster's as far as can be told", c.code),
        _ => "nothing tells this node's cause from the group's".to_string(),
    };
    (
        Blame::Cluster,
        format!("{why}; {others}: a replacement would likely meet the same"),
    )
}

/// Whose cause a Node that joined and never initialised is: its own only while other running
/// instances of `scope` initialised (tagged [`super::fleet::INITIALISED_TAG`]). Every node is
/// marked joined once Ready, so joined ones tell nothing here: a condition no node of the
/// cluster ever gets True (a reporter not installed, a type misspelt) would otherwise retire
/// node after node.
pub fn blame_uninitialised(others: Result<usize, &str>, scope: &str) -> (Blame, String) {
    match others {
        Ok(n @ 1..) => (
            Blame::Node,
            format!("this Node's conditions stayed not True while {n} other running instance{} of {scope} initialised (tagged {}): the cause is this node's own, and a replacement may initialise", plural(n), super::fleet::INITIALISED_TAG),
        ),
        Ok(_) => (
            Blame::Cluster,
            format!("no other running instance of {scope} has initialised: a replacement would likely meet the same"),
        ),
        Err(why) => (
            Blame::Cluster,
            format!("the other instances cannot be counted ({why}): a replacement would likely meet the same"),
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

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum JoinVerdict {
    /// The Node is Ready with the plan's labels, taints and allocatable.
    Joined,
    /// A check failed in `fail` mode: no hand-off.
    PreflightFailed,
    /// No Node registered by this instance by the deadline.
    Deadline,
    /// The Node registered, and not Ready by the deadline.
    NotReady,
    /// Ready, but not as planned.
    Mismatch,
    /// The Node's watched conditions not all True by `verify.initDeadline`.
    InitDeadline,
}

impl JoinVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            JoinVerdict::Joined => "joined",
            JoinVerdict::PreflightFailed => "preflight-failed",
            JoinVerdict::Deadline => "deadline",
            JoinVerdict::NotReady => "not-ready",
            JoinVerdict::Mismatch => "mismatch",
            JoinVerdict::InitDeadline => "init-deadline",
        }
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
        // NotReady while others of the group joined: the node's own.
        let mut s = Seen::default();
        s.not_ready(
            "n",
            "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady"
                .into(),
        );
        let (b, why) = blame(&s, Ok(3));
        assert_eq!(b, Blame::Node);
        assert!(why.contains("3 other running instances"), "{why}");
        // The same with none joined: the cluster has no CNI yet.
        let (b, why) = blame(&s, Ok(0));
        assert_eq!(b, Blame::Cluster);
        assert!(why.contains("no working CNI"), "{why}");
        assert_eq!(blame(&s, Err("denied")).0, Blame::Cluster);
        // A later failed read keeps what was seen before.
        s.failed(Cause::new("timeout", "x".into()));
        assert!(blame(&s, Ok(0)).1.contains("no working CNI"));
        // Never registered, or kubelet never active, while others joined: the node's own.
        let mut s = Seen::default();
        s.absent("no Node n registered yet".into());
        assert_eq!(blame(&s, Ok(1)).0, Blame::Node);
        assert_eq!(blame(&s, Ok(0)).0, Blame::Cluster);
        let k = Seen::kubelet("kubelet.service is failed".into());
        assert_eq!(blame(&k, Ok(1)).0, Blame::Node);
        assert_eq!(blame(&k, Ok(0)).0, Blame::Cluster);
        for code in [
            "unauthenticated",
            "tls-untrusted",
            "timeout",
            "dns",
            "not-node",
        ] {
            assert_eq!(blame(&failed(code), Ok(0)).0, Blame::Cluster, "{code}");
        }
        assert_eq!(blame(&failed("clock-skew"), Err("x")).0, Blame::Node);
        // A Node that never initialised: only others initialised make it its own.
        assert_eq!(blame_uninitialised(Ok(2), "its group").0, Blame::Node);
        let (b, why) = blame_uninitialised(Ok(0), "its group");
        assert_eq!(b, Blame::Cluster);
        assert!(why.contains("has initialised"), "{why}");
        assert_eq!(blame_uninitialised(Err("denied"), "x").0, Blame::Cluster);
        // Outside a group, the others are the cluster's.
        let (_, why) = blame_in(&k, Ok(2), "its cluster");
        assert!(
            why.contains("2 other running instances of its cluster joined"),
            "{why}"
        );
        assert!(blame_in(&k, Ok(0), "its cluster")
            .1
            .contains("instance of its cluster has"));
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
