//! The node's identity as the real aws-iam-authenticator gives it (`common::iam_authenticator`):
//! the mappings an access entry or aws-auth can hold, rendered by the authenticator and judged by
//! the agent's preflight; a token for another cluster, refused by STS's signature check; and the
//! STS front itself, checking tokens made by upstream's own generator (`aws-iam-authenticator
//! token`, aws-sdk-go's signer: neither the agent's nor the front's) as STS does.

use std::process::Command;
use std::time::{Duration, SystemTime};

use base64::Engine;
use serde_json::{json, Value};

use super::join::{instance_mapped, sts_calls, warned, Warned, VPC};
use crate::common;
use common::control_plane::{in_netns, peers_bin, ControlPlane, CLUSTER, EKS_REGION};
use common::iam_authenticator::{Authenticator, Mapping, Review};
use common::node_identity::ACCOUNT;

fn ready() -> bool {
    super::ready()
}

/// The authenticator granted `username` (in `groups`, when given).
fn granted(auth: &Authenticator, username: &str, groups: Option<&[&str]>) -> bool {
    auth.reviews().into_iter().any(|r| match r {
        Review::Granted {
            username: u,
            groups: g,
        } => u == username && groups.map_or(true, |want| g == want),
        Review::Denied { .. } => false,
    })
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn a_role_mapped_by_session_name_is_not_the_node_its_private_dns_name_names() {
    if !ready() {
        return;
    }
    // nodeadm's InstanceIdNodeName mapping (`system:node:{{SessionName}}`) for a node whose
    // kubelet registers under its private DNS name: the Node authorizer would refuse it.
    let w = warned(
        "session",
        VPC,
        Mapping::SessionName,
        |_| {},
        "identity",
        "wrong-identity",
    );
    let user = format!("system:node:{}", w.j.instance);
    let detail = w.check["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!("sees the node as {user} in [")),
        "{detail}"
    );
    assert!(
        detail.contains(&format!("not system:node:{}", w.j.name)),
        "{detail}"
    );
    let cp = ControlPlane::shared();
    let auth = &cp.eks.as_ref().unwrap().auth;
    let groups = ["system:bootstrappers", "system:nodes"];
    assert!(granted(auth, &user, Some(&groups)), "{}", auth.log());
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn a_role_mapped_without_system_nodes_is_not_a_node() {
    if !ready() {
        return;
    }
    let w = warned(
        "nonodes",
        VPC,
        Mapping::WithoutNodes,
        |_| {},
        "identity",
        "not-node",
    );
    let user = format!("system:node:{}", w.j.name);
    let detail = w.check["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!("{user} in [system:bootstrappers")),
        "{detail}"
    );
    let cp = ControlPlane::shared();
    let auth = &cp.eks.as_ref().unwrap().auth;
    assert!(
        granted(auth, &user, Some(&["system:bootstrappers"])),
        "{}",
        auth.log()
    );
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn a_standard_access_entry_names_the_role_not_a_node() {
    if !ready() {
        return;
    }
    let w = warned(
        "standard",
        VPC,
        Mapping::Standard,
        |_| {},
        "identity",
        "wrong-identity",
    );
    let user = format!(
        "arn:aws:sts::{ACCOUNT}:assumed-role/eks-node-standard/{}",
        w.j.instance
    );
    // No group of the entry's; the API server adds system:authenticated to every user.
    let detail = w.check["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!(
            "sees the node as {user} in [system:authenticated]"
        )),
        "{detail}"
    );
    let cp = ControlPlane::shared();
    let auth = &cp.eks.as_ref().unwrap().auth;
    assert!(granted(auth, &user, Some(&[])), "{}", auth.log());
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn a_token_for_another_cluster_fails_stss_signature_check_and_the_api_server_answers_401() {
    if !ready() {
        return;
    }
    let Warned { j, .. } = warned(
        "othercluster",
        VPC,
        Mapping::Ec2Linux,
        |v| v["cluster"]["name"] = "prod-us".into(),
        "identity",
        "unauthenticated",
    );
    // The token is signed for prod-us; the authenticator calls STS with its own cluster's
    // header, so STS computes another signature.
    let cp = ControlPlane::shared();
    assert_eq!(sts_calls(&cp, &j), [(403, CLUSTER.to_string())]);
    let auth = &cp.eks.as_ref().unwrap().auth;
    let calls = auth.sts_calls(&j.access_key);
    assert_eq!(calls[0]["code"], "SignatureDoesNotMatch", "{calls:?}");
    let refused = auth.reviews().into_iter().any(|r| {
        matches!(r, Review::Denied { error, .. } if error.contains("expected 200, got 403") && error.contains("SignatureDoesNotMatch"))
    });
    assert!(refused, "{}", auth.log());
}

/// The role's credentials as the token generators take them: (key, secret, session token).
fn keys(creds: &Value) -> [String; 3] {
    ["AccessKeyId", "SecretAccessKey", "Token"].map(|k| creds[k].as_str().unwrap().to_string())
}

/// A token made by upstream's own generator (`aws-iam-authenticator token`), as kubelet's
/// exec plugin makes it on a node.
fn upstream_token(creds: &Value, cluster: &str) -> String {
    let [key, secret, session] = keys(creds);
    let dir = tempfile::tempdir().unwrap();
    let mut c = Command::new(peers_bin().join("aws-iam-authenticator"));
    c.env_clear()
        .env("HOME", dir.path())
        .env("AWS_ACCESS_KEY_ID", key)
        .env("AWS_SECRET_ACCESS_KEY", secret)
        .env("AWS_SESSION_TOKEN", session)
        .env("AWS_CONFIG_FILE", "/nonexistent")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .args([
            "token",
            "-i",
            cluster,
            "--region",
            EKS_REGION,
            "--token-only",
        ]);
    common::tls::sh(&mut c).trim().to_string()
}

/// A token presigned at `at` (aws-sigv4, as a node with that clock would) for `base`.
fn token_at(creds: &Value, base: &str, at: SystemTime) -> String {
    use aws_sigv4::http_request::{
        sign, SignableBody, SignableRequest, SignatureLocation, SigningSettings,
    };
    let [key, secret, session] = keys(creds);
    let url = format!("{base}/?Action=GetCallerIdentity&Version=2011-06-15");
    let identity =
        aws_credential_types::Credentials::new(key, secret, Some(session), None, "suite").into();
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(Duration::from_secs(60));
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(EKS_REGION)
        .name("sts")
        .time(at)
        .settings(settings)
        .build()
        .unwrap()
        .into();
    let headers = [("x-k8s-aws-id", CLUSTER)].into_iter();
    let req = SignableRequest::new("GET", url.clone(), headers, SignableBody::Bytes(&[])).unwrap();
    let (instructions, _) = sign(req, &params).unwrap().into_parts();
    let mut out = url;
    for (k, v) in instructions.params() {
        out.push_str(&format!("&{k}={}", encode(v)));
    }
    format!(
        "k8s-aws-v1.{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(out)
    )
}

/// AWS's query encoding: all but the unreserved characters escaped.
fn encode(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `url` with the first digit of its signature changed.
fn tampered(url: &str) -> String {
    let at = url.find("X-Amz-Signature=").unwrap() + "X-Amz-Signature=".len();
    let digit = if &url[at..at + 1] == "0" { "1" } else { "0" };
    format!("{}{digit}{}", &url[..at], &url[at + 1..])
}

/// The presigned URL a token carries.
fn url_of(token: &str) -> String {
    let b64 = token.strip_prefix("k8s-aws-v1.").unwrap();
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(b64)
        .unwrap();
    String::from_utf8(raw).unwrap()
}

/// GET `url` on the front as the authenticator does (`x-k8s-aws-id: cluster`, if given):
/// (status, the JSON answer).
fn front_get(auth: &Authenticator, url: &str, cluster: Option<&str>) -> (u16, Value) {
    let body = tempfile::NamedTempFile::new().unwrap();
    let mut c = auth.in_names("curl");
    c.args(["-sS", "--max-time", "10", "-w", "%{http_code}", "-o"])
        .arg(body.path())
        .arg("--cacert")
        .arg(&auth.front_ca)
        .args(["-H", "Accept: application/json"]);
    if let Some(id) = cluster {
        c.args(["-H", &format!("x-k8s-aws-id: {id}")]);
    }
    let status = common::tls::sh(c.arg(url)).trim().parse().unwrap();
    let text = std::fs::read_to_string(body.path()).unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// A SelfSubjectReview with `token`, as the node's bearer: (status, the answer).
fn whoami(cp: &ControlPlane, token: &str) -> (u16, Value) {
    let body = tempfile::NamedTempFile::new().unwrap();
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let mut c = in_netns(&cp.netns, "curl");
    c.args(["-sS", "--max-time", "15", "-w", "%{http_code}", "-o"])
        .arg(body.path())
        .arg("--cacert")
        .arg(cp.ca())
        .args(["-H", &format!("Authorization: Bearer {token}")])
        .args(["-H", "Content-Type: application/json", "--data-binary"])
        .arg(review.to_string())
        .arg(format!(
            "{}/apis/authentication.k8s.io/v1/selfsubjectreviews",
            cp.endpoint()
        ));
    let status = common::tls::sh(&mut c).trim().parse().unwrap();
    let text = std::fs::read_to_string(body.path()).unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn sts_error(answer: &(u16, Value)) -> (u16, String, String) {
    let e = &answer.1["Error"];
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    (answer.0, s(&e["Code"]), s(&e["Message"]))
}

/// STS's refusal of a signature: 403 `SignatureDoesNotMatch`.
fn mismatch(answer: (u16, Value)) -> bool {
    let (status, code, _) = sts_error(&answer);
    (status, code.as_str()) == (403, "SignatureDoesNotMatch")
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn upstreams_own_token_is_mapped_and_the_front_refuses_it_changed() {
    if !ready() {
        return;
    }
    let cp = ControlPlane::shared();
    let j = instance_mapped(&cp, "upstream", VPC, Mapping::Ec2Linux, |_| {});
    let auth = &cp.eks.as_ref().unwrap().auth;
    // The token kubelet's exec plugin makes, through the API server: the authenticator, STS
    // (the front) and EC2 (the private DNS name) give the node's identity.
    let token = upstream_token(&j.credentials, CLUSTER);
    let (status, review) = whoami(&cp, &token);
    assert_eq!(status, 201, "{review}\n{}", auth.log());
    let user = &review["status"]["userInfo"];
    assert_eq!(
        user["username"],
        format!("system:node:{}", j.name),
        "{user}"
    );
    assert_eq!(sts_calls(&cp, &j), [(200, CLUSTER.to_string())]);
    let ec2 = auth
        .front_calls()
        .into_iter()
        .filter(|c| c["service"] == "ec2");
    assert!(
        ec2.into_iter()
            .any(|c| c["action"] == "DescribeInstances" && c["status"] == 200),
        "the authenticator asked EC2 for the private DNS name"
    );
    // The same URL on the front, as the authenticator calls it: the caller, as JSON.
    let url = url_of(&token);
    let sts = format!("https://sts.{EKS_REGION}.amazonaws.com/?");
    assert!(url.starts_with(&sts), "{url}");
    let (status, answer) = front_get(auth, &url, Some(CLUSTER));
    assert_eq!(status, 200, "{answer}");
    let arn = &answer["GetCallerIdentityResponse"]["GetCallerIdentityResult"]["Arn"];
    let role = format!(
        "arn:aws:sts::{ACCOUNT}:assumed-role/eks-node-upstream/{}",
        j.instance
    );
    assert_eq!(arn, &role.as_str(), "{answer}");
    // What STS refuses: another cluster's header, none (it is a signed header), a changed
    // signature, an access key IAM does not know.
    assert!(mismatch(front_get(auth, &url, Some("prod-us"))));
    assert!(mismatch(front_get(auth, &url, None)));
    assert!(mismatch(front_get(auth, &tampered(&url), Some(CLUSTER))));
    let mut stranger = j.credentials.clone();
    stranger["AccessKeyId"] = "ASIAUNKNOWNKEY000000".into();
    let unknown = url_of(&upstream_token(&stranger, CLUSTER));
    let (status, code, _) = sts_error(&front_get(auth, &unknown, Some(CLUSTER)));
    assert_eq!((status, code.as_str()), (403, "InvalidClientTokenId"));
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn a_token_signed_by_a_clock_15_minutes_off_or_for_another_sts_is_refused() {
    if !ready() {
        return;
    }
    let cp = ControlPlane::shared();
    let j = instance_mapped(&cp, "clock", VPC, Mapping::Ec2Linux, |_| {});
    let eks = cp.eks.as_ref().unwrap();
    let auth = &eks.auth;
    let sts = format!("https://sts.{EKS_REGION}.amazonaws.com");
    let now = SystemTime::now();
    let skew = Duration::from_secs(20 * 60);
    // The signer agrees with the front at the right time.
    let good = token_at(&j.credentials, &sts, now);
    assert_eq!(front_get(auth, &url_of(&good), Some(CLUSTER)).0, 200);
    let past = token_at(&j.credentials, &sts, now - skew);
    let (s, code, msg) = sts_error(&front_get(auth, &url_of(&past), Some(CLUSTER)));
    assert_eq!((s, code.as_str()), (403, "SignatureDoesNotMatch"));
    assert!(msg.starts_with("Signature expired"), "{msg}");
    let future = token_at(&j.credentials, &sts, now + skew);
    let (s, code, msg) = sts_error(&front_get(auth, &url_of(&future), Some(CLUSTER)));
    assert_eq!((s, code.as_str()), (403, "SignatureDoesNotMatch"));
    assert!(msg.starts_with("Signature not yet current"), "{msg}");
    // Through the API server, both 401: the old one refused by the authenticator itself (its
    // own 15 minutes, STS not asked), the future one by STS (the authenticator does not look).
    let asked = auth.sts_calls(&j.access_key).len();
    assert_eq!(whoami(&cp, &past).0, 401);
    assert_eq!(auth.sts_calls(&j.access_key).len(), asked, "STS not asked");
    assert_eq!(whoami(&cp, &future).0, 401);
    let last = auth.sts_calls(&j.access_key).pop().unwrap();
    assert!(
        last["message"]
            .as_str()
            .unwrap()
            .starts_with("Signature not yet current"),
        "{last}"
    );
    // A token for moto's own URL (what an `AWS_ENDPOINT_URL_STS` would make): not STS.
    assert_eq!(
        whoami(&cp, &token_at(&j.credentials, &eks.moto, now)).0,
        401
    );
    let errors: Vec<String> = auth
        .reviews()
        .into_iter()
        .filter_map(|r| match r {
            Review::Denied { error, .. } => Some(error),
            Review::Granted { .. } => None,
        })
        .collect();
    for want in [
        "X-Amz-Date parameter is expired",
        "Signature not yet current",
        "unexpected scheme \"http\"",
    ] {
        assert!(
            errors.iter().any(|e| e.contains(want)),
            "{want} in {errors:#?}"
        );
    }
}
