//! The `localStorage` section checked: a mount path nodeadm can take.

use crate::base::findings::Findings;
use crate::base::text::printable;
use crate::config::LocalStorageSettings;

pub(crate) fn spec(
    c: Option<&LocalStorageSettings>,
    f: &mut Findings,
) -> Option<LocalStorageSettings> {
    let c = c?;
    if let Some(path) = &c.mount_path {
        if let Err(why) = check_path(path) {
            let shown = printable(path);
            let msg = format!("`{shown}` {why}: give a directory such as /mnt/k8s-disks");
            f.push("localStorage.mountPath", msg);
            return None;
        }
    }
    Some(c.clone())
}

fn check_path(path: &str) -> Result<(), &'static str> {
    if !path.starts_with('/') || path == "/" {
        return Err("is not an absolute path below `/`");
    }
    if path.chars().any(|ch| ch.is_whitespace() || ch.is_control()) {
        return Err(
            "holds a space or a control character, which nodeadm's mount units cannot take",
        );
    }
    if path.split('/').any(|p| p == ".." || p == ".") {
        return Err("holds `.` or `..`");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LocalStorageStrategy;

    #[test]
    fn a_mount_path_nodeadm_cannot_take_is_named() {
        let with = |p: Option<&str>| LocalStorageSettings {
            strategy: LocalStorageStrategy::Raid0,
            mount_path: p.map(String::from),
            disabled_mounts: vec![],
        };
        for ok in [None, Some("/mnt/k8s-disks"), Some("/data/nvme")] {
            let mut f = Findings::default();
            assert!(
                spec(Some(&with(ok)), &mut f).is_some() && f.is_empty(),
                "{ok:?}"
            );
        }
        for bad in ["mnt", "/", "/a b", "/a/../b"] {
            let mut f = Findings::default();
            assert!(spec(Some(&with(Some(bad))), &mut f).is_none(), "{bad}");
            assert!(
                f.0[0].to_string().starts_with("localStorage.mountPath: `"),
                "{bad}"
            );
        }
    }
}
