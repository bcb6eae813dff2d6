//! `eks-nodeinit check`: the checks that read only the node, run where the image is built
//! (the Packer template runs it after the agent and its config are installed). A node image
//! root (no live kernel, no mounts) is judged by what its next boot sets: its sysctl.d files
//! in systemd-sysctl's order, its `/etc/fstab`. The findings planning makes of the config on
//! this node count as failures too. One line a check, as `status` prints them;
//! `--output json` for pipelines. Exit 0 when none that counts failed, 1 otherwise.

use std::path::Path;

use anyhow::Result;

use crate::base::findings::Finding;
use crate::commands::cli::{CheckArgs, Output};
use crate::facts::InstanceTags;
use crate::plan::step::CheckStep;
use crate::spec::Spec;
use crate::verify::{CheckResult, Verdict};

/// Checks that failed and count: the build must stop.
#[derive(Debug, thiserror::Error)]
#[error("{failed} check(s) or finding(s) of the node under {root} failed: fix the image or the config before it ships (each cause above says how)")]
pub struct ChecksFailed {
    pub failed: usize,
    pub root: String,
}

/// The spec to plan with: the config file's, or, without one (the config comes in the user
/// data), a config naming only a cluster, whose checks are the defaults'.
fn spec_for(path: &Path) -> Result<(Spec, String)> {
    if path.exists() {
        return Ok((super::load_spec(path)?, path.display().to_string()));
    }
    let c = crate::config::parse(r#"{"cluster":{"name":"image"}}"#, "the default config")?;
    let spec = crate::spec::from_config(&c)?;
    Ok((
        spec,
        format!("no config at {}: the defaults", path.display()),
    ))
}

pub async fn check(args: &CheckArgs) -> Result<()> {
    let (spec, from) = spec_for(&args.config)?;
    let facts = crate::gather::node(&args.root, &spec, None, InstanceTags::Unknown);
    if let Err(e) = &facts.family {
        anyhow::bail!("{e}");
    }
    let (steps, findings) = crate::plan::local::checks(&spec, &facts);
    let steps = next_boot(steps);
    let refs: Vec<_> = steps.iter().collect();
    let results = crate::exec::checks::run(&refs, &args.root)
        .await
        .unwrap_or_default();
    let failed = results
        .iter()
        .filter(|r| r.result == Verdict::Failed && !r.advisory)
        .count()
        + findings.len();
    match args.output {
        Output::Json => println!("{}", json(&results, &findings, &from, failed)),
        Output::Text => print!("{}", text(&results, &findings, &from)),
    }
    match failed {
        0 => Ok(()),
        n => Err(ChecksFailed {
            failed: n,
            root: args.root.display().to_string(),
        }
        .into()),
    }
}

/// The kernel settings judged by what the next boot sets before the live values: on the build
/// instance, a hardening file the build added is not applied yet.
fn next_boot(steps: Vec<CheckStep>) -> Vec<CheckStep> {
    let kind = crate::verify::hardening::KernelDefaults::KIND;
    steps
        .into_iter()
        .map(|mut c| {
            if c.check.probe.kind() == kind {
                let mut fields = c.check.probe.fields();
                fields["nextBoot"] = true.into();
                if let Ok(probe) = crate::verify::check::load(kind, &fields) {
                    c.check.probe = probe;
                }
            }
            c
        })
        .collect()
}

fn text(results: &[CheckResult], findings: &[Finding], from: &str) -> String {
    let mut o = format!("checks of the node ({from}): {}\n", results.len());
    for r in results {
        o.push_str(&format!("{}: {}\n", r.word(), r.line()));
    }
    for f in findings {
        o.push_str(&format!("finding: {f}\n"));
    }
    o
}

fn json(results: &[CheckResult], findings: &[Finding], from: &str, failed: usize) -> String {
    let checks = CheckResult::timeless(results);
    let v = serde_json::json!({
        "apiVersion": "eks-nodeinit/v1",
        "kind": "Checks",
        "config": from,
        "failed": failed,
        "checks": checks,
        "findings": findings,
    });
    serde_json::to_string_pretty(&v).unwrap_or_default()
}
