//! Target: config → spec → facts → plan, on both sample roots. Each generated document goes
//! through the agent as `init` takes it; it is refused exactly when the oracle (`predict`)
//! refuses it, and an accepted plan does what the oracle says: the AL2 argv read back by the
//! bootstrap.sh model as meant, the AL2023 drop-in a `NodeConfig` with the intended flags, a
//! well-formed logind drop-in covering the grace period, no NUL in a file, no control character
//! in a finding, the CA never rendered.

use std::collections::BTreeMap;
use std::path::Path;

use eks_nodeinit::facts::{Family, InstanceTags};
use eks_nodeinit::instance::metadata::{self, Metadata};
use eks_nodeinit::plan::{self, Plan, Step};
use eks_nodeinit::{config, spec};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::{json, Map, Value};

use super::config_doc::config_doc;
use super::predict::{predict, Want};
use super::{check, put, Root};
use crate::common::{self, bootstrap_sh};

#[test]
fn config_to_plan_on_al2_and_al2023_matches_the_oracle() {
    let al2 = Root::new("al2-root");
    let al2023 = Root::new("al2023-root");
    let md = metadata::load_file(&common::example("metadata.json")).unwrap();
    check("config_to_plan", 8000, config_doc, |doc, tally| {
        for root in [&al2, &al2023] {
            tally.count(plan_on(&doc, root, &md)?);
        }
        Ok(())
    });
}

/// Run one config document through the agent on one root, as `init` does: a config with
/// findings still has the node read and planned (all problems together).
fn plan_on(doc: &Value, root: &Root, md: &Metadata) -> Result<bool, TestCaseError> {
    let text = serde_json::to_string_pretty(doc).unwrap();
    let predicted = predict(doc, root);
    let accepted = match config::parse(&text, "props.json") {
        Err(e) => {
            let shown = e.to_string();
            prop_assert!(!shown.contains('\0'));
            None
        }
        Ok(c) => Some(plan_config(&c, root, md)),
    };
    match (accepted, predicted) {
        (Some(Ok(plan)), Ok(want)) => {
            check_plan(&want, &plan, root.path())?;
            Ok(true)
        }
        (Some(Ok(plan)), Err(why)) => Err(TestCaseError::fail(format!(
            "accepted, but the oracle refuses it: {why:?}\nplan steps: {:?}",
            plan.steps.iter().map(Step::describe).collect::<Vec<_>>()
        ))),
        (Some(Err(findings)), Ok(want)) => Err(TestCaseError::fail(format!(
            "refused, but the oracle accepts it ({want:?}): {findings:?}"
        ))),
        (None, Ok(_)) => Err(TestCaseError::fail(
            "the config does not parse, but the oracle accepts it",
        )),
        (Some(Err(findings)), Err(_)) => {
            check_findings(doc, &findings)?;
            Ok(false)
        }
        (None, Err(_)) => Ok(false),
    }
}

/// A parsed config's plan on `root`, or every finding of the config and the node.
fn plan_config(
    c: &config::Config,
    root: &Root,
    md: &Metadata,
) -> Result<Plan, Vec<eks_nodeinit::base::findings::Finding>> {
    let (spec, findings) = spec::resolve(c);
    if findings.is_empty() {
        let facts =
            eks_nodeinit::gather::node(root.path(), &spec, Some(md.clone()), InstanceTags::Unknown);
        plan::build(&spec, &facts).map_err(|e| e.0)
    } else {
        let facts = eks_nodeinit::gather::node(root.path(), &spec, None, InstanceTags::Unknown);
        let mut all = findings.0;
        all.extend(plan::findings(&spec, &facts));
        Err(all)
    }
}

/// A refusal's findings: at least one, none with a control character or the CA.
fn check_findings(
    doc: &Value,
    findings: &[eks_nodeinit::base::findings::Finding],
) -> Result<(), TestCaseError> {
    let ca = doc["cluster"]["certificateAuthority"]
        .as_str()
        .filter(|c| c.len() >= 16);
    prop_assert!(!findings.is_empty());
    for f in findings {
        let line = f.to_string();
        prop_assert!(
            !line.chars().any(char::is_control),
            "a finding holds a control character: {line:?}"
        );
        if let Some(ca) = ca {
            prop_assert!(!line.contains(ca), "a finding echoes the CA");
        }
    }
    Ok(())
}

