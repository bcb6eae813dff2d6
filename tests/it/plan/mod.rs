//! The plan, in process: pure over (spec, facts), so each aspect is checked against facts built
//! in memory — no-op, change, operator value kept, conflict — without the binary or a disk.

use std::collections::BTreeMap;
use std::path::PathBuf;

use eks_nodeinit::base::findings::Invalid;
use eks_nodeinit::config::parse;
use eks_nodeinit::discovery::ClusterFact;
use eks_nodeinit::facts::{Facts, Family, FamilyError, FileFact, InstanceTags, TagState};
use eks_nodeinit::instance::metadata::Metadata;
use eks_nodeinit::instance::userdata::UserDataFact;
use eks_nodeinit::plan::aspects::{logind, sysctls};
use eks_nodeinit::plan::handoff::al2023 as nodeconfig;
use eks_nodeinit::plan::step::NodeadmHandoff;
use eks_nodeinit::plan::{self, Plan, Step};
use eks_nodeinit::spec::{self, Spec};
use serde_json::json;

use crate::common;
use common::{bootstrap_standin, BOOTSTRAP_OPTIONS};

/// The spec of this config; the hardened-AMI checks off (tests/it/hardening.rs has them), so
/// that the steps listed are the settings' under test.
fn spec(edit: impl FnOnce(&mut serde_json::Value)) -> Spec {
    let mut v = json!({"cluster": {"name": "prod"}, "nodeGroup": {"name": "g", "role": "scaler"}, "verify": {"hardening": "off"}});
    edit(&mut v);
    spec::from_config(&parse(&v.to_string(), "t.json").unwrap()).unwrap()
}

/// The user data as nodeadm would read it from these bytes.
fn user_data(text: &str) -> UserDataFact {
    UserDataFact::from_bytes(Some(text.as_bytes()))
}

/// MIME user data: a shell script part, then a NodeConfig part with these kubelet flags.
fn nodeconfig_part(flags: &[&str]) -> String {
    let flags: Vec<String> = flags.iter().map(|f| format!("      - \"{f}\"\n")).collect();
    format!(
        "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n--//\nContent-Type: text/x-shellscript\n\n#!/bin/sh\n--//\nContent-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: prod\n  kubelet:\n    flags:\n      - --v=2\n{}--//--\n",
        flags.concat()
    )
}

fn instance() -> Metadata {
    Metadata {
        instance_id: "i-1".into(),
        private_ipv4: Some("10.0.12.34".into()),
        instance_type: "m6i.large".into(),
        region: "eu-west-1".into(),
        availability_zone: "eu-west-1a".into(),
        ..Default::default()
    }
}

/// A node of `family` with every file absent, no sysctl readable, tags unknown.
fn facts(family: Family) -> Facts {
    Facts::builder(family)
        .instance(instance())
        .user_data(user_data(&nodeconfig_part(&[])))
        .build()
}

fn absent() -> FileFact {
    FileFact {
        content: Ok(None),
        mode: None,
        link: None,
    }
}

fn file(text: &str) -> FileFact {
    FileFact {
        content: Ok(Some(text.into())),
        mode: Some(0o640),
        link: None,
    }
}

/// Facts of `family` with these tags known and the files every aspect reads absent.
fn node(family: Family, tags: &[(&str, &str)]) -> Facts {
    let mut f = facts(family);
    let tags = tags.iter().map(|(k, v)| (k.to_string(), v.to_string()));
    f.tags = InstanceTags::Known(tags.collect());
    let mut files = vec![
        sysctls::PERSIST_PATH,
        logind::DROPIN_PATH,
        logind::MAIN_CONF,
        eks_nodeinit::plan::after::AFTER_JOB,
        eks_nodeinit::plan::gate::GATE_JOB,
    ];
    if family == Family::Al2023 {
        files.push(nodeconfig::DROPIN);
    }
    if family == Family::Al2 {
        files.push(eks_nodeinit::plan::aspects::containerd::pull::AL2_AMI_TEMPLATE);
    }
    let pin = eks_nodeinit::plan::aspects::containerd::pause::dropin(family);
    for p in files.into_iter().chain([pin.as_str()]) {
        f.set_file(p, absent());
    }
    f
}

