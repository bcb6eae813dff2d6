//! The validation table: every rule, with good and bad cases, checked through the public API.

use crate::common;

use eks_nodeinit::base::k8s::{check_kubelet_self_label, check_qualified_name, parse_taint};
use eks_nodeinit::config::parse;
use eks_nodeinit::plan::aspects::sysctls::check_key as check_sysctl_key;
use eks_nodeinit::spec::{self, Spec};

/// Every finding for a config, the way the agent checks it: once, into a spec.
fn check_config(c: &eks_nodeinit::config::Config) -> Vec<eks_nodeinit::base::findings::Finding> {
    spec::resolve(c).1 .0
}

fn spec_of(v: &serde_json::Value) -> Spec {
    spec::from_config(&parse(&v.to_string(), "t").unwrap()).unwrap()
}

pub(super) fn base() -> serde_json::Value {
    serde_json::json!({"cluster": {"name": "prod"}, "nodeGroup": {"name": "g", "role": "scaler"}})
}

/// Findings for the base config with `edit` applied, as "field: message" lines.
pub(super) fn findings(edit: impl FnOnce(&mut serde_json::Value)) -> Vec<String> {
    let mut v = base();
    edit(&mut v);
    let c = parse(&v.to_string(), "t.json").expect("parses");
    check_config(&c).iter().map(|f| f.to_string()).collect()
}

pub(super) fn assert_one(f: &[String], field: &str, needle: &str) {
    assert!(
        f.iter().any(|x| x.starts_with(field) && x.contains(needle)),
        "expected a finding on {field} containing `{needle}`, got {f:#?}"
    );
}

#[test]
fn base_config_is_valid() {
    assert_eq!(findings(|_| {}), Vec::<String>::new());
}

#[test]
fn kubelet_self_labels() {
    let allowed = [
        "node.kubernetes.io/role",
        "node.kubernetes.io/lifecycle",
        "kubelet.kubernetes.io/x",
        "foo.node.kubernetes.io/x",
        "topology.kubernetes.io/zone",
        "kubernetes.io/arch",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "example.com/team",
        "team",
    ];
    for k in allowed {
        assert!(
            check_kubelet_self_label(k, "v").is_ok(),
            "{k} should be allowed"
        );
    }
    let refused = [
        ("kubernetes.io/role", "node.kubernetes.io/role=master"),
        (
            "node-role.kubernetes.io/master",
            "node.kubernetes.io/role=master",
        ),
        (
            "node-role.kubernetes.io/worker",
            "node.kubernetes.io/role=worker",
        ),
        ("k8s.io/foo", "node.kubernetes.io/foo"),
        ("something.k8s.io/foo", "node.kubernetes.io/foo"),
        ("example.kubernetes.io/x", "node.kubernetes.io/x"),
        ("node-restriction.kubernetes.io/pool", "NodeRestriction"),
    ];
    for (k, hint) in refused {
        let e = check_kubelet_self_label(k, "master").unwrap_err();
        assert!(e.contains(hint), "{k}: {e}");
    }
    // through the config, the common mistake
    let f = findings(|v| v["labels"] = serde_json::json!({"kubernetes.io/role": "master"}));
    assert_one(
        &f,
        "labels[\"kubernetes.io/role\"]",
        "kubelet refuses to start",
    );
}

#[test]
fn label_syntax() {
    for good in ["a", "a-b_c.d", "example.com/x", &"a".repeat(63)] {
        assert!(check_qualified_name(good).is_ok(), "{good}");
    }
    for bad in [
        "",
        "-a",
        "a-",
        "a b",
        "Example.com/x",
        "a/b/c",
        &"a".repeat(64),
        "/x",
        "x/",
        "a\nb",
    ] {
        assert!(
            check_qualified_name(bad).is_err(),
            "{bad:?} should be refused"
        );
    }
    let f = findings(|v| v["labels"] = serde_json::json!({"example.com/x": "bad value"}));
    assert_one(&f, "labels[\"example.com/x\"]", "must start and end");
    let f = findings(|v| v["labels"] = serde_json::json!({"example.com/x": "a".repeat(64)}));
    assert_one(&f, "labels[\"example.com/x\"]", "at most 63");
    // null removes a preset label
    let mut v = base();
    v["labels"] = serde_json::json!({"node.kubernetes.io/role": null});
    assert!(spec_of(&v).registration.labels.is_empty());
}

