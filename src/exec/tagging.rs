//! The tagging policy around the EC2 calls: a foreground part that never outlasts the sync
//! budget (client construction included), and a background part (the `tag-continue` process)
//! that keeps going until its deadline. Each builds its own client, as the two run in separate
//! processes in production. The fleet benchmark drives these same two functions.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::time::Instant;

use crate::aws::ec2::{Calls, Ec2, TagError, TagOutcome};
use crate::aws::ec2::{TagResult, TaggingRecord};
use crate::base::retry::RetryPolicy;
use crate::exec::report::Report;
use crate::facts::{InstanceTags, TagState};
use crate::os::fsutil::under;
use crate::plan::step::Step;
use crate::plan::Plan;
use crate::spec::tagging::TaggingSpec;

/// One instance's tagging job. The background continuation receives it as JSON on its
/// standard input (`Continuation`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Job {
    pub region: String,
    /// EC2 endpoint override; `None`: `AWS_ENDPOINT_URL_EC2` or the SDK default.
    pub endpoint: Option<String>,
    pub instance_id: String,
    pub key: String,
    pub value: String,
    /// Tags already known (IMDS tags or an earlier DescribeTags); unknown: read them first.
    pub known: InstanceTags,
    pub policy: RetryPolicy,
    /// How the calls reach AWS (the config's `proxy` and `trust`): a proxy URL may hold
    /// credentials, so a job goes to the background process on its standard input, never in its
    /// arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<crate::aws::Transport>,
}

/// An EC2 client being made ready beside the rest of the run (its config loaded and the role's
/// credentials resolved: reads only, changing nothing), for the tag call in its region through
/// its endpoint. The command starts it; the executor hands it to the tagging session.
pub struct ReadyClient {
    region: String,
    endpoint: Option<String>,
    task: tokio::task::JoinHandle<Ec2>,
}

impl ReadyClient {
    /// Start making the client ready, off the path to the tag call.
    pub fn start(
        region: &str,
        endpoint: Option<&str>,
        transport: Option<crate::aws::Transport>,
    ) -> ReadyClient {
        let (r, e) = (region.to_string(), endpoint.map(String::from));
        let task = tokio::spawn({
            let (r, e) = (r.clone(), e.clone());
            async move { Ec2::ready(&r, e.as_deref(), transport.as_ref()).await }
        });
        ReadyClient {
            region: r,
            endpoint: e,
            task,
        }
    }

    /// The client, when it was made for this region and endpoint (and its task did not fail).
    async fn client_for(self, region: &str, endpoint: Option<&str>) -> Option<Ec2> {
        if self.region != region || self.endpoint.as_deref() != endpoint {
            return None;
        }
        self.task.await.ok()
    }
}

/// The client made ready for this region and endpoint, else a new one.
async fn client(
    ready: Option<ReadyClient>,
    region: &str,
    endpoint: Option<&str>,
    transport: Option<&crate::aws::Transport>,
) -> Ec2 {
    if let Some(ready) = ready {
        if let Some(ec2) = ready.client_for(region, endpoint).await {
            return ec2;
        }
    }
    Ec2::new(region, endpoint, transport).await
}

impl Job {
    /// The job the background part continues with. After a call cut off in flight a
    /// CreateTags may have landed, so what was known is dropped and the tags are read first.
    pub fn continued(&self, abandoned: bool) -> Job {
        Job {
            known: if abandoned {
                InstanceTags::Unknown
            } else {
                self.known.clone()
            },
            ..self.clone()
        }
    }

    /// Take the client made ready (else build one) and make the tag hold the value, until
    /// `deadline`.
    async fn run(
        &self,
        ready: Option<ReadyClient>,
        deadline: Instant,
    ) -> (Result<TagOutcome, TagError>, Calls) {
        let mut ec2 = client(
            ready,
            &self.region,
            self.endpoint.as_deref(),
            self.transport.as_ref(),
        )
        .await;
        let r = ensure_tag(
            &mut ec2,
            &self.instance_id,
            &self.key,
            &self.value,
            &self.known,
            self.policy,
            deadline,
        )
        .await;
        (r, ec2.calls)
    }
}

/// Make the instance's `key` tag equal `value`: read the current tags unless the caller knows
/// them, and call CreateTags only when they differ. The tagging policy; `ec2` only calls.
pub async fn ensure_tag(
    ec2: &mut Ec2,
    instance_id: &str,
    key: &str,
    value: &str,
    known: &InstanceTags,
    policy: RetryPolicy,
    deadline: Instant,
) -> Result<TagOutcome, TagError> {
    let current = match known.get(key) {
        TagState::Unknown => {
            let tags = ec2.describe_tags(instance_id, policy, deadline).await?;
            InstanceTags::Known(tags).get(key)
        }
        known => known,
    };
    if current == TagState::Is(value.to_string()) {
        return Ok(TagOutcome::AlreadySet);
    }
    ec2.create_tag(instance_id, key, value, policy, deadline)
        .await?;
    Ok(TagOutcome::Created)
}

