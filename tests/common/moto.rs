//! moto's server (EC2, Parameter Store, EKS, Auto Scaling), started on loopback with a free port,
//! and the SDK clients the tests use to set it up and read it back.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};

use super::{free_port, peer_present, Proc};

/// moto's server on 127.0.0.1 with a free port, stopped when dropped. `None` (with a note) when
/// moto is not installed on a developer box; in CI its absence fails the test.
pub struct Moto {
    _child: Proc,
    pub url: String,
}

pub fn start_moto() -> Option<Moto> {
    start_moto_with(&[])
}

/// moto with extra environment (e.g. `MOTO_ENABLE_RECORDING=1` and `MOTO_RECORDER_FILEPATH`
/// to log every request it serves).
pub fn start_moto_with(env: &[(&str, &str)]) -> Option<Moto> {
    start_moto_as(&["-m", "moto.server"], env)
}

/// moto's server started by `python3 <args>` (a module or a script that runs moto.server's main
/// with an action moto lacks: tests/moto/), with extra environment.
pub fn start_moto_as(args: &[&str], env: &[(&str, &str)]) -> Option<Moto> {
    start_moto_at("127.0.0.1", args, env)
}

/// moto as [`start_moto_as`] on another loopback address (`127.0.0.2`: a host that a NO_PROXY
/// naming `127.0.0.1` does not cover).
pub fn start_moto_at(host: &str, args: &[&str], env: &[(&str, &str)]) -> Option<Moto> {
    let have = Command::new("python3")
        .args(["-c", "import moto.server"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !peer_present(if have { &[] } else { &["moto[server]"] }) {
        return None;
    }
    let port = free_port();
    let child = Command::new("python3")
        .args(args)
        .args(["-H", host, "-p", &port.to_string()])
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    while std::net::TcpStream::connect((host, port)).is_err() {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(30),
            "moto did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    Some(Moto {
        _child: Proc(child),
        url: format!("http://{host}:{port}"),
    })
}

/// The form body of each request moto recorded so far (`MOTO_RECORDER_FILEPATH`), base64 in the
/// recording decoded; none before the first request.
pub fn recorded_bodies(log: &std::path::Path) -> Vec<String> {
    use base64::Engine as _;
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| {
            let body = v["body"].as_str().unwrap_or_default();
            match v["body_encoded"] == true {
                true => base64::engine::general_purpose::STANDARD
                    .decode(body)
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default(),
                false => body.to_string(),
            }
        })
        .collect()
}

/// SDK settings for a local endpoint (moto) with its test credentials.
pub async fn moto_sdk_config(url: &str, region: &str) -> aws_config::SdkConfig {
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(region.to_string()))
        .credentials_provider(aws_sdk_ec2::config::Credentials::new(
            "testing", "testing", None, None, "test",
        ))
        .endpoint_url(url)
        .load()
        .await
}

/// [`moto_sdk_config`] for moto over TLS, trusting only `ca` (PEM).
pub async fn moto_tls_sdk_config(url: &str, region: &str, ca: &[u8]) -> aws_config::SdkConfig {
    use aws_smithy_http_client::tls::{
        rustls_provider::CryptoMode, Provider, TlsContext, TrustStore,
    };
    let tls = TlsContext::builder()
        .with_trust_store(TrustStore::empty().with_pem_certificate(ca.to_vec()))
        .build()
        .unwrap();
    let http = aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::AwsLc))
        .tls_context(tls)
        .build_https();
    moto_sdk_config(url, region)
        .await
        .into_builder()
        .http_client(http)
        .build()
}

/// Put `(name, value, SecureString?)` parameters into Parameter Store (moto at `url`), in order.
pub async fn put_parameters(url: &str, parameters: &[(String, String, bool)]) {
    let ssm = aws_sdk_ssm::Client::new(&moto_sdk_config(url, "eu-west-1").await);
    for (name, value, secure) in parameters {
        ssm.put_parameter()
            .name(name)
            .value(value)
            .r#type(if *secure {
                aws_sdk_ssm::types::ParameterType::SecureString
            } else {
                aws_sdk_ssm::types::ParameterType::String
            })
            .send()
            .await
            .unwrap();
    }
}

