//! A check: a probe that changes nothing, with its inputs, and its result (passed with what was
//! seen, failed with a cause and what to do, not run and why). A setting plans a check as a
//! step; the executor runs the checks of one phase together under one budget, naming none of
//! them. A kind of probe is one type implementing [`Probe`] in the module of its checks; a probe
//! that may run after the hand-off is also listed in [`super::LOADERS`], so that the unit that
//! runs this boot's job can read it back.

use std::any::Any;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::time::Instant;

use super::{Cause, CheckResult, Verdict};

/// What a passed check hands the checks that wait for it (the role's credentials).
pub type Value = Arc<dyn Any + Send + Sync>;

/// A check that passed: what was seen, and a value for the checks that need it.
pub struct Passed {
    pub detail: String,
    pub value: Option<Value>,
}

impl From<String> for Passed {
    fn from(detail: String) -> Passed {
        Passed {
            detail,
            value: None,
        }
    }
}

/// A check that did not pass: failed with a cause, or not run (a check it needs failed).
pub enum Stop {
    Failed(Cause),
    NotRun(String),
}

impl From<Cause> for Stop {
    fn from(c: Cause) -> Stop {
        Stop::Failed(c)
    }
}

/// A probe's run.
pub type Outcome<'a> = Pin<Box<dyn Future<Output = Result<Passed, Stop>> + 'a>>;

/// One kind of check.
pub trait Probe: std::fmt::Debug + Send + Sync {
    /// Its kind: `check` in the plan's JSON, and what a job after the hand-off names.
    fn kind(&self) -> &'static str;
    /// What it checks, for logs, the report and `status`: its name in the report.
    fn describe(&self) -> String;
    /// Its inputs as the plan's JSON shows them (never a secret).
    fn fields(&self) -> serde_json::Value;
    /// Whether a failure with `code` counts: a failure that does not is advisory, and a check
    /// before the changes goes on past it.
    fn blocks(&self, _code: &str) -> bool {
        true
    }
    /// Whether it reads only the node under the root (files, `/proc`, `/sys`; no instance, no
    /// cluster, no network, no program run): `init --dry-run` runs it and prints its result.
    fn local(&self) -> bool {
        false
    }
    /// Whether a failure with `code` is a fault of this instance's own (its hardware: a device
    /// missing or unbound), which a replacement does not meet; otherwise it is the image's, the
    /// config's or the fleet's. Only a check before the kubelet's own fault can retire a node
    /// (`unfit`, with the fleet's guard: like peers that joined, the budget).
    fn own_fault(&self, _code: &str) -> bool {
        false
    }
    /// What to do about a failure with `code` whose cause does not say it itself.
    fn advice(&self, _code: &str) -> Option<&'static str> {
        None
    }
    /// Run it: what it reads of the node is under `env.root`.
    fn run<'a>(&'a self, env: &'a Env) -> Outcome<'a>;
}

/// Reads a probe of one kind back from its fields (a job after the hand-off).
pub type Loader = fn(&serde_json::Value) -> Result<Arc<dyn Probe>, String>;

/// The [`Loader`] of a serde-readable probe type.
pub fn load_as<P: Probe + serde::de::DeserializeOwned + 'static>(
    v: &serde_json::Value,
) -> Result<Arc<dyn Probe>, String> {
    serde_json::from_value::<P>(v.clone())
        .map(|p| Arc::new(p) as Arc<dyn Probe>)
        .map_err(|e| crate::base::text::serde_message(&e))
}

/// A check as the plan holds it: the probe, and why it is not run here, if it is not.
#[derive(Debug, Clone)]
pub struct Check {
    pub probe: Arc<dyn Probe>,
    pub skip: Option<String>,
}

impl Check {
    pub fn new(probe: impl Probe + 'static) -> Check {
        Check {
            probe: Arc::new(probe),
            skip: None,
        }
    }
}

impl PartialEq for Check {
    fn eq(&self, other: &Check) -> bool {
        self.probe.kind() == other.probe.kind()
            && self.probe.fields() == other.probe.fields()
            && self.skip == other.skip
    }
}

