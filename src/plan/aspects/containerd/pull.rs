//! containerd's pull settings in its own config grammar, as each family takes them: on AL2023 a
//! fragment for the NodeConfig's `containerd.config`, which nodeadm deep-merges over its own
//! config (the fragment's values win). nodeadm picks its template by the tables the merged
//! `containerd.config` names, never by its `version`: version 2's CRI table gives its version-2
//! template, which it then migrates on containerd 2 (`containerd config migrate`, version 3 on
//! containerd 2.0 to 2.2 and 4 from 2.3); version 3's tables (a user's own config in user data)
//! its version-3 template, unmigrated. So the fragment names the CRI table of the version the
//! user data's config has, and carries no `version` of its own, which would override the
//! user's. On AL2 the
//! node's own template (`/etc/eks/containerd/containerd-config.toml`) with the settings set in
//! the CRI table of its version, every other line kept, passed to bootstrap.sh by
//! `--containerd-config-file`. A drop-in under `/etc/containerd/config.d` is not used: containerd
//! 1.7 replaces a plugin's whole table with an imported file's, which would drop the node's
//! sandbox image, runtimes and registry path.

use toml_edit::{value, DocumentMut, Item, Table};

/// The AL2 node's containerd template, which bootstrap.sh copies to `/etc/containerd/config.toml`
/// (substituting the sandbox image).
pub const AL2_TEMPLATE: &str = "/etc/eks/containerd/containerd-config.toml";

/// The template with the pull settings, given to bootstrap.sh (`--containerd-config-file`).
pub const AL2_CONFIG: &str = "/etc/eks-nodeinit/containerd-config.toml";

/// The AMI's own template, kept the first time the agent merges the pull settings into it: the
/// base of every later merge, and what is put back when the settings are left out.
pub const AL2_AMI_TEMPLATE: &str = "/etc/eks-nodeinit/containerd-config.ami.toml";

/// The CRI plugin's table in config version 2 (containerd 1.7, and 2 before migration).
const CRI_V2: [&str; 2] = ["plugins", "io.containerd.grpc.v1.cri"];
/// The CRI images plugin's table in config version 3 (containerd 2).
const CRI_V3: [&str; 2] = ["plugins", "io.containerd.cri.v1.images"];

/// The CRI plugin's pull settings: `None` keeps the node's value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CriPull {
    /// `max_concurrent_downloads` (containerd's default 3).
    pub max_concurrent_downloads: Option<u32>,
    /// `image_pull_progress_timeout`, a Go duration (containerd's default `5m0s`).
    pub progress_timeout: Option<String>,
}

impl CriPull {
    pub fn is_empty(&self) -> bool {
        self.max_concurrent_downloads.is_none() && self.progress_timeout.is_none()
    }

    /// The keys and values, as containerd names them.
    pub fn entries(&self) -> Vec<(&'static str, String)> {
        let mut e = Vec::new();
        if let Some(n) = self.max_concurrent_downloads {
            e.push(("max_concurrent_downloads", n.to_string()));
        }
        if let Some(t) = &self.progress_timeout {
            e.push(("image_pull_progress_timeout", format!("{t:?}")));
        }
        e
    }

    fn set_in(&self, t: &mut Table) {
        if let Some(n) = self.max_concurrent_downloads {
            t["max_concurrent_downloads"] = value(i64::from(n));
        }
        if let Some(d) = &self.progress_timeout {
            t["image_pull_progress_timeout"] = value(d.as_str());
        }
    }
}

/// The table at `path`, made (as a standard table) where missing; `None` when a key on the
/// way holds something other than a table.
fn table_at<'a>(doc: &'a mut DocumentMut, path: &[&str]) -> Option<&'a mut Table> {
    let mut t = doc.as_table_mut();
    for k in path {
        let item = t.entry(k).or_insert_with(|| {
            let mut n = Table::new();
            n.set_implicit(true);
            Item::Table(n)
        });
        t = item.as_table_mut()?;
    }
    Some(t)
}

/// The NodeConfig's `containerd.config` for these settings, in version 3's CRI images table
/// when `v3` (the user data's own config is version 3) and version 2's otherwise, without a
/// `version`; `None` when there are none.
pub fn inline_config(p: &CriPull, v3: bool) -> Option<String> {
    if p.is_empty() {
        return None;
    }
    let mut doc = DocumentMut::new();
    p.set_in(table_at(&mut doc, if v3 { &CRI_V3 } else { &CRI_V2 })?);
    Some(doc.to_string())
}

