//! The join's checks before the hand-off (docs/join.md): the role's credentials, the API
//! server (DNS, TCP, TLS with the cluster's CA, `/readyz`), the identity as soon as the
//! credentials and the API server are known good, the AWS endpoints the node needs, the CIDRs.
//! Each is a [`Probe`] holding the cluster's [`Context`] (never printed: the CA); they run
//! before the hand-off only, so none is listed among the probes a job after it reads.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use super::check::{Env, Outcome, Passed, Probe, Stop};
use super::kube::{judge_identity, ApiServer};
use super::net::{self, Url};
use super::token::{self, RoleCredentials};
use super::{cidr, Cause, Context};
use crate::base::text::printable;

const CREDENTIALS: &str = "credentials";
const API_SERVER: &str = "apiServer";

/// The instance role's credentials from IMDS; the identity check waits for them.
#[derive(Debug)]
pub struct Credentials {
    pub ctx: Arc<Context>,
}

impl Probe for Credentials {
    fn advice(&self, code: &str) -> Option<&'static str> {
        join_advice(code)
    }

    fn kind(&self) -> &'static str {
        CREDENTIALS
    }
    fn describe(&self) -> String {
        "credentials from IMDS".into()
    }
    fn fields(&self) -> serde_json::Value {
        json!({ "imds": self.ctx.imds_endpoint })
    }
    fn run<'a>(&'a self, _: &'a Env) -> Outcome<'a> {
        Box::pin(async move {
            let c = token::credentials(&self.ctx.imds_endpoint, self.ctx.imds_v1_fallback).await?;
            Ok(Passed {
                detail: format!("role {}", printable(&c.role)),
                value: Some(Arc::new(c)),
            })
        })
    }
}

/// DNS, TCP, TLS with the cluster's CA, then `GET /readyz`; the identity check waits for it.
#[derive(Debug)]
pub struct ApiServerReady {
    pub ctx: Arc<Context>,
}

impl Probe for ApiServerReady {
    fn advice(&self, code: &str) -> Option<&'static str> {
        join_advice(code)
    }

    fn kind(&self) -> &'static str {
        API_SERVER
    }
    fn describe(&self) -> String {
        format!("API server {}", self.ctx.endpoint)
    }
    fn fields(&self) -> serde_json::Value {
        json!({ "endpoint": self.ctx.endpoint })
    }
    fn blocks(&self, code: &str) -> bool {
        code != "unavailable"
    }
    fn run<'a>(&'a self, env: &'a Env) -> Outcome<'a> {
        Box::pin(async move {
            let api = ApiServer::of(&self.ctx)?;
            Ok(again(env.deadline, || api.readyz()).await?.into())
        })
    }
}

/// The node's EKS token in a SelfSubjectReview: who the API server says the node is.
#[derive(Debug)]
pub struct Identity {
    pub ctx: Arc<Context>,
    /// `system:node:<name> in system:nodes`, as the plan shows it.
    pub expect: String,
}

impl Probe for Identity {
    fn advice(&self, code: &str) -> Option<&'static str> {
        join_advice(code)
    }

    fn kind(&self) -> &'static str {
        "identity"
    }
    fn describe(&self) -> String {
        format!("identity is {}", self.expect)
    }
    fn fields(&self) -> serde_json::Value {
        json!({ "expect": self.expect })
    }
    fn blocks(&self, code: &str) -> bool {
        !matches!(code, "unavailable" | "no-review" | "name-unknown")
    }
    fn run<'a>(&'a self, env: &'a Env) -> Outcome<'a> {
        Box::pin(async move { Ok(identity(&self.ctx, env).await?.into()) })
    }
}

/// An AWS endpoint the node needs, reached as kubelet and containerd reach it. Only EC2's
/// failure counts: bootstrap.sh and nodeadm name the Node by DescribeInstances; the node never
/// calls STS to join, and ECR is needed for images, not to register.
#[derive(Debug)]
pub struct AwsEndpoint {
    pub ctx: Arc<Context>,
    pub service: String,
    pub url: String,
}

impl Probe for AwsEndpoint {
    fn advice(&self, code: &str) -> Option<&'static str> {
        join_advice(code)
    }

    fn kind(&self) -> &'static str {
        "awsEndpoint"
    }
    fn describe(&self) -> String {
        format!("{} reachable", self.service)
    }
    fn fields(&self) -> serde_json::Value {
        json!({ "service": self.service, "url": self.url })
    }
    fn blocks(&self, code: &str) -> bool {
        self.service == "EC2" && code != "unavailable"
    }
    fn run<'a>(&'a self, _: &'a Env) -> Outcome<'a> {
        Box::pin(async move { Ok(reach(&self.ctx, &self.url).await?.into()) })
    }
}

