//! `--config imds://user-data`: the agent's config in the instance's user data (its own MIME part,
//! or the whole user data as the JSON config), read once through the strict IMDSv2 server or
//! from a `--metadata` file; several `--config` sources; exit 4 when none holds a config.

use crate::common;

use common::imds_server::ImdsServer;
use common::{cmd, run, sample_root, snapshot, stderr, stdout};
use eks_nodeinit::instance::userdata::AGENT_MEDIA_TYPE;
use eks_nodeinit::plan::handoff::al2023::{CONFIG_UNIT_DROPINS, DROPIN};
use serde_json::{json, Value};

/// The scaler example without tagging (no EC2 here), as JSON text.
fn agent_config(edit: impl FnOnce(&mut Value)) -> String {
    let text = std::fs::read_to_string(common::example("scaler.json")).unwrap();
    let mut v: Value = serde_json::from_str(&text).unwrap();
    v["tagging"] = json!({"enabled": false});
    edit(&mut v);
    serde_json::to_string_pretty(&v).unwrap()
}

fn multipart(parts: &[(&str, &str)]) -> String {
    let mut s =
        String::from("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n");
    for (ct, body) in parts {
        s.push_str(&format!("--B\nContent-Type: {ct}\n\n{body}\n"));
    }
    s + "--B--\n"
}

/// The package's nodeadm-config.service drop-in, as the DEB or RPM installs it.
fn install_config_unit_dropin(root: &std::path::Path) {
    let to = root.join(CONFIG_UNIT_DROPINS[0].trim_start_matches('/'));
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(
        common::manifest_dir().join("systemd/nodeadm-config.service.d/50-eks-nodeinit.conf"),
        to,
    )
    .unwrap();
}

fn init_via_imds(s: &ImdsServer, root: &std::path::Path, extra: &[&str]) -> std::process::Output {
    run(cmd()
        .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", s.url())
        .arg("init")
        .args(extra)
        .args(["--config", "imds://user-data", "--root"])
        .arg(root))
}

fn user_data_gets(s: &ImdsServer) -> usize {
    let st = s.state.lock().unwrap();
    st.paths
        .iter()
        .filter(|p| *p == "GET /latest/user-data")
        .count()
}

#[test]
fn al2023_config_in_its_own_mime_part_read_once_and_a_rerun_plans_nothing() {
    let root = sample_root("al2023-root");
    let r = root.path();
    install_config_unit_dropin(r);
    let s = ImdsServer::start();
    // The user data holds the agent's part and no NodeConfig: nodeadm's chain passes over it
    // and the drop-in carries the whole cluster block.
    s.state.lock().unwrap().user_data = Some(
        multipart(&[(AGENT_MEDIA_TYPE, &agent_config(|_| {}))])
            .as_bytes()
            .to_vec(),
    );
    let out = init_via_imds(&s, r, &[]);
    assert!(out.status.success());
    let o = stdout(&out);
    assert!(!o.contains("holds no NodeConfig"), "nothing to warn: {o}");
    assert!(
        o.contains("nodeadm-config.service (with the package's drop-in)"),
        "{o}"
    );
    let nc: Value =
        serde_json::from_str(&std::fs::read_to_string(r.join(&DROPIN[1..])).unwrap()).unwrap();
    let cluster = &nc["spec"]["cluster"];
    assert_eq!(cluster["name"], "prod-eu");
    assert_eq!(cluster["cidr"], "172.20.0.0/16");
    for field in ["apiServerEndpoint", "certificateAuthority"] {
        assert!(cluster[field].is_string(), "{nc:#}");
    }
    // The user data read once: for the config and for nodeadm's view of it; one token for the
    // run's reads, and one for the preflight's (the role's credentials, read on their own).
    assert_eq!(user_data_gets(&s), 1);
    assert_eq!(s.state.lock().unwrap().puts, 2);
    let ca = cluster["certificateAuthority"]
        .as_str()
        .unwrap()
        .to_string();
    common::assert_unprinted(&out, r, &[&ca]);

    let again = init_via_imds(&s, r, &["--dry-run", "--output", "json"]);
    assert!(again.status.success());
    let plan: Value = serde_json::from_str(&stdout(&again)).unwrap();
    assert_eq!(plan["changes"], 0, "{plan:#}");
}

#[test]
fn al2_config_as_the_whole_json_user_data_from_a_metadata_file() {
    let root = sample_root("al2-root");
    let r = root.path();
    let argv = common::recording_bootstrap(r);
    let mut md: Value =
        serde_json::from_str(&std::fs::read_to_string(common::example("metadata.json")).unwrap())
            .unwrap();
    md["userData"] = json!(agent_config(
        |v| v["nodeGroup"] = json!({"name": "master", "role": "master"})
    ));
    let md_path = r.join("md.json");
    std::fs::write(&md_path, md.to_string()).unwrap();
    let out = run(cmd()
        .args(["init", "--metadata"])
        .arg(&md_path)
        .args(["--config", "imds://user-data", "--root"])
        .arg(r));
    assert!(out.status.success());
    let args = std::fs::read_to_string(argv).unwrap();
    assert!(args.lines().any(|l| l == "prod-eu"), "{args}");
    assert!(args.contains("node.kubernetes.io/role=master"), "{args}");
}