/// The node's template with the settings in the CRI table of its config version, the rest as
/// written; why not, for a template the agent cannot read as containerd would.
pub fn merged_template(template: &str, p: &CriPull) -> Result<String, String> {
    let mut doc: DocumentMut = template
        .parse()
        .map_err(|e: toml_edit::TomlError| format!("is not TOML: {}", e.message()))?;
    // Version 4 (containerd 2.3) moved only the server's settings: the CRI tables are 3's.
    let path = match doc.get("version").and_then(Item::as_integer) {
        Some(2) => CRI_V2,
        Some(3 | 4) => CRI_V3,
        Some(v) => return Err(format!("has config version {v}; the agent sets pull settings in versions 2 to 4")),
        None => return Err("has no `version`: containerd would read it as version 1, whose CRI table the agent does not write".into()),
    };
    let t = table_at(&mut doc, &path)
        .ok_or_else(|| format!("holds `{}` as something other than a table", path.join(".")))?;
    p.set_in(t);
    Ok(doc.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pull() -> CriPull {
        CriPull {
            max_concurrent_downloads: Some(8),
            progress_timeout: Some("2m".into()),
        }
    }

    #[test]
    fn the_fragment_names_the_cri_table_of_the_users_version_and_no_version() {
        assert_eq!(
            inline_config(&pull(), false).unwrap(),
            "[plugins.\"io.containerd.grpc.v1.cri\"]\nmax_concurrent_downloads = 8\nimage_pull_progress_timeout = \"2m\"\n"
        );
        assert_eq!(
            inline_config(&pull(), true).unwrap(),
            "[plugins.\"io.containerd.cri.v1.images\"]\nmax_concurrent_downloads = 8\nimage_pull_progress_timeout = \"2m\"\n"
        );
        assert_eq!(inline_config(&CriPull::default(), false), None);
    }

    #[test]
    fn the_template_keeps_every_other_line_in_either_version() {
        let v2 = "version = 2\nimports = [\"/etc/containerd/config.d/*.toml\"]\n# the node's\n[plugins.\"io.containerd.grpc.v1.cri\"]\nsandbox_image = \"SANDBOX_IMAGE\"\nmax_concurrent_downloads = 3\n\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\ndiscard_unpacked_layers = true\n";
        let out = merged_template(v2, &pull()).unwrap();
        assert_eq!(
            out,
            v2.replace(
                "max_concurrent_downloads = 3\n",
                "max_concurrent_downloads = 8\nimage_pull_progress_timeout = \"2m\"\n"
            )
        );
        let v3 = "version = 3\n[plugins.'io.containerd.cri.v1.images'.pinned_images]\nsandbox = \"SANDBOX_IMAGE\"\n";
        let out = merged_template(v3, &pull()).unwrap();
        assert_eq!(
            out,
            "version = 3\n\n[plugins.'io.containerd.cri.v1.images']\nmax_concurrent_downloads = 8\nimage_pull_progress_timeout = \"2m\"\n[plugins.'io.containerd.cri.v1.images'.pinned_images]\nsandbox = \"SANDBOX_IMAGE\"\n"
        );
        // Idempotent: the merged file merged again is unchanged (a second run plans nothing).
        assert_eq!(merged_template(&out, &pull()).unwrap(), out);
        let v4 = v3.replace("version = 3", "version = 4");
        let out = merged_template(&v4, &pull()).unwrap();
        assert!(
            out.contains("[plugins.'io.containerd.cri.v1.images']\nmax_concurrent_downloads = 8\n"),
            "{out}"
        );
    }

    #[test]
    fn a_template_the_agent_cannot_read_as_containerd_would_is_refused() {
        for (t, says) in [
            ("version = 2\n[plugins\n", "is not TOML"),
            ("[plugins]\n", "has no `version`"),
            ("version = 5\n", "version 5"),
            ("version = 2\nplugins = 1\n", "other than a table"),
        ] {
            let e = merged_template(t, &pull()).unwrap_err();
            assert!(e.contains(says), "{t}: {e}");
        }
    }
}
