//! The image cache checked at every boot: the images `eks-nodeinit bake-images` put into the
//! AMI's containerd store ([`IMAGE_CACHE`]) are each looked up in the content store by the digest
//! they had when baked; the plan says which are there and which the kubelet will pull at first
//! use instead (a warning: a pod waits for it); without the file, that none was baked. The store is containerd's directory of blobs,
//! one file per digest, listed by name and never read.

use serde_json::json;

use crate::base::text::{printable, serde_message};
use crate::facts::{Family, Read};
use crate::plan::aspects::containerd::config::{
    default_blobs, in_blobs, ImageCache, DEFAULT_ROOT, IMAGE_CACHE,
};
use crate::plan::step::Note;
use crate::spec::Spec;

use crate::plan::aspects::{Aspect, Input, Out, Reads};

pub(crate) const ASPECT: Aspect = Aspect {
    name: "image cache",
    reads,
    plan,
    ..Aspect::BASE
};

fn reads(_: &Spec, family: Option<Family>, r: &mut Reads) {
    if family.is_some() {
        r.file(IMAGE_CACHE);
        r.ask(Read::Names(default_blobs().into()));
    }
}

fn plan(i: &Input, out: &mut Out) {
    if i.facts.family().is_none() {
        return;
    }
    let Some(Some(text)) = i
        .facts
        .file(IMAGE_CACHE)
        .map(|f| f.content.as_ref().ok().cloned().flatten())
    else {
        out.notes.push(Note {
            key: "imageCache".into(),
            lines: vec![format!("image cache: none baked ({IMAGE_CACHE} is absent): every image is pulled at first use")],
            value: json!({"manifest": null}),
        });
        return;
    };
    let cache: ImageCache = match serde_json::from_str(&text) {
        Ok(c) => c,
        Err(e) => {
            out.warnings.push(format!("{IMAGE_CACHE} cannot be read ({}): the baked images are not checked; bake the AMI again with `eks-nodeinit bake-images`", serde_message(&e)));
            return;
        }
    };
    if cache.containerd_root != DEFAULT_ROOT {
        out.warnings.push(format!("{IMAGE_CACHE}: the images were baked into containerd's root {}, and the agent checks {DEFAULT_ROOT}: not checked", printable(&cache.containerd_root)));
        return;
    }
    let names = i.facts.names(default_blobs());
    let (mut present, mut missing) = (Vec::new(), Vec::new());
    for img in &cache.images {
        let there = in_blobs(names, &img.digest) == Some(true);
        let shown = format!("{} ({})", printable(&img.image), printable(&img.digest));
        if there {
            present.push(shown)
        } else {
            missing.push(shown)
        }
    }
    let mut lines = vec![format!(
        "image cache ({IMAGE_CACHE}): {} of {} in containerd's store as baked",
        present.len(),
        cache.images.len()
    )];
    lines.extend(present.iter().map(|p| format!("  present: {p}")));
    lines.extend(
        missing
            .iter()
            .map(|m| format!("  pulled at first use instead (not in the store): {m}")),
    );
    if !missing.is_empty() {
        out.warnings.push(format!("{} of the {} images baked into this AMI are not in containerd's store as baked, and will be pulled when a pod first needs them: {}", missing.len(), cache.images.len(), missing.join(", ")));
    }
    let soci = i.handoff.containerd.fast_image_pull;
    if soci && !present.is_empty() {
        lines.push("  under SOCI (fastImagePull, which nodeadm uses on this node) the CRI unpacks with the soci snapshotter, and these were unpacked for overlayfs: their layers are fetched from the registry again when a pod first uses them".into());
        out.warnings.push(format!("images.pull.fastImagePull: nodeadm runs the CRI on SOCI's snapshotter on this node, and the {} images baked into this AMI were unpacked for overlayfs: containerd fetches their layers from the registry again when a pod first uses them (nodeadm re-imports its own pause image into SOCI for this reason); leave fastImagePull out where the image cache matters", present.len()));
    }
    let value = json!({"manifest": IMAGE_CACHE, "present": present, "pulled": missing, "refetchedUnderSoci": soci && !present.is_empty()});
    out.notes.push(Note {
        key: "imageCache".into(),
        lines,
        value,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::Facts;
    use crate::plan::aspects::testing::{run, spec};

    const A: &str = "0000000000000000000000000000000000000000000000000000000000000001";
    const B: &str = "0000000000000000000000000000000000000000000000000000000000000002";

    fn manifest() -> String {
        json!({"containerdRoot": DEFAULT_ROOT, "images": [
            {"image": "registry.example/a:1", "digest": format!("sha256:{A}")},
            {"image": "registry.example/b:1", "digest": format!("sha256:{B}")},
        ]})
        .to_string()
    }

    /// An AL2023 node of 32 GiB with these CPUs online, both baked images in its store.
    fn cached_on(cpus: &str) -> Facts {
        let mut f = Facts::builder(Family::Al2023)
            .file(IMAGE_CACHE, &manifest())
            .file(crate::base::node::CPU_ONLINE, cpus)
            .file(crate::base::node::MEMINFO, "MemTotal: 33554432 kB\n")
            .build();
        f.set_names(default_blobs(), vec![A.into(), B.into()]);
        f
    }

    #[test]
    fn under_soci_the_baked_images_are_said_to_be_fetched_again() {
        let s = spec(r#"{"cluster": {"name": "c"}, "images": {"pull": {"fastImagePull": true}}}"#);
        let out = run(&ASPECT, &s, &cached_on("0-7\n"));
        assert_eq!(out.warnings.len(), 1, "{:?}", out.warnings);
        assert!(
            out.warnings[0].starts_with(
                "images.pull.fastImagePull: nodeadm runs the CRI on SOCI's snapshotter"
            ) && out.warnings[0].contains("the 2 images baked"),
            "{:?}",
            out.warnings
        );
        assert_eq!(out.notes[0].value["refetchedUnderSoci"], json!(true));
        // Where nodeadm would not use SOCI (2 vCPUs), the cache serves as baked.
        let out = run(&ASPECT, &s, &cached_on("0-1\n"));
        assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    }

    #[test]
    fn each_baked_image_is_found_by_its_digest_or_said_to_be_pulled() {
        let s = spec(r#"{"cluster": {"name": "c"}}"#);
        let mut f = Facts::builder(Family::Al2023)
            .file(IMAGE_CACHE, &manifest())
            .build();
        f.set_names(default_blobs(), vec![A.into(), "ff".into()]);
        let out = run(&ASPECT, &s, &f);
        let lines = &out.notes[0].lines;
        assert_eq!(lines[0], "image cache (/etc/eks-nodeinit/image-cache.json): 1 of 2 in containerd's store as baked");
        assert!(
            lines[1].starts_with("  present: registry.example/a:1 (sha256:"),
            "{lines:?}"
        );
        assert!(
            lines[2].starts_with(
                "  pulled at first use instead (not in the store): registry.example/b:1"
            ),
            "{lines:?}"
        );
        assert_eq!(out.warnings.len(), 1, "{:?}", out.warnings);
        f.set_names(default_blobs(), vec![A.into(), B.into()]);
        let out = run(&ASPECT, &s, &f);
        assert!(
            out.warnings.is_empty()
                && out.notes[0].lines[0].ends_with("2 of 2 in containerd's store as baked")
        );
    }

    #[test]
    fn no_manifest_says_nothing_and_a_broken_one_is_a_warning() {
        let s = spec(r#"{"cluster": {"name": "c"}}"#);
        let none = Facts::builder(Family::Al2).absent([IMAGE_CACHE]).build();
        let out = run(&ASPECT, &s, &none);
        assert!(out.warnings.is_empty(), "{:?}", out.warnings);
        assert_eq!(out.notes[0].lines, ["image cache: none baked (/etc/eks-nodeinit/image-cache.json is absent): every image is pulled at first use"]);
        let broken = Facts::builder(Family::Al2)
            .file(IMAGE_CACHE, "{\"images\": 1}")
            .build();
        let out = run(&ASPECT, &s, &broken);
        assert!(
            out.warnings[0].contains("cannot be read"),
            "{:?}",
            out.warnings
        );
    }
}
