//! Stages 1 and 2: kubelet active (the hand-off started it), then this boot's steps after the
//! hand-off, with the conditions of this boot's earlier checks beside theirs.

use std::time::Duration;

use tokio::time::Instant;

use super::completer::{CompleteError, Completer};
use crate::exec::after::{self, Ran};
use crate::exec::report::now_ms;
use crate::os::systemd;
use crate::plan::after::AfterJob;
use crate::verify::CheckResult;

/// kubelet active (the hand-off started it), then this boot's steps after the hand-off: what
/// they came to, and when kubelet was seen active; or why kubelet is not active, with the steps marked not run.
pub(super) async fn active_then_after(
    c: &Completer,
    hook: &str,
    (after, earlier): (Option<&AfterJob>, &[CheckResult]),
) -> Result<(Ran, u64, Instant), (CompleteError, Ran)> {
    if let Err(e) = wait_for_kubelet(c, hook).await {
        let not_run = after.map(|j| Ran::not_run(j, "kubelet never became active"));
        return Err((e, not_run.unwrap_or_default()));
    }
    let (active, active_at) = (now_ms(), Instant::now());
    let mut ran = match after {
        Some(j) => after::run(j, &c.root).await,
        None => Ran::default(),
    };
    ran.conditions
        .splice(0..0, crate::verify::conditions::of_checks(earlier));
    Ok((ran, active, active_at))
}

/// Wait until kubelet.service is active (the hand-off started it), reading its state over D-Bus
/// every half second for up to `c.kubelet_wait`.
async fn wait_for_kubelet(c: &Completer, hook: &str) -> Result<(), CompleteError> {
    let conn = systemd::connect(&c.bus_address).await?;
    let start = Instant::now();
    loop {
        let state = systemd::active_state(&conn, "kubelet.service").await?;
        if state == "active" {
            return Ok(());
        }
        if start.elapsed() >= c.kubelet_wait {
            let left = match hook {
                "" => "nothing after the hand-off is run".to_string(),
                h => format!("launch hook `{h}` is not completed (Auto Scaling applies its default result at the heartbeat timeout)"),
            };
            return Err(CompleteError::Kubelet {
                state,
                waited: c.kubelet_wait,
                left,
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
