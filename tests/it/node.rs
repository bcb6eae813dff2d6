//! The agent against sample node roots: dry-run, apply, a second run, operator values,
//! malformed input, the lock, and both hand-offs.

use crate::common;

use common::*;
use serde_json::Value;

pub(super) fn no_tagging(v: &mut Value) {
    v["tagging"] = serde_json::json!({"enabled": false});
}

#[test]
fn dry_run_changes_nothing() {
    let root = sample_root("al2-root");
    let before = snapshot(root.path());
    let out = init(root.path(), &example("scaler.json"), &["--dry-run"]);
    assert!(out.status.success());
    assert!(stdout(&out).contains("sysctl fs.inotify.max_user_watches: 8192 -> 524288"));
    assert_eq!(
        before,
        snapshot(root.path()),
        "a dry run must not change a byte"
    );
}

#[test]
fn apply_al2_then_second_run_plans_nothing() {
    let root = sample_root("al2-root");
    let argv_file = recording_bootstrap(root.path());
    let cfg = config_with(root.path(), "c.json", no_tagging);
    let original_kubelet = std::fs::read_to_string(
        root.path()
            .join("etc/kubernetes/kubelet/kubelet-config.json"),
    )
    .unwrap();

    let out = init(root.path(), &cfg, &[]);
    assert!(out.status.success());
    let r = root.path();

    applied_sysctls(r);
    let k = patched_kubelet_config(r, &original_kubelet);
    applied_logind_drop_in(r);
    let ca = report_without_the_ca(r, &cfg, &out);
    bootstrap_sh_argv(&argv_file, &ca, &k);
    containerd_config_from_the_template(r);
    nothing_planned_again(r, &cfg);
}

/// The file bootstrap.sh is given: the node's template, every line kept, the pull settings in
/// its CRI table.
fn containerd_config_from_the_template(r: &std::path::Path) {
    let template =
        std::fs::read_to_string(r.join("etc/eks/containerd/containerd-config.toml")).unwrap();
    let given = std::fs::read_to_string(r.join("etc/eks-nodeinit/containerd-config.toml")).unwrap();
    let added: Vec<&str> = given
        .lines()
        .filter(|l| !template.lines().any(|t| t == *l))
        .collect();
    assert_eq!(
        added,
        [
            "max_concurrent_downloads = 8",
            "image_pull_progress_timeout = \"2m\""
        ]
    );
    assert!(
        template.lines().all(|l| given.lines().any(|g| g == l)),
        "{given}"
    );
}

/// The live sysctls, and the persisted ones: one file, rewritten whole.
fn applied_sysctls(r: &std::path::Path) {
    assert_eq!(
        std::fs::read_to_string(r.join("proc/sys/fs/inotify/max_user_watches")).unwrap(),
        "524288\n"
    );
    assert_eq!(
        std::fs::read_to_string(r.join("proc/sys/vm/max_map_count")).unwrap(),
        "262144\n"
    );
    // persisted, one file, rewritten whole
    let persisted =
        std::fs::read_to_string(r.join("etc/sysctl.d/99-zz-eks-nodeinit.conf")).unwrap();
    let lines: Vec<&str> = persisted.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(
        lines,
        [
            "fs.inotify.max_user_instances = 8192",
            "fs.inotify.max_user_watches = 524288",
            "vm.max_map_count = 262144"
        ]
    );
}

