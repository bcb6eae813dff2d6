//! The Node conditions the boot sets on its own Node (docs/join.md#node-conditions), a contract
//! for controllers: [`JOINED`] for the join's verdict, [`BOOT_STEPS`] for the steps after the
//! hand-off, and one more for each such step whose setting names a condition of its own. They
//! are set with the node's own identity (its EKS token, the kubelet's user `system:node:<name>`),
//! which the Node authorizer and NodeRestriction allow for the node's own Node's status; a
//! strategic-merge patch keyed by `type` leaves the kubelet's conditions alone.

use super::kube::ApiServer;
use super::Cause;
use crate::base::text::{escaped, printable};

/// The join's verdict: `True` once the Node is Ready as planned.
pub const JOINED: &str = "eks-nodeinit.io/Joined";
/// The steps after the hand-off: `True` once all of them are done.
pub const BOOT_STEPS: &str = "eks-nodeinit.io/BootStepsDone";
/// Whether the Node is as planned (labels, taints, allocatable, the steps after the hand-off):
/// the finding of a `mismatch`, which the shipped rule does not wait on.
pub const AS_PLANNED: &str = "eks-nodeinit.io/AsPlanned";
pub use crate::base::k8s::{is_own_condition as is_own, OWN_CONDITION_PREFIX as PREFIX};

/// One condition as the agent sets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub kind: String,
    /// `True`, `False` or `Unknown`.
    pub status: &'static str,
    /// CamelCase, as Kubernetes' reasons are.
    pub reason: &'static str,
    pub message: String,
}

impl Condition {
    pub fn new(kind: &str, ok: bool, reason: &'static str, message: &str) -> Condition {
        Condition {
            kind: kind.to_string(),
            status: if ok { "True" } else { "False" },
            reason,
            // Escaped and cut as every foreign value the agent shows.
            message: escaped(message),
        }
    }
}

/// The conditions the boot's checks of the phases before the hand-off name, one per type in
/// the order first named: `True` when every check naming it passed (a skipped one is not
/// needed here), else `False` with the first failure, or `NotRun` when one was not run.
pub fn of_checks(results: &[super::CheckResult]) -> Vec<Condition> {
    use super::Verdict;
    let mut out: Vec<Condition> = Vec::new();
    for r in results {
        let Some(kind) = r.condition.as_deref() else {
            continue;
        };
        let c = match r.result {
            Verdict::Passed => Condition::new(kind, true, "CheckPassed", &r.detail),
            Verdict::Skipped => Condition::new(kind, true, "NotNeeded", &r.detail),
            Verdict::Failed => Condition::new(kind, false, "CheckFailed", &r.line()),
            Verdict::NotRun => Condition::new(kind, false, "NotRun", &r.detail),
        };
        match out.iter_mut().find(|o| o.kind == kind) {
            Some(o) if o.status == "True" && c.status == "False" => *o = c,
            Some(o) if o.status == "True" => {
                o.message = escaped(&format!("{}; {}", o.message, c.message));
            }
            Some(_) => {}
            None => out.push(c),
        }
    }
    out
}

impl std::fmt::Display for Condition {
    /// `type=status (reason)`, as the log and the report say it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={} ({})", self.kind, self.status, self.reason)
    }
}

/// The conditions as a strategic-merge patch of the Node's status: each condition's
/// `lastTransitionTime` kept from the Node when its status is unchanged.
pub fn patch(
    conditions: &[Condition],
    node: Option<&serde_json::Value>,
    now: &str,
) -> serde_json::Value {
    let list: Vec<serde_json::Value> = conditions
        .iter()
        .map(|c| {
            let seen = node.and_then(|n| find(n, &c.kind));
            let since = match seen {
                Some(s) if s["status"] == c.status => {
                    s["lastTransitionTime"].as_str().unwrap_or(now)
                }
                _ => now,
            };
            serde_json::json!({
                "type": c.kind,
                "status": c.status,
                "reason": c.reason,
                "message": c.message,
                "lastHeartbeatTime": now,
                "lastTransitionTime": since,
            })
        })
        .collect();
    serde_json::json!({"status": {"conditions": list}})
}

/// The Node's condition of type `kind`.
pub fn find<'a>(node: &'a serde_json::Value, kind: &str) -> Option<&'a serde_json::Value> {
    node["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

/// The watched conditions not True on the Node by the deadline, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unmet {
    /// Not on the Node, or `Unknown`.
    pub unset: Vec<String>,
    /// The agent's own, set and not True.
    pub own: Vec<String>,
    /// Other reporters', set and not True.
    pub others: Vec<String>,
}

impl Unmet {
    /// Every condition not True, as the verdict says it.
    pub fn lines(&self) -> Vec<String> {
        let all = [&self.unset, &self.own, &self.others];
        all.into_iter().flatten().cloned().collect()
    }

    pub fn is_empty(&self) -> bool {
        self.unset.is_empty() && self.own.is_empty() && self.others.is_empty()
    }
}

/// The watched condition types that are not `True` on the Node, each with what it says, by
/// kind: never set (absent or `Unknown`), the agent's own, other reporters'.
pub fn unmet(node: &serde_json::Value, kinds: &[String]) -> Unmet {
    let mut out = Unmet::default();
    for k in kinds {
        let Some(c) = find(node, k) else {
            out.unset
                .push(format!("{} is not on the Node", printable(k)));
            continue;
        };
        let status = c["status"].as_str().unwrap_or("");
        if status == "True" {
            continue;
        }
        let line = format!(
            "{} is {} ({}): {}",
            printable(k),
            printable(status),
            printable(c["reason"].as_str().unwrap_or("")),
            escaped(c["message"].as_str().unwrap_or(""))
        );
        match (status, is_own(k)) {
            ("False", true) => out.own.push(line),
            ("False", false) => out.others.push(line),
            _ => out.unset.push(line),
        }
    }
    out
}

