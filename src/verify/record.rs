//! One record of the boot's join, in the report's `join` section: each phase with its time,
//! the preflight's results, the verdict, its causes and what Auto Scaling was told. `init`
//! writes the first part, `complete-hook` the rest; `status` prints it.

use serde::{Deserialize, Serialize};

use super::{CheckResult, Verdict};

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct JoinRecord {
    #[serde(default)]
    pub phases: Vec<Phase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preflight_mode: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preflight: Vec<CheckResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<JoinVerdict>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<String>,
    /// Whose cause it is when the node did not join: `node` (the launch is abandoned) or
    /// `cluster` (it goes on, the cause named).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blame: Option<super::verdict::Blame>,
    /// What the launch hook was completed with, or why it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook: Option<String>,
    /// The hook should have been completed and was not: Auto Scaling applies its default
    /// result at the heartbeat timeout (`status` fails).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hook_failed: bool,
    /// What the Node showed against the plan.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checked: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Phase {
    pub phase: String,
    pub at_unix_ms: u64,
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
}

impl JoinVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            JoinVerdict::Joined => "joined",
            JoinVerdict::PreflightFailed => "preflight-failed",
            JoinVerdict::Deadline => "deadline",
            JoinVerdict::NotReady => "not-ready",
            JoinVerdict::Mismatch => "mismatch",
        }
    }
}

impl JoinRecord {
    pub fn phase(&mut self, name: &str, at_unix_ms: u64) {
        self.phases.push(Phase {
            phase: name.to_string(),
            at_unix_ms,
        });
    }

    /// For a person on the node: the phases with their offsets, the checks, the verdict, its
    /// causes and what to do.
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        let verdict = self.verdict.map_or(
            "not decided yet (the proof has not run, or is running)",
            JoinVerdict::as_str,
        );
        o.push_str(&format!("verdict: {verdict}\n"));
        if let Some(b) = self.blame {
            o.push_str(&format!("blame: {}\n", b.as_str()));
        }
        if let Some(h) = &self.hook {
            let failed = if self.hook_failed { "FAILED: " } else { "" };
            o.push_str(&format!("launch hook: {failed}{h}\n"));
        }
        for c in &self.causes {
            o.push_str(&format!("cause: {c}\n"));
        }
        if let Some(first) = self.phases.first() {
            o.push_str("phases:\n");
            for p in &self.phases {
                let dt = p.at_unix_ms.saturating_sub(first.at_unix_ms);
                o.push_str(&format!("  {:>9.3} s  {}\n", dt as f64 / 1000.0, p.phase));
            }
        }
        if !self.preflight.is_empty() {
            let mode = self.preflight_mode.as_deref().unwrap_or("warn");
            o.push_str(&format!("preflight ({mode}):\n"));
            for r in &self.preflight {
                let what = match r.result {
                    Verdict::Passed => "ok",
                    Verdict::Failed => "FAILED",
                    Verdict::Skipped => "skipped",
                    Verdict::NotRun => "not run",
                };
                o.push_str(&format!("  {what:<7} {:>5} ms  {}\n", r.ms, r.line()));
            }
        }
        for c in &self.checked {
            o.push_str(&format!("node: {c}\n"));
        }
        o
    }
}
