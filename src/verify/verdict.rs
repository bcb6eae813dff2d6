//! Whose cause a failed join is, and what the launch is told. An `ABANDON` terminates the
//! instance and Auto Scaling launches another just like it: that helps only when the cause is
//! the node's own. The cause decides first: what a fleet shares (a failed read of the API
//! server, a network plugin not ready, a condition no reporter set) is never the node's own.
//! What may be (kubelet never active, a Node never registered or NotReady, its clock) is its
//! own only when like peers joined recently and the scope's retirement budget is not spent
//! (docs/join.md#whose-cause-it-is). A kept node's cause is named at error priority and the
//! launch goes on (`CONTINUE`). `verify.join: strict` abandons on every verdict but `joined`.

use serde::{Deserialize, Serialize};

use super::conditions::Unmet;
use super::fleet::{Fleet, BUDGET, PEERS};
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
        self.last = format!(
            "({}) {}; {}",
            c.code,
            c.detail,
            c.todo(super::preflight::join_advice(c.code))
        );
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

/// Whose cause it is, and why, the peers counted in its group.
pub fn blame(seen: &Seen, fleet: Result<&Fleet, &str>) -> (Blame, String) {
    blame_in(seen, fleet, "its group")
}

/// Whose cause a failed join is, the cause first: a failed read of the API server (refused,
/// timed out, a 5xx, TLS, a 401 or 403), a network plugin not ready, are causes a fleet shares
/// and never the node's own, however many others joined. What may be the node's own (kubelet
/// never active, a Node never registered while every read answered, NotReady for another
/// reason, its clock) is its own only when [`PEERS`] like peers of `scope` joined
/// ([`super::fleet::alike`]) and `scope`'s retirement budget is not spent; in doubt, kept.
pub fn blame_in(seen: &Seen, fleet: Result<&Fleet, &str>, scope: &str) -> (Blame, String) {
    let what = match may_be_own(seen) {
        Ok(what) => what,
        Err(shared) => {
            return (
                Blame::Cluster,
                format!("{shared}: a cause other nodes meet too, never this node's own on the count of others, so it is kept"),
            )
        }
    };
    judged(what, fleet.map(|f| (f.joined, f.retired)), "joined", scope)
}

/// What the proof saw that may be the node's own, or the shared cause it saw.
fn may_be_own(seen: &Seen) -> Result<&'static str, String> {
    if let Some(m) = seen.not_ready.as_deref().filter(|m| network_plugin(m)) {
        return Err(format!("kubelet says the network plugin is not ready ({}): the cluster's CNI (the VPC CNI add-on, its IAM role) or the subnet's free addresses", crate::base::text::escaped(m)));
    }
    match (&seen.cause, &seen.kubelet, &seen.not_ready) {
        (Some(c), _, _) if c.code == "clock-skew" => Ok("this instance's clock is off"),
        (Some(c), _, _) => Err(format!(
            "({}) the last read of the API server failed",
            c.code
        )),
        (None, Some(_), _) => Ok("kubelet never became active here"),
        (None, None, Some(_)) => Ok("this Node stays NotReady"),
        (None, None, None) => Ok("this node never registered while the API server answered"),
    }
}

/// `what` is the node's own when `PEERS` like peers `did` (`counted`: how many did, how many
/// of the scope retired within the window) and the budget allows; kept otherwise, saying why.
fn judged(
    what: &str,
    counted: Result<(usize, usize), &str>,
    did: &str,
    scope: &str,
) -> (Blame, String) {
    let like =
        "launched within an hour of it, in its subnet, from its image and launch template version";
    let (n, retired) = match counted {
        Err(why) => {
            return (
                Blame::Cluster,
                format!("{what}, but its peers cannot be counted ({why}): kept, in doubt"),
            )
        }
        Ok(c) => c,
    };
    if n < PEERS {
        return (
            Blame::Cluster,
            format!("{what}, and {n} like instance{} of {scope} ({like}) {did}, {PEERS} needed: a replacement would likely meet the same", plural(n)),
        );
    }
    if retired >= BUDGET {
        return (
            Blame::Cluster,
            format!("{what} while {n} like instances of {scope} {did}, but {retired} instances of {scope} retired within the last hour (the budget is {BUDGET}): kept, so that a cause the fleet shares retires no more"),
        );
    }
    (
        Blame::Node,
        format!("{what} while {n} like instances of {scope} ({like}) {did}: the cause is this node's own, and a replacement may do better (retirement {} of {BUDGET} within the hour)", retired + 1),
    )
}

