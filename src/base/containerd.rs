//! containerd's own grammars the agent reads: its config file's sandbox image and socket (config
//! versions 2 and 3), and an image reference as containerd names an image it stores.

use toml_edit::{DocumentMut, Item};

/// containerd's config on both families (bootstrap.sh and nodeadm write it).
pub const CONFIG: &str = "/etc/containerd/config.toml";
/// containerd's socket when the config names none.
pub const DEFAULT_SOCKET: &str = "/run/containerd/containerd.sock";
/// The label the CRI plugin reads as "pinned": the kubelet's image garbage collection skips an
/// image the CRI reports pinned.
pub const PINNED_LABEL: &str = "io.cri-containerd.pinned=pinned";

/// What the agent needs of containerd's config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runtime {
    /// The CRI plugin's sandbox (pause) image, as configured.
    pub sandbox_image: Option<String>,
    /// containerd's socket.
    pub address: String,
}

fn at<'a>(doc: &'a DocumentMut, path: &[&str]) -> Option<&'a Item> {
    let mut item = doc.as_item();
    for k in path {
        item = item.get(k)?;
    }
    Some(item)
}

/// The sandbox image and socket of a config in version 2 (`sandbox_image` in the CRI table) or
/// 3 (`pinned_images.sandbox` of the CRI images plugin); why not, for another text.
pub fn runtime(text: &str) -> Result<Runtime, String> {
    let doc: DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| format!("is not TOML: {}", e.message()))?;
    let path: &[&str] = match at(&doc, &["version"]).and_then(Item::as_integer) {
        Some(2) => &["plugins", "io.containerd.grpc.v1.cri", "sandbox_image"],
        Some(3) => &[
            "plugins",
            "io.containerd.cri.v1.images",
            "pinned_images",
            "sandbox",
        ],
        v => {
            return Err(format!(
                "has config version {}, and the agent reads versions 2 and 3",
                v.map_or("1 (none given)".into(), |v| v.to_string())
            ))
        }
    };
    let sandbox_image = at(&doc, path).and_then(Item::as_str).map(String::from);
    let address = at(&doc, &["grpc", "address"])
        .and_then(Item::as_str)
        .unwrap_or(DEFAULT_SOCKET)
        .to_string();
    Ok(Runtime {
        sandbox_image,
        address,
    })
}

/// The names containerd may store `image` under: as written, then in the normalized form the
/// CRI plugin gives a reference (a domain, `library/` for a single Docker Hub component,
/// `:latest` when neither tag nor digest is given).
pub fn stored_names(image: &str) -> Vec<String> {
    let (name, suffix) = match image.find('@') {
        Some(i) => (&image[..i], &image[i..]),
        None => (image, ""),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    let tagged = suffix.is_empty() && !last.contains(':');
    let first = name.split('/').next().unwrap_or(name);
    let has_domain =
        name.contains('/') && (first == "localhost" || first.contains('.') || first.contains(':'));
    let mut n = match (has_domain, name.contains('/')) {
        (true, _) => name.to_string(),
        (false, true) => format!("docker.io/{name}"),
        (false, false) => format!("docker.io/library/{name}"),
    };
    if tagged {
        n.push_str(":latest");
    }
    n.push_str(suffix);
    let mut out = vec![image.to_string()];
    if n != image {
        out.push(n);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sandbox_image_and_socket_of_either_version() {
        let v2 = "version = 2\n[grpc]\naddress = \"/run/c.sock\"\n[plugins.\"io.containerd.grpc.v1.cri\"]\nsandbox_image = \"602401143452.dkr.ecr.eu-west-1.amazonaws.com/eks/pause:3.5\"\n";
        let r = runtime(v2).unwrap();
        assert_eq!(
            r.sandbox_image.as_deref(),
            Some("602401143452.dkr.ecr.eu-west-1.amazonaws.com/eks/pause:3.5")
        );
        assert_eq!(r.address, "/run/c.sock");
        let v3 = "version = 3\n[plugins.'io.containerd.cri.v1.images'.pinned_images]\nsandbox = \"localhost/kubernetes/pause:latest\"\n";
        let r = runtime(v3).unwrap();
        assert_eq!(
            r.sandbox_image.as_deref(),
            Some("localhost/kubernetes/pause:latest")
        );
        assert_eq!(r.address, DEFAULT_SOCKET);
        assert_eq!(runtime("version = 3\n").unwrap().sandbox_image, None);
        for bad in ["[plugins\n", "root = \"/x\"\n", "version = 4\n"] {
            assert!(runtime(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn stored_names_add_the_normalized_form() {
        for (image, want) in [
            (
                "localhost/kubernetes/pause",
                vec![
                    "localhost/kubernetes/pause",
                    "localhost/kubernetes/pause:latest",
                ],
            ),
            (
                "localhost/kubernetes/pause:latest",
                vec!["localhost/kubernetes/pause:latest"],
            ),
            (
                "pause:3.10",
                vec!["pause:3.10", "docker.io/library/pause:3.10"],
            ),
            ("eks/pause", vec!["eks/pause", "docker.io/eks/pause:latest"]),
            (
                "registry.k8s.io/pause:3.10",
                vec!["registry.k8s.io/pause:3.10"],
            ),
            (
                "reg.example:5000/pause",
                vec!["reg.example:5000/pause", "reg.example:5000/pause:latest"],
            ),
            (
                "reg.example/pause@sha256:aa",
                vec!["reg.example/pause@sha256:aa"],
            ),
        ] {
            assert_eq!(stored_names(image), want, "{image}");
        }
    }
}
