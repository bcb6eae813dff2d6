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
    Run {
        purpose: "rebuild the trust store".into(),
        argv,
        timeout_secs: 60,
        check: None,
        skip,
        if_failed: IfFailed::new(
            "the CA trust store was not rebuilt",
            "the CA files are in place: run it by hand, then restart containerd",
        ),
    }
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
mod tests;
