//! The `kernel` section checked: module names as the kernel and `modprobe` take them.

use crate::base::findings::Findings;
use crate::base::text::printable;
use crate::config::KernelSettings;

/// The kernel's MODULE_NAME_LEN (64 − sizeof(unsigned long)) less its NUL.
const MAX_NAME: usize = 55;

/// The modules to load, checked, in config order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelSpec {
    pub modules: Vec<String>,
}

/// A module's name as the kernel keeps it: `modprobe` takes `-` and `_` alike.
pub fn normalized(name: &str) -> String {
    name.replace('-', "_")
}

pub(crate) fn spec(c: Option<&KernelSettings>, f: &mut Findings) -> Option<KernelSpec> {
    let c = c?;
    let before = f.0.len();
    let mut seen = std::collections::BTreeSet::new();
    for (i, m) in c.modules.iter().enumerate() {
        let field = format!("kernel.modules[{i}]");
        if f.check(&field, check_name(m)).is_some() && !seen.insert(normalized(m)) {
            f.push(field, format!("`{}` is listed twice", printable(m)));
        }
    }
    if c.modules.is_empty() {
        f.push(
            "kernel.modules",
            "name at least one module, or leave `kernel` out",
        );
    }
    (f.0.len() == before).then(|| KernelSpec {
        modules: c.modules.clone(),
    })
}

fn check_name(m: &str) -> Result<(), String> {
    let shown = printable(m);
    if m.is_empty() || m.len() > MAX_NAME {
        return Err(format!(
            "`{shown}` is not a module name: 1 to {MAX_NAME} characters"
        ));
    }
    if m.starts_with('-') {
        return Err(format!(
            "`{shown}` starts with `-`, which modprobe reads as an option"
        ));
    }
    if let Some(c) = m
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return Err(format!(
            "`{shown}` holds `{}`: a module name is letters, digits, `_` and `-` (no path, no `.ko`, no options)",
            printable(&c.to_string())
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn findings(modules: &[&str]) -> Vec<String> {
        let mut f = Findings::default();
        let c = KernelSettings {
            modules: modules.iter().map(|m| m.to_string()).collect(),
        };
        spec(Some(&c), &mut f);
        f.0.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn names_modprobe_takes_pass_and_others_are_named() {
        assert!(findings(&["br_netfilter", "nvme-tcp", "ip_vs_rr"]).is_empty());
        let bad = findings(&[
            "-r",
            "a/b",
            "x.ko",
            "",
            &"m".repeat(56),
            "br-netfilter",
            "br_netfilter",
        ]);
        assert_eq!(bad.len(), 6, "{bad:?}");
        assert!(
            bad[0].starts_with("kernel.modules[0]: `-r` starts with `-`"),
            "{bad:?}"
        );
        assert!(bad[1].contains("holds `/`"), "{bad:?}");
        assert!(bad[5].contains("listed twice"), "{bad:?}");
        assert_eq!(
            findings(&[]),
            ["kernel.modules: name at least one module, or leave `kernel` out"]
        );
    }
}
