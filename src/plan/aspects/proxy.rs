//! The HTTP proxy (`proxy`): one systemd drop-in per unit that fetches at boot, holding
//! `HTTP(S)_PROXY` and the computed `NO_PROXY` in upper and lower case, then systemd told to
//! reload its units (D-Bus `Manager.Reload`) before any of them starts. containerd and kubelet on
//! both families; `sandbox-image.service` on AL2 (it pulls the pause image from ECR);
//! `nodeadm-config.service` and `nodeadm-run.service` on AL2023 (nodeadm calls EC2); the
//! launch-hook unit when the agent completes a hook. A proxy URL's credentials are secrets: they
//! go to one environment file (mode 0600) the drop-ins name, never into a unit's `Environment=`
//! (which systemd shows any local user), and are redacted in every rendering.

use crate::base::text::printable;
use crate::facts::Family;
use crate::plan::step::{IfFailed, Mode, Step, Unit, UnitJob};
use crate::spec::proxy::{is_cidr, NoProxyInputs, ProxySpec, ProxyUrl};
use crate::spec::Spec;

use super::{Aspect, Input, Out, Reads};

pub(crate) const ASPECT: Aspect = Aspect {
    name: "proxy",
    reads,
    plan,
    contribute: super::Contribution::Nothing,
};

/// The drop-in's file name in each unit's `.d` directory.
pub const DROPIN: &str = "60-eks-nodeinit-proxy.conf";

/// The units of `family` that fetch over the network at boot.
fn units(spec: &Spec, family: Family) -> Vec<&'static str> {
    let mut u = vec!["containerd.service", "kubelet.service"];
    match family {
        Family::Al2 => u.push("sandbox-image.service"),
        Family::Al2023 => u.extend(["nodeadm-config.service", "nodeadm-run.service"]),
    }
    if spec.launch_hook.is_some() {
        u.push("eks-nodeinit-launch-hook.service");
    }
    u
}

pub fn dropin(unit: &str) -> String {
    format!("/etc/systemd/system/{unit}.d/{DROPIN}")
}

fn reads(spec: &Spec, family: Option<Family>, r: &mut Reads) {
    if spec.proxy.is_none() {
        return;
    }
    let families = match family {
        Some(f) => vec![f],
        None => vec![Family::Al2, Family::Al2023],
    };
    r.file(ENV_FILE);
    for f in families {
        for u in units(spec, f) {
            r.file(dropin(u));
        }
    }
}

/// The proxy URLs that hold credentials, for the units' `EnvironmentFile=`: systemd shows every
/// unit's `Environment=` values to any local user over D-Bus (`systemctl show -p Environment`),
/// never an environment file's content.
pub const ENV_FILE: &str = "/etc/eks-nodeinit/proxy.env";

/// Each proxy variable and its URL, upper case first (Go reads the upper first, curl and many
/// tools only the lower).
fn vars(p: &ProxySpec) -> Vec<(&'static str, &ProxyUrl)> {
    let mut v = Vec::new();
    if let Some(u) = &p.https {
        v.extend([("HTTPS_PROXY", u), ("https_proxy", u)]);
    }
    if let Some(u) = &p.http {
        v.extend([("HTTP_PROXY", u), ("http_proxy", u)]);
    }
    v
}

fn with_credentials(p: &ProxySpec) -> bool {
    vars(p).iter().any(|(_, u)| u.userinfo.is_some())
}

/// The drop-in: the URLs without credentials and the NO_PROXY as `Environment=`, in double
/// quotes (no value holds a quote, backslash, `%` or space: the spec checked them), and the
/// environment file when a URL has credentials.
pub fn render(p: &ProxySpec, no_proxy: &[String]) -> String {
    let mut s = String::from(
        "# Written by eks-nodeinit from its config's `proxy` (docs/private-networks.md).\n[Service]\n",
    );
    for (name, u) in vars(p).into_iter().filter(|(_, u)| u.userinfo.is_none()) {
        s.push_str(&format!("Environment=\"{name}={}\"\n", u.url));
    }
    if with_credentials(p) {
        s.push_str(&format!("EnvironmentFile={ENV_FILE}\n"));
    }
    let list = no_proxy.join(",");
    s.push_str(&format!(
        "Environment=\"NO_PROXY={list}\" \"no_proxy={list}\"\n"
    ));
    s
}