#[test]
fn no_source_holding_a_config_exits_4_having_done_nothing() {
    let root = sample_root("al2023-root");
    let r = root.path();
    let s = ImdsServer::start();
    s.state.lock().unwrap().user_data =
        Some(b"#!/bin/bash\n# token=user-data-secret-7f3a\n".to_vec());
    let before = snapshot(r);
    let missing = r.join("etc/eks-nodeinit/config.json");
    let out = run(cmd()
        .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", s.url())
        .args(["init", "--config", "imds://user-data", "--config"])
        .arg(&missing)
        .arg("--root")
        .arg(r));
    assert_eq!(out.status.code(), Some(4));
    let e = stderr(&out);
    assert!(e.contains("no config"), "{e}");
    assert!(e.contains(AGENT_MEDIA_TYPE), "{e}");
    assert!(
        e.contains(&format!("{} does not exist", missing.display())),
        "{e}"
    );
    assert!(
        !e.contains("user-data-secret-7f3a"),
        "never echoes the user data: {e}"
    );
    assert_eq!(snapshot(r), before, "nothing changed, no report");
    assert_eq!(user_data_gets(&s), 1);

    // An instance without user data, the same.
    s.state.lock().unwrap().user_data = None;
    let out = init_via_imds(&s, r, &[]);
    assert_eq!(out.status.code(), Some(4));
    assert!(stderr(&out).contains("the instance has no user data"));

    // A single missing file is an unreadable config file (exit 5), not "no config".
    let out = run(cmd().args(["init", "--dry-run", "--config"]).arg(&missing));
    assert_eq!(out.status.code(), Some(5));
}

#[test]
fn later_sources_are_tried_when_earlier_ones_hold_none() {
    let root = sample_root("al2023-root");
    let r = root.path();
    let s = ImdsServer::start();
    s.state.lock().unwrap().user_data = Some(b"#cloud-config\n{}\n".to_vec());
    let file = r.join("baked.json");
    std::fs::write(&file, agent_config(|_| {})).unwrap();
    let out = run(cmd()
        .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", s.url())
        .args([
            "init",
            "--dry-run",
            "--config",
            "imds://user-data",
            "--config",
        ])
        .arg(&file)
        .arg("--root")
        .arg(r));
    assert!(out.status.success());
    assert!(stdout(&out).contains("eks-nodeinit plan for"));
    assert_eq!(user_data_gets(&s), 1, "the user data read once");
}

#[test]
fn a_bad_config_in_the_user_data_names_where_it_is() {
    let root = sample_root("al2023-root");
    let r = root.path();
    let s = ImdsServer::start();
    let bad = agent_config(|v| v["nodeGroup"] = json!({"rol": "x"}));
    s.state.lock().unwrap().user_data = Some(
        multipart(&[
            ("text/x-shellscript", "#!/bin/sh"),
            (AGENT_MEDIA_TYPE, &bad),
        ])
        .into_bytes(),
    );
    let out = init_via_imds(&s, r, &["--dry-run"]);
    assert_eq!(out.status.code(), Some(3));
    let e = stderr(&out);
    assert!(
        e.contains("config imds://user-data (MIME part 2 of the user data): field `nodeGroup.rol`"),
        "{e}"
    );
    // A part whose type names the agent but is not its type is an error, not "no config".
    s.state.lock().unwrap().user_data =
        Some(multipart(&[("application/vnd.eks-nodeinit+yaml", "cluster: {}")]).into_bytes());
    let out = init_via_imds(&s, r, &["--dry-run"]);
    assert_eq!(out.status.code(), Some(1));
    let e = stderr(&out);
    assert!(
        e.contains("MIME part 1") && e.contains(AGENT_MEDIA_TYPE),
        "{e}"
    );
    // validate reads files only, and says how to check the user data's config.
    let out = run(cmd().args(["validate", "--config", "imds://user-data"]));
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("init --dry-run --config imds://user-data"));
}

#[test]
fn al2023_user_data_without_a_nodeconfig_needs_the_complete_cluster_and_the_config_unit_dropin() {
    let script = b"#!/bin/bash\neks-nodeinit init\n".to_vec();
    let dry_run = |r: &std::path::Path, cfg: &str| {
        let mut md: Value = serde_json::from_str(
            &std::fs::read_to_string(common::example("metadata.json")).unwrap(),
        )
        .unwrap();
        md["userData"] = json!(String::from_utf8(script.clone()).unwrap());
        let md_path = r.join("md.json");
        std::fs::write(&md_path, md.to_string()).unwrap();
        let cfg_path = r.join("c.json");
        std::fs::write(&cfg_path, cfg).unwrap();
        let out = common::init_with(r, &cfg_path, &md_path, &["--dry-run"]);
        assert!(out.status.success());
        stdout(&out)
    };
    let root = sample_root("al2023-root");
    let r = root.path();
    // Without the package's drop-in, nodeadm-config.service reads only the user data.
    let o = dry_run(r, &agent_config(|_| {}));
    assert!(
        o.contains("nodeadm-config.service reads only the user data"),
        "{o}"
    );
    assert!(!o.contains("the drop-in has no cluster"), "{o}");
    install_config_unit_dropin(r);
    let o = dry_run(r, &agent_config(|_| {}));
    assert!(!o.contains("holds no NodeConfig"), "{o}");
    // Without the CIDR (and no discovery), nodeadm's validation would fail on the drop-in.
    let o = dry_run(
        r,
        &agent_config(|v| {
            v["cluster"].as_object_mut().unwrap().remove("cidr");
        }),
    );
    assert!(o.contains("the drop-in has no cluster cidr"), "{o}");
}
