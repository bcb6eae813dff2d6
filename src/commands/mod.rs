//! The commands: `init` (config → spec → facts → plan → executor), `validate`, and the
//! background `tag-continue`. No command runs a step itself.

pub mod after;
pub mod await_service;
pub mod bake_images;
pub mod check;
pub mod cli;
pub mod gate;
pub mod pin_sandbox;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

pub use check::check;

use crate::aws::ec2::{TagResult, TaggingRecord};
use crate::base::findings::Invalid;
use crate::commands::cli::{InitArgs, Output};
use crate::exec::report::{now_ms, Report};
use crate::exec::tagging::{self, Continuation, ReadyClient};
use crate::exec::{self, Bus};
use crate::facts::InstanceTags;
use crate::gather::{self, ImdsRead, Prefetched};
use crate::plan;
use crate::spec::{self, Spec};
use crate::{config, instance::imds, instance::userdata, os::lock};

/// Load the config and check it once into a spec; every problem comes back as [`Invalid`]
/// (exit code 3).
pub(crate) fn load_spec(path: &Path) -> Result<Spec> {
    let c = config::load(path)?;
    Ok(spec::from_config(&c)?)
}

fn bus_for(args: &InitArgs) -> Bus {
    match &args.system_bus_address {
        Some(a) => Bus::Address(a.clone()),
        None if args.root == Path::new("/") => Bus::Address(crate::os::systemd::system_bus_address()),
        None => Bus::Skip(format!(
            "--root is {}, not /: the host's logind is not told about a drop-in under another root (pass --system-bus-address to force)",
            args.root.display()
        )),
    }
}

/// `--config imds://user-data`: the agent's config is in the instance's user data.
pub(crate) const USER_DATA_SOURCE: &str = "imds://user-data";

/// No `--config` source held a config: nothing was done (exit status 4, which the packaged
/// unit counts as success, so that a node launched without the agent's config boots as usual).
#[derive(Debug, thiserror::Error)]
#[error("no config: {}; nothing was done. Give the config in the user data (a MIME part of type {} or the whole user data as the JSON config) or in a file", .tried.join("; "), userdata::AGENT_MEDIA_TYPE)]
pub struct NoConfig {
    pub tried: Vec<String>,
}

/// The config from the first `--config` source that holds one, and what was read of the
/// instance on the way (the user data, read once). With several sources a missing file is
/// passed over; with one it is an error, as it always was.
async fn load_config(args: &InitArgs) -> Result<(config::Config, Prefetched)> {
    let several = args.config.len() > 1;
    let mut read = Prefetched::default();
    let mut tried = Vec::new();
    for source in &args.config {
        if source.as_os_str() != USER_DATA_SOURCE {
            if several && source.as_os_str() != "-" && !source.exists() {
                tried.push(format!("{} does not exist", source.display()));
                continue;
            }
            return Ok((config::load(source)?, read));
        }
        let user_data = match &args.metadata {
            Some(file) => {
                let (md, user_data) = crate::instance::metadata::load_file_and_user_data(file)?;
                read.metadata = Some(md);
                match user_data {
                    Some(u) => Some(u),
                    None => {
                        tried.push(format!(
                            "the metadata file {} gives no userData",
                            file.display()
                        ));
                        continue;
                    }
                }
            }
            None => {
                if read.imds.is_none() {
                    let deadline =
                        Duration::from_millis(config::ImdsSettings::default().deadline_ms);
                    let endpoints = imds::candidates(None);
                    let client = imds::first_answering(&endpoints, false, deadline).await?;
                    let user_data = imds::user_data(&client, deadline).await?;
                    read.imds = Some(ImdsRead { client, user_data });
                }
                read.imds
                    .as_ref()
                    .and_then(|r| r.user_data.bytes())
                    .map(<[u8]>::to_vec)
            }
        };
        let Some(user_data) = user_data else {
            tried.push("the instance has no user data".into());
            continue;
        };
        match userdata::agent_config(&user_data)
            .with_context(|| format!("reading the config from {USER_DATA_SOURCE}"))?
        {
            Some(found) => {
                let name = format!("{USER_DATA_SOURCE} ({})", found.at);
                return Ok((config::parse(&found.text, &name)?, read));
            }
            None => tried.push(format!(
                "the user data holds no eks-nodeinit config (no {} part, and not the JSON config)",
                userdata::AGENT_MEDIA_TYPE
            )),
        }
    }
    Err(NoConfig { tried }.into())
}

