//! `eks-nodeinit bake-images`: at AMI bake time, pull images into containerd's store in the
//! CRI's namespace and record each with its digest in [`IMAGE_CACHE`], which every boot's plan
//! checks against the content store (`aspects::containerd::image_cache`). Each reference is checked by
//! containerd's grammar and normalized as the CRI names it before anything is pulled, so the
//! kubelet finds the image under the name a pod gives.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::base::text::printable;
use crate::os::{ctr, fsutil};
use crate::plan::aspects::containerd::config::{
    self as containerd, check_reference, CachedImage, ImageCache, IMAGE_CACHE,
};

/// How long one image's pull may take.
const PULL_TIMEOUT: Duration = Duration::from_secs(900);
/// How long a listing may take.
const LIST_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum BakeError {
    #[error(transparent)]
    Fs(#[from] fsutil::FsError),
    #[error("--image {image}: {why}; give a reference such as registry.example/team/app:1.2")]
    Reference { image: String, why: String },
    #[error("give at least one --image")]
    NoImages,
    #[error("{path} {why}")]
    Config { path: PathBuf, why: String },
    #[error("{0}; `ctr` is containerd's client, installed with containerd")]
    Ctr(String),
    #[error("{image}: the pull failed, nothing was recorded: {said}")]
    Pull { image: String, said: String },
    #[error("{image}: pulled, but `ctr images ls` does not list it with a digest: {said}")]
    Digest { image: String, said: String },
    #[error("cannot record the image cache: {0}")]
    Record(String),
}

/// What to bake.
pub struct Bake<'a> {
    pub root: &'a Path,
    pub ctr: &'a str,
    pub images: &'a [String],
    /// Pull over plain HTTP (a registry on loopback, for tests and local mirrors).
    pub plain_http: bool,
}

/// The references, checked and normalized, before anything is pulled.
fn checked(images: &[String]) -> Result<Vec<String>, BakeError> {
    if images.is_empty() {
        return Err(BakeError::NoImages);
    }
    images
        .iter()
        .map(|i| {
            check_reference(i).map_err(|why| BakeError::Reference {
                image: printable(i),
                why,
            })?;
            Ok(containerd::normalized(i))
        })
        .collect()
}

/// containerd's socket and root: from its config when there is one, else its defaults.
fn runtime(root: &Path) -> Result<containerd::Runtime, BakeError> {
    let path = fsutil::under(root, containerd::CONFIG);
    match fsutil::read_optional(&path)? {
        None => Ok(containerd::Runtime::default()),
        Some(text) => containerd::runtime(&text).map_err(|why| BakeError::Config { path, why }),
    }
}

/// Pull every image, then record them all; the record is written only when every pull
/// succeeded.
pub async fn run(b: &Bake<'_>) -> Result<ImageCache, BakeError> {
    let images = checked(b.images)?;
    let rt = runtime(b.root)?;
    let mut cache = ImageCache {
        containerd_root: rt.root.clone(),
        images: Vec::new(),
    };
    for image in images {
        pull(b, &rt.address, &image).await?;
        let digest = digest(b.ctr, &rt.address, &image).await?;
        tracing::info!(image = %printable(&image), %digest, "baked into containerd's store");
        cache.images.push(CachedImage { image, digest });
    }
    let text =
        serde_json::to_string_pretty(&cache).map_err(|e| BakeError::Record(e.to_string()))?;
    fsutil::write_atomic(
        &fsutil::under(b.root, IMAGE_CACHE),
        format!("{text}\n").as_bytes(),
        0o644,
    )?;
    Ok(cache)
}

async fn pull(b: &Bake<'_>, address: &str, image: &str) -> Result<(), BakeError> {
    let mut args = vec!["images", "pull"];
    if b.plain_http {
        args.push("--plain-http");
    }
    args.push(image);
    let out = ctr::run(b.ctr, address, &args, PULL_TIMEOUT)
        .await
        .map_err(BakeError::Ctr)?;
    match out.status.success() {
        true => Ok(()),
        false => Err(BakeError::Pull {
            image: printable(image),
            said: ctr::said(&out),
        }),
    }
}

/// The digest `ctr images ls` lists for `image` (its columns: REF TYPE DIGEST …).
async fn digest(ctr_bin: &str, address: &str, image: &str) -> Result<String, BakeError> {
    let filter = format!("name=={image}");
    let out = ctr::run(ctr_bin, address, &["images", "ls", &filter], LIST_TIMEOUT)
        .await
        .map_err(BakeError::Ctr)?;
    let text = String::from_utf8_lossy(&out.stdout);
    let found = text
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cols| cols.first() == Some(&image))
        .and_then(|cols| cols.get(2).map(|d| d.to_string()))
        .filter(|d| d.contains(':'));
    found.ok_or_else(|| BakeError::Digest {
        image: printable(image),
        said: ctr::said(&out),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_checked_and_normalized_before_any_pull() {
        let ok = checked(&[
            "busybox:1.36".into(),
            "registry.k8s.io/pause:3.10".into(),
            "localhost/kubernetes/pause".into(),
        ])
        .unwrap();
        assert_eq!(
            ok,
            [
                "docker.io/library/busybox:1.36",
                "registry.k8s.io/pause:3.10",
                "localhost/kubernetes/pause:latest"
            ]
        );
        let e = checked(&["ok:1".into(), "Bad/Name".into()]).unwrap_err();
        assert!(e.to_string().starts_with("--image Bad/Name: "), "{e}");
        assert!(matches!(checked(&[]), Err(BakeError::NoImages)));
    }
}
