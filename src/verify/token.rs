//! The node's identity: the instance role's credentials from IMDS, and the EKS token made from
//! them as aws-iam-authenticator and `aws eks get-token` make it — `k8s-aws-v1.` and the
//! unpadded base64url of a presigned STS `GetCallerIdentity` URL whose signature covers the
//! `x-k8s-aws-id` header naming the cluster. The API server (its authenticator) calls that URL;
//! the node never calls STS, and no IAM statement is needed for it.

use std::time::{Duration, SystemTime};

use base64::Engine;

use super::Cause;
use crate::instance::imds::{self, ImdsClient};

/// The header the signature covers, naming the cluster.
pub const CLUSTER_HEADER: &str = "x-k8s-aws-id";
pub const PREFIX: &str = "k8s-aws-v1.";
/// `X-Amz-Expires`: 60, as aws-iam-authenticator signs (the server allows 15 minutes from
/// `X-Amz-Date` whatever it says).
pub const PRESIGN_EXPIRES: Duration = Duration::from_secs(60);

/// The role's credentials (never printed: `Debug` shows the role).
#[derive(Clone)]
pub struct RoleCredentials {
    pub role: String,
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
}

impl std::fmt::Debug for RoleCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoleCredentials")
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ImdsCredentials {
    #[serde(default)]
    code: Option<String>,
    access_key_id: String,
    secret_access_key: String,
    #[serde(default)]
    token: Option<String>,
}

const CREDS: &str = "iam/security-credentials/";

/// The instance profile's role and its credentials, from IMDS (IMDSv1 where `allow_v1` and the
/// instance refuses IMDSv2's token, as the boot's own reads).
pub async fn credentials(imds_endpoint: &str, allow_v1: bool) -> Result<RoleCredentials, Cause> {
    let c = ImdsClient::new(imds_endpoint, allow_v1)
        .map_err(|e| Cause::new("credentials", e.to_string()))?;
    let fail = |d: String| Cause::new("credentials", d);
    let roles = c
        .get(&imds::md(CREDS))
        .await
        .map_err(|e| fail(e.to_string()))?
        .ok_or_else(|| {
            fail(format!(
                "IMDS serves no {}: the instance has no instance profile",
                imds::md(CREDS)
            ))
        })?;
    let role = roles.lines().next().unwrap_or_default().trim().to_string();
    if role.is_empty() || role.contains('/') {
        return Err(fail(format!("IMDS {} names no role", imds::md(CREDS))));
    }
    let path = imds::md(&format!("{CREDS}{role}"));
    let text = c
        .get(&path)
        .await
        .map_err(|e| fail(e.to_string()))?
        .ok_or_else(|| fail(format!("IMDS serves no {path}")))?;
    let parsed: ImdsCredentials = serde_json::from_str(&text)
        .map_err(|_| fail(format!("IMDS {path} is not the credentials document")))?;
    if parsed.code.as_deref().is_some_and(|c| c != "Success") {
        return Err(fail(format!(
            "IMDS {path} says Code {}",
            crate::base::text::printable(parsed.code.as_deref().unwrap_or(""))
        )));
    }
    Ok(RoleCredentials {
        role,
        access_key_id: parsed.access_key_id,
        secret_access_key: parsed.secret_access_key,
        session_token: parsed.token.filter(|t| !t.is_empty()),
    })
}

/// The regional STS endpoint a token is presigned for: always the Region's own name in its
/// partition, never an `AWS_ENDPOINT_URL_STS` override, because aws-iam-authenticator accepts
/// only https and its partition's STS host names (kubelet's own token, made by
/// aws-iam-authenticator on the node, knows no override either).
pub fn sts_url(region: &str) -> String {
    format!(
        "https://sts.{region}.{}",
        crate::base::ecr::dns_suffix(region)
    )
}

/// Whom a token is for: the cluster, and the STS it is presigned for in its Region.
#[derive(Debug, Clone, Copy)]
pub struct Audience<'a> {
    pub region: &'a str,
    pub sts: &'a str,
    pub cluster: &'a str,
}

