//! The checks before the hand-off, all at once under one budget: the role's credentials, the
//! API server (DNS, TCP, TLS with the cluster's CA, `/readyz`), the AWS endpoints the node
//! needs, the CIDRs; the identity as soon as the credentials and the API server are known good.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::kube::{judge_identity, ApiServer};
use super::net::{self, Url};
use super::record::JoinRecord;
use super::token::{self, RoleCredentials};
use super::{cidr, Cause, Check, CheckResult, Context, Probe, Verdict};
use crate::base::text::printable;

/// What the identity check waits for.
struct Needs {
    creds: Option<oneshot::Receiver<Option<RoleCredentials>>>,
    api: Option<oneshot::Receiver<bool>>,
}

/// Run `checks` under `budget`: their results in the checks' order.
pub async fn run(checks: &[Check], budget: Duration) -> Vec<CheckResult> {
    let start = Instant::now();
    let deadline = start + budget;
    let mut out: Vec<Option<CheckResult>> = vec![None; checks.len()];
    let (creds_tx, creds_rx) = oneshot::channel();
    let (api_tx, api_rx) = oneshot::channel();
    let mut creds_tx = Some(creds_tx);
    let mut api_tx = Some(api_tx);
    let mut needs = Needs {
        creds: Some(creds_rx),
        api: Some(api_rx),
    };
    let mut tasks = Vec::new();
    for (i, c) in checks.iter().enumerate() {
        if let Some(why) = &c.skip {
            out[i] = Some(CheckResult::other(&c.probe, Verdict::Skipped, why.clone()));
            continue;
        }
        let probe = c.probe.clone();
        let task = Task {
            probe: probe.clone(),
            ctx: c.context.clone(),
            deadline,
            creds_tx: matches!(probe, Probe::Credentials { .. })
                .then(|| creds_tx.take())
                .flatten(),
            api_tx: matches!(probe, Probe::ApiServer { .. })
                .then(|| api_tx.take())
                .flatten(),
            needs: match probe {
                Probe::Identity { .. } => std::mem::replace(&mut needs, Needs::none()),
                _ => Needs::none(),
            },
        };
        tasks.push(async move {
            let r = tokio::time::timeout_at(deadline, task.run()).await;
            let ms = start.elapsed().as_millis() as u64;
            (i, judged(&probe, r, ms, budget))
        });
    }
    for (i, result) in futures_util::future::join_all(tasks).await {
        out[i] = Some(result);
    }
    out.into_iter()
        .zip(checks)
        .map(|(r, c)| {
            r.unwrap_or_else(|| CheckResult::other(&c.probe, Verdict::NotRun, "not run".into()))
        })
        .collect()
}

/// A task's end as a result.
fn judged(
    probe: &Probe,
    r: Result<Result<String, Step>, tokio::time::error::Elapsed>,
    ms: u64,
    budget: Duration,
) -> CheckResult {
    match r {
        Ok(Ok(done)) => CheckResult::of(probe, Ok(done), ms),
        Ok(Err(Step::Failed(c))) => CheckResult::of(probe, Err(c), ms),
        Ok(Err(Step::NotRun(why))) => CheckResult::other(probe, Verdict::NotRun, why),
        Err(_) => CheckResult::of(
            probe,
            Err(Cause::new(
                "timeout",
                format!("not done within the preflight budget of {budget:?}: a port that drops packets, or an answer that never comes"),
            )),
            ms,
        ),
    }
}

impl Needs {
    fn none() -> Needs {
        Needs {
            creds: None,
            api: None,
        }
    }
}

enum Step {
    Failed(Cause),
    NotRun(String),
}

impl From<Cause> for Step {
    fn from(c: Cause) -> Step {
        Step::Failed(c)
    }
}

struct Task {
    probe: Probe,
    ctx: Arc<Context>,
    /// The budget's end: a transient answer is asked again until then.
    deadline: Instant,
    creds_tx: Option<oneshot::Sender<Option<RoleCredentials>>>,
    api_tx: Option<oneshot::Sender<bool>>,
    needs: Needs,
}

impl Task {
    async fn run(self) -> Result<String, Step> {
        let ctx = &*self.ctx;
        match &self.probe {
            Probe::Credentials { .. } => {
                let r = token::credentials(&ctx.imds_endpoint, ctx.imds_v1_fallback).await;
                if let Some(tx) = self.creds_tx {
                    let _ = tx.send(r.as_ref().ok().cloned());
                }
                let c = r?;
                Ok(format!("role {}", printable(&c.role)))
            }
            Probe::ApiServer { .. } => {
                let api = ApiServer::of(ctx)?;
                let r = again(self.deadline, || api.readyz()).await;
                if let Some(tx) = self.api_tx {
                    let _ = tx.send(r.is_ok());
                }
                Ok(r?)
            }
            Probe::Identity { .. } => identity(ctx, self.needs, self.deadline).await,
            Probe::AwsEndpoint { url, .. } => Ok(reach(ctx, url).await?),
            Probe::ServiceCidr { cidr, vpc } => Ok(cidr::service_cidr(cidr, vpc)?),
            Probe::ClusterDns { address, cidr } => Ok(cidr::cluster_dns(address, cidr)?),
        }
    }
}

