//! The Amazon Linux 2 hand-off: `execv` of `/etc/eks/bootstrap.sh` with every flag and its value
//! as separate words (bootstrap.sh takes `--flag=value` as the cluster name).
//!
//! bootstrap.sh reads its argv with a `while [[ $# -gt 0 ]]; case $key in … esac` loop: each
//! listed option takes the next word as its value (`$2` under `set -o nounset`: a missing value
//! kills it), `-h | --help` prints the usage and exits 1, and every other word goes to a
//! positional list whose first word is the cluster name — so a typo is silently ignored. Its
//! options differ between AMI releases (`--service-ipv4-cidr` only since 2025-05), so the agent
//! reads them from the node's own script ([`crate::base::bootstrap_sh`]) and refuses, before any change, an
//! argv that script would not read exactly as meant.

use crate::config::{LocalStorageSettings, LocalStorageStrategy};
use std::collections::{BTreeMap, BTreeSet};

use crate::base::bootstrap_sh::AL2_FLAG_KEYS;
use crate::base::findings::Findings;
use crate::base::text::printable;

use crate::discovery::ClusterFact;
use crate::facts::{ExecLimits, Facts, Family};
use crate::os::fsutil::under;
use crate::os::marker::HandoffState;
use crate::plan::step::{Handoff, Step};
use crate::spec::Spec;

pub use crate::base::bootstrap_sh::{Grammar, NEWEST_OPTIONS};
pub use crate::spec::bootstrap::FLAGS_OWNED;

use super::Input;
use crate::facts::Read;
use crate::facts::Reads;
use crate::plan::out::Out;

/// Written (per boot: /run is a tmpfs) just before bootstrap.sh is exec'd; a later run in the
/// same boot reads it ([`crate::os::marker`]) and hands off again only when bootstrap.sh never
/// started.
pub use crate::os::marker::MARKER;

pub(crate) fn reads(spec: &Spec, family: Option<Family>, r: &mut Reads) {
    if family == Some(Family::Al2) {
        r.ask(Read::HandoffMarker);
        r.file(spec.bootstrap.path.clone());
        r.ask(Read::Executable(spec.bootstrap.path.clone()));
    }
}

pub(crate) fn plan(i: &Input, out: &mut Out) {
    let facts = i.facts;
    if facts.family() != Some(Family::Al2) {
        return;
    }
    if !hand_off_in_this_boot(facts, out) {
        return;
    }
    let mut f = Findings::default();
    // Checked in a held boot too: a problem shows while the instance is warmed, not when it
    // goes into service.
    let env = handoff_env(facts);
    let argv = checked_argv(i, &env, &mut f);
    if let Some(argv) = argv.filter(|_| i.handoff.hold.is_none()) {
        out.secrets
            .extend(i.handoff.cluster.certificate_authority.iter().cloned());
        out.steps.push(Step::Handoff(Handoff::Exec { argv, env }));
    }
    out.findings.0.extend(f.0);
}

/// What bootstrap.sh is told beside the agent's environment on an instance without IPv4:
/// its IMDS helper (`/etc/eks/bin/imds`) calls `http://$IMDS_ENDPOINT/`, by default
/// 169.254.169.254, so the host (and port) where the boot found IMDS; its AWS CLI
/// (`private-dns-name`'s DescribeInstances) what the SDKs read ([`super::sdk_env`]).
fn handoff_env(facts: &Facts) -> BTreeMap<String, String> {
    let mut env = super::sdk_env(facts);
    let host = env
        .get(crate::instance::imds::ENDPOINT_ENV)
        .and_then(|e| e.strip_prefix("http://"))
        .map(String::from);
    if let Some(host) = host {
        env.insert("IMDS_ENDPOINT".into(), host);
    }
    env
}

/// Whether this run hands off, from what the per-boot marker shows; says why in `out`.
fn hand_off_in_this_boot(facts: &Facts, out: &mut Out) -> bool {
    match facts.handoff() {
        HandoffState::None => true,
        HandoffState::OtherBoot { recorded } => {
            out.warnings.push(format!(
                "{MARKER} is from another boot (boot id {}): /run should be a tmpfs; handing off",
                printable(recorded)
            ));
            true
        }
        HandoffState::Running { record } => {
            out.warnings.push(format!(
                "bootstrap.sh is running in this boot (pid {}, {MARKER}); not again: one hand-off per boot",
                record.pid
            ));
            false
        }
        HandoffState::Done { record, evidence } => {
            out.warnings.push(format!(
                "bootstrap.sh was already exec'd in this boot (pid {} at unix ms {}; it rewrote {} after {MARKER}); not again: one hand-off per boot",
                record.pid,
                record.at_unix_ms,
                evidence.display()
            ));
            false
        }
        HandoffState::NotStarted { record } => {
            out.warnings.push(format!(
                "{MARKER} records a hand-off at unix ms {} by pid {}, which is gone, and bootstrap.sh rewrote none of {} after it: bootstrap.sh never started (the run was stopped before its execve); handing off again",
                record.at_unix_ms,
                record.pid,
                crate::os::marker::EVIDENCE.join(", ")
            ));
            true
        }
        HandoffState::Unknown(why) => {
            out.findings.push("handoff", why.clone());
            false
        }
    }
}

