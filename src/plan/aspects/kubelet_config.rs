//! The AL2 kubelet config file (`/etc/kubernetes/kubelet/kubelet-config.json`): add the agent's
//! keys (image GC thresholds, shutdown grace periods), never replacing what the operator set
//! unless `kubelet.overwrite` is on, with a one-time `.orig` backup. On AL2023 nodeadm writes
//! this file from the NodeConfig, so this aspect plans nothing there.
//!
//! When only keys are added, the file's own formatting is kept and the new keys are inserted
//! before the closing brace, so the diff shows exactly the added lines.

use serde_json::{Map, Value};

use crate::base::bootstrap_sh::{AL2_FLAG_KEYS, AL2_REWRITTEN};
use crate::base::duration;
use crate::facts::Family;
use crate::plan::kubelet::file::config_file;
use crate::plan::kubelet::merged_over;
use crate::plan::step::Step;
use crate::spec::Spec;

use super::{Aspect, Input, Out, Reads};
use crate::facts::Read;

pub(crate) const ASPECT: Aspect = Aspect {
    name: "kubelet-config",
    reads,
    plan,
    contribute: super::Contribution::Nothing,
};

fn reads(spec: &Spec, family: Option<Family>, r: &mut Reads) {
    if family == Some(Family::Al2) {
        r.file(spec.kubelet.config_path.clone());
        r.ask(Read::Exists(spec.kubelet.backup_path()));
    }
}

fn plan(i: &Input, out: &mut Out) {
    let (spec, facts) = (i.spec, i.facts);
    if facts.family() != Some(Family::Al2) {
        return;
    }
    let k = &spec.kubelet;
    // bootstrap.sh rewrites some keys on every run: those go to the kubelet as flags instead.
    let (mut config, _) = i.handoff.kubelet.split_as_flags(&AL2_FLAG_KEYS);
    let file = match config_file(spec, facts) {
        Ok(Some(f)) => f,
        Ok(None) => {
            if !config.is_empty() || !i.handoff.kubelet.passed.is_empty() {
                let shown = crate::os::fsutil::under(&facts.root, &k.config_path);
                out.findings.push("kubelet.configPath", format!(
                    "{} does not exist; on Amazon Linux 2 the EKS AMI ships it: check kubelet.configPath",
                    shown.display()
                ));
            }
            return;
        }
        Err(e) => return out.findings.push("kubelet.configPath", e),
    };
    let (text, doc) = (&file.text, &file.doc);
    // The config's own keys replace the file's (a mapping merged into it key by key, as the
    // kubelet merges a config over another), but for what bootstrap.sh rewrites: flags.
    let passed = i.handoff.kubelet.passed.iter();
    let passed: Vec<&'static str> = passed
        .filter(|(key, _)| !AL2_REWRITTEN.iter().any(|(r, _)| r == key))
        .map(|(key, v)| {
            config.push((key, merged_over(doc.get(*key), v)));
            *key
        })
        .collect();
    let p = patch(text, doc.clone(), &config, (k.overwrite, &passed));
    for kept in &p.kept {
        out.warnings.push(format!(
            "kubelet config keeps the operator's {} = {} (the config asks for {}); set kubelet.overwrite to replace it",
            kept.key, kept.existing, kept.wanted
        ));
    }
    if p.changed_keys.is_empty() {
        return;
    }
    let backup = k.backup_path();
    let backup = (!facts.exists(&backup)).then_some(backup);
    out.steps.push(Step::File(crate::plan::step::File {
        purpose: format!("kubelet config: set {}", p.changed_keys.join(", ")),
        path: k.config_path.clone(),
        old: Some(text.clone()),
        new: p.new_text,
        mode: file.mode.unwrap_or(0o644),
        backup,
    }));
}

/// A key the operator already set to another value, kept as is.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Kept {
    pub key: String,
    pub existing: Value,
    pub wanted: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Patch {
    pub new_text: String,
    pub changed_keys: Vec<String>,
    pub kept: Vec<Kept>,
}

fn same_value(a: &Value, b: &Value) -> bool {
    if a == b {
        return true;
    }
    match (a, b) {
        (Value::String(x), Value::String(y)) => match (duration::parse(x), duration::parse(y)) {
            (Ok(x), Ok(y)) => x == y,
            _ => false,
        },
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => false,
    }
}