/// Publish a cluster's values in Parameter Store as the agent's `ssmPath` source reads them by
/// default (`<prefix>/APISERVER_ENDPOINT`, `<prefix>/B64_CLUSTER_CA` as a SecureString,
/// `<prefix>/SERVICE_CIDR`), in moto at `url`.
pub async fn put_cluster_parameters(url: &str, prefix: &str, endpoint: &str, ca: &str, cidr: &str) {
    let p =
        |name: &str, value: &str, secure| (format!("{prefix}/{name}"), value.to_string(), secure);
    put_parameters(
        url,
        &[
            p("APISERVER_ENDPOINT", endpoint, false),
            p("B64_CLUSTER_CA", ca, true),
            p("SERVICE_CIDR", cidr, false),
        ],
    )
    .await
}

/// An EC2 client for a local endpoint (moto) with test credentials.
pub async fn ec2_client(url: &str, region: &str) -> aws_sdk_ec2::Client {
    aws_sdk_ec2::Client::new(&moto_sdk_config(url, region).await)
}

/// moto's first image.
pub async fn first_image(ec2: &aws_sdk_ec2::Client) -> String {
    let images = ec2.describe_images().send().await.unwrap();
    images.images()[0].image_id().unwrap().to_string()
}

/// One run-instances instance from moto's first image: (instance id, private IPv4).
pub async fn run_instance(ec2: &aws_sdk_ec2::Client) -> (String, String) {
    let image = first_image(ec2).await;
    let ran = ec2
        .run_instances()
        .image_id(image)
        .instance_type(aws_sdk_ec2::types::InstanceType::M6iLarge)
        .min_count(1)
        .max_count(1)
        .send()
        .await
        .unwrap();
    let inst = &ran.instances()[0];
    (
        inst.instance_id().unwrap().to_string(),
        inst.private_ip_address().unwrap().to_string(),
    )
}

/// Every tag on an instance, as DescribeTags reports it.
pub async fn instance_tags(
    ec2: &aws_sdk_ec2::Client,
    id: &str,
) -> Result<BTreeMap<String, String>, String> {
    let out = ec2
        .describe_tags()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("resource-id")
                .values(id)
                .build(),
        )
        .send()
        .await
        .map_err(|e| e.to_string())?;
    Ok(out
        .tags()
        .iter()
        .filter_map(|t| Some((t.key()?.to_string(), t.value()?.to_string())))
        .collect())
}

/// An Auto Scaling group `group` in moto of `size` instances (moto's first image, m6i.large) in
/// `zone`, with the launch lifecycle hook `hook`: the client, to go on with.
pub async fn group_with_launch_hook(
    conf: &aws_config::SdkConfig,
    group: &str,
    hook: &str,
    zone: &str,
    size: i32,
) -> aws_sdk_autoscaling::Client {
    let image = first_image(&aws_sdk_ec2::Client::new(conf)).await;
    let a = aws_sdk_autoscaling::Client::new(conf);
    let lc = format!("lc-{group}");
    a.create_launch_configuration()
        .launch_configuration_name(&lc)
        .image_id(image)
        .instance_type("m6i.large")
        .send()
        .await
        .unwrap();
    a.create_auto_scaling_group()
        .auto_scaling_group_name(group)
        .launch_configuration_name(&lc)
        .min_size(size)
        .max_size(size.max(1))
        .desired_capacity(size)
        .availability_zones(zone)
        .send()
        .await
        .unwrap();
    a.put_lifecycle_hook()
        .auto_scaling_group_name(group)
        .lifecycle_hook_name(hook)
        .lifecycle_transition("autoscaling:EC2_INSTANCE_LAUNCHING")
        .send()
        .await
        .unwrap();
    a
}
