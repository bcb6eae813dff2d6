//! The pause image kept: the sandbox image the node's containerd uses is named in the plan, its
//! presence in the AMI's cache checked where the AMI has one (AL2023), and it is pinned at every
//! boot by a drop-in that runs `eks-nodeinit pin-sandbox-image` once the image is in containerd's
//! store (after sandbox-image.service's pull on AL2, at containerd's start on AL2023), so the
//! kubelet's image garbage collection never removes it. Without the pause image no new pod
//! starts on the node. On AL2, where the image comes only after the agent, the same program
//! runs once more after the hand-off, once kubelet (which requires sandbox-image.service) is
//! active: a missing image is then named in the join's verdict.

use serde_json::json;

use crate::base::text::printable;
use crate::facts::{Family, Read};
use crate::plan::aspects::containerd::config::{default_blobs, in_blobs};
use crate::plan::step::{IfFailed, Mode, Note, Run, Step, Unit, UnitJob, When};
use crate::spec::Spec;

use crate::plan::aspects::{Aspect, Input, Out, Reads};

pub(crate) const ASPECT: Aspect = Aspect {
    name: "pause image",
    reads,
    plan,
    ..Aspect::BASE
};

/// nodeadm's sandbox image (its `enrichConfig`), imported into the AMI's store at bake and
/// exported to [`AL2023_CACHE`].
pub const AL2023_SANDBOX: &str = "localhost/kubernetes/pause:latest";
/// The AL2023 AMI's copy of the pause image.
pub const AL2023_CACHE: &str = "/etc/eks/pause.tar";

/// The unit after whose start the image is in containerd's store, per family.
fn unit(family: Family) -> &'static str {
    match family {
        Family::Al2 => "sandbox-image.service",
        Family::Al2023 => "containerd.service",
    }
}

/// The drop-in that pins the image after `unit` starts.
pub fn dropin(family: Family) -> String {
    format!(
        "/etc/systemd/system/{}.d/90-eks-nodeinit-pin.conf",
        unit(family)
    )
}

/// The drop-in's text.
pub fn dropin_text(family: Family) -> String {
    format!(
        "# Written by eks-nodeinit: pin the sandbox image once {} has started, so the kubelet's\n# image garbage collection keeps it (docs/images.md). A failure is logged, never fatal.\n[Service]\nExecStartPost=-/usr/bin/eks-nodeinit pin-sandbox-image\n",
        unit(family)
    )
}

fn reads(_: &Spec, family: Option<Family>, r: &mut Reads) {
    let Some(family) = family else { return };
    r.file(dropin(family));
    if family == Family::Al2023 {
        r.ask(Read::Exists(AL2023_CACHE.into()));
        r.ask(Read::TarMember {
            path: AL2023_CACHE.into(),
            member: "index.json".into(),
        });
        r.ask(Read::Names(default_blobs().into()));
    }
}

fn plan(i: &Input, out: &mut Out) {
    let Some(family) = i.facts.family() else {
        return;
    };
    let (image, cached) = match family {
        Family::Al2 => ("the image bootstrap.sh sets as containerd's sandbox_image (<the region's EKS ECR>/eks/pause, --pause-container-account and --pause-container-version), pulled by sandbox-image.service".to_string(), None),
        Family::Al2023 => {
            let cached = i.facts.exists(std::path::Path::new(AL2023_CACHE));
            (format!("{AL2023_SANDBOX} (nodeadm's)"), Some(cached))
        }
    };
    let mut lines = vec![format!("pause image: {image}")];
    if cached == Some(true) {
        lines.push(in_store(i.facts, out));
    }
    lines.push(format!("pause image: checked at every boot after {} starts (eks-nodeinit pin-sandbox-image): in containerd's store, and labelled pinned where the AMI did not, so the kubelet's image garbage collection keeps it", unit(family)));
    if let Some(c) = cached {
        lines.push(match c {
            true => format!("pause image: in the AMI's cache {AL2023_CACHE}: yes"),
            false => format!("pause image: in the AMI's cache {AL2023_CACHE}: no (nodeadm cannot pull a localhost image: if containerd's store lacks it too, no pod starts)"),
        });
    }
    let value = json!({"image": image, "pinnedAfter": unit(family), "amiCache": cached});
    out.notes.push(Note {
        key: "pause".into(),
        lines,
        value,
    });
    let path = dropin(family);
    let purpose = format!("pin the sandbox image after {} starts", unit(family));
    if out.file(
        i.facts,
        "pause",
        &path,
        purpose,
        dropin_text(family),
        Mode::Keep(0o644),
    ) {
        out.steps.push(Step::Unit(reload()));
    }
    if family == Family::Al2 {
        out.steps.push(Step::Run(checked_after(&i.facts.root)));
    }
}

