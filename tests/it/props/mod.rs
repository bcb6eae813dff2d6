//! Property tests: random and boundary inputs through the config, the plan, the kubelet config
//! patch, the metadata file, durations and Kubernetes' name rules, one file per target. Each
//! property is checked against an oracle written here from the upstream rule — bootstrap.sh's
//! argument loop (`common::bootstrap_sh`), Go's `time.ParseDuration` and `Duration.String`,
//! apimachinery's validation, kubelet's self-label rule, the config's documented checks
//! (`predict`, one oracle per config section) — never by calling the function under test.
//!
//! `cargo test --test it props::` is the smoke run CI makes (part of `make test`, about a minute
//! in debug); `make fuzz` is the long run (release, `PROPTEST_CASES` cases per target). Each
//! target prints how many inputs it ran and how many were accepted and refused (`--nocapture`).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestCaseError, TestRunner};
use serde_json::{Map, Value};

use crate::common;

mod config_doc;
mod oracle;
mod predict;
pub(crate) mod strategies;

mod durations;
mod error_lines;
mod k8s_grammar;
mod kubelet_patch;
mod metadata;
mod plans;

/// How many inputs were accepted and refused.
#[derive(Default)]
struct Tally {
    accepted: AtomicU64,
    refused: AtomicU64,
}

impl Tally {
    fn count(&self, accepted: bool) {
        let c = if accepted {
            &self.accepted
        } else {
            &self.refused
        };
        c.fetch_add(1, Ordering::Relaxed);
    }
}

/// Run `test` over `cases` inputs of the strategy `make` builds (`PROPTEST_CASES` when set,
/// else `smoke`), printing the counts; a failing input is shrunk and reported. It runs on a
/// thread with a 64 MiB stack: a debug build's generation of the nested config strategies
/// takes more than a test thread's 2 MiB.
fn check<S>(
    name: &str,
    smoke: u32,
    make: impl FnOnce() -> S + Send,
    test: impl Fn(S::Value, &Tally) -> Result<(), TestCaseError> + Sync,
) where
    S: Strategy,
    S::Value: std::fmt::Debug,
{
    std::thread::scope(|scope| {
        let run = std::thread::Builder::new()
            .stack_size(64 << 20)
            .spawn_scoped(scope, || run_cases(name, smoke, make(), &test))
            .unwrap();
        if let Err(panic) = run.join() {
            std::panic::resume_unwind(panic);
        }
    });
}

fn run_cases<S>(
    name: &str,
    smoke: u32,
    strategy: S,
    test: &impl Fn(S::Value, &Tally) -> Result<(), TestCaseError>,
) where
    S: Strategy,
    S::Value: std::fmt::Debug,
{
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(smoke);
    let mut runner = TestRunner::new(RunnerConfig {
        cases,
        failure_persistence: None,
        // The only filter drops sub-nanosecond fractions from the config's durations: never
        // let a long run stop on it.
        max_local_rejects: u32::MAX,
        ..RunnerConfig::default()
    });
    let tally = Tally::default();
    let start = Instant::now();
    let result = runner.run(&strategy, |v| test(v, &tally));
    let (a, r) = (
        tally.accepted.load(Ordering::Relaxed),
        tally.refused.load(Ordering::Relaxed),
    );
    eprintln!(
        "props {name}: {cases} cases, {} inputs run: {a} accepted, {r} refused; {:.1} s",
        a + r,
        start.elapsed().as_secs_f64()
    );
    if let Err(e) = result {
        panic!("props {name}: {e}");
    }
}

/// Set `k` when there is a value.
fn put(m: &mut Map<String, Value>, k: &str, v: Option<Value>) {
    if let Some(v) = v {
        m.insert(k.to_string(), v);
    }
}

/// A temp copy of a sample root, made once per test and only read (the kubelet patch target
/// rewrites its kubelet config).
struct Root {
    dir: tempfile::TempDir,
    al2: bool,
}

impl Root {
    fn new(name: &str) -> Root {
        Root {
            dir: common::sample_root(name),
            al2: name == "al2-root",
        }
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
}