/// The files a plan writes: path → new content.
type Files<'a> = BTreeMap<&'a Path, &'a str>;

/// The whole plan against what the oracle wants.
fn check_plan(want: &Want, plan: &Plan, root: &Path) -> Result<(), TestCaseError> {
    let files: Files = plan
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::File(eks_nodeinit::plan::step::File { path, new, .. }) => {
                Some((path.as_path(), new.as_str()))
            }
            _ => None,
        })
        .collect();
    for (p, new) in &files {
        prop_assert!(!new.contains('\0'), "{} holds a NUL", p.display());
    }
    check_name_tag(want, plan)?;
    check_sysctls(want, plan, &files)?;
    check_logind(want, plan, &files)?;
    if want.al2 {
        prop_assert_eq!(plan.family, Family::Al2);
        check_kubelet_config(want, &files, root)?;
        check_bootstrap_argv(want, plan, root)?;
    } else {
        check_nodeconfig(want, plan, &files)?;
    }
    // Rendered, the plan never shows the CA.
    let (text, json_text) = (plan.to_text(), plan.to_json());
    prop_assert!(serde_json::from_str::<Value>(&json_text).is_ok());
    if let Some(ca) = want.ca.as_ref().filter(|c| c.len() >= 16) {
        prop_assert!(!text.contains(ca.as_str()) && !json_text.contains(ca.as_str()));
    }
    Ok(())
}

/// The Name tag, when the oracle wants one.
fn check_name_tag(want: &Want, plan: &Plan) -> Result<(), TestCaseError> {
    let tags: Vec<&str> = plan
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Tag { value, .. } => Some(value.as_str()),
            _ => None,
        })
        .collect();
    prop_assert_eq!(
        tags,
        want.tag.iter().map(String::as_str).collect::<Vec<_>>()
    );
    Ok(())
}

/// sysctls: live changes, and the persisted file as systemd-sysctl reads it.
fn check_sysctls(want: &Want, plan: &Plan, files: &Files) -> Result<(), TestCaseError> {
    let live: BTreeMap<String, String> = plan
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Live(eks_nodeinit::plan::step::Live { key, new, .. }) => {
                Some((key.clone(), new.clone()))
            }
            _ => None,
        })
        .collect();
    prop_assert_eq!(&live, &want.live_changes);
    let persisted = files.get(Path::new("/etc/sysctl.d/99-zz-eks-nodeinit.conf"));
    if want.sysctls.is_empty() {
        prop_assert!(persisted.is_none());
    } else {
        let text = persisted.expect("a persisted sysctl file");
        let read: BTreeMap<String, String> = text
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#') && !l.starts_with(';'))
            .map(|l| {
                let (k, v) = l.split_once('=').unwrap();
                (k.trim().to_string(), v.trim().to_string())
            })
            .collect();
        prop_assert_eq!(&read, &want.sysctls);
    }
    Ok(())
}

/// logind: well-formed, the delay at least the grace period, logind told.
fn check_logind(want: &Want, plan: &Plan, files: &Files) -> Result<(), TestCaseError> {
    let dropin = files.get(Path::new(
        "/etc/systemd/logind.conf.d/99-zz-eks-nodeinit.conf",
    ));
    let Some(sec) = want.logind_sec else {
        prop_assert!(dropin.is_none());
        return Ok(());
    };
    let text = dropin.expect("a logind drop-in");
    let ini = ini(text).map_err(TestCaseError::fail)?;
    let key = ("Login".to_string(), "InhibitDelayMaxSec".to_string());
    prop_assert_eq!(ini.get(&key), Some(&sec.to_string()));
    prop_assert_eq!(ini.len(), 1);
    // logind lets kubelet hold the shutdown for its whole grace period.
    let covered = u128::from(sec) * 1_000_000_000;
    prop_assert!(
        want.grace_nanos.map_or(true, |g| covered >= g),
        "{sec} s < the grace period"
    );
    let notified = plan.steps.iter().any(|s| {
        matches!(s, Step::Unit(eks_nodeinit::plan::step::Unit { job: eks_nodeinit::plan::step::UnitJob::Restart { verify, .. }, .. }) if verify.expected == eks_nodeinit::os::systemd::Expected::Number(sec * 1_000_000))
    });
    prop_assert!(notified, "logind told {sec} s");
    Ok(())
}

