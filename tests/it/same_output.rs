//! The binary under test against a reference build of the same source, byte for byte: the
//! aarch64 release binary under qemu-user (`EKS_NODEINIT_BIN`, `EKS_NODEINIT_RUNNER`) against
//! the x86_64 one (`EKS_NODEINIT_REFERENCE`, default: this build's). `make test-aarch64` sets
//! them. Without `EKS_NODEINIT_BIN` there is nothing to compare: each test says so and passes,
//! unless `EKS_NODEINIT_REQUIRED=1`.
//!
//! Compared: `--version`, `validate` (a valid and an invalid config), the dry-run plans of the
//! golden cases, and real `init` runs on the same temp path with the same inputs — exit code,
//! standard output, standard error (in the journal's form, which has no timestamps), every
//! file under the root (times in milliseconds since the epoch masked, and the checks'
//! durations), the recorded bootstrap.sh argv.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::*;

/// The reference binary, or None (with a note) when no other binary is under test.
fn reference() -> Option<PathBuf> {
    let set = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if set("EKS_NODEINIT_BIN").is_none() {
        assert!(
            !matches!(set("EKS_NODEINIT_REQUIRED"), Some(v) if v != "0"),
            "EKS_NODEINIT_REQUIRED is set but EKS_NODEINIT_BIN names no binary to compare"
        );
        eprintln!("SKIP: EKS_NODEINIT_BIN is not set; nothing to compare with this build");
        return None;
    }
    Some(
        std::env::var_os("EKS_NODEINIT_REFERENCE")
            .filter(|r| !r.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_eks-nodeinit"))),
    )
}

#[derive(Debug, PartialEq)]
struct Ran {
    code: Option<i32>,
    stdout: String,
    /// Standard error, written to a file that JOURNAL_STREAM names: priority-prefixed lines
    /// without timestamps.
    stderr: String,
}

fn ran(mut c: Command, dir: &Path, stdin: Option<&str>) -> Ran {
    let err = dir.join("stderr");
    let f = std::fs::File::create(&err).unwrap();
    let m = std::os::unix::fs::MetadataExt::dev(&f.metadata().unwrap());
    let i = std::os::unix::fs::MetadataExt::ino(&f.metadata().unwrap());
    c.env("JOURNAL_STREAM", format!("{m}:{i}"))
        .stdin(match stdin {
            Some(_) => Stdio::piped(),
            None => Stdio::null(),
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::from(f));
    let mut child = c.spawn().unwrap();
    if let Some(text) = stdin {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    Ran {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).expect("UTF-8 on stdout"),
        stderr: std::fs::read_to_string(&err).expect("UTF-8 on stderr"),
    }
}

/// The same command through the binary under test and through the reference; both results.
fn both(reference: &Path, args: &[&str], stdin: Option<&str>) -> (Ran, Ran) {
    let d = tempfile::tempdir().unwrap();
    let mut tested = cmd();
    tested.args(args);
    let mut refd = with_clean_env(Command::new(reference));
    refd.args(args);
    (ran(tested, d.path(), stdin), ran(refd, d.path(), stdin))
}

fn same(what: &str, tested: &Ran, refd: &Ran) {
    assert!(
        tested == refd,
        "{what}: the binary under test differs from the reference\n--- reference\n{refd:#?}\n--- under test\n{tested:#?}\n{}",
        similar::TextDiff::from_lines(
            &format!("{}{}", refd.stdout, refd.stderr),
            &format!("{}{}", tested.stdout, tested.stderr)
        )
        .unified_diff()
        .header("reference", "under test")
    );
    eprintln!(
        "{what}: same ({} bytes out, {} bytes err, exit {:?})",
        refd.stdout.len(),
        refd.stderr.len(),
        refd.code
    );
}

#[test]
fn version() {
    let Some(r) = reference() else { return };
    let (t, rf) = both(&r, &["--version"], None);
    assert_eq!(t.code, Some(0));
    same("--version", &t, &rf);
}

#[test]
fn validate_valid_and_invalid_configs() {
    let Some(r) = reference() else { return };
    for f in ["scaler.json", "master.json"] {
        let (t, rf) = both(
            &r,
            &["validate", "--config", &format!("examples/{f}")],
            None,
        );
        assert_eq!(t.code, Some(0));
        same(&format!("validate {f}"), &t, &rf);
    }
    let bad = r#"{"cluster":{"name":"c"},"nodeGroup":{"role":"boss"},"labels":{"kubernetes.io/role":"x"},"sysctls":{"../x":1}}"#;
    let (t, rf) = both(&r, &["validate", "--config", "-"], Some(bad));
    assert_eq!(t.code, Some(3));
    same("validate (invalid, from stdin)", &t, &rf);
}

#[test]
fn golden_dry_run_plans() {
    let Some(r) = reference() else { return };
    for (golden, config, root, output) in [
        ("al2-scaler.txt", "scaler.json", "al2-root", "text"),
        ("al2-master.json", "master.json", "al2-root", "json"),
        ("al2023-master.txt", "master.json", "al2023-root", "text"),
        ("al2023-scaler.json", "scaler.json", "al2023-root", "json"),
    ] {
        let args = [
            "init",
            "--dry-run",
            "--output",
            output,
            "--config",
            &format!("examples/{config}"),
            "--metadata",
            "examples/metadata.json",
            "--root",
            &format!("examples/{root}"),
        ];
        let (t, rf) = both(&r, &args, None);
        assert_eq!(t.code, Some(0));
        same(golden, &t, &rf);
        let want =
            std::fs::read_to_string(manifest_dir().join("tests/golden").join(golden)).unwrap();
        assert!(
            t.stdout == want,
            "{golden}: the plan differs from the golden file"
        );
    }
}

/// Every file under `root`, the way `snapshot` reads it, with the times a run records masked:
/// every 13-digit number that is a time in milliseconds since the epoch between 2020 and 2100
/// (the report's `startedAtUnixMs`/`finishedAtUnixMs`, any marker stamped with the time).
fn files(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut m = snapshot(root);
    let report = std::str::from_utf8(&m[Path::new("var/lib/eks-nodeinit/report.json")])
        .unwrap()
        .to_string();
    assert!(
        mask_unix_ms(&report).matches("<unix ms>").count() >= 2,
        "the report's two timestamps: {report}"
    );
    if let Some(marker) = m.get_mut(Path::new("run/eks-nodeinit/bootstrap-exec")) {
        *marker = mask_process(marker);
    }
    for bytes in m.values_mut() {
        if let Ok(text) = std::str::from_utf8(bytes) {
            *bytes = mask_durations(&mask_unix_ms(text)).into_bytes();
        }
    }
    m
}

/// The AL2 hand-off marker names the process that became bootstrap.sh (its pid and start
/// time), which no two runs share: both are checked to be there and masked.
fn mask_process(marker: &[u8]) -> Vec<u8> {
    let mut v: serde_json::Value = serde_json::from_slice(marker).unwrap_or_else(|e| {
        panic!(
            "the marker is not JSON ({e}): {}",
            String::from_utf8_lossy(marker)
        )
    });
    assert!(v["pid"].as_u64().is_some_and(|n| n > 0), "the pid: {v}");
    // qemu-user may report a start time of 0 for the emulated process.
    assert!(v["startTime"].is_u64(), "the start time: {v}");
    for key in ["pid", "startTime"] {
        v[key] = format!("<{key}>").into();
    }
    serde_json::to_vec(&v).unwrap()
}

/// The checks' durations masked (`ms=3` in a log line, `"ms": 3` in the report): how long a
/// check took is the machine's, not the build's (an emulated binary takes a millisecond more).
fn mask_durations(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        // The next `ms=` that is a whole key (at the start or after a space), or `"ms": `.
        let field = rest
            .match_indices("ms=")
            .find(|(i, _)| *i == 0 || rest[..*i].ends_with(' '))
            .map(|(i, _)| i + 3);
        let json = rest.find("\"ms\": ").map(|i| i + 6);
        let Some(at) = field.into_iter().chain(json).min() else {
            break;
        };
        out.push_str(&rest[..at]);
        let digits = rest[at..].bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 {
            out.push_str("<ms>");
        }
        rest = &rest[at + digits..];
    }
    out.push_str(rest);
    out
}

fn mask_unix_ms(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut digits = String::new();
    let flush = |digits: &mut String, out: &mut String| {
        let is_time = digits.len() == 13
            && digits
                .parse::<u64>()
                .is_ok_and(|ms| (1_577_836_800_000..4_102_444_800_000).contains(&ms));
        out.push_str(if is_time { "<unix ms>" } else { digits });
        digits.clear();
    };
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
        } else {
            flush(&mut digits, &mut out);
            out.push(c);
        }
    }
    flush(&mut digits, &mut out);
    out
}