/// The node's bootstrap.sh, read and executable, and its grammar.
fn node_grammar(spec: &Spec, facts: &Facts, f: &mut Findings) -> Option<Grammar> {
    const FIELD: &str = "handoff.bootstrapPath";
    let path = &spec.bootstrap.path;
    let shown = under(&facts.root, path).display().to_string();
    let text = match facts.file(path).map(|x| &x.content) {
        Some(Ok(Some(t))) => t,
        Some(Ok(None)) | None => {
            f.push(FIELD, format!("{shown} does not exist: nothing to hand the node to; check handoff.bootstrapPath or use handoff.mode \"al2023\""));
            return None;
        }
        Some(Err(e)) => {
            f.push(
                FIELD,
                format!("{e}: the agent reads bootstrap.sh's options before handing off to it"),
            );
            return None;
        }
    };
    if !facts.executable(path) {
        let mode = facts
            .file(path)
            .and_then(|x| x.mode)
            .map_or(String::new(), |m| format!(" (mode {m:04o})"));
        f.push(FIELD, format!(
            "{shown} is not executable{mode}: the hand-off would fail with `Permission denied` after every change; make it executable (chmod 0755) in the AMI"
        ));
    }
    match Grammar::read(text) {
        Ok(g) => Some(g),
        Err(e) => {
            f.push(FIELD, format!(
                "cannot read the options of {shown}: {e}; the agent checks every argv word against them before any change"
            ));
            None
        }
    }
}

/// The argv, checked against the node's bootstrap.sh and execve's limits (with `env` given).
fn checked_argv(
    i: &Input,
    env: &BTreeMap<String, String>,
    f: &mut Findings,
) -> Option<Vec<String>> {
    let (spec, facts) = (i.spec, i.facts);
    let grammar = node_grammar(spec, facts, f)?;
    let shown = under(&facts.root, &spec.bootstrap.path)
        .display()
        .to_string();
    let before = f.0.len();
    for (i, m) in grammar.check_extra(&spec.bootstrap.extra_args, &shown) {
        f.push(format!("handoff.extraBootstrapArgs[{i}]"), m);
    }
    let argv = argv(i, &grammar, &shown, f)?;
    if f.0.len() > before {
        return None;
    }
    read_back_exactly(&grammar, &argv, &spec.cluster.name, &shown, f);
    check_exec_limits(&argv, &facts.exec_limits, env, f);
    (f.0.len() == before).then_some(argv)
}

