use super::*;

fn run(json: &str) -> (Option<ProxySpec>, Vec<String>) {
    let c: ProxySettings = serde_json::from_str(json).unwrap();
    let mut f = Findings::default();
    let s = spec(Some(&c), &mut f);
    (s, f.0.iter().map(|x| x.to_string()).collect())
}

#[test]
fn urls_with_credentials_a_port_ipv6_and_a_trailing_slash() {
    let (s, f) = run(
        r#"{"https": "http://svc:p%40ss@proxy.corp:3128/", "http": "https://[fd00::1]:8443", "noProxy": [".corp.example", "10.9.0.0/16", "*"]}"#,
    );
    assert!(f.is_empty(), "{f:?}");
    let s = s.unwrap();
    let https = s.https.as_ref().unwrap();
    assert_eq!(https.url, "http://svc:p%40ss@proxy.corp:3128");
    assert_eq!(https.shown(), "http://***@proxy.corp:3128");
    assert_eq!(format!("{https:?}"), "http://***@proxy.corp:3128");
    assert_eq!(s.http.as_ref().unwrap().url, "https://[fd00::1]:8443");
    assert_eq!(s.secrets(), ["svc:p%40ss"]);
}

/// Each case is refused, names its field and says why, and echoes no piece of any password:
/// `secret`, or a cut one after its user (`svc:sec…`).
fn refused(cases: &[(&str, &str, &str)]) {
    for &(json, field, needle) in cases {
        let (s, f) = run(json);
        assert!(s.is_none(), "{json}");
        assert!(
            f.iter().any(|x| x.starts_with(field) && x.contains(needle)),
            "{json}: want {field} / {needle}, got {f:?}"
        );
        assert!(
            f.iter()
                .all(|x| !x.contains("secret") && !x.contains(":sec") && !x.contains("ret@")),
            "echoed: {f:?}"
        );
    }
}

