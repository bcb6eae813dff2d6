//! The `sysctls` section: keys that cannot leave /proc/sys, values a sysctl.d file can hold,
//! normalised as the kernel prints them.

use std::collections::BTreeMap;

use crate::base::findings::Findings;
use crate::base::text::printable;
use crate::config::SysctlValue;
pub(crate) use crate::os::procsys::normalize;

/// Wanted values by key, normalised (single spaces), keys checked.
pub(crate) type SysctlSpec = BTreeMap<String, String>;

pub fn spec(sysctls: &BTreeMap<String, SysctlValue>, f: &mut Findings) -> SysctlSpec {
    let mut out = SysctlSpec::new();
    for (k, v) in sysctls {
        let field = format!("sysctls[\"{}\"]", printable(k));
        let v = v.as_string();
        let key_ok = f.check(&field, check_key(k)).is_some();
        let value_ok = f.check(&field, check_value(&v)).is_some();
        if key_ok && value_ok {
            out.insert(k.clone(), normalize(&v));
        }
    }
    out
}

/// A sysctl key: dot-separated components of `[A-Za-z0-9_-]`; never `/`, `..` or anything that
/// could leave /proc/sys.
pub fn check_key(key: &str) -> Result<(), String> {
    if key.is_empty() {
        return Err("empty sysctl key".into());
    }
    if key.contains('/') {
        return Err(format!(
            "`{}` holds `/`; write sysctl keys with dots (`fs.inotify.max_user_watches`)",
            printable(key)
        ));
    }
    if key.contains("..") || key.starts_with('.') || key.ends_with('.') {
        return Err(format!(
            "`{}` has an empty component; write sysctl keys like `fs.inotify.max_user_watches`",
            printable(key)
        ));
    }
    if !key
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
    {
        return Err(format!(
            "`{}` holds characters outside letters, digits, `_`, `-` and `.`",
            printable(key)
        ));
    }
    Ok(())
}

fn check_value(v: &str) -> Result<(), String> {
    if v.trim().is_empty() {
        return Err("empty value".into());
    }
    if v.chars().any(|c| c.is_control() && c != '\t') {
        return Err(format!(
            "value `{}` holds a control character (newline, NUL…); it would break /etc/sysctl.d",
            printable(v)
        ));
    }
    Ok(())
}