/// The service CIDR is none of the VPC's blocks.
#[derive(Debug)]
pub struct ServiceCidr {
    pub cidr: String,
    pub vpc: Vec<String>,
}

impl Probe for ServiceCidr {
    fn local(&self) -> bool {
        true
    }
    fn advice(&self, code: &str) -> Option<&'static str> {
        join_advice(code)
    }

    fn kind(&self) -> &'static str {
        "serviceCidr"
    }
    fn describe(&self) -> String {
        format!("service CIDR {} outside the VPC", self.cidr)
    }
    fn fields(&self) -> serde_json::Value {
        json!({ "cidr": self.cidr, "vpc": self.vpc })
    }
    fn run<'a>(&'a self, _: &'a Env) -> Outcome<'a> {
        Box::pin(async move { Ok(cidr::service_cidr(&self.cidr, &self.vpc)?.into()) })
    }
}

/// The cluster DNS address the hand-off derives lies in the service CIDR.
#[derive(Debug)]
pub struct ClusterDns {
    pub address: String,
    pub cidr: String,
}

impl Probe for ClusterDns {
    fn local(&self) -> bool {
        true
    }
    fn advice(&self, code: &str) -> Option<&'static str> {
        join_advice(code)
    }

    fn kind(&self) -> &'static str {
        "clusterDns"
    }
    fn describe(&self) -> String {
        format!("cluster DNS {} in {}", self.address, self.cidr)
    }
    fn fields(&self) -> serde_json::Value {
        json!({ "address": self.address, "cidr": self.cidr })
    }
    fn run<'a>(&'a self, _: &'a Env) -> Outcome<'a> {
        Box::pin(async move { Ok(cidr::cluster_dns(&self.address, &self.cidr)?.into()) })
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

/// Whether this node may write the tag other nodes of its fleet count
/// ([`super::fleet::JOINED_TAG`]): `CreateTags` with `DryRun` on its own instance. Without it
/// the fleet guard never counts this node, so no other node's failure is found its own on its
/// account (docs/join.md#whose-cause-it-is).
#[derive(Debug)]
pub struct FleetGuard {
    pub ctx: Arc<Context>,
    pub instance_id: String,
    /// The endpoint the agent's EC2 calls are given (else the SDK's).
    pub endpoint: Option<String>,
}

impl Probe for FleetGuard {
    fn advice(&self, code: &str) -> Option<&'static str> {
        join_advice(code)
    }

    fn kind(&self) -> &'static str {
        "fleetGuard"
    }
    fn describe(&self) -> String {
        format!(
            "the tag {} other nodes count (ec2:CreateTags, dry run)",
            super::fleet::JOINED_TAG
        )
    }
    fn fields(&self) -> serde_json::Value {
        json!({ "instanceId": self.instance_id })
    }
    /// Never stops the hand-off, in `fail` mode either: a denied permission is the role's, and
    /// every node of the fleet shares it; the node itself joins all the same.
    fn blocks(&self, _: &str) -> bool {
        false
    }
    fn run<'a>(&'a self, env: &'a Env) -> Outcome<'a> {
        Box::pin(async move {
            let t = self.ctx.transport();
            let endpoint = self.endpoint.as_deref();
            let mut ec2 = crate::aws::ec2::Ec2::new(&self.ctx.region, endpoint, t.as_ref()).await;
            let tag = (super::fleet::JOINED_TAG, self.ctx.cluster.as_str());
            let policy = crate::base::retry::RetryPolicy::default();
            match ec2.may_tag(&self.instance_id, tag, policy, env.deadline).await {
                Ok(()) => Ok(format!("ec2:CreateTags of {} allowed", tag.0).into()),
                Err(e) => Err(Cause::new(
                    "fleet-guard",
                    format!("{e}: once joined, this node cannot be marked, so other nodes of its fleet cannot count it and fewer of their failures are found their own (docs/join.md#whose-cause-it-is)"),
                )
                .into()),
            }
        })
    }
}