/// AL2023 facts where every file the aspects read is absent and the tags are known.
fn al2023(tags: &[(&str, &str)]) -> Facts {
    let mut f = node(Family::Al2023, tags);
    f.set_exists("/usr/bin/nodeadm", true);
    f
}

fn steps(p: &Plan) -> Vec<String> {
    p.steps.iter().map(Step::describe).collect()
}

/// `f` with the cluster as the config `s` gives it (nothing looked up).
fn configured(s: &Spec, f: &Facts) -> Facts {
    let cluster = ClusterFact::from_spec(&s.cluster);
    Facts {
        cluster,
        ..f.clone()
    }
}

fn build(s: &Spec, f: &Facts) -> Result<Plan, Invalid> {
    plan::build(s, &configured(s, f))
}

fn errors(s: &Spec, f: &Facts) -> Vec<String> {
    let e = plan::findings(s, &configured(s, f));
    e.iter().map(ToString::to_string).collect()
}

const CLUSTER_TAG: (&str, &str) = ("kubernetes.io/cluster/prod", "owned");

#[test]
fn name_tag_change_noop_and_unknown() {
    let s = spec(|_| {});
    // Change: the Name differs.
    let p = build(&s, &al2023(&[CLUSTER_TAG, ("Name", "old")])).unwrap();
    assert!(
        matches!(&p.steps[0], Step::Tag { value, current: TagState::Is(c), .. } if value == "g-10x0x12x34" && c == "old")
    );
    // No-op: it already holds the value.
    let p = build(&s, &al2023(&[CLUSTER_TAG, ("Name", "g-10x0x12x34")])).unwrap();
    assert!(
        !p.steps.iter().any(|x| matches!(x, Step::Tag { .. })),
        "{:?}",
        steps(&p)
    );
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    // Unknown tags: a tag step that reads first, and no cluster-tag warning (cannot tell).
    let mut f = al2023(&[]);
    f.tags = InstanceTags::Unknown;
    let p = build(&s, &f).unwrap();
    assert!(matches!(
        &p.steps[0],
        Step::Tag {
            current: TagState::Unknown,
            ..
        }
    ));
    assert!(p.warnings.is_empty());
    // Conflict: no group name and no ASG tag.
    let s = spec(|v| v["nodeGroup"] = json!({"role": "scaler"}));
    let e = errors(&s, &al2023(&[CLUSTER_TAG]));
    assert!(
        e.iter()
            .any(|x| x.starts_with("nodeGroup.name: no node group name")),
        "{e:?}"
    );
    // Missing cluster tag: a warning, the node would not join.
    let p = build(&spec(|_| {}), &al2023(&[])).unwrap();
    assert!(
        p.warnings[0].contains("no `kubernetes.io/cluster/prod` tag"),
        "{:?}",
        p.warnings
    );
}

#[test]
fn sysctls_change_noop_unreadable_and_protected() {
    let s = spec(|v| v["sysctls"] = json!({"fs.inotify.max_user_watches": 524288}));
    let mut f = al2023(&[CLUSTER_TAG, ("Name", "g-10x0x12x34")]);
    f.set_sysctl("fs.inotify.max_user_watches", Ok("8192".into()));
    let p = build(&s, &f).unwrap();
    assert_eq!(
        steps(&p)[..2],
        [
            "sysctl fs.inotify.max_user_watches=524288",
            "write /etc/sysctl.d/99-zz-eks-nodeinit.conf"
        ]
    );
    // No-op: live and persisted already right.
    let mut wanted = BTreeMap::new();
    wanted.insert(
        "fs.inotify.max_user_watches".to_string(),
        "524288".to_string(),
    );
    f.set_sysctl("fs.inotify.max_user_watches", Ok("524288".into()));
    f.set_file(
        sysctls::PERSIST_PATH,
        file(&sysctls::persisted_content(&wanted)),
    );
    let p = build(&s, &f).unwrap();
    assert!(
        !steps(&p).iter().any(|x| x.contains("sysctl")),
        "{:?}",
        steps(&p)
    );
    // An unreadable persisted file is a finding, never "absent".
    f.set_file(
        sysctls::PERSIST_PATH,
        FileFact {
            content: Err("cannot read x: Permission denied".into()),
            mode: None,
            link: None,
        },
    );
    let e = errors(&s, &f);
    assert!(e[0].starts_with("sysctls: cannot read x"), "{e:?}");
    // Conflict: protectKernelDefaults (nodeadm's default on AL2023).
    let s = spec(|v| v["sysctls"] = json!({"vm.overcommit_memory": 0}));
    let mut f = al2023(&[CLUSTER_TAG]);
    f.set_sysctl("vm.overcommit_memory", Ok("0".into()));
    let e = errors(&s, &f);
    assert!(
        e[0].contains("contradicts kubelet's protectKernelDefaults"),
        "{e:?}"
    );
}

