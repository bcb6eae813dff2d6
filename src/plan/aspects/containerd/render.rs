//! containerd as the hand-off leaves it, on both families: the registries' hosts directories,
//! one `hosts.toml` per registry under `/etc/containerd/certs.d/<name>/`, which containerd on AL2
//! and AL2023 reads at every pull (`config_path`). A CA is written beside its `hosts.toml` and
//! named there by a relative path, which containerd resolves against that directory: the same
//! file is right on a node and under `--root`. Files the operator put there for other
//! registries are left alone; a `hosts.toml` for a configured registry that the agent did not
//! write is a finding, never overwritten.

use std::fmt::Write as _;

use crate::facts::{Family, Reads};
use crate::plan::out::Out;
use crate::plan::step::{Mode, Remove, Step};
use crate::spec::registries::RegistrySpec;

use crate::plan::handoff::Input;

use super::pull::{merged_template, AL2_AMI_TEMPLATE, AL2_CONFIG, AL2_TEMPLATE};

/// containerd's `config_path` on AL2 and AL2023.
pub const CERTS_D: &str = "/etc/containerd/certs.d";

/// The first line of every `hosts.toml` the agent writes.
pub const HEADER: &str = "# Written by eks-nodeinit from its config";

/// The registry's own CA, beside its hosts.toml.
const REGISTRY_CA: &str = "ca.crt";

/// Every file of `r`'s hosts directory, as a node path: what the registries setting reads.
pub fn hosts_paths(r: &RegistrySpec) -> Vec<String> {
    files(r).into_iter().map(|(f, _)| path(r, &f)).collect()
}

/// The registry's files: `hosts.toml`, then its CA and each mirror's (file name, PEM).
fn files(r: &RegistrySpec) -> Vec<(String, String)> {
    let mut out = vec![("hosts.toml".to_string(), hosts_toml(r))];
    if let Some(ca) = &r.ca {
        out.push((REGISTRY_CA.into(), ca.clone()));
    }
    for (i, m) in r.mirrors.iter().enumerate() {
        if let Some(ca) = &m.ca {
            out.push((mirror_ca(i), ca.clone()));
        }
    }
    out
}

fn mirror_ca(i: usize) -> String {
    format!("mirror-{}-ca.crt", i + 1)
}

fn path(r: &RegistrySpec, file: &str) -> String {
    format!("{CERTS_D}/{}/{file}", r.name)
}

/// containerd's hosts.toml: the registry itself as `server` (with its CA), each mirror a host
/// to pull and resolve from, tried in order. Every value was checked to need no TOML escaping.
pub(crate) fn hosts_toml(r: &RegistrySpec) -> String {
    let mut t = format!(
        "{HEADER} (registries.\"{}\"); rewritten on every run.\n# Do not edit: change the config instead.\nserver = \"{}\"\n",
        r.name, r.server
    );
    let own_ca = r.ca.as_ref().map(|_| REGISTRY_CA.to_string());
    tls(&mut t, "", own_ca.as_deref(), r.skip_verify);
    if r.mirrors.is_empty() {
        // containerd 1.6 refuses a hosts.toml without a host table ("invalid `host` tree"): the
        // registry itself once more, as its only host.
        let _ = writeln!(t, "\n[host.\"{}\"]", r.server);
        tls(&mut t, "  ", own_ca.as_deref(), r.skip_verify);
    }
    for (i, m) in r.mirrors.iter().enumerate() {
        let _ = write!(
            t,
            "\n[host.\"{}\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
            m.url
        );
        let ca = m.ca.as_ref().map(|_| mirror_ca(i));
        tls(&mut t, "  ", ca.as_deref(), m.skip_verify);
    }
    t
}

/// A host's `ca` (the file beside the hosts.toml) and `skip_verify` lines.
fn tls(t: &mut String, indent: &str, ca_file: Option<&str>, skip_verify: bool) {
    if let Some(f) = ca_file {
        let _ = writeln!(t, "{indent}ca = \"{f}\"");
    }
    if skip_verify {
        let _ = writeln!(t, "{indent}skip_verify = true");
    }
}

