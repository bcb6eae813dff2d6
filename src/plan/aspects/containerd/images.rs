//! How the node pulls images (`images.pull`): containerd's CRI pull settings in the containerd
//! part of the hand-off intent, the kubelet's in its intent, nodeadm's `FastImagePull` gate on
//! AL2023 with nodeadm's own rule stated, and a note in the plan saying what a pull will do.
//!
//! On containerd 2.1 and later the CRI pulls through the transfer service unless the node's
//! config turns on `discard_unpacked_layers` (both AMIs do) or sets `max_concurrent_downloads`
//! other than 3; either makes it pull itself, where the CRI plugin's settings decide. The
//! transfer service's own settings therefore never apply on these nodes and are not offered.

use serde_json::json;

use super::pull::CriPull;
use crate::base::findings::Findings;
use crate::base::node::{self, count_cpus, mem_total_kib};
use crate::facts::{Facts, Family};
use crate::plan::handoff::HandoffIntent;
use crate::plan::step::Note;
use crate::spec::images::PullSpec;
use crate::spec::Spec;

use crate::plan::aspects::{Aspect, Contribution, Input, Out, Reads};

pub(crate) const ASPECT: Aspect = Aspect {
    name: "images",
    reads,
    contribute: Contribution::Handoff(contribute),
    plan,
};

/// nodeadm's `UseSOCISnapshotter`: at least this many vCPUs online…
const SOCI_MIN_VCPUS: u64 = 4;
/// …and this much memory online (7 GiB), in KiB.
const SOCI_MIN_MEM_KIB: u64 = 7 * 1024 * 1024;

const FIELD_FAST: &str = "images.pull.fastImagePull";

fn pull(spec: &Spec) -> Option<&PullSpec> {
    spec.images.as_ref()?.pull.as_ref()
}

fn reads(spec: &Spec, family: Option<Family>, r: &mut Reads) {
    if family == Some(Family::Al2023) && pull(spec).is_some() {
        r.file(node::CPU_ONLINE);
        r.file(node::MEMINFO);
    }
}

fn contribute(spec: &Spec, facts: &Facts, h: &mut HandoffIntent, f: &mut Findings) {
    let Some(p) = pull(spec) else { return };
    h.containerd.pull = CriPull {
        max_concurrent_downloads: p.max_concurrent_downloads,
        progress_timeout: p.progress_timeout.as_ref().map(|d| d.text.clone()),
    };
    if let Some(nc) = &facts.node_configs {
        h.containerd.user_config_v3 = nc.containerd_v3;
    }
    let k = &mut h.kubelet;
    // Older kubelets default serializeImagePulls to true whatever maxParallelImagePulls
    // says, and then refuse the pair: say false with more than one pull at once.
    let serialize = p
        .serialize
        .or_else(|| p.max_parallel.filter(|n| *n > 1).map(|_| false));
    if let Some(s) = serialize {
        k.set("serializeImagePulls", json!(s));
    }
    if let Some(n) = p.max_parallel {
        k.set("maxParallelImagePulls", json!(n));
    }
    if let Some(n) = p.registry_qps {
        k.set("registryPullQPS", json!(n));
    }
    if let Some(n) = p.registry_burst {
        k.set("registryBurst", json!(n));
    }
    if p.fast_image_pull {
        fast_image_pull(facts, h, f);
    }
}

/// nodeadm's decision, stated: the gate goes into the NodeConfig only where nodeadm will act on
/// it; elsewhere a finding names the rule instead of a silent no-op.
fn fast_image_pull(facts: &Facts, h: &mut HandoffIntent, f: &mut Findings) {
    match facts.family() {
        Some(Family::Al2023) => {
            let s = soci(facts);
            if s.used {
                h.containerd.fast_image_pull = true;
            } else {
                f.push(FIELD_FAST, format!("nodeadm would ignore it on this node ({}); use a larger instance type, or leave it out", s.reason));
            }
        }
        Some(Family::Al2) => f.push(
            FIELD_FAST,
            "is nodeadm's FastImagePull (SOCI parallel pull), which AL2's bootstrap.sh does not have: leave it out on AL2",
        ),
        None => {}
    }
}

/// nodeadm's rule (`UseSOCISnapshotter`) on this node: whether it uses SOCI, and why.
struct Soci {
    used: bool,
    reason: String,
}