/// The new file content for the parsed document `doc` of `text`. `changed_keys` is empty when
/// nothing changes.
/// Patch the file's `text` (parsed: `doc`) to hold the `wanted` keys; an operator's other value
/// is kept unless `overwrite`, or the key is one of `forced` (the config's own `kubelet.config`).
pub fn patch(
    text: &str,
    mut doc: Map<String, Value>,
    wanted: &[(&'static str, Value)],
    (overwrite, forced): (bool, &[&str]),
) -> Patch {
    let mut added = Vec::new();
    let mut replaced = Vec::new();
    let mut kept = Vec::new();
    for (key, wanted) in wanted.iter().cloned() {
        match doc.get(key) {
            None => {
                doc.insert(key.to_string(), wanted.clone());
                added.push((key, wanted));
            }
            Some(existing) if same_value(existing, &wanted) => {}
            Some(_) if overwrite || forced.contains(&key) => {
                doc.insert(key.to_string(), wanted);
                replaced.push(key.to_string());
            }
            Some(existing) => kept.push(Kept {
                key: key.to_string(),
                existing: existing.clone(),
                wanted,
            }),
        }
    }
    if added.is_empty() && replaced.is_empty() {
        return Patch {
            new_text: text.to_string(),
            changed_keys: vec![],
            kept,
        };
    }
    let expected = Value::Object(doc);
    let new_text = if replaced.is_empty() {
        insert_keys(text, &added)
            .filter(|t| serde_json::from_str::<Value>(t).ok().as_ref() == Some(&expected))
            .unwrap_or_else(|| pretty(&expected))
    } else {
        pretty(&expected)
    };
    let mut changed_keys: Vec<String> = added.iter().map(|(k, _)| k.to_string()).collect();
    changed_keys.extend(replaced);
    Patch {
        new_text,
        changed_keys,
        kept,
    }
}

fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    s.push('\n');
    s
}

/// Insert `"key": value` members before the top-level closing brace, matching the file's
/// indentation. `None` when the text does not have the expected shape.
fn insert_keys(text: &str, added: &[(&str, Value)]) -> Option<String> {
    let close = text.rfind('}')?;
    if !text[close + 1..].trim().is_empty() {
        return None;
    }
    let last = text[..close].trim_end();
    let empty_object = last.ends_with('{');
    let indent = text
        .lines()
        .skip(1)
        .find(|l| l.trim_start().starts_with('"'))
        .map(|l| &l[..l.len() - l.trim_start().len()])
        .unwrap_or("  ");
    let mut out = String::with_capacity(text.len() + 128);
    out.push_str(last);
    for (i, (k, v)) in added.iter().enumerate() {
        if i > 0 || !empty_object {
            out.push(',');
        }
        out.push('\n');
        out.push_str(indent);
        out.push_str(&serde_json::to_string(k).ok()?);
        out.push_str(": ");
        out.push_str(&serde_json::to_string(v).ok()?);
    }
    out.push('\n');
    out.push_str(&text[close..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys the agent wants, and whether it overwrites an operator's value.
    struct Settings {
        wanted: Vec<(&'static str, Value)>,
        overwrite: bool,
    }

    fn settings() -> Settings {
        Settings {
            wanted: vec![
                ("imageGCHighThresholdPercent", 70.into()),
                ("imageGCLowThresholdPercent", 50.into()),
                ("shutdownGracePeriod", "90s".into()),
                ("shutdownGracePeriodCriticalPods", "30s".into()),
            ],
            overwrite: false,
        }
    }

    fn patched(text: &str, s: &Settings) -> Patch {
        patch(
            text,
            crate::plan::kubelet::file::parse(text, std::path::Path::new("k.json")).unwrap(),
            &s.wanted,
            (s.overwrite, &[]),
        )
    }

    #[test]
    fn adds_keys_keeping_format() {
        let text = "{\n  \"a\": [1, 2],\n  \"b\": true\n}\n";
        let p = patched(text, &settings());
        assert!(p.new_text.starts_with(
            "{\n  \"a\": [1, 2],\n  \"b\": true,\n  \"imageGCHighThresholdPercent\": 70,\n"
        ));
        assert!(p
            .new_text
            .ends_with("  \"shutdownGracePeriodCriticalPods\": \"30s\"\n}\n"));
        assert_eq!(p.changed_keys.len(), 4);
        // Second run: nothing to do.
        assert!(patched(&p.new_text, &settings()).changed_keys.is_empty());
    }

    #[test]
    fn operator_values_are_kept_unless_overwrite() {
        let text = "{\"shutdownGracePeriod\": \"2m\", \"imageGCHighThresholdPercent\": 70}";
        let p = patched(text, &settings());
        assert_eq!(p.kept.len(), 1);
        assert_eq!(p.kept[0].key, "shutdownGracePeriod");
        let v: Value = serde_json::from_str(&p.new_text).unwrap();
        assert_eq!(v["shutdownGracePeriod"], "2m");
        let mut s = settings();
        s.overwrite = true;
        let p = patched(text, &s);
        let v: Value = serde_json::from_str(&p.new_text).unwrap();
        assert_eq!(v["shutdownGracePeriod"], "90s");
        assert!(p.kept.is_empty());
    }

    #[test]
    fn equal_durations_are_the_same_value() {
        let s = Settings {
            wanted: vec![("shutdownGracePeriod", "90s".into())],
            overwrite: false,
        };
        assert!(patched("{\"shutdownGracePeriod\": \"1m30s\"}", &s)
            .changed_keys
            .is_empty());
    }

    #[test]
    fn malformed_names_file_and_line() {
        let err = crate::plan::kubelet::file::parse(
            "{\n  \"a\": 1,\n  \"b\" 2\n}",
            std::path::Path::new("/x/kubelet-config.json"),
        )
        .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("/x/kubelet-config.json"), "{msg}");
        assert!(msg.contains("line 3"), "{msg}");
    }

    #[test]
    fn empty_object() {
        let p = patched("{}", &settings());
        let v: Value = serde_json::from_str(&p.new_text).unwrap();
        assert_eq!(v["imageGCLowThresholdPercent"], 50);
    }
}
