//! The node retiring itself, an effect beside the executor's other AWS calls: failing fast where
//! no launch hook waits (`verify.onFailure`, docs/join.md#fail-fast-without-
//! a-launch-hook): a node whose join failed for a cause of its own (the shipped blame: its
//! clock, or others of its group joined) takes itself out of service, so that its fleet
//! replaces it instead of keeping an instance that never serves. Before anything, the cause
//! goes to the serial console (one line: `aws ec2 get-console-output` shows it after the
//! instance is gone) and onto the instance as the tag [`RETIRED_TAG`].

use std::path::Path;
use std::time::Duration;

use tokio::time::Instant;

use crate::aws::autoscaling::AutoScaling;
use crate::aws::ec2::Ec2;
use crate::aws::CallError;
use crate::base::retry::RetryPolicy;
use crate::base::text::escaped;
use crate::verify::fleet::RETIRED_TAG;
use crate::verify::record::JoinVerdict;
pub use crate::verify::retire::Retire;
use crate::verify::Context;

/// The console the line goes to (the kernel's last `console=`: the serial port on EC2).
pub const CONSOLE: &str = "/dev/console";
/// EC2's longest tag value.
const TAG_MAX: usize = 256;
/// How long the AWS calls may take together.
const CALLS: Duration = Duration::from_secs(30);

/// Where and as whom the node retires.
pub struct Retiring<'a> {
    pub root: &'a Path,
    pub bus_address: &'a str,
    pub ctx: &'a Context,
    pub instance_id: &'a str,
    pub group: Option<&'a str>,
    pub policy: RetryPolicy,
}

/// The line the console shows, and the tag's value: the verdict and its cause.
pub fn said(instance_id: &str, verdict: JoinVerdict, cause: &str) -> (String, String) {
    // Escaped and held to the length of every foreign value the agent shows.
    let cause = escaped(cause);
    let line = format!(
        "eks-nodeinit: retiring {instance_id}: verdict {}: {cause}\n",
        verdict.as_str()
    );
    let tag = cut(&format!("{}: {cause}", verdict.as_str()), TAG_MAX);
    (line, tag)
}

fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => {
            let keep = s[..at].char_indices().nth(max - 1).map_or(at, |(i, _)| i);
            format!("{}…", &s[..keep])
        }
        None => s.to_string(),
    }
}

/// Say why: one line on the console, the error log, and the tag [`RETIRED_TAG`] (which the
/// scope's retirement budget counts); a failure to write either is logged.
pub async fn say(r: &Retiring<'_>, verdict: JoinVerdict, cause: &str) {
    let (line, tag) = said(r.instance_id, verdict, cause);
    if let Err(e) = console(r.root, &line) {
        tracing::warn!("the cause could not be written to {CONSOLE}: {e}");
    }
    tracing::error!("{}", line.trim_end());
    let deadline = Instant::now() + CALLS;
    let transport = r.ctx.transport();
    let mut ec2 = Ec2::new(&r.ctx.region, None, transport.as_ref()).await;
    let tagged = ec2.create_tag(r.instance_id, RETIRED_TAG, &tag, r.policy, deadline);
    if let Err(e) = tagged.await {
        tracing::warn!("the cause could not be tagged ({RETIRED_TAG}): {e}");
    }
}

/// Retire as planned, once: what was done, or why it could not be.
pub async fn act(how: Retire, r: &Retiring<'_>) -> Result<String, String> {
    let deadline = Instant::now() + CALLS;
    let transport = r.ctx.transport();
    match how {
        Retire::Unhealthy => {
            let mut a = AutoScaling::new(&r.ctx.region, transport.as_ref()).await;
            a.set_unhealthy(r.instance_id, r.group, r.policy, deadline)
                .await
                .map(|()| "SetInstanceHealth Unhealthy: the group replaces the instance".into())
                .map_err(|e| e.to_string())
        }
        Retire::Terminate => {
            let mut ec2 = Ec2::new(&r.ctx.region, None, transport.as_ref()).await;
            terminate(&mut ec2, r, deadline).await
        }
    }
}

/// TerminateInstances on itself; denied, a power-off where the instance's shutdown behaviour
/// terminates it.
async fn terminate(ec2: &mut Ec2, r: &Retiring<'_>, deadline: Instant) -> Result<String, String> {
    // Refused: denied by IAM, or the instance's termination protection.
    let denied = match ec2.terminate(r.instance_id, r.policy, deadline).await {
        Ok(()) => return Ok("TerminateInstances: the instance terminates".into()),
        Err(CallError::Denied(d)) => d.to_string(),
        Err(e @ CallError::Fatal { .. }) if e.to_string().contains("OperationNotPermitted") => {
            e.to_string()
        }
        Err(e) => return Err(e.to_string()),
    };
    let behaviour = ec2
        .shutdown_behaviour(r.instance_id, r.policy, deadline)
        .await
        .map_err(|e| format!("{denied}; and the shutdown behaviour cannot be read: {e}"))?;
    if behaviour != "terminate" {
        return Err(format!("{denied}; a power-off would only stop the instance (its shutdown behaviour is `{}`), so it keeps running", escaped(&behaviour)));
    }
    let conn = crate::os::systemd::connect(r.bus_address)
        .await
        .map_err(|e| e.to_string())?;
    crate::os::systemd::power_off(&conn)
        .await
        .map(|()| "powered off: the instance's shutdown behaviour terminates it".into())
        .map_err(|e| e.to_string())
}

/// One line appended to the console under `root`.
fn console(root: &Path, line: &str) -> std::io::Result<()> {
    use std::io::Write;
    let path = crate::os::fsutil::under(root, CONSOLE);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)?;
    f.write_all(line.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tag_holds_at_most_256_characters_and_the_line_is_one_line() {
        let cause = format!("x\ny{}", "é".repeat(400));
        let (line, tag) = said("i-1", JoinVerdict::NotReady, &cause);
        assert_eq!(tag.chars().count(), TAG_MAX);
        assert!(tag.starts_with("not-ready: x\\ny"), "{tag}");
        assert_eq!(line.matches('\n').count(), 1, "{line}");
        assert!(line.starts_with("eks-nodeinit: retiring i-1: verdict not-ready: x\\ny"));
        let (_, short) = said("i-1", JoinVerdict::Deadline, "no Node");
        assert_eq!(short, "deadline: no Node");
    }
}
