//! The kubelet model: one [`KubeletIntent`] — KubeletConfiguration keys (those derived with their
//! formulas, [`derived`]), labels, taints and other flags — filled by small contributors, one
//! file each, in `CONTRIBUTORS` order, and rendered by the hand-offs: on AL2 the
//! kubelet-config.json patch (`aspects::kubelet_config`) and bootstrap.sh's
//! `--kubelet-extra-args` (`handoff::al2`), on AL2023 the NodeConfig's `kubelet.config` and
//! `kubelet.flags` (`handoff::al2023`). A renderer knows its file or argv, never a feature;
//! a kubelet setting is one contributor, its config field and its line here (the shape of
//! nodeadm's `internal/kubelet/config.go` and its `withX` functions).

pub mod derived;
pub mod file;

use serde_json::Value;

use crate::base::k8s::Taint;
pub use derived::{Derived, Section};

/// The hard eviction threshold for memory both hand-off targets write (`memory.available<100Mi`:
/// bootstrap.sh and nodeadm), which the kubelet keeps free beside kube-reserved: one number for
/// pod capacity's warning, the memory manager's sum, huge pages' room and the join's allocatable.
pub(crate) const EVICTION_HARD_MEMORY_MIB: u64 = 100;

/// What the agent wants of the kubelet.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KubeletIntent {
    /// KubeletConfiguration keys and values, in the order contributors set them.
    pub config: Vec<(&'static str, Value)>,
    /// Labels the node registers with, sorted by key.
    pub labels: Vec<(String, String)>,
    /// Taints the node registers with.
    pub taints: Vec<Taint>,
    /// Other kubelet flags, each `--flag=value`.
    pub flags: Vec<String>,
    /// The values contributors derived for config keys, each with its formula (for the plan).
    pub derived: Vec<Derived>,
    /// What a contributor wants the operator to know, without refusing the config.
    pub warnings: Vec<String>,
}

impl KubeletIntent {
    /// Set a KubeletConfiguration key (a later contributor's value replaces an earlier one's).
    pub fn set(&mut self, key: &'static str, value: Value) {
        match self.config.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.config.push((key, value)),
        }
    }

    /// Set a config key to a value the contributor derived, and keep how it was reached for the
    /// plan to show.
    pub fn derive(&mut self, d: Derived) {
        self.set(d.key, d.value.clone());
        self.derived.push(d);
    }

    /// The config keys without those in `as_flags` (key, kubelet flag), and those keys' values
    /// as kubelet flags (`--max-pods=29`, a map as `--kube-reserved=cpu=70m,memory=574Mi`).
    pub(crate) fn split_as_flags(
        &self,
        as_flags: &[(&str, &str)],
    ) -> (Vec<(&'static str, Value)>, Vec<String>) {
        let mut config = Vec::new();
        let mut flags = Vec::new();
        for (key, v) in &self.config {
            match as_flags.iter().find(|(k, _)| k == key) {
                Some((_, flag)) => flags.push(format!("{flag}={}", flag_value(v))),
                None => config.push((*key, v.clone())),
            }
        }
        (config, flags)
    }

    /// The kubelet flags: `--node-labels`, `--register-with-taints`, then the others.
    pub(crate) fn kubelet_flags(&self) -> Vec<String> {
        self.kubelet_flags_with(&[])
    }

    /// The kubelet flags with `more` before the contributors' other flags.
    pub(crate) fn kubelet_flags_with(&self, more: &[String]) -> Vec<String> {
        let mut flags = Vec::new();
        if !self.labels.is_empty() {
            let l: Vec<String> = self
                .labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            flags.push(format!("--node-labels={}", l.join(",")));
        }
        if !self.taints.is_empty() {
            let t: Vec<&str> = self.taints.iter().map(|t| t.text.as_str()).collect();
            flags.push(format!("--register-with-taints={}", t.join(",")));
        }
        flags.extend(more.iter().cloned());
        flags.extend(self.flags.iter().cloned());
        flags
    }

    /// The kube-reserved quantity of `resource` the agent sets, if it sets one.
    pub(crate) fn kube_reserved(&self, resource: &str) -> Option<&str> {
        let (_, v) = self.config.iter().find(|(k, _)| *k == "kubeReserved")?;
        v.get(resource)?.as_str()
    }

    /// The config keys as a JSON object.
    pub(crate) fn config_object(&self) -> serde_json::Map<String, Value> {
        self.config
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }
}

/// A config value as kubelet's flag takes it: a map as `key=value` pairs joined by commas.
fn flag_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| format!("{k}={}", flag_value(v)))
            .collect::<Vec<_>>()
            .join(","),
        other => other.to_string(),
    }
}

/// What one contributor makes of a config (JSON) on an AL2 node with nothing read.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_later_value_replaces_a_key_in_place() {
        let mut k = KubeletIntent::default();
        k.set("a", 1.into());
        k.set("b", 2.into());
        k.set("a", 3.into());
        assert_eq!(k.config, [("a", Value::from(3)), ("b", Value::from(2))]);
    }
}
