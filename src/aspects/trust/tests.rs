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

#[test]
fn amazon_linux_anchors_then_update_ca_trust_extract() {
    let out = run(&ASPECT, &spec(&config()), &facts(AMAZON, "/"));
    assert!(out.findings.is_empty(), "{:?}", out.findings);
    let paths: Vec<String> = out
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::File {
                path, new, mode, ..
            } => {
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
    let Some(Step::RebuildTrust(t)) = out.steps.last() else {
        panic!()
    };
    assert_eq!(t.argv, ["/usr/bin/update-ca-trust", "extract"]);
    assert_eq!(t.skip, None);
    let (path, content) = t.record.clone().unwrap();
    assert_eq!(path, std::path::PathBuf::from(RECORD));
    assert!(
        content.starts_with("/usr/bin/update-ca-trust sha256:"),
        "{content}"
    );
    // Under another root it is planned, and said why it is not run.
    let out = run(&ASPECT, &spec(&config()), &facts(AMAZON, "/tmp/r"));
    let Some(Step::RebuildTrust(t)) = out.steps.last() else {
        panic!()
    };
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
    let Some(Step::RebuildTrust(t)) = out.steps.last() else {
        panic!()
    };
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
    let Some(Step::RebuildTrust(t)) = out.steps.last() else {
        panic!()
    };
    assert_eq!(t.argv, ["/usr/sbin/update-ca-certificates"]);
    let recorded = match out.steps.last() {
        Some(Step::RebuildTrust(t)) => t.record.clone().unwrap().1,
        other => panic!("{other:?}"),
    };
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
    // short): the rebuild alone is planned again.
    let retry = run(&ASPECT, &spec(&config()), &node(None));
    assert_eq!(retry.steps.len(), 1, "{:?}", retry.steps);
    assert!(matches!(retry.steps[0], Step::RebuildTrust(_)));
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
