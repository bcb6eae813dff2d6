//! The IMDSv2 client against a server that behaves like the real one, with faults.

use crate::common;

use std::time::{Duration, Instant};

use common::imds_server::{ImdsServer, State};
use eks_nodeinit::instance::imds::{fetch, Ask, ImdsClient, ImdsError};
use eks_nodeinit::instance::metadata::UserData;

fn client(s: &ImdsServer) -> ImdsClient {
    ImdsClient::new(&s.url(), false).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_everything_with_one_token() {
    let s = ImdsServer::start();
    let c = client(&s);
    let md = fetch(&c, Duration::from_secs(5), Ask::default())
        .await
        .unwrap();
    assert_eq!(md.instance_id, "i-0123456789abcdef0");
    assert_eq!(md.private_ipv4.as_deref(), Some("10.0.12.34"));
    assert_eq!(md.ipv6, None, "404 is absent, not an error");
    assert_eq!(md.instance_type, "m6i.large");
    assert_eq!(md.region, "eu-west-1");
    assert_eq!(md.availability_zone, "eu-west-1a");
    // IMDS names no group: the group is one of the tags (`Facts::autoscaling_group`).
    assert_eq!(md.autoscaling_group_name, None);
    assert_eq!(
        md.tags.as_ref().unwrap()["aws:autoscaling:groupName"],
        "eks-scaler-asg"
    );
    assert_eq!(
        md.tags.as_ref().unwrap()["kubernetes.io/cluster/prod-eu"],
        "owned"
    );
    let st = s.state.lock().unwrap();
    assert_eq!(st.puts, 1, "one token PUT for all reads: {:?}", st.paths);
    assert_eq!(st.unauthorized, 0);
    // 9 metadata paths (the target lifecycle state among them, 404 outside an Auto Scaling
    // group; the local hostname, the Node's name) + user data + 2 tag values
    assert_eq!(st.gets, 12, "{:?}", st.paths);
    assert_eq!(
        md.local_hostname.as_deref(),
        Some("ip-10-0-12-34.eu-west-1.compute.internal")
    );
    assert_eq!(
        md.target_lifecycle_state, None,
        "404 is absent, not an error"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_off_and_ipv6_only() {
    let mut st = State::default();
    for (k, v) in [
        ("instance-id", "i-1"),
        ("ipv6", "2600:1f18::1"),
        ("instance-type", "t3.small"),
        ("placement/region", "us-east-1"),
        ("placement/availability-zone", "us-east-1a"),
    ] {
        st.data.insert(k.into(), v.into());
    }
    let s = ImdsServer::start_with(st);
    let md = fetch(&client(&s), Duration::from_secs(5), Ask::default())
        .await
        .unwrap();
    assert_eq!(md.tags, None);
    assert_eq!(md.autoscaling_group_name, None);
    assert_eq!(md.private_ipv4, None);
    assert_eq!(
        eks_nodeinit::plan::aspects::name_tag::value(Some("g"), &md).unwrap(),
        "g-2600x1f18xx1"
    );
    // An empty answer is no address too, as the dual-stack choice reads it (before, it was
    // an address of "" here and none there).
    s.state
        .lock()
        .unwrap()
        .data
        .insert("local-ipv4".into(), String::new());
    let md = fetch(&client(&s), Duration::from_secs(5), Ask::default())
        .await
        .unwrap();
    assert_eq!(md.private_ipv4, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_token_is_refreshed_once() {
    let s = ImdsServer::start();
    s.state.lock().unwrap().expire_tokens_after_gets = Some(1);
    let md = fetch(&client(&s), Duration::from_secs(5), Ask::default())
        .await
        .unwrap();
    assert_eq!(md.instance_id, "i-0123456789abcdef0");
    let st = s.state.lock().unwrap();
    assert!(st.unauthorized >= 1, "the server expired the token");
    assert_eq!(st.puts, 2, "exactly one refresh: {:?}", st.paths);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_are_retried() {
    let s = ImdsServer::start();
    s.state.lock().unwrap().fail_first = 3;
    let md = fetch(&client(&s), Duration::from_secs(5), Ask::default())
        .await
        .unwrap();
    assert_eq!(md.region, "eu-west-1");
    let st = s.state.lock().unwrap();
    assert_eq!(st.server_errors, 3);
    assert_eq!(st.puts, 1, "{:?}", st.paths);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_server_hits_the_total_deadline() {
    let s = ImdsServer::start();
    s.state.lock().unwrap().delay = Duration::from_secs(3);
    let t = Instant::now();
    let e = fetch(&client(&s), Duration::from_millis(1500), Ask::default())
        .await
        .unwrap_err();
    let took = t.elapsed();
    assert!(matches!(e, ImdsError::Deadline { .. }), "{e}");
    assert!(
        took < Duration::from_millis(2500),
        "the deadline bounds the whole read: {took:?}"
    );
    assert!(e.to_string().contains("--metadata"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_connection_fails_fast_off_ec2() {
    // A port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let c = ImdsClient::new(&format!("http://127.0.0.1:{port}"), false).unwrap();
    let t = Instant::now();
    let e = fetch(&c, Duration::from_secs(10), Ask::default())
        .await
        .unwrap_err();
    let took = t.elapsed();
    assert!(matches!(e, ImdsError::Unreachable { .. }), "{e}");
    assert!(
        took < Duration::from_millis(3500),
        "off EC2 it gives up in about 2 s: {took:?}"
    );
    assert!(e.to_string().contains("pass --metadata FILE"));
}

#[test]
fn the_server_refuses_a_token_put_without_a_valid_ttl() {
    // The peer is strict like IMDS: a PUT without the TTL header, or with 0 or 21601, is a 400;
    // the client's own PUTs (every other test) always succeed.
    let s = ImdsServer::start();
    for header in ["", "0", "21601"] {
        let script = format!(
            "import urllib.request as u\nr = u.Request('{}/latest/api/token', method='PUT')\nif '{header}': r.add_header('X-aws-ec2-metadata-token-ttl-seconds', '{header}')\ntry:\n  u.urlopen(r); print(200)\nexcept Exception as e: print(e.code)",
            s.url()
        );
        let o = std::process::Command::new("python3")
            .args(["-c", &script])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&o.stdout).trim(),
            "400",
            "ttl {header:?}"
        );
    }
    assert_eq!(s.state.lock().unwrap().puts, 0);
}

#[test]
fn dry_run_reads_imds_from_the_environment_endpoint() {
    let s = ImdsServer::start();
    let root = common::sample_root("al2023-root");
    let out = dry_run_via_imds(&s, root.path());
    assert!(out.status.success());
    let o = common::stdout(&out);
    assert!(
        o.contains("eks-nodeinit plan for i-0123456789abcdef0 (m6i.large, 10.0.12.34, eu-west-1a)"),
        "{o}"
    );
    assert!(
        o.contains("Name = scaler-10x0x12x34 (currently unset)"),
        "{o}"
    );
    assert_eq!(s.state.lock().unwrap().puts, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imdsv1_only_when_the_config_opts_in() {
    let s = ImdsServer::start();
    {
        let mut st = s.state.lock().unwrap();
        st.refuse_token_with = Some(403);
        st.v1_allowed = true;
    }
    // Default: IMDSv2 only, and the refusal says how to opt in.
    let e = fetch(&client(&s), Duration::from_secs(5), Ask::default())
        .await
        .unwrap_err();
    assert!(
        matches!(e, ImdsError::TokenRefused { status: 403, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("imds.allowV1Fallback"));
    assert_eq!(
        s.state.lock().unwrap().gets,
        0,
        "no tokenless read without the opt-in"
    );
    // Opted in: tokenless reads.
    let v1 = ImdsClient::new(&s.url(), true).unwrap();
    let md = fetch(&v1, Duration::from_secs(5), Ask::default())
        .await
        .unwrap();
    assert_eq!(md.instance_id, "i-0123456789abcdef0");
    assert_eq!(s.state.lock().unwrap().gets, 12);
}

#[test]
fn al2023_user_data_without_a_nodeconfig_is_warned_about() {
    let root = common::sample_root("al2023-root");
    for (user_data, warned) in [
        (
            Some("#!/bin/bash\n# token=user-data-secret-7f3a\neks-nodeinit init\n"),
            true,
        ),
        (None, true),
        (
            Some(include_str!(
                "../../examples/cloud-init/al2023-userdata.mime"
            )),
            false,
        ),
    ] {
        let s = ImdsServer::start();
        s.state.lock().unwrap().user_data = user_data.map(|u| u.as_bytes().to_vec());
        let out = dry_run_via_imds(&s, root.path());
        assert!(out.status.success());
        let o = common::stdout(&out);
        assert_eq!(o.contains("user data holds no NodeConfig"), warned, "{o}");
        let all = format!("{o}{}", common::stderr(&out));
        assert!(
            !all.contains("user-data-secret-7f3a"),
            "user data is never printed"
        );
        assert!(!all.contains("LS0tLS1CRUdJTi"), "nor the CA inside it");
    }
}

/// `init --dry-run` of the scaler example with IMDS at this server (via the environment).
fn dry_run_via_imds(s: &ImdsServer, root: &std::path::Path) -> std::process::Output {
    common::run(
        common::cmd()
            .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", s.url())
            .args(["init", "--dry-run", "--config"])
            .arg(common::example("scaler.json"))
            .arg("--root")
            .arg(root),
    )
}

#[test]
fn al2023_gzipped_mime_user_data_taints_are_carried_into_the_dropin() {
    // Issue 11 item 7 through IMDS: EC2 serves gzip'd user data as it is; nodeadm gunzips it, and
    // so does the agent, which then carries the NodeConfig part's taints into the drop-in's one
    // --register-with-taints (kubelet keeps only the last such flag).
    use std::io::Write as _;
    let ca = "RkFLRS1VU0VSLURBVEEtQ0EtZm9yLXRlc3RzLW9ubHkK";
    let mime = format!(
        "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n--BOUNDARY\nContent-Type: text/x-shellscript\n\n#!/bin/bash\n# token=user-data-secret-7f3a\n--BOUNDARY\nContent-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: prod-eu\n    certificateAuthority: {ca}\n  kubelet:\n    config:\n      registerWithTaints:\n        - key: team\n          value: data\n          effect: NoSchedule\n    flags: [--v=2]\n--BOUNDARY--\n"
    );
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(mime.as_bytes()).unwrap();
    let gz = gz.finish().unwrap();
    let root = common::sample_root("al2023-root");
    let cfg = common::config_with(root.path(), "c.json", |v| {
        v["tagging"] = serde_json::json!({"enabled": false});
        v["taints"] = serde_json::json!(["dedicated=infra:NoSchedule"]);
    });
    let s = ImdsServer::start();
    s.state.lock().unwrap().user_data = Some(gz);
    let out = common::run(
        common::cmd()
            .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", s.url())
            .args(["init", "--config"])
            .arg(&cfg)
            .arg("--root")
            .arg(root.path()),
    );
    assert!(out.status.success());
    let nc: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.path().join("etc/eks/nodeadm.d/10-eks-nodeinit.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        nc["spec"]["kubelet"]["flags"][1],
        "--register-with-taints=team=data:NoSchedule,dedicated=infra:NoSchedule"
    );
    let o = common::stdout(&out);
    assert!(!o.contains("user data holds no NodeConfig"), "{o}");
    let report =
        std::fs::read_to_string(root.path().join("var/lib/eks-nodeinit/report.json")).unwrap();
    for text in [o, common::stderr(&out), report] {
        assert!(!text.contains(ca), "the user data's CA is never printed");
        assert!(
            !text.contains("user-data-secret-7f3a"),
            "nor the rest of it"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_target_lifecycle_state_is_read_with_the_rest_and_checked() {
    let s = ImdsServer::start();
    s.state.lock().unwrap().data.insert(
        "autoscaling/target-lifecycle-state".into(),
        "Warmed:Stopped".into(),
    );
    let md = fetch(&client(&s), Duration::from_secs(5), Ask::default())
        .await
        .unwrap();
    assert_eq!(md.target_lifecycle_state.as_deref(), Some("Warmed:Stopped"));
    assert_eq!(s.state.lock().unwrap().puts, 1, "the same token");
    // A value that is no state is kept, escaped and short, as a state no one knows (which
    // holds the hand-off with a warning): never an error that leaves the node unprepared.
    s.state.lock().unwrap().data.insert(
        "autoscaling/target-lifecycle-state".into(),
        "Warmed Stopped\u{1b}[2J".into(),
    );
    let md = fetch(&client(&s), Duration::from_secs(5), Ask::default())
        .await
        .unwrap();
    let kept = md.target_lifecycle_state.unwrap();
    assert!(!kept.contains('\u{1b}'), "escaped: {kept}");
    assert_eq!(
        eks_nodeinit::instance::lifecycle::meaning(&kept),
        eks_nodeinit::instance::lifecycle::Meaning::Unknown
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_is_asked_is_read_in_the_same_pass_and_what_is_known_is_not_read_again() {
    let s = ImdsServer::start();
    {
        let mut st = s.state.lock().unwrap();
        st.user_data = Some(b"#!/bin/bash\n".to_vec());
        for (k, v) in [
            ("mac", "0e:00:00:00:00:01"),
            (
                "network/interfaces/macs/0e:00:00:00:00:01/vpc-ipv4-cidr-blocks",
                "10.0.0.0/16\n10.1.0.0/16",
            ),
        ] {
            st.data.insert(k.into(), v.into());
        }
    }
    let md = fetch(&client(&s), Duration::from_secs(5), Ask::default())
        .await
        .unwrap();
    assert_eq!(md.vpc_cidr_blocks, None, "not asked: not read");
    assert_eq!(md.user_data, UserData::Bytes(b"#!/bin/bash\n".to_vec()));
    let reads = |s: &ImdsServer, end: &str| {
        let st = s.state.lock().unwrap();
        st.paths.iter().filter(|p| p.ends_with(end)).count()
    };
    assert_eq!(reads(&s, "/mac"), 0);
    let ask = Ask {
        user_data: UserData::Absent,
        vpc_cidr_blocks: true,
    };
    let md = fetch(&client(&s), Duration::from_secs(5), ask)
        .await
        .unwrap();
    assert_eq!(
        md.vpc_cidr_blocks,
        Some(vec!["10.0.0.0/16".to_string(), "10.1.0.0/16".to_string()])
    );
    assert_eq!(md.user_data, UserData::Absent, "as known, not read again");
    assert_eq!(reads(&s, "/user-data"), 1, "read by the first fetch only");
    assert_eq!(reads(&s, "/mac"), 1);
}

/// The join's credentials check reads the role's credentials as the boot reads the rest: over
/// IMDSv1 where the config allows it and the instance refuses IMDSv2's token; not otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_join_credentials_follow_imds_allow_v1_fallback() {
    let mut st = State::default();
    st.refuse_token_with = Some(403);
    st.v1_allowed = true;
    let creds = r#"{"Code": "Success", "AccessKeyId": "AKIAEXAMPLE", "SecretAccessKey": "secret", "Token": "tok"}"#;
    st.data
        .insert("iam/security-credentials/".into(), "node-role".into());
    st.data
        .insert("iam/security-credentials/node-role".into(), creds.into());
    let s = ImdsServer::start_with(st);
    let c = eks_nodeinit::verify::token::credentials(&s.url(), true)
        .await
        .unwrap();
    assert_eq!(c.role, "node-role");
    let e = eks_nodeinit::verify::token::credentials(&s.url(), false)
        .await
        .unwrap_err();
    assert!(e.detail.contains("imds.allowV1Fallback"), "{e:?}");
    let st = s.state.lock().unwrap();
    assert_eq!(
        st.gets, 2,
        "role and credentials, once each: {:?}",
        st.paths
    );
}

#[test]
fn an_imds_that_answers_only_over_ipv6_serves_the_whole_boot() {
    // An IPv6-only instance: IMDS on an IPv6 address alone (here ::1; on EC2 fd00:ec2::254),
    // no private IPv4 in its metadata.
    let s = ipv6_only_imds("[::1]:0");
    let url = s.url();
    assert!(url.starts_with("http://[::1]:"), "{url}");
    let root = common::sample_root("al2023-root");
    let cfg = common::config_with(root.path(), "c.json", |v| {
        v["tagging"] = serde_json::json!({"enabled": false});
        v["imds"] = serde_json::json!({"endpoint": url, "deadlineMs": 5000});
    });
    let out = init_at_config_imds(root.path(), &cfg);
    // Success is within imds.deadlineMs: past it the run fails naming the deadline.
    assert!(out.status.success(), "{}", common::stderr(&out));
    let o = common::stdout(&out);
    assert!(
        o.contains("i-0123456789abcdef0 (m6i.large, 2600:1f18:4a:7e00::12"),
        "{o}"
    );
    // The proof after the hand-off reads the role's credentials where the boot found IMDS.
    let job = std::fs::read_to_string(root.path().join("run/eks-nodeinit/join.json")).unwrap();
    let job: serde_json::Value = serde_json::from_str(&job).unwrap();
    assert_eq!(job["imdsEndpoint"], url.as_str(), "{job:#}");
    // nodeadm's IMDS client calls 169.254.169.254 unless its environment names another: both
    // of its units are told where the boot found IMDS.
    for unit in ["nodeadm-config.service", "nodeadm-run.service"] {
        let p = root.path().join(format!(
            "etc/systemd/system/{unit}.d/60-eks-nodeinit-imds.conf"
        ));
        let text = std::fs::read_to_string(&p).unwrap();
        // Its EC2 calls (DescribeInstances) take the dual-stack names, as the boot's did.
        let want = format!("[Service]\nEnvironment=\"AWS_EC2_METADATA_SERVICE_ENDPOINT={url}\"\nEnvironment=\"AWS_USE_DUALSTACK_ENDPOINT=true\"\n");
        assert!(text.ends_with(&want), "{unit}: {text}");
    }
    let st = s.state.lock().unwrap();
    assert!(st.puts >= 1 && st.gets > 0, "{:?}", st.paths);
}

#[test]
fn an_al2_node_without_ipv4_execs_bootstrap_sh_told_where_imds_is() {
    // bootstrap.sh's IMDS helper calls http://$IMDS_ENDPOINT/, by default 169.254.169.254,
    // which an IPv6-only instance does not reach. The sample's stand-in, told to write down the
    // variable it was given, then its argv as before.
    let s = ipv6_only_imds("[::1]:0");
    let url = s.url();
    let root = common::sample_root("al2-root");
    let script = root.path().join("etc/eks/bootstrap.sh");
    let text = std::fs::read_to_string(&script).unwrap().replacen(
        "set -o nounset\n",
        "set -o nounset\nprintf '%s\\n' \"${IMDS_ENDPOINT:-}\" \"${AWS_EC2_METADATA_SERVICE_ENDPOINT:-}\" \"${AWS_USE_DUALSTACK_ENDPOINT:-}\" > \"${0%/*}/imds-endpoint.txt\"\n",
        1,
    );
    std::fs::write(&script, text).unwrap();
    let cfg = common::config_with(root.path(), "c.json", |v| {
        v["tagging"] = serde_json::json!({"enabled": false});
        v["imds"] = serde_json::json!({"endpoint": url});
    });
    let out = init_at_config_imds(root.path(), &cfg);
    assert!(out.status.success(), "{}", common::stderr(&out));
    // Its AWS CLI (private-dns-name's DescribeInstances) as the SDKs read it.
    let told = std::fs::read_to_string(root.path().join("etc/eks/imds-endpoint.txt")).unwrap();
    let host = url.trim_start_matches("http://");
    assert_eq!(told, format!("{host}\n{url}\ntrue\n"));
}

/// `init` finding IMDS where the config `cfg` says, the environment naming no endpoint.
fn init_at_config_imds(root: &std::path::Path, cfg: &std::path::Path) -> std::process::Output {
    common::run(
        common::cmd()
            .env_remove("AWS_EC2_METADATA_SERVICE_ENDPOINT")
            .args(["init", "--config"])
            .arg(cfg)
            .arg("--root")
            .arg(root),
    )
}

/// An IPv6-only instance's metadata, with its role's credentials, on `bind` alone.
fn ipv6_only_imds(bind: &str) -> ImdsServer {
    let mut st = State::default();
    for (k, v) in [
        ("instance-id", "i-0123456789abcdef0"),
        ("ipv6", "2600:1f18:4a:7e00::12"),
        ("instance-type", "m6i.large"),
        ("placement/region", "eu-west-1"),
        ("placement/availability-zone", "eu-west-1a"),
        ("iam/security-credentials/", "eks-node"),
    ] {
        st.data.insert(k.into(), v.into());
    }
    let creds = serde_json::json!({"Code": "Success", "AccessKeyId": "ASIAIMDSV6ROLE", "SecretAccessKey": "v6-secret", "Token": "v6-token", "Expiration": "2099-01-01T00:00:00Z"});
    st.data.insert(
        "iam/security-credentials/eks-node".into(),
        creds.to_string(),
    );
    st.tags = Some(std::collections::BTreeMap::from([(
        "kubernetes.io/cluster/prod-eu".to_string(),
        "owned".to_string(),
    )]));
    ImdsServer::start_on(bind, st)
}

#[test]
fn the_aws_calls_take_the_roles_credentials_where_the_boot_found_imds() {
    // Before: the SDK's credential chain ignored imds.endpoint and asked the environment's
    // endpoint (here a dead port, never 169.254.169.254), so no call could be signed.
    let imds = ipv6_only_imds("[::1]:0");
    let ec2 = common::ec2_server::Ec2Server::start(Default::default());
    let root = common::sample_root("al2023-root");
    let cfg = common::config_with(root.path(), "c.json", |v| {
        v["tagging"] = serde_json::json!({"ec2Endpoint": ec2.url(), "syncBudgetMs": 3000});
        v["imds"] = serde_json::json!({"endpoint": imds.url()});
        v["verify"] = serde_json::json!({"preflight": "off", "hardening": "off"});
    });
    let out = common::run(
        common::cmd()
            .env_remove("AWS_EC2_METADATA_DISABLED")
            .env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY")
            .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:9")
            .args(["init", "--config"])
            .arg(&cfg)
            .arg("--root")
            .arg(root.path()),
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    let st = ec2.state.lock().unwrap();
    assert_eq!(st.count("CreateTags"), 1, "{:?}", st.calls);
    assert!(
        st.access_keys.iter().all(|k| k == "ASIAIMDSV6ROLE") && !st.access_keys.is_empty(),
        "{:?}",
        st.access_keys
    );
    let paths = imds.state.lock().unwrap().paths.clone();
    assert!(
        paths
            .iter()
            .any(|p| p.ends_with("/iam/security-credentials/eks-node")),
        "{paths:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_tries_the_ipv4_endpoint_then_the_ipv6_one_within_the_deadline() {
    // `auto`'s order with the first never reached (a dead port stands for IPv4's link-local
    // address, which a host test never asks): the second answers, the first's error is not
    // the run's.
    let imds = ipv6_only_imds("[::1]:0");
    let endpoints = ["http://127.0.0.1:9".to_string(), imds.url()];
    let c =
        eks_nodeinit::instance::imds::first_answering(&endpoints, false, Duration::from_secs(10))
            .await
            .unwrap();
    // An Ok is within the deadline: past it the error is the deadline's.
    assert_eq!(c.endpoint(), imds.url());
    // Neither answering: the last one's error.
    let dead = [
        "http://127.0.0.1:9".to_string(),
        "http://[::1]:9".to_string(),
    ];
    let e = eks_nodeinit::instance::imds::first_answering(&dead, false, Duration::from_secs(10))
        .await
        .err()
        .unwrap();
    // The last endpoint's own error, not the deadline's: both were given up as unreachable.
    assert!(
        e.to_string().contains("[::1]:9") && e.to_string().contains("unreachable"),
        "{e}"
    );
}

#[test]
fn the_preflights_ec2_check_reaches_the_endpoint_the_agents_calls_take() {
    // Before, the check read AWS_ENDPOINT_URL_EC2 on its own: it went on naming it where the
    // SDK's AWS_IGNORE_CONFIGURED_ENDPOINT_URLS has the calls pass over it.
    let root = common::sample_root("al2023-root");
    let cfg = common::config_with(root.path(), "c.json", |v| {
        v["tagging"] = serde_json::json!({"enabled": false});
    });
    let ec2_check = |env: &[(&str, &str)]| {
        let out = common::run(
            common::cmd()
                .envs(env.iter().copied())
                .args(["init", "--dry-run", "--output", "json", "--metadata"])
                .arg(common::example("metadata.json"))
                .arg("--config")
                .arg(&cfg)
                .arg("--root")
                .arg(root.path()),
        );
        assert!(out.status.success(), "{}", common::stderr(&out));
        let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let steps = plan["steps"].as_array().unwrap().clone();
        let check = steps
            .into_iter()
            .find(|s| s["check"] == "awsEndpoint" && s["service"] == "EC2");
        check.unwrap()["url"].as_str().unwrap().to_string()
    };
    let given = ("AWS_ENDPOINT_URL_EC2", "https://ec2.vpce.example");
    assert_eq!(ec2_check(&[given]), "https://ec2.vpce.example");
    let all = ("AWS_ENDPOINT_URL", "https://all.example");
    assert_eq!(ec2_check(&[all]), "https://all.example");
    let ignore = ("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true");
    assert_eq!(
        ec2_check(&[given, ignore]),
        "https://ec2.eu-west-1.amazonaws.com"
    );
}