/// A real `init` on a copy of `sample` at the same path for both binaries (tagging off; on AL2
/// the recording bootstrap.sh): the same output and the same files.
fn real_init(sample: &str, role: &str) {
    let Some(r) = reference() else { return };
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    let cfg = d.path().join("c.json");
    let mut results = Vec::new();
    for which in ["reference", "under test"] {
        let _ = std::fs::remove_dir_all(&root);
        copy_tree(&manifest_dir().join("examples").join(sample), &root);
        if root.join("etc/eks/bootstrap.sh").exists() {
            recording_bootstrap(&root);
        }
        config_with(d.path(), "c.json", |v| {
            v["tagging"] = serde_json::json!({"enabled": false});
            v["nodeGroup"]["role"] = role.into();
        });
        let mut c = match which {
            "reference" => with_clean_env(Command::new(&r)),
            _ => cmd(),
        };
        c.arg("init")
            .arg("--metadata")
            .arg(example("metadata.json"))
            .arg("--config")
            .arg(&cfg)
            .arg("--root")
            .arg(&root);
        let mut out = ran(c, d.path(), None);
        assert_eq!(out.code, Some(0), "{which}: {out:#?}");
        out.stderr = mask_durations(&out.stderr);
        results.push((out, files(&root)));
    }
    let (t, tf) = results.pop().unwrap();
    let (rf, rff) = results.pop().unwrap();
    same(&format!("init on {sample}"), &t, &rf);
    assert!(rff.len() > 5, "{:?}", rff.keys());
    for (p, want) in &rff {
        assert!(
            tf.get(p) == Some(want),
            "{sample}: {} differs (or is missing) under the binary under test",
            p.display()
        );
    }
    assert_eq!(
        tf.keys().collect::<Vec<_>>(),
        rff.keys().collect::<Vec<_>>()
    );
}

#[test]
fn durations_are_masked_and_nothing_else() {
    assert_eq!(
        mask_durations("a ms=12 b \"ms\": 0, c ms=x items=3"),
        "a ms=<ms> b \"ms\": <ms>, c ms=x items=3"
    );
}

#[test]
fn real_init_al2_hands_off_to_bootstrap_sh() {
    real_init("al2-root", "scaler");
}

#[test]
fn real_init_al2023_writes_the_node_config() {
    real_init("al2023-root", "master");
}
