//! EKS `DescribeCluster`: the endpoint, the CA and the service CIDR of the cluster's IP family,
//! under the discovery deadline with the agent's retry policy.

use tokio::time::Instant;

use crate::aws;
use crate::base::retry::RetryPolicy;

use super::{retried, Answer, Calls, Found, Origin, SourceError};

pub(super) async fn describe_cluster(
    eks: &aws_sdk_eks::Client,
    cluster: &str,
    deadline: Instant,
    calls: &mut Calls,
) -> Result<Answer, SourceError> {
    let statement = aws::statement(
        "eks:DescribeCluster",
        &format!("\"arn:aws:eks:<region>:<account>:cluster/{cluster}\""),
    );
    let out = retried(
        "DescribeCluster",
        &statement,
        RetryPolicy::default(),
        deadline,
        &mut calls.describe_cluster,
        || eks.describe_cluster().name(cluster).send(),
    )
    .await
    .map_err(|e| match e {
        SourceError::NotFound { .. } => SourceError::NotFound {
            what: format!("cluster {cluster}"),
            hint: "check cluster.name and the region".into(),
        },
        e => e,
    })?;
    let origin = Origin::DescribeCluster {
        cluster: cluster.to_string(),
    };
    let found = |v: &str| Found {
        value: v.trim().to_string(),
        origin: origin.clone(),
    };
    let mut answer = Answer::default();
    let Some(c) = out.cluster() else {
        return Ok(answer);
    };
    answer.api_server_endpoint = c.endpoint().map(found);
    answer.certificate_authority = c.certificate_authority().and_then(|c| c.data()).map(found);
    if let Some(net) = c.kubernetes_network_config() {
        let v6 = net
            .ip_family()
            .is_some_and(|f| f.as_str().eq_ignore_ascii_case("ipv6"));
        let cidr = if v6 {
            net.service_ipv6_cidr()
        } else {
            net.service_ipv4_cidr()
        };
        answer.cidr = cidr.map(found);
    }
    Ok(answer)
}
