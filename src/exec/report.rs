//! The report of a run, `/var/lib/eks-nodeinit/report.json`: what each step came to, what logind
//! read back, the tagging outcome and the hand-off. Written atomically with secrets redacted.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

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
    /// How many of `steps` ran before discovery: the checks' outcomes go after them.
    #[serde(skip)]
    pub before_discovery: usize,
    pub handoff: String,
    pub warnings: Vec<String>,
    /// What the run's steps recorded, by key (`tagging`, `join`, `discovery`, a unit's
    /// property read back): each a key of the report's JSON object.
    #[serde(flatten)]
    pub properties: std::collections::BTreeMap<String, serde_json::Value>,
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
            properties: plan.record.clone(),
            ..Default::default()
        }
    }

    /// The property `key` as `T`, if the report has it in that shape.
    pub fn property<T: serde::de::DeserializeOwned>(&self, key: &str) -> Option<T> {
        serde_json::from_value(self.properties.get(key)?.clone()).ok()
    }

    /// Set the property `key`.
    pub fn set_property<T: Serialize>(&mut self, key: &str, value: &T) {
        if let Ok(v) = serde_json::to_value(value) {
            self.properties.insert(key.to_string(), v);
        }
    }

    /// The property `key` as a JSON object, made one (empty) if it is absent or not one.
    fn object(&mut self, key: &str) -> &mut serde_json::Map<String, serde_json::Value> {
        let p = self
            .properties
            .entry(key.to_string())
            .or_insert_with(|| serde_json::json!({}));
        if !p.is_object() {
            *p = serde_json::json!({});
        }
        p.as_object_mut().expect("made an object above")
    }

    /// Put `value` under `key` in the object property `property`.
    pub fn record(&mut self, property: &str, key: &str, value: serde_json::Value) {
        self.object(property).insert(key.to_string(), value);
    }

    /// Add the phase `name` at `at_unix_ms` to each property in `timelines` (its `phases`).
    pub fn stamp<'a>(
        &mut self,
        timelines: impl IntoIterator<Item = &'a String>,
        name: &str,
        at_unix_ms: u64,
    ) {
        let phase = serde_json::json!({"phase": name, "atUnixMs": at_unix_ms});
        for t in timelines {
            let phases = self
                .object(t)
                .entry("phases")
                .or_insert_with(|| serde_json::json!([]));
            match phases.as_array_mut() {
                Some(a) => a.push(phase.clone()),
                None => *phases = serde_json::json!([phase]),
            }
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

    /// The report on the node: `Ok(None)` when there is none, why when it cannot be read.
    pub fn load(root: &Path) -> Result<Option<Report>, String> {
        let text = match std::fs::read_to_string(under(root, REPORT_PATH)) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.to_string()),
            Ok(t) => t,
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| crate::base::text::serde_message(&e))
    }

    /// The report to add to: the node's, or a new one where there is none. An unreadable one
    /// is never replaced without a word: it is kept beside, as [`UNREADABLE`], and the log
    /// names both.
    pub fn for_update(root: &Path) -> Report {
        let why = match Report::load(root) {
            Ok(r) => return r.unwrap_or_default(),
            Err(why) => why,
        };
        let path = under(root, REPORT_PATH);
        let aside = under(root, UNREADABLE);
        match std::fs::rename(&path, &aside) {
            Ok(()) => {
                tracing::warn!(report = %path.display(), kept = %aside.display(), "the report cannot be read ({why}): kept aside, and a new report started")
            }
            Err(e) => {
                tracing::warn!(report = %path.display(), "the report cannot be read ({why}) nor kept aside ({e}): a new report replaces it")
            }
        }
        Report::default()
    }
}

/// Where [`Report::for_update`] keeps a report it cannot read.
pub const UNREADABLE: &str = "/var/lib/eks-nodeinit/report.json.unreadable";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_are_keys_of_the_report_and_read_back() {
        let mut r = Report {
            handoff: "exec bootstrap.sh".into(),
            ..Default::default()
        };
        r.set_property("logindInhibitDelayMaxUsec", &90_000_000u64);
        r.record("join", "verdict", serde_json::json!("checks-failed"));
        let timelines = ["join".to_string()];
        r.stamp(&timelines, "agent started", 5);
        r.stamp(&timelines, "planned", 7);
        let v: serde_json::Value = serde_json::to_value(&r).unwrap();
        assert_eq!(v["logindInhibitDelayMaxUsec"], 90_000_000);
        assert_eq!(v["join"]["verdict"], "checks-failed");
        assert_eq!(v["join"]["phases"][1]["phase"], "planned");
        assert_eq!(v["join"]["phases"][1]["atUnixMs"], 7);
        let back: Report = serde_json::from_value(v).unwrap();
        let join: crate::verify::record::JoinRecord = back.property("join").unwrap();
        assert_eq!(join.phases.len(), 2);
        assert_eq!(
            join.verdict,
            Some(crate::verify::record::JoinVerdict::ChecksFailed)
        );
        assert_eq!(
            back.property::<u64>("logindInhibitDelayMaxUsec"),
            Some(90_000_000)
        );
    }

    #[test]
    fn a_property_that_is_not_an_object_is_replaced_when_recorded_into() {
        let mut r = Report::default();
        r.set_property("join", &3);
        r.record("join", "hook", serde_json::json!("ABANDON (h)"));
        r.stamp(&["join".to_string()], "verdict", 9);
        assert_eq!(r.properties["join"]["hook"], "ABANDON (h)");
        assert_eq!(r.properties["join"]["phases"][0]["phase"], "verdict");
    }

    #[test]
    fn an_unreadable_report_is_kept_aside_never_silently_replaced() {
        let root = tempfile::tempdir().unwrap();
        assert!(Report::load(root.path()).unwrap().is_none());
        assert_eq!(Report::for_update(root.path()).steps.len(), 0);
        let path = under(root.path(), REPORT_PATH);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "{\"instanceId\": ").unwrap();
        assert!(Report::load(root.path()).is_err());
        let r = Report::for_update(root.path());
        assert!(r.instance_id.is_empty());
        assert_eq!(
            std::fs::read_to_string(under(root.path(), UNREADABLE)).unwrap(),
            "{\"instanceId\": "
        );
        assert!(!path.exists());
    }
}
