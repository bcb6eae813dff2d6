use super::super::testing::{run, spec};
use super::*;
use crate::facts::Facts;
use crate::instance::metadata::Metadata;
use crate::os::fsutil::FileFact;

const CONFIG: &str = r#"{"cluster": {"name": "c", "cidr": "10.100.0.0/16"},
    "proxy": {"https": "http://svc:p%40ss@proxy.corp:3128", "http": "http://proxy.corp:3128",
              "noProxy": [".corp.example"]}}"#;

const NO_PROXY: &str = "localhost,127.0.0.1,::1,169.254.169.254,fd00:ec2::254,10.0.0.0/16,10.100.0.0/16,.internal,.eu-west-1.compute.internal,.corp.example";

fn md(vpc: Option<Vec<String>>) -> Metadata {
    Metadata {
        region: "eu-west-1".into(),
        vpc_cidr_blocks: vpc,
        ..Default::default()
    }
}

/// A node of `family` with this config's cluster values (nothing looked up).
fn node(config: &str, family: Family) -> crate::facts::FactsBuilder {
    let cluster = crate::discovery::ClusterFact::from_spec(&spec(config).cluster);
    Facts::builder(family).cluster(cluster)
}

fn all_files(config: &str, family: Family) -> Vec<String> {
    let mut f = vec![ENV_FILE.to_string()];
    f.extend(units(&spec(config), family).into_iter().map(dropin));
    f
}