/// The current time as the API server writes times (RFC 3339, seconds, UTC).
fn now_text() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    rfc3339(secs)
}

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (the SDK's RFC 3339 writer).
fn rfc3339(secs: u64) -> String {
    use aws_sdk_ec2::primitives::{DateTime, DateTimeFormat};
    let t = DateTime::from_secs(i64::try_from(secs).unwrap_or(i64::MAX));
    t.fmt(DateTimeFormat::DateTime).unwrap_or_default()
}

/// Set `conditions` on Node `name` with the node's `token`; `node` is the Node as last read.
pub async fn set(
    api: &ApiServer<'_>,
    token: &str,
    name: &str,
    conditions: &[Condition],
    node: Option<&serde_json::Value>,
) -> Result<(), Cause> {
    let body = patch(conditions, node, &now_text());
    let path = format!("/api/v1/nodes/{name}/status");
    let a = api
        .call_as(
            "PATCH",
            &path,
            Some(token),
            Some(&body),
            "application/strategic-merge-patch+json",
        )
        .await?;
    let text = || escaped(&String::from_utf8_lossy(&a.body));
    match a.status {
        200 | 201 => Ok(()),
        403 => Err(Cause::new("conditions-forbidden", format!("the API server forbids the node to set its Node's conditions (403): {}; the Node authorizer and NodeRestriction allow a node its own Node's status", text()))),
        s => Err(Cause::new("conditions", format!("PATCH of the Node's status answered {s}: {}", text()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn checks_that_name_one_condition_make_it_false_at_their_first_failure() {
        let r = |check: &str, result: super::super::Verdict, condition: Option<&str>| {
            super::super::CheckResult {
                check: check.into(),
                result,
                cause: None,
                detail: format!("{check} seen"),
                todo: None,
                ms: 1,
                advisory: false,
                phase: Some("beside".into()),
                condition: condition.map(String::from),
                own_fault: false,
            }
        };
        use super::super::Verdict::{Failed, NotRun, Passed, Skipped};
        let (a, b) = (Some("x.io/A"), Some("x.io/B"));
        let results = [
            r("one", Passed, a),
            r("none", Failed, None),
            r("two", Skipped, a),
            r("three", Failed, b),
            r("four", NotRun, b),
        ];
        let set = of_checks(&results);
        let said: Vec<String> = set.iter().map(Condition::to_string).collect();
        assert_eq!(
            said,
            ["x.io/A=True (CheckPassed)", "x.io/B=False (CheckFailed)"]
        );
        assert_eq!(set[0].message, "one seen; two seen");
        assert!(
            set[1].message.starts_with("three: three seen"),
            "{}",
            set[1].message
        );
        assert!(of_checks(&results[1..2]).is_empty());
    }

    #[test]
    fn times_are_rfc3339_in_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_780_000_000), "2026-05-28T20:26:40Z");
        assert_eq!(rfc3339(1_961_711_999), "2032-02-29T23:59:59Z");
    }

    #[test]
    fn a_patch_keeps_the_transition_time_of_an_unchanged_status_and_cuts_long_messages() {
        let node = json!({"status": {"conditions": [
            {"type": JOINED, "status": "False", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": BOOT_STEPS, "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        ]}});
        let long = "x".repeat(5000);
        let c = [
            Condition::new(JOINED, true, "Joined", "ok"),
            Condition::new(BOOT_STEPS, true, "StepsDone", &long),
        ];
        let p = patch(&c, Some(&node), "2026-02-02T00:00:00Z");
        let list = p["status"]["conditions"].as_array().unwrap();
        assert_eq!(list[0]["lastTransitionTime"], "2026-02-02T00:00:00Z");
        assert_eq!(list[1]["lastTransitionTime"], "2026-01-01T00:00:00Z");
        assert_eq!(list[1]["lastHeartbeatTime"], "2026-02-02T00:00:00Z");
        let cut = list[1]["message"].as_str().unwrap();
        assert!(cut.chars().count() < 600 && cut.starts_with("xxx"), "{cut}");
        assert_eq!(list[0]["status"], "True");
    }

    #[test]
    fn unmet_names_each_condition_not_true() {
        let node = json!({"status": {"conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "gpu.example/Ready", "status": "False", "reason": "NoDriver", "message": "no driver"},
        ]}});
        let kinds = ["Ready", "gpu.example/Ready", JOINED].map(String::from);
        let u = unmet(&node, &kinds);
        assert_eq!(
            u.others,
            ["gpu.example/Ready is False (NoDriver): no driver"]
        );
        assert_eq!(u.unset, [format!("{JOINED} is not on the Node")]);
        assert!(u.own.is_empty());
        let node = json!({"status": {"conditions": [
            {"type": JOINED, "status": "False", "reason": "NotReady", "message": "m"},
            {"type": "gpu.example/Ready", "status": "Unknown"},
        ]}});
        let u = unmet(&node, &kinds);
        // Ready absent and the GPU's Unknown: never set; Joined False: the agent's own.
        assert_eq!((u.own.len(), u.unset.len(), u.others.len()), (1, 2, 0));
        assert_eq!(u.lines().len(), 3);
    }
}