impl Serialize for Check {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut v = serde_json::Map::new();
        v.insert("check".into(), self.probe.kind().into());
        if let serde_json::Value::Object(fields) = self.probe.fields() {
            v.extend(fields);
        }
        if let Some(why) = &self.skip {
            v.insert("skip".into(), why.clone().into());
        }
        v.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Check {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Check, D::Error> {
        use serde::de::Error;
        let mut v = serde_json::Map::<String, serde_json::Value>::deserialize(d)?;
        let skip = match v.remove("skip") {
            Some(serde_json::Value::String(s)) => Some(s),
            _ => None,
        };
        let kind = match v.remove("check") {
            Some(serde_json::Value::String(k)) => k,
            _ => return Err(D::Error::custom("a check without its kind (`check`)")),
        };
        let probe = load(&kind, &serde_json::Value::Object(v)).map_err(D::Error::custom)?;
        Ok(Check { probe, skip })
    }
}

/// The probe of `kind` read back from its fields.
pub fn load(kind: &str, fields: &serde_json::Value) -> Result<Arc<dyn Probe>, String> {
    let loader = super::LOADERS
        .iter()
        .flat_map(|l| l.iter())
        .find(|(k, _)| *k == kind);
    match loader {
        Some((_, load)) => load(fields),
        None => Err(format!(
            "a check of kind `{}` cannot run from a job (after the hand-off, or before the kubelet by the gate unit): its probe reads none",
            crate::base::text::printable(kind)
        )),
    }
}

/// What a running check has: the node's root, the budget's end, and the other checks of its
/// phase to wait for.
pub struct Env {
    pub root: PathBuf,
    /// The budget's end: a transient answer is asked again until then.
    pub deadline: Instant,
    pub budget: Duration,
    board: Vec<(&'static str, watch::Receiver<Option<Option<Value>>>)>,
}

impl Env {
    /// The value of the check of `kind` in this phase once it ended: `None` when it did not
    /// pass, gave no value, or is not planned.
    pub async fn passed(&self, kind: &str) -> Option<Value> {
        let (_, rx) = self.board.iter().find(|(k, _)| *k == kind)?;
        let mut rx = rx.clone();
        let ended = rx.wait_for(Option::is_some).await.ok()?;
        ended.clone().flatten()
    }
}

/// Run `checks` under `budget`, each as soon as the ones it waits for ended: their results in
/// the checks' order.
pub async fn run(checks: &[Check], budget: Duration, root: PathBuf) -> Vec<CheckResult> {
    let start = Instant::now();
    // A budget read from a job may be anything: an hour at most.
    let budget = budget.min(Duration::from_secs(3600));
    let deadline = start + budget;
    let (mut txs, mut board) = (Vec::new(), Vec::new());
    for c in checks {
        let (tx, rx) = watch::channel(None);
        txs.push(Some(tx));
        board.push((c.probe.kind(), rx));
    }
    let env = Env {
        root,
        deadline,
        budget,
        board,
    };
    let env = &env;
    let tasks = checks.iter().zip(txs).map(|(c, tx)| async move {
        if let Some(why) = &c.skip {
            let _ = tx.map(|t| t.send(Some(None)));
            return CheckResult::other(&*c.probe, Verdict::Skipped, why.clone());
        }
        let r = tokio::time::timeout_at(deadline, c.probe.run(env)).await;
        let value = match &r {
            Ok(Ok(p)) => Some(p.value.clone().unwrap_or_else(|| Arc::new(()))),
            _ => None,
        };
        let _ = tx.map(|t| t.send(Some(value)));
        judged(&*c.probe, r, start.elapsed().as_millis() as u64, budget)
    });
    futures_util::future::join_all(tasks).await
}

/// A check's end as its result.
fn judged(
    probe: &dyn Probe,
    r: Result<Result<Passed, Stop>, tokio::time::error::Elapsed>,
    ms: u64,
    budget: Duration,
) -> CheckResult {
    match r {
        Ok(Ok(done)) => CheckResult::of(probe, Ok(done.detail), ms),
        Ok(Err(Stop::Failed(c))) => CheckResult::of(probe, Err(c), ms),
        Ok(Err(Stop::NotRun(why))) => CheckResult::other(probe, Verdict::NotRun, why),
        Err(_) => CheckResult::of(
            probe,
            Err(Cause::new(
                "timeout",
                format!("not done within the checks' budget of {budget:?}: a port that drops packets, or an answer that never comes"),
            )),
            ms,
        ),
    }
}

/// A probe for tests: passes, reads nothing, and no job can hold it.
#[cfg(test)]
#[derive(Debug)]
pub struct Passing;

#[cfg(test)]
impl Probe for Passing {
    fn kind(&self) -> &'static str {
        "passing"
    }
    fn describe(&self) -> String {
        "passing".into()
    }
    fn fields(&self) -> serde_json::Value {
        serde_json::json!({})
    }
    fn run<'a>(&'a self, _: &'a Env) -> Outcome<'a> {
        Box::pin(async { Ok(String::new().into()) })
    }
}