/// `f` again while it answers a transient cause (`unavailable`: a 5xx or 429 of a control
/// plane being scaled or upgraded), with a doubling pause from 100 ms, while one more try
/// fits before `deadline`; the last answer.
async fn again<T, F, Fut>(deadline: Instant, mut f: F) -> Result<T, Cause>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Cause>>,
{
    let mut pause = Duration::from_millis(100);
    loop {
        let r = f().await;
        match &r {
            Err(c) if c.code == "unavailable" && Instant::now() + pause * 2 < deadline => {
                tokio::time::sleep(pause).await;
                pause = pause.saturating_mul(2);
            }
            _ => return r,
        }
    }
}

/// The node's token in a SelfSubjectReview, once its credentials and the API server are good,
/// against the name the hand-off gives the Node (EC2 asked for it meanwhile when the plan
/// could not know it).
async fn identity(ctx: &Context, needs: Needs, deadline: Instant) -> Result<String, Step> {
    let creds = match needs.creds {
        Some(rx) => rx.await.ok().flatten(),
        None => None,
    };
    let Some(creds) = creds else {
        return Err(Step::NotRun("the role's credentials were not read".into()));
    };
    let name = async {
        match &ctx.node {
            Some(n) => Some(
                n.resolve(&ctx.region, ctx.transport().as_ref(), deadline)
                    .await,
            ),
            None => None,
        }
    };
    let review = async {
        let api_ok = match needs.api {
            Some(rx) => rx.await.unwrap_or(false),
            None => false,
        };
        if !api_ok {
            return Err(Step::NotRun("the API server was not reached".into()));
        }
        let token = ctx.token(&creds)?;
        let api = ApiServer::of(ctx)?;
        Ok(again(deadline, || api.whoami(&token, &creds.role)).await?)
    };
    let (name, review) = tokio::join!(name, review);
    let (user, groups) = review?;
    match name {
        Some(Ok(n)) => Ok(judge_identity(Some(&n), &user, &groups)?),
        // The role maps to some node, but whether as this Node is unknown: not a pass.
        Some(Err(why)) => Err(Step::Failed(Cause::new(
            "name-unknown",
            format!(
                "{}, but the Node's name could not be read, so whether it is this Node's is unknown: {why}",
                judge_identity(None, &user, &groups)?
            ),
        ))),
        None => Ok(judge_identity(None, &user, &groups)?),
    }
}

/// An AWS endpoint reached as the node reaches it: through the proxy unless NO_PROXY names it,
/// then TLS with the platform's roots and the config's bundles.
async fn reach(ctx: &Context, url: &str) -> Result<String, Cause> {
    let u = Url::parse(url)
        .ok_or_else(|| Cause::new("unreachable", format!("`{}` is not a URL", printable(url))))?;
    let proxy = ctx.proxy_for(&u);
    let unreachable = |c: Cause| match c.code {
        "proxy" => c,
        _ => Cause::new("unreachable", format!("{}: {}", u.authority(), c.detail)),
    };
    let bundles = ctx.bundles();
    let tcp = net::open(&u, proxy, &bundles).await.map_err(unreachable)?;
    let how = match proxy.and_then(Url::parse) {
        Some(p) => format!("through the proxy {}", p.authority()),
        None => "directly".into(),
    };
    if u.tls {
        net::tls(tcp, &u.host, net::roots(&bundles, true))
            .await
            .map_err(unreachable)?;
    }
    Ok(format!("{} reached {how}", u.authority()))
}
/// Put `results` into the join record `property` (a report property): the checks, their mode
/// (`fail` or `warn`) and the failures among its causes.
pub fn record(property: &mut serde_json::Value, results: &[CheckResult], mode: &str) {
    let mut rec: JoinRecord = serde_json::from_value(property.clone()).unwrap_or_default();
    rec.preflight_mode = Some(mode.to_string());
    rec.causes.extend(
        results
            .iter()
            .filter(|r| r.result == Verdict::Failed)
            .map(CheckResult::line),
    );
    rec.preflight = results.to_vec();
    if let Ok(v) = serde_json::to_value(&rec) {
        *property = v;
    }
}

/// The error that ends a run whose checks before the changes failed.
pub fn stopped(failed: usize) -> String {
    format!(
        "{failed} preflight check{} failed (verify.preflight: fail): no hand-off, nothing was changed; see `eks-nodeinit status`",
        if failed == 1 { "" } else { "s" }
    )
}
