//! The HTTP proxy (`proxy`) against real peers started here: a real forward proxy (Debian's
//! tinyproxy, with Basic auth) on 127.0.0.1, moto on 127.0.0.2 (a host the NO_PROXY does not
//! name) serving Parameter Store and EC2, the suite's strict IMDSv2 server on 127.0.0.1 (which
//! the NO_PROXY names), and a real dbus-daemon carrying a stand-in for systemd's manager. One
//! `init` on an AL2023 root: the agent's discovery and tagging calls reach moto through the
//! proxy, one proxied request per call the report counts; IMDS is read directly; each unit's
//! drop-in (0644) holds the NO_PROXY with the VPC's blocks from IMDS and names the credentials'
//! environment file (0600); systemd is told to reload once; the credentials show nowhere; a rerun
//! plans nothing.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::dbus::{serve_manager, start_bus};
use common::imds_server::{ImdsServer, State};
use common::*;
use serde_json::{json, Value};

const CLUSTER: &str = "prod-eu";
const REGION: &str = "eu-west-1";
const USER: &str = "svc";
/// In the config percent-encoded (`%2D`): the proxy sees it only if the agent decodes it.
const PASSWORD: &str = "s3cr3t-pw";
const MAC: &str = "0e:aa:bb:cc:dd:ee";
const VPC: &str = "10.0.0.0/16\n10.1.0.0/16";
const VPC6: &str = "2600:1f14:abc:de00::/56";

/// tinyproxy with Basic auth: (the process, its port, the log), or None to skip.
fn tinyproxy(dir: &Path) -> Option<(Proc, u16, PathBuf)> {
    if !peer_present(&missing_commands(&["tinyproxy"])) {
        return None;
    }
    let auth = format!("BasicAuth {USER} {PASSWORD}\n");
    Some(common::tinyproxy::start(dir, &auth, None))
}

/// The `Manager.Reload` calls the bus's systemd stand-in took.
fn reloads(calls: &std::sync::Mutex<Vec<common::dbus::UnitCall>>) -> usize {
    calls
        .lock()
        .unwrap()
        .iter()
        .filter(|c| c.0 == "Reload")
        .count()
}

const ROLE: &str = "node-role";

/// The strict IMDS for moto's instance: its VPC's CIDR blocks on its primary interface, and the
/// instance role's credentials (the SDK's credential chain reads them, as on a node).
fn imds(id: &str, ip: &str) -> ImdsServer {
    let mut s = State::default();
    for (k, v) in [
        ("instance-id", id),
        ("local-ipv4", ip),
        ("instance-type", "m6i.large"),
        ("placement/region", REGION),
        ("placement/availability-zone", "eu-west-1a"),
        ("mac", MAC),
    ] {
        s.data.insert(k.into(), v.into());
    }
    s.data.insert(
        format!("network/interfaces/macs/{MAC}/vpc-ipv4-cidr-blocks"),
        VPC.into(),
    );
    s.data.insert(
        format!("network/interfaces/macs/{MAC}/vpc-ipv6-cidr-blocks"),
        VPC6.into(),
    );
    s.data.insert(
        format!("iam/security-credentials/{ROLE}"),
        json!({"Code": "Success", "LastUpdated": "2026-11-25T00:00:00Z", "Type": "AWS-HMAC",
               "AccessKeyId": "ASIAPROXYTEST", "SecretAccessKey": "role-secret",
               "Token": "role-token", "Expiration": "2099-01-01T00:00:00Z"})
        .to_string(),
    );
    ImdsServer::start_with(s)
}

/// `init` with the instance role's credentials from the SDK's chain (IMDS), not the
/// environment's keys.
fn run_init(root: &Path, cfg: &Path, imds: &ImdsServer, bus: &str, extra: &[&str]) -> Output {
    run(cmd()
        .env_remove("AWS_EC2_METADATA_DISABLED")
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.url())
        .arg("init")
        .args(extra)
        .args(["--config"])
        .arg(cfg)
        .arg("--root")
        .arg(root)
        .args(["--system-bus-address", bus]))
}

fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn the_agents_aws_calls_go_through_the_proxy_imds_does_not_and_each_unit_gets_it() {
    let Some(moto) = start_moto_at("127.0.0.2", &["-m", "moto.server"], &[]) else {
        return;
    };
    let Some(bus) = start_bus() else { return };
    let dir = tempfile::tempdir().unwrap();
    let Some((_proxy, port, log)) = tinyproxy(dir.path()) else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let ec2 = rt.block_on(ec2_client(&moto.url, REGION));
    let (id, ip) = rt.block_on(run_instance(&ec2));
    rt.block_on(put_cluster(&moto.url));
    let imds = imds(&id, &ip);
    let calls = serve_manager(&bus.address, &[], &[]);

    let root = sample_root("al2023-root");
    let url = format!("http://{USER}:s3cr3t%2Dpw@127.0.0.1:{port}");
    let cfg = config_with(root.path(), "c.json", |v| {
        v["cluster"] =
            json!({"name": CLUSTER, "discovery": {"ssmEndpoint": moto.url, "cache": false}});
        v["imds"] = json!({"endpoint": imds.url()});
        v["tagging"] = json!({"ec2Endpoint": moto.url, "syncBudgetMs": 10000});
        v["proxy"] = json!({"http": url, "https": url, "noProxy": [".corp.example"]});
    });
    let node = Node {
        root: root.path(),
        cfg: &cfg,
        imds: &imds,
        bus: &bus.address,
    };
    dry_runs_show_no_credentials(&node);
    let before = common::tinyproxy::proxied(&log).len();
    let out = node.init(&[]);
    assert!(out.status.success(), "{}", stderr(&out));

    // Every AWS call went through the proxy to moto, one request per call the report counts;
    // the credential chain's IMDS calls did not.
    let moto_host = moto.url.trim_start_matches("http://");
    aws_calls_went_through_the_proxy(root.path(), &log, before, moto_host);
    imds_read_directly(&imds, &log);
    let tags = rt.block_on(instance_tags(&ec2, &id)).unwrap();
    assert_eq!(
        tags.get("Name"),
        Some(&format!("scaler-{}", ip.replace('.', "x")))
    );

    units_get_the_proxy(root.path(), &url);
    assert_eq!(reloads(&calls), 1, "{:?}", calls.lock().unwrap());
    assert_unprinted(&out, root.path(), &SECRETS);

    // A rerun plans nothing.
    let out = node.init(&["--dry-run", "--output", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let plan: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(plan["changes"], 0, "{plan}");
    assert_unprinted(&out, root.path(), &SECRETS);
}

/// The password as the proxy sees it and as the config spells it.
const SECRETS: [&str; 2] = [PASSWORD, "s3cr3t%2Dpw"];

/// A node of the proxied case: its root, config, IMDS and bus.
struct Node<'a> {
    root: &'a Path,
    cfg: &'a Path,
    imds: &'a ImdsServer,
    bus: &'a str,
}

impl Node<'_> {
    fn init(&self, extra: &[&str]) -> Output {
        run_init(self.root, self.cfg, self.imds, self.bus, extra)
    }
}

/// The cluster's endpoint, CA (the fixture) and service CIDR in moto's Parameter Store.
async fn put_cluster(moto: &str) {
    let pem = std::fs::read(manifest_dir().join("tests/fixtures/cluster-ca.pem")).unwrap();
    let ca = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, pem);
    put_cluster_parameters(
        moto,
        &format!("/eks/{CLUSTER}"),
        "https://k.example",
        &ca,
        "172.20.0.0/16",
    )
    .await;
}

