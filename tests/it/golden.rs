//! Golden plans for both hand-offs, from the real AL2 kubelet config in examples/al2-root.
//! Regenerate with `UPDATE_GOLDEN=1 cargo test --test it golden::` and review the diff.

use crate::common;

use common::*;

fn check(name: &str, args: &[&str]) {
    let out = run(cmd().args(args));
    assert!(out.status.success());
    let got = stdout(&out);
    let path = manifest_dir().join("tests/golden").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &got).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        got == want,
        "plan differs from {}:\n{}",
        path.display(),
        similar::TextDiff::from_lines(&want, &got)
            .unified_diff()
            .header("golden", "got")
    );
}

#[test]
fn al2_scaler_text() {
    check(
        "al2-scaler.txt",
        &[
            "init",
            "--dry-run",
            "--config",
            "examples/scaler.json",
            "--metadata",
            "examples/metadata.json",
            "--root",
            "examples/al2-root",
        ],
    );
}

#[test]
fn al2_master_json() {
    check(
        "al2-master.json",
        &[
            "init",
            "--dry-run",
            "--output",
            "json",
            "--config",
            "examples/master.json",
            "--metadata",
            "examples/metadata.json",
            "--root",
            "examples/al2-root",
        ],
    );
}

#[test]
fn al2023_master_text() {
    check(
        "al2023-master.txt",
        &[
            "init",
            "--dry-run",
            "--config",
            "examples/master.json",
            "--metadata",
            "examples/metadata.json",
            "--root",
            "examples/al2023-root",
        ],
    );
}

#[test]
fn al2023_scaler_json() {
    check(
        "al2023-scaler.json",
        &[
            "init",
            "--dry-run",
            "--output",
            "json",
            "--config",
            "examples/scaler.json",
            "--metadata",
            "examples/metadata.json",
            "--root",
            "examples/al2023-root",
        ],
    );
}
