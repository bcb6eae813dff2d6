//! Checks and the verified join (docs/join.md). A check ([`check`]) is a probe that changes
//! nothing, planned as a step by the setting that wants it and run by the executor with the
//! other checks of its phase under one budget. The join's checks before the hand-off
//! ([`preflight`]) and its proof after it ([`proof`]) live here with the network under them.
//! Every failure is a [`Cause`]: a code, what was checked (never the CA, never the token) and
//! what to do.

pub mod accelerators;
pub mod check;
pub mod cidr;
pub mod conditions;
pub mod fleet;
pub mod hardening;
pub mod kube;
pub mod name;
pub mod net;
pub mod nodeadm;
pub mod outcome;
pub mod preflight;
pub mod proof;
pub mod record;
pub mod retire;
pub mod token;
pub mod verdict;

use serde::{Deserialize, Serialize};

pub use check::{Check, Probe};

use crate::aws::http::Proxy;
use crate::base::text::printable;

/// What the checks share: the cluster as the hand-off gets it and how to reach it. Part of the
/// executed steps, never printed (the CA).
#[derive(Clone, PartialEq, Default)]
pub struct Context {
    pub cluster: String,
    pub region: String,
    /// `https://host[:port]`.
    pub endpoint: String,
    /// The cluster CA, PEM (a secret: never echoed).
    pub ca_pem: String,
    /// The name the hand-off gives the Node (`None`: any `system:node:` identity is taken).
    pub node: Option<name::NodeName>,
    pub imds_endpoint: String,
    /// Whether the AWS calls take the services' dual-stack names (`None`: the SDK's choice).
    pub dual_stack: Option<bool>,
    /// `imds.allowV1Fallback`: IMDSv1 where the instance refuses IMDSv2's token.
    pub imds_v1_fallback: bool,
    /// The proxy kubelet and the agent use (`None`: direct).
    pub proxy: Option<Proxy>,
    /// CA bundles trusted beside the platform's for AWS endpoints.
    pub ca_bundles: Vec<String>,
    /// STS, where the token is presigned for (`https://sts.<region>.amazonaws.com`).
    pub sts_url: String,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("cluster", &self.cluster)
            .field("endpoint", &self.endpoint)
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl Context {
    /// The node's EKS token for this cluster, signed now.
    pub fn token(&self, creds: &token::RoleCredentials) -> Result<String, Cause> {
        let a = token::Audience {
            region: &self.region,
            sts: &self.sts_url,
            cluster: &self.cluster,
        };
        token::eks_token(creds, a, std::time::SystemTime::now())
    }

    /// The proxy URL for `url`, unless NO_PROXY names its host or it is the loopback (Go's
    /// `ProxyFromEnvironment`, as kubelet and containerd read it: `HTTPS_PROXY` for https,
    /// `HTTP_PROXY` for http, never one for the other).
    pub fn proxy_for(&self, url: &net::Url) -> Option<&str> {
        let p = self.proxy.as_ref()?;
        let loopback = url.host == "localhost"
            || url
                .host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        if loopback || net::no_proxy_matches(&p.no_proxy, &url.host, url.port) {
            return None;
        }
        match url.tls {
            true => p.https.as_deref(),
            false => p.http.as_deref(),
        }
    }

    /// How the node's AWS calls go: the same proxy and CA bundles as the checks'.
    pub fn transport(&self) -> Option<crate::aws::Transport> {
        let t = crate::aws::Transport {
            proxy: self.proxy.clone(),
            ca_bundles: self.ca_bundles.clone(),
            ..Default::default()
        };
        let endpoints = crate::aws::Endpoints {
            imds: Some(self.imds_endpoint.clone()).filter(|e| !e.is_empty()),
            dual_stack: self.dual_stack,
        };
        crate::aws::Transport::with_endpoints(Some(t), endpoints)
    }

    /// The CA bundles trusted beside the platform's roots, as `&str`s.
    pub fn bundles(&self) -> Vec<&str> {
        self.ca_bundles.iter().map(String::as_str).collect()
    }
}

/// The launch a hook job names, as Auto Scaling completes it (with the verdict's result).
pub fn launch_of(
    job: &crate::instance::lifecycle::LaunchHookJob,
) -> crate::aws::autoscaling::Launch<'_> {
    crate::aws::autoscaling::Launch {
        hook: &job.hook,
        group: job.group.as_deref(),
        instance_id: &job.instance_id,
        region: &job.region,
    }
}

/// The probes a job (after the hand-off, before the kubelet) may hold, by kind, a list per
/// module: a check planned for a job is read back through them (a kind in none is refused when
/// the plan is built).
pub const LOADERS: &[&[(&str, check::Loader)]] = &[
    &hardening::LOADERS,
    &accelerators::LOADERS,
    &nodeadm::LOADERS,
];

/// Why a check failed: a code (`status` and docs/join.md name them), what was seen, what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    pub code: &'static str,
    pub detail: String,
    /// What to do, where the cause says it itself; else its probe says it by the code
    /// ([`check::Probe::advice`]).
    pub advice: Option<String>,
}

