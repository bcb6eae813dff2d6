//! The node's resolvers (`network`; nodeadm's `instance.network`): systemd-resolved's drop-in,
//! byte for byte as nodeadm's config phase writes it (`internal/system/resolve.go` and
//! `resolve.conf.tpl`), and systemd-resolved restarted to take it, its global `DNS` (or
//! `Domains`) read back. nodeadm does this in its config phase, after the agent has discovered
//! the cluster and run its checks; so the agent does it first, before discovery and every
//! check ([`crate::plan::Plan::early`]): every name the agent resolves goes through the servers
//! the node will use. The NodeConfig drop-in carries the same values, so nodeadm's rewrite of
//! the file is the same bytes.

use crate::facts::{Facts, Family};
use crate::os::systemd::{Expected, PropertyCheck};
use crate::plan::step::{IfFailed, Mode, Step, Unit, UnitJob};
use crate::spec::network::NetworkSpec;
use crate::spec::Spec;

use super::{Aspect, Input, Out, Reads};

pub(crate) const ASPECT: Aspect = Aspect {
    name: "resolver",
    reads,
    plan,
    contribute: super::Contribution::Nothing,
};

/// nodeadm's file (`systemdResolvedConfigDirPath` + `40-eks.conf`): the same path, so that one
/// file holds the servers whichever writes it last.
pub const DROPIN_PATH: &str = "/run/systemd/resolved.conf.d/40-eks.conf";
const UNIT: &str = "systemd-resolved.service";

fn reads(spec: &Spec, _: Option<Family>, r: &mut Reads) {
    if spec.network.is_some() {
        r.file(DROPIN_PATH);
    }
}

/// nodeadm's template rendered: `[Resolve]`, then a `DNS=` line and a `Domains=` line, each
/// left empty when the config has none, the values joined by spaces.
pub fn dropin_content(n: &NetworkSpec) -> String {
    let dns = match n.nameservers.is_empty() {
        true => String::new(),
        false => format!("DNS={}", n.nameserver_texts().join(" ")),
    };
    let domains = match n.domains.is_empty() {
        true => String::new(),
        false => format!("Domains={}", n.domains.join(" ")),
    };
    format!("[Resolve]\n{dns}\n{domains}\n")
}

/// What systemd-resolved shows once it took the file: its global `DNS` servers, or, with none
/// configured, its global `Domains` (`~` before a routing-only one, trailing dots dropped as
/// resolved normalises them).
fn read_back(n: &NetworkSpec) -> PropertyCheck {
    let (property, expected) = match n.nameservers.is_empty() {
        false => ("DNS", Expected::Addresses(n.nameserver_texts())),
        true => (
            "Domains",
            Expected::Domains(n.domains.iter().map(|d| normalised(d)).collect()),
        ),
    };
    PropertyCheck {
        service: "org.freedesktop.resolve1",
        path: "/org/freedesktop/resolve1",
        interface: "org.freedesktop.resolve1.Manager",
        property,
        expected,
        record_as: Some("resolver"),
    }
}

fn normalised(d: &str) -> String {
    match d {
        "~." => d.to_string(),
        _ => d.strip_suffix('.').unwrap_or(d).to_string(),
    }
}

fn plan(i: &Input, out: &mut Out) {
    let (spec, facts) = (i.spec, i.facts);
    let Some(n) = &spec.network else {
        return;
    };
    match facts.family() {
        Some(Family::Al2023) => {
            merged_beside(n, facts, out);
            early(n, facts, out)
        }
        Some(Family::Al2) => out.findings.push(
            "network",
            "sets systemd-resolved's servers (nodeadm's instance.network), and AL2 runs no systemd-resolved: its resolver is /etc/resolv.conf from DHCP; set the servers in the VPC's DHCP options set, or use an AL2023 image",
        ),
        // The family's own finding stops the run: nothing is changed before it.
        None => {}
    }
}

/// A field `network` leaves empty that another NodeConfig sets: nodeadm's merge keeps that
/// one beside the agent's, and its config phase writes another file than the one in force for
/// discovery and the checks.
fn merged_beside(n: &NetworkSpec, facts: &Facts, out: &mut Out) {
    let Some(nc) = &facts.node_configs else {
        return;
    };
    let fields = [
        ("nameservers", n.nameservers.is_empty()),
        ("domains", n.domains.is_empty()),
    ];
    for (field, empty) in fields {
        if empty && nc.sets(&format!("spec.instance.network.{field}")) {
            out.warnings.push(format!("another NodeConfig sets instance.network.{field}, which `network` leaves empty: nodeadm merges it beside the agent's servers and domains, so its config phase writes another {DROPIN_PATH} than the one in force for the agent's discovery and checks; set `network.{field}` too"));
        }
    }
}