/// What the background continuation is given: the job, when to start and how long to try.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Continuation {
    pub job: Job,
    pub initial_delay_ms: u64,
    pub deadline_ms: u64,
}

/// What the foreground part came to.
#[derive(Debug)]
pub enum Foreground {
    Done(TagOutcome),
    Failed(TagError),
    /// Not done within the budget; the background continues after `initial_delay`.
    Pending {
        initial_delay: Duration,
        /// A call was cut off in flight: a CreateTags may have landed, so the background
        /// reads the tags before writing rather than trusting what was known.
        abandoned: bool,
    },
}

/// The random first-call delay: uniform in `[0, spread]`, so a fleet launched at once reaches
/// the account's CreateTags bucket at its refill rate (`tagging.spreadSec`).
pub fn draw_spread(spread: Duration) -> Duration {
    if spread.is_zero() {
        return Duration::ZERO;
    }
    let ms = u64::try_from(spread.as_millis()).unwrap_or(u64::MAX);
    Duration::from_millis(rand::random_range(0..=ms))
}

/// Try within `budget`, which is hard: an attempt still in flight at its end is abandoned. A
/// job with a spread `delay` makes no call here at all; the background part waits the delay,
/// so the hand-off never waits for the spread. The calls are those of finished attempts.
pub async fn foreground(job: &Job, delay: Duration, budget: Duration) -> (Foreground, Calls) {
    foreground_with(job, None, delay, budget).await
}

/// [`foreground`] with the client made ready for it, if any.
async fn foreground_with(
    job: &Job,
    ready: Option<ReadyClient>,
    delay: Duration,
    budget: Duration,
) -> (Foreground, Calls) {
    if !delay.is_zero() {
        return (
            Foreground::Pending {
                initial_delay: delay,
                abandoned: false,
            },
            Calls::default(),
        );
    }
    let deadline = far(budget);
    match tokio::time::timeout_at(deadline, job.run(ready, deadline)).await {
        Ok((Ok(o), calls)) => (Foreground::Done(o), calls),
        Ok((Err(TagError::Deadline { .. }), calls)) => (
            Foreground::Pending {
                initial_delay: Duration::ZERO,
                abandoned: false,
            },
            calls,
        ),
        Ok((Err(e), calls)) => (Foreground::Failed(e), calls),
        Err(_) => (
            Foreground::Pending {
                initial_delay: Duration::ZERO,
                abandoned: true,
            },
            Calls::default(),
        ),
    }
}

/// Keep trying for `deadline` (counted from now), after `initial_delay`.
pub async fn background(
    job: &Job,
    initial_delay: Duration,
    deadline: Duration,
) -> (Result<TagOutcome, TagError>, Calls) {
    background_with(job, None, initial_delay, deadline).await
}

/// [`background`] with the client made ready for it, if any.
async fn background_with(
    job: &Job,
    ready: Option<ReadyClient>,
    initial_delay: Duration,
    deadline: Duration,
) -> (Result<TagOutcome, TagError>, Calls) {
    let end = far(deadline);
    tokio::time::sleep(initial_delay).await;
    job.run(ready, end).await
}

/// `now + d`, saturating far in the future instead of overflowing.
fn far(d: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(d)
        .unwrap_or_else(|| now + Duration::from_secs(86_400 * 365))
}

// ---------------------------------------------------------------------------------------------
// The session: the tag step run beside the local steps, within its policy.

/// Where the background tagging continuation logs.
pub(crate) const TAG_LOG: &str = "/var/log/eks-nodeinit-tagging.log";

/// Tagging under way beside the local steps.
pub(crate) struct Session {
    job: Job,
    policy: TaggingSpec,
    task: TagTask,
}

enum TagTask {
    /// Bounded by the sync budget; may continue in the background.
    Foreground(tokio::task::JoinHandle<(Foreground, Calls)>),
    /// `tagging.required`: the hand-off waits for it.
    Required(tokio::task::JoinHandle<(Result<TagOutcome, TagError>, Calls)>),
}

impl Session {
    /// Start the plan's tag step, if it has one: its spread drawn, then the foreground part
    /// under the sync budget, or, for a required tag, the whole job; with `ready`, the client
    /// the command made ready for it.
    pub fn start(plan: &Plan, ready: Option<ReadyClient>) -> Option<Session> {
        let (job, policy) = plan.steps.iter().find_map(|s| match s {
            Step::Tag {
                instance_id,
                key,
                value,
                how,
                ..
            } => Some((
                Job {
                    region: how.region.clone(),
                    endpoint: how.policy.ec2_endpoint.clone(),
                    instance_id: instance_id.clone(),
                    key: key.clone(),
                    value: value.clone(),
                    known: how.known.clone(),
                    policy: Default::default(),
                    transport: how.transport.as_deref().cloned(),
                },
                how.policy.clone(),
            )),
            _ => None,
        })?;
        let delay = draw_spread(policy.spread);
        let j = job.clone();
        let task = if policy.required {
            let deadline = policy.background_deadline;
            // A required tag is worth the wait: the spread delay is waited out here.
            TagTask::Required(tokio::spawn(async move {
                background_with(&j, ready, delay, deadline).await
            }))
        } else {
            let budget = policy.sync_budget;
            TagTask::Foreground(tokio::spawn(async move {
                foreground_with(&j, ready, delay, budget).await
            }))
        };
        Some(Session { job, policy, task })
    }

