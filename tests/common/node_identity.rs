//! A node's identity as EC2 and IAM give it, in moto: the instance profile's role, its
//! credentials for the instance's session (the session name is the instance id, as EC2 names
//! it), what IMDS serves for the instance, and the Query API calls that make them. The role's
//! secret is told to the STS front and its mapping to aws-iam-authenticator
//! (`iam_authenticator.rs`): the suite knows both, as AWS does.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Value};

use super::iam_authenticator::Mapping;

pub const ACCOUNT: &str = "123456789012";

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

/// A node's instance profile role in moto, as EC2 serves it: the role and its credentials for
/// the instance's session.
pub struct NodeRole {
    pub name: String,
    pub arn: String,
    /// The IMDS `iam/security-credentials/<role>` document.
    pub credentials: Value,
    /// The session's access key (what the STS front records each call under).
    pub access_key: String,
}

/// The role `eks-node-{tag}` made in moto and assumed for `instance`'s session; its secret
/// told to the STS front, the role mapped as `mapping` says (an aws-auth entry or an access
/// entry; `Mapping::Unmapped`: none).
pub fn node_role(
    eks: &super::control_plane::Eks,
    netns: &Path,
    tag: &str,
    instance: &str,
    mapping: Mapping,
) -> NodeRole {
    let region = eks.auth.region.clone();
    let name = format!("eks-node-{tag}");
    let trust = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
    let query = |service: &str, params: &[(&str, &str)]| {
        moto_query(netns, &eks.moto, &region, service, params)
    };
    query(
        "iam",
        &[
            ("Action", "CreateRole"),
            ("Version", "2010-05-08"),
            ("RoleName", &name),
            ("AssumeRolePolicyDocument", trust),
        ],
    );
    let arn = format!("arn:aws:iam::{ACCOUNT}:role/{name}");
    let xml = query(
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
    eks.auth.learn(&ak, &sk, &token);
    eks.auth.map(&arn, mapping);
    let credentials = json!({"Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": ak, "SecretAccessKey": sk, "Token": token, "Expiration": "2099-01-01T00:00:00Z"});
    NodeRole {
        name,
        arn,
        credentials,
        access_key: ak,
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