/// nodeadm counts the CPUs online and the memory online; `MemTotal` is the memory online less
/// the kernel's own, so never more than nodeadm's figure.
fn soci(facts: &Facts) -> Soci {
    let cpus = facts
        .text(node::CPU_ONLINE)
        .and_then(|t| count_cpus(&t).ok());
    let mem = facts.text(node::MEMINFO).and_then(|t| mem_total_kib(&t));
    let gib = |kib: u64| format!("{:.1} GiB", kib as f64 / 1_048_576.0);
    let (used, reason) = match (cpus, mem) {
        (None, _) => (false, format!("{} cannot be read: the vCPUs nodeadm counts are unknown", node::CPU_ONLINE)),
        (Some(c), _) if c < SOCI_MIN_VCPUS => (false, format!("{c} vCPUs online, and nodeadm needs {SOCI_MIN_VCPUS}")),
        (Some(c), Some(kib)) if kib >= SOCI_MIN_MEM_KIB => (true, format!("{c} vCPUs online, at least {SOCI_MIN_VCPUS}; MemTotal {}, so at least 7 GiB online", gib(kib))),
        (Some(_), Some(kib)) => (false, format!("MemTotal {}, and nodeadm needs 7 GiB online, which exceeds MemTotal only by the kernel's own memory", gib(kib))),
        (Some(_), None) => (false, format!("{} holds no MemTotal: the memory nodeadm counts is unknown", node::MEMINFO)),
    };
    Soci { used, reason }
}

fn plan(i: &Input, out: &mut Out) {
    let Some(p) = pull(i.spec) else { return };
    let (h, facts) = (i.handoff, i.facts);
    let mut lines: Vec<String> = (h.containerd.pull.entries().into_iter())
        .map(|(k, v)| format!("image pulls: containerd CRI {k} = {v}"))
        .collect();
    let mut kubelet = serde_json::Map::new();
    for key in KUBELET_KEYS {
        if let Some((_, v)) = h.kubelet.config.iter().find(|(k, _)| *k == key) {
            lines.push(format!("image pulls: kubelet {key} = {v}"));
            kubelet.insert(key.into(), v.clone());
        }
    }
    if p.registry_burst.is_some() && p.registry_qps == Some(0) {
        out.warnings.push("images.pull.registryBurst: the kubelet uses the burst only when registryPullQPS is above 0, and registryQPS is 0 (no limit)".into());
    }
    let soci = (facts.family() == Some(Family::Al2023)).then(|| {
        let s = soci(facts);
        let asked = if p.fast_image_pull {
            "asked"
        } else {
            "not asked (images.pull.fastImagePull)"
        };
        let would = if s.used {
            "would use it"
        } else {
            "would not use it"
        };
        format!("{asked}; on this node nodeadm {would}: {}", s.reason)
    });
    lines.extend(
        soci.iter()
            .map(|s| format!("image pulls: SOCI parallel pull {s}")),
    );
    soci_fetches_the_layers(h, &mut lines, &mut out.warnings);
    let c = &h.containerd.pull;
    let value = json!({
        "containerd": {
            "max_concurrent_downloads": c.max_concurrent_downloads,
            "image_pull_progress_timeout": c.progress_timeout,
        },
        "kubelet": kubelet,
        "fastImagePull": h.containerd.fast_image_pull,
        "soci": soci,
    });
    out.notes.push(Note {
        key: "images".into(),
        lines,
        value,
    });
}

/// nodeadm's SOCI snapshotter config: the layers of one image it fetches at once in its
/// parallel pull mode.
const SOCI_DOWNLOADS_PER_IMAGE: u32 = 20;

/// Under SOCI's parallel pull (nodeadm uses it on this node) the snapshotter fetches each layer
/// itself, with ranged requests of its own: containerd's `max_concurrent_downloads` and its
/// progress timeout then govern no layer download, which the plan says rather than listing
/// them as in force.
fn soci_fetches_the_layers(h: &HandoffIntent, lines: &mut Vec<String>, warnings: &mut Vec<String>) {
    let entries = h.containerd.pull.entries();
    if !h.containerd.fast_image_pull || entries.is_empty() {
        return;
    }
    let keys: Vec<&str> = entries.iter().map(|(k, _)| *k).collect();
    let fields: Vec<&str> = [
        (
            h.containerd.pull.max_concurrent_downloads.is_some(),
            "maxConcurrentDownloads",
        ),
        (
            h.containerd.pull.progress_timeout.is_some(),
            "progressTimeout",
        ),
    ]
    .into_iter()
    .filter_map(|(set, f)| set.then_some(f))
    .collect();
    let (verb, them) = match keys.len() {
        1 => ("governs", "it"),
        _ => ("govern", "them"),
    };
    let keys = keys.join(" and ");
    lines.push(format!("image pulls: under SOCI's parallel pull the snapshotter fetches the layers ({SOCI_DOWNLOADS_PER_IMAGE} at once per image, nodeadm's config): containerd's {keys} {verb} no layer download"));
    warnings.push(format!("images.pull.{}: nodeadm uses SOCI's parallel pull on this node (fastImagePull), whose snapshotter fetches the layers itself ({SOCI_DOWNLOADS_PER_IMAGE} at once per image), so containerd's {keys} no longer {verb} layer downloads; leave {them} out, or fastImagePull", fields.join(", images.pull.")));
}

