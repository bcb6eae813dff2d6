//! `eks-nodeinit await-service`: the waiter of a held hand-off ([`crate::instance::lifecycle`]). The
//! packaged `eks-nodeinit-await-service.service` runs it after a run that held the hand-off for
//! a warm pool. It polls the target lifecycle state at a bounded interval with jitter, through
//! the IMDS endpoint that run used, and when the instance leaves the warmed states (`InService`)
//! without a reboot (`Warmed:Running`, a resumed `Warmed:Hibernated`, a scale-out during the
//! warm-up) it asks systemd to run the agent's unit again. That run finds the node configured,
//! hands off, and releases the hold, under the run lock and the per-boot hand-off rule like any
//! other. After a stop and start nothing is held and this waiter does not run.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::instance::imds::{self, ImdsClient};
use crate::instance::lifecycle::{self, Hold, HOLD_MARKER};
use crate::os::fsutil::{self, under};
use crate::os::systemd;

#[derive(Debug, thiserror::Error)]
pub enum AwaitError {
    #[error(transparent)]
    Fs(#[from] fsutil::FsError),
    #[error("{path}: {message}; it is written by the run that held the hand-off: remove it and run `systemctl restart eks-nodeinit` to hand off now")]
    Marker { path: PathBuf, message: String },
    #[error(transparent)]
    Imds(#[from] imds::ImdsError),
    #[error(transparent)]
    Systemd(Box<systemd::SystemdError>),
}

impl From<systemd::SystemdError> for AwaitError {
    fn from(e: systemd::SystemdError) -> Self {
        AwaitError::Systemd(Box::new(e))
    }
}

/// How the waiter polls and whom it tells.
#[derive(Debug, Clone)]
pub struct Waiter {
    pub root: PathBuf,
    /// The unit to run again once in service (the agent's).
    pub unit: String,
    /// Between polls: this, plus a random part of up to half of it.
    pub interval: Duration,
    pub bus_address: String,
}

/// One IMDS read may take this long before the poll counts as failed.
const READ_DEADLINE: Duration = Duration::from_secs(10);

/// Wait until the instance is in service, then have the agent's unit run again. Returns at once
/// when nothing is held in this boot.
pub async fn run(w: &Waiter) -> Result<(), AwaitError> {
    let Some(hold) = read_hold(&w.root)? else {
        tracing::info!(
            "no hand-off is held in this boot ({HOLD_MARKER} is absent): nothing to wait for"
        );
        return Ok(());
    };
    let endpoints = imds::candidates(hold.imds_endpoint.as_deref());
    let client = imds::first_answering(&endpoints, hold.allow_v1_fallback, READ_DEADLINE).await?;
    tracing::info!(state = %hold.state, "hand-off held: waiting for the instance to go into service");
    let now = wait_for_service(&client, &hold.state, w.interval).await;
    tracing::info!(
        state = now.as_deref().unwrap_or("absent"),
        unit = %w.unit,
        "the instance left the warm pool: running the agent's unit again, which hands off"
    );
    let conn = systemd::connect(&w.bus_address).await?;
    systemd::queue(&conn, &w.unit, systemd::Job::Restart).await?;
    Ok(())
}

/// The hold marker, if this boot has one.
fn read_hold(root: &Path) -> Result<Option<Hold>, AwaitError> {
    let path = under(root, HOLD_MARKER);
    let Some(text) = fsutil::read_optional(&path)? else {
        return Ok(None);
    };
    Hold::from_text(&text)
        .map(Some)
        .map_err(|message| AwaitError::Marker { path, message })
}

/// Poll until the state is no longer a warmed one; the state then (`None`: absent). A failed
/// read is logged and polled again: the instance may wait in the pool for days.
async fn wait_for_service(client: &ImdsClient, held: &str, interval: Duration) -> Option<String> {
    let mut last = Some(held.to_string());
    loop {
        match read_state(client).await {
            Ok(now) => {
                if now != last {
                    tracing::info!(
                        from = last.as_deref().unwrap_or("absent"),
                        to = now.as_deref().unwrap_or("absent"),
                        "target lifecycle state changed"
                    );
                }
                if !now.as_deref().is_some_and(lifecycle::holds) {
                    return now;
                }
                last = now;
            }
            Err(e) => tracing::warn!("reading the target lifecycle state: {e}; polling again"),
        }
        tokio::time::sleep(with_jitter(interval)).await;
    }
}

async fn read_state(client: &ImdsClient) -> Result<Option<String>, String> {
    let path = imds::md(lifecycle::IMDS_PATH);
    let text = match tokio::time::timeout(READ_DEADLINE, client.get(&path)).await {
        Err(_) => return Err(format!("{path} did not answer within {READ_DEADLINE:?}")),
        Ok(r) => r.map_err(|e| e.to_string())?,
    };
    match text {
        None => Ok(None),
        Some(t) => Ok(lifecycle::parse(&t)),
    }
}

/// `interval` plus up to half of it again, at random: a warm pool's instances, launched
/// together, do not poll in step.
fn with_jitter(interval: Duration) -> Duration {
    let ms = u64::try_from(interval.as_millis()).unwrap_or(u64::MAX);
    interval.saturating_add(Duration::from_millis(rand::random_range(0..=ms / 2)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_jitter_stays_within_half_the_interval() {
        let i = Duration::from_millis(1000);
        for _ in 0..1000 {
            let d = with_jitter(i);
            assert!(d >= i && d <= Duration::from_millis(1500), "{d:?}");
        }
        assert_eq!(with_jitter(Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn a_marker_that_is_not_a_hold_is_an_error_naming_it() {
        let d = tempfile::tempdir().unwrap();
        assert!(read_hold(d.path()).unwrap().is_none());
        let p = under(d.path(), HOLD_MARKER);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "Warmed:Running\n").unwrap();
        let e = read_hold(d.path()).unwrap_err().to_string();
        assert!(e.contains("handoff-held"), "{e}");
    }
}