fn files(out: &Out) -> Vec<(String, u32, String)> {
    out.steps
        .iter()
        .filter_map(|s| match s {
            Step::File(crate::plan::step::File {
                path, mode, new, ..
            }) => Some((path.display().to_string(), *mode, new.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn the_credentials_go_to_one_0600_file_each_unit_gets_a_drop_in_then_one_reload() {
    for (family, want) in [
        (Family::Al2, vec!["containerd", "kubelet", "sandbox-image"]),
        (
            Family::Al2023,
            vec!["containerd", "kubelet", "nodeadm-config", "nodeadm-run"],
        ),
    ] {
        let facts = node(CONFIG, family)
            .instance(md(Some(vec!["10.0.0.0/16".into()])))
            .absent(all_files(CONFIG, family))
            .build();
        let out = run(&ASPECT, &spec(CONFIG), &facts);
        assert!(out.findings.is_empty(), "{:?}", out.findings);
        assert!(out.warnings.is_empty(), "{:?}", out.warnings);
        let got = files(&out);
        assert_eq!(
            got[0],
            (
                ENV_FILE.to_string(),
                0o600,
                "# Written by eks-nodeinit from its config's `proxy`: the proxy URLs that hold credentials\n# (mode 0600), read by the units' drop-ins (docs/private-networks.md).\nHTTPS_PROXY='http://svc:p%40ss@proxy.corp:3128'\nhttps_proxy='http://svc:p%40ss@proxy.corp:3128'\n".to_string()
            )
        );
        let want: Vec<String> = want
            .iter()
            .map(|u| dropin(&format!("{u}.service")))
            .collect();
        let dropins: Vec<String> = got[1..].iter().map(|(p, _, _)| p.clone()).collect();
        assert_eq!(dropins, want);
        let text = format!(
            "# Written by eks-nodeinit from its config's `proxy` (docs/private-networks.md).\n[Service]\n\
             Environment=\"HTTP_PROXY=http://proxy.corp:3128\"\n\
             Environment=\"http_proxy=http://proxy.corp:3128\"\n\
             EnvironmentFile={ENV_FILE}\n\
             Environment=\"NO_PROXY={NO_PROXY}\" \"no_proxy={NO_PROXY}\"\n"
        );
        for (_, mode, new) in &got[1..] {
            assert_eq!((*mode, new.as_str()), (0o644, text.as_str()));
            assert!(
                !new.contains("p%40ss"),
                "no credentials in a unit's Environment="
            );
        }
        assert!(matches!(
            out.steps.last(),
            Some(Step::Unit(Unit {
                job: UnitJob::Reload,
                ..
            }))
        ));
        assert_eq!(
            out.steps
                .iter()
                .filter(|s| matches!(
                    s,
                    Step::Unit(Unit {
                        job: UnitJob::Reload,
                        ..
                    })
                ))
                .count(),
            1
        );
        assert_eq!(out.secrets, ["svc:p%40ss@"]);
    }
}

#[test]
fn a_second_run_plans_nothing_and_a_rotated_password_is_redacted_in_the_diff() {
    let first = node(CONFIG, Family::Al2023)
        .instance(md(Some(vec!["10.0.0.0/16".into()])))
        .absent(all_files(CONFIG, Family::Al2023))
        .build();
    let out = run(&ASPECT, &spec(CONFIG), &first);
    let written = files(&out);
    let mut b = node(CONFIG, Family::Al2023).instance(md(Some(vec!["10.0.0.0/16".into()])));
    for (p, mode, new) in &written {
        b = b.file_fact(
            p.clone(),
            FileFact {
                content: Ok(Some(new.clone())),
                mode: Some(*mode),
                link: None,
            },
        );
    }
    let facts = b.build();
    let again = run(&ASPECT, &spec(CONFIG), &facts);
    assert!(again.steps.is_empty(), "{:?}", again.steps);
    assert!(again.findings.is_empty(), "{:?}", again.findings);
    // A new password: the env file changes, and the old one is a secret too.
    let rotated = CONFIG.replace("p%40ss", "n3w");
    let out = run(&ASPECT, &spec(&rotated), &facts);
    assert_eq!(files(&out).len(), 1, "only the env file changes");
    assert!(out.secrets.contains(&"svc:n3w@".to_string()));
    assert!(
        out.secrets.contains(&"svc:p%40ss@".to_string()),
        "{:?}",
        out.secrets
    );
}

#[test]
fn a_readable_file_in_the_way_of_credentials_is_a_finding() {
    let facts = node(CONFIG, Family::Al2)
        .instance(md(Some(vec![])))
        .absent(all_files(CONFIG, Family::Al2))
        .file(ENV_FILE, "X=1\n")
        .build();
    let out = run(&ASPECT, &spec(CONFIG), &facts);
    assert!(
        out.findings.0.iter().any(|f| {
            let f = f.to_string();
            f.contains("mode 0644") && f.contains(ENV_FILE)
        }),
        "{:?}",
        out.findings
    );
    // Without credentials there is no env file, and a 0644 drop-in is as the agent writes it.
    let plain = r#"{"cluster": {"name": "c"}, "proxy": {"https": "http://p.corp:3128"}}"#;
    let facts = node(plain, Family::Al2)
        .instance(md(Some(vec![])))
        .absent(all_files(plain, Family::Al2))
        .file(dropin("kubelet.service"), "[Service]\n")
        .build();
    let out = run(&ASPECT, &spec(plain), &facts);
    assert!(out.findings.is_empty(), "{:?}", out.findings);
    assert!(files(&out).iter().all(|(p, _, _)| p != ENV_FILE));
}

#[test]
fn unknown_vpc_blocks_and_service_cidr_are_warnings() {
    let config = r#"{"cluster": {"name": "c"}, "proxy": {"http": "http://p.corp:3128"}}"#;
    let facts = node(config, Family::Al2023)
        .instance(md(None))
        .absent(all_files(config, Family::Al2023))
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
    assert!(r.into_vec().is_empty());
    let out = run(&ASPECT, &s, &Facts::builder(Family::Al2023).build());
    assert!(out.steps.is_empty() && out.warnings.is_empty());
}

#[test]
fn the_launch_hook_unit_gets_the_proxy_too() {
    let config = r#"{"cluster": {"name": "c"}, "lifecycle": {"completeLaunchHook": "h"}, "proxy": {"https": "http://p:1"}}"#;
    let facts = node(config, Family::Al2023)
        .instance(md(Some(vec![])))
        .absent(all_files(config, Family::Al2023))
        .build();
    let out = run(&ASPECT, &spec(config), &facts);
    let want = dropin("eks-nodeinit-launch-hook.service");
    assert!(
        files(&out).iter().any(|(p, _, _)| *p == want),
        "{:?}",
        files(&out)
    );
}
