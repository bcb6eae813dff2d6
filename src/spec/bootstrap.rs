//! The AL2 hand-off's settings: bootstrap.sh's path and the extra words for it, each checked
//! against the newest bootstrap.sh's option grammar (the node's own script is checked at plan
//! time), never a flag the agent sets itself.

use std::path::PathBuf;

use crate::base::bootstrap_sh::Grammar;
use crate::base::findings::Findings;
use crate::base::text::{printable, unsplittable, unsplittable_problem};
use crate::config::HandoffSettings;

use super::check_node_path;

/// Flags the agent sets itself from the config.
pub const FLAGS_OWNED: [&str; 6] = [
    "--b64-cluster-ca",
    "--apiserver-endpoint",
    "--kubelet-extra-args",
    "--container-runtime",
    "--service-ipv4-cidr",
    "--service-ipv6-cidr",
];

#[derive(Debug, Clone)]
pub struct BootstrapSpec {
    /// bootstrap.sh's node path.
    pub path: PathBuf,
    /// `handoff.extraBootstrapArgs`, each word as given.
    pub extra_args: Vec<String>,
}

pub fn spec(h: &HandoffSettings, f: &mut Findings) -> BootstrapSpec {
    let mut extra_args = Vec::new();
    let mut ok = true;
    for (i, a) in h.extra_bootstrap_args.iter().enumerate() {
        let field = format!("handoff.extraBootstrapArgs[{i}]");
        if let Some(ch) = unsplittable(a) {
            f.push(&field, unsplittable_problem(a, ch));
            ok = false;
        } else if let Some((flag, value)) = a.split_once('=').filter(|_| a.starts_with("--")) {
            f.push(&field, format!(
                "`{}`: bootstrap.sh takes `--flag value` only and would take `--flag=value` as the cluster name; write \"{}\", \"{}\" as two elements",
                printable(a), printable(flag), printable(value)
            ));
            ok = false;
        } else if FLAGS_OWNED.contains(&a.as_str()) {
            f.push(&field, format!(
                "`{a}` is set by eks-nodeinit from the config (cluster, labels, taints, kubelet.extraArgs); set it there"
            ));
            ok = false;
        }
        extra_args.push(a.clone());
    }
    if ok {
        // The grammar of the newest bootstrap.sh; the node's own script is checked at plan time.
        for (i, m) in Grammar::newest().check_extra(&extra_args, "bootstrap.sh") {
            f.push(format!("handoff.extraBootstrapArgs[{i}]"), m);
            ok = false;
        }
    }
    if !ok {
        // Reported once, here: the plan does not check the words against the node's script.
        extra_args.clear();
    }
    check_node_path("handoff.bootstrapPath", &h.bootstrap_path, f);
    BootstrapSpec {
        path: h.bootstrap_path.clone(),
        extra_args,
    }
}