pub async fn init(args: &InitArgs) -> Result<()> {
    let (c, read) = load_config(args).await?;
    let (spec, findings) = spec::resolve(&c);
    if !findings.is_empty() {
        // Report every problem, in the config and on this node, before touching IMDS.
        let facts = gather::node(&args.root, &spec, None, InstanceTags::Unknown);
        let mut all = findings.0;
        all.extend(plan::findings(&spec, &facts));
        return Err(Invalid(all).into());
    }
    // Exactly one run plans and applies: the lock is held from before the facts are read.
    let run_lock = if args.dry_run {
        None
    } else {
        Some(lock::take(&args.root, false)?)
    };
    // The EC2 client's trust store loads while IMDS answers.
    let apply = !args.dry_run;
    let bus = bus_for(args);
    // The node's resolvers first: discovery and the checks resolve names through them.
    let (early_steps, early) = match apply {
        true => before_discovery(args, &spec, &bus).await?,
        false => Default::default(),
    };
    let _warm = (apply && spec.tagging.enabled).then(crate::aws::ec2::warm_up);
    let instance = gather::instance(args.metadata.as_deref(), &spec, &args.root, read).await?;
    let ec2 = ready_ec2(&spec, &instance, apply);
    let facts = gather::facts(&spec, &args.root, instance).await;
    let mut plan = plan::build(&spec, &facts)?;
    if !early_steps.is_empty() && plan.early.is_empty() {
        plan.early = early_steps;
        plan.early_done = true;
    }
    if args.dry_run {
        plan.results = exec::checks::local(&args.root, &plan).await;
    }
    print!(
        "{}",
        match args.output {
            Output::Text => plan.to_text(),
            Output::Json => plan.to_json(),
        }
    );
    if args.dry_run {
        return Ok(());
    }
    exec::execute(&args.root, &plan, &bus, run_lock.as_ref(), ec2, early).await
}

/// The steps before discovery (the node's resolvers, `network`), planned from the node's files
/// and run before the instance and the cluster are read; none without `network`.
async fn before_discovery(
    args: &InitArgs,
    spec: &Spec,
    bus: &Bus,
) -> Result<(Vec<plan::Step>, Report)> {
    if spec.network.is_none() {
        return Ok(Default::default());
    }
    let facts = gather::node(&args.root, spec, None, InstanceTags::Unknown);
    let steps = plan::before_discovery(spec, &facts)?;
    for s in &steps {
        tracing::info!("before discovery: {}", s.describe());
    }
    let report = exec::before_discovery(&args.root, &steps, bus).await?;
    Ok((steps, report))
}

/// The EC2 client made ready while the node is read, planned and staged (reads only, off the
/// path to the tag call), for a run that applies its plan and will likely tag. A dry run never
/// tags, so it makes none: no AWS config or credentials read for a call it will not make.
fn ready_ec2(spec: &Spec, instance: &gather::Instance, apply: bool) -> Option<ReadyClient> {
    let region = &instance.metadata.region;
    (apply && crate::plan::aspects::name_tag::likely(&spec.tagging, &instance.tags)).then(|| {
        ReadyClient::start(
            region,
            spec.tagging.ec2_endpoint.as_deref(),
            spec.agent_transport(region, &instance.endpoints),
        )
    })
}

/// The background continuation: its job as JSON on stdin; keep trying until the deadline, then
/// record the outcome in the report (after the foreground run has released the lock).
pub async fn tag_continue(root: &Path) -> Result<()> {
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .context("reading the tagging job from standard input")?;
    let c: Continuation =
        serde_json::from_str(&input).context("the tagging job on standard input")?;
    // The calls go as the run's did: the job's transport says where it found IMDS, its names.
    let (r, calls) = tagging::background(
        &c.job,
        Duration::from_millis(c.initial_delay_ms),
        Duration::from_millis(c.deadline_ms),
    )
    .await;
    match &r {
        Ok(o) => tracing::info!(?o, value = %c.job.value, "Name tag in place (background)"),
        Err(e) => tracing::error!("{e}"),
    }
    let _lock = lock::take(root, true)?;
    let mut report = Report::for_update(root);
    let record = TaggingRecord {
        result: match &r {
            Ok(o) => o.clone().into(),
            Err(e) => TagResult::Failed {
                error: e.to_string(),
            },
        },
        calls: Some(calls),
        key: c.job.key.clone(),
        value: c.job.value.clone(),
        background: true,
        finished_at_unix_ms: Some(now_ms()),
    };
    report.set_property("tagging", &record);
    report.write(root, &[])?;
    r.map(|_| ()).map_err(Into::into)
}

