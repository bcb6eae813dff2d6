//! The `init` and `tag-continue` commands: inputs → plan → apply → hand-off.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::time::Instant;

use crate::apply::{self, Bus, Report};
use crate::cli::{InitArgs, Output, TagContinueArgs};
use crate::config::{self, Config};
use crate::ec2::{Calls, Ec2, RetryPolicy, TagError, TagOutcome};
use crate::fsutil::under;
use crate::handoff;
use crate::imds;
use crate::metadata::{self, Metadata};
use crate::plan::{self, Step};
use crate::tagging::{self, Foreground};
use crate::validate::{self, Invalid};

pub const TAG_LOG: &str = "/var/log/eks-nodeinit-tagging.log";

/// Load and statically check the config: parse errors and findings both come back as errors
/// that `main` maps to exit code 3.
pub fn load_config(path: &Path) -> Result<Config> {
    let c = config::load(path)?;
    let findings = validate::check_config(&c);
    if !findings.is_empty() {
        return Err(Invalid(findings).into());
    }
    Ok(c)
}

async fn read_metadata(args: &InitArgs, c: &Config) -> Result<(Metadata, bool)> {
    if let Some(f) = &args.metadata {
        return Ok((metadata::load_file(f)?, false));
    }
    let endpoint = imds::resolve_endpoint(c.imds.endpoint.as_deref());
    let client = imds::ImdsClient::new(&endpoint, c.imds.allow_v1_fallback)?;
    let md = imds::fetch(&client, Duration::from_millis(c.imds.deadline_ms)).await?;
    Ok((md, true))
}

fn bus_for(args: &InitArgs) -> Bus {
    match &args.system_bus_address {
        Some(a) => Bus::Address(a.clone()),
        None if args.root == Path::new("/") => Bus::Address(crate::logind::system_bus_address()),
        None => Bus::Skip(format!(
            "--root is {}, not /: the host's logind is not told about a drop-in under another root (pass --system-bus-address to force)",
            args.root.display()
        )),
    }
}

