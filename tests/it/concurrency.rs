//! Exactly one hand-off: 50 pairs of runs started at once and 50 pairs started 0–600 ms apart (either side of the hand-off),
//! each pair on its own AL2 root whose bootstrap.sh takes 300 ms. In every pair bootstrap.sh runs
//! once, the other run is refused at the lock or sees the per-boot marker, and the node's files
//! equal those of a single run.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use common::*;

const PAIRS: usize = 50;
/// Pairs running at the same time (each run mostly waits on bootstrap.sh's sleep).
const AT_ONCE: usize = 10;

fn root_with_slow_bootstrap() -> (tempfile::TempDir, PathBuf) {
    let root = sample_root("al2-root");
    install_bootstrap(
        root.path(),
        &bootstrap_standin(
            BOOTSTRAP_OPTIONS,
            "echo run >> \"$(dirname \"$0\")/runs.txt\"\nsleep 0.3\n",
        ),
    );
    let cfg = config_with(root.path(), "c.json", |v| {
        v["tagging"] = serde_json::json!({"enabled": false});
    });
    (root, cfg)
}

fn start(root: &Path, cfg: &Path) -> Child {
    cmd()
        .args(["init", "--metadata"])
        .arg(example("metadata.json"))
        .arg("--config")
        .arg(cfg)
        .arg("--root")
        .arg(root)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The node's files but the report (its times differ) and bootstrap.sh's own log.
fn files(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut s = snapshot(root);
    s.remove(Path::new("var/lib/eks-nodeinit/report.json"));
    s.remove(Path::new("etc/eks/runs.txt"));
    s.remove(Path::new("run/eks-nodeinit/bootstrap-exec"));
    s
}

/// How the second run of a pair ended.
#[derive(Debug, Default)]
struct Tally {
    refused_at_lock: usize,
    saw_the_marker: usize,
}

fn run_pairs(stagger: impl Fn(usize) -> Duration, reference: &BTreeMap<PathBuf, Vec<u8>>) -> Tally {
    let mut tally = Tally::default();
    for batch in (0..PAIRS).collect::<Vec<_>>().chunks(AT_ONCE) {
        let mut pairs = Vec::new();
        for &i in batch {
            let (root, cfg) = root_with_slow_bootstrap();
            let first = start(root.path(), &cfg);
            std::thread::sleep(stagger(i));
            let second = start(root.path(), &cfg);
            pairs.push((root, first, second));
        }
        for (root, first, second) in pairs {
            let a = first.wait_with_output().unwrap();
            let b = second.wait_with_output().unwrap();
            let r = root.path();
            let runs = std::fs::read_to_string(r.join("etc/eks/runs.txt")).unwrap_or_default();
            assert_eq!(
                runs.lines().count(),
                1,
                "exactly one hand-off in {}",
                r.display()
            );
            let (errs, codes) = (
                [a.stderr, b.stderr].map(|e| String::from_utf8_lossy(&e).into_owned()),
                [a.status.code(), b.status.code()],
            );
            // One of the two is the hand-off (exit 0 from bootstrap.sh); the other was refused
            // at the lock (exit 1) or came after and saw the marker (exit 0, no exec).
            let refused = (0..2)
                .filter(|&k| {
                    codes[k] == Some(1) && errs[k].contains("another eks-nodeinit run holds")
                })
                .count();
            let marker = (0..2)
                .filter(|&k| {
                    codes[k] == Some(0)
                        && errs[k].contains("bootstrap.sh was already exec'd in this boot")
                })
                .count();
            assert_eq!(refused + marker, 1, "{codes:?} {errs:#?}");
            tally.refused_at_lock += refused;
            tally.saw_the_marker += marker;
            assert_eq!(&files(r), reference, "the node as after a single run");
        }
    }
    tally
}

#[test]
fn fifty_simultaneous_and_fifty_staggered_pairs_hand_off_once_each() {
    let (single, cfg) = root_with_slow_bootstrap();
    let out = run(cmd()
        .args(["init", "--metadata"])
        .arg(example("metadata.json"))
        .arg("--config")
        .arg(&cfg)
        .arg("--root")
        .arg(single.path()));
    assert!(out.status.success());
    let reference = files(single.path());
    let t = std::time::Instant::now();
    let at_once = run_pairs(|_| Duration::ZERO, &reference);
    let staggered = run_pairs(
        |_| Duration::from_millis(rand::random::<u64>() % 601),
        &reference,
    );
    eprintln!(
        "{PAIRS} simultaneous pairs: {} refused at the lock, {} saw the marker; {PAIRS} staggered (0–600 ms): {} refused at the lock, {} saw the marker; one hand-off in each of {} pairs ({} ms)",
        at_once.refused_at_lock,
        at_once.saw_the_marker,
        staggered.refused_at_lock,
        staggered.saw_the_marker,
        2 * PAIRS,
        t.elapsed().as_millis()
    );
}