/// The environment file: the URLs with credentials, single-quoted (systemd reads them
/// literally; the spec refused `'` in credentials).
pub fn render_env(p: &ProxySpec) -> String {
    let mut s = String::from("# Written by eks-nodeinit from its config's `proxy`: the proxy URLs that hold credentials\n# (mode 0600), read by the units' drop-ins (docs/private-networks.md).\n");
    for (name, u) in vars(p).into_iter().filter(|(_, u)| u.userinfo.is_some()) {
        s.push_str(&format!("{name}='{}'\n", u.url));
    }
    s
}

/// The NO_PROXY for this node, with a warning for each input it lacks.
fn no_proxy(i: &Input, p: &ProxySpec, out: &mut Out) -> Vec<String> {
    let md = i.facts.instance.as_ref();
    let region = md.map_or("", |m| m.region.as_str());
    let vpc: Vec<String> = match md.and_then(|m| m.vpc_cidr_blocks.as_ref()) {
        Some(blocks) => {
            for b in blocks.iter().filter(|b| !is_cidr(b)) {
                out.warnings.push(format!(
                    "proxy: `{}` from the VPC's CIDR blocks is no CIDR block: left out of NO_PROXY",
                    printable(b)
                ));
            }
            blocks.clone()
        }
        None => {
            out.warnings.push("proxy: the VPC's CIDR blocks are not known (IMDS serves no network/interfaces/macs/<mac>/vpc-ipv4-cidr-blocks, or the metadata file has no vpcCidrBlocks): NO_PROXY lacks them, so kubelet's probes and traffic to the VPC go through the proxy; add them to proxy.noProxy".into());
            Vec::new()
        }
    };
    let cluster = &i.facts.cluster;
    let cidr = cluster.cidr.as_ref().map(|c| c.text.clone());
    if cidr.is_none() {
        out.warnings.push("proxy: the cluster's service CIDR is not known (cluster.cidr, or discovery): NO_PROXY lacks it; add it to proxy.noProxy".into());
    }
    p.no_proxy_list(NoProxyInputs {
        region,
        vpc_cidrs: &vpc,
        service_cidr: cidr.as_deref(),
    })
}

fn plan(i: &Input, out: &mut Out) {
    let (Some(p), Some(family)) = (&i.spec.proxy, i.facts.family()) else {
        return;
    };
    let list = no_proxy(i, p, out);
    out.secrets
        .extend(p.secrets().into_iter().map(|s| format!("{s}@")));
    let mut files = Vec::new();
    if with_credentials(p) {
        files.push((
            ENV_FILE.to_string(),
            "proxy credentials for the units".to_string(),
            render_env(p),
            0o600,
        ));
    }
    let text = render(p, &list);
    for unit in units(i.spec, family) {
        files.push((
            dropin(unit),
            format!("proxy environment for {unit}"),
            text.clone(),
            0o644,
        ));
    }
    let mut wrote = false;
    for (path, purpose, new, mode) in files {
        let Some(cur) = i.facts.current_file(&path, "proxy", &mut out.findings) else {
            continue;
        };
        out.secrets.extend(
            cur.content
                .as_deref()
                .map(crate::base::text::credentials_in)
                .unwrap_or_default(),
        );
        if let Some(m) = cur.mode.filter(|m| mode == 0o600 && *m & 0o077 != 0) {
            out.findings.push("proxy", format!("{path} exists with mode {m:04o} and would hold the proxy's credentials: the agent keeps a file's mode, so remove it or make it 0600"));
            continue;
        }
        wrote |= out.file_from(cur, &path, purpose, new, Mode::Keep(mode));
    }
    if wrote {
        out.steps.push(Step::Unit(reload(family)));
    }
}

/// systemd told of the drop-ins. On AL2023 nodeadm-config.service starts right after the
/// agent, so a failed reload fails the run; on AL2 bootstrap.sh reloads again.
fn reload(family: Family) -> Unit {
    let todo = match family {
        Family::Al2023 => "nodeadm-config.service would start without the proxy drop-ins written now; run `systemctl daemon-reload` and restart nodeadm-config.service",
        Family::Al2 => "units started before the next reload or boot run without the drop-ins written now",
    };
    Unit {
        job: UnitJob::Reload,
        why: "the proxy drop-ins apply to units started after a reload".into(),
        required: family == Family::Al2023,
        if_failed: IfFailed::new("systemd did not reload its units", todo),
    }
}

#[cfg(test)]
mod tests {
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
}
