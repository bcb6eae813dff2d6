//! The `Check` effect: the plan's checks of one phase, run together under their budget (they
//! change nothing); each result logged (a failure at error priority), put into the report's
//! steps ahead of the others, under its own name in the report's `checks`, and into the
//! report property and key its step names. Nothing here names a check.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::exec::report::{Outcome, Report, StepOutcome};
use crate::plan::step::{CheckStep, When};
use crate::verify::{CheckResult, Verdict};

/// The report property that has every check's result by its name.
pub const CHECKS: &str = "checks";

/// The plan's checks that read only the node ([`crate::verify::check::Probe::local`]) and are
/// not skipped here, before the hand-off and after it: what `init --dry-run` runs (they change
/// nothing), together under the largest of their budgets.
pub(crate) async fn local(root: &Path, plan: &crate::plan::Plan) -> Vec<CheckResult> {
    use crate::plan::step::{After, Step};
    let now = plan.steps.iter().filter_map(|s| match s {
        Step::Check(c) => Some(c),
        _ => None,
    });
    let after = plan.after.iter().filter_map(|a| match a {
        After::Check(c) => Some(c),
        After::Run(_) => None,
    });
    let steps: Vec<&CheckStep> = now
        .chain(after)
        .filter(|c| c.check.skip.is_none() && c.check.probe.local())
        .collect();
    run(&steps, root).await.unwrap_or_default()
}

/// Run `steps` (the checks of one phase; none: no results) under the largest of their budgets.
pub(crate) async fn run(steps: &[&CheckStep], root: &Path) -> Option<Vec<CheckResult>> {
    let budget = steps.iter().map(|c| c.budget_ms).max()?;
    let checks: Vec<_> = steps.iter().map(|c| c.check.clone()).collect();
    let budget = Duration::from_millis(budget);
    Some(crate::verify::check::run(&checks, budget, root.to_path_buf()).await)
}

/// Log and record the results of `steps` (of phase `when`); how many failed that count.
pub(crate) fn record(
    steps: &[&CheckStep],
    when: When,
    results: Option<Vec<CheckResult>>,
    report: &mut Report,
) -> usize {
    let Some(mut results) = results else {
        return 0;
    };
    for r in &mut results {
        r.phase = Some(when.as_str().to_string());
    }
    let outcomes = results.iter().map(|r| StepOutcome {
        step: format!("check {}", r.check),
        outcome: match r.result {
            Verdict::Passed => Outcome::DoneWith(r.detail.clone()),
            Verdict::Failed => Outcome::Failed(r.line()),
            Verdict::Skipped | Verdict::NotRun => Outcome::Skipped(r.detail.clone()),
        },
    });
    let at = report.before_discovery.min(report.steps.len());
    report.steps.splice(at..at, outcomes);
    results.iter().for_each(log);
    let mut by_record: BTreeMap<&(String, String), Vec<&CheckResult>> = BTreeMap::new();
    for (step, r) in steps.iter().zip(results.iter_mut()) {
        r.condition.clone_from(&step.condition);
    }
    for (step, r) in steps.iter().zip(&results) {
        let v = serde_json::to_value(r).unwrap_or_default();
        report.record(CHECKS, &r.check, v);
        if let Some(at) = &step.record {
            by_record.entry(at).or_default().push(r);
        }
    }
    let timelines: Vec<String> = by_record.keys().map(|(p, _)| p.clone()).collect();
    report.stamp(&timelines, "checks done", crate::exec::report::now_ms());
    // After the results of the run's other phases at the same key.
    for ((property, key), rs) in by_record {
        let earlier = report.properties.get(property).and_then(|p| p.get(key));
        let mut list = earlier
            .and_then(|v| v.as_array())
            .cloned()
            .unwrap_or_default();
        list.extend(rs.iter().filter_map(|r| serde_json::to_value(r).ok()));
        report.record(property, key, serde_json::Value::Array(list));
    }
    results
        .iter()
        .filter(|r| r.result == Verdict::Failed && !r.advisory)
        .count()
}

fn log(r: &CheckResult) {
    match r.result {
        Verdict::Failed => {
            tracing::error!(check = %r.check, cause = r.cause.as_deref().unwrap_or(""), ms = r.ms, "check: {}", r.line());
        }
        Verdict::Passed => tracing::info!(check = %r.check, ms = r.ms, "check: {}", r.detail),
        _ => tracing::info!(check = %r.check, "check: {}", r.line()),
    }
}

/// The error that ends a run whose checks before the changes failed.
pub(crate) fn stopped(failed: usize) -> String {
    format!(
        "{failed} check{} before the changes failed: no hand-off, nothing was changed; see `eks-nodeinit status`",
        if failed == 1 { "" } else { "s" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(check: &str) -> CheckResult {
        CheckResult {
            check: check.into(),
            result: Verdict::Passed,
            cause: None,
            detail: String::new(),
            todo: None,
            ms: 1,
            advisory: false,
            phase: None,
            condition: None,
            own_fault: false,
        }
    }

    #[test]
    fn each_phase_adds_its_results_to_the_key_its_checks_name() {
        let step = |when| {
            CheckStep::new(
                crate::verify::Check::new(crate::verify::check::Passing),
                when,
                std::time::Duration::from_millis(1000),
            )
            .recorded_at("join", "preflight")
        };
        let (first, beside) = (step(When::First), step(When::Beside));
        let mut report = Report::default();
        record(&[&first], When::First, Some(vec![result("a")]), &mut report);
        record(
            &[&beside],
            When::Beside,
            Some(vec![result("b")]),
            &mut report,
        );
        let list = &report.properties["join"]["preflight"];
        assert_eq!(list[0]["check"], "a");
        assert_eq!(list[0]["phase"], "first");
        assert_eq!(list[1]["phase"], "beside");
        assert_eq!(report.properties[CHECKS]["b"]["phase"], "beside");
    }
}