/// On AL2, the node's containerd template and the agent's copy of it.
pub(crate) fn reads(_: &crate::spec::Spec, family: Option<Family>, r: &mut Reads) {
    if family == Some(Family::Al2) {
        r.file(AL2_TEMPLATE);
        r.file(AL2_CONFIG);
        r.file(AL2_AMI_TEMPLATE);
    }
}

/// containerd's files: the hosts directories of the intent's registries, and on AL2 the
/// template with the pull settings.
pub(crate) fn plan(i: &Input, out: &mut Out) {
    if i.facts.family().is_none() {
        return;
    }
    hosts_dirs(i, out);
    if i.facts.family() == Some(Family::Al2) {
        match i.handoff.containerd.pull.is_empty() {
            false => al2_config(i, out),
            true => al2_restore(i, out),
        }
    }
}

/// AL2 without pull settings after a boot with them: bootstrap.sh copied the agent's file over
/// the node's template, so the AMI's own is put back (bootstrap.sh then substitutes its sandbox
/// image in it as on any boot), and the agent's copies go.
fn al2_restore(i: &Input, out: &mut Out) {
    const FIELD: &str = "images.pull";
    let Some(kept) = i
        .facts
        .current_file(AL2_AMI_TEMPLATE, FIELD, &mut out.findings)
    else {
        return;
    };
    let Some(ami) = kept.content else { return };
    let purpose = "the AMI's containerd template put back (images.pull is left out)";
    out.file(
        i.facts,
        FIELD,
        AL2_TEMPLATE,
        purpose,
        ami,
        Mode::Keep(0o644),
    );
    for (path, purpose) in [
        (AL2_AMI_TEMPLATE, "the kept AMI template, put back"),
        (
            AL2_CONFIG,
            "containerd's config with the pull settings, no longer given to bootstrap.sh",
        ),
    ] {
        out.steps.push(Step::Remove(Remove {
            purpose: purpose.into(),
            path: path.into(),
            restore_if_run_fails: true,
        }));
    }
}

/// The AMI's template to merge into: the copy kept the first time, else the node's template,
/// which is then kept (bootstrap.sh copies `--containerd-config-file` over the template at every
/// boot, so from the second boot on the template is the agent's own output).
fn ami_template(i: &Input, out: &mut Out, field: &str) -> Option<String> {
    let kept = i
        .facts
        .current_file(AL2_AMI_TEMPLATE, field, &mut out.findings)?;
    if let Some(k) = kept.content {
        return Some(k);
    }
    let cur = i
        .facts
        .current_file(AL2_TEMPLATE, field, &mut out.findings)?;
    let Some(template) = cur.content else {
        out.findings.push(field, format!("{AL2_TEMPLATE} is missing: the pull settings are set in the node's own containerd template, which every AL2 EKS AMI has; use such an AMI, or leave images.pull out"));
        return None;
    };
    let purpose =
        "the AMI's containerd template, kept before bootstrap.sh copies the agent's over it";
    out.file(
        i.facts,
        field,
        AL2_AMI_TEMPLATE,
        purpose,
        template.clone(),
        Mode::Keep(0o644),
    );
    Some(template)
}

/// AL2: the node's template with the pull settings, for bootstrap.sh's
/// `--containerd-config-file` (which the AL2 renderer passes).
fn al2_config(i: &Input, out: &mut Out) {
    const FIELD: &str = "images.pull";
    if i.spec
        .bootstrap
        .extra_args
        .iter()
        .any(|a| a == "--containerd-config-file")
    {
        out.findings.push(FIELD, "handoff.extraBootstrapArgs gives bootstrap.sh its own --containerd-config-file, and the pull settings need the agent's: keep one (put the settings in that file, or leave it out)");
        return;
    }
    let Some(template) = ami_template(i, out, FIELD) else {
        return;
    };
    match merged_template(&template, &i.handoff.containerd.pull) {
        Ok(new) => {
            let purpose = "containerd's config with the pull settings (bootstrap.sh --containerd-config-file)";
            out.file(i.facts, FIELD, AL2_CONFIG, purpose, new, Mode::Keep(0o644));
        }
        Err(e) => out.findings.push(
            FIELD,
            format!("{AL2_TEMPLATE} {e}; fix the AMI's template, or leave images.pull out"),
        ),
    }
}