/// AL2's kubelet config: the original with the wanted keys, or no step.
fn check_kubelet_config(want: &Want, files: &Files, root: &Path) -> Result<(), TestCaseError> {
    let kubelet = files.get(Path::new(&want.kubelet_path));
    if want.kubelet.is_empty() {
        prop_assert!(kubelet.is_none());
        return Ok(());
    }
    let new: Map<String, Value> =
        serde_json::from_str(kubelet.expect("a kubelet config step")).unwrap();
    let orig: Map<String, Value> = serde_json::from_str(
        &std::fs::read_to_string(root.join(want.kubelet_path.trim_start_matches('/'))).unwrap(),
    )
    .unwrap();
    let mut expected = orig;
    expected.extend(want.kubelet.clone());
    prop_assert_eq!(new, expected);
    Ok(())
}

/// AL2's one hand-off, last: the node's bootstrap.sh, its argv read back by the model as meant.
fn check_bootstrap_argv(want: &Want, plan: &Plan, root: &Path) -> Result<(), TestCaseError> {
    let execs: Vec<&Vec<String>> = plan
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Handoff(eks_nodeinit::plan::step::Handoff::Exec { argv, .. }) => Some(argv),
            _ => None,
        })
        .collect();
    prop_assert_eq!(execs.len(), 1, "one hand-off");
    prop_assert!(
        matches!(
            plan.steps.last(),
            Some(Step::Handoff(
                eks_nodeinit::plan::step::Handoff::Exec { .. }
            ))
        ),
        "the hand-off is last"
    );
    let argv = execs[0];
    let script = root.join("etc/eks/bootstrap.sh");
    prop_assert_eq!(Path::new(&argv[0]), script.as_path());
    let read = bootstrap_sh::parse(&argv[1..])
        .map_err(|r| TestCaseError::fail(format!("bootstrap.sh refuses the argv: {r:?}")))?;
    prop_assert_eq!(read.cluster_name(), Some(want.name.as_str()));
    prop_assert!(read.stray().is_empty(), "stray words {:?}", read.stray());
    prop_assert!(read.repeated().is_empty(), "repeated {:?}", read.repeated());
    let mut got: BTreeMap<&str, String> = read
        .options
        .iter()
        .map(|(o, v)| (o.as_str(), v.clone()))
        .collect();
    let extra = got.remove("--kubelet-extra-args");
    prop_assert_eq!(got, expected_options(want));
    let no_flags = want.labels.is_empty() && want.taints.is_empty() && want.extra_args.is_empty();
    match extra {
        None => prop_assert!(no_flags, "--kubelet-extra-args missing"),
        // bootstrap.sh hands the value to kubelet's command line, split at whitespace.
        Some(e) => check_flags(want, e.split_whitespace())?,
    }
    Ok(())
}

/// bootstrap.sh's options the oracle wants, `--kubelet-extra-args` aside.
fn expected_options(want: &Want) -> BTreeMap<&str, String> {
    let mut expected: BTreeMap<&str, String> = BTreeMap::new();
    if let Some(ca) = &want.ca {
        expected.insert("--b64-cluster-ca", ca.clone());
    }
    if let Some(ep) = &want.endpoint {
        expected.insert("--apiserver-endpoint", ep.clone());
    }
    match &want.cidr {
        Some((c, true)) => {
            expected.insert("--service-ipv6-cidr", c.clone());
            expected.insert("--ip-family", "ipv6".into());
        }
        Some((c, false)) => {
            expected.insert("--service-ipv4-cidr", c.clone());
        }
        None => {}
    }
    expected.insert("--container-runtime", "containerd".into());
    for (o, v) in &want.extra_bootstrap {
        expected.insert(o.as_str(), v.clone());
    }
    expected
}