/// The plan shows every file and the NO_PROXY, never the credentials, as text and as JSON.
fn dry_runs_show_no_credentials(node: &Node) {
    for output in ["text", "json"] {
        let out = node.init(&["--dry-run", "--output", output]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            stdout(&out).contains("/etc/eks-nodeinit/proxy.env"),
            "{}",
            stdout(&out)
        );
        assert!(stdout(&out).contains("<redacted"), "{}", stdout(&out));
        assert_unprinted(&out, node.root, &SECRETS);
    }
}

/// The report's discovery and tagging calls, each one proxied request to moto (after the
/// `before` requests the proxy's log held), and the preflight's CONNECTs.
fn aws_calls_went_through_the_proxy(root: &Path, log: &Path, before: usize, moto_host: &str) {
    let rep = report(root);
    let sum = |v: &Value| -> u64 {
        v.as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum()
    };
    let (discovery, tagging) = (
        sum(&rep["discovery"]["calls"]),
        sum(&rep["tagging"]["calls"]),
    );
    assert_eq!(rep["tagging"]["result"]["outcome"], "created");
    // GetParametersByPath; CreateTags (the tags were read before planning: one DescribeTags,
    // IMDS tags being off).
    assert_eq!((discovery, tagging), (1, 1), "{rep}");
    let all: Vec<String> = common::tinyproxy::proxied(log)
        .into_iter()
        .skip(before)
        .collect();
    // The preflight reaches the API server and the AWS endpoints as kubelet and containerd
    // would: through the proxy (NO_PROXY names none of them), with CONNECT.
    let (mut connects, requests): (Vec<String>, Vec<String>) =
        all.into_iter().partition(|r| r.starts_with("CONNECT "));
    connects.sort();
    // EC2 more than once: the identity check asks it for the Node's name (DescribeInstances),
    // again within the budget while the proxy's upstream does not answer.
    connects.dedup();
    assert_eq!(
        connects,
        [
            "CONNECT 602401143452.dkr.ecr.eu-west-1.amazonaws.com:443 HTTP/1.1",
            "CONNECT api.ecr.eu-west-1.amazonaws.com:443 HTTP/1.1",
            "CONNECT ec2.eu-west-1.amazonaws.com:443 HTTP/1.1",
            "CONNECT k.example:443 HTTP/1.1",
            "CONNECT sts.eu-west-1.amazonaws.com:443 HTTP/1.1",
        ],
        "{connects:?}"
    );
    assert_eq!(
        requests.len() as u64,
        discovery + 1 + tagging,
        "{requests:?}"
    );
    assert!(
        requests
            .iter()
            .all(|r| r.starts_with(&format!("POST http://{moto_host}/"))),
        "{requests:?}"
    );
}

/// Read directly: the VPC's blocks, and the role (the SDK's credential chain); IMDS never
/// through the proxy.
fn imds_read_directly(imds: &ImdsServer, log: &Path) {
    let imds_paths = imds.state.lock().unwrap().paths.clone();
    for read in [
        "vpc-ipv4-cidr-blocks".to_string(),
        "vpc-ipv6-cidr-blocks".to_string(),
        format!("iam/security-credentials/{ROLE}"),
    ] {
        assert!(
            imds_paths.iter().any(|p| p.ends_with(&read)),
            "{read}: {imds_paths:?}"
        );
    }
    let all = std::fs::read_to_string(log).unwrap();
    assert!(
        !all.contains(&imds.addr.to_string()),
        "IMDS never through the proxy: {all}"
    );
}