/// The hosts directories of the intent's registries.
fn hosts_dirs(i: &Input, out: &mut Out) {
    let facts = i.facts;
    for r in &i.handoff.containerd.registries {
        let field = format!("registries.\"{}\"", r.name);
        let hosts = path(r, "hosts.toml");
        let Some(current) = facts.current_file(&hosts, &field, &mut out.findings) else {
            continue;
        };
        if current
            .content
            .as_deref()
            .is_some_and(|c| !c.starts_with(HEADER))
        {
            out.findings.push(&field, format!("{hosts} exists and was not written by eks-nodeinit: the agent does not overwrite it; remove it, or this registry from the config"));
            continue;
        }
        warn_skip_verify(r, out);
        warn_ecr_mirror(r, out);
        for (file, new) in files(r) {
            let p = path(r, &file);
            let purpose = format!("containerd registry hosts for {}", r.name);
            out.file(facts, &field, &p, purpose, new, Mode::Keep(0o644));
        }
    }
}

fn warn_skip_verify(r: &RegistrySpec, out: &mut Out) {
    if r.skip_verify {
        out.warnings.push(format!(
            "registries.\"{}\".skipVerify: containerd does not verify {}'s certificate",
            r.name, r.server
        ));
    }
    for m in r.mirrors.iter().filter(|m| m.skip_verify) {
        out.warnings.push(format!(
            "registries.\"{}\": containerd does not verify the certificate of mirror {}",
            r.name, m.url
        ));
    }
}

/// Whether `url`'s host is a private Amazon ECR registry (`<account>.dkr.ecr.<region>.amazonaws.com`,
/// the FIPS and China partitions' forms too).
pub(crate) fn is_private_ecr(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let host = rest.split(['/', ':']).next().unwrap_or("");
    let labels: Vec<&str> = host.split('.').collect();
    labels.len() >= 6
        && labels[0].len() == 12
        && labels[0].bytes().all(|b| b.is_ascii_digit())
        && labels[1] == "dkr"
        && labels[2].starts_with("ecr")
        && (host.ends_with(".amazonaws.com") || host.ends_with(".amazonaws.com.cn"))
}