#[test]
fn taints() {
    let t = parse_taint("dedicated=infra:NoSchedule").unwrap();
    assert_eq!(
        (t.key.as_str(), t.value.as_str(), t.effect.as_str()),
        ("dedicated", "infra", "NoSchedule")
    );
    assert_eq!(
        parse_taint("CriticalAddonsOnly:NoExecute").unwrap().value,
        ""
    );
    assert!(parse_taint("k=v:PreferNoSchedule").is_ok());
    for bad in [
        "k=v",
        "k=v:noschedule",
        "k=v:",
        ":NoSchedule",
        "k=bad value:NoSchedule",
        "k,x=v:NoSchedule",
    ] {
        assert!(parse_taint(bad).is_err(), "{bad} should be refused");
    }
    let f = findings(|v| v["taints"] = serde_json::json!(["a=b:NoSchedule", "a=c:NoSchedule"]));
    assert_one(&f, "taints[1]", "duplicate taint `a:NoSchedule`");
    // the master preset's taint is valid and an empty list removes it
    let f = findings(|v| v["nodeGroup"]["role"] = "master".into());
    assert!(f.is_empty(), "{f:?}");
    let mut v = base();
    v["nodeGroup"]["role"] = "master".into();
    v["taints"] = serde_json::json!([]);
    assert!(spec_of(&v).registration.taints.is_empty());
}

#[test]
fn sysctl_keys_and_values() {
    for good in [
        "fs.inotify.max_user_watches",
        "net.ipv4.ip_local_port_range",
        "kernel.pid_max",
        "net.ipv4.conf.eth0.rp_filter",
    ] {
        assert!(check_sysctl_key(good).is_ok(), "{good}");
    }
    for bad in [
        "../../etc/passwd",
        "fs/inotify",
        "fs..x",
        ".fs",
        "fs.",
        "",
        "fs.x y",
        "fs.x=1",
    ] {
        assert!(check_sysctl_key(bad).is_err(), "{bad:?} should be refused");
    }
    let f = findings(|v| v["sysctls"] = serde_json::json!({"../../etc/passwd": "x"}));
    assert_one(&f, "sysctls[\"../../etc/passwd\"]", "holds `/`");
    let f = findings(|v| v["sysctls"] = serde_json::json!({"fs.x": "1\nkernel.panic = 0"}));
    assert_one(&f, "sysctls[\"fs.x\"]", "control character");
}

#[test]
fn kubelet_settings() {
    let f = findings(|v| {
        v["kubelet"] =
            serde_json::json!({"imageGCHighThresholdPercent": 60, "imageGCLowThresholdPercent": 60})
    });
    assert_one(
        &f,
        "kubelet.imageGCLowThresholdPercent",
        "must be below high",
    );
    let f = findings(|v| v["kubelet"] = serde_json::json!({"imageGCHighThresholdPercent": 101}));
    assert_one(&f, "kubelet.imageGCHighThresholdPercent", "outside 0..100");
    let f = findings(|v| v["kubelet"] = serde_json::json!({"imageGCLowThresholdPercent": 85}));
    assert_one(
        &f,
        "kubelet.imageGCLowThresholdPercent",
        "kubelet's default high",
    );
    let f = findings(|v| v["kubelet"] = serde_json::json!({"shutdownGracePeriod": "90"}));
    assert_one(
        &f,
        "kubelet.shutdownGracePeriod",
        "not a Kubernetes duration",
    );
    let f = findings(|v| {
        v["kubelet"] = serde_json::json!({"shutdownGracePeriod": "30s", "shutdownGracePeriodCriticalPods": "1m"})
    });
    assert_one(
        &f,
        "kubelet.shutdownGracePeriodCriticalPods",
        "longer than shutdownGracePeriod",
    );
    let f =
        findings(|v| v["kubelet"] = serde_json::json!({"shutdownGracePeriodCriticalPods": "10s"}));
    assert_one(
        &f,
        "kubelet.shutdownGracePeriodCriticalPods",
        "without kubelet.shutdownGracePeriod",
    );
    let f = findings(|v| {
        v["kubelet"] = serde_json::json!({"shutdownGracePeriod": "90s"});
        v["logind"] = serde_json::json!({"inhibitDelayMaxSec": 30});
    });
    assert_one(
        &f,
        "logind.inhibitDelayMaxSec",
        "below kubelet.shutdownGracePeriod",
    );
    let ok = findings(
        |v| v["kubelet"] = serde_json::json!({"imageGCHighThresholdPercent": 85, "imageGCLowThresholdPercent": 80, "shutdownGracePeriod": "1m30s", "shutdownGracePeriodCriticalPods": "90s"}),
    );
    assert!(ok.is_empty(), "{ok:?}");
}

