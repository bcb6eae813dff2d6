//! The `tagging` section: the Name tag's budget before the hand-off, its background deadline
//! and spread, each bounded so that tagging never holds up the join for long.

use std::time::Duration;

use crate::base::findings::Findings;
use crate::config::TaggingSettings;

#[derive(Debug, Clone, PartialEq)]
pub struct TaggingSpec {
    pub enabled: bool,
    pub required: bool,
    pub sync_budget: Duration,
    pub background_deadline: Duration,
    pub spread: Duration,
    pub ec2_endpoint: Option<String>,
}

/// The longest any tagging wait may be: a day (keeps every deadline far from overflow).
pub(crate) const TAGGING_MAX_SEC: u64 = 86_400;

pub fn spec(t: &TaggingSettings, f: &mut Findings) -> TaggingSpec {
    if t.sync_budget_ms > 60_000 {
        f.push(
            "tagging.syncBudgetMs",
            "at most 60000: tagging must never hold up the join for long",
        );
    }
    if t.background_deadline_sec == 0 || t.background_deadline_sec > TAGGING_MAX_SEC {
        f.push(
            "tagging.backgroundDeadlineSec",
            format!("must be between 1 and {TAGGING_MAX_SEC} (a day)"),
        );
    }
    if t.spread_sec > TAGGING_MAX_SEC {
        f.push(
            "tagging.spreadSec",
            format!("must be at most {TAGGING_MAX_SEC} (a day)"),
        );
    } else if t.spread_sec >= t.background_deadline_sec {
        f.push(
            "tagging.spreadSec",
            format!(
                "{} is not below tagging.backgroundDeadlineSec ({}): the spread delay would use up the whole deadline; lower it or raise the deadline",
                t.spread_sec, t.background_deadline_sec
            ),
        );
    }
    TaggingSpec {
        enabled: t.enabled,
        required: t.required,
        sync_budget: Duration::from_millis(t.sync_budget_ms.min(60_000)),
        background_deadline: Duration::from_secs(t.background_deadline_sec.min(TAGGING_MAX_SEC)),
        spread: Duration::from_secs(t.spread_sec.min(TAGGING_MAX_SEC)),
        ec2_endpoint: t.ec2_endpoint.clone(),
    }
}
