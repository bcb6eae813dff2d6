//! containerd's client, `ctr`, run with argv (no shell) against one socket in the CRI's
//! namespace (`k8s.io`), each call bounded.

use std::process::Output;
use std::time::Duration;

use crate::base::text::{escaped, printable};

/// `ctr --address <address> --namespace k8s.io <args>`: its output when it ran to its end
/// (whatever its status), or why it could not be run or did not end within `timeout`.
pub async fn run(
    ctr: &str,
    address: &str,
    args: &[&str],
    timeout: Duration,
) -> Result<Output, String> {
    let mut cmd = tokio::process::Command::new(ctr);
    cmd.args(["--address", address, "--namespace", "k8s.io"])
        .args(args)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    match tokio::time::timeout(timeout, cmd.output()).await {
        Err(_) => Err(format!(
            "`{}` gave no answer in {timeout:?}",
            printable(ctr)
        )),
        Ok(Err(e)) => Err(format!("`{}` could not be run: {e}", printable(ctr))),
        Ok(Ok(out)) => Ok(out),
    }
}

/// What `ctr` said on its standard error, as a message shows it.
pub fn said(out: &Output) -> String {
    escaped(String::from_utf8_lossy(&out.stderr).trim())
}