#[test]
fn kubelet_config_keys_are_the_kubelets_own_and_not_the_agents() {
    let f = findings(|v| v["kubelet"] = serde_json::json!({"config": {"maxPods": 50}}));
    assert_one(
        &f,
        "kubelet.config.maxPods",
        "the agent sets it from kubelet.maxPods",
    );
    let f = findings(|v| v["kubelet"] = serde_json::json!({"config": {"podPIDsLimit": 50}}));
    assert_one(&f, "kubelet.config.podPIDsLimit", "`podPidsLimit`?");
    let f = findings(|v| v["kubelet"] = serde_json::json!({"config": {"podPidsLimit": 1.5}}));
    assert_one(&f, "kubelet.config.podPidsLimit", "reads an integer there");
    let ok = findings(
        |v| v["kubelet"] = serde_json::json!({"config": {"podPidsLimit": 4096, "evictionHard": {"memory.available": "5%"}}}),
    );
    assert!(ok.is_empty(), "{ok:?}");
}

#[test]
fn values_that_would_break_a_dropin_or_bootstrap() {
    let f =
        findings(|v| v["kubelet"] = serde_json::json!({"extraArgs": ["--max-pods=110 --foo=bar"]}));
    assert_one(
        &f,
        "kubelet.extraArgs[0]",
        "would break the kubelet's systemd drop-in",
    );
    let f = findings(|v| v["kubelet"] = serde_json::json!({"extraArgs": ["--max-pods='110'"]}));
    assert_one(&f, "kubelet.extraArgs[0]", "would break");
    let f = findings(|v| v["kubelet"] = serde_json::json!({"extraArgs": ["--node-labels=a=b"]}));
    assert_one(&f, "kubelet.extraArgs[0]", "`labels` and `taints` fields");
    let f = findings(|v| {
        v["handoff"] = serde_json::json!({"extraBootstrapArgs": ["--use-max-pods=false"]})
    });
    assert_one(
        &f,
        "handoff.extraBootstrapArgs[0]",
        "\"--use-max-pods\", \"false\" as two elements",
    );
    let f = findings(|v| {
        v["handoff"] = serde_json::json!({"extraBootstrapArgs": ["--kubelet-extra-args", "x"]})
    });
    assert_one(&f, "handoff.extraBootstrapArgs[0]", "set by eks-nodeinit");
    let f = findings(|v| {
        v["handoff"] = serde_json::json!({"extraBootstrapArgs": ["--use-max-pods", "false\n"]})
    });
    assert_one(&f, "handoff.extraBootstrapArgs[1]", "control character");
    let f = findings(|v| v["cluster"]["apiServerEndpoint"] = "https://x'y".into());
    assert_one(&f, "cluster.apiServerEndpoint", "https:// URL");
    let ok = findings(|v| {
        v["handoff"] = serde_json::json!({"extraBootstrapArgs": ["--use-max-pods", "false"]})
    });
    assert!(ok.is_empty(), "{ok:?}");
}

#[test]
fn cluster_fields() {
    let f = findings(|v| v["cluster"]["name"] = "bad name".into());
    assert_one(&f, "cluster.name", "not an EKS cluster name");
    let f = findings(|v| v["cluster"]["certificateAuthority"] = "not base64!".into());
    assert_one(&f, "cluster.certificateAuthority", "not valid base64");
    assert!(
        !f.iter().any(|x| x.contains("not base64!")),
        "the CA value must not be echoed"
    );
    let f = findings(|v| v["cluster"]["cidr"] = "10.100.0.0/33".into());
    assert_one(&f, "cluster.cidr", "not an IP network");
    let f = findings(|v| v["cluster"]["containerRuntime"] = "dockerd".into());
    assert_one(&f, "cluster.containerRuntime", "containerd only");
}

#[test]
fn unknown_fields_and_syntax_errors() {
    let e = parse(
        r#"{"cluster":{"name":"c","endpoint":"x"},"nodeGroup":{}}"#,
        "c.json",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("field `cluster.endpoint`: unknown field `endpoint`"),
        "{e}"
    );
    let e = parse(
        "{\"cluster\": {\"name\": \"c\"},\n\"nodeGroup\": {}\n,}",
        "c.json",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("line 3, column"), "{e}");
    let e = parse(
        r#"{"cluster":{"name":"c"},"nodeGroup":{"role":"boss"}}"#,
        "c.json",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("nodeGroup.role") && e.contains("unknown variant `boss`"),
        "{e}"
    );
}

