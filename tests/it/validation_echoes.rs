//! What a refused value shows: each finding on one line, escaped once, truncated, and never a
//! secret (the cluster CA, a proxy's password), through the public API as `validation` checks.

use crate::common;
use crate::validation::{assert_one, base, findings};

use eks_nodeinit::config::parse;

#[test]
fn every_echoed_value_is_escaped_and_truncated() {
    // A value with a newline, a carriage return and a terminal escape, 5,000 characters long,
    // in every string field: each finding stays on one line, shows at most ECHO_MAX characters
    // of it, and the cluster CA (a secret) is never echoed at all.
    let h = format!("A\nB\r\u{1b}[31m{}", "x".repeat(5000));
    let ca = format!("SECRET\n{}", "y".repeat(5000));
    let v = serde_json::json!({
        "cluster": {
            "name": h, "apiServerEndpoint": h, "certificateAuthority": ca, "cidr": h,
            "containerRuntime": h
        },
        "nodeGroup": {"name": h, "role": "scaler"},
        "labels": {h.clone(): h, "example.com/ok": h},
        "taints": [h],
        "sysctls": {h.clone(): 1, "vm.max_map_count": h},
        "kubelet": {
            "shutdownGracePeriod": h, "shutdownGracePeriodCriticalPods": h,
            "configPath": h, "extraArgs": [h]
        },
        "handoff": {"bootstrapPath": h, "nodeadmPath": h, "extraBootstrapArgs": [h, "--x", h]},
        "tagging": {"ec2Endpoint": h},
        "imds": {"endpoint": h}
    });
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.json");
    std::fs::write(&p, v.to_string()).unwrap();
    let out = common::run(common::cmd().args(["validate", "--config"]).arg(&p));
    assert_eq!(out.status.code(), Some(3));
    let err = common::stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    assert!(lines.len() > 15, "a finding per field: {err}");
    for l in &lines {
        assert!(
            l.starts_with("error: ") || l.starts_with("  - ") || l.is_empty(),
            "a raw newline split a finding: {l:?}"
        );
        assert!(l.chars().count() < 800, "unbounded echo: {} chars", l.len());
        assert!(!l.contains('\r') && !l.contains('\u{1b}'), "{l:?}");
    }
    assert!(
        !err.contains("SECRET") && !err.contains("yyyy"),
        "the CA was echoed"
    );
    assert!(err.len() < 40_000, "{} bytes of errors", err.len());
}

/// Each kind of value that ends up in a kubelet or bootstrap.sh argument, holding a character
/// systemd or bash would not split on (pasted from a web page): refused, naming the field and
/// the code point, never echoing the character itself.
#[test]
fn unicode_spaces_and_invisible_characters_in_arguments_are_refused_by_code_point() {
    type Edit = fn(&mut serde_json::Value);
    let cases: [(&str, &str, Edit); 7] = [
        (
            "kubelet.extraArgs[0]",
            "U+00A0",
            |v| v["kubelet"] = serde_json::json!({"extraArgs": ["--max-pods=110\u{a0}--v=9"]}),
        ),
        ("kubelet.extraArgs[0]", "U+2028", |v| {
            v["kubelet"] = serde_json::json!({"extraArgs": ["--v=2\u{2028}"]})
        }),
        ("labels[\"team\"]", "U+00A0", |v| {
            v["labels"] = serde_json::json!({"team": "a\u{a0}b"})
        }),
        ("labels[\"te\\u{200b}am\"]", "U+200B", |v| {
            v["labels"] = serde_json::json!({"te\u{200b}am": "a"})
        }),
        ("taints[0]", "U+3000", |v| {
            v["taints"] = serde_json::json!(["dedicated=x\u{3000}:NoSchedule"])
        }),
        ("handoff.extraBootstrapArgs[1]", "U+2029", |v| {
            v["handoff"] =
                serde_json::json!({"extraBootstrapArgs": ["--dns-cluster-ip", "10.0.0.10\u{2029}"]})
        }),
        ("handoff.extraBootstrapArgs[0]", "U+0085", |v| {
            v["handoff"] = serde_json::json!({"extraBootstrapArgs": ["--local-disks\u{85}"]})
        }),
    ];
    for (field, code, edit) in cases {
        let f = findings(edit);
        assert_one(&f, field, code);
        for line in &f {
            assert!(
                !line.chars().any(eks_nodeinit::base::text::is_unsplittable),
                "{line:?}"
            );
        }
    }
}