/// Whose cause a Node that joined and never initialised is. A watched condition never set
/// (its reporter down, or the agent's own patch refused) is the fleet's; the agent's own
/// conditions not True are the AMI's or the config's. Only other reporters' conditions set
/// and not True, while [`PEERS`] like peers initialised (tagged
/// [`super::fleet::INITIALISED_TAG`]) and the budget allows, are the node's own.
pub fn blame_uninitialised(
    unmet: &Unmet,
    fleet: Result<&Fleet, &str>,
    scope: &str,
) -> (Blame, String) {
    if !unmet.unset.is_empty() {
        return (
            Blame::Cluster,
            format!("{} never set on the Node: its reporter is not running or not allowed to set it, which other nodes meet too, so it is kept", unmet.unset.join(", ")),
        );
    }
    if !unmet.own.is_empty() {
        return (
            Blame::Cluster,
            format!("the agent's own {} not True: the AMI's or the config's, which a replacement meets too, so it is kept", unmet.own.join(", ")),
        );
    }
    let what = "this Node's conditions stayed not True";
    judged(
        what,
        fleet.map(|f| (f.initialised, f.retired)),
        "initialised",
        scope,
    )
}

/// Whose fault a check before the kubelet found of the instance's own (`what`) is: its own
/// only when [`PEERS`] like peers of `scope` *of its instance type* joined (they passed the same
/// check against the same expectation: a node with a failed check before the kubelet is never
/// marked joined) and the budget allows, so that a wrong expectation, which every instance of
/// the type meets, never retires a fleet, whatever peers of other types in its group did; in
/// doubt, kept.
pub fn blame_unfit(what: &str, fleet: Result<&Fleet, &str>, scope: &str) -> (Blame, String) {
    let counted = fleet.map(|f| (f.joined_same_type, f.retired));
    judged(what, counted, "of its instance type joined", scope)
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
    /// A check before the changes failed (a `fail` mode's, of any setting): no hand-off.
    /// Read back from an older record's `preflight-failed` too.
    #[serde(alias = "preflight-failed")]
    ChecksFailed,
    /// No Node registered by this instance by the deadline.
    Deadline,
    /// The Node registered, and not Ready by the deadline.
    NotReady,
    /// Ready, but not as planned.
    Mismatch,
    /// The Node's watched conditions not all True by `verify.initDeadline`.
    InitDeadline,
    /// Not Ready by the deadline, kept for a cause the fleet shares, and Ready within
    /// `verify.lateJoin` after it.
    JoinedLate,
    /// Ready, but a check before the kubelet found a fault of the instance's own (a GPU
    /// missing or unbound), while like peers passed: held back and retired.
    Unfit,
}