#[test]
fn label_prefixes_as_kubernetes_checks_them() {
    // IsDNS1123Subdomain limits the whole prefix (253) and its characters, not each part.
    let long_part = format!("{}.com/x", "a".repeat(64));
    assert!(check_qualified_name(&long_part).is_ok(), "{long_part}");
    let single = format!("{}/x", "b".repeat(100));
    assert!(check_qualified_name(&single).is_ok(), "{single}");
    let f = findings(|v| v["labels"] = serde_json::json!({ long_part.clone(): "v" }));
    assert!(f.is_empty(), "{f:?}");
    // Over 253 in all, or a part ending in `-`, is refused.
    assert!(check_qualified_name(&format!("{}/x", "c".repeat(254))).is_err());
    assert!(check_qualified_name("a-.com/x").is_err());
    assert!(parse_taint(&format!("{long_part}=v:NoSchedule")).is_ok());
}

#[test]
fn api_server_endpoints_the_hand_offs_can_carry() {
    for good in [
        "https://0123456789ABCDEF.gr7.eu-west-1.eks.amazonaws.com",
        "https://10.0.0.1:6443",
        "https://[fd00::1]:443/",
        "https://api.example.com/k8s/",
    ] {
        let f = findings(|v| v["cluster"]["apiServerEndpoint"] = good.into());
        assert!(f.is_empty(), "{good}: {f:?}");
    }
    // A `,` ended bootstrap.sh's sed expression ("unknown option to `s'").
    for bad in [
        "https://a,b.example.com",
        "https://x.example.com/a|b",
        "http://x.example.com",
        "https://",
        "https://x.example.com:0",
        "https://x.example.com:99999",
        "https://[fd00::1",
        "https://x.example.com/$(id)",
    ] {
        let f = findings(|v| v["cluster"]["apiServerEndpoint"] = bad.into());
        assert_one(&f, "cluster.apiServerEndpoint", "must be an https:// URL");
    }
}

#[test]
fn numbers_that_overflowed_are_refused_by_range() {
    // Each panicked (exit 101) before: a microsecond product in the plan, an Instant sum in
    // the run.
    let f =
        findings(|v| v["logind"] = serde_json::json!({"inhibitDelayMaxSec": 18446744073710u64}));
    assert_one(&f, "logind.inhibitDelayMaxSec", "is above 86400");
    let f = findings(|v| {
        v["tagging"] =
            serde_json::json!({"required": true, "backgroundDeadlineSec": 9223372036854775807u64})
    });
    assert_one(&f, "tagging.backgroundDeadlineSec", "between 1 and 86400");
    let f = findings(|v| {
        v["kubelet"] = serde_json::json!({"shutdownGracePeriod": "9223372036854775808ns"})
    });
    assert_one(&f, "kubelet.shutdownGracePeriod", "too large");
}

#[test]
fn a_launch_hook_name_auto_scaling_would_refuse_is_a_named_error() {
    for bad in ["", "eks node ready", "hook.v2", "x\u{7}"] {
        let f = findings(|v| v["lifecycle"] = serde_json::json!({"completeLaunchHook": bad}));
        assert_one(
            &f,
            "lifecycle.completeLaunchHook",
            "is not a lifecycle hook name",
        );
        assert!(!f[0].contains('\u{7}'), "escaped: {f:?}");
    }
    let ok = findings(|v| {
        v["lifecycle"] = serde_json::json!({"completeLaunchHook": "team/eks-node_ready-1"})
    });
    assert!(ok.is_empty(), "{ok:?}");
}

/// `validate`'s line for people names the role as the config spells it and counts in words:
/// never a Rust `Debug` value (`role None`) or `1 taints`.
#[test]
fn validate_says_the_role_and_counts_in_words() {
    for (doc, want) in [
        (
            r#"{"cluster":{"name":"x"}}"#,
            "<stdin>: valid (role: none set; no labels, no taints, no sysctls)",
        ),
        (
            r#"{"cluster":{"name":"x"},"nodeGroup":{"role":"scaler"},"sysctls":{"vm.max_map_count":262144}}"#,
            "<stdin>: valid (role: scaler; 1 label, no taints, 1 sysctl)",
        ),
        (
            r#"{"cluster":{"name":"x"},"nodeGroup":{"role":"master"},"labels":{"example.com/a":"1"}}"#,
            "<stdin>: valid (role: master; 2 labels, 1 taint, no sysctls)",
        ),
    ] {
        let out = common::run_with_stdin(common::cmd().args(["validate", "--config", "-"]), doc);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{doc}: {}",
            common::stderr(&out)
        );
        assert_eq!(common::stdout(&out).trim_end(), want, "{doc}");
    }
}

