//! The AL2 kubelet config file (`/etc/kubernetes/kubelet/kubelet-config.json`): add the agent's
//! keys, never replacing what the operator set unless `kubelet.overwrite` is on.
//!
//! When only keys are added, the file's own formatting is kept and the new keys are inserted
//! before the closing brace, so the diff shows exactly the added lines.

use serde_json::{Map, Value};

use crate::config::KubeletSettings;
use crate::duration;

#[derive(Debug, thiserror::Error)]
pub enum KubeletError {
    #[error("kubelet config {path} is not valid JSON: line {line}, column {column}: {message}; fix or restore the file (a pristine copy may be at {path}.orig)")]
    Parse {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("kubelet config {path} is not a JSON object")]
    NotObject { path: String },
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

/// The keys and values the agent wants in the kubelet config, in a stable order.
pub fn desired(s: &KubeletSettings) -> Vec<(&'static str, Value)> {
    let mut v = Vec::new();
    if let Some(x) = s.image_gc_high_threshold_percent {
        v.push(("imageGCHighThresholdPercent", Value::from(x)));
    }
    if let Some(x) = s.image_gc_low_threshold_percent {
        v.push(("imageGCLowThresholdPercent", Value::from(x)));
    }
    if let Some(x) = &s.shutdown_grace_period {
        v.push(("shutdownGracePeriod", Value::from(x.clone())));
    }
    if let Some(x) = &s.shutdown_grace_period_critical_pods {
        v.push(("shutdownGracePeriodCriticalPods", Value::from(x.clone())));
    }
    v
}

/// Parse the kubelet config, with the file and position on error.
pub fn parse(text: &str, path: &str) -> Result<Map<String, Value>, KubeletError> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(KubeletError::NotObject { path: path.into() }),
        Err(e) => Err(KubeletError::Parse {
            path: path.into(),
            line: e.line(),
            column: e.column(),
            message: {
                let m = e.to_string();
                m.rfind(" at line ")
                    .map(|i| m[..i].to_string())
                    .unwrap_or(m)
            },
        }),
    }
}

/// Does the file turn on `protectKernelDefaults`?
pub fn protects_kernel_defaults(m: &Map<String, Value>) -> bool {
    m.get("protectKernelDefaults") == Some(&Value::Bool(true))
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

/// Compute the new file content. `None` when nothing changes.
pub fn patch(text: &str, path: &str, s: &KubeletSettings) -> Result<Option<Patch>, KubeletError> {
    let mut doc = parse(text, path)?;
    let mut added = Vec::new();
    let mut replaced = Vec::new();
    let mut kept = Vec::new();
    for (key, wanted) in desired(s) {
        match doc.get(key) {
            None => {
                doc.insert(key.to_string(), wanted.clone());
                added.push((key, wanted));
            }
            Some(existing) if same_value(existing, &wanted) => {}
            Some(existing) if s.overwrite => {
                let _ = existing;
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
        return Ok(if kept.is_empty() {
            None
        } else {
            Some(Patch {
                new_text: text.to_string(),
                changed_keys: vec![],
                kept,
            })
        });
    }
    let expected = Value::Object(doc.clone());
    let new_text = if replaced.is_empty() {
        insert_keys(text, &added)
            .filter(|t| serde_json::from_str::<Value>(t).ok().as_ref() == Some(&expected))
            .unwrap_or_else(|| pretty(&expected))
    } else {
        pretty(&expected)
    };
    let mut changed_keys: Vec<String> = added.iter().map(|(k, _)| k.to_string()).collect();
    changed_keys.extend(replaced);
    Ok(Some(Patch {
        new_text,
        changed_keys,
        kept,
    }))
}

fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).expect("a JSON value serialises");
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
    let body = &text[..close];
    let last = body.trim_end();
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

    fn settings() -> KubeletSettings {
        KubeletSettings {
            image_gc_high_threshold_percent: Some(70),
            image_gc_low_threshold_percent: Some(50),
            shutdown_grace_period: Some("90s".into()),
            shutdown_grace_period_critical_pods: Some("30s".into()),
            ..Default::default()
        }
    }

    #[test]
    fn adds_keys_keeping_format() {
        let text = "{\n  \"a\": [1, 2],\n  \"b\": true\n}\n";
        let p = patch(text, "k.json", &settings()).unwrap().unwrap();
        assert!(p.new_text.starts_with(
            "{\n  \"a\": [1, 2],\n  \"b\": true,\n  \"imageGCHighThresholdPercent\": 70,\n"
        ));
        assert!(p
            .new_text
            .ends_with("  \"shutdownGracePeriodCriticalPods\": \"30s\"\n}\n"));
        assert_eq!(p.changed_keys.len(), 4);
        // Second run: nothing to do.
        assert_eq!(patch(&p.new_text, "k.json", &settings()).unwrap(), None);
    }

    #[test]
    fn operator_values_are_kept_unless_overwrite() {
        let text = "{\"shutdownGracePeriod\": \"2m\", \"imageGCHighThresholdPercent\": 70}";
        let p = patch(text, "k.json", &settings()).unwrap().unwrap();
        assert_eq!(p.kept.len(), 1);
        assert_eq!(p.kept[0].key, "shutdownGracePeriod");
        let v: Value = serde_json::from_str(&p.new_text).unwrap();
        assert_eq!(v["shutdownGracePeriod"], "2m");
        let mut s = settings();
        s.overwrite = true;
        let p = patch(text, "k.json", &s).unwrap().unwrap();
        let v: Value = serde_json::from_str(&p.new_text).unwrap();
        assert_eq!(v["shutdownGracePeriod"], "90s");
        assert!(p.kept.is_empty());
    }

    #[test]
    fn equal_durations_are_the_same_value() {
        let text = "{\"shutdownGracePeriod\": \"1m30s\"}";
        let s = KubeletSettings {
            shutdown_grace_period: Some("90s".into()),
            ..Default::default()
        };
        assert_eq!(patch(text, "k.json", &s).unwrap(), None);
    }

    #[test]
    fn malformed_names_file_and_line() {
        let err = patch(
            "{\n  \"a\": 1,\n  \"b\" 2\n}",
            "/x/kubelet-config.json",
            &settings(),
        )
        .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("/x/kubelet-config.json"), "{msg}");
        assert!(msg.contains("line 3"), "{msg}");
    }

    #[test]
    fn empty_object() {
        let p = patch("{}", "k.json", &settings()).unwrap().unwrap();
        let v: Value = serde_json::from_str(&p.new_text).unwrap();
        assert_eq!(v["imageGCLowThresholdPercent"], 50);
    }
}
