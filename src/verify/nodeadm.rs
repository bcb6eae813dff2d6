//! nodeadm's own verdict on what it will merge (docs/nodeadm.md#the-other-drop-ins): `nodeadm
//! config check` with the sources `nodeadm-run.service` reads, the user data then
//! `/etc/eks/nodeadm.d/` (amazon-eks-ami `nodeadm/cmd/nodeadm/config/check.go`: the sources'
//! chain, the merge, `ValidateNodeConfig`), run before the kubelet (the gate), once the agent's
//! drop-in is in place. The agent reads the same files itself before any change; this asks the
//! program that will read them. A refusal is the image's or the config's, never the instance's:
//! nodeadm's config phase fails on the same files and the node does not join.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::check::{Env, Outcome, Probe, Stop};
use super::Cause;
use crate::os::fsutil::under;

/// How long nodeadm may take (it reads the user data from IMDS): under the check's budget
/// (`CHECK_BUDGET` of its plan, 30 s), so that its own timeout, not the budget's, says so.
const TIMEOUT: Duration = Duration::from_secs(25);

/// `nodeadm config check` over `sources`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeadmConfig {
    /// nodeadm on the node.
    pub program: String,
    /// Its config sources, in `nodeadm-run.service`'s order.
    pub sources: Vec<String>,
    /// What its AWS SDK must be told on an instance without IPv4 (where IMDS is), as
    /// nodeadm's own units are told.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub env: std::collections::BTreeMap<String, String>,
}

impl NodeadmConfig {
    pub const KIND: &'static str = "nodeadm-config";
}

pub const LOADERS: [(&str, super::check::Loader); 1] =
    [(NodeadmConfig::KIND, super::check::load_as::<NodeadmConfig>)];

/// What nodeadm said on failing: the `error` of its last log line (zap's console encoding,
/// `fatal main.go:35 Command failed {"error": "…"}`), else that line as it is.
fn said(stderr: &str) -> String {
    let Some(line) = stderr.lines().rev().find(|l| !l.trim().is_empty()) else {
        return "nothing on its standard error".into();
    };
    let error = line.find('{').and_then(|i| {
        let v: serde_json::Value = serde_json::from_str(&line[i..]).ok()?;
        v.get("error")?.as_str().map(String::from)
    });
    error.unwrap_or_else(|| line.trim().to_string())
}

impl Probe for NodeadmConfig {
    fn kind(&self) -> &'static str {
        Self::KIND
    }
    fn describe(&self) -> String {
        "nodeadm config check of the NodeConfigs it will merge".into()
    }
    fn fields(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
    /// Never counted against the node: a refusal is the image's or the config's, shared by every
    /// node launched from them, and nodeadm's own failure then says it again; a nodeadm that
    /// cannot run or read the user data here may still run in its units. Reported (the report,
    /// `status`, the journal) as advisory.
    fn blocks(&self, _: &str) -> bool {
        false
    }
    fn advice(&self, code: &str) -> Option<&'static str> {
        match code {
            "nodeadm-refused" => Some("nodeadm's config phase fails on the same NodeConfigs and the node does not join: fix the file or the user data its message names (docs/nodeadm.md#the-other-drop-ins)"),
            "nodeadm-timeout" => Some("nodeadm reads the user data from IMDS: see its log (`journalctl -u eks-nodeinit-gate`); nodeadm's own units read the same"),
            _ => Some("nodeadm must run on the node: the image's"),
        }
    }
    fn run<'a>(&'a self, env: &'a Env) -> Outcome<'a> {
        Box::pin(async move {
            let path = under(&env.root, &self.program);
            let mut cmd = tokio::process::Command::new(&path);
            cmd.args(["config", "check"])
                .envs(&self.env)
                .kill_on_drop(true);
            for s in &self.sources {
                cmd.args(["--config-source", s]);
            }
            let out = match tokio::time::timeout(TIMEOUT, cmd.output()).await {
                Ok(Ok(o)) => o,
                Ok(Err(e)) => {
                    let why = format!("{} cannot run: {e}", path.display());
                    return Err(Stop::Failed(Cause::new("nodeadm-absent", why)));
                }
                Err(_) => {
                    let why = format!("{} did not answer within {TIMEOUT:?}", self.program);
                    return Err(Stop::Failed(Cause::new("nodeadm-timeout", why)));
                }
            };
            if !out.status.success() {
                let why = said(&String::from_utf8_lossy(&out.stderr));
                let why = format!("nodeadm refused them ({}): {why}", out.status);
                return Err(Stop::Failed(Cause::new("nodeadm-refused", why)));
            }
            Ok("nodeadm: the configuration is valid".to_string().into())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodeadms_error_is_read_from_its_fatal_line() {
        let err = "info config/check.go:34 Checking configuration {\"source\": [\"imds://user-data\"]}\nfatal cli/main.go:35 Command failed {\"error\": \"config provider at index 1 failed: failed to parse config file 20-x.yaml: no kind\"}\n";
        assert_eq!(
            said(err),
            "config provider at index 1 failed: failed to parse config file 20-x.yaml: no kind"
        );
        assert_eq!(said("panic: boom\n\n"), "panic: boom");
        assert_eq!(said(""), "nothing on its standard error");
    }

    /// A stand-in nodeadm under a root: it logs its arguments and environment, then says `err`
    /// and exits `code`.
    fn stand_in(code: u8, err: &str) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let bin = root.path().join("usr/bin/nodeadm");
        std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
        let log = root.path().join("args");
        let script = format!(
            "#!/bin/sh\necho \"$@ $AWS_EC2_METADATA_SERVICE_ENDPOINT\" > '{}'\nprintf '%s\\n' '{err}' >&2\nexit {code}\n",
            log.display()
        );
        std::fs::write(&bin, script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        root
    }

    async fn result(root: &std::path::Path) -> super::super::CheckResult {
        let probe = NodeadmConfig {
            program: "/usr/bin/nodeadm".into(),
            sources: vec![
                "imds://user-data".into(),
                "file:///etc/eks/nodeadm.d/".into(),
            ],
            env: [(
                "AWS_EC2_METADATA_SERVICE_ENDPOINT".to_string(),
                "http://[fd00:ec2::254]".to_string(),
            )]
            .into(),
        };
        let checks = [super::super::Check::new(probe)];
        let mut r = super::super::check::run(&checks, Duration::from_secs(5), root.into()).await;
        r.remove(0)
    }

    #[tokio::test]
    async fn nodeadm_is_asked_with_its_units_sources_and_its_refusal_is_named() {
        let root = stand_in(0, "");
        let r = result(root.path()).await;
        assert_eq!(r.result, super::super::Verdict::Passed, "{r:?}");
        let args = std::fs::read_to_string(root.path().join("args")).unwrap();
        assert_eq!(args.trim(), "config check --config-source imds://user-data --config-source file:///etc/eks/nodeadm.d/ http://[fd00:ec2::254]");
        let fatal = r#"fatal cli/main.go:35 Command failed {"error": "config provider at index 1 failed: failed to parse config file 20-x.yaml: bad"}"#;
        let root = stand_in(1, fatal);
        let r = result(root.path()).await;
        assert_eq!(r.cause.as_deref(), Some("nodeadm-refused"), "{r:?}");
        assert!(r.advisory, "never counted against the node: {r:?}");
        assert!(
            r.detail
                .ends_with("failed to parse config file 20-x.yaml: bad"),
            "{r:?}"
        );
        let empty = tempfile::tempdir().unwrap();
        let r = result(empty.path()).await;
        assert_eq!(r.cause.as_deref(), Some("nodeadm-absent"), "{r:?}");
    }
}