pub async fn init(args: &InitArgs) -> Result<()> {
    let c = config::load(&args.config)?;
    // Invalid config: report every problem, static and on this node, before touching IMDS.
    if !validate::check_config(&c).is_empty() {
        return Err(Invalid(plan::check(&args.root, &c)).into());
    }
    // The EC2 client's trust store loads while IMDS answers.
    let _warm = c.tagging.enabled.then(crate::ec2::warm_up);
    let (mut md, from_imds) = read_metadata(args, &c).await?;
    tracing::debug!(instance_id = %md.instance_id, region = %md.region, "instance metadata read");

    // With instance-metadata tags off, the ASG name (and current Name) come from DescribeTags.
    if from_imds && c.tagging.enabled && md.tags.is_none() {
        let budget = Duration::from_millis(c.tagging.sync_budget_ms);
        let mut ec2 = Ec2::new(&md.region, c.tagging.ec2_endpoint.as_deref()).await;
        match ec2
            .describe_tags(
                &md.instance_id,
                RetryPolicy::default(),
                Instant::now() + budget,
            )
            .await
        {
            Ok(tags) => {
                md.autoscaling_group_name = md
                    .autoscaling_group_name
                    .clone()
                    .or_else(|| tags.get("aws:autoscaling:groupName").cloned());
                md.tags = Some(tags);
            }
            Err(e) => tracing::warn!("cannot read the instance's tags: {e}"),
        }
    }

    let plan = plan::build(&args.root, &c, &md)?;
    let rendered = match args.output {
        Output::Text => plan.to_text(),
        Output::Json => plan.to_json(),
    };
    print!("{rendered}");
    if args.dry_run {
        return Ok(());
    }

    let _lock = apply::lock(&args.root, false)?;
    let mut report = Report {
        version: env!("CARGO_PKG_VERSION").into(),
        instance_id: md.instance_id.clone(),
        family: format!("{:?}", plan.family).to_lowercase(),
        started_at_unix_ms: apply::now_ms(),
        warnings: plan.warnings.clone(),
        ..Default::default()
    };
    for w in &plan.warnings {
        tracing::warn!("{w}");
    }

    // Tagging runs beside the local steps, under its own budget.
    let tag_step = plan.steps.iter().find_map(|s| match s {
        Step::Tag { key, value, .. } => Some((key.clone(), value.clone())),
        _ => None,
    });
    let budget = Duration::from_millis(c.tagging.sync_budget_ms);
    let sync_deadline = Instant::now()
        + if c.tagging.required {
            Duration::from_secs(c.tagging.background_deadline_sec)
        } else {
            budget
        };
    let spread_delay = tagging::draw_spread(Duration::from_secs(c.tagging.spread_sec));
    let tag_task = tag_step.clone().map(|(key, value)| {
        let job = tagging::Job {
            region: md.region.clone(),
            endpoint: c.tagging.ec2_endpoint.clone(),
            instance_id: md.instance_id.clone(),
            key,
            value,
            known: md.tags.clone(),
            policy: RetryPolicy::default(),
        };
        let window = sync_deadline - Instant::now();
        let kept = job.clone();
        (
            tokio::spawn(async move { tagging::foreground(&job, spread_delay, window).await }),
            kept,
        )
    });

    let bus = bus_for(args);
    if let Err(e) = apply::apply_local(&args.root, &plan, &bus, &mut report).await {
        // Record how far it got before failing; the error itself is what the caller sees.
        report.steps.push(apply::StepOutcome {
            step: "apply".into(),
            outcome: format!("failed: {e}"),
        });
        report.finished_at_unix_ms = apply::now_ms();
        if let Err(w) = apply::write_report(&args.root, &plan, &report) {
            tracing::error!("cannot write the report either: {w}");
        }
        return Err(e.into());
    }

    if let (Some((task, job)), Some((key, value))) = (tag_task, tag_step) {
        // `foreground` bounds itself by the budget; a join error means it panicked.
        let (fg, calls) = task.await.unwrap_or_else(|join| {
            let e = TagError::Fatal {
                op: "CreateTags",
                instance_id: md.instance_id.clone(),
                message: join.to_string(),
            };
            (Foreground::Failed(e), Default::default())
        });
        match fg {
            Foreground::Done(o) => {
                tracing::info!(?o, %value, "Name tag in place");
                report.tagging = Some(
                    serde_json::json!({"result": o, "calls": calls, "key": key, "value": value}),
                );
            }
            Foreground::Failed(e) => {
                report.tagging = Some(
                    serde_json::json!({"result": {"outcome": "failed", "error": e.to_string()}, "calls": calls}),
                );
                if c.tagging.required {
                    apply::write_report(&args.root, &plan, &report)?;
                    return Err(anyhow::Error::new(e).context("tagging.required is on"));
                }
                tracing::error!("{e}");
                report.warnings.push(e.to_string());
            }
            Foreground::Pending { .. } if c.tagging.required => {
                apply::write_report(&args.root, &plan, &report)?;
                anyhow::bail!(
                    "tagging.required is on and the Name tag was not set within {} s",
                    c.tagging.background_deadline_sec
                );
            }
            Foreground::Pending {
                initial_delay,
                abandoned,
            } => {
                let pid = spawn_continuation(
                    &args.root,
                    &job.continued(abandoned),
                    c.tagging.background_deadline_sec,
                    initial_delay,
                )?;
                tracing::warn!(
                    pid,
                    "tagging not done within {} ms; continuing in the background",
                    c.tagging.sync_budget_ms
                );
                report.tagging = Some(
                    serde_json::json!({"result": {"outcome": "background", "pid": pid}, "key": key, "value": value}),
                );
            }
        }
    } else if let Some(value) = c
        .tagging
        .enabled
        .then(|| md.tags.as_ref().and_then(|t| t.get("Name")))
        .flatten()
    {
        // No tag step: the Name already holds the value. Recorded as a foreground outcome
        // with no calls, so that the report of a second run still answers "is it tagged?".
        report.tagging = Some(serde_json::json!({
            "result": TagOutcome::AlreadySet, "calls": Calls::default(), "key": "Name", "value": value
        }));
    }

    report.handoff = match &plan.family {
        handoff::Family::Al2 => "exec bootstrap.sh".into(),
        handoff::Family::Al2023 => format!("NodeConfig at {}", handoff::NODECONFIG_DROPIN),
    };
    report.finished_at_unix_ms = apply::now_ms();
    let rpath = apply::write_report(&args.root, &plan, &report)?;
    tracing::info!(report = %rpath.display(), "report written");

    for s in &plan.steps {
        if let Step::ExecBootstrap { argv } = s {
            tracing::info!(path = %argv[0], "handing off to bootstrap.sh");
            handoff::exec(argv)?;
        }
    }
    Ok(())
}

