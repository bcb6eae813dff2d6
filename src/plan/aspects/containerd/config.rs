//! containerd's own grammars the agent reads: its config file's sandbox image and socket (config
//! versions 2 to 4), and an image reference as containerd names an image it stores.

use toml_edit::{DocumentMut, Item};

/// containerd's config on both families (bootstrap.sh and nodeadm write it).
pub const CONFIG: &str = "/etc/containerd/config.toml";
/// containerd's socket when the config names none.
pub const DEFAULT_SOCKET: &str = "/run/containerd/containerd.sock";
/// The label the CRI plugin reads as "pinned": the kubelet's image garbage collection skips an
/// image the CRI reports pinned.
pub const PINNED_LABEL: &str = "io.cri-containerd.pinned=pinned";

/// containerd's state directory when the config names none.
pub const DEFAULT_ROOT: &str = "/var/lib/containerd";
/// The content store's blobs under containerd's root: one file per digest, named by its hex.
pub const BLOBS: &str = "io.containerd.content.v1.content/blobs/sha256";

/// The content store's sha256 blobs under containerd's default root, as a node path.
pub fn default_blobs() -> String {
    format!("{DEFAULT_ROOT}/{BLOBS}")
}

/// What the agent needs of containerd's config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runtime {
    /// The CRI plugin's sandbox (pause) image, as configured.
    pub sandbox_image: Option<String>,
    /// containerd's socket.
    pub address: String,
    /// containerd's state directory (`root`).
    pub root: String,
}

impl Default for Runtime {
    fn default() -> Self {
        Runtime {
            sandbox_image: None,
            address: DEFAULT_SOCKET.into(),
            root: DEFAULT_ROOT.into(),
        }
    }
}

fn at<'a>(doc: &'a DocumentMut, path: &[&str]) -> Option<&'a Item> {
    let mut item = doc.as_item();
    for k in path {
        item = item.get(k)?;
    }
    Some(item)
}

/// The table containerd 2.3 reads its socket from in version 4 (and in earlier versions when
/// the file has it: the legacy `[grpc]` is then ignored).
const GRPC_PLUGIN: [&str; 2] = ["plugins", "io.containerd.server.v1.grpc"];

/// The sandbox image and socket of a config in version 2 (`sandbox_image` in the CRI table),
/// 3 or 4 (`pinned_images.sandbox` of the CRI images plugin; version 4, containerd 2.3's,
/// moves the socket from `[grpc]` into the gRPC server plugin's table); why not, for another
/// text or version.
pub fn runtime(text: &str) -> Result<Runtime, String> {
    let doc: DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| format!("is not TOML: {}", e.message()))?;
    let version = at(&doc, &["version"]).and_then(Item::as_integer);
    let path: &[&str] = match version {
        Some(2) => &["plugins", "io.containerd.grpc.v1.cri", "sandbox_image"],
        Some(3 | 4) => &[
            "plugins",
            "io.containerd.cri.v1.images",
            "pinned_images",
            "sandbox",
        ],
        v => {
            return Err(format!(
                "has config version {}, and the agent reads versions 2 to 4",
                v.map_or("1 (none given)".into(), |v| v.to_string())
            ))
        }
    };
    let sandbox_image = at(&doc, path).and_then(Item::as_str).map(String::from);
    let text_at = |path: &[&str], default: &str| {
        at(&doc, path)
            .and_then(Item::as_str)
            .unwrap_or(default)
            .to_string()
    };
    let address = if version == Some(4) || at(&doc, &GRPC_PLUGIN).is_some() {
        text_at(&[GRPC_PLUGIN[0], GRPC_PLUGIN[1], "address"], DEFAULT_SOCKET)
    } else {
        text_at(&["grpc", "address"], DEFAULT_SOCKET)
    };
    Ok(Runtime {
        sandbox_image,
        address,
        root: text_at(&["root"], DEFAULT_ROOT),
    })
}

/// `image` in the normalized form the CRI plugin gives a reference: a domain, `library/` for a
/// single Docker Hub component, `:latest` when neither tag nor digest is given.
pub fn normalized(image: &str) -> String {
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
    n
}

/// The names containerd may store `image` under: as written, then [`normalized`].
pub fn stored_names(image: &str) -> Vec<String> {
    let n = normalized(image);
    let mut out = vec![image.to_string()];
    if n != image {
        out.push(n);
    }
    out
}

/// Whether a content store whose sha256 blobs are `names` (sorted, [`BLOBS`]) holds `digest`;
/// `None` when `digest` is not a sha256 digest, which that listing cannot answer.
pub fn in_blobs(names: &[String], digest: &str) -> Option<bool> {
    let hex = digest
        .strip_prefix("sha256:")
        .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))?;
    Some(names.binary_search_by(|n| n.as_str().cmp(hex)).is_ok())
}