impl Cause {
    pub fn new(code: &'static str, detail: String) -> Cause {
        Cause {
            code,
            detail: crate::base::text::escaped(&detail),
            advice: None,
        }
    }

    /// A cause with what to do about it.
    pub fn advised(code: &'static str, detail: String, advice: impl Into<String>) -> Cause {
        Cause {
            advice: Some(advice.into()),
            ..Cause::new(code, detail)
        }
    }

    pub fn dns(host: &str, why: &str) -> Cause {
        Cause::new(
            "dns",
            format!("`{}` does not resolve: {why}", printable(host)),
        )
    }

    /// A failure reaching the proxy itself.
    pub fn via_proxy(self) -> Cause {
        Cause::new("proxy", format!("the proxy: {}", self.detail))
    }

    /// A TLS failure, by what rustls said: an issuer the CA does not know, a name the
    /// certificate does not hold, anything else.
    pub fn tls(host: &str, e: &std::io::Error) -> Cause {
        use rustls::{CertificateError as C, Error as E};
        let inner = e.get_ref().and_then(|i| i.downcast_ref::<E>());
        let code = match inner {
            Some(E::InvalidCertificate(C::UnknownIssuer | C::BadSignature)) => "tls-untrusted",
            Some(E::InvalidCertificate(C::NotValidForName | C::NotValidForNameContext { .. })) => {
                "tls-name"
            }
            _ => "tls",
        };
        Cause::new(code, format!("TLS with {}: {e}", printable(host)))
    }

    /// What to do about it: its own advice, else `by_code`'s for its code, else where to look.
    pub fn todo<'a>(&'a self, by_code: Option<&'a str>) -> &'a str {
        self.advice.as_deref().or(by_code).unwrap_or(
            "see `eks-nodeinit status` and the docs of the setting that planned the check",
        )
    }
}

/// One check's result, as the report and `status` keep it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CheckResult {
    pub check: String,
    pub result: Verdict,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub todo: Option<String>,
    /// From the start of the checks to this one's end.
    pub ms: u64,
    /// Failed, but it does not count: a check before the changes goes on past it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub advisory: bool,
    /// The phase it ran in (`first`, `beside`, `after`), as the executor records it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// The Node condition its setting names for it, whichever phase it ran in: the work after
    /// the hand-off sets it once the Node exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
    /// Failed for a fault of the instance's own ([`check::Probe::own_fault`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub own_fault: bool,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum Verdict {
    Passed,
    Failed,
    Skipped,
    /// A check it needed failed first.
    NotRun,
}

impl CheckResult {
    pub fn of(probe: &dyn check::Probe, r: Result<String, Cause>, ms: u64) -> CheckResult {
        let advisory = r.as_ref().err().is_some_and(|c| !probe.blocks(c.code));
        let own_fault = r.as_ref().err().is_some_and(|c| probe.own_fault(c.code));
        let (result, cause, detail, todo) = match r {
            Ok(detail) => (Verdict::Passed, None, detail, None),
            Err(c) => (
                Verdict::Failed,
                Some(c.code.to_string()),
                c.detail.clone(),
                Some(c.todo(probe.advice(c.code)).to_string()),
            ),
        };
        CheckResult {
            check: probe.describe(),
            result,
            cause,
            detail,
            todo,
            ms,
            advisory,
            phase: None,
            condition: None,
            own_fault,
        }
    }

    pub fn other(probe: &dyn check::Probe, result: Verdict, why: String) -> CheckResult {
        CheckResult {
            check: probe.describe(),
            result,
            cause: None,
            detail: why,
            todo: None,
            ms: 0,
            advisory: false,
            phase: None,
            condition: None,
            own_fault: false,
        }
    }

    /// How a list of results names it: `passed`, `failed`, `advisory` (failed, not counting),
    /// `not run`.
    pub fn word(&self) -> &'static str {
        match self.result {
            Verdict::Passed => "passed",
            Verdict::Failed if self.advisory => "advisory",
            Verdict::Failed => "failed",
            Verdict::Skipped | Verdict::NotRun => "not run",
        }
    }

    /// `results` as JSON without their times: the same node prints the same output.
    pub fn timeless(results: &[CheckResult]) -> serde_json::Value {
        let mut v = serde_json::to_value(results).unwrap_or_default();
        for one in v.as_array_mut().into_iter().flatten() {
            one.as_object_mut().map(|o| o.remove("ms"));
        }
        v
    }

    /// `failed: API server https://… (tls-untrusted): … — what to do`.
    pub fn line(&self) -> String {
        let advisory = match self.advisory {
            true => " [advisory: the run goes on]",
            false => "",
        };
        match (&self.cause, &self.todo) {
            (Some(c), Some(t)) => format!("{} ({c}){advisory}: {}; {t}", self.check, self.detail),
            _ => format!("{}: {}", self.check, self.detail),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_kind_has_one_loader() {
        let kinds: Vec<&str> = super::LOADERS
            .iter()
            .flat_map(|l| l.iter().map(|(k, _)| *k))
            .collect();
        let unique: std::collections::BTreeSet<&str> = kinds.iter().copied().collect();
        assert_eq!(unique.len(), kinds.len(), "{kinds:?}");
    }
}