/// `validate` refuses what containerd and the kubelet would refuse or change, each by its
/// field, before any node is involved.
#[test]
fn validate_refuses_what_containerd_and_the_kubelet_refuse_or_change() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = common::config_with(dir.path(), "c.json", |v| {
        v["images"] = serde_json::json!({"pull": {"progressTimeout": "1ns", "registryQPS": 5, "registryBurst": 0}});
        v["kubelet"]["credentialProviders"] = serde_json::json!([{"name": "acme",
            "matchImages": ["u ser@registry.acme.example"], "defaultCacheDuration": "1h"}]);
    });
    let out = common::run(common::cmd().arg("validate").arg("--config").arg(&cfg));
    assert_ne!(out.status.code(), Some(0));
    let e = common::stderr(&out);
    for (field, says) in [
        ("images.pull.progressTimeout", "under 1s"),
        ("images.pull.registryBurst", "makes a 0 burst 10"),
        (
            "kubelet.credentialProviders[0].matchImages[0]",
            "invalid userinfo",
        ),
    ] {
        assert!(
            e.lines().any(|l| l.contains(field) && l.contains(says)),
            "{field}: {e}"
        );
    }
}

/// The issue's node: AL2023 with 8 vCPUs and 32 GiB, fastImagePull and maxConcurrentDownloads:
/// the dry run warns that SOCI fetches the layers.
#[test]
fn a_dry_run_under_soci_warns_that_containerd_no_longer_governs_the_layers() {
    let root = common::sample_root("al2023-root");
    let r = root.path();
    std::fs::write(r.join("sys/devices/system/cpu/online"), "0-7\n").unwrap();
    std::fs::write(r.join("proc/meminfo"), "MemTotal:       32768000 kB\n").unwrap();
    let cfg = common::config_with(r, "c.json", |v| {
        v["tagging"] = serde_json::json!({"enabled": false});
        v["images"] =
            serde_json::json!({"pull": {"fastImagePull": true, "maxConcurrentDownloads": 8}});
    });
    let out = common::init(r, &cfg, &["--dry-run"]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let text = common::stdout(&out) + &common::stderr(&out);
    assert!(
        text.contains(
            "images.pull.maxConcurrentDownloads: nodeadm uses SOCI's parallel pull on this node"
        ),
        "{text}"
    );
}

/// A startup taint with nothing to set the conditions its rule waits on is refused; one whose
/// node lacks the shipped rule's selector label is valid, with a warning naming the label.
#[test]
fn validate_refuses_a_startup_taint_no_proof_releases_and_warns_on_the_rule_label() {
    let taint =
        r#""lifecycle":{"startupTaint":"readiness.k8s.io/eks-nodeinit=pending:NoSchedule"}"#;
    // (exit code, standard error) of `validate` with `extra` beside the taint.
    let run = |extra: &str| {
        let doc = format!(r#"{{"cluster":{{"name":"x"}},{taint}{extra}}}"#);
        let out = common::run_with_stdin(common::cmd().args(["validate", "--config", "-"]), &doc);
        (out.status.code(), common::stderr(&out))
    };
    let (code, e) = run(r#","verify":{"join":"off"}"#);
    assert_ne!(code, Some(0));
    assert!(
        e.contains("lifecycle.startupTaint: `verify.join` is `off`"),
        "{e}"
    );
    let (code, e) = run("");
    assert_eq!(code, Some(0), "{e}");
    let says = [
        "warning: lifecycle.startupTaint",
        "eks-nodeinit.io/readiness: v2",
    ];
    assert!(says.iter().all(|s| e.contains(s)), "{e}");
    let (code, e) = run(r#","labels":{"eks-nodeinit.io/readiness":"v2"}"#);
    assert_eq!(code, Some(0), "{e}");
    assert!(!e.contains("warning"), "{e}");
    let (_, e) = run(r#","labels":{"eks-nodeinit.io/readiness":"v1"}"#);
    assert!(e.contains("is `v1`"), "{e}");
}
