//! An EKS authenticator for the control-plane suite: kube-apiserver's token webhook doing what
//! aws-iam-authenticator does with a node's token (its pkg/token and pkg/mapper): decode
//! `k8s-aws-v1.` + unpadded base64url into a presigned STS `GetCallerIdentity` URL; refuse one
//! that is not for the expected STS host, names other parameters, or whose signature does not
//! cover `x-k8s-aws-id`; check the signature as STS would (with the secret of the access key,
//! which the suite knows: moto checks none) and the 15 minutes from `X-Amz-Date`; call the URL
//! on moto's STS with the cluster's header; turn the assumed-role ARN into its role's ARN; map
//! that to a user (`system:node:{{EC2PrivateDNSName}}`: the session name is the instance id,
//! whose private DNS name EC2, moto's, gives) and groups. An unmapped ARN is refused with 403,
//! as the authenticator does (the API server then answers 401).
//!
//! Where it differs: the STS host is moto's (plain HTTP on the suite's loopback) instead of
//! `sts.<region>.amazonaws.com`, and moto needs an `Authorization` header naming the access key
//! to know the caller.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use serde_json::{json, Value};

pub const TOKEN_PREFIX: &str = "k8s-aws-v1.";
pub const NODE_USER: &str = "system:node:{{EC2PrivateDNSName}}";
const ALLOWED: &[&str] = &[
    "action",
    "version",
    "x-amz-algorithm",
    "x-amz-credential",
    "x-amz-date",
    "x-amz-expires",
    "x-amz-security-token",
    "x-amz-signature",
    "x-amz-signedheaders",
];

#[derive(Default)]
pub struct State {
    /// The only STS a token may name: `scheme://host[:port]` (moto's, or the Region's STS name
    /// where the node reaches moto by it).
    pub sts_base: String,
    pub moto_url: String,
    pub region: String,
    /// The cluster id the token must be signed for.
    pub cluster: String,
    /// Each access key's secret, to check signatures as STS does.
    pub secrets: BTreeMap<String, String>,
    /// Role ARN → (username template, groups), as aws-auth's mapRoles or an access entry.
    pub roles: BTreeMap<String, (String, Vec<String>)>,
    /// Every review: the user it came to, or why it was refused.
    pub reviews: Vec<Result<String, String>>,
}

pub struct EksAuth {
    pub addr: SocketAddr,
    pub state: Arc<Mutex<State>>,
}

impl EksAuth {
    /// The webhook on a free port in `netns`.
    pub fn start_in(netns: &Path, state: State) -> EksAuth {
        let state = Arc::new(Mutex::new(state));
        let addr = super::ec2_server::serve_in(Some(netns), state.clone(), handle);
        EksAuth { addr, state }
    }

    /// Whether `role_arn` is mapped (as aws-auth's mapRoles or an access entry would).
    pub fn maps(&self, role_arn: &str) -> bool {
        self.state.lock().unwrap().roles.contains_key(role_arn)
    }

    /// Every review so far: the user each came to, or why it was refused.
    pub fn reviews(&self) -> Vec<Result<String, String>> {
        self.state.lock().unwrap().reviews.clone()
    }

    /// The kubeconfig kube-apiserver reads with `--authentication-token-webhook-config-file`.
    pub fn kubeconfig(&self) -> String {
        json!({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "eks-auth", "cluster": {"server": format!("http://{}/authenticate", self.addr)}}],
            "users": [{"name": "apiserver", "user": {}}],
            "contexts": [{"name": "webhook", "context": {"cluster": "eks-auth", "user": "apiserver"}}],
            "current-context": "webhook",
        })
        .to_string()
    }
}

fn reply(status: u16, v: Value) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(v.to_string())))
        .unwrap())
}