#[test]
fn bad_urls_are_named_errors_that_never_echo_credentials() {
    refused(&[
        (
            r#"{"https": "http://proxy.corp:3128/path"}"#,
            "proxy.https",
            "has a path",
        ),
        (
            r#"{"https": "http://proxy.corp:3128?x=1"}"#,
            "proxy.https",
            "has a path",
        ),
        (
            r#"{"https": "socks5://u:secret@proxy.corp:1080"}"#,
            "proxy.https",
            "scheme `socks5`",
        ),
        (
            r#"{"https": "u:secret@proxy.corp:3128"}"#,
            "proxy.https",
            "no scheme",
        ),
        (r#"{"http": "proxy.corp:3128"}"#, "proxy.http", "no scheme"),
        (
            r#"{"https": "http://proxy.corp:0"}"#,
            "proxy.https",
            "does not name a host",
        ),
        (
            r#"{"https": "http://[zz::1]:80"}"#,
            "proxy.https",
            "does not name a host",
        ),
        (
            r#"{"https": "ftp://svc:secret@proxy.corp"}"#,
            "proxy.https",
            "scheme `ftp`",
        ),
    ]);
}

#[test]
fn bad_credentials_are_named_errors_that_never_echo_them() {
    refused(&[
        (
            r#"{"https": "http://u:sec ret@proxy.corp"}"#,
            "proxy.https",
            "credentials",
        ),
        (
            r#"{"https": "http://u:secret\"@proxy.corp"}"#,
            "proxy.https",
            "credentials",
        ),
        (
            r#"{"https": "http://@proxy.corp"}"#,
            "proxy.https",
            "credentials",
        ),
        (
            r#"{"https": "http://svc:sec/ret@proxy.corp:3128"}"#,
            "proxy.https",
            "credentials",
        ),
        (
            r#"{"https": "http://svc:sec#ret@proxy.corp:3128"}"#,
            "proxy.https",
            "credentials",
        ),
        (
            r#"{"https": "http://svc:sec?ret@proxy.corp:3128"}"#,
            "proxy.https",
            "credentials",
        ),
        (
            r#"{"https": "http://svc:sec'ret@proxy.corp:3128"}"#,
            "proxy.https",
            "credentials",
        ),
    ]);
}

#[test]
fn bad_no_proxy_entries_and_a_list_without_a_proxy_are_named_errors() {
    refused(&[
        (
            r#"{"https": "http://p.corp", "noProxy": ["a b"]}"#,
            "proxy.noProxy[0]",
            "not a NO_PROXY entry",
        ),
        (
            r#"{"https": "http://p.corp", "noProxy": ["a,b"]}"#,
            "proxy.noProxy[0]",
            "not a NO_PROXY entry",
        ),
        (
            r#"{"https": "http://p.corp", "noProxy": [""]}"#,
            "proxy.noProxy[0]",
            "not a NO_PROXY entry",
        ),
        (
            r#"{"https": "http://p.corp", "noProxy": ["[fd00::1]"]}"#,
            "proxy.noProxy[0]",
            "without brackets",
        ),
        (
            r#"{"https": "http://p.corp", "noProxy": ["git.corp:443"]}"#,
            "proxy.noProxy[0]",
            "has a port",
        ),
        (
            r#"{"https": "http://p.corp", "noProxy": ["a*.corp"]}"#,
            "proxy.noProxy[0]",
            "leading `*.`",
        ),
        (r#"{"noProxy": [".corp"]}"#, "proxy", "give `https`"),
    ]);
}

#[test]
fn no_proxy_computed_in_order_once_each_with_the_regions_domain() {
    let (s, f) = run(
        r#"{"https": "http://p.corp:3128", "noProxy": ["*.corp.example", "10.0.0.0/16", "LOCALHOST", "fd00::1", "*"]}"#,
    );
    assert!(f.is_empty(), "{f:?}");
    let list = s.unwrap().no_proxy_list(NoProxyInputs {
        region: "eu-west-1",
        vpc_cidrs: &[
            "10.0.0.0/16".into(),
            "not-a-cidr".into(),
            "2600:1f14::/56".into(),
        ],
        service_cidr: Some("172.20.0.0/16"),
    });
    assert_eq!(
        list.join(","),
        "localhost,127.0.0.1,::1,169.254.169.254,fd00:ec2::254,10.0.0.0/16,2600:1f14::/56,172.20.0.0/16,.internal,.eu-west-1.compute.internal,.corp.example,fd00::1,*"
    );
    assert_eq!(ec2_domain("us-east-1"), ".ec2.internal");
}

#[test]
fn the_agents_own_calls_get_the_same_urls_and_the_fixed_entries() {
    let (s, _) = run(r#"{"https": "http://u:pw@p.corp:3128", "noProxy": [".corp.example"]}"#);
    let p = s.unwrap().for_agent("us-east-1", Some("10.100.0.0/16"));
    assert_eq!(p.https.as_deref(), Some("http://u:pw@p.corp:3128"));
    assert_eq!(p.http, None);
    assert_eq!(
        p.no_proxy,
        "localhost,127.0.0.1,::1,169.254.169.254,fd00:ec2::254,10.100.0.0/16,.internal,.ec2.internal,.corp.example"
    );
    assert!(
        !format!("{p:?}").contains("pw"),
        "Debug shows no credentials"
    );
}

#[test]
fn cidrs() {
    for ok in [
        "10.0.0.0/16",
        "0.0.0.0/0",
        "fd00::/8",
        "2600:1f14:abc::/128",
    ] {
        assert!(is_cidr(ok), "{ok}");
    }
    for bad in [
        "10.0.0.0",
        "10.0.0.0/33",
        "fd00::/129",
        "10.0.0.0/",
        "x/8",
        "10.0.0.0/+8",
    ] {
        assert!(!is_cidr(bad), "{bad}");
    }
}