fn al2(kubelet_text: &str) -> Facts {
    al2_with(kubelet_text, &bootstrap_standin(BOOTSTRAP_OPTIONS, ""))
}

/// AL2 facts whose bootstrap.sh is `script` (executable).
fn al2_with(kubelet_text: &str, script: &str) -> Facts {
    let mut f = node(Family::Al2, &[CLUSTER_TAG, ("Name", "g-10x0x12x34")]);
    f.set_file("/etc/eks/bootstrap.sh", file(script));
    f.set_executable("/etc/eks/bootstrap.sh", true);
    f.set_file(
        "/etc/kubernetes/kubelet/kubelet-config.json",
        FileFact {
            content: Ok(Some(kubelet_text.into())),
            mode: Some(0o644),
            link: None,
        },
    );
    f
}

#[test]
fn kubelet_config_change_noop_kept_and_malformed() {
    let s = spec(|v| {
        v["kubelet"] = json!({"shutdownGracePeriod": "90s", "imageGCHighThresholdPercent": 90})
    });
    let p = build(&s, &al2("{\n  \"a\": 1\n}\n")).unwrap();
    let Step::File(eks_nodeinit::plan::step::File { new, backup, .. }) = &p.steps[0] else {
        panic!("{:?}", steps(&p))
    };
    assert!(new.contains("\"shutdownGracePeriod\": \"90s\""), "{new}");
    assert_eq!(
        backup.as_deref(),
        Some("/etc/kubernetes/kubelet/kubelet-config.json.orig".as_ref())
    );
    // No-op: the values are there (1m30s is 90s).
    let done = "{\"shutdownGracePeriod\": \"1m30s\", \"imageGCHighThresholdPercent\": 90}";
    let p = build(&s, &al2(done)).unwrap();
    assert!(
        !steps(&p).iter().any(|x| x.contains("kubelet-config")),
        "{:?}",
        steps(&p)
    );
    // Kept: the operator's value stays, with a warning.
    let p = build(&s, &al2("{\"shutdownGracePeriod\": \"2m\"}")).unwrap();
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("keeps the operator's shutdownGracePeriod = \"2m\"")),
        "{:?}",
        p.warnings
    );
    let Step::File(eks_nodeinit::plan::step::File { new, .. }) = &p.steps[0] else {
        panic!()
    };
    assert!(new.contains("\"2m\"") && new.contains("imageGCHighThresholdPercent"));
    // Conflict: malformed JSON names the file and line.
    let e = errors(&s, &al2("{\n  \"a\" 1\n}"));
    assert!(e[0].starts_with("kubelet.configPath: kubelet config /etc/kubernetes/kubelet/kubelet-config.json is not valid JSON: line 2"), "{e:?}");
}

#[test]
fn logind_change_noop_and_later_dropin() {
    let s = spec(|v| v["kubelet"] = json!({"shutdownGracePeriod": "90s"}));
    let p = build(&s, &al2023(&[CLUSTER_TAG, ("Name", "g-10x0x12x34")])).unwrap();
    assert_eq!(
        steps(&p)[..2],
        [
            "write /etc/systemd/logind.conf.d/99-zz-eks-nodeinit.conf",
            "restart systemd-logind"
        ]
    );
    assert!(matches!(
        &p.steps[1],
        Step::Unit(eks_nodeinit::plan::step::Unit {
            job: eks_nodeinit::plan::step::UnitJob::Restart { verify, .. },
            ..
        }) if verify.expected == eks_nodeinit::os::systemd::Expected::Number(90_000_000)
    ));
    // No-op.
    let mut f = al2023(&[CLUSTER_TAG, ("Name", "g-10x0x12x34")]);
    f.set_file(logind::DROPIN_PATH, file(&logind::dropin_content(90)));
    let p = build(&s, &f).unwrap();
    assert!(
        !steps(&p).iter().any(|x| x.contains("logind")),
        "{:?}",
        steps(&p)
    );
    // A drop-in that sorts later and sets less: a warning.
    let run = PathBuf::from("/run/systemd/logind.conf.d");
    f.set_dir(run.clone(), ".conf", vec!["zz-late.conf".into()]);
    f.set_file(
        run.join("zz-late.conf"),
        file("[Login]\nInhibitDelayMaxSec=5\n"),
    );
    let p = build(&s, &f).unwrap();
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("zz-late.conf sorts after")),
        "{:?}",
        p.warnings
    );
}