/// The presigned `GetCallerIdentity` URL for the audience's cluster, signed at `now`.
pub fn presigned_url(c: &RoleCredentials, a: Audience, now: SystemTime) -> Result<String, Cause> {
    let Audience {
        region,
        sts,
        cluster,
    } = a;
    use aws_sigv4::http_request::{
        sign, SignableBody, SignableRequest, SignatureLocation, SigningSettings,
    };
    let fail = |e: String| Cause::new("token", e);
    let url = format!("{sts}/?Action=GetCallerIdentity&Version=2011-06-15");
    let creds = aws_credential_types::Credentials::new(
        &c.access_key_id,
        &c.secret_access_key,
        c.session_token.clone(),
        None,
        "imds",
    );
    let identity = creds.into();
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(PRESIGN_EXPIRES);
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("sts")
        .time(now)
        .settings(settings)
        .build()
        .map_err(|e| fail(e.to_string()))?
        .into();
    let headers = [(CLUSTER_HEADER, cluster)];
    let req = SignableRequest::new(
        "GET",
        url.clone(),
        headers.into_iter(),
        SignableBody::Bytes(&[]),
    )
    .map_err(|e| fail(e.to_string()))?;
    let (instructions, _) = sign(req, &params)
        .map_err(|e| fail(e.to_string()))?
        .into_parts();
    let mut out = url;
    for (k, v) in instructions.params() {
        out.push('&');
        out.push_str(k);
        out.push('=');
        out.push_str(&percent_encode(v));
    }
    Ok(out)
}

/// AWS's query encoding: everything but unreserved characters escaped.
fn percent_encode(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The EKS token for the audience's cluster (a secret: never logged).
pub fn eks_token(c: &RoleCredentials, a: Audience, now: SystemTime) -> Result<String, Cause> {
    let url = presigned_url(c, a, now)?;
    Ok(format!(
        "{PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(url)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds() -> RoleCredentials {
        RoleCredentials {
            role: "eks-node".into(),
            access_key_id: "ASIAEXAMPLE".into(),
            secret_access_key: "secret/with+chars".into(),
            session_token: Some("tok/en+=".into()),
        }
    }

    /// What aws-iam-authenticator's verifier reads out of a token: the prefix, unpadded
    /// base64url, the regional STS host, the action, and a signature covering x-k8s-aws-id.
    #[test]
    fn a_token_is_a_presigned_get_caller_identity_signed_with_the_cluster_header() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_780_000_000);
        let sts = sts_url("eu-west-1");
        let a = Audience {
            region: "eu-west-1",
            sts: &sts,
            cluster: "prod",
        };
        let t = eks_token(&creds(), a, now).unwrap();
        let body = t.strip_prefix(PREFIX).unwrap();
        assert!(!body.contains('='), "unpadded");
        let url = String::from_utf8(
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(body)
                .unwrap(),
        )
        .unwrap();
        assert!(
            url.starts_with(
                "https://sts.eu-west-1.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15&"
            ),
            "{url}"
        );
        for part in [
            "X-Amz-Algorithm=AWS4-HMAC-SHA256",
            "X-Amz-Credential=ASIAEXAMPLE%2F20260528%2Feu-west-1%2Fsts%2Faws4_request",
            "X-Amz-Date=20260528T202640Z",
            "X-Amz-Expires=60",
            "X-Amz-SignedHeaders=host%3Bx-k8s-aws-id",
            "X-Amz-Security-Token=tok%2Fen%2B%3D",
            "X-Amz-Signature=",
        ] {
            assert!(url.contains(part), "{part} in {url}");
        }
        assert!(!format!("{:?}", creds()).contains("secret"));
    }

    #[test]
    fn sts_is_the_partitions_own_name_whatever_the_sdk_override() {
        assert_eq!(
            sts_url("cn-north-1"),
            "https://sts.cn-north-1.amazonaws.com.cn"
        );
        assert_eq!(
            sts_url("us-iso-east-1"),
            "https://sts.us-iso-east-1.c2s.ic.gov"
        );
        // The European Sovereign Cloud's own domain (aws-iam-authenticator's
        // GetSTSPartitionDomain: `amazonaws.eu`); it was the commercial one.
        assert_eq!(
            sts_url("eusc-de-east-1"),
            "https://sts.eusc-de-east-1.amazonaws.eu"
        );
    }
}
