//! Every config shipped in examples/ passes `eks-nodeinit validate` and validates against the
//! JSON Schema in docs/config.schema.json (checked with Python's `jsonschema`, Draft 2020-12):
//! the JSON files, the JSON embedded in the cloud-init user data, and the cloud-config's
//! write_files content. The schema itself must match the Rust types.

use crate::common;

use common::*;

/// Check a document against docs/config.schema.json.
/// The schema violations of a document (empty: valid). Fails the test if the checker itself
/// cannot run, so a broken setup never reads as "refused".
fn schema_errors(doc: &str) -> Vec<String> {
    let schema = manifest_dir().join("docs/config.schema.json");
    let script = "import json,sys,jsonschema\nschema=json.load(open(sys.argv[1]))\njsonschema.Draft202012Validator.check_schema(schema)\nfor e in jsonschema.Draft202012Validator(schema).iter_errors(json.load(sys.stdin)): print(e.message)";
    let out = run_with_stdin(
        std::process::Command::new("python3")
            .args(["-c", script])
            .arg(&schema),
        doc,
    );
    assert!(
        out.status.success(),
        "the schema checker failed: {}",
        stderr(&out)
    );
    stdout(&out).lines().map(String::from).collect()
}

fn schema_check(doc: &str, what: &str) {
    let errs = schema_errors(doc);
    assert!(errs.is_empty(), "{what} against the schema: {errs:?}");
}

fn validate(doc: &str, what: &str) {
    schema_check(doc, what);
    let out = run_with_stdin(cmd().args(["validate", "--config", "-"]), doc);
    assert!(out.status.success(), "{what}: {}", stderr(&out));
}

#[test]
fn json_examples_are_valid() {
    for f in ["scaler.json", "master.json"] {
        validate(&std::fs::read_to_string(example(f)).unwrap(), f);
    }
}

#[test]
fn user_data_examples_carry_valid_configs() {
    let mut n = 0;
    for f in [
        "cloud-init/al2-userdata.sh",
        "cloud-init/al2023-userdata.mime",
    ] {
        let docs = heredocs(&std::fs::read_to_string(example(f)).unwrap());
        assert_eq!(docs.len(), 1, "{f}");
        for d in docs {
            validate(&d, f);
            n += 1;
        }
    }
    assert_eq!(n, 2);
}

#[test]
fn name_only_user_data_holds_the_agents_config_and_nothing_of_the_cluster_but_its_name() {
    use eks_nodeinit::instance::userdata::{agent_config, read, UserDataError, Where};
    for (f, at) in [
        ("cloud-init/al2023-name-only.mime", Where::Part(1)),
        ("cloud-init/al2-name-only.json", Where::Whole),
    ] {
        let text = std::fs::read_to_string(example(f)).unwrap();
        let found = agent_config(text.as_bytes())
            .unwrap_or_else(|e| panic!("{f}: {e}"))
            .unwrap_or_else(|| panic!("{f}: no eks-nodeinit config"));
        assert_eq!(found.at, at, "{f}");
        validate(&found.text, f);
        let v: serde_json::Value = serde_json::from_str(&found.text).unwrap();
        assert!(v["cluster"]["discovery"].is_object(), "{f}");
        for field in ["apiServerEndpoint", "certificateAuthority", "cidr"] {
            assert!(v["cluster"].get(field).is_none(), "{f}: {field}");
        }
        // No NodeConfig: nodeadm's chain passes over the user data (the drop-in gives all).
        assert!(
            matches!(read(text.as_bytes()), Err(UserDataError::NoNodeConfig(_))),
            "{f}"
        );
        // Neither a script nor cloud-config: the packaged unit runs the agent.
        assert!(
            !text.contains("#!/") && !text.contains("#cloud-config"),
            "{f}"
        );
    }
}

