//! `eks-nodeinit pin-sandbox-image`: the sandbox (pause) image present in containerd's store and
//! labelled pinned, so that the CRI reports it pinned and the kubelet's image garbage collection
//! never removes it. A missing pause image stops every new pod on the node ("failed to get
//! sandbox image"). Current AMIs keep it pinned themselves: AL2's sandbox-image.service pulls it
//! through the CRI (`crictl pull`), and containerd 1.7 labels the configured sandbox image on a
//! CRI pull; AL2023 labels its pause image when the AMI is baked. So the label is read first and
//! set only where it is missing (an image imported by another road, an older AMI), and what is
//! always worth doing is the presence check. The packaged drop-ins run it after the image is
//! there (`ExecStartPost=-`: sandbox-image.service on AL2, containerd.service on AL2023); the
//! image's name and containerd's socket are read from containerd's own config (versions 2 to
//! 4), so the label always names what containerd uses.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::base::text::printable;
use crate::os::fsutil;
use crate::plan::aspects::containerd::config::{self as containerd, PINNED_LABEL};

/// How long one `ctr` call may take.
const CTR_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum PinError {
    #[error(transparent)]
    Fs(#[from] fsutil::FsError),
    #[error("{path} is missing: containerd's config names the sandbox image; run this after bootstrap.sh or nodeadm wrote it")]
    NoConfig { path: PathBuf },
    #[error("{path} {why}; the sandbox image cannot be told")]
    Config { path: PathBuf, why: String },
    #[error("{path} names no sandbox image: containerd uses its built-in default, which this node's kubelet does not get from the AMI; set it in the config")]
    NoSandbox { path: PathBuf },
    #[error("{why}; `ctr` is containerd's client, installed with containerd")]
    Spawn { why: String },
    #[error("containerd at {address} holds no image named {names}: the sandbox image is missing, and pods will not start until it is pulled; `ctr` said: {said}")]
    Missing {
        address: String,
        names: String,
        said: String,
    },
}

/// The sandbox image of `<root>/etc/containerd/config.toml` present and pinned: labelled with
/// `ctr` only where the label is missing. Where `ctr images ls` cannot be read, each name is
/// labelled in turn, which fails for an image containerd does not hold.
pub async fn run(root: &Path, ctr: &str) -> Result<(), PinError> {
    let path = fsutil::under(root, containerd::CONFIG);
    let text =
        fsutil::read_optional(&path)?.ok_or_else(|| PinError::NoConfig { path: path.clone() })?;
    let rt = containerd::runtime(&text).map_err(|why| PinError::Config {
        path: path.clone(),
        why,
    })?;
    let image = rt.sandbox_image.ok_or(PinError::NoSandbox { path })?;
    let names = containerd::stored_names(&image);
    let (to_label, mut said) = match list(ctr, &rt.address).await? {
        Ok(listed) => match names
            .iter()
            .find_map(|n| listed.iter().find(|(name, _)| name == n))
        {
            Some((name, true)) => {
                tracing::info!(image = %printable(name), "sandbox image already pinned ({PINNED_LABEL})");
                return Ok(());
            }
            Some((name, false)) => (vec![name.clone()], Vec::new()),
            None => (
                Vec::new(),
                vec!["`images ls` lists none of them".to_string()],
            ),
        },
        Err(e) => (names.clone(), vec![e]),
    };
    for name in &to_label {
        match label(ctr, &rt.address, name).await? {
            Ok(()) => return Ok(()),
            Err(e) => said.push(e),
        }
    }
    Err(PinError::Missing {
        address: printable(&rt.address),
        names: names
            .iter()
            .map(|n| printable(n))
            .collect::<Vec<_>>()
            .join(" or "),
        said: said.join("; "),
    })
}

/// The images in the CRI's namespace, each with whether it carries the pinned label, from
/// `ctr images ls`; `Ok(Err(what ctr said))` when it refused.
async fn list(ctr: &str, address: &str) -> Result<Result<Vec<(String, bool)>, String>, PinError> {
    let out = crate::os::ctr::run(ctr, address, &["images", "ls"], CTR_TIMEOUT)
        .await
        .map_err(|why| PinError::Spawn { why })?;
    if !out.status.success() {
        return Ok(Err(crate::os::ctr::said(&out)));
    }
    Ok(Ok(images(&String::from_utf8_lossy(&out.stdout))))
}

/// `ctr images ls`'s table (`REF TYPE DIGEST SIZE PLATFORMS LABELS`, padded with spaces; the
/// labels `k=v` joined by commas, or `-`): each name, and whether the pinned label is among its
/// labels.
fn images(table: &str) -> Vec<(String, bool)> {
    table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let name = words.next()?;
            let labels = words.last()?;
            Some((
                name.to_string(),
                labels.split(',').any(|x| x == PINNED_LABEL),
            ))
        })
        .collect()
}

