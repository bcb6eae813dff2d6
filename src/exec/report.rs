//! The report of a run, `/var/lib/eks-nodeinit/report.json`: what each step came to, what logind
//! read back, the tagging outcome and the hand-off. Written atomically with secrets redacted.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::aws::ec2::{Calls, TagOutcome};
use crate::facts::Family;
use crate::os::fsutil::{self, under, FsError};

pub const REPORT_PATH: &str = "/var/lib/eks-nodeinit/report.json";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StepOutcome {
    pub step: String,
    pub outcome: Outcome,
}

/// What a step came to. In the report's JSON a string: `done`, `done: DETAIL`, `skipped: WHY`,
/// `mismatch: WHAT`, `failed: ERROR`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Done,
    /// Done, and what was read back.
    DoneWith(String),
    /// Not run, and why (the run goes on).
    Skipped(String),
    /// Run, but the system reports another value than the one asked for.
    Mismatch(String),
    Failed(String),
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Done => f.write_str("done"),
            Outcome::DoneWith(d) => write!(f, "done: {d}"),
            Outcome::Skipped(w) => write!(f, "skipped: {w}"),
            Outcome::Mismatch(w) => write!(f, "mismatch: {w}"),
            Outcome::Failed(e) => write!(f, "failed: {e}"),
        }
    }
}

impl std::str::FromStr for Outcome {
    type Err = String;
    fn from_str(s: &str) -> Result<Outcome, String> {
        if s == "done" {
            return Ok(Outcome::Done);
        }
        let (kind, text) = s
            .split_once(": ")
            .ok_or_else(|| format!("not a step outcome: {s:?}"))?;
        let text = text.to_string();
        match kind {
            "done" => Ok(Outcome::DoneWith(text)),
            "skipped" => Ok(Outcome::Skipped(text)),
            "mismatch" => Ok(Outcome::Mismatch(text)),
            "failed" => Ok(Outcome::Failed(text)),
            _ => Err(format!("not a step outcome: {s:?}")),
        }
    }
}

impl Serialize for Outcome {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Outcome {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Outcome, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Report {
    pub version: String,
    pub instance_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<Family>,
    pub started_at_unix_ms: u64,
    pub finished_at_unix_ms: u64,
    pub steps: Vec<StepOutcome>,
    /// What logind reported after the restart, in microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logind_inhibit_delay_max_usec: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tagging: Option<TaggingRecord>,
    pub handoff: String,
    pub warnings: Vec<String>,
    /// Where the cluster's values came from and the calls made, when discovery was asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discovery: Option<crate::plan::DiscoveryView>,
    /// The join: phases, the preflight, the verdict (docs/join.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub join: Option<crate::verify::record::JoinRecord>,
}

/// What tagging came to, in the foreground or from the background continuation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TaggingRecord {
    pub result: TagResult,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls: Option<Calls>,
    pub key: String,
    pub value: String,
    /// Written by the background continuation.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub background: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at_unix_ms: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", tag = "outcome")]
pub(crate) enum TagResult {
    /// The tag already had the value: no CreateTags call.
    AlreadySet,
    Created,
    Failed {
        error: String,
    },
    /// Handed to the background continuation, this process.
    Background {
        pid: u32,
    },
}

impl From<TagOutcome> for TagResult {
    fn from(o: TagOutcome) -> Self {
        match o {
            TagOutcome::AlreadySet => TagResult::AlreadySet,
            TagOutcome::Created => TagResult::Created,
        }
    }
}

impl TaggingRecord {
    /// The tag already held its value: no step, no call.
    pub(crate) fn already_set(key: String, value: String) -> TaggingRecord {
        TaggingRecord {
            result: TagResult::AlreadySet,
            calls: Some(Calls::default()),
            key,
            value,
            background: false,
            finished_at_unix_ms: None,
        }
    }
}

pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

impl Report {
    /// The report of a run of `plan`, as it starts.
    pub fn start(plan: &crate::plan::Plan) -> Report {
        Report {
            version: env!("CARGO_PKG_VERSION").into(),
            instance_id: plan.instance.instance_id.clone(),
            family: Some(plan.family),
            started_at_unix_ms: now_ms(),
            warnings: plan.warnings.clone(),
            discovery: plan.discovery.clone(),
            ..Default::default()
        }
    }

    /// A property read back after a unit restart: the report has a field for logind's
    /// `InhibitDelayMaxUSec` (what the graceful shutdown gets).
    pub(crate) fn record_property(
        &mut self,
        check: &crate::os::systemd::PropertyCheck,
        value: u64,
    ) {
        if check.service == "org.freedesktop.login1" && check.property == "InhibitDelayMaxUSec" {
            self.logind_inhibit_delay_max_usec = Some(value);
        }
    }

    /// Write the report atomically, every secret replaced by its redaction.
    pub fn write(&self, root: &Path, secrets: &[String]) -> Result<PathBuf, FsError> {
        self.stage(root, secrets)?.commit()?;
        Ok(under(root, REPORT_PATH))
    }

    /// The report as it stands, written and fsynced beside its path but not yet in place: the
    /// first phase stages it with the other files, so that a read-only or full
    /// /var/lib/eks-nodeinit is found while nothing has changed.
    pub(crate) fn stage(&self, root: &Path, secrets: &[String]) -> Result<fsutil::Staged, FsError> {
        fsutil::stage(&under(root, REPORT_PATH), &self.bytes(secrets), 0o644)
    }

    /// Put the report in place through `staged` (from [`Report::stage`]), with its final content.
    pub(crate) fn commit(
        &self,
        root: &Path,
        mut staged: fsutil::Staged,
        secrets: &[String],
    ) -> Result<PathBuf, FsError> {
        staged.rewrite(&self.bytes(secrets))?;
        staged.commit()?;
        Ok(under(root, REPORT_PATH))
    }

    fn bytes(&self, secrets: &[String]) -> Vec<u8> {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        crate::plan::redact(secrets, &text).into_bytes()
    }

    /// The report on the node, if there is a readable one.
    pub fn read(root: &Path) -> Option<Report> {
        let text = std::fs::read_to_string(under(root, REPORT_PATH)).ok()?;
        serde_json::from_str(&text).ok()
    }
}