#[test]
fn handoffs_per_family_and_undetected_family() {
    let s = spec(|v| {
        v["cluster"]["certificateAuthority"] = "c2VjcmV0".into();
        v["taints"] = json!(["dedicated=infra:NoSchedule"]);
    });
    // AL2: exec with argv, the CA a secret.
    let p = build(&s, &al2("{}")).unwrap();
    let Some(Step::Handoff(eks_nodeinit::plan::step::Handoff::Exec { argv, .. })) = p.steps.last()
    else {
        panic!("{:?}", steps(&p))
    };
    assert_eq!(argv[1..4], ["prod", "--b64-cluster-ca", "c2VjcmV0"]);
    assert!(argv.iter().any(|a| a == "--node-labels=node.kubernetes.io/role=scaler --register-with-taints=dedicated=infra:NoSchedule"), "{argv:?}");
    assert_eq!(p.secrets, ["c2VjcmV0"]);
    assert!(!p.to_text().contains("c2VjcmV0"));
    // AL2023: the drop-in, then nodeadm; no-op when it is already there.
    let mut f = al2023(&[CLUSTER_TAG, ("Name", "g-10x0x12x34")]);
    let p = build(&s, &f).unwrap();
    assert_eq!(
        steps(&p),
        [
            "write /etc/systemd/system/containerd.service.d/90-eks-nodeinit-pin.conf",
            "reload systemd's units",
            "write /etc/eks/nodeadm.d/10-eks-nodeinit.json",
            "write /run/eks-nodeinit/gate.json",
            "start eks-nodeinit-gate.service",
            "nodeadm reads /etc/eks/nodeadm.d/10-eks-nodeinit.json"
        ]
    );
    // nodeadm's own check of the merge, before the kubelet: this boot's gate job.
    let gate = p.steps.iter().find_map(|s| match s {
        Step::File(f) if f.path.ends_with("gate.json") => Some(f.new.clone()),
        _ => None,
    });
    let gate = gate.unwrap();
    assert!(gate.contains("\"check\": \"nodeadm-config\""), "{gate}");
    f.set_file(eks_nodeinit::plan::gate::GATE_JOB, file(&gate));
    let text = nodeconfig::render(&eks_nodeinit::plan::handoff_intent(&s, &configured(&s, &f)));
    f.set_file(nodeconfig::DROPIN, file(&text));
    let pin = eks_nodeinit::plan::aspects::containerd::pause::dropin_text(Family::Al2023);
    f.set_file(
        eks_nodeinit::plan::aspects::containerd::pause::dropin(Family::Al2023),
        file(&pin),
    );
    let p = build(&s, &f).unwrap();
    assert_eq!(p.changes(), 0);
    // No NodeConfig in the user data, no nodeadm: warnings. Nodeadm passes over the user data,
    // so the drop-in alone must give the cluster fields (this config has no endpoint or CIDR),
    // and the config phase must read the drop-in directory (the package's unit drop-in).
    f.set_user_data(user_data("#!/bin/sh\n"));
    f.answers
        .retain(|r, _| !matches!(r, eks_nodeinit::facts::Read::Exists(_)));
    let p = build(&s, &f).unwrap();
    assert_eq!(p.warnings.len(), 3, "{:?}", p.warnings);
    assert!(
        p.warnings[0].contains("the drop-in has no cluster apiServerEndpoint, cidr"),
        "{:?}",
        p.warnings
    );
    assert!(
        p.warnings[1].contains("nodeadm-config.service reads only the user data"),
        "{:?}",
        p.warnings
    );
    assert!(
        p.warnings[2].contains("/usr/bin/nodeadm does not exist"),
        "{:?}",
        p.warnings
    );
    // A family that could not be detected is a finding with its reason, never a default.
    f.family = Err(FamilyError::Unknown {
        root: "/".into(),
        nodeadm: "/usr/bin/nodeadm".into(),
        bootstrap: "/etc/eks/bootstrap.sh".into(),
        cause: "permission denied".into(),
    });
    let e = errors(&s, &f);
    assert_eq!(e, ["handoff.mode: cannot tell Amazon Linux 2 from 2023 under /: no /usr/bin/nodeadm and /etc/eks/bootstrap.sh cannot be read (permission denied); set handoff.mode to \"al2\" or \"al2023\""]);
}