/// `await-service`: wait for the instance to go into service, then run the agent's unit again.
pub async fn await_service(a: &crate::commands::cli::AwaitServiceArgs) -> Result<()> {
    let w = crate::commands::await_service::Waiter {
        root: a.root.clone(),
        unit: a.unit.clone(),
        interval: Duration::from_millis(a.interval_ms),
        bus_address: a
            .system_bus_address
            .clone()
            .unwrap_or_else(crate::os::systemd::system_bus_address),
    };
    Ok(crate::commands::await_service::run(&w).await?)
}

/// `complete-hook`: complete this boot's launch lifecycle hook once the node is ready.
pub async fn complete_hook(a: &crate::commands::cli::CompleteHookArgs) -> Result<()> {
    let c = crate::commands::after::Completer {
        root: a.root.clone(),
        bus_address: a
            .system_bus_address
            .clone()
            .unwrap_or_else(crate::os::systemd::system_bus_address),
        kubelet_wait: Duration::from_secs(a.kubelet_wait_sec),
        deadline: Duration::from_secs(a.deadline_sec),
        policy: crate::base::retry::RetryPolicy::default(),
        poll: Duration::from_millis(a.poll_ms),
        heartbeat: Duration::from_secs(a.heartbeat_sec),
        retire_attempts: a.retire_attempts,
        retire_retry: Duration::from_millis(a.retire_retry_ms),
    };
    Ok(crate::commands::after::run(&c).await?)
}

/// `status`: the report's `join` section, for a person or (`--output json`) for tools. Exit 0
/// when the node joined (or was handed off with `verify.join: off`) and its launch hook (if
/// any) was completed; 1 otherwise: not joined, no verdict yet, a hook left uncompleted, or no
/// report.
pub fn status(a: &crate::commands::cli::StatusArgs) -> Result<()> {
    let path = crate::os::fsutil::under(&a.root, crate::exec::report::REPORT_PATH);
    let report = match Report::load(&a.root) {
        Ok(Some(r)) => r,
        Ok(None) => anyhow::bail!(
            "no report at {}: `eks-nodeinit init` has not run on this node (or --root is wrong)",
            path.display()
        ),
        Err(why) => anyhow::bail!(
            "the report at {} cannot be read ({why}): run `eks-nodeinit init` again to write a new one",
            path.display()
        ),
    };
    let join: crate::verify::record::JoinRecord = report.property("join").unwrap_or_default();
    let checks: std::collections::BTreeMap<String, crate::verify::CheckResult> = report
        .property(crate::exec::checks::CHECKS)
        .unwrap_or_default();
    let join = join.with_checks(checks.into_values());
    match a.output {
        Output::Text => {
            println!("instance: {}", report.instance_id);
            println!(
                "hand-off: {}",
                if report.handoff.is_empty() {
                    "none"
                } else {
                    &report.handoff
                }
            );
            print!("{}", join.to_text());
            let after = report.steps.iter();
            for s in after.filter(|s| s.step.starts_with(crate::exec::after::PREFIX)) {
                println!("{}: {}", s.step, s.outcome);
            }
        }
        Output::Json => println!(
            "{}",
            serde_json::to_string_pretty(&join.for_tools()).unwrap_or_default()
        ),
    }
    join.judged().map_err(anyhow::Error::msg)
}

/// The packaged unit's first-boot marker: `ConditionPathExists=!` on it keeps the unit from
/// running at later boots.
pub const DONE_MARKER: &str = "/var/lib/eks-nodeinit/done";

/// `mark-done`: write the first-boot marker, unless this boot held the hand-off for a warm pool
/// (then the boot after the start into service must run the unit again).
pub fn mark_done(root: &Path) -> Result<()> {
    let held = crate::os::fsutil::under(root, crate::instance::lifecycle::HOLD_MARKER);
    let marker = crate::os::fsutil::read_optional(&held)
        .context("cannot tell whether this boot held the hand-off")?;
    if let Some(hold) = marker {
        tracing::info!(
            "the hand-off was held in this boot ({}: {}): the first boot is not done; the agent runs again",
            held.display(),
            crate::base::text::printable(hold.trim())
        );
        return Ok(());
    }
    let done = crate::os::fsutil::under(root, DONE_MARKER);
    crate::os::fsutil::write_atomic(&done, b"", 0o644)?;
    tracing::info!(marker = %done.display(), "first boot done");
    Ok(())
}