/// The exact argv for bootstrap.sh (argv[0] is the script's path under the root), using the
/// options this script has: without `--service-ipv4-cidr` (before 2025-05) the service CIDR
/// goes as the DNS address bootstrap.sh would have derived from it (`--dns-cluster-ip`).
fn argv(i: &Input, g: &Grammar, script: &str, f: &mut Findings) -> Option<Vec<String>> {
    let (spec, facts) = (i.spec, i.facts);
    // The config's values with what discovery found.
    let c = &i.handoff.cluster;
    let mut a = Argv {
        words: vec![
            under(&facts.root, &spec.bootstrap.path)
                .display()
                .to_string(),
            c.name.clone(),
        ],
        missing: Vec::new(),
        g,
    };
    a.cluster(c, spec);
    a.opt(
        "--container-runtime",
        &spec.cluster.container_runtime,
        "cluster.containerRuntime",
    );
    // What bootstrap.sh would rewrite in kubelet-config.json goes as kubelet flags, and with
    // max pods set, bootstrap.sh is told not to set its own.
    let (_, mut config_flags) = i.handoff.kubelet.split_as_flags(&AL2_FLAG_KEYS);
    config_flags.extend(i.handoff.kubelet.al2_rewritten_flags());
    if i.handoff
        .kubelet
        .config
        .iter()
        .any(|(k, _)| *k == "maxPods")
    {
        a.opt("--use-max-pods", "false", "kubelet.maxPods");
    }
    if let Some(ls) = &i.handoff.local_storage {
        a.local_disks(ls, f);
    }
    if !i.handoff.containerd.pull.is_empty() {
        a.opt(
            "--containerd-config-file",
            crate::plan::aspects::containerd::pull::AL2_CONFIG,
            "images.pull",
        );
    }
    let flags = i.handoff.kubelet.kubelet_flags_with(&config_flags);
    if !flags.is_empty() {
        a.opt(
            "--kubelet-extra-args",
            &flags.join(" "),
            "labels, taints, kubelet.extraArgs, kubelet.maxPods, kubelet.kubeReserved, kubelet.config",
        );
    }
    for (field, o) in &a.missing {
        let alt = if o == "--dns-cluster-ip" {
            " (nor --service-ipv4-cidr)"
        } else {
            ""
        };
        f.push(field.as_str(), format!(
            "{script} has no `{o}` option{alt}: it would take the flag and its value as positional words and lose them; use an AMI whose bootstrap.sh has it, or leave {field} unset"
        ));
    }
    if !a.missing.is_empty() {
        return None;
    }
    a.words.extend(spec.bootstrap.extra_args.iter().cloned());
    Some(a.words)
}

/// An argv being built against the node's script: options it lacks are collected, not added.
struct Argv<'a> {
    words: Vec<String>,
    /// (config field, option) for each option the script does not have.
    missing: Vec<(String, String)>,
    g: &'a Grammar,
}

impl Argv<'_> {
    fn opt(&mut self, o: &str, v: &str, field: &str) {
        if self.g.valued.contains(o) {
            self.words.extend([o.to_string(), v.to_string()]);
        } else {
            self.missing.push((field.to_string(), o.to_string()));
        }
    }

    /// The instance store as bootstrap.sh's `setup-local-disks` takes it: `raid0` or `mount`;
    /// what only nodeadm does (RAID-10, a mount path, disabled mounts) is a finding.
    fn local_disks(&mut self, ls: &LocalStorageSettings, f: &mut Findings) {
        let value = match ls.strategy {
            LocalStorageStrategy::Raid0 => "raid0",
            LocalStorageStrategy::Mount => "mount",
            LocalStorageStrategy::Raid10 => {
                f.push("localStorage.strategy", "RAID10 is nodeadm's (AL2023): bootstrap.sh's --local-disks takes raid0 or mount");
                return;
            }
        };
        for (set, field) in [
            (ls.mount_path.is_some(), "localStorage.mountPath"),
            (
                !ls.disabled_mounts.is_empty(),
                "localStorage.disabledMounts",
            ),
        ] {
            if set {
                f.push(field, "nodeadm's (AL2023): bootstrap.sh's --local-disks takes the strategy alone; leave it out on AL2");
            }
        }
        self.opt("--local-disks", value, "localStorage.strategy");
    }

    /// The cluster's CA, endpoint and service CIDR (or the DNS address derived from it).
    fn cluster(&mut self, c: &ClusterFact, spec: &Spec) {
        if let Some(ca) = &c.certificate_authority {
            self.opt("--b64-cluster-ca", ca, "cluster.certificateAuthority");
        }
        if let Some(ep) = &c.api_server_endpoint {
            self.opt("--apiserver-endpoint", ep, "cluster.apiServerEndpoint");
        }
        let user_dns = spec
            .bootstrap
            .extra_args
            .iter()
            .any(|a| a == "--dns-cluster-ip");
        match &c.cidr {
            // bootstrap.sh derives the cluster DNS address from the CIDR of its family.
            Some(cidr) if cidr.ipv6 => {
                self.opt("--service-ipv6-cidr", &cidr.text, "cluster.cidr");
                self.opt("--ip-family", "ipv6", "cluster.cidr");
            }
            Some(cidr) if self.g.valued.contains("--service-ipv4-cidr") => {
                self.opt("--service-ipv4-cidr", &cidr.text, "cluster.cidr");
            }
            // Older scripts: the address bootstrap.sh derives (`${SERVICE_IPV4_CIDR%.*}.10`),
            // unless the operator gives one.
            Some(_) if user_dns => {}
            Some(cidr) => self.opt("--dns-cluster-ip", &dns_ip(&cidr.text), "cluster.cidr"),
            None => {}
        }
    }
}