/// The images baked into an AMI's containerd store, as `eks-nodeinit bake-images` recorded them:
/// what the plan checks at every boot.
pub const IMAGE_CACHE: &str = "/etc/eks-nodeinit/image-cache.json";

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImageCache {
    /// containerd's state directory at bake time.
    pub containerd_root: String,
    pub images: Vec<CachedImage>,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CachedImage {
    /// The reference as the CRI names it (normalized).
    pub image: String,
    /// The digest of what the reference named when baked (an index or a manifest).
    pub digest: String,
}

/// The content of the regular file `member` in a tar archive (ustar or GNU headers, as
/// `ctr images export` writes them); `None` when the archive holds no such file or is cut short.
pub fn tar_member(archive: &[u8], member: &str) -> Option<Vec<u8>> {
    let mut at = 0usize;
    while at.checked_add(512)? <= archive.len() {
        let h = &archive[at..at + 512];
        if h.iter().all(|&b| b == 0) {
            return None;
        }
        let field = |r: std::ops::Range<usize>| {
            let f = &h[r];
            let end = f.iter().position(|&b| b == 0).unwrap_or(f.len());
            String::from_utf8_lossy(&f[..end]).into_owned()
        };
        let size = usize::from_str_radix(field(124..136).trim(), 8).ok()?;
        let (prefix, name) = (field(345..500), field(0..100));
        let path = if h[257..262] == *b"ustar" && !prefix.is_empty() {
            format!("{prefix}/{name}")
        } else {
            name
        };
        let body = at + 512;
        let end = body.checked_add(size)?;
        if matches!(h[156], b'0' | 0) && path.trim_start_matches("./") == member {
            return archive.get(body..end).map(<[u8]>::to_vec);
        }
        at = body.checked_add(size.div_ceil(512).checked_mul(512)?)?;
    }
    None
}

/// Whether `r` is an image reference containerd's grammar takes (`distribution/reference`:
/// `[domain/]path[:tag][@algorithm:hex]`, lower-case path components joined by `.`, `_`, `__`
/// or dashes, a tag of at most 128 word characters, dots and dashes, a digest of at least 32
/// hex digits, a path of at most 255 characters); why not.
pub fn check_reference(r: &str) -> Result<(), String> {
    let (rest, digest) = match r.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (r, None),
    };
    if let Some(d) = digest {
        let (alg, hex) = d.split_once(':').ok_or("its digest has no `algorithm:`")?;
        let alg_ok = alg.starts_with(|c: char| c.is_ascii_alphabetic())
            && alg
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_+.".contains(c));
        if !alg_ok || hex.len() < 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err("its digest is not `algorithm:hex` with at least 32 hex digits".into());
        }
    }
    let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match rest[last_slash..].rfind(':') {
        Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
        None => (rest, None),
    };
    if let Some(tag) = tag {
        let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
        let ok = tag.len() <= 128
            && tag.starts_with(word)
            && tag.chars().all(|c| word(c) || c == '.' || c == '-');
        if !ok {
            return Err(format!("its tag `{tag}` is not 1 to 128 letters, digits, `_`, `.` or `-`, starting with a letter, digit or `_`"));
        }
    }
    let mut parts: Vec<&str> = name.split('/').collect();
    let first = parts[0];
    if parts.len() > 1
        && (first == "localhost"
            || first.contains(['.', ':'])
            || first.chars().any(|c| c.is_ascii_uppercase()))
    {
        check_domain(first)?;
        parts.remove(0);
    }
    let path = parts.join("/");
    if path.is_empty() || path.len() > 255 {
        return Err("its repository path is empty or longer than 255 characters".into());
    }
    match parts.iter().find(|p| !path_component(p)) {
        Some(p) => Err(format!("`{p}` is not a repository path component: lower-case letters and digits, joined by `.`, `_`, `__` or dashes")),
        None => Ok(()),
    }
}

fn path_component(p: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let b = p.as_bytes();
    if b.is_empty() || !alnum(b[0] as char) || !alnum(b[b.len() - 1] as char) {
        return false;
    }
    // Separators: one `.` or `_`, `__`, or any number of `-`, each between alphanumerics.
    let mut i = 0;
    while i < b.len() {
        let c = b[i] as char;
        if alnum(c) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && !alnum(b[i] as char) {
            i += 1;
        }
        let sep = &p[start..i];
        if !(sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|x| x == b'-')) {
            return false;
        }
    }
    true
}