    /// Record what tagging came to; a required tag that failed comes back as the error.
    pub async fn finish(self, root: &Path, report: &mut Report) -> Option<TagError> {
        let (result, calls, failure) = match self.task {
            TagTask::Required(h) => match h.await {
                Ok((Ok(o), calls)) => (o.into(), Some(calls), None),
                Ok((Err(e), calls)) => (failed(&e), Some(calls), Some(e)),
                Err(j) => (failed(&panicked(&self.job, j)), None, None),
            },
            TagTask::Foreground(h) => {
                let (fg, calls) = h.await.unwrap_or_else(|j| {
                    (Foreground::Failed(panicked(&self.job, j)), Calls::default())
                });
                let (result, calls) =
                    foreground_result(fg, calls, &self.job, &self.policy, root, report);
                (result, calls, None)
            }
        };
        if matches!(result, TagResult::Created | TagResult::AlreadySet) {
            tracing::info!(value = %self.job.value, "Name tag in place");
        }
        let record = TaggingRecord {
            result,
            calls,
            key: self.job.key,
            value: self.job.value,
            background: false,
            finished_at_unix_ms: None,
        };
        report.set_property("tagging", &record);
        failure
    }
}

fn panicked(job: &Job, join: tokio::task::JoinError) -> TagError {
    TagError::Fatal {
        op: "CreateTags",
        instance_id: job.instance_id.clone(),
        message: join.to_string(),
    }
}

/// What the foreground part came to, its continuation started when it did not finish.
fn foreground_result(
    fg: Foreground,
    calls: Calls,
    job: &Job,
    policy: &TaggingSpec,
    root: &Path,
    report: &mut Report,
) -> (TagResult, Option<Calls>) {
    match fg {
        Foreground::Done(o) => (o.into(), Some(calls)),
        Foreground::Failed(e) => {
            tracing::error!("{e}");
            report.warnings.push(e.to_string());
            (failed(&e), Some(calls))
        }
        Foreground::Pending {
            initial_delay,
            abandoned,
        } => {
            let job = job.continued(abandoned);
            match spawn_continuation(root, &job, policy, initial_delay) {
                Ok(pid) => {
                    tracing::warn!(
                        pid,
                        "tagging not done within {} ms; continuing in the background",
                        policy.sync_budget.as_millis()
                    );
                    (TagResult::Background { pid }, None)
                }
                Err(e) => {
                    let e = TagError::Fatal {
                        op: "CreateTags",
                        instance_id: job.instance_id.clone(),
                        message: format!("{e:#}"),
                    };
                    tracing::error!("{e}");
                    (failed(&e), Some(calls))
                }
            }
        }
    }
}

fn failed(e: &TagError) -> TagResult {
    TagResult::Failed {
        error: e.to_string(),
    }
}

/// Start `eks-nodeinit tag-continue` in its own session, logging to a file, so it outlives the
/// hand-off (exec of bootstrap.sh) and the unit's process. Its job goes as JSON on its stdin.
fn spawn_continuation(
    root: &Path,
    job: &Job,
    t: &TaggingSpec,
    initial_delay: Duration,
) -> Result<u32> {
    use std::io::Write;
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
        .stdin(Stdio::piped())
        .stdout(out.try_clone()?)
        .stderr(out);
    // SAFETY: setsid is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .context("starting the background tagging continuation")?;
    let c = Continuation {
        job: job.clone(),
        initial_delay_ms: u64::try_from(initial_delay.as_millis()).unwrap_or(u64::MAX),
        deadline_ms: u64::try_from(t.background_deadline.as_millis()).unwrap_or(u64::MAX),
    };
    let mut stdin = child.stdin.take().context("the continuation's stdin")?;
    serde_json::to_writer(&mut stdin, &c).context("handing the job to the continuation")?;
    stdin.flush()?;
    Ok(child.id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_client_made_ready_is_taken_only_for_its_region_and_endpoint() {
        // Static credentials: the default chain stops at the environment, never asks IMDS.
        std::env::set_var("AWS_ACCESS_KEY_ID", "testing");
        std::env::set_var("AWS_SECRET_ACCESS_KEY", "testing");
        let ep = Some("http://127.0.0.1:9");
        let ready = || ReadyClient::start("eu-west-1", ep, None);
        assert!(
            ready().client_for("us-east-1", ep).await.is_none(),
            "another region"
        );
        assert!(
            ready().client_for("eu-west-1", None).await.is_none(),
            "another endpoint"
        );
        let ec2 = ready().client_for("eu-west-1", ep).await;
        let ec2 = ec2.expect("made ready without a call");
        assert_eq!(ec2.calls, Calls::default());
    }
}
