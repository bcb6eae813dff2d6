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

use crate::base::bootstrap_sh::AL2_EVICTION_HARD;
use crate::base::findings::Findings;
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
    /// The config's own keys (`kubelet.config`), passed as given after every contributor's.
    pub passed: Vec<(&'static str, Value)>,
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

    /// The config keys as a JSON object, the passed ones with them.
    pub(crate) fn config_object(&self) -> serde_json::Map<String, Value> {
        let all = self.config.iter().chain(&self.passed);
        all.map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    /// Pass the config's own keys (`kubelet.config`, checked in `spec::kubelet_config`); one a
    /// contributor set from another field is a finding instead.
    pub(crate) fn pass(&mut self, given: &[(&'static str, Value)], f: &mut Findings) {
        for (key, v) in given {
            if self.config.iter().any(|(k, _)| k == key) {
                f.push(
                    format!("kubelet.config.{key}"),
                    "another setting of this config sets it for the kubelet: set it in one place",
                );
                continue;
            }
            self.passed.push((key, v.clone()));
        }
    }

    /// The passed keys bootstrap.sh would rewrite in the file, as the kubelet flags that take
    /// the file's place on AL2: `--cluster-dns=a,b`; `--eviction-hard=` with bootstrap.sh's
    /// thresholds and the passed ones over them, key by key, as the kubelet merges the
    /// NodeConfig's over nodeadm's on AL2023.
    pub(crate) fn al2_rewritten_flags(&self) -> Vec<String> {
        let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), String::from);
        let mut flags = Vec::new();
        if let Some(Value::Array(ips)) = self.passed("clusterDNS") {
            let ips: Vec<String> = ips.iter().map(text).collect();
            flags.push(format!("--cluster-dns={}", ips.join(",")));
        }
        if let Some(Value::Object(m)) = self.passed("evictionHard") {
            let mut all: Vec<(String, String)> = AL2_EVICTION_HARD
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            for (k, v) in m {
                match all.iter_mut().find(|(x, _)| x == k) {
                    Some(slot) => slot.1 = text(v),
                    None => all.push((k.clone(), text(v))),
                }
            }
            let all: Vec<String> = all.iter().map(|(k, v)| format!("{k}<{v}")).collect();
            flags.push(format!("--eviction-hard={}", all.join(",")));
        }
        flags
    }

    /// A passed key's value.
    pub(crate) fn passed(&self, key: &str) -> Option<&Value> {
        self.passed.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }
}

/// `over` merged into `base` as the kubelet decodes a config over another (Go's
/// `json.Unmarshal` into the value it has: a mapping key by key, anything else replaced).
pub(crate) fn merged_over(base: Option<&Value>, over: &Value) -> Value {
    match (base, over) {
        (Some(Value::Object(b)), Value::Object(o)) => {
            let mut m = b.clone();
            for (k, v) in o {
                let merged = merged_over(m.get(k), v);
                m.insert(k.clone(), merged);
            }
            Value::Object(m)
        }
        _ => over.clone(),
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

    use crate::facts::{Facts, Family};
    use crate::plan::aspects::kubelet_config::ASPECT as KUBELET_CONFIG;
    use crate::plan::aspects::testing::{findings, run, spec};
    use crate::plan::aspects::{AL2023_HANDOFF, AL2_HANDOFF};
    use crate::plan::step::{Handoff, Step};

    const GIVEN: &str = r#"{"cluster":{"name":"prod"},"kubelet":{"config":{"podPidsLimit":4096,"evictionHard":{"memory.available":"200Mi"},"clusterDNS":["169.254.20.10"],"authentication":{"webhook":{"cacheTTL":"1m0s"}}}}}"#;

    #[test]
    fn the_configs_own_keys_go_in_the_nodeconfig_as_given() {
        let dropin = crate::instance::userdata::AGENT_DROPIN;
        let facts = Facts::builder(Family::Al2023).absent([dropin]).build();
        let out = run(&AL2023_HANDOFF, &spec(GIVEN), &facts);
        let Step::File(f) = &out.steps[0] else {
            panic!("{:?}", out.steps)
        };
        let doc: Value = serde_json::from_str(&f.new).unwrap();
        let c = &doc["spec"]["kubelet"]["config"];
        assert_eq!(c["podPidsLimit"], 4096);
        assert_eq!(
            c["evictionHard"],
            serde_json::json!({"memory.available": "200Mi"})
        );
        assert_eq!(c["clusterDNS"][0], "169.254.20.10");
    }

    #[test]
    fn on_al2_they_go_in_the_file_merged_and_what_bootstrap_sh_rewrites_as_flags() {
        let file = r#"{"kind":"KubeletConfiguration","podPidsLimit":100,"authentication":{"anonymous":{"enabled":false},"webhook":{"enabled":true,"cacheTTL":"2m0s"}},"clusterDNS":["10.100.0.10"]}"#;
        let cluster = crate::discovery::ClusterFact::from_spec(&spec(GIVEN).cluster);
        let facts = Facts::builder(Family::Al2)
            .cluster(cluster)
            .file("/etc/kubernetes/kubelet/kubelet-config.json", file)
            .file(
                "/etc/eks/bootstrap.sh",
                include_str!("../../../examples/al2-root/etc/eks/bootstrap.sh"),
            )
            .executable("/etc/eks/bootstrap.sh", true)
            .build();
        let s = spec(GIVEN);
        // The file: the operator's podPidsLimit replaced (asked for by name), the webhook's
        // cacheTTL merged into its mapping; clusterDNS and evictionHard left to the flags.
        let out = run(&KUBELET_CONFIG, &s, &facts);
        let Step::File(f) = &out.steps[0] else {
            panic!("{:?} {:?}", out.steps, findings(&out))
        };
        let doc: Value = serde_json::from_str(&f.new).unwrap();
        assert_eq!(doc["podPidsLimit"], 4096);
        assert_eq!(
            doc["authentication"]["webhook"],
            serde_json::json!({"enabled": true, "cacheTTL": "1m0s"})
        );
        assert_eq!(doc["authentication"]["anonymous"]["enabled"], false);
        assert_eq!(doc["clusterDNS"][0], "10.100.0.10");
        assert!(doc.get("evictionHard").is_none(), "{doc}");
        let out = run(&AL2_HANDOFF, &s, &facts);
        let Some(Step::Handoff(Handoff::Exec { argv, .. })) = out.steps.first() else {
            panic!("{:?} {:?}", out.steps, findings(&out))
        };
        let extra = argv
            .iter()
            .position(|a| a == "--kubelet-extra-args")
            .unwrap();
        assert_eq!(
            argv[extra + 1],
            "--cluster-dns=169.254.20.10 --eviction-hard=memory.available<200Mi,nodefs.available<10%,nodefs.inodesFree<5%"
        );
    }

    #[test]
    fn a_key_another_setting_sets_is_refused_where_the_spec_cannot_tell() {
        let mut k = KubeletIntent::default();
        k.set("podPidsLimit", 1.into());
        let mut f = Findings::default();
        k.pass(
            &[
                ("podPidsLimit", 2.into()),
                ("clusterDNS", serde_json::json!(["x"])),
            ],
            &mut f,
        );
        assert_eq!(k.passed, [("clusterDNS", serde_json::json!(["x"]))]);
        assert_eq!(f.0[0].field, "kubelet.config.podPidsLimit");
    }

    #[test]
    fn a_later_value_replaces_a_key_in_place() {
        let mut k = KubeletIntent::default();
        k.set("a", 1.into());
        k.set("b", 2.into());
        k.set("a", 3.into());
        assert_eq!(k.config, [("a", Value::from(3)), ("b", Value::from(2))]);
    }
}
