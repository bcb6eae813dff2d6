//! The cluster's values as the hand-offs will carry them: what [`crate::discovery`] could not
//! find is a finding (before any change), and a fresh answer is kept in the discovery cache
//! (mode 0600, it holds the CA) so that a reboot or a rerun makes no call.

use crate::discovery::{Outcome, CACHE, CACHE_MODE, FIELD};
use crate::facts::{current_of, Family};
use crate::plan::step::Mode;
use crate::spec::Spec;

use super::{Aspect, Input, Out, Reads};

pub(crate) const ASPECT: Aspect = Aspect {
    name: "cluster",
    reads,
    plan,
    contribute: super::Contribution::Nothing,
};

/// Nothing from the node: discovery reads its cache itself, once, before the node is read.
fn reads(_: &Spec, _: Option<Family>, _: &mut Reads) {}

/// Discovery as the plan and the report show it: each value's source and the calls made.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DiscoveryView {
    pub values: Vec<ValueSource>,
    pub from_cache: bool,
    pub calls: crate::discovery::Calls,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ValueSource {
    pub field: String,
    pub from: String,
}

impl DiscoveryView {
    fn of(facts: &crate::facts::Facts) -> Option<DiscoveryView> {
        let crate::discovery::Outcome::Found {
            from_cache, calls, ..
        } = &facts.cluster.outcome
        else {
            return None;
        };
        Some(DiscoveryView {
            values: facts
                .cluster
                .origins()
                .into_iter()
                .map(|(field, from)| ValueSource {
                    field: format!("cluster.{field}"),
                    from,
                })
                .collect(),
            from_cache: *from_cache,
            calls: *calls,
        })
    }

    /// The plan's lines for it.
    fn lines(&self) -> Vec<String> {
        let n = self.calls.total();
        let how = match self.from_cache {
            true => "from the discovery cache, no call".to_string(),
            false => format!("discovered, {n} call{}", if n == 1 { "" } else { "s" }),
        };
        let mut lines = vec![format!("cluster values ({how}):")];
        lines.extend(
            self.values
                .iter()
                .map(|v| format!("  {}: {}", v.field, v.from)),
        );
        lines
    }
}

/// Where the cluster's values came from: a note of the plan, and the report's `discovery`.
fn note(facts: &crate::facts::Facts, out: &mut Out) {
    let Some(view) = DiscoveryView::of(facts) else {
        return;
    };
    let value = serde_json::to_value(&view).unwrap_or_default();
    out.record.insert("discovery".into(), value.clone());
    out.notes.push(crate::plan::step::Note {
        key: "discovery".into(),
        lines: view.lines(),
        value,
    });
}

fn plan(i: &Input, out: &mut Out) {
    let (spec, facts) = (i.spec, i.facts);
    note(facts, out);
    let c = &facts.cluster;
    // A discovered CIDR of another family than the config says (a given one is the spec's).
    let discovered = spec.cluster.cidr.is_none();
    if let (Some(cidr), Some(family), true) = (&c.cidr, spec.cluster.ip_family, discovered) {
        if let Some(p) = crate::spec::cluster::family_problem(cidr, family) {
            out.findings
                .push("cluster.ipFamily", format!("the discovered {p}"));
        }
    }
    out.secrets.extend(c.certificate_authority.iter().cloned());
    match &c.outcome {
        Outcome::NotAsked => {}
        Outcome::Failed { reasons, calls } => {
            let n = calls.total();
            out.findings.push(
                FIELD,
                format!(
                    "no source gave the cluster's values ({n} call{}): {}",
                    if n == 1 { "" } else { "s" },
                    reasons.join("; ")
                ),
            );
        }
        Outcome::Found { .. } => {
            let Some(d) = &spec.cluster.discovery else {
                return;
            };
            if !d.cache {
                return;
            }
            let Some(new) = c.cache_text(d) else { return };
            let Some(old) = current_of(c.cache_file.as_ref(), CACHE, FIELD, &mut out.findings)
            else {
                return;
            };
            let purpose = "cluster discovery cache";
            out.file_from(old, CACHE, purpose, new, Mode::Exact(CACHE_MODE));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{findings, run, spec, Facts};
    use super::*;
    use crate::discovery::{Calls, ClusterFact};

    #[test]
    fn the_configs_values_alone_plan_nothing_but_keep_the_ca_secret() {
        let s = spec(r#"{"cluster":{"name":"c","certificateAuthority":"Q0E="}}"#);
        let facts = Facts::builder(Family::Al2)
            .cluster(ClusterFact::from_spec(&s.cluster))
            .build();
        let out = run(&ASPECT, &s, &facts);
        assert!(out.steps.is_empty() && out.findings.is_empty());
        assert_eq!(out.secrets, ["Q0E="]);
    }

    /// The findings for a config of `family` whose discovery found an IPv6 CIDR.
    fn with_ipv6_found(family: &str) -> Vec<String> {
        let config =
            format!(r#"{{"cluster":{{"name":"c","ipFamily":"{family}","discovery":{{}}}}}}"#);
        let s = spec(&config);
        let mut c = ClusterFact::from_spec(&s.cluster);
        c.cidr = Some(crate::spec::cluster::Cidr {
            text: "fd00:10:20::/108".into(),
            ipv6: true,
        });
        let facts = Facts::builder(Family::Al2023).cluster(c).build();
        findings(&run(&ASPECT, &s, &facts))
    }

    #[test]
    fn a_discovered_cidr_of_another_family_than_the_config_says_is_a_finding() {
        let f = with_ipv6_found("ipv4");
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].starts_with("cluster.ipFamily: the discovered `fd00:10:20::/108` is an IPv6"),
            "{f:?}"
        );
        assert!(with_ipv6_found("ipv6").is_empty());
    }

    #[test]
    fn no_source_answering_is_one_finding_with_every_reason() {
        let s = spec(r#"{"cluster":{"name":"c","discovery":{}}}"#);
        let mut c = ClusterFact::from_spec(&s.cluster);
        c.outcome = Outcome::Failed {
            reasons: vec!["ssm: denied".into(), "eks: timed out".into()],
            calls: Calls::default(),
        };
        let facts = Facts::builder(Family::Al2023).cluster(c).build();
        let f = findings(&run(&ASPECT, &s, &facts));
        assert_eq!(f.len(), 1);
        assert!(
            f[0].starts_with(FIELD) && f[0].contains("ssm: denied; eks: timed out"),
            "{f:?}"
        );
    }
}