/// AL2's pause image pinned and so checked present after the hand-off: sandbox-image.service
/// pulls it after the agent, so nothing before could tell. The agent under `root` is the root's
/// copy of the packaged one.
fn checked_after(root: &std::path::Path) -> Run {
    let agent = crate::os::fsutil::under(root, "/usr/bin/eks-nodeinit");
    let mut argv = vec![agent.display().to_string(), "pin-sandbox-image".into()];
    if root != std::path::Path::new("/") {
        argv.extend(["--root".into(), root.display().to_string()]);
    }
    let failed = IfFailed::new(
        "the sandbox image is not in containerd's store, pinned",
        "no new pod starts without it: see `journalctl -u sandbox-image` and bootstrap.sh's --pause-container-account",
    );
    let purpose = "the sandbox image in containerd's store, pinned";
    Run::new(purpose, argv, 120, failed)
        .when(When::After)
        .condition(PAUSE_CONDITION)
}

/// The Node condition that says the pause image is in the store and pinned (AL2, where it
/// comes after the hand-off): no new pod starts without it.
pub const PAUSE_CONDITION: &str = "eks-nodeinit.io/PauseImagePinned";

/// The digest `ctr images export` recorded in the AMI's copy (its `index.json`), if it names one.
fn cached_digest(facts: &crate::facts::Facts) -> Option<String> {
    let text = facts
        .tar_member(AL2023_CACHE, "index.json")?
        .content
        .as_ref()
        .ok()?
        .clone()?;
    let index: serde_json::Value = serde_json::from_str(&text).ok()?;
    let manifests = index["manifests"].as_array()?;
    let named = |m: &&serde_json::Value| {
        m["annotations"]["io.containerd.image.name"].as_str() == Some(AL2023_SANDBOX)
    };
    let m = manifests.iter().find(named).or(manifests.first())?;
    m["digest"].as_str().map(String::from)
}

/// Whether the AMI's pause image is in containerd's store, by the digest its copy records; a
/// finding when the store is there and the image is not: no pod would start, and nodeadm cannot
/// pull a `localhost` image.
fn in_store(facts: &crate::facts::Facts, out: &mut Out) -> String {
    let Some(digest) = cached_digest(facts) else {
        return format!("pause image: in containerd's store: not checked ({AL2023_CACHE} names no digest the agent can read)");
    };
    let names = facts.names(default_blobs());
    if names.is_empty() {
        return format!(
            "pause image: in containerd's store: not checked ({} is empty or missing)",
            default_blobs()
        );
    }
    match in_blobs(names, &digest) {
        None => {
            return format!(
                "pause image: in containerd's store: not checked ({} is not a sha256 digest)",
                printable(&digest)
            )
        }
        Some(true) => {
            return format!(
                "pause image: in containerd's store: yes ({})",
                printable(&digest)
            )
        }
        Some(false) => {}
    }
    out.findings.push("pause", format!("nodeadm's pause image {AL2023_SANDBOX} ({}, as {AL2023_CACHE} records it) is not in containerd's store ({}): no pod can start on this node, and nodeadm cannot pull a localhost image; rebuild the AMI, or import {AL2023_CACHE} with `ctr --namespace k8s.io images import`", printable(&digest), default_blobs()));
    "pause image: in containerd's store: no".into()
}