/// The kubelet's pull settings this setting may set.
const KUBELET_KEYS: [&str; 4] = [
    "serializeImagePulls",
    "maxParallelImagePulls",
    "registryPullQPS",
    "registryBurst",
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::Facts;
    use crate::plan::aspects::testing::{findings, run, spec};

    fn node(family: Family, cpus: &str, mem_kib: u64) -> Facts {
        Facts::builder(family)
            .file(node::CPU_ONLINE, cpus)
            .file(node::MEMINFO, &format!("MemTotal: {mem_kib} kB\n"))
            .build()
    }

    const FAST: &str = r#"{"cluster": {"name": "c"}, "images": {"pull": {"fastImagePull": true}}}"#;

    #[test]
    fn fast_image_pull_goes_to_nodeadm_only_where_its_rule_holds() {
        let s = spec(FAST);
        let big = node(Family::Al2023, "0-7\n", 16_000_000);
        assert!(run(&ASPECT, &s, &big).findings.is_empty());
        let doc = crate::plan::handoff::al2023::document(&crate::plan::handoff_intent(&s, &big));
        assert_eq!(doc["spec"]["featureGates"], json!({"FastImagePull": true}));
        for (facts, says) in [
            (
                node(Family::Al2023, "0-1\n", 16_000_000),
                "2 vCPUs online, and nodeadm needs 4",
            ),
            (node(Family::Al2023, "0-3\n", 3_900_000), "MemTotal 3.7 GiB"),
            (
                node(Family::Al2, "0-7\n", 16_000_000),
                "AL2's bootstrap.sh does not have",
            ),
        ] {
            let f = findings(&run(&ASPECT, &s, &facts));
            assert!(
                f.iter()
                    .any(|l| l.starts_with(FIELD_FAST) && l.contains(says)),
                "{says}: {f:?}"
            );
            let doc =
                crate::plan::handoff::al2023::document(&crate::plan::handoff_intent(&s, &facts));
            assert!(doc["spec"].get("featureGates").is_none(), "{says}");
        }
    }

    #[test]
    fn under_soci_the_plan_says_containerds_settings_govern_no_layer_download() {
        let s = spec(
            r#"{"cluster": {"name": "c"}, "images": {"pull": {"fastImagePull": true, "maxConcurrentDownloads": 8}}}"#,
        );
        let big = node(Family::Al2023, "0-7\n", 32 * 1024 * 1024);
        let out = run(&ASPECT, &s, &big);
        assert_eq!(out.warnings.len(), 1, "{:?}", out.warnings);
        assert!(
            out.warnings[0].starts_with(
                "images.pull.maxConcurrentDownloads: nodeadm uses SOCI's parallel pull"
            ) && out.warnings[0]
                .contains("containerd's max_concurrent_downloads no longer governs"),
            "{:?}",
            out.warnings
        );
        assert!(
            out.notes[0]
                .lines
                .iter()
                .any(|l| l.contains("governs no layer download")),
            "{:?}",
            out.notes[0].lines
        );
        // Where nodeadm would not use SOCI, containerd's settings do govern: no such warning.
        let small = node(Family::Al2023, "0-1\n", 32 * 1024 * 1024);
        let out = run(&ASPECT, &s, &small);
        assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    }

    #[test]
    fn the_plan_says_what_a_pull_will_do_and_a_burst_without_qps_is_a_warning() {
        let s = spec(
            r#"{"cluster": {"name": "c"}, "images": {"pull": {"maxParallel": 4, "registryQPS": 0, "registryBurst": 20}}}"#,
        );
        let out = run(&ASPECT, &s, &node(Family::Al2023, "0-1\n", 8_000_000));
        let lines = &out.notes[0].lines;
        assert!(
            lines.contains(&"image pulls: kubelet serializeImagePulls = false".to_string()),
            "{lines:?}"
        );
        assert!(
            lines.contains(&"image pulls: kubelet maxParallelImagePulls = 4".to_string()),
            "{lines:?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.contains("SOCI parallel pull not asked")
                    && l.contains("would not use it")),
            "{lines:?}"
        );
        assert_eq!(out.warnings.len(), 1, "{:?}", out.warnings);
        assert!(out.warnings[0].starts_with("images.pull.registryBurst"));
    }
}
