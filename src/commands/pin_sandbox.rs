//! `eks-nodeinit pin-sandbox-image`: label containerd's sandbox (pause) image pinned, so that the
//! CRI reports it pinned and the kubelet's image garbage collection never removes it. A missing
//! pause image stops every new pod on the node ("failed to get sandbox image"), and the image
//! is not pinned when it came into the store by another road than the CRI's own pull (AL2's
//! sandbox-image.service pulls with `ctr`; an image imported into an AMI). The packaged drop-ins
//! run it after the image is there (`ExecStartPost=-`: sandbox-image.service on AL2,
//! containerd.service on AL2023); the image's name and containerd's socket are read from
//! containerd's own config, so the label always names what containerd uses.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::base::containerd::{self, PINNED_LABEL};
use crate::base::text::printable;
use crate::os::fsutil;

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

/// Label the sandbox image of `<root>/etc/containerd/config.toml` pinned with `ctr`; the name
/// labelled.
pub async fn run(root: &Path, ctr: &str) -> Result<String, PinError> {
    let path = fsutil::under(root, containerd::CONFIG);
    let text =
        fsutil::read_optional(&path)?.ok_or_else(|| PinError::NoConfig { path: path.clone() })?;
    let rt = containerd::runtime(&text).map_err(|why| PinError::Config {
        path: path.clone(),
        why,
    })?;
    let image = rt.sandbox_image.ok_or(PinError::NoSandbox { path })?;
    let names = containerd::stored_names(&image);
    let mut said = Vec::new();
    for name in &names {
        match label(ctr, &rt.address, name).await? {
            Ok(()) => return Ok(name.clone()),
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
        assert!(e.to_string().contains("versions 2 and 3"), "{e}");
        let v3 = root_with(Some("version = 3\n[plugins.'io.containerd.cri.v1.images'.pinned_images]\nsandbox = \"localhost/kubernetes/pause\"\n"));
        let e = run(v3.path(), "/nonexistent/ctr").await.unwrap_err();
        assert!(matches!(e, PinError::Spawn { .. }), "{e}");
    }
}