/// Start `eks-nodeinit tag-continue` in its own session, logging to a file, so it outlives
/// the hand-off (exec of bootstrap.sh) and the unit's process.
fn spawn_continuation(
    root: &Path,
    job: &tagging::Job,
    deadline_sec: u64,
    initial_delay: Duration,
) -> Result<u32> {
    use std::os::unix::process::CommandExt;
    let log = under(root, TAG_LOG);
    if let Some(d) = log.parent() {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .with_context(|| format!("opening {}", log.display()))?;
    let exe = std::env::current_exe().context("locating the eks-nodeinit binary")?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("tag-continue")
        .arg("--root")
        .arg(root)
        .arg("--region")
        .arg(&job.region)
        .arg("--instance-id")
        .arg(&job.instance_id)
        .arg("--value")
        .arg(&job.value)
        .arg("--deadline-sec")
        .arg(deadline_sec.to_string())
        .arg("--initial-delay-ms")
        .arg(initial_delay.as_millis().to_string());
    if job.known.is_some() {
        cmd.arg("--tags-known");
    }
    if let Some(ep) = &job.endpoint {
        cmd.arg("--endpoint").arg(ep);
    }
    cmd.stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out);
    // SAFETY: setsid is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .context("starting the background tagging continuation")?;
    Ok(child.id())
}

/// The background continuation: keep trying until the deadline, then record the outcome in
/// the report (after the foreground run has released the lock).
pub async fn tag_continue(a: &TagContinueArgs) -> Result<()> {
    let job = tagging::Job {
        region: a.region.clone(),
        endpoint: a.endpoint.clone(),
        instance_id: a.instance_id.clone(),
        key: "Name".into(),
        value: a.value.clone(),
        // CreateTags overwrites, so when the Name was already known to differ, reading the
        // tags again would only cost a call against a throttled account.
        known: a.tags_known.then(BTreeMap::new),
        policy: RetryPolicy::default(),
    };
    let (r, calls) = tagging::background(
        &job,
        Duration::from_millis(a.initial_delay_ms),
        Duration::from_secs(a.deadline_sec),
    )
    .await;
    let result = match &r {
        Ok(o) => serde_json::to_value(o)?,
        Err(e) => serde_json::json!({"outcome": "failed", "error": e.to_string()}),
    };
    match &r {
        Ok(o) => tracing::info!(?o, value = %a.value, "Name tag in place (background)"),
        Err(e) => tracing::error!("{e}"),
    }
    // Wait for the foreground run to release the lock, then update the report.
    let _lock = apply::lock(&a.root, true)?;
    let rpath = under(&a.root, apply::REPORT_PATH);
    let mut report: serde_json::Value = std::fs::read_to_string(&rpath)
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or_else(|| serde_json::json!({}));
    report["tagging"] = serde_json::json!({
        "result": result,
        "calls": calls,
        "key": "Name",
        "value": a.value,
        "background": true,
        "finishedAtUnixMs": apply::now_ms() as u64,
    });
    let mut text = serde_json::to_string_pretty(&report)?;
    text.push('\n');
    crate::fsutil::write_atomic(&rpath, text.as_bytes(), 0o644)?;
    r.map(|_| ()).map_err(Into::into)
}

/// `validate`: the config alone.
pub fn validate_cmd(path: &Path) -> Result<()> {
    let c = load_config(path)?;
    let labels: BTreeMap<_, _> = validate::effective_labels(&c).into_iter().collect();
    println!(
        "{}: valid (role {:?}; {} labels, {} taints, {} sysctls)",
        if path == Path::new("-") {
            PathBuf::from("<stdin>")
        } else {
            path.to_path_buf()
        }
        .display(),
        c.node_group.role,
        labels.len(),
        validate::effective_taints(&c).len(),
        c.sysctls.len()
    );
    Ok(())
}