impl JoinVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            JoinVerdict::Joined => "joined",
            JoinVerdict::ChecksFailed => "checks-failed",
            JoinVerdict::Deadline => "deadline",
            JoinVerdict::NotReady => "not-ready",
            JoinVerdict::Mismatch => "mismatch",
            JoinVerdict::InitDeadline => "init-deadline",
            JoinVerdict::JoinedLate => "joined-late",
            JoinVerdict::Unfit => "unfit",
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

    fn fleet(joined: usize, retired: usize) -> Fleet {
        Fleet {
            joined,
            joined_same_type: joined,
            initialised: joined,
            retired,
        }
    }

    #[test]
    fn a_fault_before_the_kubelet_is_its_own_only_where_peers_of_its_type_joined() {
        let what = "a GPU missing";
        // A group of mixed types: five peers joined, none of this type (a wrong table row
        // for the type fails every one of them alike).
        let mixed = Fleet {
            joined_same_type: 0,
            ..fleet(5, 0)
        };
        assert_eq!(blame_unfit(what, Ok(&mixed), "its group").0, Blame::Cluster);
        assert_eq!(
            blame_unfit(what, Ok(&fleet(2, 0)), "its group").0,
            Blame::Node
        );
        assert_eq!(
            blame_unfit(what, Ok(&fleet(2, 2)), "its group").0,
            Blame::Cluster
        );
        assert_eq!(
            blame_unfit(what, Err("no answer"), "its group").0,
            Blame::Cluster
        );
    }

    #[test]
    fn a_cause_the_fleet_shares_is_never_the_nodes_however_many_joined() {
        let many = fleet(40, 0);
        // Every failed read: a refused or timed-out connection, a 5xx, TLS, a 401 or 403.
        for code in [
            "unreachable",
            "timeout",
            "http",
            "unavailable",
            "tls",
            "credentials",
            "token",
            "not-node",
        ] {
            let (b, why) = blame(&failed(code), Ok(&many));
            assert_eq!(b, Blame::Cluster, "{code}");
            assert!(why.contains("never this node's own"), "{why}");
        }
        // A network plugin not ready: the CNI's or the subnet's, even after an earlier read.
        let mut s = Seen::default();
        s.not_ready(
            "n",
            "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady"
                .into(),
        );
        let (b, why) = blame(&s, Ok(&many));
        assert_eq!(b, Blame::Cluster);
        assert!(why.contains("subnet's free addresses"), "{why}");
        s.failed(Cause::new("timeout", "x".into()));
        assert_eq!(blame(&s, Ok(&many)).0, Blame::Cluster);
    }

    #[test]
    fn what_may_be_the_nodes_own_needs_like_peers_and_a_budget() {
        let k = Seen::kubelet("kubelet.service is failed".into());
        let mut absent = Seen::default();
        absent.absent("no Node n registered yet".into());
        let mut not_ready = Seen::default();
        not_ready.not_ready("n", "PLEG is not healthy".into());
        for s in [&k, &absent, &not_ready, &failed("clock-skew")] {
            assert_eq!(blame(s, Ok(&fleet(2, 0))).0, Blame::Node, "{s:?}");
            assert_eq!(blame(s, Ok(&fleet(2, 1))).0, Blame::Node, "{s:?}");
            // One peer is not enough; none known is doubt; a spent budget keeps it.
            assert_eq!(blame(s, Ok(&fleet(1, 0))).0, Blame::Cluster, "{s:?}");
            assert_eq!(blame(s, Err("denied")).0, Blame::Cluster, "{s:?}");
            assert_eq!(blame(s, Ok(&fleet(9, BUDGET))).0, Blame::Cluster, "{s:?}");
        }
        let (_, why) = blame(&k, Ok(&fleet(3, 1)));
        assert!(why.contains("while 3 like instances of its group"), "{why}");
        assert!(why.contains("retirement 2 of 2"), "{why}");
        let (_, why) = blame(&k, Ok(&fleet(9, 2)));
        assert!(why.contains("2 instances of its group retired"), "{why}");
        let (_, why) = blame_in(&k, Ok(&fleet(1, 0)), "its cluster");
        assert!(why.contains("1 like instance of its cluster"), "{why}");
        assert!(blame(&k, Err("the group is unknown"))
            .1
            .contains("in doubt"));
    }

    #[test]
    fn a_node_not_initialised_is_its_own_only_for_other_reporters_set_conditions() {
        let set_false = Unmet {
            others: vec!["gpu.example/Ready is False".into()],
            ..Unmet::default()
        };
        assert_eq!(
            blame_uninitialised(&set_false, Ok(&fleet(2, 0)), "its group").0,
            Blame::Node
        );
        assert_eq!(
            blame_uninitialised(&set_false, Ok(&fleet(1, 0)), "x").0,
            Blame::Cluster
        );
        assert_eq!(
            blame_uninitialised(&set_false, Ok(&fleet(5, 2)), "x").0,
            Blame::Cluster
        );
        assert_eq!(
            blame_uninitialised(&set_false, Err("denied"), "x").0,
            Blame::Cluster
        );
        // A reporter down, or the agent's own patch refused: never the node's.
        let unset = Unmet {
            unset: vec!["gpu.example/Ready".into()],
            ..set_false.clone()
        };
        let (b, why) = blame_uninitialised(&unset, Ok(&fleet(30, 0)), "x");
        assert_eq!(b, Blame::Cluster);
        assert!(why.contains("never set"), "{why}");
        let own = Unmet {
            own: vec!["eks-nodeinit.io/Joined".into()],
            ..Unmet::default()
        };
        assert_eq!(
            blame_uninitialised(&own, Ok(&fleet(30, 0)), "x").0,
            Blame::Cluster
        );
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