fn check_domain(d: &str) -> Result<(), String> {
    let (host, port) = match d.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || d.starts_with('[') => (h, Some(p)),
        _ => (d, None),
    };
    if let Some(p) = port {
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!(
                "its registry `{d}` has a port that is not a number"
            ));
        }
    }
    let label = |l: &str| {
        !l.is_empty()
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    let ipv6 = host.starts_with('[')
        && host.ends_with(']')
        && host.len() > 2
        && host[1..host.len() - 1]
            .chars()
            .all(|c| c.is_ascii_hexdigit() || c == ':');
    if ipv6 || host.split('.').all(label) {
        Ok(())
    } else {
        Err(format!("its registry `{d}` is not a host name"))
    }
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
        assert_eq!(
            (r.address.as_str(), r.root.as_str()),
            (DEFAULT_SOCKET, DEFAULT_ROOT)
        );
        assert_eq!(runtime("version = 3\n").unwrap().sandbox_image, None);
        // containerd 2.3's `config migrate`: version 4, the socket in the gRPC plugin's table,
        // a legacy `[grpc]` no longer read.
        let v4 = "version = 4\nroot = \"/data/containerd\"\n[grpc]\naddress = \"/old.sock\"\n[plugins.'io.containerd.cri.v1.images'.pinned_images]\nsandbox = \"localhost/kubernetes/pause:latest\"\n[plugins.'io.containerd.server.v1.grpc']\naddress = \"/run/c4.sock\"\n";
        let r = runtime(v4).unwrap();
        assert_eq!(
            (
                r.sandbox_image.as_deref(),
                r.address.as_str(),
                r.root.as_str()
            ),
            (
                Some("localhost/kubernetes/pause:latest"),
                "/run/c4.sock",
                "/data/containerd"
            )
        );
        let legacy_only = "version = 4\n[grpc]\naddress = \"/old.sock\"\n";
        assert_eq!(runtime(legacy_only).unwrap().address, DEFAULT_SOCKET);
        // In version 3, containerd 2.3 takes the plugin's table over `[grpc]` when both are set.
        let both = "version = 3\n[grpc]\naddress = \"/old.sock\"\n[plugins.'io.containerd.server.v1.grpc']\naddress = \"/new.sock\"\n";
        assert_eq!(runtime(both).unwrap().address, "/new.sock");
        for bad in ["[plugins\n", "root = \"/x\"\n", "version = 5\n"] {
            assert!(runtime(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn references_as_containerd_takes_them() {
        for ok in [
            "registry.k8s.io/pause:3.10",
            "localhost/kubernetes/pause:latest",
            "public.ecr.aws/eks-distro/kubernetes/pause:3.10",
            "602401143452.dkr.ecr.eu-west-1.amazonaws.com/eks/pause:3.5",
            "127.0.0.1:5000/suite/img__x.y-z:v1.0_rc-1",
            "busybox",
            "[::1]:5000/a/b",
            "a/b@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ] {
            assert_eq!(check_reference(ok), Ok(()), "{ok}");
        }
        for (bad, says) in [
            (
                "Registry.example/Pause:1",
                "`Pause` is not a repository path component",
            ),
            ("nginx:", "tag ``"),
            ("nginx:-x", "tag `-x`"),
            ("a/b@sha256:abc", "digest"),
            ("a//b", "`` is not"),
            ("a/b-", "`b-` is not"),
            ("reg.example:port/x", "port that is not a number"),
            ("", "empty"),
        ] {
            let e = check_reference(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        let long = format!("x:{}", "t".repeat(129));
        assert!(check_reference(&long).is_err());
    }

    /// A ustar header for `name` of `size` bytes, its checksum left blank (not read).
    fn header(name: &str, size: usize) -> Vec<u8> {
        let mut h = vec![0u8; 512];
        h[..name.len()].copy_from_slice(name.as_bytes());
        let s = format!("{size:011o}");
        h[124..135].copy_from_slice(s.as_bytes());
        h[156] = b'0';
        h[257..262].copy_from_slice(b"ustar");
        h
    }

    #[test]
    fn a_member_of_a_tar_archive() {
        let mut a = Vec::new();
        for (name, body) in [
            ("oci-layout", &b"{}"[..]),
            ("index.json", &b"{\"manifests\": []}"[..]),
        ] {
            a.extend(header(name, body.len()));
            a.extend(body);
            a.resize(a.len().div_ceil(512) * 512, 0);
        }
        a.extend([0u8; 1024]);
        assert_eq!(
            tar_member(&a, "index.json").as_deref(),
            Some(&b"{\"manifests\": []}"[..])
        );
        assert_eq!(tar_member(&a, "manifest.json"), None);
        assert_eq!(tar_member(&a[..700], "index.json"), None, "cut short");
        assert_eq!(tar_member(b"not a tar", "index.json"), None);
    }

    #[test]
    fn a_digest_is_looked_up_among_the_sha256_blobs_only() {
        let hex = "a".repeat(64);
        let names = vec!["0".repeat(64), hex.clone()];
        assert_eq!(in_blobs(&names, &format!("sha256:{hex}")), Some(true));
        assert_eq!(
            in_blobs(&names, &format!("sha256:{}", "b".repeat(64))),
            Some(false)
        );
        assert_eq!(
            in_blobs(&names, &format!("sha512:{}", "a".repeat(128))),
            None
        );
        assert_eq!(in_blobs(&names, "sha256:abc"), None);
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