/// The DNS address bootstrap.sh and nodeadm (`GetClusterDns`) derive from a service CIDR, as
/// text: from an IPv4 one, the text up to its last `.`, then `.10` (`10.100.0.0/16` →
/// `10.100.0.10`); from an IPv6 one, the address before the `/`, then `a` (`fd00:10::/108` →
/// `fd00:10::a`).
pub fn dns_ip(cidr: &str) -> String {
    if cidr.contains(':') {
        let address = cidr.split('/').next().unwrap_or(cidr);
        return format!("{address}a");
    }
    let head = cidr.rsplit_once('.').map_or(cidr, |(h, _)| h);
    format!("{head}.10")
}

/// The script must read the argv back as meant: the cluster name as its one positional word,
/// no option twice.
fn read_back_exactly(g: &Grammar, argv: &[String], name: &str, script: &str, f: &mut Findings) {
    let words = argv.get(1..).unwrap_or_default();
    match g.read_back(words) {
        Err(e) => f.push("handoff", format!("{script} would not read the argv: {e}")),
        Ok(r) => {
            if r.positional != [name] {
                f.push(
                    "handoff",
                    format!(
                        "{script} would read the positional words [{}], not just the cluster name",
                        r.positional
                            .iter()
                            .map(|w| format!("`{}`", printable(w)))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                );
            }
            let mut seen = BTreeSet::new();
            for (o, _) in &r.options {
                if !seen.insert(o) {
                    f.push("handoff.extraBootstrapArgs", format!(
                        "`{o}` is set by eks-nodeinit from the config and again here: {script} would keep the later value silently; set it once"
                    ));
                }
            }
        }
    }
}

/// execve refuses a word over MAX_ARG_STRLEN or an argv and environment over ARG_MAX (`E2BIG`):
/// check both before any change.
fn check_exec_limits(
    argv: &[String],
    l: &ExecLimits,
    env: &BTreeMap<String, String>,
    f: &mut Findings,
) {
    let what = |i: usize| match argv.get(i.wrapping_sub(1)).map(String::as_str) {
        Some("--kubelet-extra-args") => {
            "the --kubelet-extra-args value (labels, taints and kubelet.extraArgs)".to_string()
        }
        Some(o) if o.starts_with("--") => format!("the {o} value"),
        _ => format!("word {i}"),
    };
    if let Some(max) = l.max_arg_strlen {
        for (i, w) in argv.iter().enumerate() {
            if w.len() >= max {
                f.push("handoff", format!(
                    "{} is {} bytes; Linux passes at most {} bytes per argument to a program (MAX_ARG_STRLEN): the hand-off would fail with `Argument list too long` after every change; use fewer or shorter labels, taints or extra arguments",
                    what(i), w.len(), max - 1
                ));
            }
        }
    }
    if let Some(max) = l.arg_max {
        let ptr = std::mem::size_of::<usize>();
        // Each word with its NUL and pointer, the script's path once more (the kernel keeps it),
        // and the environment bootstrap.sh inherits and is given (`KEY=value`, NUL, pointer).
        let given = env.iter().map(|(k, v)| k.len() + v.len() + 2 + ptr).sum();
        let total = argv
            .iter()
            .fold(l.env_bytes.saturating_add(given), |n, w| {
                n.saturating_add(w.len() + 1 + ptr)
            })
            .saturating_add(argv.first().map_or(0, |p| p.len() + 1));
        if total > max {
            f.push("handoff", format!(
                "bootstrap.sh's argv and environment take {total} bytes; this system passes at most {max} (ARG_MAX): the hand-off would fail with `Argument list too long` after every change; use fewer labels, taints or extra arguments"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::marker::Record;

    #[test]
    fn the_environment_given_to_bootstrap_sh_counts_against_arg_max() {
        let argv = vec!["/etc/eks/bootstrap.sh".to_string(), "prod".to_string()];
        let ptr = std::mem::size_of::<usize>();
        let words = argv.iter().map(|w| w.len() + 1 + ptr).sum::<usize>() + argv[0].len() + 1;
        let limits = ExecLimits {
            arg_max: Some(words + 40),
            max_arg_strlen: None,
            env_bytes: 0,
        };
        // One variable of 40 bytes with its `=`, NUL and pointer; then one byte more.
        let var = |v: &str| BTreeMap::from([("K".to_string(), v.to_string())]);
        let fits = "v".repeat(40 - 3 - ptr);
        let mut f = Findings::default();
        check_exec_limits(&argv, &limits, &var(&fits), &mut f);
        assert!(f.is_empty(), "{f:?}");
        check_exec_limits(&argv, &limits, &var(&format!("{fits}v")), &mut f);
        assert!(f.0[0].message.contains("(ARG_MAX)"), "{f:?}");
    }
    use crate::plan::aspects::testing::{findings, run, spec, Facts};
    use crate::plan::aspects::AL2_HANDOFF as ASPECT;

    const SCRIPT: &str = include_str!("../../../examples/al2-root/etc/eks/bootstrap.sh");

    /// An AL2 node with the config's cluster values (every config here names `prod` alone).
    fn node() -> crate::facts::FactsBuilder {
        let cluster = crate::discovery::ClusterFact::from_spec(&spec(CONFIG).cluster);
        Facts::builder(Family::Al2).cluster(cluster)
    }

    fn al2(handoff: HandoffState) -> Facts {
        node()
            .file("/etc/eks/bootstrap.sh", SCRIPT)
            .executable("/etc/eks/bootstrap.sh", true)
            .handoff(handoff)
            .build()
    }

    fn record() -> Record {
        Record {
            pid: 4242,
            start_time: 1,
            boot_id: None,
            at_unix_ms: 5,
        }
    }

    const CONFIG: &str = r#"{"cluster":{"name":"prod"},"labels":{"team":"a"}}"#;

    #[test]
    fn local_storage_goes_as_local_disks_and_nodeadms_own_options_are_findings() {
        let c = r#"{"cluster":{"name":"prod"},"localStorage":{"strategy":"RAID0"}}"#;
        let out = run(&ASPECT, &spec(c), &al2(HandoffState::None));
        let Step::Handoff(Handoff::Exec { argv, .. }) = &out.steps[0] else {
            panic!("{:?} {:?}", out.steps, out.findings)
        };
        assert!(
            argv.windows(2).any(|w| w == ["--local-disks", "raid0"]),
            "{argv:?}"
        );
        let c = r#"{"cluster":{"name":"prod"},"localStorage":{"strategy":"RAID10","mountPath":"/data","disabledMounts":["PodLogs"]}}"#;
        let out = run(&ASPECT, &spec(c), &al2(HandoffState::None));
        let fields: Vec<String> = out.findings.0.iter().map(|f| f.to_string()).collect();
        assert!(
            fields[0].starts_with("localStorage.strategy: RAID10 is nodeadm's"),
            "{fields:?}"
        );
        assert!(out.steps.is_empty(), "{:?}", out.steps);
        let c = r#"{"cluster":{"name":"prod"},"localStorage":{"strategy":"Mount","mountPath":"/data"}}"#;
        let out = run(&ASPECT, &spec(c), &al2(HandoffState::None));
        assert!(out.findings.0[0]
            .to_string()
            .starts_with("localStorage.mountPath: nodeadm's"));
    }

    #[test]
    fn hands_off_with_the_kubelet_flags_as_one_word() {
        let out = run(&ASPECT, &spec(CONFIG), &al2(HandoffState::None));
        let Step::Handoff(Handoff::Exec { argv, .. }) = &out.steps[0] else {
            panic!("{:?}", out.steps)
        };
        assert_eq!(
            argv[1..],
            [
                "prod",
                "--container-runtime",
                "containerd",
                "--kubelet-extra-args",
                "--node-labels=team=a"
            ]
        );
    }

    /// An m6i.large (2 vCPUs, Nitro) whose numbers are known, with this bootstrap.sh.
    fn sized(script: &str) -> Facts {
        use crate::base::node as files;
        use crate::base::podcap::{TypeFact, TypeInfo, TypeSource};
        node()
            .file("/etc/eks/bootstrap.sh", script)
            .executable("/etc/eks/bootstrap.sh", true)
            .instance(crate::instance::metadata::Metadata {
                instance_type: "m6i.large".into(),
                ..Default::default()
            })
            .file(files::CPU_ONLINE, "0-1")
            .file(files::SYS_VENDOR, "Amazon EC2")
            .type_info(TypeFact::Known {
                info: TypeInfo {
                    enis: 3,
                    ipv4_per_eni: 10,
                },
                source: TypeSource::Table,
            })
            .build()
    }

    #[test]
    fn max_pods_and_kube_reserved_go_as_kubelet_flags_with_use_max_pods_false() {
        let c = r#"{"cluster":{"name":"prod"},"kubelet":{"maxPods":{},"extraArgs":["--v=2"]}}"#;
        let out = run(&ASPECT, &spec(c), &sized(SCRIPT));
        let Step::Handoff(Handoff::Exec { argv, .. }) = &out.steps[0] else {
            panic!("{:?} {:?}", out.steps, findings(&out))
        };
        assert_eq!(
            argv[1..],
            [
                "prod",
                "--container-runtime",
                "containerd",
                "--use-max-pods",
                "false",
                "--kubelet-extra-args",
                "--max-pods=29 --kube-reserved=cpu=70m,ephemeral-storage=1Gi,memory=574Mi --v=2"
            ]
        );
        // Only kube-reserved: bootstrap.sh keeps its max pods.
        let c = r#"{"cluster":{"name":"prod"},"kubelet":{"kubeReserved":{"memory":"1Gi"}}}"#;
        let out = run(&ASPECT, &spec(c), &sized(SCRIPT));
        let Step::Handoff(Handoff::Exec { argv, .. }) = &out.steps[0] else {
            panic!("{:?}", out.steps)
        };
        assert_eq!(
            argv[4..],
            ["--kubelet-extra-args", "--kube-reserved=memory=1Gi"]
        );
    }

    #[test]
    fn a_bootstrap_sh_without_use_max_pods_cannot_take_max_pods() {
        let old = SCRIPT.replace("--use-max-pods)", "--use-max-podz)");
        let c = r#"{"cluster":{"name":"prod"},"kubelet":{"maxPods":{}}}"#;
        let out = run(&ASPECT, &spec(c), &sized(&old));
        assert!(out.steps.is_empty());
        assert!(
            findings(&out)[0].starts_with("kubelet.maxPods:")
                && findings(&out)[0].contains("has no `--use-max-pods` option"),
            "{:?}",
            findings(&out)
        );
    }

    #[test]
    fn once_bootstrap_sh_ran_in_this_boot_no_second_hand_off() {
        let done = HandoffState::Done {
            record: record(),
            evidence: "/etc/kubernetes/pki/ca.crt".into(),
        };
        let out = run(&ASPECT, &spec(CONFIG), &al2(done));
        assert!(out.steps.is_empty());
        assert!(
            out.warnings[0].contains("already exec'd in this boot"),
            "{:?}",
            out.warnings
        );
        let running = HandoffState::Running { record: record() };
        let out = run(&ASPECT, &spec(CONFIG), &al2(running));
        assert!(out.steps.is_empty());
    }

    #[test]
    fn a_marker_whose_bootstrap_sh_never_started_hands_off_again() {
        let out = run(
            &ASPECT,
            &spec(CONFIG),
            &al2(HandoffState::NotStarted { record: record() }),
        );
        assert!(matches!(
            out.steps[..],
            [Step::Handoff(Handoff::Exec { .. })]
        ));
        assert!(
            out.warnings[0].contains("bootstrap.sh never started"),
            "{:?}",
            out.warnings
        );
    }

    #[test]
    fn a_marker_that_cannot_be_told_is_a_finding_and_no_hand_off() {
        let out = run(
            &ASPECT,
            &spec(CONFIG),
            &al2(HandoffState::Unknown("unreadable".into())),
        );
        assert!(out.steps.is_empty());
        assert_eq!(findings(&out), ["handoff: unreadable"]);
    }

    #[test]
    fn dns_address_as_bootstrap_sh_derives_it() {
        assert_eq!(dns_ip("10.100.0.0/16"), "10.100.0.10");
        assert_eq!(dns_ip("172.20.0.0/16"), "172.20.0.10");
        assert_eq!(dns_ip("10.96.0.0/12"), "10.96.0.10");
        // IPv6, as text like both peers: a block written with a last group gets its `a` after
        // that group (the preflight says when that leaves the block).
        assert_eq!(dns_ip("fd00:10:20::/108"), "fd00:10:20::a");
        assert_eq!(dns_ip("fd00:1::10/124"), "fd00:1::10a");
    }

    #[test]
    fn an_ipv6_dns_address_is_in_its_block_only_when_the_block_ends_in_a_zero_group() {
        // The peers' `<address>a` is in a /108 that ends in `::`; appended to a block written
        // with a last group, it leaves the block, or is no address at all.
        use crate::verify::cidr::cluster_dns;
        assert!(cluster_dns(&dns_ip("fd00:10:20::/108"), "fd00:10:20::/108").is_ok());
        for block in ["fd00:1::10/124", "fd00:1:2:3:4:5:6:1234/112"] {
            assert_eq!(
                cluster_dns(&dns_ip(block), block).unwrap_err().code,
                "cluster-dns"
            );
        }
    }
}