async fn handle(
    state: Arc<Mutex<State>>,
    _: Request<()>,
    body: Bytes,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let review: Value = serde_json::from_slice(&body).unwrap_or_default();
    let token = review["spec"]["token"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let r = authenticate(&state, &token).await;
    let refused = |why: String| json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "status": {"authenticated": false, "error": why}});
    let answer = match &r {
        Ok(user) => reply(
            200,
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "status": {"authenticated": true, "user": user}}),
        ),
        // Not an EKS token: another authenticator's (the suite's static one) or none.
        Err(Refusal::NotOurs) => reply(200, refused("not an EKS token".into())),
        Err(Refusal::Unmapped(why)) => reply(403, refused(why.clone())),
        Err(Refusal::Invalid(why)) => reply(200, refused(why.clone())),
    };
    if !matches!(r, Err(Refusal::NotOurs)) {
        let rec = match r {
            Ok(u) => Ok(u["username"].as_str().unwrap_or_default().to_string()),
            Err(Refusal::Unmapped(w) | Refusal::Invalid(w)) => Err(w),
            Err(Refusal::NotOurs) => unreachable!(),
        };
        state.lock().unwrap().reviews.push(rec);
    }
    answer
}

enum Refusal {
    NotOurs,
    Invalid(String),
    Unmapped(String),
}

/// The presigned URL's query, keys lowercased (as the authenticator reads them), values
/// percent-decoded.
fn query(url: &str) -> Result<BTreeMap<String, String>, String> {
    let q = url.split_once('?').map(|(_, q)| q).ok_or("no query")?;
    let mut out = BTreeMap::new();
    for kv in q.split('&') {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        let k = k.to_ascii_lowercase();
        if !ALLOWED.contains(&k.as_str()) {
            return Err(format!("non-allowlisted query parameter {k}"));
        }
        if out.insert(k.clone(), decode(v)).is_some() {
            return Err(format!("duplicate query parameter {k}"));
        }
    }
    Ok(out)
}