#[test]
fn an_ipv6_service_cidr_goes_to_bootstrap_sh_as_ipv6() {
    // Passed as --service-ipv4-cidr, bootstrap.sh derived the DNS address
    // `fd00:10:96::/112.10`; as --service-ipv6-cidr with --ip-family ipv6 it derives fd00:10:96::a.
    let s = spec(|v| v["cluster"]["cidr"] = "fd00:10:96::/112".into());
    let p = build(&s, &al2("{}")).unwrap();
    let Some(Step::Handoff(eks_nodeinit::plan::step::Handoff::Exec { argv, .. })) = p.steps.last()
    else {
        panic!("{:?}", steps(&p))
    };
    let at = argv
        .iter()
        .position(|a| a == "--service-ipv6-cidr")
        .expect("the IPv6 flag");
    assert_eq!(
        argv[at + 1..at + 4],
        ["fd00:10:96::/112", "--ip-family", "ipv6"]
    );
    assert!(!argv.iter().any(|a| a == "--service-ipv4-cidr"));
    let s = spec(|v| v["cluster"]["cidr"] = "10.100.0.0/16".into());
    let p = build(&s, &al2("{}")).unwrap();
    let Some(Step::Handoff(eks_nodeinit::plan::step::Handoff::Exec { argv, .. })) = p.steps.last()
    else {
        panic!()
    };
    assert!(argv
        .windows(2)
        .any(|w| w == ["--service-ipv4-cidr", "10.100.0.0/16"]));
    assert!(!argv.iter().any(|a| a == "--ip-family"));
}

#[test]
fn spec_is_checked_once_and_plans_need_one() {
    // `plan::build` takes a `Spec`, and a `Spec` is only made by `spec::resolve`: a bad config
    // stops there, with every finding, and cannot reach planning.
    let c = parse(
        r#"{"cluster":{"name":"bad name"},"nodeGroup":{},"sysctls":{"a/b":1}}"#,
        "t",
    )
    .unwrap();
    let e = spec::from_config(&c).unwrap_err();
    assert_eq!(e.0.len(), 2, "{e}");
    let (partial, f) = spec::resolve(&c);
    assert_eq!(f.0.len(), 2);
    assert!(
        partial.sysctls.is_empty(),
        "a refused entry is left out of the spec"
    );
}

fn exec_argv(p: &Plan) -> Vec<String> {
    match p.steps.last() {
        Some(Step::Handoff(eks_nodeinit::plan::step::Handoff::Exec { argv, .. })) => argv.clone(),
        _ => panic!("no hand-off: {:?}", steps(p)),
    }
}

