//! The boot units' way to IMDS on an instance without IPv4. nodeadm's IMDS client (the AWS SDK
//! for Go's `imds.New`, which reads `AWS_EC2_METADATA_SERVICE_ENDPOINT` and nothing else: not
//! the endpoint mode) calls `http://169.254.169.254` unless told, which an instance on an
//! IPv6-only subnet does not reach: nodeadm's config phase fails reading the user data. The
//! kubelet's credential plugin, which signs the token the kubelet joins with (`aws eks
//! get-token` on AL2023: botocore's `IMDSFetcher`, 169.254.169.254 unless its environment
//! says; aws-iam-authenticator on AL2: the Go SDK's `LoadDefaultConfig`, the same), inherits
//! kubelet.service's environment (client-go v0.37.0 `plugin/pkg/client/auth/exec/exec.go`: the
//! plugin's `cmd.Env` is `os.Environ()` and the kubeconfig's `env`). Where the boot found IMDS elsewhere on such an instance,
//! `nodeadm-config.service`, `nodeadm-run.service` (AL2023) and `kubelet.service` (both
//! families) get a drop-in naming that endpoint, then systemd reloads its units before they
//! start. (AL2's bootstrap.sh is told in its environment too: handoff/al2.rs.)

use std::collections::BTreeMap;

use crate::facts::Family;
use crate::plan::step::{IfFailed, Mode, Remove, Step, Unit, UnitJob};
use crate::spec::Spec;

use super::{Aspect, Input, Out, Reads};

pub(crate) const ASPECT: Aspect = Aspect {
    name: "imds-endpoint",
    reads,
    plan,
    contribute: super::Contribution::Nothing,
};

/// The drop-in's file name in each nodeadm unit's `.d` directory.
pub const DROPIN: &str = "60-eks-nodeinit-imds.conf";

/// The units told, on each family.
fn units(family: Family) -> &'static [&'static str] {
    match family {
        Family::Al2023 => &[
            "nodeadm-config.service",
            "nodeadm-run.service",
            "kubelet.service",
        ],
        Family::Al2 => &["kubelet.service"],
    }
}

pub fn dropin(unit: &str) -> String {
    format!("/etc/systemd/system/{unit}.d/{DROPIN}")
}

fn reads(_: &Spec, family: Option<Family>, r: &mut Reads) {
    let families = match family {
        Some(f) => vec![f],
        None => vec![Family::Al2023, Family::Al2],
    };
    let mut told: Vec<&str> = families.into_iter().flat_map(units).copied().collect();
    told.dedup();
    for u in told {
        r.file(dropin(u));
    }
}

/// The drop-in: each variable quoted, `%` doubled (systemd's specifiers).
fn render(env: &BTreeMap<String, String>) -> String {
    let mut s = String::from(
        "# Written by eks-nodeinit: nodeadm and the kubelet's credential plugin read IMDS at\n\
         # 169.254.169.254 and call AWS by its IPv4 names unless told, which this instance (no\n\
         # IPv4 address) does not reach.\n\
         [Service]\n",
    );
    for (k, v) in env {
        s.push_str(&format!("Environment=\"{k}={}\"\n", v.replace('%', "%%")));
    }
    s
}