/// The file and the restart, as the plan's steps before discovery.
fn early(n: &NetworkSpec, facts: &Facts, out: &mut Out) {
    let at = out.steps.len();
    let content = dropin_content(n);
    let purpose = "systemd-resolved drop-in (nodeadm's instance.network), before discovery";
    if out.file(
        facts,
        "network",
        DROPIN_PATH,
        purpose,
        content,
        Mode::Keep(0o644),
    ) {
        out.steps.push(Step::Unit(Unit {
            job: UnitJob::Restart {
                unit: UNIT.into(),
                verify: read_back(n),
            },
            why: "systemd-resolved reads its drop-ins when it starts".into(),
            required: false,
            if_failed: IfFailed::default(),
        }));
    }
    let steps: Vec<Step> = out.steps.drain(at..).collect();
    out.early.extend(steps);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::aspects::testing::*;

    /// An AL2023 node without the file.
    fn absent() -> Facts {
        Facts::builder(Family::Al2023).absent([DROPIN_PATH]).build()
    }

    fn network(v: &str) -> Spec {
        spec(&complete(&format!(r#""network":{v}"#)))
    }

    #[test]
    fn the_file_is_nodeadms_template_rendered() {
        let s = network(r#"{"nameservers":["10.0.0.2","fd00::53"],"domains":["corp.example"]}"#);
        assert_eq!(
            dropin_content(s.network.as_ref().unwrap()),
            "[Resolve]\nDNS=10.0.0.2 fd00::53\nDomains=corp.example\n"
        );
        let s = network(r#"{"nameservers":["10.0.0.2"]}"#);
        assert_eq!(
            dropin_content(s.network.as_ref().unwrap()),
            "[Resolve]\nDNS=10.0.0.2\n\n"
        );
        let s = network(r#"{"domains":["a.example","~b.example."]}"#);
        assert_eq!(
            dropin_content(s.network.as_ref().unwrap()),
            "[Resolve]\n\nDomains=a.example ~b.example.\n"
        );
    }

    #[test]
    fn the_steps_run_before_discovery_and_a_converged_node_plans_none() {
        let s = network(r#"{"nameservers":["10.0.0.2"],"domains":["~."]}"#);
        let out = run(&ASPECT, &s, &absent());
        assert!(out.steps.is_empty(), "{:?}", out.steps);
        assert_eq!(out.early.len(), 2, "{:?}", out.early);
        let Step::Unit(Unit {
            job: UnitJob::Restart { unit, verify },
            ..
        }) = &out.early[1]
        else {
            panic!("{:?}", out.early[1]);
        };
        assert_eq!(unit, UNIT);
        assert_eq!(
            verify.expected,
            Expected::Addresses(vec!["10.0.0.2".into()])
        );

        let content = dropin_content(s.network.as_ref().unwrap());
        let facts = Facts::builder(Family::Al2023)
            .file(DROPIN_PATH, &content)
            .build();
        let out = run(&ASPECT, &s, &facts);
        assert!(out.early.is_empty() && out.steps.is_empty());
    }

    #[test]
    fn domains_alone_are_read_back_as_resolved_normalises_them() {
        let s = network(r#"{"domains":["corp.example.","~."]}"#);
        let out = run(&ASPECT, &s, &absent());
        let Step::Unit(Unit {
            job: UnitJob::Restart { verify, .. },
            ..
        }) = &out.early[1]
        else {
            panic!("{:?}", out.early);
        };
        assert_eq!(verify.property, "Domains");
        assert_eq!(
            verify.expected,
            Expected::Domains(vec!["corp.example".into(), "~.".into()])
        );
    }

    #[test]
    fn a_node_whose_family_is_not_known_gets_nothing_before_discovery() {
        let s = network(r#"{"nameservers":["10.0.0.2"]}"#);
        let mut facts = absent();
        facts.family = Err(crate::facts::FamilyError::NoBootstrap {
            bootstrap: "/etc/eks/bootstrap.sh".into(),
        });
        let out = run(&ASPECT, &s, &facts);
        assert!(
            out.early.is_empty() && out.steps.is_empty(),
            "{:?}",
            out.early
        );
    }

    #[test]
    fn a_field_another_nodeconfig_sets_beside_the_agents_is_a_warning() {
        let s = network(r#"{"nameservers":["10.0.0.2"]}"#);
        let other = "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  instance:\n    network:\n      domains: [corp.example]\n";
        let facts = Facts::builder(Family::Al2023)
            .absent([DROPIN_PATH])
            .dropin("20-corp.yaml", other)
            .build();
        let out = run(&ASPECT, &s, &facts);
        assert_eq!(out.warnings.len(), 1, "{:?}", out.warnings);
        assert!(
            out.warnings[0].contains("instance.network.domains"),
            "{:?}",
            out.warnings
        );
        // Both fields set: the agent's values stand for both, no warning.
        let s = network(r#"{"nameservers":["10.0.0.2"],"domains":["a.example"]}"#);
        assert!(run(&ASPECT, &s, &facts).warnings.is_empty());
    }

    #[test]
    fn al2_is_refused_naming_what_to_do() {
        let s = network(r#"{"nameservers":["10.0.0.2"]}"#);
        let out = run(&ASPECT, &s, &Facts::builder(Family::Al2).build());
        let f = findings(&out);
        assert!(
            f[0].starts_with("network: ") && f[0].contains("DHCP options"),
            "{f:?}"
        );
        assert!(out.early.is_empty());
    }
}
