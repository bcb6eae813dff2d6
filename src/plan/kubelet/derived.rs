//! The kubelet values the agent derives (max pods from the instance type, the reservations the
//! CPU and memory managers need), each with the formula or config field it came from. A
//! contributor records its own with [`KubeletIntent::derive`](super::KubeletIntent::derive);
//! the plan shows the list as it is, grouped by section, so a new derived value costs its
//! contributor's file only, never a field here or in the plan.

use std::fmt::Write as _;

use serde_json::{Map, Value};

/// Where the plan shows a derived value: a heading for the text plan, a key for the JSON plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Section {
    /// As the text plan heads it (`pod capacity`).
    pub title: &'static str,
    /// As the JSON plan names it (`podCapacity`).
    pub key: &'static str,
}

/// One KubeletConfiguration value the agent derived, and how it was reached.
#[derive(Debug, Clone, PartialEq)]
pub struct Derived {
    pub section: Section,
    /// The KubeletConfiguration key it sets (`maxPods`).
    pub key: &'static str,
    pub value: Value,
    /// The arithmetic, or the config field that gave it, as the dry run prints it.
    pub from: String,
}

impl Derived {
    pub fn new(section: Section, key: &'static str, value: Value, from: String) -> Derived {
        Derived {
            section,
            key,
            value,
            from,
        }
    }
}

/// The sections in the order their first value was derived (the contributors' order), each
/// with its values in the order they were derived.
fn grouped(derived: &[Derived]) -> Vec<(Section, Vec<&Derived>)> {
    let mut out: Vec<(Section, Vec<&Derived>)> = Vec::new();
    for d in derived {
        match out.iter_mut().find(|(s, _)| *s == d.section) {
            Some((_, ds)) => ds.push(d),
            None => out.push((d.section, vec![d])),
        }
    }
    out
}

/// The text plan's lines: each section's heading, then `key value: from` for each value.
pub(crate) fn render_text(o: &mut String, derived: &[Derived]) {
    for (section, values) in grouped(derived) {
        let _ = writeln!(o, "{}:", section.title);
        for d in values {
            let _ = writeln!(o, "  {} {}: {}", d.key, value_text(&d.value), d.from);
        }
    }
}

/// The JSON plan's `derived`: `{section: {key: {"value", "from"}}}`.
pub(crate) fn to_json(derived: &[Derived]) -> Value {
    let sections = grouped(derived).into_iter().map(|(section, values)| {
        let values: Map<String, Value> = values
            .into_iter()
            .map(|d| {
                let v = serde_json::json!({"value": d.value, "from": d.from});
                (d.key.to_string(), v)
            })
            .collect();
        (section.key.to_string(), Value::Object(values))
    });
    Value::Object(sections.collect())
}

/// [`to_json`] as serde's `serialize_with`, for the plan's derive.
pub(crate) fn serialize<S, D>(derived: &D, s: S) -> Result<S::Ok, S::Error>
where
    S: serde::Serializer,
    D: AsRef<[Derived]>,
{
    serde::Serialize::serialize(&to_json(derived.as_ref()), s)
}

/// A value as the text plan shows it: a map as `key=value` pairs.
fn value_text(v: &Value) -> String {
    match v {
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| {
                format!(
                    "{k}={}",
                    v.as_str().map_or_else(|| v.to_string(), String::from)
                )
            })
            .collect::<Vec<_>>()
            .join(","),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const A: Section = Section {
        title: "pod capacity",
        key: "podCapacity",
    };
    const B: Section = Section {
        title: "resource managers",
        key: "resourceManagers",
    };

    #[test]
    fn sections_in_the_order_first_derived_each_value_with_its_formula() {
        let d = [
            Derived::new(A, "maxPods", json!(29), "3 × 9 + 2".into()),
            Derived::new(B, "reservedSystemCPUs", json!("0"), "ceil(70m)".into()),
            Derived::new(A, "kubeReserved", json!({"cpu": "70m"}), "6%".into()),
        ];
        let mut o = String::new();
        render_text(&mut o, &d);
        assert_eq!(
            o,
            "pod capacity:\n  maxPods 29: 3 × 9 + 2\n  kubeReserved cpu=70m: 6%\n\
             resource managers:\n  reservedSystemCPUs \"0\": ceil(70m)\n"
        );
        assert_eq!(
            to_json(&d).to_string(),
            json!({
                "podCapacity": {
                    "maxPods": {"value": 29, "from": "3 × 9 + 2"},
                    "kubeReserved": {"value": {"cpu": "70m"}, "from": "6%"}
                },
                "resourceManagers": {
                    "reservedSystemCPUs": {"value": "0", "from": "ceil(70m)"}
                }
            })
            .to_string()
        );
        let mut o = String::new();
        render_text(&mut o, &[]);
        assert_eq!((o.as_str(), to_json(&[])), ("", json!({})));
    }
}
