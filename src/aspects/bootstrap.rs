//! The Amazon Linux 2 hand-off: `execv` of `/etc/eks/bootstrap.sh` with every flag and its value
//! as separate words (bootstrap.sh takes `--flag=value` as the cluster name).

use std::path::PathBuf;

use crate::config::HandoffSettings;
use crate::facts::{Facts, Family};
use crate::findings::Findings;
use crate::fsutil::under;
use crate::plan::Step;
use crate::spec::{check_node_path, Spec};
use crate::text::printable;

use super::{Aspect, Out, Reads};

pub const ASPECT: Aspect = Aspect {
    name: "bootstrap",
    reads,
    plan,
};

/// Flags the agent sets itself from the config.
pub const FLAGS_OWNED: [&str; 6] = [
    "--b64-cluster-ca",
    "--apiserver-endpoint",
    "--kubelet-extra-args",
    "--container-runtime",
    "--service-ipv4-cidr",
    "--service-ipv6-cidr",
];

/// Written (per boot: /run is a tmpfs) just before bootstrap.sh is exec'd; a later run in the
/// same boot sees it and does not hand off again.
pub const MARKER: &str = "/run/eks-nodeinit/bootstrap-exec";

#[derive(Debug, Clone)]
pub struct BootstrapSpec {
    /// bootstrap.sh's node path.
    pub path: PathBuf,
    /// `handoff.extraBootstrapArgs`, each word as given.
    pub extra_args: Vec<String>,
}

pub fn spec(h: &HandoffSettings, f: &mut Findings) -> BootstrapSpec {
    let mut extra_args = Vec::new();
    for (i, a) in h.extra_bootstrap_args.iter().enumerate() {
        let field = format!("handoff.extraBootstrapArgs[{i}]");
        if a.chars().any(|ch| ch.is_control()) {
            f.push(&field, "holds a control character");
        } else if let Some((flag, value)) = a.split_once('=').filter(|_| a.starts_with("--")) {
            f.push(&field, format!(
                "`{}`: bootstrap.sh takes `--flag value` only and would take `--flag=value` as the cluster name; write \"{}\", \"{}\" as two elements",
                printable(a), printable(flag), printable(value)
            ));
        } else if FLAGS_OWNED.contains(&a.as_str()) {
            f.push(&field, format!(
                "`{a}` is set by eks-nodeinit from the config (cluster, labels, taints, kubelet.extraArgs); set it there"
            ));
        } else {
            extra_args.push(a.clone());
        }
    }
    check_node_path("handoff.bootstrapPath", &h.bootstrap_path, f);
    BootstrapSpec {
        path: h.bootstrap_path.clone(),
        extra_args,
    }
}

fn reads(_: &Spec, family: Option<Family>, r: &mut Reads) {
    if family == Some(Family::Al2) {
        r.file(MARKER);
    }
}

fn plan(spec: &Spec, facts: &Facts, out: &mut Out) {
    if facts.family() != Some(Family::Al2) {
        return;
    }
    let Some(marker) = facts.current_file(MARKER, "handoff", &mut out.findings) else {
        return;
    };
    if let Some(when) = marker.content {
        out.warnings.push(format!(
            "bootstrap.sh was already exec'd in this boot ({}, {MARKER}); not again: one hand-off per boot",
            crate::text::printable(when.trim())
        ));
        return;
    }
    out.secrets
        .extend(spec.cluster.certificate_authority.iter().cloned());
    out.steps.push(Step::ExecBootstrap {
        argv: argv(spec, facts),
    });
}

/// The exact argv for bootstrap.sh (argv[0] is the script's path under the root).
fn argv(spec: &Spec, facts: &Facts) -> Vec<String> {
    let c = &spec.cluster;
    let mut argv = vec![
        under(&facts.root, &spec.bootstrap.path)
            .display()
            .to_string(),
        c.name.clone(),
    ];
    if let Some(ca) = &c.certificate_authority {
        argv.extend(["--b64-cluster-ca".into(), ca.clone()]);
    }
    if let Some(ep) = &c.api_server_endpoint {
        argv.extend(["--apiserver-endpoint".into(), ep.clone()]);
    }
    match &c.cidr {
        // bootstrap.sh derives the cluster DNS address from the CIDR of its family.
        Some(cidr) if cidr.ipv6 => argv.extend([
            "--service-ipv6-cidr".into(),
            cidr.text.clone(),
            "--ip-family".into(),
            "ipv6".into(),
        ]),
        Some(cidr) => argv.extend(["--service-ipv4-cidr".into(), cidr.text.clone()]),
        None => {}
    }
    argv.extend(["--container-runtime".into(), c.container_runtime.clone()]);
    let flags = spec.registration.kubelet_flags();
    if !flags.is_empty() {
        argv.extend(["--kubelet-extra-args".into(), flags.join(" ")]);
    }
    argv.extend(spec.bootstrap.extra_args.iter().cloned());
    argv
}