/// A mirror on private ECR (a pull-through cache) is reached without credentials: kubelet asks
/// its credential provider for the image's own registry, and the AMIs' provider matches ECR
/// names only (docs/private-networks.md).
fn warn_ecr_mirror(r: &RegistrySpec, out: &mut Out) {
    for m in r.mirrors.iter().filter(|m| is_private_ecr(&m.url)) {
        out.warnings.push(format!(
            "registries.\"{}\": mirror {} is a private Amazon ECR registry: kubelet gets credentials for the image's own registry ({}), not for the mirror, so containerd reaches ECR without a token and ECR refuses it (HTTP 401); name the pull-through cache's image itself (<account>.dkr.ecr.<region>.amazonaws.com/<prefix>/…), which the AMI's credential provider covers (docs/private-networks.md)",
            r.name, m.url, r.name
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::Facts;
    use crate::facts::Family;
    use crate::plan::aspects::testing::{run, spec};
    use crate::plan::aspects::CONTAINERD_HANDOFF as ASPECT;
    use crate::plan::step::Step;

    fn config(ca: &str) -> String {
        serde_json::json!({
            "cluster": {"name": "c"},
            "registries": {
                "docker.io": {"mirrors": ["https://mirror.corp.example",
                                          {"url": "https://10.1.2.3:5000", "ca": ca, "skipVerify": true}]},
                "registry.corp.example:5000": {"ca": ca}
            }
        })
        .to_string()
    }

    fn ca() -> String {
        std::fs::read_to_string("tests/fixtures/cluster-ca.pem").unwrap()
    }

    #[test]
    fn one_hosts_toml_per_registry_and_each_ca_beside_it() {
        let s = spec(&config(&ca()));
        let mut all = Vec::new();
        for r in &s.registries {
            all.extend(files(r).into_iter().map(|(f, _)| path(r, &f)));
        }
        let facts = Facts::builder(Family::Al2023).absent(all).build();
        let out = run(&ASPECT, &s, &facts);
        assert!(out.findings.is_empty(), "{:?}", out.findings);
        let paths: Vec<String> = out
            .steps
            .iter()
            .map(|s| match s {
                Step::File(crate::plan::step::File { path, .. }) => path.display().to_string(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            paths,
            [
                "/etc/containerd/certs.d/docker.io/hosts.toml",
                "/etc/containerd/certs.d/docker.io/mirror-2-ca.crt",
                "/etc/containerd/certs.d/registry.corp.example:5000/hosts.toml",
                "/etc/containerd/certs.d/registry.corp.example:5000/ca.crt",
            ]
        );
        let Step::File(crate::plan::step::File { new, .. }) = &out.steps[0] else {
            unreachable!()
        };
        assert!(
            new.contains("server = \"https://registry-1.docker.io\"\n"),
            "{new}"
        );
        assert!(new.contains("[host.\"https://mirror.corp.example\"]\n  capabilities = [\"pull\", \"resolve\"]\n"), "{new}");
        assert!(new.contains("[host.\"https://10.1.2.3:5000\"]\n  capabilities = [\"pull\", \"resolve\"]\n  ca = \"mirror-2-ca.crt\"\n  skip_verify = true\n"), "{new}");
        assert_eq!(out.warnings.len(), 1, "{:?}", out.warnings);
    }

    #[test]
    fn a_configured_node_plans_nothing_and_a_foreign_hosts_toml_is_a_finding() {
        let s = spec(&config(&ca()));
        let mut b = Facts::builder(Family::Al2);
        for r in &s.registries {
            for (file, text) in files(r) {
                b = b.file(path(r, &file), &text);
            }
        }
        assert!(run(&ASPECT, &s, &b.build()).steps.is_empty());
        let foreign = Facts::builder(Family::Al2)
            .file(
                "/etc/containerd/certs.d/docker.io/hosts.toml",
                "server = \"https://x\"\n",
            )
            .build();
        let out = run(&ASPECT, &s, &foreign);
        assert!(
            out.findings
                .0
                .iter()
                .any(|f| f.field == "registries.\"docker.io\""
                    && f.message.contains("not written by eks-nodeinit")),
            "{:?}",
            out.findings
        );
        assert!(!out.steps.iter().any(|s| matches!(s, Step::File(crate::plan::step::File { path, .. }) if path.starts_with("/etc/containerd/certs.d/docker.io"))));
    }

    #[test]
    fn an_ecr_mirror_is_a_warning_that_says_what_works() {
        for (url, ecr) in [
            (
                "https://123456789012.dkr.ecr.eu-west-1.amazonaws.com/docker-hub",
                true,
            ),
            (
                "https://123456789012.dkr.ecr-fips.us-east-1.amazonaws.com",
                true,
            ),
            (
                "https://123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn:443/q",
                true,
            ),
            ("https://public.ecr.aws", false),
            ("https://mirror.corp.example/123456789012.dkr.ecr", false),
            ("https://12345.dkr.ecr.eu-west-1.amazonaws.com", false),
        ] {
            assert_eq!(is_private_ecr(url), ecr, "{url}");
        }
        let s = spec(
            r#"{"cluster": {"name": "c"}, "registries": {"docker.io": {"mirrors": ["https://123456789012.dkr.ecr.eu-west-1.amazonaws.com/docker-hub"]}}}"#,
        );
        let r = &s.registries[0];
        let facts = Facts::builder(Family::Al2023)
            .absent(files(r).into_iter().map(|(f, _)| path(r, &f)))
            .build();
        let out = run(&ASPECT, &s, &facts);
        assert_eq!(out.warnings.len(), 1, "{:?}", out.warnings);
        assert!(
            out.warnings[0].contains("HTTP 401")
                && out.warnings[0].contains("pull-through cache's image itself")
        );
    }
}