/// `pin-sandbox-image`: containerd's sandbox image present, and pinned where it was not.
pub async fn pin_sandbox_image(a: &crate::commands::cli::PinSandboxArgs) -> Result<()> {
    crate::commands::pin_sandbox::run(&a.root, &a.ctr).await?;
    Ok(())
}

/// `gate`: this boot's checks before the kubelet starts; failed checks stop nothing.
pub async fn gate(root: &Path) -> Result<()> {
    crate::commands::gate::run(root).await?;
    Ok(())
}

/// `bake-images`: pull images into containerd's store and record them for every boot's check.
pub async fn bake_images(a: &crate::commands::cli::BakeImagesArgs) -> Result<()> {
    let b = crate::commands::bake_images::Bake {
        root: &a.root,
        ctr: &a.ctr,
        images: &a.image,
        plain_http: a.plain_http,
    };
    let cache = crate::commands::bake_images::run(&b).await?;
    println!(
        "{} image(s) in containerd's store, recorded in {}",
        cache.images.len(),
        crate::plan::aspects::containerd::config::IMAGE_CACHE
    );
    Ok(())
}

/// `validate`: the config alone.
pub fn validate_cmd(path: &Path) -> Result<()> {
    if path.as_os_str() == USER_DATA_SOURCE {
        anyhow::bail!("validate reads a file or standard input; to check the config in the user data, run `init --dry-run --config {USER_DATA_SOURCE}` on the instance, or with `--metadata FILE` whose userData is the user data");
    }
    let spec = load_spec(path)?;
    if let Some(w) = crate::spec::registration::startup_advice(&spec.registration) {
        eprintln!("warning: {w}");
    }
    println!(
        "{}: valid ({})",
        if path == Path::new("-") {
            PathBuf::from("<stdin>")
        } else {
            path.to_path_buf()
        }
        .display(),
        summary(&spec)
    );
    Ok(())
}

/// What `validate` says of a valid config, in words: `role: master; 2 labels, 1 taint, no sysctls`.
fn summary(spec: &Spec) -> String {
    let role = match spec.role {
        config::Role::Master => "master",
        config::Role::Scaler => "scaler",
        config::Role::None => "none set",
    };
    format!(
        "role: {role}; {}, {}, {}",
        counted(spec.registration.labels.len(), "label"),
        counted(spec.registration.taints.len(), "taint"),
        counted(spec.sysctls.len(), "sysctl")
    )
}

/// `no labels`, `1 label`, `2 labels`.
fn counted(n: usize, noun: &str) -> String {
    match n {
        0 => format!("no {noun}s"),
        1 => format!("1 {noun}"),
        n => format!("{n} {noun}s"),
    }
}

/// `max-pods`: the computation for an instance type, offline.
pub fn max_pods(a: &crate::commands::cli::MaxPodsArgs) -> Result<()> {
    let answer = crate::base::podcap::explain::explain(&a.question())?;
    match a.output {
        crate::commands::cli::Output::Text => print!("{}", answer.to_text()),
        crate::commands::cli::Output::Json => println!(
            "{}",
            serde_json::to_string_pretty(&answer).unwrap_or_default()
        ),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dry run read the AWS config and the role's credentials for a tag call it never makes
    /// (the SDK's warnings about the config file then reached standard error whenever the
    /// process outlived that task: test-aarch64 failed on it under qemu).
    #[tokio::test]
    async fn a_dry_run_makes_no_ec2_client_ready_and_a_run_that_applies_does() {
        std::env::set_var("AWS_ACCESS_KEY_ID", "testing");
        std::env::set_var("AWS_SECRET_ACCESS_KEY", "testing");
        let c = config::parse(
            &std::fs::read_to_string("examples/master.json").unwrap(),
            "master.json",
        )
        .unwrap();
        let (spec, findings) = spec::resolve(&c);
        assert!(findings.is_empty());
        let instance = gather::Instance {
            metadata: crate::instance::metadata::load_file(Path::new("examples/metadata.json"))
                .unwrap(),
            tags: InstanceTags::Unknown,
            cluster: crate::discovery::ClusterFact::from_spec(&spec.cluster),
            source: gather::MetadataSource::Imds,
            endpoints: Default::default(),
        };
        for apply in [false, true] {
            let ready = ready_ec2(&spec, &instance, apply);
            assert_eq!(ready.is_some(), apply, "apply: {apply}");
        }
    }
}
