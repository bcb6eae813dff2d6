//! The `Check` effect: the plan's checks of one phase, run together under their budget (they
//! change nothing); each result logged (a failure at error priority), put into the report's
//! steps ahead of the others, and into the report property the checks name.

use std::time::Duration;

use crate::exec::report::{Outcome, Report, StepOutcome};
use crate::plan::step::{CheckStep, Step, When};
use crate::plan::Plan;
use crate::verify::{preflight, CheckResult, Verdict};

/// The plan's checks that run in phase `when`.
fn of(plan: &Plan, when: When) -> Vec<&CheckStep> {
    plan.steps
        .iter()
        .filter_map(|s| match s {
            Step::Check(c) if c.when == when => Some(c),
            _ => None,
        })
        .collect()
}

/// Run the checks of phase `when` (none: no results).
pub(crate) async fn run(plan: &Plan, when: When) -> Option<Vec<CheckResult>> {
    let steps = of(plan, when);
    let budget = Duration::from_millis(steps.first()?.budget_ms);
    let checks: Vec<_> = steps.iter().map(|c| c.check.clone()).collect();
    Some(preflight::run(&checks, budget).await)
}

/// Log and record the results of phase `when`; how many failed that are not advisory.
pub(crate) fn record(
    plan: &Plan,
    when: When,
    results: Option<Vec<CheckResult>>,
    report: &mut Report,
) -> usize {
    let Some(results) = results else {
        return 0;
    };
    let outcomes = results.iter().map(|r| StepOutcome {
        step: format!("check {}", r.check),
        outcome: match r.result {
            Verdict::Passed => Outcome::DoneWith(r.detail.clone()),
            Verdict::Failed => Outcome::Failed(r.line()),
            Verdict::Skipped | Verdict::NotRun => Outcome::Skipped(r.detail.clone()),
        },
    });
    report.steps.splice(0..0, outcomes);
    let failed = results
        .iter()
        .filter(|r| r.result == Verdict::Failed && !r.advisory)
        .count();
    results.iter().for_each(log);
    let mode = match when {
        When::First => "fail",
        _ => "warn",
    };
    let properties = of(plan, when).into_iter().filter_map(|c| c.record.clone());
    let properties: std::collections::BTreeSet<String> = properties.collect();
    let timelines: Vec<String> = properties.iter().cloned().collect();
    report.stamp(&timelines, "preflight done", crate::exec::report::now_ms());
    for p in properties {
        let value = report
            .properties
            .entry(p)
            .or_insert_with(|| serde_json::json!({}));
        preflight::record(value, &results, mode);
    }
    failed
}

fn log(r: &CheckResult) {
    match r.result {
        Verdict::Failed => {
            tracing::error!(check = %r.check, cause = r.cause.as_deref().unwrap_or(""), ms = r.ms, "preflight: {}", r.line());
        }
        Verdict::Passed => tracing::info!(check = %r.check, ms = r.ms, "preflight: {}", r.detail),
        _ => tracing::info!(check = %r.check, "preflight: {}", r.line()),
    }
}
