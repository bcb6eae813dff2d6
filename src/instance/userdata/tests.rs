//! The user data read as nodeadm reads it, and the agent's config found in it.

use super::nodeadm::NodeConfigs;
use super::*;
use std::io::Write as _;

const CA: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCmZha2UtY2EtZm9yLXRlc3RzCg==";

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn b64(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

fn yaml(flags: &[&str]) -> String {
    let mut s = format!(
        "---\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: prod\n    certificateAuthority: {CA}\n"
    );
    if !flags.is_empty() {
        s.push_str("  kubelet:\n    flags:\n");
        for f in flags {
            s.push_str(&format!("      - \"{f}\"\n"));
        }
    }
    s
}

/// A MIME multipart document of (content type, extra headers, body) parts, with `nl` line
/// ends.
fn mime(parts: &[(&str, &str, &str)], nl: &str) -> String {
    let mut s = format!(
        "MIME-Version: 1.0{nl}Content-Type: multipart/mixed; boundary=\"==BOUNDARY==\"{nl}{nl}preamble{nl}"
    );
    for (ct, extra, body) in parts {
        s.push_str(&format!(
            "--==BOUNDARY=={nl}Content-Type: {ct}{nl}{extra}{nl}"
        ));
        s.push_str(&body.replace('\n', nl));
        s.push_str(nl);
    }
    s.push_str(&format!("--==BOUNDARY==--{nl}"));
    s
}

fn taints(r: &Result<NodeConfigs, UserDataError>) -> (String, Vec<String>) {
    let t = r.as_ref().unwrap().taints.as_ref().unwrap();
    let texts = t
        .entries
        .iter()
        .map(|e| match e {
            Ok(t) => t.text.clone(),
            Err(e) => format!("ERR {e}"),
        })
        .collect();
    (t.source.clone(), texts)
}

#[test]
fn mime_with_several_parts_merges_in_order_and_the_last_flag_wins() {
    for nl in ["\n", "\r\n"] {
        let ud = mime(
            &[
                (
                    "text/x-shellscript; charset=\"us-ascii\"",
                    "",
                    "#!/bin/bash\necho hi\n",
                ),
                (
                    "application/node.eks.aws",
                    "",
                    &yaml(&["--v=2", "--register-with-taints=a=1:NoSchedule,b:NoExecute"]),
                ),
                (
                    "APPLICATION/Node.EKS.AWS; charset=utf-8",
                    "",
                    &yaml(&[
                        "--node-labels=x=y",
                        "--register-with-taints c=3:PreferNoSchedule",
                    ]),
                ),
            ],
            nl,
        );
        let r = read(ud.as_bytes());
        assert_eq!(
            r.as_ref().unwrap().documents,
            [Where::Part(2), Where::Part(3)],
            "{nl:?}"
        );
        assert_eq!(
            taints(&r),
            (
                "kubelet.flags[1] of the NodeConfig in MIME part 3 of the user data".into(),
                vec!["c=3:PreferNoSchedule".to_string()]
            ),
            "kubelet keeps the last --register-with-taints ({nl:?})"
        );
    }
}

#[test]
fn config_taints_count_only_without_a_flag_and_the_last_document_wins() {
    let with_config = |taints: &str| {
        format!(
            "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      maxPods: 20\n      registerWithTaints: {taints}\n"
        )
    };
    let ud = mime(
        &[
            (
                "application/node.eks.aws",
                "",
                &with_config("[{key: a, value: \"1\", effect: NoSchedule}]"),
            ),
            (
                "application/node.eks.aws",
                "",
                &with_config("[{key: b, effect: NoExecute, timeAdded: null}]"),
            ),
        ],
        "\n",
    );
    let r = read(ud.as_bytes());
    assert_eq!(
        taints(&r),
        (
            "kubelet.config.registerWithTaints of the NodeConfig in MIME part 2 of the user data"
                .into(),
            vec!["b:NoExecute".to_string()]
        )
    );
    // A flag anywhere overrides the config's list.
    let ud = mime(
        &[
            (
                "application/node.eks.aws",
                "",
                &yaml(&["--register-with-taints=f:NoSchedule"]),
            ),
            (
                "application/node.eks.aws",
                "",
                &with_config("[{key: c, effect: NoSchedule}]"),
            ),
        ],
        "\n",
    );
    assert_eq!(taints(&read(ud.as_bytes())).1, ["f:NoSchedule"]);
    // An empty flag clears them: nothing to carry.
    let ud = mime(
        &[
            (
                "application/node.eks.aws",
                "",
                &with_config("[{key: c, effect: NoSchedule}]"),
            ),
            (
                "application/node.eks.aws",
                "",
                &yaml(&["--register-with-taints="]),
            ),
        ],
        "\n",
    );
    assert_eq!(read(ud.as_bytes()).unwrap().taints, None);
    // Entries kubelet would refuse say why, without their text.
    let ud = with_config("[{key: \"bad key\", effect: NoSchedule}, {key: k, effect: 3}, x]");
    let (_, got) = taints(&read(ud.as_bytes()));
    assert!(
        got.iter()
            .all(|g| g.starts_with("ERR ") && !g.contains("bad key")),
        "{got:?}"
    );
    assert_eq!(got.len(), 3);
}

#[test]
fn base64_whole_gzip_whole_and_gzip_part() {
    let doc = yaml(&["--register-with-taints=g:NoSchedule"]);
    let want = vec!["g:NoSchedule".to_string()];
    // base64 with line breaks, as `base64` writes it (Go skips \r and \n).
    let wrapped: String = b64(doc.as_bytes())
        .as_bytes()
        .chunks(76)
        .map(|c| format!("{}\r\n", String::from_utf8_lossy(c)))
        .collect();
    assert_eq!(taints(&read(wrapped.as_bytes())).1, want);
    assert_eq!(taints(&read(&gzip(doc.as_bytes()))).1, want);
    // base64 of gzip, as the EC2 API is given compressed user data.
    assert_eq!(taints(&read(b64(&gzip(doc.as_bytes())).as_bytes())).1, want);
    // gzip of MIME whose NodeConfig part is itself base64 of gzip.
    let part = b64(&gzip(doc.as_bytes()));
    let ud = mime(
        &[(
            "application/node.eks.aws",
            "Content-Transfer-Encoding: base64\n",
            &part,
        )],
        "\r\n",
    );
    let r = read(&gzip(ud.as_bytes()));
    assert_eq!(taints(&r).1, want);
    assert_eq!(
        taints(&r).0,
        "kubelet.flags[0] of the NodeConfig in MIME part 1 of the user data"
    );
    // Two gzip members are one stream, as Go reads them.
    let (a, b) = doc.split_at(20);
    let two = [gzip(a.as_bytes()), gzip(b.as_bytes())].concat();
    assert_eq!(taints(&read(&two)).1, want);
}

#[test]
fn plain_yaml_and_plain_json() {
    let r = read(yaml(&[]).as_bytes()).unwrap();
    assert_eq!(r.documents, [Where::Whole]);
    assert_eq!(r.taints, None);
    let json = r#"{"apiVersion":"node.eks.aws/v1alpha1","kind":"NodeConfig","spec":{"kubelet":{"flags":["--register-with-taints","j=1:NoExecute"]}}}"#;
    assert_eq!(
        taints(&read(json.as_bytes())),
        (
            "kubelet.flags[0] of the NodeConfig in the user data".into(),
            vec!["j=1:NoExecute".to_string()]
        )
    );
}

#[test]
fn no_nodeconfig() {
    let no = |ud: &[u8]| match read(ud) {
        Err(UserDataError::NoNodeConfig(why)) => why,
        other => panic!("{other:?}"),
    };
    assert!(matches!(no(b""), NoNodeConfig::NotANodeConfig { .. }));
    assert!(matches!(
        no(b"#!/bin/bash\neks-nodeinit init\n"),
        NoNodeConfig::NotANodeConfig { .. }
    ));
    assert!(matches!(
        no(b"#cloud-config\nruncmd: [ls]\n"),
        NoNodeConfig::NotANodeConfig { .. }
    ));
    let shell = mime(&[("text/x-shellscript", "", "#!/bin/bash\n")], "\n");
    assert_eq!(no(shell.as_bytes()), NoNodeConfig::NoPart { parts: 1 });
    // A single-part MIME message is no multipart: read whole, not a NodeConfig.
    let single = "MIME-Version: 1.0\nContent-Type: text/x-shellscript\n\n#!/bin/bash\n";
    assert!(matches!(
        no(single.as_bytes()),
        NoNodeConfig::NotANodeConfig { .. }
    ));
    let e = read(shell.as_bytes()).unwrap_err().to_string();
    assert!(
        e.starts_with("could not find NodeConfig within UserData"),
        "{e}"
    );
}

#[test]
fn malformed_user_data_says_where_and_never_what() {
    let secret = format!("token-{CA}");
    let cases: Vec<(Vec<u8>, &str)> = vec![
        // The gzip magic, then garbage.
        ([&[0x1f, 0x8b, 8, 0][..], secret.as_bytes()].concat(), "the user data starts with the gzip magic"),
        // Gzip followed by other bytes (Go reads on for a next member and fails).
        ([gzip(yaml(&[]).as_bytes()), secret.clone().into_bytes()].concat(), "the user data starts with the gzip magic"),
        // A NodeConfig part that is not YAML.
        (
            mime(&[("application/node.eks.aws", "", &format!("kind: [{secret}\n"))], "\n").into_bytes(),
            "MIME part 1 of the user data is not a NodeConfig nodeadm can decode: not YAML or JSON nodeadm can read (line",
        ),
        // A NodeConfig part of another kind.
        (
            mime(&[("text/plain", "", "x"), ("application/node.eks.aws", "", "apiVersion: v1\nkind: ConfigMap\n")], "\n").into_bytes(),
            "MIME part 2 of the user data is not a NodeConfig nodeadm can decode: no `kind: NodeConfig`",
        ),
        // Flags that are not a list.
        (
            mime(&[("application/node.eks.aws", "", &format!("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flags: {secret}\n"))], "\n").into_bytes(),
            "`spec.kubelet.flags` is not a list of strings",
        ),
        // No closing boundary.
        (
            format!("Content-Type: multipart/mixed; boundary=B\n\n--B\nContent-Type: application/node.eks.aws\n\n{secret}\n").into_bytes(),
            "MIME part 1 of the user data: the part does not end",
        ),
        // No boundary parameter.
        (b"Content-Type: multipart/mixed\n\n--B\n".to_vec(), "no boundary parameter"),
        // A part's Content-Type that is not a media type.
        (
            mime(&[("application/node.eks.aws; x=\"unterminated", "", "x")], "\n").into_bytes(),
            "MIME part 1 of the user data: its Content-Type is not a media type",
        ),
        // A gzip part that is not gzip.
        (
            mime(&[("application/node.eks.aws", "", &b64(&[&[0x1f, 0x8b][..], secret.as_bytes()].concat()))], "\n").into_bytes(),
            "MIME part 1 of the user data starts with the gzip magic",
        ),
        // A whole NodeConfig of another version.
        (b"apiVersion: node.eks.aws/v9\nkind: NodeConfig\n".to_vec(), "`apiVersion` is not node.eks.aws/v1alpha1"),
        // Junk between parts.
        (
            format!("Content-Type: multipart/mixed; boundary=B\n\n--B\n\nx\n--B {secret}\n--B--\n").into_bytes(),
            "the user data's MIME multipart body: after part 1",
        ),
    ];
    for (ud, want) in cases {
        let e = read(&ud).unwrap_err();
        let s = e.to_string();
        assert!(s.contains(want), "`{s}` should contain `{want}`");
        assert!(!s.contains("token-") && !s.contains(CA), "{s}");
    }
}

#[test]
fn mime_edges_follow_go() {
    let doc = yaml(&["--register-with-taints=e:NoSchedule"]);
    // Folded Content-Type header, upper-case keys, a quoted boundary with a space, an empty
    // part, and text after the closing boundary.
    let ud = format!(
        "CONTENT-TYPE: multipart/mixed;\n boundary=\"a b\"\nMIME-Version: 1.0\n\n--a b\nContent-Type: text/plain\n\n--a b  \ncontent-type: application/node.eks.aws\n\n{doc}\n--a b--\nepilogue\n"
    );
    let r = read(ud.as_bytes()).unwrap();
    assert_eq!(r.documents, [Where::Part(2)]);
    // A boundary-like line that is longer is body, not a boundary.
    let ud = format!(
        "Content-Type: multipart/mixed; boundary=B\n\n--B\nContent-Type: application/node.eks.aws\n\n{doc}--Bx\n\n--B--"
    );
    assert!(
        read(ud.as_bytes()).is_err(),
        "`--Bx` is YAML in the part, which breaks it"
    );
    // Quoted-printable NodeConfig parts are decoded.
    let qp = doc
        .replace('=', "=3D")
        .replace("kind: NodeConfig", "kind: Node=\nConfig");
    let ud = mime(
        &[(
            "application/node.eks.aws",
            "Content-Transfer-Encoding: Quoted-Printable\n",
            &qp,
        )],
        "\r\n",
    );
    assert_eq!(taints(&read(ud.as_bytes())).1, ["e:NoSchedule"]);
    // RFC 2231 continuations for the boundary.
    let ud = format!(
        "Content-Type: multipart/mixed; boundary*0=\"X\"; boundary*1=\"Y\"\n\n--XY\nContent-Type: application/node.eks.aws\n\n{doc}\n--XY--\n"
    );
    assert_eq!(read(ud.as_bytes()).unwrap().documents, [Where::Part(1)]);
    // A part whose headers run into the end stops the parts, as Go's NextPart says io.EOF.
    let ud =
        "Content-Type: multipart/mixed; boundary=B\n\n--B\nContent-Type: application/node.eks.aws";
    assert_eq!(
        read(ud.as_bytes()),
        Err(UserDataError::NoNodeConfig(NoNodeConfig::NoPart {
            parts: 1
        }))
    );
}

#[test]
fn media_types_as_go_parses_them() {
    use mime::parse_media_type as p;
    assert_eq!(
        p(" Multipart/Mixed ; Boundary=\"x\\\"y\" ;").unwrap(),
        (
            "multipart/mixed".into(),
            vec![("boundary".into(), "x\"y".into())]
        )
    );
    assert!(p("multipart/mixed; boundary=a; boundary=b").is_err());
    assert!(p("multipart/mixed; boundary").is_err());
    assert!(p("multipart").is_ok());
    assert!(p("multi part/mixed").is_err());
    assert!(p("").is_err());
    assert_eq!(
        p("a/b; name*=utf-8''%41%42").unwrap().1,
        [("name".to_string(), "AB".to_string())]
    );
}

#[test]
fn bounded_and_panic_free() {
    // A gzip bomb past the budget is refused.
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..=(MAX_DECOMPRESSED >> 20) {
        e.write_all(&zeros).unwrap();
    }
    let bomb = e.finish().unwrap();
    assert!(matches!(read(&bomb), Err(UserDataError::TooLarge { .. })));
    // Every prefix of a valid MIME document, and some byte soup, reads without a panic.
    let ud = mime(
        &[(
            "application/node.eks.aws",
            "Content-Transfer-Encoding: quoted-printable\n",
            &yaml(&["--register-with-taints=a:NoSchedule"]),
        )],
        "\r\n",
    );
    for n in 0..ud.len() {
        let _ = read(&ud.as_bytes()[..n]);
    }
    let mut x: u32 = 1;
    for _ in 0..2000 {
        let bytes: Vec<u8> = (0..64)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                b"-B\r\n:=; \"\\a"[(x % 11) as usize]
            })
            .collect();
        let mut ud = b"Content-Type: multipart/mixed; boundary=B\n\n".to_vec();
        ud.extend(bytes);
        let _ = read(&ud);
    }
    for qp in [
        &b"="[..],
        b"a=",
        b"=\n",
        b"==",
        b"=4",
        b"=4\n",
        b"\x01",
        b"a=\r\n=",
        b"= \n",
    ] {
        let _ = mime::quoted_printable(qp);
    }
}

