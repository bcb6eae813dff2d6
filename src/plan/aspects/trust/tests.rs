use super::super::testing::{run, spec};
use super::*;
use crate::facts::Facts;

fn ca() -> String {
    std::fs::read_to_string("tests/fixtures/cluster-ca.pem").unwrap()
}

fn config() -> String {
    serde_json::json!({"cluster": {"name": "c"}, "trust": {"caBundles": [ca(), ca()]}}).to_string()
}

fn facts(store: Store, root: &str) -> Facts {
    let mut f = Facts::builder(Family::Al2023)
        .exists(AMAZON.tool, store == AMAZON)
        .exists(DEBIAN.tool, store == DEBIAN)
        .absent((0..2).map(|i| anchor(store, i)).chain([RECORD.to_string()]))
        .build();
    f.root = root.into();
    f
}

fn rebuild_of(out: &crate::plan::aspects::Out) -> &Run {
    let mut runs = out.steps.iter().filter_map(|s| match s {
        Step::Run(r) => Some(r),
        _ => None,
    });
    runs.next().expect("a rebuild step")
}

/// The record the plan writes after the rebuild, if any.
fn record_of(out: &crate::plan::aspects::Out) -> Option<String> {
    out.steps.iter().find_map(|s| match s {
        Step::File(f) if f.path == std::path::Path::new(RECORD) => Some(f.new.clone()),
        _ => None,
    })
}

#[test]
fn amazon_linux_anchors_then_update_ca_trust_extract() {
    let out = run(&ASPECT, &spec(&config()), &facts(AMAZON, "/"));
    assert!(out.findings.is_empty(), "{:?}", out.findings);
    let paths: Vec<String> = out
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::File(crate::plan::step::File {
                path, new, mode, ..
            }) if path != std::path::Path::new(RECORD) => {
                assert_eq!((*mode, new.trim_end()), (0o644, ca().trim_end()));
                Some(path.display().to_string())
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        paths,
        [
            "/etc/pki/ca-trust/source/anchors/eks-nodeinit-ca-1.crt",
            "/etc/pki/ca-trust/source/anchors/eks-nodeinit-ca-2.crt"
        ]
    );
    let t = rebuild_of(&out);
    assert_eq!(t.argv, ["/usr/bin/update-ca-trust", "extract"]);
    assert_eq!(t.skip, None);
    let content = record_of(&out).unwrap();
    assert!(
        content.starts_with("/usr/bin/update-ca-trust sha256:"),
        "{content}"
    );
    // Under another root it is planned, and said why it is not run.
    let out = run(&ASPECT, &spec(&config()), &facts(AMAZON, "/tmp/r"));
    let t = rebuild_of(&out);
    assert!(
        t.skip
            .as_deref()
            .is_some_and(|w| w.contains("only /'s store")),
        "{t:?}"
    );
}

#[test]
fn a_debian_root_gets_its_own_directories_and_a_rerun_plans_nothing() {
    let out = run(&ASPECT, &spec(&config()), &facts(DEBIAN, "/tmp/r"));
    let t = rebuild_of(&out);
    assert_eq!(t.argv[0], "/tmp/r/usr/sbin/update-ca-certificates");
    assert!(t
        .argv
        .windows(2)
        .any(|w| w == ["--localcertsdir", "/tmp/r/usr/local/share/ca-certificates"]));
    assert!(t
        .argv
        .windows(2)
        .any(|w| w == ["--etccertsdir", "/tmp/r/etc/ssl/certs"]));
    let out = run(&ASPECT, &spec(&config()), &facts(DEBIAN, "/"));
    let t = rebuild_of(&out);
    assert_eq!(t.argv, ["/usr/sbin/update-ca-certificates"]);
    let recorded = record_of(&out).unwrap();
    let node = |record: Option<&str>| {
        let mut f = Facts::builder(Family::Al2023)
            .exists(DEBIAN.tool, true)
            .exists(AMAZON.tool, false);
        for i in 0..2 {
            f = f.file(anchor(DEBIAN, i), &ca());
        }
        match record {
            Some(r) => f.file(RECORD, r).build(),
            None => f.absent([RECORD]).build(),
        }
    };
    let again = run(&ASPECT, &spec(&config()), &node(Some(&recorded)));
    assert!(
        again.steps.is_empty() && again.findings.is_empty(),
        "{:?}",
        again.steps
    );
    // The anchors in place but no record of a rebuild (the tool failed, or the run was cut
    // short): the rebuild alone is planned again, and its record after it.
    let retry = run(&ASPECT, &spec(&config()), &node(None));
    assert_eq!(retry.steps.len(), 2, "{:?}", retry.steps);
    assert!(matches!(retry.steps[0], Step::Run(_)));
    assert_eq!(record_of(&retry), Some(recorded.clone()));
    // A stale record is removed before the anchors change, so a run cut short after them
    // rebuilds again.
    let stale = run(&ASPECT, &spec(&config()), &node(Some("old")));
    assert!(
        matches!(&stale.steps[..], [Step::Remove(r), Step::Run(_), Step::File(_)] if r.path == std::path::Path::new(RECORD)),
        "{:?}",
        stale.steps
    );
}

#[test]
fn no_tool_under_the_root_is_a_finding() {
    let f = Facts::builder(Family::Al2)
        .absent([RECORD])
        .exists(AMAZON.tool, false)
        .exists(DEBIAN.tool, false)
        .build();
    let out = run(&ASPECT, &spec(&config()), &f);
    assert!(out.steps.is_empty());
    assert!(
        out.findings.0[0]
            .to_string()
            .contains("no trust-store tool"),
        "{:?}",
        out.findings
    );
}