#[test]
fn an_older_bootstrap_sh_gets_the_dns_address_instead_of_the_cidr_flag() {
    // Before amazon-eks-ami PR #2264 (2025-05) bootstrap.sh had no --service-ipv4-cidr: the
    // flag and the CIDR became positional words and were lost. The node's own script is read.
    let before_2264: Vec<&str> = BOOTSTRAP_OPTIONS
        .iter()
        .copied()
        .filter(|o| *o != "--service-ipv4-cidr")
        .collect();
    let old = bootstrap_standin(&before_2264, "");
    let s = spec(|v| v["cluster"]["cidr"] = "10.100.0.0/16".into());
    let argv = exec_argv(&build(&s, &al2_with("{}", &old)).unwrap());
    assert!(
        argv.windows(2)
            .any(|w| w == ["--dns-cluster-ip", "10.100.0.10"]),
        "{argv:?}"
    );
    assert!(!argv.iter().any(|a| a == "--service-ipv4-cidr"));
    // The operator's own --dns-cluster-ip stands.
    let s2 = spec(|v| {
        v["cluster"]["cidr"] = "10.100.0.0/16".into();
        v["handoff"] = json!({"extraBootstrapArgs": ["--dns-cluster-ip", "10.100.0.53"]});
    });
    let argv = exec_argv(&build(&s2, &al2_with("{}", &old)).unwrap());
    assert_eq!(argv.iter().filter(|a| *a == "--dns-cluster-ip").count(), 1);
    assert!(argv
        .windows(2)
        .any(|w| w == ["--dns-cluster-ip", "10.100.0.53"]));
    // Older still (no --dns-cluster-ip either, 2019): refused, naming the field.
    let ancient = bootstrap_standin(
        &[
            "--b64-cluster-ca",
            "--apiserver-endpoint",
            "--kubelet-extra-args",
            "--container-runtime",
        ],
        "",
    );
    let e = errors(&s, &al2_with("{}", &ancient));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].starts_with("cluster.cidr: /etc/eks/bootstrap.sh has no `--dns-cluster-ip` option (nor --service-ipv4-cidr)"), "{e:?}");
    // IPv6 needs --service-ipv6-cidr (2021-10).
    let s6 = spec(|v| v["cluster"]["cidr"] = "fd00:10:96::/112".into());
    let e = errors(&s6, &al2_with("{}", &ancient));
    assert!(
        e.iter()
            .any(|x| x.contains("no `--service-ipv6-cidr` option")),
        "{e:?}"
    );
}

#[test]
fn a_bootstrap_sh_that_cannot_be_read_or_run_is_a_finding() {
    let s = spec(|_| {});
    let mut f = al2("{}");
    f.set_executable("/etc/eks/bootstrap.sh", false);
    let mut script = f.file("/etc/eks/bootstrap.sh").unwrap().clone();
    script.mode = Some(0o644);
    f.set_file("/etc/eks/bootstrap.sh", script);
    let e = errors(&s, &f);
    assert_eq!(e, ["handoff.bootstrapPath: /etc/eks/bootstrap.sh is not executable (mode 0644): the hand-off would fail with `Permission denied` after every change; make it executable (chmod 0755) in the AMI"]);
    let f = al2_with("{}", "#!/bin/sh\nexec /usr/local/bin/join \"$@\"\n");
    let e = errors(&s, &f);
    assert!(e[0].starts_with("handoff.bootstrapPath: cannot read the options of /etc/eks/bootstrap.sh: has no `case $key in`"), "{e:?}");
}

#[test]
fn extra_bootstrap_args_are_read_as_the_node_script_reads_them() {
    // The config's words against the newest script: tests/it/faults.rs (through the binary).
    // Valid for the newest script, unknown to this node's: refused at plan time.
    let s = spec(|v| v["handoff"] = json!({"extraBootstrapArgs": ["--local-disks", "raid0"]}));
    let no_disks: Vec<&str> = BOOTSTRAP_OPTIONS
        .iter()
        .copied()
        .filter(|o| *o != "--local-disks")
        .collect();
    let e = errors(&s, &al2_with("{}", &bootstrap_standin(&no_disks, "")));
    assert!(e[0].starts_with("handoff.extraBootstrapArgs[0]: `--local-disks` is not an option of /etc/eks/bootstrap.sh"), "{e:?}");
    assert!(build(&s, &al2("{}")).is_ok());
}

#[test]
fn an_argv_execve_would_refuse_is_a_finding_before_any_change() {
    // One word over MAX_ARG_STRLEN: validate accepted it, everything was applied, then E2BIG.
    let s = spec(|v| v["kubelet"] = json!({"extraArgs": [format!("--v={}", "9".repeat(131_072))]}));
    let e = errors(&s, &al2("{}"));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with(
            "handoff: the --kubelet-extra-args value (labels, taints and kubelet.extraArgs) is 131"
        ) && e[0].contains("bytes; Linux passes at most 131071 bytes per argument"),
        "{e:?}"
    );
    // The whole argv and environment over ARG_MAX.
    let s = spec(|v| v["kubelet"] = json!({"extraArgs": [format!("--v={}", "9".repeat(100_000))]}));
    let mut f = al2("{}");
    f.exec_limits.env_bytes = 2_000_000;
    let e = errors(&s, &f);
    assert!(e[0].contains("(ARG_MAX)"), "{e:?}");
    f.exec_limits.env_bytes = 0;
    assert!(errors(&s, &f).is_empty());
}

mod resources;
mod user_data;