/// AL2023: the NodeConfig drop-in nodeadm reads last, no bootstrap.sh.
fn check_nodeconfig(want: &Want, plan: &Plan, files: &Files) -> Result<(), TestCaseError> {
    prop_assert_eq!(plan.family, Family::Al2023);
    prop_assert!(
        matches!(
            plan.steps.last(),
            Some(Step::Handoff(eks_nodeinit::plan::step::Handoff::Dropin(_)))
        ),
        "nodeadm reads the drop-in last"
    );
    prop_assert!(
        !plan.steps.iter().any(|s| matches!(
            s,
            Step::Handoff(eks_nodeinit::plan::step::Handoff::Exec { .. })
        )),
        "no bootstrap.sh on AL2023"
    );
    let text = files
        .get(Path::new("/etc/eks/nodeadm.d/10-eks-nodeinit.json"))
        .expect("a NodeConfig drop-in");
    let doc: Value = yaml_serde::from_str(text)
        .map_err(|e| TestCaseError::fail(format!("the drop-in is no YAML: {e}")))?;
    prop_assert_eq!(&doc["apiVersion"], "node.eks.aws/v1alpha1");
    prop_assert_eq!(&doc["kind"], "NodeConfig");
    let mut cluster = Map::new();
    cluster.insert("name".into(), json!(want.name));
    put(
        &mut cluster,
        "apiServerEndpoint",
        want.endpoint.clone().map(Value::from),
    );
    put(
        &mut cluster,
        "certificateAuthority",
        want.ca.clone().map(Value::from),
    );
    put(
        &mut cluster,
        "cidr",
        want.cidr.clone().map(|c| Value::from(c.0)),
    );
    prop_assert_eq!(&doc["spec"]["cluster"], &Value::Object(cluster));
    let config = doc["spec"]["kubelet"].get("config");
    if want.kubelet.is_empty() {
        prop_assert!(config.is_none());
    } else {
        prop_assert_eq!(config, Some(&Value::Object(want.kubelet.clone())));
    }
    let flags: Vec<&str> = doc["spec"]["kubelet"]
        .get("flags")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|f| f.as_str().unwrap()).collect())
        .unwrap_or_default();
    check_flags(want, flags)
}

/// kubelet flags as kubelet reads them: each `--node-labels` split at `,` then `=`, each
/// `--register-with-taints` at `,`, the rest as given.
#[derive(Debug, Default)]
struct Flags {
    labels: Vec<BTreeMap<String, String>>,
    taints: Vec<Vec<String>>,
    rest: Vec<String>,
}

fn read_flags<'a>(flags: impl IntoIterator<Item = &'a str>) -> Flags {
    let mut out = Flags::default();
    for f in flags {
        if let Some(l) = f.strip_prefix("--node-labels=") {
            out.labels.push(
                l.split(',')
                    .map(|kv| {
                        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                        (k.to_string(), v.to_string())
                    })
                    .collect(),
            );
        } else if let Some(t) = f.strip_prefix("--register-with-taints=") {
            out.taints.push(t.split(',').map(String::from).collect());
        } else {
            out.rest.push(f.to_string());
        }
    }
    out
}

/// One `--node-labels` with the labels, one `--register-with-taints` with the taints (each
/// only when there are any), then `kubelet.extraArgs` as given.
fn check_flags<'a>(
    want: &Want,
    flags: impl IntoIterator<Item = &'a str>,
) -> Result<(), TestCaseError> {
    let Flags {
        labels,
        taints,
        rest,
    } = read_flags(flags);
    if want.labels.is_empty() {
        prop_assert!(labels.is_empty(), "no --node-labels: {labels:?}");
    } else {
        prop_assert_eq!(&labels, &vec![want.labels.clone()]);
    }
    if want.taints.is_empty() {
        prop_assert!(taints.is_empty(), "no --register-with-taints: {taints:?}");
    } else {
        prop_assert_eq!(&taints, &vec![want.taints.clone()]);
    }
    prop_assert_eq!(&rest, &want.extra_args);
    Ok(())
}

/// An INI file as systemd reads it: comments, `[Section]`, `Key=Value` inside a section.
fn ini(text: &str) -> Result<BTreeMap<(String, String), String>, String> {
    let mut section = None;
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') || l.starts_with(';') {
            continue;
        }
        if let Some(s) = l.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            section = Some(s.to_string());
            continue;
        }
        let (k, v) = l.split_once('=').ok_or(format!("line {l:?}"))?;
        let s = section.clone().ok_or("key outside a section")?;
        if out
            .insert((s, k.trim().to_string()), v.trim().to_string())
            .is_some()
        {
            return Err(format!("{k} twice"));
        }
    }
    Ok(out)
}
