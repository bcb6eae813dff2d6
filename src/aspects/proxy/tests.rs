use super::super::testing::{run, spec};
use super::*;
use crate::facts::Facts;
use crate::fsutil::FileFact;
use crate::metadata::Metadata;

const CONFIG: &str = r#"{"cluster": {"name": "c", "cidr": "10.100.0.0/16"},
    "proxy": {"https": "http://svc:p%40ss@proxy.corp:3128", "noProxy": [".corp.example"]}}"#;

fn md(vpc: Option<Vec<String>>) -> Metadata {
    Metadata {
        region: "eu-west-1".into(),
        vpc_cidr_blocks: vpc,
        ..Default::default()
    }
}

fn all_units(family: Family) -> Vec<String> {
    units(&spec(CONFIG), family)
        .into_iter()
        .map(dropin)
        .collect()
}

fn paths(out: &Out) -> Vec<String> {
    out.steps
        .iter()
        .filter_map(|s| match s {
            Step::File { path, mode, .. } => {
                assert_eq!(*mode, 0o600);
                Some(path.display().to_string())
            }
            _ => None,
        })
        .collect()
}

#[test]
fn each_familys_units_get_the_drop_in_then_one_reload() {
    for (family, want) in [
        (Family::Al2, vec!["containerd", "kubelet", "sandbox-image"]),
        (
            Family::Al2023,
            vec!["containerd", "kubelet", "nodeadm-config", "nodeadm-run"],
        ),
    ] {
        let facts = Facts::builder(family)
            .instance(md(Some(vec!["10.0.0.0/16".into()])))
            .absent(all_units(family))
            .build();
        let out = run(&ASPECT, &spec(CONFIG), &facts);
        assert!(out.findings.is_empty(), "{:?}", out.findings);
        let want: Vec<String> = want
            .iter()
            .map(|u| dropin(&format!("{u}.service")))
            .collect();
        assert_eq!(paths(&out), want);
        assert_eq!(
            out.steps
                .iter()
                .filter(|s| matches!(s, Step::ReloadUnits { .. }))
                .count(),
            1
        );
        assert!(matches!(out.steps.last(), Some(Step::ReloadUnits { .. })));
        assert!(out.warnings.is_empty(), "{:?}", out.warnings);
        let Some(Step::File { new, .. }) = out.steps.first() else {
            panic!()
        };
        assert_eq!(
            new,
            "# Written by eks-nodeinit from its config's `proxy` (docs/private-networks.md).\n[Service]\n\
             Environment=\"HTTPS_PROXY=http://svc:p%%40ss@proxy.corp:3128\" \"https_proxy=http://svc:p%%40ss@proxy.corp:3128\"\n\
             Environment=\"NO_PROXY=localhost,127.0.0.1,::1,169.254.169.254,fd00:ec2::254,10.0.0.0/16,10.100.0.0/16,.internal,.eu-west-1.compute.internal,.corp.example\" \"no_proxy=localhost,127.0.0.1,::1,169.254.169.254,fd00:ec2::254,10.0.0.0/16,10.100.0.0/16,.internal,.eu-west-1.compute.internal,.corp.example\"\n"
        );
        assert!(out.secrets.contains(&"svc:p%%40ss@".to_string()));
        assert!(out.secrets.contains(&"svc:p%40ss@".to_string()));
    }
}

#[test]
fn a_second_run_plans_nothing() {
    let first = Facts::builder(Family::Al2023)
        .instance(md(Some(vec!["10.0.0.0/16".into()])))
        .absent(all_units(Family::Al2023))
        .build();
    let out = run(&ASPECT, &spec(CONFIG), &first);
    let Some(Step::File { new, .. }) = out.steps.first() else {
        panic!()
    };
    let mut b = Facts::builder(Family::Al2023).instance(md(Some(vec!["10.0.0.0/16".into()])));
    for p in all_units(Family::Al2023) {
        b = b.file_fact(
            p,
            FileFact {
                content: Ok(Some(new.clone())),
                mode: Some(0o600),
                link: None,
            },
        );
    }
    let again = run(&ASPECT, &spec(CONFIG), &b.build());
    assert!(again.steps.is_empty(), "{:?}", again.steps);
    assert!(again.findings.is_empty(), "{:?}", again.findings);
}

#[test]
fn a_readable_file_in_the_way_of_credentials_is_a_finding() {
    let mut b = Facts::builder(Family::Al2).instance(md(Some(vec![])));
    b = b.absent(all_units(Family::Al2));
    let facts = b.file(dropin("kubelet.service"), "[Service]\n").build();
    let out = run(&ASPECT, &spec(CONFIG), &facts);
    assert!(
        out.findings
            .0
            .iter()
            .any(|f| f.to_string().contains("mode 0644")
                && f.to_string().contains("kubelet.service.d")),
        "{:?}",
        out.findings
    );
}

#[test]
fn unknown_vpc_blocks_and_service_cidr_are_warnings() {
    let config = r#"{"cluster": {"name": "c"}, "proxy": {"http": "http://p.corp:3128"}}"#;
    let facts = Facts::builder(Family::Al2023)
        .instance(md(None))
        .absent(units(&spec(config), Family::Al2023).into_iter().map(dropin))
        .build();
    let out = run(&ASPECT, &spec(config), &facts);
    assert_eq!(out.warnings.len(), 2, "{:?}", out.warnings);
    assert!(out.warnings[0].contains("vpc-ipv4-cidr-blocks"));
    assert!(out.warnings[1].contains("service CIDR"));
    assert!(out.secrets.is_empty());
}

#[test]
fn no_proxy_section_plans_and_reads_nothing() {
    let s = spec(r#"{"cluster": {"name": "c"}}"#);
    let mut r = Reads::default();
    reads(&s, Some(Family::Al2023), &mut r);
    assert!(r.files.is_empty());
    let out = run(&ASPECT, &s, &Facts::builder(Family::Al2023).build());
    assert!(out.steps.is_empty() && out.warnings.is_empty());
}

#[test]
fn the_launch_hook_unit_gets_the_proxy_too() {
    let s = spec(
        r#"{"cluster": {"name": "c"}, "lifecycle": {"completeLaunchHook": "h"}, "proxy": {"https": "http://p:1"}}"#,
    );
    assert!(units(&s, Family::Al2023).contains(&"eks-nodeinit-launch-hook.service"));
}
