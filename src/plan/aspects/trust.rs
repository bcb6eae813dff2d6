//! CA bundles for the whole node (`trust`): each bundle a file in the distribution's anchor
//! directory, then the trust store rebuilt by exec of the distribution's tool (no shell), before
//! containerd and kubelet start. Amazon Linux (AL2, AL2023): `/etc/pki/ca-trust/source/anchors/`
//! and `update-ca-trust extract`; a Debian-like root: `/usr/local/share/ca-certificates/` (files
//! must end in `.crt`) and `update-ca-certificates`. Which one is told by the tool found under
//! the root.

use std::path::Path;

use crate::facts::Family;
use crate::plan::step::{File, IfFailed, Mode, Remove, Run, Step};
use crate::spec::Spec;

use super::{Aspect, Input, Out, Reads};
use crate::facts::Read;

pub(crate) const ASPECT: Aspect = Aspect {
    name: "trust",
    reads,
    plan,
    contribute: super::Contribution::Nothing,
};

/// A distribution's trust store: its tool and its anchor directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Store {
    pub tool: &'static str,
    pub anchors: &'static str,
}

pub const AMAZON: Store = Store {
    tool: "/usr/bin/update-ca-trust",
    anchors: "/etc/pki/ca-trust/source/anchors",
};

pub const DEBIAN: Store = Store {
    tool: "/usr/sbin/update-ca-certificates",
    anchors: "/usr/local/share/ca-certificates",
};

/// The file of bundle `i` (from 0) in `store`'s anchors.
pub fn anchor(store: Store, i: usize) -> String {
    format!("{}/eks-nodeinit-ca-{}.crt", store.anchors, i + 1)
}

/// What a successful rebuild leaves: the tool and a digest of the bundles it rebuilt with.
pub const RECORD: &str = "/var/lib/eks-nodeinit/trust-rebuilt";

fn record(store: Store, bundles: &[String]) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    for b in bundles {
        h.update(b.as_bytes());
        h.update([0]);
    }
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    format!("{} sha256:{hex}\n", store.tool)
}

fn reads(spec: &Spec, _: Option<Family>, r: &mut Reads) {
    let Some(t) = &spec.trust else {
        return;
    };
    r.file(RECORD);
    for store in [AMAZON, DEBIAN] {
        r.ask(Read::Exists(store.tool.into()));
        for i in 0..t.bundles.len() {
            r.file(anchor(store, i));
        }
    }
}

/// How the store is rebuilt: Amazon Linux's tool rebuilds only `/`'s store (its paths are
/// compiled into p11-kit), so under another root it is not run; Debian's takes the root's
/// directories.
fn rebuild(store: Store, root: &Path) -> Run {
    let under = |p: &str| root.join(p.trim_start_matches('/')).display().to_string();
    let mut argv = vec![under(store.tool)];
    let mut skip = None;
    let is_root = root == Path::new("/");
    if store == AMAZON {
        argv.push("extract".into());
        skip = (!is_root).then(|| {
            format!(
                "--root is {}, not /: update-ca-trust rebuilds only /'s store; on the node it runs",
                root.display()
            )
        });
    } else if !is_root {
        for (opt, dir) in [
            ("--certsconf", "/etc/ca-certificates.conf"),
            ("--certsdir", "/usr/share/ca-certificates"),
            ("--localcertsdir", DEBIAN.anchors),
            ("--etccertsdir", "/etc/ssl/certs"),
            ("--hooksdir", "/etc/ca-certificates/update.d"),
        ] {
            argv.push(opt.into());
            argv.push(under(dir));
        }
    }
    let failed = IfFailed::new(
        "the CA trust store was not rebuilt",
        "the CA files are in place: run it by hand, then restart containerd",
    );
    Run::new("rebuild the trust store", argv, 60, failed).skip(skip)
}

fn plan(i: &Input, out: &mut Out) {
    let Some(t) = &i.spec.trust else {
        return;
    };
    let facts = i.facts;
    let store = match (
        facts.exists(Path::new(AMAZON.tool)),
        facts.exists(Path::new(DEBIAN.tool)),
    ) {
        (true, _) => AMAZON,
        (false, true) => DEBIAN,
        (false, false) => {
            out.findings.push("trust", format!("no trust-store tool under {}: neither {} (Amazon Linux) nor {} (Debian family); install ca-certificates or leave `trust` out", facts.root.display(), AMAZON.tool, DEBIAN.tool));
            return;
        }
    };
    // The record of the last rebuild goes first: a run stopped after the anchors changed and
    // before the rebuild finds no record, and plans the rebuild again.
    let at = out.steps.len();
    let mut wrote = false;
    for (n, bundle) in t.bundles.iter().enumerate() {
        let purpose = format!("CA bundle {} for the node's trust store", n + 1);
        wrote |= out.file(
            facts,
            "trust",
            &anchor(store, n),
            purpose,
            bundle.clone(),
            Mode::Exact(0o644),
        );
    }
    let step = rebuild(store, &facts.root);
    let want = record(store, &t.bundles);
    let Some(recorded) = facts.current_file(RECORD, "trust", &mut out.findings) else {
        return;
    };
    let runs = step.skip.is_none();
    if !(wrote || (runs && recorded.content.as_deref() != Some(want.as_str()))) {
        return;
    }
    if recorded.content.is_some() {
        out.steps.insert(
            at,
            Step::Remove(Remove {
                purpose: "the record of the last trust-store rebuild, until this one succeeds"
                    .into(),
                path: RECORD.into(),
                restore_if_run_fails: false,
            }),
        );
    }
    out.steps.push(Step::Run(step));
    // A rebuild that ran is recorded; one that failed or never finished is planned again.
    if runs {
        let purpose = "record of the trust-store rebuild";
        out.steps.extend(File::wanted(
            RECORD,
            purpose,
            (None, None),
            want,
            Mode::Exact(0o644),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{run, spec};
    use super::*;
    use crate::facts::Facts;

    fn ca() -> String {
        std::fs::read_to_string("tests/fixtures/cluster-ca.pem").unwrap()
    }

    fn config() -> String {
        serde_json::json!({"cluster": {"name": "c"}, "trust": {"caBundles": [ca(), ca()]}})
            .to_string()
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
}