/// The node's token in a SelfSubjectReview, once its credentials and the API server are good,
/// against the name the hand-off gives the Node (EC2 asked for it meanwhile when the plan
/// could not know it).
async fn identity(ctx: &Context, env: &Env) -> Result<String, Stop> {
    let deadline = env.deadline;
    let creds = env.passed(CREDENTIALS).await;
    let Some(creds) = creds
        .as_deref()
        .and_then(|c| c.downcast_ref::<RoleCredentials>())
    else {
        return Err(Stop::NotRun("the role's credentials were not read".into()));
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
        if env.passed(API_SERVER).await.is_none() {
            return Err(Stop::NotRun("the API server was not reached".into()));
        }
        let token = ctx.token(creds)?;
        let api = ApiServer::of(ctx)?;
        Ok(again(deadline, || api.whoami(&token, &creds.role)).await?)
    };
    let (name, review) = tokio::join!(name, review);
    let (user, groups) = review?;
    match name {
        Some(Ok(n)) => Ok(judge_identity(Some(&n), &user, &groups)?),
        // The role maps to some node, but whether as this Node is unknown: not a pass.
        Some(Err(why)) => Err(Stop::Failed(Cause::new(
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

/// What to do for each cause of the join's checks and proof (docs/join.md says the same at
/// more length).
pub fn join_advice(code: &str) -> Option<&'static str> {
    Some(
    match code {
        "credentials" => "the instance needs an instance profile whose role EKS maps to system:nodes; check the launch template's IAM instance profile",
        "dns" => "the endpoint must resolve from the node: check cluster.apiServerEndpoint, the VPC's DNS settings (enableDnsSupport, enableDnsHostnames) and, for a private endpoint, that the node is in the cluster's VPC",
        "tcp" | "timeout" => "no route to the endpoint on its port: check the cluster security group allows 443 from the node, the subnet's routes, and for a public endpoint its allowed CIDRs or a NAT gateway",
        "proxy" => "the proxy refused or could not be reached: check proxy.https, its allow list for this host, or add the host to proxy.noProxy",
        "tls-untrusted" => "the endpoint's certificate is not signed by cluster.certificateAuthority: the CA or the endpoint belongs to another cluster; take both from the same `aws eks describe-cluster`",
        "tls-name" => "the endpoint's certificate does not name this host: use the endpoint exactly as `aws eks describe-cluster` gives it",
        "tls" | "http" => "the endpoint does not speak HTTPS as an API server does: check cluster.apiServerEndpoint",
        "readyz" => "the API server says it is not ready: wait for the cluster to be ACTIVE, or check the endpoint is this cluster's",
        "unauthenticated" => "the API server does not accept the node's role: create an access entry of type EC2_LINUX for the role (`aws eks create-access-entry --type EC2_LINUX`) or add its mapRoles line to the aws-auth ConfigMap with groups system:bootstrappers and system:nodes; map the role's ARN without its path (`arn:aws:iam::<account>:role/<name>`), not the instance profile's; check cluster.name is the cluster's own, and that the account's STS endpoint for the Region is active (IAM account settings)",
        "clock-skew" => "the node's clock is far from the API server's, so its token is refused: check chronyd and the Amazon Time Sync Service (169.254.169.123) on the node",
        "unavailable" => "the API server answered 5xx or 429: the control plane is busy, scaling or being upgraded; kubelet keeps trying, so this alone does not stop the join",
        "name-unknown" => "the Node's name is EC2's PrivateDnsName, read with ec2:DescribeInstances, which failed: give the node's role that permission and let the node reach EC2 (the proof reads the Node after the hand-off either way)",
        "no-review" => "the cluster's Kubernetes is older than 1.28: the identity is proven after the hand-off, when the Node is read",
        "wrong-identity" => "the role is mapped, but not as this node: the access entry must be of type EC2_LINUX, or the aws-auth mapRoles username must be system:node:{{EC2PrivateDNSName}}",
        "not-node" => "the role is mapped without the group system:nodes: use an access entry of type EC2_LINUX, or add system:nodes to its aws-auth mapRoles groups",
        "token" => "the node cannot sign its token: check the instance's clock and its role's credentials",
        "service-cidr" => "the service CIDR overlaps the VPC: Services would shadow addresses of the VPC; the cluster's service CIDR is fixed at creation, so cluster.cidr must be the cluster's own (`aws eks describe-cluster --query cluster.kubernetesNetworkConfig`)",
        "cluster-dns" => "the DNS address the hand-off derives (the CIDR's .10) is outside the service CIDR: pods would get a resolver nothing serves; check cluster.cidr",
        "unreachable" => "the node cannot reach this AWS endpoint: in a private subnet it needs a VPC endpoint (interface endpoints for STS, EC2, ECR api and dkr) or a NAT gateway, or the proxy must allow it",
        "deadline" => "kubelet did not register a Ready Node in time: see `journalctl -u kubelet` on the node",
        "mismatch" => "the Node differs from the plan: another drop-in or the hand-off changed kubelet's settings; see the differences listed",
        "fleet-guard" => "allow the node role ec2:CreateTags of the key eks-nodeinit/joined on its own instance (docs/iam-policy.json): other nodes count the instances that carry it before a failure of theirs retires them",
        _ => return None,
    })
}