#[test]
fn the_al2023_script_example_holds_a_nodeconfig_as_nodeadm_reads_it() {
    use eks_nodeinit::instance::userdata::{read, Where};
    let f = "cloud-init/al2023-userdata.mime";
    let text = std::fs::read_to_string(example(f)).unwrap();
    let r = read(text.as_bytes()).unwrap_or_else(|e| panic!("{f}: {e}"));
    assert_eq!(r.documents, [Where::Part(1)], "{f}");
    assert_eq!(r.taints, None, "{f}: the agent sets the taints");
}

#[test]
fn the_schema_matches_the_types() {
    let path = manifest_dir().join("docs/config.schema.json");
    let want = eks_nodeinit::config::json_schema();
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    assert!(
        std::fs::read_to_string(&path).unwrap() == want,
        "docs/config.schema.json is stale: regenerate with `UPDATE_GOLDEN=1 cargo test --test it examples::`"
    );
}

#[test]
fn the_schema_refuses_what_the_parser_refuses() {
    // An unknown field and an unknown enum value: refused by the schema, as by the parser.
    let e =
        schema_errors(r#"{"cluster":{"name":"c"},"nodeGroup":{},"kubelet":{"imageGCHigh":80}}"#);
    assert!(e.iter().any(|m| m.contains("'imageGCHigh'")), "{e:?}");
    let e = schema_errors(r#"{"cluster":{"name":"c"},"nodeGroup":{"role":"boss"}}"#);
    assert!(e.iter().any(|m| m.contains("'boss'")), "{e:?}");
    // The name-only config: nodeGroup may be left out.
    assert_eq!(
        schema_errors(r#"{"cluster":{"name":"c"}}"#),
        Vec::<String>::new()
    );
    let e = schema_errors(r#"{"nodeGroup":{}}"#);
    assert!(
        e.iter()
            .any(|m| m.contains("'cluster' is a required property")),
        "{e:?}"
    );
}

#[test]
fn the_proxied_user_data_of_each_family_plans_the_proxy_for_its_units() {
    use eks_nodeinit::instance::userdata::{agent_config, Where};
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("md.json");
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(example("metadata.json")).unwrap()).unwrap();
    m["vpcCidrBlocks"] = serde_json::json!(["10.0.0.0/16"]);
    std::fs::write(&md, m.to_string()).unwrap();
    for (f, at, root, units) in [
        (
            "cloud-init/al2023-proxied.mime",
            Where::Part(1),
            "al2023-root",
            &["containerd", "kubelet", "nodeadm-config", "nodeadm-run"][..],
        ),
        (
            "cloud-init/al2-proxied.json",
            Where::Whole,
            "al2-root",
            &["containerd", "kubelet", "sandbox-image"][..],
        ),
    ] {
        let text = std::fs::read_to_string(example(f)).unwrap();
        let found = agent_config(text.as_bytes()).unwrap().unwrap();
        assert_eq!(found.at, at, "{f}");
        validate(&found.text, f);
        let cfg = dir.path().join("c.json");
        std::fs::write(&cfg, &found.text).unwrap();
        let out = init_with(
            &example(root),
            &cfg,
            &md,
            &["--dry-run", "--output", "json"],
        );
        assert!(out.status.success(), "{f}: {}", stderr(&out));
        let plan: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        let dropins: Vec<String> = plan["steps"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|s| s["path"].as_str())
            .filter(|p| p.ends_with("60-eks-nodeinit-proxy.conf"))
            .map(String::from)
            .collect();
        let want: Vec<String> = units
            .iter()
            .map(|u| format!("/etc/systemd/system/{u}.service.d/60-eks-nodeinit-proxy.conf"))
            .collect();
        assert_eq!(dropins, want, "{f}");
        assert!(step_kinds(&plan).iter().any(|k| k == "unit:reload"), "{f}");
        assert_eq!(
            plan["warnings"].as_array().map(Vec::len),
            Some(0),
            "{f}: {}",
            plan["warnings"]
        );
    }
}