fn multipart(parts: &[(&str, &str)]) -> String {
    let mut s =
        String::from("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n");
    for (ct, body) in parts {
        s.push_str(&format!("--B\nContent-Type: {ct}\n\n{body}\n"));
    }
    s + "--B--\n"
}

const AGENT: &str = r#"{"cluster": {"name": "prod"}, "nodeGroup": {"role": "scaler"}}"#;

#[test]
fn the_agents_config_is_its_mime_part_or_the_whole_json_user_data() {
    let ud = multipart(&[
        ("text/x-shellscript", "#!/bin/sh\necho hi"),
        (AGENT_MEDIA_TYPE, AGENT),
        ("application/node.eks.aws", &yaml(&[])),
    ]);
    let c = agent_config(ud.as_bytes()).unwrap().unwrap();
    assert_eq!(c.at, Where::Part(2));
    assert_eq!(c.text.trim(), AGENT);
    // Its body may be base64 of gzip, as nodeadm's parts may.
    let ud = multipart(&[(
        &format!("{AGENT_MEDIA_TYPE}; charset=utf-8"),
        &b64(&gzip(AGENT.as_bytes())),
    )]);
    assert_eq!(agent_config(ud.as_bytes()).unwrap().unwrap().text, AGENT);
    // A pinned version is the agent's own.
    let pinned = format!(r#"{{"apiVersion": "eks-nodeinit/v1", {}"#, &AGENT[1..]);
    let c = agent_config(pinned.as_bytes()).unwrap().unwrap();
    assert_eq!(c.text, pinned);
    // The whole user data, plain, base64, or base64 of gzip.
    for ud in [
        AGENT.as_bytes().to_vec(),
        b64(AGENT.as_bytes()).into_bytes(),
        b64(&gzip(AGENT.as_bytes())).into_bytes(),
        gzip(format!("\n  {AGENT}\n").as_bytes()),
    ] {
        let c = agent_config(&ud).unwrap().unwrap();
        assert_eq!((c.at, c.text.trim()), (Where::Whole, AGENT));
    }
    // Its Debug names where, never what.
    assert!(!format!("{c:?}").contains("prod"), "{c:?}");
}

#[test]
fn user_data_without_the_agents_config_holds_none() {
    let json_nodeconfig = r#"{"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig"}"#;
    for ud in [
        "#!/bin/bash\neks-nodeinit init --config /etc/x.json\n".to_string(),
        "#cloud-config\nwrite_files: []\n".into(),
        yaml(&[]),
        json_nodeconfig.into(),
        multipart(&[("application/node.eks.aws", &yaml(&[]))]),
        String::new(),
    ] {
        assert_eq!(agent_config(ud.as_bytes()).unwrap(), None, "{ud}");
    }
}

#[test]
fn a_mistyped_or_repeated_agent_part_is_an_error_not_nothing() {
    let typo = multipart(&[("application/vnd.eks-nodeinit+jsn", AGENT)]);
    let e = agent_config(typo.as_bytes()).unwrap_err().to_string();
    assert!(
        e.contains("MIME part 1") && e.contains(AGENT_MEDIA_TYPE),
        "{e}"
    );
    let two = multipart(&[(AGENT_MEDIA_TYPE, AGENT), (AGENT_MEDIA_TYPE, AGENT)]);
    let e = agent_config(two.as_bytes()).unwrap_err().to_string();
    assert!(e.contains("MIME part 2") && e.contains("second"), "{e}");
    let latin1 = [b"{\"cluster\": \"".as_slice(), &[0xe9], b"\"}"].concat();
    let e = agent_config(&latin1).unwrap_err().to_string();
    assert!(e.contains("not UTF-8"), "{e}");
    assert!(!e.contains("cluster"), "never echoes the config: {e}");
}

#[test]
fn the_nodes_name_is_the_last_hostname_override_else_the_instance_id_gate() {
    const ND: &str = "application/node.eks.aws";
    let gate = |on: bool| {
        format!(
            "{}  featureGates:\n    InstanceIdNodeName: {on}\n",
            yaml(&[])
        )
    };
    // The gate on in one part, off in a later one: the later document wins.
    let ud = mime(&[(ND, "", &gate(true)), (ND, "", &gate(false))], "\n");
    let n = nodeadm::read(ud.as_bytes()).unwrap().naming;
    assert!(!n.instance_id_node_name);
    assert_eq!(n.hostname_override, None);
    let ud = mime(&[(ND, "", &gate(false)), (ND, "", &gate(true))], "\n");
    assert!(
        nodeadm::read(ud.as_bytes())
            .unwrap()
            .naming
            .instance_id_node_name
    );
    // The last --hostname-override among the flags, in either form.
    let ud = mime(
        &[
            (ND, "", &yaml(&["--hostname-override=first"])),
            (ND, "", &yaml(&["--v=2 --hostname-override last.example"])),
        ],
        "\n",
    );
    let n = nodeadm::read(ud.as_bytes()).unwrap().naming;
    assert_eq!(
        n.hostname_override,
        Some((
            Some("last.example".to_string()),
            "kubelet.flags[0] of the NodeConfig in MIME part 2 of the user data".to_string()
        ))
    );
    // YAML 1.1's booleans, as nodeadm's reader takes them.
    let yes = format!(
        "{}  featureGates:\n    InstanceIdNodeName: \"Yes\"\n",
        yaml(&[])
    );
    assert!(
        nodeadm::read(yes.as_bytes())
            .unwrap()
            .naming
            .instance_id_node_name
    );
    let on = format!("{}  featureGates:\n    InstanceIdNodeName: on\n", yaml(&[]));
    assert!(
        nodeadm::read(on.as_bytes())
            .unwrap()
            .naming
            .instance_id_node_name
    );
    // A gate that is not a boolean: nodeadm cannot decode the document either.
    let bad = format!(
        "{}  featureGates:\n    InstanceIdNodeName: yes-please\n",
        yaml(&[])
    );
    assert!(nodeadm::read(bad.as_bytes()).is_err());
}

#[test]
fn dropins_are_read_as_nodeadm_reads_a_file_and_merge_around_the_agents() {
    let path = "/etc/eks/nodeadm.d/00-ami.yaml";
    // A drop-in may be MIME multipart: its parts are named within the file.
    let multi = mime(
        &[
            ("text/x-shellscript", "", "#!/bin/sh\n"),
            (
                NODECONFIG_MEDIA_TYPE,
                "",
                &yaml(&["--register-with-taints=a:NoSchedule"]),
            ),
        ],
        "\n",
    );
    let early = read_dropin(path, multi.as_bytes()).unwrap();
    assert_eq!(
        early.documents,
        [Where::File {
            path: path.into(),
            part: Some(2)
        }]
    );
    // No base64 or gzip of a whole file, and no NodeConfig is an error naming the file.
    let e = read_dropin(path, b64(yaml(&[]).as_bytes()).as_bytes()).unwrap_err();
    assert!(
        e.to_string()
            .starts_with(&format!("{path} is not a NodeConfig nodeadm can decode")),
        "{e}"
    );
    let e = read_dropin(path, mime(&[("text/plain", "", "x")], "\n").as_bytes()).unwrap_err();
    assert_eq!(e.to_string(), format!("{path} is not a NodeConfig nodeadm can decode: no NodeConfig in it (its MIME multipart document has 1 part and none of type application/node.eks.aws)"));
    let late = read_dropin(
        "/etc/eks/nodeadm.d/20-late.yaml",
        yaml(&["--register-with-taints=b:NoSchedule"]).as_bytes(),
    )
    .unwrap();
    let user = read(yaml(&["--register-with-taints=u:NoSchedule"]).as_bytes()).unwrap();
    let m = NodeConfigs::merged(
        Some(&user),
        [("20-late.yaml", &late), ("00-ami.yaml", &early)]
            .into_iter()
            .rev(),
    )
    .unwrap();
    assert_eq!(m.documents.len(), 3);
    // The taints the agent carries are the last flag before its own drop-in: 00-ami's.
    assert_eq!(
        m.taints.as_ref().unwrap().source,
        format!("kubelet.flags[0] of the NodeConfig in MIME part 2 of {path}")
    );
    assert_eq!(
        m.taints_after.as_deref(),
        Some("kubelet.flags[0] of the NodeConfig in /etc/eks/nodeadm.d/20-late.yaml")
    );
    // nodeadm's names: `.yaml`, `.yml`, `.json` in any case.
    assert!(is_config_file("a.YAML") && is_config_file("b.yml") && is_config_file("c.Json"));
    assert!(!is_config_file("d.yaml.bak") && !is_config_file("README"));
}
