//! The executor's part of verified join: the checks run (before any change in `fail` mode,
//! beside the changes in `warn` mode), their failures logged at error priority, the record
//! started for the report, and on a failed preflight in `fail` mode the launch hook completed
//! with `ABANDON` (the hand-off never comes; Auto Scaling replaces the instance at once).

use std::time::Duration;

use tokio::time::Instant;

use crate::aws::autoscaling::{complete_launch, Completed, HookResult};
use crate::base::retry::RetryPolicy;
use crate::config::PreflightMode;
use crate::exec::report::{now_ms, Outcome, Report, StepOutcome};
use crate::plan::step::Step;
use crate::plan::Plan;
use crate::verify::record::{JoinRecord, JoinVerdict};
use crate::verify::{preflight, Check, CheckResult, Verdict};

/// The checks of a plan, how they run, and the record they go into.
pub(crate) struct Preflight {
    pub checks: Vec<Check>,
    pub budget: Duration,
    pub mode: PreflightMode,
    pub record: Option<JoinRecord>,
    /// How the ABANDON reaches Auto Scaling: the config's proxy and CA bundles (before any
    /// change, the node's trust store and units have neither).
    pub transport: Option<crate::aws::Transport>,
}

impl Preflight {
    pub fn of(plan: &Plan, started_ms: u64) -> Preflight {
        let checks: Vec<Check> = plan
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Check(c) => Some(c.clone()),
                _ => None,
            })
            .collect();
        let joins = plan.steps.iter().any(
            |s| matches!(s, Step::File(f) if f.path.as_os_str() == crate::verify::proof::JOIN_JOB),
        );
        let record = (plan.preflight.is_some() || joins).then(|| {
            let mut r = JoinRecord::default();
            r.phase("agent started", started_ms);
            r.phase("planned", now_ms());
            r.preflight_mode = plan
                .preflight
                .and_then(|p| serde_json::to_value(p.mode).ok())
                .and_then(|v| v.as_str().map(String::from));
            r
        });
        let transport = checks.first().and_then(|c| c.context.transport());
        Preflight {
            transport,
            checks,
            budget: Duration::from_millis(plan.preflight.map_or(0, |p| p.budget_ms)),
            mode: plan.preflight.map_or(PreflightMode::Off, |p| p.mode),
            record,
        }
    }

    /// Run the checks (none: no results).
    pub async fn run(&self) -> Option<Vec<CheckResult>> {
        match self.checks.is_empty() {
            true => None,
            false => Some(preflight::run(&self.checks, self.budget).await),
        }
    }

    /// Log the results (failures at error priority), record them, and put each check's outcome
    /// in the report's steps ahead of the others (the plan lists the checks first); how many
    /// failed that stop the join.
    pub fn record(&mut self, results: Vec<CheckResult>, steps: &mut Vec<StepOutcome>) -> usize {
        let outcomes = results.iter().map(|r| StepOutcome {
            step: format!("check {}", r.check),
            outcome: match r.result {
                Verdict::Passed => Outcome::DoneWith(r.detail.clone()),
                Verdict::Failed => Outcome::Failed(r.line()),
                Verdict::Skipped | Verdict::NotRun => Outcome::Skipped(r.detail.clone()),
            },
        });
        steps.splice(0..0, outcomes);
        let mut failed = 0;
        for r in &results {
            match r.result {
                Verdict::Failed => {
                    failed += usize::from(!r.advisory);
                    tracing::error!(check = %r.check, cause = r.cause.as_deref().unwrap_or(""), ms = r.ms, "preflight: {}", r.line());
                }
                Verdict::Passed => {
                    tracing::info!(check = %r.check, ms = r.ms, "preflight: {}", r.detail)
                }
                _ => tracing::info!(check = %r.check, "preflight: {}", r.line()),
            }
        }
        if let Some(rec) = &mut self.record {
            rec.phase("preflight done", now_ms());
            rec.causes.extend(
                results
                    .iter()
                    .filter(|r| r.result == Verdict::Failed)
                    .map(CheckResult::line),
            );
            rec.preflight = results;
        }
        failed
    }

    /// In `fail` mode, a failed check ends the run before any change: the verdict recorded, the
    /// hook abandoned.
    pub async fn refuse(&mut self, plan: &Plan) {
        let hook = match &plan.hook {
            Some(job) => Some(abandon(job, self.transport.as_ref()).await),
            None => None,
        };
        if let Some(rec) = &mut self.record {
            rec.verdict = Some(JoinVerdict::PreflightFailed);
            rec.hook = hook;
            rec.phase("verdict", now_ms());
        }
    }

    pub fn is_fail_mode(&self) -> bool {
        self.mode == PreflightMode::Fail
    }

    /// In `fail` mode, the checks before anything else: the error that ends the run when one
    /// failed (the report then holds the verdict and what the hook was told).
    pub async fn first(&mut self, plan: &Plan, report: &mut Report) -> Option<anyhow::Error> {
        if !self.is_fail_mode() {
            return None;
        }
        let results = self.run().await?;
        let failed = self.record(results, &mut report.steps);
        if failed == 0 {
            return None;
        }
        self.refuse(plan).await;
        report.join = self.record.take();
        Some(anyhow::anyhow!(
            "{failed} preflight check{} failed (verify.preflight: fail): no hand-off, nothing was changed; see `eks-nodeinit status`",
            if failed == 1 { "" } else { "s" }
        ))
    }

    /// After the changes: the checks that ran beside them recorded, the record into the report.
    pub fn finish(&mut self, results: Option<Vec<CheckResult>>, report: &mut Report) {
        if let Some(r) = results {
            self.record(r, &mut report.steps);
        }
        if let Some(rec) = &mut self.record {
            rec.phase("applied", now_ms());
        }
        report.join = self.record.take();
    }
}

/// CompleteLifecycleAction with ABANDON through `transport`, under the agent's retry policy
/// for up to a minute.
async fn abandon(
    job: &crate::instance::lifecycle::LaunchHookJob,
    transport: Option<&crate::aws::Transport>,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    let launch = crate::verify::launch_of(job);
    let r = complete_launch(
        launch,
        HookResult::Abandon,
        RetryPolicy::default(),
        deadline,
        transport,
    )
    .await;
    match r {
        Ok(Completed::Completed) => {
            tracing::error!(hook = %job.hook, "launch hook completed with ABANDON: Auto Scaling replaces the instance");
            format!("ABANDON ({})", job.hook)
        }
        Ok(Completed::NothingWaiting) => format!(
            "ABANDON not taken: Auto Scaling had no launch waiting on {}",
            job.hook
        ),
        Err(e) => {
            tracing::error!("the launch hook could not be abandoned: {e}");
            format!("not completed: {e}")
        }
    }
}