/// The kubelet config: keys added, everything else kept, a one-time backup.
fn patched_kubelet_config(r: &std::path::Path, original_kubelet: &str) -> Value {
    let k: Value = serde_json::from_str(
        &std::fs::read_to_string(r.join("etc/kubernetes/kubelet/kubelet-config.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(k["imageGCHighThresholdPercent"], 80);
    assert_eq!(k["imageGCLowThresholdPercent"], 60);
    assert_eq!(k["shutdownGracePeriod"], "90s");
    assert_eq!(k["shutdownGracePeriodCriticalPods"], "30s");
    assert_eq!(k["protectKernelDefaults"], true);
    assert_eq!(k["tlsCipherSuites"].as_array().unwrap().len(), 8);
    assert_eq!(
        std::fs::read_to_string(r.join("etc/kubernetes/kubelet/kubelet-config.json.orig")).unwrap(),
        original_kubelet
    );
    k
}

/// The logind drop-in.
fn applied_logind_drop_in(r: &std::path::Path) {
    assert_eq!(
        std::fs::read_to_string(r.join("etc/systemd/logind.conf.d/99-zz-eks-nodeinit.conf"))
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>(),
        ["[Login]", "InhibitDelayMaxSec=90"]
    );
}

/// The report: the instance, the family, the steps a test root skips, and never the cluster's
/// CA (nor on the agent's output). Returns the CA.
fn report_without_the_ca(
    r: &std::path::Path,
    cfg: &std::path::Path,
    out: &std::process::Output,
) -> String {
    let rep = report(r);
    assert_eq!(rep["instanceId"], "i-0a1b2c3d4e5f67890");
    assert_eq!(rep["family"], "al2");
    let outcomes: Vec<String> = rep["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["outcome"].as_str().unwrap().to_string())
        .collect();
    assert!(
        outcomes.iter().any(|o| o.starts_with("skipped: --root is")),
        "{outcomes:?}"
    );
    let report_text = std::fs::read_to_string(r.join("var/lib/eks-nodeinit/report.json")).unwrap();
    let ca = serde_json::from_str::<Value>(&std::fs::read_to_string(cfg).unwrap()).unwrap()
        ["cluster"]["certificateAuthority"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        !report_text.contains(&ca),
        "the CA must never land in the report"
    );
    assert!(
        !stdout(out).contains(&ca) && !stderr(out).contains(&ca),
        "the CA must never be printed"
    );

    ca
}

/// The hand-off: bootstrap.sh got exactly these words, and its own keys were left to it.
fn bootstrap_sh_argv(argv_file: &std::path::Path, ca: &str, k: &Value) {
    let argv = std::fs::read_to_string(argv_file).unwrap();
    let words: Vec<&str> = argv.lines().collect();
    assert_eq!(words, [
        "prod-eu",
        "--b64-cluster-ca", ca,
        "--apiserver-endpoint", "https://0123456789ABCDEF0123456789ABCDEF.gr7.eu-west-1.eks.amazonaws.com",
        "--service-ipv4-cidr", "172.20.0.0/16",
        "--container-runtime", "containerd",
        // kubelet.maxPods (secondary IPs on the 2-vCPU m6i.large): bootstrap.sh keeps its
        // own max pods out, and the kubelet gets both numbers as flags, which bootstrap.sh's
        // rewrite of kubelet-config.json cannot undo.
        "--use-max-pods", "false",
        // images.pull: the node's containerd template with the pull settings.
        "--containerd-config-file", "/etc/eks-nodeinit/containerd-config.toml",
        "--kubelet-extra-args", "--node-labels=example.com/team=platform,node.kubernetes.io/lifecycle=spot,node.kubernetes.io/role=scaler --max-pods=29 --kube-reserved=cpu=70m,ephemeral-storage=1Gi,memory=574Mi",
    ]);
    assert!(
        k.get("maxPods").is_none() && k.get("kubeReserved").is_none(),
        "bootstrap.sh's keys are left to it"
    );
}

/// A second run in the same boot plans nothing, not even the hand-off (bootstrap.sh ran once);
/// after a reboot only the hand-off and the proof's per-boot job.
fn nothing_planned_again(r: &std::path::Path, cfg: &std::path::Path) {
    // second run in the same boot: nothing, not even the hand-off (bootstrap.sh ran once)
    let out = init(r, cfg, &["--dry-run", "--output", "json"]);
    assert!(out.status.success());
    let plan: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(plan["changes"], 0, "{plan:#}");
    assert!(common::step_kinds(&plan).is_empty(), "{plan:#}");
    assert!(
        plan["warnings"][0]
            .as_str()
            .unwrap()
            .contains("bootstrap.sh was already exec'd in this boot"),
        "{plan:#}"
    );
    // after a reboot (/run is empty again) the hand-off is planned again, and with it only the
    // per-boot jobs (the proof's, the steps after the hand-off) and the start of the unit that
    // runs them: no change to the node's configuration
    std::fs::remove_dir_all(r.join("run/eks-nodeinit")).unwrap();
    let out = init(r, cfg, &["--dry-run", "--output", "json"]);
    let plan: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(plan["changes"], 0, "{plan:#}");
    assert_eq!(
        common::step_kinds(&plan),
        [
            "file",
            "file",
            "unit:eks-nodeinit-launch-hook.service",
            "handoff:exec"
        ],
        "{plan:#}"
    );
    let paths: Vec<&Value> = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == "file")
        .map(|s| &s["path"])
        .collect();
    assert_eq!(
        paths,
        [
            "/run/eks-nodeinit/join.json",
            "/run/eks-nodeinit/after-handoff.json"
        ],
        "{plan:#}"
    );
}

#[test]
fn one_hand_off_while_bootstrap_sh_runs_and_none_after_it() {
    // Found under load: the lock was closed on exec, so a second run started while
    // bootstrap.sh ran went all the way through and exec'd a second bootstrap.sh.
    let root = sample_root("al2-root");
    let r = root.path();
    install_bootstrap(
        r,
        &bootstrap_standin(
            BOOTSTRAP_OPTIONS,
            "echo run >> \"$(dirname \"$0\")/runs.txt\"\nsleep 2\n",
        ),
    );
    let cfg = config_with(r, "c.json", no_tagging);
    let first = cmd()
        .args(["init", "--metadata"])
        .arg(example("metadata.json"))
        .arg("--config")
        .arg(&cfg)
        .arg("--root")
        .arg(r)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until bootstrap.sh runs (it holds the inherited lock), then try a second run.
    let runs = r.join("etc/eks/runs.txt");
    let t = std::time::Instant::now();
    while !runs.exists() && t.elapsed() < std::time::Duration::from_secs(20) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(runs.exists(), "bootstrap.sh never ran");
    let second = init(r, &cfg, &[]);
    assert_eq!(second.status.code(), Some(1), "{}", stderr(&second));
    assert!(
        stderr(&second).contains("another eks-nodeinit run holds"),
        "{}",
        stderr(&second)
    );
    let mut first = first;
    assert!(first.wait().unwrap().success());
    // After it: the marker says the hand-off happened; a third run does not exec again.
    let third = init(r, &cfg, &[]);
    assert!(third.status.success(), "{}", stderr(&third));
    assert_eq!(std::fs::read_to_string(&runs).unwrap(), "run\n");
}

#[test]
fn operator_set_kubelet_values_are_kept() {
    let root = sample_root("al2-root");
    recording_bootstrap(root.path());
    let kpath = root
        .path()
        .join("etc/kubernetes/kubelet/kubelet-config.json");
    let mut k: Value = serde_json::from_str(&std::fs::read_to_string(&kpath).unwrap()).unwrap();
    k["shutdownGracePeriod"] = "2m".into();
    k["imageGCHighThresholdPercent"] = 90.into();
    std::fs::write(&kpath, serde_json::to_string_pretty(&k).unwrap()).unwrap();
    let cfg = config_with(root.path(), "c.json", no_tagging);
    let out = init(root.path(), &cfg, &[]);
    assert!(out.status.success());
    let k: Value = serde_json::from_str(&std::fs::read_to_string(&kpath).unwrap()).unwrap();
    assert_eq!(k["shutdownGracePeriod"], "2m");
    assert_eq!(k["imageGCHighThresholdPercent"], 90);
    assert_eq!(k["imageGCLowThresholdPercent"], 60);
    assert!(stdout(&out).contains("keeps the operator's shutdownGracePeriod = \"2m\""));

    // with overwrite on, the config's values win
    let cfg = config_with(root.path(), "c2.json", |v| {
        no_tagging(v);
        v["kubelet"]["overwrite"] = true.into();
    });
    let out = init(root.path(), &cfg, &[]);
    assert!(out.status.success());
    let k: Value = serde_json::from_str(&std::fs::read_to_string(&kpath).unwrap()).unwrap();
    assert_eq!(k["shutdownGracePeriod"], "90s");
    assert_eq!(k["imageGCHighThresholdPercent"], 80);
}

#[test]
fn malformed_kubelet_json_changes_nothing() {
    let root = sample_root("al2-root");
    let argv_file = recording_bootstrap(root.path());
    let kpath = root
        .path()
        .join("etc/kubernetes/kubelet/kubelet-config.json");
    let text = std::fs::read_to_string(&kpath)
        .unwrap()
        .replace("\"readOnlyPort\": 0,", "\"readOnlyPort\": 0,,");
    std::fs::write(&kpath, text).unwrap();
    let cfg = config_with(root.path(), "c.json", no_tagging);
    let before = snapshot(root.path());
    let out = init(root.path(), &cfg, &[]);
    assert_eq!(out.status.code(), Some(3));
    let err = stderr(&out);
    assert!(
        err.contains("kubelet-config.json is not valid JSON: line 26"),
        "{err}"
    );
    assert_eq!(
        before,
        snapshot(root.path()),
        "every file must stay byte-identical"
    );
    assert!(!argv_file.exists(), "no hand-off after a failed validation");
}

#[test]
fn invalid_config_reports_every_problem_and_changes_nothing() {
    let root = sample_root("al2-root");
    let cfg = config_with(root.path(), "c.json", |v| {
        v["labels"]["kubernetes.io/role"] = "master".into();
        v["taints"] = serde_json::json!(["dedicated=infra:NoSchedul"]);
        v["sysctls"]["../../etc/passwd"] = "x".into();
        v["sysctls"]["vm.overcommit_memory"] = 0.into();
        v["kubelet"]["imageGCLowThresholdPercent"] = 90.into();
        v["handoff"] = serde_json::json!({"extraBootstrapArgs": ["--use-max-pods=false"]});
    });
    let before = snapshot(root.path());
    let out = init(root.path(), &cfg, &[]);
    assert_eq!(out.status.code(), Some(3));
    let err = stderr(&out);
    for needle in [
        "labels[\"kubernetes.io/role\"]: kubelet refuses to start",
        "use `node.kubernetes.io/role=master` instead",
        "taints[0]: effect `NoSchedul` is not one of",
        "sysctls[\"../../etc/passwd\"]: `../../etc/passwd` holds `/`",
        "sysctls[\"vm.overcommit_memory\"]: 0 contradicts kubelet's protectKernelDefaults",
        "kubelet.imageGCLowThresholdPercent: low (90) must be below high (80)",
        "handoff.extraBootstrapArgs[0]: `--use-max-pods=false`: bootstrap.sh takes `--flag value` only",
        "6 problems",
    ] {
        assert!(err.contains(needle), "missing `{needle}` in:\n{err}");
    }
    assert_eq!(before, snapshot(root.path()));
}

#[test]
fn al2023_writes_nodeconfig_and_leaves_kubelet_config_alone() {
    let root = sample_root("al2023-root");
    let cfg = config_with(root.path(), "c.json", |v| {
        no_tagging(v);
        v["nodeGroup"]["role"] = "master".into();
    });
    let out = init(root.path(), &cfg, &[]);
    assert!(out.status.success());
    let nc: Value = serde_json::from_str(
        &std::fs::read_to_string(root.path().join("etc/eks/nodeadm.d/10-eks-nodeinit.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(nc["apiVersion"], "node.eks.aws/v1alpha1");
    assert_eq!(nc["kind"], "NodeConfig");
    assert_eq!(nc["spec"]["cluster"]["name"], "prod-eu");
    assert_eq!(nc["spec"]["cluster"]["cidr"], "172.20.0.0/16");
    assert_eq!(
        nc["spec"]["kubelet"]["config"]["shutdownGracePeriod"],
        "90s"
    );
    assert_eq!(
        nc["spec"]["kubelet"]["config"]["imageGCLowThresholdPercent"],
        60
    );
    assert_eq!(nc["spec"]["kubelet"]["flags"], serde_json::json!([
        "--node-labels=example.com/team=platform,node.kubernetes.io/lifecycle=spot,node.kubernetes.io/role=master",
        "--register-with-taints=CriticalAddonsOnly=true:NoSchedule"
    ]));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(root.path().join("etc/eks/nodeadm.d/10-eks-nodeinit.json"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600, "the drop-in carries the cluster CA");
    assert!(
        !root.path().join("etc/kubernetes").exists(),
        "nodeadm owns the kubelet config on AL2023"
    );
    assert!(stdout(&out).contains(
        "Amazon Linux 2023, hand-off to nodeadm (auto: found nodeadm at /usr/bin/nodeadm)"
    ));
}

#[test]
fn config_from_stdin() {
    let root = sample_root("al2023-root");
    let text = std::fs::read_to_string(example("scaler.json")).unwrap();
    let out = run_with_stdin(
        cmd()
            .args(["init", "--dry-run", "--config", "-", "--metadata"])
            .arg(example("metadata.json"))
            .arg("--root")
            .arg(root.path()),
        &text,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("create /etc/eks/nodeadm.d/10-eks-nodeinit.json"));
}

#[test]
fn a_second_run_at_once_is_refused() {
    let root = sample_root("al2023-root");
    let cfg = config_with(root.path(), "c.json", no_tagging);
    std::fs::create_dir_all(root.path().join("run/lock")).unwrap();
    let f = std::fs::File::create(root.path().join("run/lock/eks-nodeinit.lock")).unwrap();
    let held = nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock).unwrap();
    let out = init(root.path(), &cfg, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("another eks-nodeinit run holds"));
    assert!(!root.path().join("etc/eks/nodeadm.d").exists());
    drop(held);
}

#[test]
fn validate_command_exit_codes() {
    let out = run(cmd()
        .args(["validate", "--config"])
        .arg(example("master.json")));
    assert_eq!(out.status.code(), Some(0));
    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("bad.json");
    std::fs::write(&bad, "{\n  \"cluster\": {\"name\": \"c\"},\n  \"nodeGroup\": {},\n  \"labels\": {\"node-role.kubernetes.io/worker\": \"\"}\n}").unwrap();
    let out = run(cmd().args(["validate", "--config"]).arg(&bad));
    assert_eq!(out.status.code(), Some(3));
    assert!(stderr(&out).contains("use `node.kubernetes.io/role=worker` instead"));
    std::fs::write(
        &bad,
        "{\n  \"cluster\": {\"name\": \"c\"},\n  \"nodeGroup\": {\"rol\": \"x\"}\n}",
    )
    .unwrap();
    let out = run(cmd().args(["validate", "--config"]).arg(&bad));
    assert_eq!(out.status.code(), Some(3));
    assert!(
        stderr(&out).contains("field `nodeGroup.rol`: unknown field `rol`"),
        "{}",
        stderr(&out)
    );
    // serde's message quotes the value: its carriage return is shown escaped, never raw.
    std::fs::write(
        &bad,
        r#"{"cluster": {"name": "c"}, "handoff": {"mode": "x\r"}}"#,
    )
    .unwrap();
    let out = run(cmd().args(["validate", "--config"]).arg(&bad));
    assert_eq!(out.status.code(), Some(3));
    let err = stderr(&out);
    assert!(!err.contains('\r'), "{err:?}");
    assert!(err.contains(r#"unknown variant `x\r`"#), "{err}");
    // The name-only config: the cluster's name and nothing else (nodeGroup has defaults).
    std::fs::write(&bad, r#"{"cluster": {"name": "c"}}"#).unwrap();
    let out = run(cmd().args(["validate", "--config"]).arg(&bad));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn a_missing_config_file_has_its_own_exit_status_and_says_its_cause_once() {
    for command in ["validate", "init"] {
        let out = run(cmd().args([command, "--config", "/nonexistent.json"]));
        assert_eq!(out.status.code(), Some(5), "{command}: {}", stderr(&out));
        let err = stderr(&out);
        assert_eq!(
            err.matches("No such file or directory").count(),
            1,
            "{command}: {err}"
        );
        assert!(
            err.contains("cannot read config /nonexistent.json"),
            "{err}"
        );
    }
}

/// A fake CA and a marker that live only in the user data: neither may ever be printed.
const UD_CA: &str = "RkFLRS1VU0VSLURBVEEtQ0EtZm9yLXRlc3RzLW9ubHkK";
const UD_MARKER: &str = "user-data-secret-7f3a";

/// A metadata file like examples/metadata.json whose `userData` is MIME user data: a NodeConfig
/// part registering `taints` (with the cluster CA), then a script part.
fn metadata_with_user_data(dir: &std::path::Path, taints: &str) -> std::path::PathBuf {
    let ud = format!(
        "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"//\"\r\n\r\n--//\r\nContent-Type: application/node.eks.aws\r\n\r\n---\r\napiVersion: node.eks.aws/v1alpha1\r\nkind: NodeConfig\r\nspec:\r\n  cluster:\r\n    name: prod-eu\r\n    certificateAuthority: {UD_CA}\r\n  kubelet:\r\n    flags:\r\n      - --register-with-taints={taints}\r\n\r\n--//\r\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\r\n\r\n#!/bin/bash\r\n# token={UD_MARKER}\r\neks-nodeinit init\r\n--//--\r\n"
    );
    let text = std::fs::read_to_string(example("metadata.json")).unwrap();
    let mut v: Value = serde_json::from_str(&text).unwrap();
    v["userData"] = ud.into();
    let p = dir.join("metadata.json");
    std::fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    p
}

fn assert_user_data_unprinted(out: &std::process::Output, root: &std::path::Path) {
    assert_unprinted(out, root, &[UD_CA, UD_MARKER]);
}

#[test]
fn al2023_user_data_taints_survive_the_agents_register_with_taints() {
    // Issue 11 item 7: kubelet keeps only the last --register-with-taints and nodeadm appends the
    // drop-in's flags after the user data's, so the drop-in's flag carries the user data's
    // taints too.
    let root = sample_root("al2023-root");
    let md = metadata_with_user_data(root.path(), "team=data:NoSchedule,gpu:NoExecute");
    let cfg = config_with(root.path(), "c.json", |v| {
        no_tagging(v);
        v["nodeGroup"]["role"] = "master".into();
    });
    let dry = init_with(root.path(), &cfg, &md, &["--dry-run"]);
    assert!(dry.status.success());
    assert!(stdout(&dry).contains("carries 2 taints of the NodeConfigs merged before it (kubelet.flags[0] of the NodeConfig in MIME part 1 of the user data)"));
    assert_user_data_unprinted(&dry, root.path());
    let out = init_with(root.path(), &cfg, &md, &[]);
    assert!(out.status.success());
    let nc: Value = serde_json::from_str(
        &std::fs::read_to_string(root.path().join("etc/eks/nodeadm.d/10-eks-nodeinit.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        nc["spec"]["kubelet"]["flags"][1],
        "--register-with-taints=team=data:NoSchedule,gpu:NoExecute,CriticalAddonsOnly=true:NoSchedule"
    );
    assert_user_data_unprinted(&out, root.path());
}

#[test]
fn al2023_conflicting_user_data_taint_changes_nothing() {
    let root = sample_root("al2023-root");
    let md = metadata_with_user_data(root.path(), "CriticalAddonsOnly=false:NoSchedule");
    let cfg = config_with(root.path(), "c.json", |v| {
        no_tagging(v);
        v["nodeGroup"]["role"] = "master".into();
    });
    let before = snapshot(root.path());
    let out = init_with(root.path(), &cfg, &md, &[]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        stderr(&out).contains("taints: taint `CriticalAddonsOnly:NoSchedule` is given different values by a NodeConfig (kubelet.flags[0] of the NodeConfig in MIME part 1 of the user data) and by the config"),
        "{}",
        stderr(&out)
    );
    assert_eq!(before, snapshot(root.path()), "nothing changed");
    assert_user_data_unprinted(&out, root.path());
}

/// The steps run in the order the plan lists them: the report's outcomes follow the dry run's
/// steps (the tag and the hand-off aside, which have no outcome of their own). Files once all
/// went first, whatever the plan said.
#[test]
fn steps_run_in_the_order_the_plan_lists_them() {
    let root = sample_root("al2023-root");
    let cfg = config_with(root.path(), "c.json", no_tagging);
    let out = init(root.path(), &cfg, &["--dry-run", "--output", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let plan: Value = serde_json::from_str(&stdout(&out)).unwrap();
    // Every step, the checks among them: each has its outcome in the report.
    let kinds: Vec<String> = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(common::step_kind)
        .collect();
    let live = kinds.iter().position(|k| k == "live");
    let file = kinds.iter().position(|k| k == "file");
    assert!(live.is_some() && file.is_some(), "{kinds:?}");
    let out = init(root.path(), &cfg, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let ran: Vec<String> = report(root.path())["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_str().unwrap().to_string())
        .collect();
    let first_sysctl = ran.iter().position(|s| s.starts_with("sysctl "));
    let first_write = ran.iter().position(|s| s.starts_with("write "));
    assert_eq!(
        first_sysctl < first_write,
        live < file,
        "ran {ran:?}, planned {kinds:?}"
    );
    let planned_local = kinds
        .iter()
        .filter(|k| k.as_str() != "tag" && !k.starts_with("handoff"))
        .count();
    assert_eq!(ran.len(), planned_local, "ran {ran:?}, planned {kinds:?}");
}

#[test]
fn the_startup_taint_reaches_both_hand_offs_after_the_configs_taints() {
    const STARTUP: &str = "readiness.k8s.io/eks-nodeinit=pending:NoSchedule";
    let edit = |v: &mut Value| {
        no_tagging(v);
        v["taints"] = serde_json::json!(["dedicated=infra:NoSchedule"]);
        v["lifecycle"] = serde_json::json!({"startupTaint": STARTUP});
    };
    let want = format!("--register-with-taints=dedicated=infra:NoSchedule,{STARTUP}");
    // AL2: bootstrap.sh's --kubelet-extra-args.
    let root = sample_root("al2-root");
    let argv = recording_bootstrap(root.path());
    let cfg = config_with(root.path(), "c.json", edit);
    let out = init(root.path(), &cfg, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let argv = std::fs::read_to_string(argv).unwrap();
    let words: Vec<&str> = argv.lines().collect();
    let extra = words
        .windows(2)
        .find(|w| w[0] == "--kubelet-extra-args")
        .map(|w| w[1])
        .unwrap_or_else(|| panic!("{argv}"));
    assert!(extra.split(' ').any(|f| f == want), "{extra}");
    // AL2023: the NodeConfig drop-in's one flag.
    let root = sample_root("al2023-root");
    let cfg = config_with(root.path(), "c.json", edit);
    let out = init(root.path(), &cfg, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let dropin = root.path().join("etc/eks/nodeadm.d/10-eks-nodeinit.json");
    let nc: Value = serde_json::from_slice(&std::fs::read(dropin).unwrap()).unwrap();
    let flags = nc["spec"]["kubelet"]["flags"].as_array().unwrap();
    assert!(flags.iter().any(|f| *f == want.as_str()), "{flags:?}");
}
