//! The report of a run, `/var/lib/eks-nodeinit/report.json`: what each step came to, what logind
//! read back, the tagging outcome and the hand-off. Written atomically with secrets redacted.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::ec2::{Calls, TagOutcome};
use crate::facts::Family;
use crate::fsutil::{self, under, FsError};

pub const REPORT_PATH: &str = "/var/lib/eks-nodeinit/report.json";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StepOutcome {
    pub step: String,
    pub outcome: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Report {
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
}

/// What tagging came to, in the foreground or from the background continuation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TaggingRecord {
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
pub enum TagResult {
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

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

impl Report {
    /// Write the report atomically, every secret replaced by its redaction.
    pub fn write(&self, root: &Path, secrets: &[String]) -> Result<PathBuf, FsError> {
        self.stage(root, secrets)?.commit()?;
        Ok(under(root, REPORT_PATH))
    }

    /// The report as it stands, written and fsynced beside its path but not yet in place: the
    /// first phase stages it with the other files, so that a read-only or full
    /// /var/lib/eks-nodeinit is found while nothing has changed.
    pub fn stage(&self, root: &Path, secrets: &[String]) -> Result<fsutil::Staged, FsError> {
        fsutil::stage(&under(root, REPORT_PATH), &self.bytes(secrets), 0o644)
    }

    /// Put the report in place through `staged` (from [`Report::stage`]), with its final content.
    pub fn commit(
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