/// systemd told of the drop-in before the unit starts: on AL2023 containerd starts after the
/// agent; on AL2 bootstrap.sh reloads again before it restarts sandbox-image.service.
fn reload() -> Unit {
    Unit {
        job: UnitJob::Reload,
        why: "the pause image's drop-in applies to units started after a reload".into(),
        required: false,
        if_failed: IfFailed::new(
            "systemd did not reload its units",
            "the pause image is pinned from the next boot on; until then the kubelet's image garbage collection may remove it",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::Facts;
    use crate::plan::aspects::testing::{run, spec};

    #[test]
    fn each_family_pins_after_its_unit_and_a_configured_node_plans_nothing() {
        let s = spec(r#"{"cluster": {"name": "c"}}"#);
        for family in [Family::Al2, Family::Al2023] {
            let facts = Facts::builder(family).absent([dropin(family)]).build();
            let out = run(&ASPECT, &s, &facts);
            assert!(out.findings.is_empty(), "{:?}", out.findings);
            assert!(
                matches!(&out.steps[0], Step::File(f) if f.new.contains("ExecStartPost=-/usr/bin/eks-nodeinit pin-sandbox-image\n")),
                "{:?}",
                out.steps
            );
            assert!(matches!(&out.steps[1], Step::Unit(u) if u.job == UnitJob::Reload));
            let done = Facts::builder(family)
                .file(dropin(family), &dropin_text(family))
                .build();
            let again = run(&ASPECT, &s, &done).steps;
            // What is left runs after the hand-off: in the plan's own list, not a change.
            let changes = again.iter().filter(|s| s.when() != When::After);
            assert!(changes.count() == 0, "{again:?}");
        }
        assert_eq!(
            dropin(Family::Al2),
            "/etc/systemd/system/sandbox-image.service.d/90-eks-nodeinit-pin.conf"
        );
        assert_eq!(
            dropin(Family::Al2023),
            "/etc/systemd/system/containerd.service.d/90-eks-nodeinit-pin.conf"
        );
    }

    #[test]
    fn al2_checks_the_image_pinned_after_the_hand_off_with_the_roots_agent() {
        let s = spec(r#"{"cluster": {"name": "c"}}"#);
        let after = |family, root: &str| -> Vec<Run> {
            let mut facts = Facts::builder(family).absent([dropin(family)]).build();
            facts.root = root.into();
            let steps = run(&ASPECT, &s, &facts).steps;
            let runs = steps.into_iter().filter_map(|s| match s {
                Step::Run(r) => Some(r),
                _ => None,
            });
            runs.collect()
        };
        let on_node = after(Family::Al2, "/");
        assert_eq!(on_node.len(), 1);
        assert_eq!(on_node[0].when, When::After);
        assert_eq!(
            on_node[0].argv,
            ["/usr/bin/eks-nodeinit", "pin-sandbox-image"]
        );
        let under = after(Family::Al2, "/tmp/r");
        assert_eq!(
            under[0].argv,
            [
                "/tmp/r/usr/bin/eks-nodeinit",
                "pin-sandbox-image",
                "--root",
                "/tmp/r"
            ]
        );
        // AL2023's image is checked before any change, from the AMI's copy.
        assert!(after(Family::Al2023, "/").is_empty());
    }

    #[test]
    fn al2023_says_whether_the_ami_cached_nodeadms_pause_image() {
        let s = spec(r#"{"cluster": {"name": "c"}}"#);
        let without = Facts::builder(Family::Al2023)
            .absent([dropin(Family::Al2023)])
            .build();
        let out = run(&ASPECT, &s, &without);
        assert!(out.notes[0]
            .lines
            .iter()
            .any(|l| l.contains("/etc/eks/pause.tar: no (nodeadm cannot pull")));
        let with = Facts::builder(Family::Al2023)
            .absent([dropin(Family::Al2023)])
            .exists(AL2023_CACHE, true)
            .build();
        let out = run(&ASPECT, &s, &with);
        assert!(out.notes[0]
            .lines
            .iter()
            .any(|l| l.ends_with("/etc/eks/pause.tar: yes")));
    }

    #[test]
    fn al2023_finds_the_amis_pause_image_in_containerds_store_by_its_digest() {
        const HEX: &str = "7031c1b283388d2c2e09b57badb803c05ebed362dc88d84b480cc47f72a21097";
        let s = spec(r#"{"cluster": {"name": "c"}}"#);
        let index = format!("{{\"manifests\": [{{\"digest\": \"sha256:{HEX}\", \"annotations\": {{\"io.containerd.image.name\": \"{AL2023_SANDBOX}\"}}}}]}}");
        let mut f = Facts::builder(Family::Al2023)
            .absent([dropin(Family::Al2023)])
            .exists(AL2023_CACHE, true)
            .build();
        let member = crate::os::fsutil::FileFact {
            content: Ok(Some(index)),
            mode: None,
            link: None,
        };
        f.set_tar_member(AL2023_CACHE, "index.json", member);
        f.set_names(default_blobs(), vec!["00".into(), HEX.into()]);
        let out = run(&ASPECT, &s, &f);
        assert!(out.findings.is_empty(), "{:?}", out.findings);
        assert!(
            out.notes[0]
                .lines
                .iter()
                .any(|l| l.ends_with(&format!("in containerd's store: yes (sha256:{HEX})"))),
            "{:?}",
            out.notes[0].lines
        );
        f.set_names(default_blobs(), vec!["00".into()]);
        let out = run(&ASPECT, &s, &f);
        assert!(
            out.findings
                .0
                .iter()
                .any(|x| x.field == "pause" && x.message.contains("no pod can start")),
            "{:?}",
            out.findings
        );
        // A digest the sha256 listing cannot answer is not checked, never a finding.
        let other = format!(
            "{{\"manifests\": [{{\"digest\": \"sha512:{}\"}}]}}",
            "a".repeat(128)
        );
        let member = crate::os::fsutil::FileFact {
            content: Ok(Some(other)),
            mode: None,
            link: None,
        };
        f.set_tar_member(AL2023_CACHE, "index.json", member);
        let out = run(&ASPECT, &s, &f);
        assert!(out.findings.is_empty(), "{:?}", out.findings);
        assert!(out.notes[0]
            .lines
            .iter()
            .any(|l| l.contains("is not a sha256 digest")));
        f.set_names(default_blobs(), vec![]);
        let out = run(&ASPECT, &s, &f);
        assert!(
            out.findings.is_empty() && out.notes[0].lines.iter().any(|l| l.contains("not checked"))
        );
    }
}
