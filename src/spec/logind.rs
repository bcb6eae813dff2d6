//! The `logind` section: `InhibitDelayMaxSec`, at least the kubelet's grace period, at most a
//! day.

use crate::base::findings::Findings;
use crate::config::LogindSettings;

use super::kubelet::KubeletSpec;

/// The longest delay the agent writes: a day (kubelet's grace periods are minutes).
pub(crate) const MAX_INHIBIT_DELAY_SEC: u64 = 86_400;

/// `InhibitDelayMaxSec` to write: the config's value, else the grace period rounded up; `None`
/// when neither is set (no drop-in).
#[derive(Debug, Clone, Default)]
pub struct LogindSpec {
    pub inhibit_delay_max_sec: Option<u64>,
}

pub fn spec(l: &LogindSettings, kubelet: &KubeletSpec, f: &mut Findings) -> LogindSpec {
    let grace = kubelet
        .shutdown_grace_period
        .as_ref()
        .map(|g| g.ceil_secs());
    let field = "logind.inhibitDelayMaxSec";
    let given = l.inhibit_delay_max_sec.filter(|d| {
        let ok = *d <= MAX_INHIBIT_DELAY_SEC;
        if !ok {
            f.push(
                field,
                format!("{d} is above {MAX_INHIBIT_DELAY_SEC} (a day)"),
            );
        }
        ok
    });
    if let (Some(need), Some(delay)) = (grace, given) {
        if delay < need {
            f.push(field, format!(
                "{delay} is below kubelet.shutdownGracePeriod ({need}s): logind would cut the graceful shutdown short; raise it or leave it unset"
            ));
        }
    }
    if grace.is_some_and(|g| g > MAX_INHIBIT_DELAY_SEC) {
        f.push(
            "kubelet.shutdownGracePeriod",
            format!(
                "is longer than a day ({MAX_INHIBIT_DELAY_SEC} s); logind's delay would follow it"
            ),
        );
    }
    LogindSpec {
        inhibit_delay_max_sec: given
            .or(grace)
            .filter(|s| *s > 0 && *s <= MAX_INHIBIT_DELAY_SEC),
    }
}