/// The credentials in one 0600 file; each unit's drop-in names it and holds the NO_PROXY with
/// the VPC's blocks and the discovered service CIDR.
fn units_get_the_proxy(root: &Path, url: &str) {
    let env = root.join("etc/eks-nodeinit/proxy.env");
    assert_eq!(mode(&env), 0o600);
    let env_text = std::fs::read_to_string(&env).unwrap();
    assert!(
        env_text.contains(&format!("HTTPS_PROXY='{url}'\n"))
            && env_text.contains(&format!("http_proxy='{url}'\n")),
        "{env_text}"
    );
    let no_proxy = "localhost,127.0.0.1,::1,169.254.169.254,fd00:ec2::254,10.0.0.0/16,10.1.0.0/16,2600:1f14:abc:de00::/56,172.20.0.0/16,.internal,.eu-west-1.compute.internal,.corp.example";
    for unit in ["containerd", "kubelet", "nodeadm-config", "nodeadm-run"] {
        let p = root.join(format!(
            "etc/systemd/system/{unit}.service.d/60-eks-nodeinit-proxy.conf"
        ));
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(
            text.contains("EnvironmentFile=/etc/eks-nodeinit/proxy.env\n"),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "Environment=\"NO_PROXY={no_proxy}\" \"no_proxy={no_proxy}\"\n"
            )),
            "{text}"
        );
        assert!(
            !text.contains("s3cr3t"),
            "no credentials where systemd shows them: {text}"
        );
    }
}

/// An AL2 or AL2023 root with a proxy (no credentials) and no tagging, its metadata with the VPC.
fn plain_node(root_name: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let root = sample_root(root_name);
    let cfg = config_with(root.path(), "c.json", |v| {
        v["tagging"] = json!({"enabled": false});
        v["proxy"] = json!({"https": "http://proxy.corp:3128"});
    });
    let md = root.path().join("md.json");
    let mut m: Value =
        serde_json::from_str(&std::fs::read_to_string(example("metadata.json")).unwrap()).unwrap();
    m["vpcCidrBlocks"] = json!(["10.0.0.0/16"]);
    std::fs::write(&md, m.to_string()).unwrap();
    (root, cfg, md)
}

#[test]
fn on_al2_a_reload_systemd_refuses_is_a_warning_and_the_drop_ins_stay() {
    let Some(bus) = start_bus() else { return };
    let calls = serve_manager(&bus.address, &["Reload"], &[]);
    let (root, cfg, md) = plain_node("al2-root");
    recording_bootstrap(root.path());
    let out = init_with(
        root.path(),
        &cfg,
        &md,
        &["--system-bus-address", &bus.address],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(reloads(&calls), 1);
    let rep = report(root.path());
    let step = rep["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == "reload systemd's units")
        .unwrap()
        .clone();
    assert!(
        step["outcome"]
            .as_str()
            .unwrap()
            .starts_with("skipped: systemd did not reload its units"),
        "{step}"
    );
    assert!(
        rep["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("did not reload")),
        "{rep}"
    );
    for unit in ["containerd", "kubelet", "sandbox-image"] {
        let p = root.path().join(format!(
            "etc/systemd/system/{unit}.service.d/60-eks-nodeinit-proxy.conf"
        ));
        assert!(std::fs::read_to_string(&p)
            .unwrap()
            .contains("HTTPS_PROXY=http://proxy.corp:3128"));
        assert_eq!(
            mode(&p),
            0o644,
            "no credentials: a drop-in as systemd's own"
        );
    }
    assert!(
        !root.path().join("etc/eks-nodeinit/proxy.env").exists(),
        "no credentials, no env file"
    );
    assert!(
        !root
            .path()
            .join("etc/systemd/system/nodeadm-run.service.d")
            .exists(),
        "AL2: no nodeadm units"
    );
}

#[test]
fn on_al2023_a_reload_systemd_refuses_fails_the_run_and_says_what_to_do() {
    let Some(bus) = start_bus() else { return };
    serve_manager(&bus.address, &["Reload"], &[]);
    let (root, cfg, md) = plain_node("al2023-root");
    let out = init_with(
        root.path(),
        &cfg,
        &md,
        &["--system-bus-address", &bus.address],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("systemd did not reload its units") && err.contains("systemctl daemon-reload"),
        "{err}"
    );
}