fn plan(i: &Input, out: &mut Out) {
    let Some(family) = i.facts.family() else {
        return;
    };
    let env = crate::plan::handoff::sdk_env(i.facts);
    let mut changed = false;
    for unit in units(family) {
        let path = dropin(unit);
        if env.is_empty() {
            // Written for an instance without IPv4; this one has it now (an image made from
            // such a node): nodeadm goes to IMDS's default again. Nothing to do for a file
            // not read (a node without nodeadm's units).
            let there = i
                .facts
                .file(&path)
                .is_some_and(|f| matches!(f.content, Ok(Some(_))));
            if there {
                out.steps.push(Step::Remove(Remove {
                    purpose: format!("IMDS endpoint for {unit}: this instance has IPv4"),
                    path: path.into(),
                    restore_if_run_fails: true,
                }));
                changed = true;
            }
            continue;
        }
        let Some(cur) = i.facts.current_file(&path, "imds", &mut out.findings) else {
            continue;
        };
        let purpose = format!("IMDS endpoint for {unit}");
        changed |= out.file_from(cur, &path, purpose, render(&env), Mode::Keep(0o644));
    }
    if changed {
        out.steps.push(Step::Unit(Unit {
            job: UnitJob::Reload,
            why: "the boot's units take the IMDS endpoint once systemd reloads them".into(),
            required: true,
            if_failed: IfFailed::new(
                "systemd did not reload its units",
                "nodeadm-config.service and kubelet.service would start without the IMDS endpoint written now: nodeadm fails reading the user data, the kubelet cannot sign its token; run `systemctl daemon-reload` and restart them",
            ),
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{run, spec};
    use super::*;
    use crate::facts::{Facts, Reach};
    use crate::instance::metadata::Metadata;

    const CONFIG: &str = r#"{"cluster": {"name": "c"}}"#;

    fn node(family: Family, ipv4: Option<&str>, found: &str) -> Facts {
        let mut f = Facts::builder(family)
            .instance(Metadata {
                instance_id: "i-1".into(),
                private_ipv4: ipv4.map(String::from),
                region: "eu-west-1".into(),
                ..Metadata::default()
            })
            .absent(units(family).iter().map(|u| dropin(u)))
            .build();
        f.reach = Some(Reach {
            imds_endpoint: found.into(),
            dual_stack: crate::aws::dual_stack_for(None, ipv4.is_some()),
            ..Default::default()
        });
        f
    }

    #[test]
    fn a_drop_in_left_from_a_node_without_ipv4_is_removed_once_it_has_ipv4() {
        let mut f = node(Family::Al2023, Some("10.0.0.1"), "http://[fd00:ec2::254]");
        let old =
            "[Service]\nEnvironment=\"AWS_EC2_METADATA_SERVICE_ENDPOINT=http://[fd00:ec2::254]\"\n";
        for u in units(Family::Al2023) {
            f.set_file(
                dropin(u),
                crate::os::fsutil::FileFact {
                    content: Ok(Some(old.into())),
                    mode: Some(0o644),
                    link: None,
                },
            );
        }
        let out = run(&ASPECT, &spec(CONFIG), &f);
        let removed = out
            .steps
            .iter()
            .filter(|s| matches!(s, Step::Remove(_)))
            .count();
        assert_eq!(removed, 3, "{:?}", out.steps);
        assert!(matches!(out.steps.last(), Some(Step::Unit(_))));
    }

    #[test]
    fn an_instance_without_ipv4_tells_nodeadm_and_the_kubelet_where_imds_was_found() {
        for family in [Family::Al2023, Family::Al2] {
            let out = run(
                &ASPECT,
                &spec(CONFIG),
                &node(family, None, "http://[fd00:ec2::254]"),
            );
            let files: Vec<(String, String)> = out
                .steps
                .iter()
                .filter_map(|s| match s {
                    Step::File(f) => Some((f.path.display().to_string(), f.new.clone())),
                    _ => None,
                })
                .collect();
            assert_eq!(files.len(), units(family).len(), "{:?}", out.steps);
            assert_eq!(files.last().unwrap().0, dropin("kubelet.service"));
            for ((path, text), unit) in files.iter().zip(units(family)) {
                assert_eq!(path, &dropin(unit));
                let line =
                    "Environment=\"AWS_EC2_METADATA_SERVICE_ENDPOINT=http://[fd00:ec2::254]\"";
                let dual = "Environment=\"AWS_USE_DUALSTACK_ENDPOINT=true\"";
                assert!(
                    text.contains(&format!("[Service]\n{line}\n{dual}\n")),
                    "{text}"
                );
            }
            assert!(matches!(
                out.steps.last(),
                Some(Step::Unit(Unit {
                    job: UnitJob::Reload,
                    required: true,
                    ..
                }))
            ));
        }
    }

    #[test]
    fn a_percent_in_the_endpoint_is_not_a_systemd_specifier() {
        let env = BTreeMap::from([("K".to_string(), "http://[fe80::1%25eth0]".to_string())]);
        assert!(render(&env).ends_with("Environment=\"K=http://[fe80::1%%25eth0]\"\n"));
    }

    #[test]
    fn with_ipv4_or_at_its_default_nothing_is_written() {
        for (family, ipv4, found) in [
            (Family::Al2023, Some("10.0.0.1"), "http://[fd00:ec2::254]"),
            (Family::Al2023, None, "http://169.254.169.254"),
            (Family::Al2, Some("10.0.0.1"), "http://[fd00:ec2::254]"),
        ] {
            let out = run(&ASPECT, &spec(CONFIG), &node(family, ipv4, found));
            assert!(out.steps.is_empty(), "{family:?} {ipv4:?} {found}");
        }
    }
}
