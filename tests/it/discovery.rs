//! Name-only configs: the cluster's endpoint, CA and service CIDR discovered from Parameter Store
//! (moto's server, with a SecureString) or DescribeCluster (the suite's own endpoint, which
//! answers a real PEM CA, throttles and denies as scripted), checked, cached and handed off.
//! Every test also checks that the CA appears nowhere in stdout, stderr, the plan or the report.

use crate::common;

use std::path::Path;
use std::process::Output;

use base64::Engine;
use common::discovery_server::{Cluster, DiscoveryServer, DiscoveryState};
use common::*;
use serde_json::{json, Value};

const CLUSTER: &str = "prod-eu";
const ENDPOINT: &str = "https://0123456789ABCDEF.gr7.eu-west-1.eks.amazonaws.com";
const CIDR: &str = "10.100.0.0/16";
const CACHE: &str = "var/lib/eks-nodeinit/discovery.json";
const DROPIN: &str = "etc/eks/nodeadm.d/10-eks-nodeinit.json";

/// Base64 of a real PEM certificate (a test CA made for this suite).
fn ca() -> String {
    let pem = std::fs::read(manifest_dir().join("tests/fixtures/cluster-ca.pem")).unwrap();
    base64::engine::general_purpose::STANDARD.encode(pem)
}

/// The scaler example naming only the cluster, with `discovery`.
fn name_only(root: &Path, discovery: Value) -> std::path::PathBuf {
    config_with(root, "c.json", |v| {
        v["cluster"] = json!({"name": CLUSTER, "discovery": discovery});
        v["tagging"] = json!({"enabled": false});
    })
}

/// The CA (and its PEM text) appears in no output, plan or report.
fn assert_no_ca(root: &Path, out: &Output) {
    let pem =
        std::fs::read_to_string(manifest_dir().join("tests/fixtures/cluster-ca.pem")).unwrap();
    let body = pem.lines().nth(1).unwrap();
    assert_unprinted(out, root, &[&ca(), body]);
}

fn parameters(prefix: &str, endpoint: &str, ca: &str, cidr: &str) -> Vec<(String, String)> {
    vec![
        (format!("{prefix}/APISERVER_ENDPOINT"), endpoint.into()),
        (format!("{prefix}/B64_CLUSTER_CA"), ca.into()),
        (format!("{prefix}/SERVICE_CIDR"), cidr.into()),
    ]
}

fn scripted(params: Vec<(String, String)>, clusters: Vec<(&str, Cluster)>) -> DiscoveryServer {
    DiscoveryServer::start(DiscoveryState {
        parameters: params.into_iter().collect(),
        clusters: clusters
            .into_iter()
            .map(|(n, c)| (n.to_string(), c))
            .collect(),
        ..Default::default()
    })
}

/// Every node file under `root`: the snapshot without the test's config (`c.json`).
fn node(root: &Path) -> std::collections::BTreeMap<std::path::PathBuf, Vec<u8>> {
    let mut m = snapshot(root);
    m.remove(Path::new("c.json"));
    m
}

/// The suite's EKS endpoint answering DescribeCluster for [`CLUSTER`] with a real PEM CA.
fn describe_cluster_server(ip_family: &'static str, cidr: &str) -> DiscoveryServer {
    scripted(
        vec![],
        vec![(
            CLUSTER,
            Cluster {
                endpoint: ENDPOINT.into(),
                ca: ca(),
                ip_family,
                cidr: cidr.into(),
            },
        )],
    )
}

fn dropin_cluster(root: &Path) -> Value {
    let d: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(DROPIN)).unwrap()).unwrap();
    d["spec"]["cluster"].clone()
}

fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

/// moto with `first` in Parameter Store, then the cluster's values under `/eks/prod-eu`.
fn moto_with_the_cluster(first: &[(String, String, bool)]) -> Option<Moto> {
    let moto = start_moto()?;
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        put_parameters(&moto.url, first).await;
        let prefix = format!("/eks/{CLUSTER}");
        put_cluster_parameters(&moto.url, &prefix, ENDPOINT, &ca(), CIDR).await;
    });
    Some(moto)
}