#[test]
fn a_bad_proxy_is_a_named_error_that_never_shows_the_password() {
    for (url, needle) in [
        ("socks5://svc:hunter2@proxy.corp:1080", "scheme `socks5`"),
        ("http://svc:hunter2@proxy.corp:3128/path", "has a path"),
        ("svc:hunter2@proxy.corp:3128", "no scheme"),
    ] {
        let f = findings(|v| v["proxy"] = serde_json::json!({"https": url}));
        assert_one(&f, "proxy.https", needle);
        assert!(f.iter().all(|x| !x.contains("hunter2")), "{f:?}");
    }
    // A URL where the section belongs (serde quotes it in its message, a `"` inside escaped),
    // or as a key (in the path, and backticked in serde's message).
    for proxy in [
        serde_json::json!("http://svc:hunter2@proxy.corp:3128"),
        serde_json::json!("http://svc:hun\"ter2@proxy.corp:3128"),
        serde_json::json!({"http://svc:hunter2@proxy.corp:3128": 1}),
    ] {
        let root = common::sample_root("al2023-root");
        let cfg = common::config_with(root.path(), "c.json", |v| v["proxy"] = proxy);
        let out = common::init(root.path(), &cfg, &["--dry-run"]);
        assert_eq!(out.status.code(), Some(3), "{}", common::stderr(&out));
        assert!(
            common::stderr(&out).contains("(value not shown)"),
            "{}",
            common::stderr(&out)
        );
        common::assert_unprinted(&out, root.path(), &["hunter2", "ter2", "svc:"]);
    }
    // The whole command: exit 3, the field named, nothing on the node changed.
    let root = common::sample_root("al2023-root");
    let cfg = common::config_with(root.path(), "c.json", |v| {
        v["proxy"] = serde_json::json!({"https": "http://svc:hunter2@proxy.corp:3128/p", "noProxy": ["a b"]});
    });
    let before = common::snapshot(root.path());
    let out = common::init(root.path(), &cfg, &[]);
    assert_eq!(out.status.code(), Some(3), "{}", common::stderr(&out));
    let err = common::stderr(&out);
    assert!(
        err.contains("proxy.https") && err.contains("proxy.noProxy[0]"),
        "{err}"
    );
    common::assert_unprinted(&out, root.path(), &["hunter2"]);
    assert_eq!(common::snapshot(root.path()), before, "nothing changed");
}

/// A refused JSON value is shown as JSON, escaped once: `"ipvlan"`, never `\"ipvlan\"`; a quote
/// or a control character inside keeps JSON's one escape. The same for the fields serde refuses.
#[test]
fn refused_values_are_escaped_once() {
    for (kubelet, want) in [
        (
            serde_json::json!({"maxPods": {"cni": "ipvlan"}}),
            r#"kubelet.maxPods.cni: "ipvlan" is not a CNI mode; use "secondaryIPs", "prefixDelegation" or "ipv6""#,
        ),
        (
            serde_json::json!({"maxPods": {"cni": "a\"b\r"}}),
            r#"kubelet.maxPods.cni: "a\"b\r" is not a CNI mode"#,
        ),
        (
            serde_json::json!({"maxPods": {"ceiling": "max"}}),
            r#"kubelet.maxPods.ceiling: "max" is not a ceiling"#,
        ),
        (
            serde_json::json!({"maxPods": "110"}),
            r#"kubelet.maxPods: "110" is not a whole number"#,
        ),
        (
            serde_json::json!({"kubeReserved": "manual"}),
            r#"kubelet.kubeReserved: "manual" is neither "auto""#,
        ),
    ] {
        let f = findings(|v| v["kubelet"] = kubelet);
        assert!(f.len() == 1 && f[0].starts_with(want), "{want}\n{f:#?}");
    }
    for (field, value) in [
        ("nodeGroup", serde_json::json!({"role": "bo\"ss"})),
        ("handoff", serde_json::json!({"mode": "al\"3"})),
        ("lifecycle", serde_json::json!({"warmPool": "o\"n"})),
    ] {
        let mut v = base();
        v[field] = value;
        let e = parse(&v.to_string(), "t.json").unwrap_err().to_string();
        assert!(e.contains("unknown variant `") && !e.contains('\\'), "{e}");
    }
}