fn decode(v: &str) -> String {
    let b = v.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let hex = v
            .get(i + 1..i + 3)
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b[i], hex) {
            (b'%', Some(x)) => {
                out.push(x);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The token's URL checked as the authenticator checks it, its signature as STS does.
fn check(s: &State, token: &str) -> Result<(String, BTreeMap<String, String>), Refusal> {
    let Some(b64) = token.strip_prefix(TOKEN_PREFIX) else {
        return Err(Refusal::NotOurs);
    };
    let bad = |w: String| Refusal::Invalid(w);
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(b64)
        .map_err(|e| bad(format!("not base64url: {e}")))?;
    let url = String::from_utf8(raw).map_err(|_| bad("not UTF-8".into()))?;
    if url.len() > 4096 {
        return Err(bad("token too long".into()));
    }
    let prefix = format!("{}/?", s.sts_base);
    if !url.starts_with(&prefix) {
        return Err(bad(format!("unexpected STS endpoint or path: {url:.60}")));
    }
    let q = query(&url).map_err(bad)?;
    if q.get("action").map(String::as_str) != Some("GetCallerIdentity") {
        return Err(bad("unexpected action".into()));
    }
    let signed = q.get("x-amz-signedheaders").cloned().unwrap_or_default();
    if !signed.split(';').any(|h| h == "x-k8s-aws-id") {
        return Err(bad(
            "client did not sign the x-k8s-aws-id header in the pre-signed URL".into(),
        ));
    }
    let expires: u64 = q
        .get("x-amz-expires")
        .and_then(|e| e.parse().ok())
        .ok_or_else(|| bad("no X-Amz-Expires".into()))?;
    if expires > 900 {
        return Err(bad("X-Amz-Expires over 15 minutes".into()));
    }
    let date = parse_amz_date(q.get("x-amz-date").map(String::as_str).unwrap_or(""))
        .ok_or_else(|| bad("bad X-Amz-Date".into()))?;
    if SystemTime::now().duration_since(date).unwrap_or_default() > Duration::from_secs(900) {
        return Err(bad("token expired".into()));
    }
    let want = resign(s, &url, &q, date).map_err(bad)?;
    if q.get("x-amz-signature") != Some(&want) {
        return Err(bad("SignatureDoesNotMatch: the signature is not the one STS computes for this request and the cluster's x-k8s-aws-id".into()));
    }
    Ok((url, q))
}

/// `20260528T202640Z` as a time.
fn parse_amz_date(d: &str) -> Option<SystemTime> {
    if d.len() != 16 || !d.ends_with('Z') {
        return None;
    }
    let n = |r: std::ops::Range<usize>| d.get(r)?.parse::<i64>().ok();
    let (y, mo, da, h, mi, se) = (
        n(0..4)?,
        n(4..6)?,
        n(6..8)?,
        n(9..11)?,
        n(11..13)?,
        n(13..15)?,
    );
    // Days from the civil date (Howard Hinnant's algorithm).
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let doy = (153 * (if mo > 2 { mo - 3 } else { mo + 9 }) + 2) / 5 + da - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146097 + doe - 719468;
    let secs = days * 86400 + h * 3600 + mi * 60 + se;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(u64::try_from(secs).ok()?))
}

/// The signature STS computes: the same request signed again with the access key's secret,
/// the cluster's header, the token's own time and expiry.
fn resign(
    s: &State,
    url: &str,
    q: &BTreeMap<String, String>,
    date: SystemTime,
) -> Result<String, String> {
    use aws_sigv4::http_request::{
        sign, SignableBody, SignableRequest, SignatureLocation, SigningSettings,
    };
    let cred = q.get("x-amz-credential").ok_or("no X-Amz-Credential")?;
    let parts: Vec<&str> = cred.split('/').collect();
    let [key, _, region, service, _] = parts[..] else {
        return Err("malformed X-Amz-Credential".into());
    };
    if service != "sts" {
        return Err("credential scope is not sts".into());
    }
    let secret = s
        .secrets
        .get(key)
        .ok_or_else(|| format!("InvalidClientTokenId: the access key {key} is unknown"))?;
    let base = url.split_once('?').map(|(b, _)| b).unwrap_or(url);
    let kept: Vec<&str> = url
        .split_once('?')
        .map(|(_, q)| q)
        .unwrap_or("")
        .split('&')
        .filter(|kv| !kv.to_ascii_lowercase().starts_with("x-amz-"))
        .collect();
    let unsigned = format!("{base}?{}", kept.join("&"));
    let identity = aws_credential_types::Credentials::new(
        key,
        secret,
        q.get("x-amz-security-token").cloned(),
        None,
        "suite",
    )
    .into();
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(Duration::from_secs(q["x-amz-expires"].parse().unwrap_or(0)));
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("sts")
        .time(date)
        .settings(settings)
        .build()
        .map_err(|e| e.to_string())?
        .into();
    let headers = [("x-k8s-aws-id", s.cluster.as_str())];
    let req = SignableRequest::new(
        "GET",
        unsigned,
        headers.into_iter(),
        SignableBody::Bytes(&[]),
    )
    .map_err(|e| e.to_string())?;
    let (_, signature) = sign(req, &params).map_err(|e| e.to_string())?.into_parts();
    Ok(signature)
}

/// Check, call STS, map.
async fn authenticate(state: &Arc<Mutex<State>>, token: &str) -> Result<Value, Refusal> {
    let (url, q, moto, cluster, region, sts_base) = {
        let s = state.lock().unwrap();
        let (url, q) = check(&s, token)?;
        (
            url,
            q,
            s.moto_url.clone(),
            s.cluster.clone(),
            s.region.clone(),
            s.sts_base.clone(),
        )
    };
    let key = q["x-amz-credential"]
        .split('/')
        .next()
        .unwrap_or_default()
        .to_string();
    // The URL as the node signed it, called where this authenticator reaches STS (moto).
    let call = url.replacen(&sts_base, &moto, 1);
    let xml = get_caller_identity(&call, &key, &cluster, &region)
        .await
        .map_err(Refusal::Invalid)?;
    let tag = |t: &str| xml_tag(&xml, t);
    let (arn, account, user_id) = (
        tag("Arn").unwrap_or_default(),
        tag("Account").unwrap_or_default(),
        tag("UserId").unwrap_or_default(),
    );
    let (role_arn, session) = canonical(&arn)
        .ok_or_else(|| Refusal::Invalid(format!("not an assumed-role ARN: {arn}")))?;
    let mapped = state.lock().unwrap().roles.get(&role_arn).cloned();
    let Some((template, groups)) = mapped else {
        return Err(Refusal::Unmapped(format!(
            "identity is not mapped: ARN {role_arn}"
        )));
    };
    let username = match template.contains("{{EC2PrivateDNSName}}") {
        true => template.replace(
            "{{EC2PrivateDNSName}}",
            &private_dns_name(&moto, &region, &session)
                .await
                .map_err(Refusal::Invalid)?,
        ),
        false => template.clone(),
    };
    Ok(json!({
        "username": username,
        "uid": format!("aws-iam-authenticator:{account}:{user_id}"),
        "groups": groups,
        "extra": {"arn": [arn], "canonicalArn": [role_arn], "sessionName": [session], "accessKeyId": [key]},
    }))
}

/// `arn:aws:sts::ACCT:assumed-role/ROLE/SESSION` → (`arn:aws:iam::ACCT:role/ROLE`, SESSION).
pub fn canonical(arn: &str) -> Option<(String, String)> {
    let rest = arn.strip_prefix("arn:aws:sts::")?;
    let (account, res) = rest.split_once(':')?;
    let mut p = res.split('/');
    (p.next()? == "assumed-role").then_some(())?;
    let (role, session) = (p.next()?, p.next()?);
    Some((
        format!("arn:aws:iam::{account}:role/{role}"),
        session.to_string(),
    ))
}

/// GET the presigned URL on moto with the cluster's header.
async fn get_caller_identity(
    url: &str,
    key: &str,
    cluster: &str,
    region: &str,
) -> Result<String, String> {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build(hyper_util::client::legacy::connect::HttpConnector::new());
    let req = Request::get(url)
        .header("x-k8s-aws-id", cluster)
        .header("accept", "application/json")
        .header("authorization", moto_authorization(key, region, "sts"))
        .body(Full::new(Bytes::new()))
        .map_err(|e| e.to_string())?;
    let resp = client
        .request(req)
        .await
        .map_err(|e| format!("STS unreachable: {e}"))?;
    let status = resp.status();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    let text = String::from_utf8_lossy(&body).into_owned();
    match status.is_success() {
        true => Ok(text),
        false => Err(format!("STS answered {status}: {text:.200}")),
    }
}

/// The header moto reads the caller and the service from (it checks no signature).
pub fn moto_authorization(key: &str, region: &str, service: &str) -> String {
    format!("AWS4-HMAC-SHA256 Credential={key}/20260101/{region}/{service}/aws4_request, SignedHeaders=host, Signature=0")
}

/// The instance's private DNS name, from EC2 (moto's).
pub async fn private_dns_name(moto: &str, region: &str, instance: &str) -> Result<String, String> {
    let conf = super::moto_sdk_config(moto, region).await;
    let out = aws_sdk_ec2::Client::new(&conf)
        .describe_instances()
        .instance_ids(instance)
        .send()
        .await
        .map_err(|e| format!("DescribeInstances {instance}: {e}"))?;
    out.reservations()
        .iter()
        .flat_map(|r| r.instances())
        .find_map(|i| i.private_dns_name().map(String::from))
        .ok_or_else(|| format!("no instance {instance}"))
}

/// A Query API call on moto in `netns` (`service` names the credential scope moto routes by):
/// the XML it answered.
pub fn moto_query(
    netns: &Path,
    moto: &str,
    region: &str,
    service: &str,
    params: &[(&str, &str)],
) -> String {
    let mut c = super::control_plane::in_netns(netns, "curl");
    c.args(["-sS", "--max-time", "10", "-H"]).arg(format!(
        "Authorization: {}",
        moto_authorization("AKIASUITE", region, service)
    ));
    for (k, v) in params {
        c.arg("--data-urlencode").arg(format!("{k}={v}"));
    }
    let out = c.arg(format!("{moto}/")).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The text of the first `<tag>` in `xml`.
pub fn xml_tag(xml: &str, tag: &str) -> Option<String> {
    Some(
        xml.split(&format!("<{tag}>"))
            .nth(1)?
            .split(&format!("</{tag}>"))
            .next()?
            .to_string(),
    )
}

/// A node's instance profile role in moto, as EC2 serves it: the role, its credentials for
/// the instance's session (the session name is the instance id), told to the authenticator
/// (its secret) and mapped as a node's (`EC2_LINUX`).
pub struct NodeRole {
    pub name: String,
    pub arn: String,
    /// The IMDS `iam/security-credentials/<role>` document.
    pub credentials: Value,
}

pub const ACCOUNT: &str = "123456789012";

pub fn node_role(
    eks: &super::control_plane::Eks,
    netns: &Path,
    tag: &str,
    instance: &str,
) -> NodeRole {
    let region = eks.auth.state.lock().unwrap().region.clone();
    let name = format!("eks-node-{tag}");
    let trust = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
    moto_query(
        netns,
        &eks.moto,
        &region,
        "iam",
        &[
            ("Action", "CreateRole"),
            ("Version", "2010-05-08"),
            ("RoleName", &name),
            ("AssumeRolePolicyDocument", trust),
        ],
    );
    let arn = format!("arn:aws:iam::{ACCOUNT}:role/{name}");
    let xml = moto_query(
        netns,
        &eks.moto,
        &region,
        "sts",
        &[
            ("Action", "AssumeRole"),
            ("Version", "2011-06-15"),
            ("RoleArn", &arn),
            ("RoleSessionName", instance),
        ],
    );
    let field = |t: &str| xml_tag(&xml, t).unwrap_or_else(|| panic!("AssumeRole: no {t} in {xml}"));
    let (ak, sk, token) = (
        field("AccessKeyId"),
        field("SecretAccessKey"),
        field("SessionToken"),
    );
    let mut s = eks.auth.state.lock().unwrap();
    s.secrets.insert(ak.clone(), sk.clone());
    s.roles.insert(
        arn.clone(),
        (
            NODE_USER.into(),
            vec!["system:bootstrappers".into(), "system:nodes".into()],
        ),
    );
    let credentials = json!({"Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": ak, "SecretAccessKey": sk, "Token": token, "Expiration": "2099-01-01T00:00:00Z"});
    NodeRole {
        name,
        arn,
        credentials,
    }
}

/// What IMDS serves for an instance with `role`: its id, address, private DNS name, type,
/// Region, the role's credentials, the VPC's blocks, in service in `group` (if any).
pub fn instance_metadata(
    instance: &str,
    ip: &str,
    dns: &str,
    region: &str,
    role: &NodeRole,
    vpc: &str,
    group: Option<&str>,
) -> super::imds_server::State {
    const MAC: &str = "0e:49:61:0f:c3:11";
    let mut st = super::imds_server::State::default();
    let az = format!("{region}a");
    for (k, v) in [
        ("instance-id", instance),
        ("local-ipv4", ip),
        ("local-hostname", dns),
        ("instance-type", "m6i.large"),
        ("placement/region", region),
        ("placement/availability-zone", az.as_str()),
        ("iam/security-credentials/", role.name.as_str()),
        ("mac", MAC),
    ] {
        st.data.insert(k.into(), v.into());
    }
    st.data.insert(
        format!("iam/security-credentials/{}", role.name),
        role.credentials.to_string(),
    );
    st.data.insert(
        format!("network/interfaces/macs/{MAC}/vpc-ipv4-cidr-blocks"),
        vpc.into(),
    );
    st.tags = Some(BTreeMap::new());
    if let Some(g) = group {
        st.data.insert(
            "autoscaling/target-lifecycle-state".into(),
            "InService".into(),
        );
        st.tags = Some([("aws:autoscaling:groupName".to_string(), g.to_string())].into());
    }
    st
}

#[cfg(test)]
mod tests {
    #[test]
    fn amz_dates_and_arns_read_as_the_authenticator_reads_them() {
        let t = super::parse_amz_date("20260528T202640Z").unwrap();
        assert_eq!(
            t.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs(),
            1_780_000_000
        );
        assert_eq!(
            super::canonical("arn:aws:sts::123456789012:assumed-role/eks-node/i-0123456789abcdef0"),
            Some((
                "arn:aws:iam::123456789012:role/eks-node".into(),
                "i-0123456789abcdef0".into()
            ))
        );
    }
}