#[test]
fn ssm_path_pages_are_followed_to_the_values_on_a_later_page() {
    // Twelve other parameters first under the same path: moto pages GetParametersByPath (ten
    // a page without MaxResults, as the service does), so the cluster's are on the second page.
    let others: Vec<_> = (0..12)
        .map(|i| {
            (
                format!("/eks/{CLUSTER}/OTHER_{i:02}"),
                "x".to_string(),
                false,
            )
        })
        .collect();
    let Some(moto) = moto_with_the_cluster(&others) else {
        return;
    };
    let root = sample_root("al2023-root");
    let cfg = name_only(root.path(), json!({"ssmEndpoint": moto.url}));
    let out = init(root.path(), &cfg, &["--dry-run", "--output", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let plan: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(plan["discovery"]["calls"]["getParametersByPath"], 2);
    assert_eq!(
        plan["discovery"]["values"][2]["from"],
        "SSM /eks/prod-eu/SERVICE_CIDR"
    );
    assert_no_ca(root.path(), &out);
}

#[test]
fn ssm_path_in_moto_completes_the_al2023_nodeconfig_and_a_rerun_makes_no_call() {
    let Some(moto) = moto_with_the_cluster(&[]) else {
        return;
    };
    let root = sample_root("al2023-root");
    let cfg = name_only(root.path(), json!({"ssmEndpoint": moto.url}));

    // The dry run shows where each value comes from, the CA redacted.
    let out = init(root.path(), &cfg, &["--dry-run", "--output", "json"]);
    assert!(out.status.success());
    let plan: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        plan["discovery"]["values"],
        json!([
            {"field": "cluster.apiServerEndpoint", "from": "SSM /eks/prod-eu/APISERVER_ENDPOINT"},
            {"field": "cluster.certificateAuthority", "from": "SSM /eks/prod-eu/B64_CLUSTER_CA"},
            {"field": "cluster.cidr", "from": "SSM /eks/prod-eu/SERVICE_CIDR"},
        ])
    );
    assert_eq!(plan["discovery"]["calls"]["getParametersByPath"], 1);
    assert_no_ca(root.path(), &out);

    let out = init(root.path(), &cfg, &[]);
    assert!(out.status.success());
    assert_no_ca(root.path(), &out);
    let cluster = dropin_cluster(root.path());
    assert_eq!(
        cluster,
        json!({"name": CLUSTER, "apiServerEndpoint": ENDPOINT, "certificateAuthority": ca(), "cidr": CIDR}),
        "the drop-in carries all four fields nodeadm requires"
    );
    let cache = root.path().join(CACHE);
    assert_eq!(mode(&cache), 0o600, "the cache holds the CA");
    let rep = report(root.path());
    assert_eq!(
        rep["discovery"]["calls"],
        json!({"getParametersByPath": 1, "getParameters": 0, "describeCluster": 0})
    );
    assert_eq!(rep["discovery"]["fromCache"], false);

    // A rerun (or a reboot) reads the cache: no call at all, even with the endpoint gone.
    let before = node(root.path());
    let cfg = name_only(
        root.path(),
        json!({"ssmEndpoint": format!("http://127.0.0.1:{}", free_port())}),
    );
    let out = init(root.path(), &cfg, &["--dry-run", "--output", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let plan: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(plan["changes"], 0, "a configured node plans nothing");
    assert_eq!(plan["discovery"]["fromCache"], true);
    assert_eq!(plan["discovery"]["calls"]["getParametersByPath"], 0);
    assert!(plan["discovery"]["values"][0]["from"]
        .as_str()
        .unwrap()
        .starts_with("cache /var/lib/eks-nodeinit/discovery.json (from SSM /eks/prod-eu/"));
    let out = init(root.path(), &cfg, &[]);
    assert!(out.status.success());
    assert_no_ca(root.path(), &out);
    let mut after = node(root.path());
    let mut before = before;
    for m in [&mut before, &mut after] {
        m.remove(Path::new("var/lib/eks-nodeinit/report.json"));
    }
    assert!(before == after, "the rerun changed no file");
}

#[test]
fn describe_cluster_from_moto_answers_no_pem_ca_which_is_refused_before_any_change() {
    let Some(moto) = start_moto() else { return };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let eks = aws_sdk_eks::Client::new(&moto_sdk_config(&moto.url, "eu-west-1").await);
        eks.create_cluster()
            .name(CLUSTER)
            .role_arn("arn:aws:iam::123456789012:role/eks")
            .resources_vpc_config(
                aws_sdk_eks::types::VpcConfigRequest::builder()
                    .subnet_ids("subnet-1")
                    .build(),
            )
            .send()
            .await
            .unwrap();
    });
    let root = sample_root("al2023-root");
    let before = node(root.path());
    let cfg = name_only(
        root.path(),
        json!({"sources": [{"describeCluster": {}}], "eksEndpoint": moto.url}),
    );
    let out = init(root.path(), &cfg, &[]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("cluster.discovery")
            && err.contains("certificateAuthority from DescribeCluster prod-eu"),
        "{err}"
    );
    assert!(before == node(root.path()), "nothing changed");
}

#[test]
fn describe_cluster_values_reach_bootstrap_sh_argv_on_al2_ipv4_and_ipv6() {
    for (family, cidr, want) in [
        (
            "ipv4",
            "172.20.0.0/16",
            vec!["--service-ipv4-cidr", "172.20.0.0/16"],
        ),
        (
            "ipv6",
            "fd00:10:96::/112",
            vec![
                "--service-ipv6-cidr",
                "fd00:10:96::/112",
                "--ip-family",
                "ipv6",
            ],
        ),
    ] {
        let server = describe_cluster_server(family, cidr);
        let root = sample_root("al2-root");
        let argv_file = recording_bootstrap(root.path());
        let cfg = name_only(
            root.path(),
            json!({"sources": [{"describeCluster": {}}], "eksEndpoint": server.url()}),
        );
        let out = init(root.path(), &cfg, &[]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert_no_ca(root.path(), &out);
        let argv: Vec<String> = std::fs::read_to_string(&argv_file)
            .unwrap()
            .lines()
            .map(String::from)
            .collect();
        let has = |pair: &[&str]| argv.windows(pair.len()).any(|w| w == pair);
        assert!(has(&["--apiserver-endpoint", ENDPOINT]), "{argv:?}");
        assert!(has(&["--b64-cluster-ca", &ca()]), "{argv:?}");
        assert!(has(&want), "{family}: {argv:?}");
        assert_eq!(server.count("DescribeCluster"), 1);
    }
}

#[test]
fn explicit_values_win_and_are_never_looked_up() {
    // Parameter Store holds another endpoint and CA: the config's stand, only the CIDR is read.
    let other_ca = base64::engine::general_purpose::STANDARD.encode(
        std::fs::read_to_string(manifest_dir().join("tests/fixtures/cluster-ca.pem"))
            .unwrap()
            .replace("\n", "\n\n"),
    );
    let server = scripted(
        parameters("/eks/prod-eu", "https://other.example.com", &other_ca, CIDR),
        vec![],
    );
    let root = sample_root("al2023-root");
    let cfg = config_with(root.path(), "c.json", |v| {
        v["cluster"]["cidr"] = Value::Null;
        v["cluster"].as_object_mut().unwrap().remove("cidr");
        v["cluster"]["discovery"] = json!({"ssmEndpoint": server.url()});
        v["tagging"] = json!({"enabled": false});
    });
    let given: Value = serde_json::from_str(&std::fs::read_to_string(&cfg).unwrap()).unwrap();
    let out = init(root.path(), &cfg, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let c = dropin_cluster(root.path());
    assert_eq!(
        c["apiServerEndpoint"],
        given["cluster"]["apiServerEndpoint"]
    );
    assert_eq!(
        c["certificateAuthority"],
        given["cluster"]["certificateAuthority"]
    );
    assert_eq!(c["cidr"], CIDR);
    let rep = report(root.path());
    assert_eq!(
        rep["discovery"]["values"],
        json!([
            {"field": "cluster.apiServerEndpoint", "from": "the config"},
            {"field": "cluster.certificateAuthority", "from": "the config"},
            {"field": "cluster.cidr", "from": "SSM /eks/prod-eu/SERVICE_CIDR"},
        ])
    );
    let cache = std::fs::read_to_string(root.path().join(CACHE)).unwrap();
    assert!(
        !cache.contains("other.example.com"),
        "only looked-up values are cached"
    );

    // Everything given: discovery makes no call at all.
    let root = sample_root("al2023-root");
    let calls = server.count("GetParametersByPath");
    let cfg = config_with(root.path(), "c.json", |v| {
        v["cluster"]["discovery"] = json!({"ssmEndpoint": server.url()});
        v["tagging"] = json!({"enabled": false});
    });
    let out = init(root.path(), &cfg, &[]);
    assert!(out.status.success());
    assert_eq!(server.count("GetParametersByPath"), calls);
    assert!(!root.path().join(CACHE).exists());
    assert!(report(root.path()).get("discovery").is_none());
}

#[test]
fn throttled_calls_retry_then_succeed() {
    let server = scripted(parameters("/eks/prod-eu", ENDPOINT, &ca(), CIDR), vec![]);
    server.state.lock().unwrap().fail(
        "GetParametersByPath",
        &[(400, "ThrottlingException"), (400, "ThrottlingException")],
    );
    let root = sample_root("al2023-root");
    let cfg = name_only(root.path(), json!({"ssmEndpoint": server.url()}));
    let out = init(root.path(), &cfg, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_no_ca(root.path(), &out);
    assert_eq!(server.count("GetParametersByPath"), 3);
    assert_eq!(
        report(root.path())["discovery"]["calls"]["getParametersByPath"],
        3
    );
    assert_eq!(dropin_cluster(root.path())["cidr"], CIDR);
}

#[test]
fn access_denied_names_the_iam_statement_and_changes_nothing() {
    let server = scripted(parameters("/eks/prod-eu", ENDPOINT, &ca(), CIDR), vec![]);
    server
        .state
        .lock()
        .unwrap()
        .fail("GetParametersByPath", &[(400, "AccessDeniedException")]);
    let root = sample_root("al2023-root");
    let before = node(root.path());
    let cfg = name_only(root.path(), json!({"ssmEndpoint": server.url()}));
    let out = init(root.path(), &cfg, &[]);
    assert_eq!(out.status.code(), Some(3));
    let err = stderr(&out);
    assert!(
        err.contains(r#"{"Effect":"Allow","Action":"ssm:GetParametersByPath","Resource":"arn:aws:ssm:<region>:<account>:parameter/eks/prod-eu"}"#),
        "{err}"
    );
    assert_eq!(
        server.count("GetParametersByPath"),
        1,
        "a denial is not retried"
    );
    assert!(before == node(root.path()), "nothing changed");
    assert_no_ca(root.path(), &out);
}

#[test]
fn a_source_without_the_values_falls_through_to_the_next() {
    let server = describe_cluster_server("ipv4", CIDR);
    let root = sample_root("al2023-root");
    let cfg = name_only(
        root.path(),
        json!({
            "sources": [{"ssmPath": {"path": "/eks/prod-eu"}}, {"describeCluster": {}}],
            "ssmEndpoint": server.url(), "eksEndpoint": server.url(),
        }),
    );
    let out = init(root.path(), &cfg, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("parameters under /eks/prod-eu not found"));
    assert_eq!(server.count("GetParametersByPath"), 1);
    assert_eq!(server.count("DescribeCluster"), 1);
    assert_eq!(dropin_cluster(root.path())["apiServerEndpoint"], ENDPOINT);
}

#[test]
fn malformed_discovered_values_are_named_errors_and_nothing_changes() {
    type Case = (&'static str, Vec<(String, String)>, &'static str);
    let cases: Vec<Case> = vec![
        (
            "endpoint with a comma",
            parameters("/eks/prod-eu", "https://a,b.example.com", &ca(), CIDR),
            "apiServerEndpoint from SSM /eks/prod-eu/APISERVER_ENDPOINT is `https://a,b.example.com`",
        ),
        (
            "plain http",
            parameters("/eks/prod-eu", "http://a.example.com", &ca(), CIDR),
            "apiServerEndpoint from SSM /eks/prod-eu/APISERVER_ENDPOINT is `http://a.example.com`",
        ),
        (
            "CA not PEM",
            parameters("/eks/prod-eu", ENDPOINT, "bm90IGEgY2VydA==", CIDR),
            "certificateAuthority from SSM /eks/prod-eu/B64_CLUSTER_CA decodes to text that is not PEM certificates",
        ),
        (
            "CIDR",
            parameters("/eks/prod-eu", ENDPOINT, &ca(), "10.100.0.0/33"),
            "cidr from SSM /eks/prod-eu/SERVICE_CIDR is `10.100.0.0/33`",
        ),
        (
            "control characters",
            parameters("/eks/prod-eu", "https://a.example.com\n[Service]", &ca(), CIDR),
            r"is `https://a.example.com\n[Service]`",
        ),
    ];
    for (what, params, want) in cases {
        let server = scripted(params, vec![]);
        let root = sample_root("al2023-root");
        let before = node(root.path());
        let cfg = name_only(root.path(), json!({"ssmEndpoint": server.url()}));
        let out = init(root.path(), &cfg, &[]);
        assert_eq!(out.status.code(), Some(3), "{what}");
        assert!(stderr(&out).contains(want), "{what}: {}", stderr(&out));
        assert!(
            !stderr(&out).contains("bm90IGEgY2VydA=="),
            "{what}: the CA is echoed"
        );
        assert!(before == node(root.path()), "{what}: nothing changed");
    }
}

#[test]
fn discovery_config_is_checked_before_anything_runs() {
    let root = tempfile::tempdir().unwrap();
    for (discovery, field) in [
        (json!({"sources": []}), "cluster.discovery.sources"),
        (
            json!({"sources": [{"ssmPath": {"path": "eks/x"}}]}),
            "cluster.discovery.sources[0].ssmPath.path",
        ),
        (
            json!({"sources": [{"ssmParameters": {}}]}),
            "cluster.discovery.sources[0].ssmParameters",
        ),
        (
            json!({"sources": [{"ssmPath": {"path": "/eks/x", "names": {"cidr": "a/b"}}}]}),
            "cluster.discovery.sources[0].ssmPath.names.cidr",
        ),
        (json!({"deadlineSec": 0}), "cluster.discovery.deadlineSec"),
        (json!({"spreadSec": 3601}), "cluster.discovery.spreadSec"),
        (
            json!({"ssmEndpoint": "ftp://x"}),
            "cluster.discovery.ssmEndpoint",
        ),
    ] {
        let cfg = name_only(root.path(), discovery.clone());
        let out = run(cmd().arg("validate").arg("--config").arg(&cfg));
        assert_eq!(out.status.code(), Some(3), "{discovery}");
        assert!(
            stderr(&out).contains(field),
            "{discovery}: {}",
            stderr(&out)
        );
    }
    let cfg = name_only(
        root.path(),
        json!({"sources": [{"describeCluster": {}}], "unknown": 1}),
    );
    let out = run(cmd().arg("validate").arg("--config").arg(&cfg));
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("unknown"), "{}", stderr(&out));
}

#[test]
fn a_cache_for_other_sources_or_tampered_is_ignored_and_rewritten() {
    let server = scripted(parameters("/eks/prod-eu", ENDPOINT, &ca(), CIDR), vec![]);
    let root = sample_root("al2023-root");
    let cfg = name_only(root.path(), json!({"ssmEndpoint": server.url()}));
    assert!(init(root.path(), &cfg, &[]).status.success());
    let cache = root.path().join(CACHE);
    let good = std::fs::read_to_string(&cache).unwrap();
    assert_eq!(server.count("GetParametersByPath"), 1);

    // The same cache under other sources (another path) is not used: one more lookup, there.
    let other = scripted(
        parameters("/eks/other", ENDPOINT, &ca(), "10.200.0.0/16"),
        vec![],
    );
    let cfg2 = name_only(
        root.path(),
        json!({"sources": [{"ssmPath": {"path": "/eks/other"}}], "ssmEndpoint": other.url()}),
    );
    let out = init(root.path(), &cfg2, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(other.count("GetParametersByPath"), 1);
    assert_eq!(dropin_cluster(root.path())["cidr"], "10.200.0.0/16");

    // A tampered cache (its endpoint now fails the check) is ignored, looked up again and
    // rewritten; the bad value never reaches the drop-in.
    std::fs::write(&cache, good.replace(ENDPOINT, "https://a,b.example.com")).unwrap();
    // (`name_only` writes one config file: the first config again.)
    let cfg = name_only(root.path(), json!({"ssmEndpoint": server.url()}));
    let out = init(root.path(), &cfg, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(server.count("GetParametersByPath"), 2);
    assert_eq!(std::fs::read_to_string(&cache).unwrap(), good);
    assert_eq!(dropin_cluster(root.path())["apiServerEndpoint"], ENDPOINT);
    assert_no_ca(root.path(), &out);
}