/// One `ctr images label`: `Ok(Err(what ctr said))` when it refused.
async fn label(ctr: &str, address: &str, name: &str) -> Result<Result<(), String>, PinError> {
    let args = ["images", "label", name, PINNED_LABEL];
    let out = crate::os::ctr::run(ctr, address, &args, CTR_TIMEOUT)
        .await
        .map_err(|why| PinError::Spawn { why })?;
    if out.status.success() {
        tracing::info!(image = %printable(name), "sandbox image pinned ({PINNED_LABEL})");
        return Ok(Ok(()));
    }
    Ok(Err(crate::os::ctr::said(&out)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root_with(config: Option<&str>) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        if let Some(c) = config {
            std::fs::create_dir_all(d.path().join("etc/containerd")).unwrap();
            std::fs::write(d.path().join("etc/containerd/config.toml"), c).unwrap();
        }
        d
    }

    #[tokio::test]
    async fn a_config_that_names_no_image_is_an_error_before_ctr_runs() {
        let none = root_with(None);
        let e = run(none.path(), "/nonexistent/ctr").await.unwrap_err();
        assert!(matches!(e, PinError::NoConfig { .. }), "{e}");
        let bare = root_with(Some("version = 3\n"));
        let e = run(bare.path(), "/nonexistent/ctr").await.unwrap_err();
        assert!(matches!(e, PinError::NoSandbox { .. }), "{e}");
        let v1 = root_with(Some("[plugins]\n"));
        let e = run(v1.path(), "/nonexistent/ctr").await.unwrap_err();
        assert!(e.to_string().contains("versions 2 to 4"), "{e}");
        let v3 = root_with(Some("version = 3\n[plugins.'io.containerd.cri.v1.images'.pinned_images]\nsandbox = \"localhost/kubernetes/pause\"\n"));
        let e = run(v3.path(), "/nonexistent/ctr").await.unwrap_err();
        assert!(matches!(e, PinError::Spawn { .. }), "{e}");
    }

    #[test]
    fn the_pinned_label_is_read_from_ctrs_table() {
        let table = "REF                                   TYPE                                    DIGEST      SIZE    PLATFORMS   LABELS\nlocalhost/kubernetes/pause:latest     application/vnd.oci.image.index.v1+json sha256:aa   311.0 KiB linux/amd64,linux/arm64 io.cri-containerd.image=managed,io.cri-containerd.pinned=pinned\nregistry.example/app:1  application/vnd.oci.image.manifest.v1+json sha256:bb 1.0 MiB linux/amd64 -\nregistry.example/b:1 x sha256:cc 1 KiB linux/amd64 io.cri-containerd.pinned=no\n";
        assert_eq!(
            images(table),
            [
                ("localhost/kubernetes/pause:latest".to_string(), true),
                ("registry.example/app:1".to_string(), false),
                ("registry.example/b:1".to_string(), false),
            ]
        );
        assert!(images("REF TYPE DIGEST SIZE PLATFORMS LABELS\n").is_empty());
    }
}
