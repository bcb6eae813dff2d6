//! The assertions on one scenario's two boots (the VM e2e, main.rs): the clean-boot checks,
//! the agent's report, files, sysctls, logind, tags, the hand-off records and the logs.

use super::*;

/// Both boots reported to the end, cloud-init done without errors, no unit ordering cycle.
pub(super) fn check_clean_boots(sc: &Scenario, run: &Run) {
    let ctx = run.debug(1);
    for boot in [1, 2] {
        assert_eq!(
            run.get(boot, "end").as_deref(),
            Some("ok\n"),
            "[{}] boot {boot} did not report to the end\n{ctx}",
            sc.name
        );
    }
    for boot in [1, 2] {
        // A clean boot: cloud-init done without errors, no unit ordering cycle anywhere.
        let status = run.must(boot, "cloud-init-status");
        assert!(
            status.starts_with("status: done"),
            "[{}] boot {boot}: cloud-init {status}\n{}",
            sc.name,
            run.debug(boot)
        );
        let lines: usize = run.must(boot, "journal-lines").trim().parse().unwrap();
        assert!(
            lines > 100,
            "boot {boot}: only {lines} journal lines were readable"
        );
        assert_eq!(
            run.must(boot, "ordering-cycles"),
            "",
            "[{}] boot {boot}: systemd found ordering cycles",
            sc.name
        );
    }
}

/// Every assertion on one scenario's two boots.
pub(super) fn check(sc: &Scenario, run: &Run, ec2: &Ec2, rt: &tokio::runtime::Runtime) {
    check_clean_boots(sc, run);
    if sc.warm.is_some() {
        return warm::check(sc, run);
    }
    let report = check_report(sc, run, ec2);
    let configured = check_sysctls(sc, run);
    check_logind(sc, run, &report);
    check_tags(sc, run, ec2, rt, &report);
    // The hand-off, recorded by the stand-ins.
    let owned = run.handoff_records(2);
    let records: Vec<&str> = owned.iter().map(String::as_str).collect();
    match sc.flavour {
        Flavour::Al2 => check_bootstrap(sc, &records, run),
        Flavour::Al2023 => check_nodeadm(sc, &records, run),
    }
    check_unit(sc, run, ec2);
    check_nothing_redone(sc, run, configured);
    // The AL2 kubelet config carries the settings; the CA reached nothing the guest printed.
    if sc.flavour == Flavour::Al2 {
        let k: serde_json::Value = serde_json::from_str(&run.file(1, &kubelet_config())).unwrap();
        for key in ["shutdownGracePeriod", "shutdownGracePeriodCriticalPods"] {
            assert_eq!(k[key], sc.config["kubelet"][key], "{key}");
        }
    }
    check_logs(sc, run);
    let (_, ca, _) = sc.cluster();
    for name in ["journal", "cloud-init-output", "second-run"] {
        if ca.is_empty() {
            break;
        }
        assert!(
            !run.must(1, name).contains(&ca),
            "[{}] the CA appears in the guest's {name}",
            sc.name
        );
    }
}

/// The agent ran, in the unit or in cloud-final, and recorded success: its report, read.
fn check_report(sc: &Scenario, run: &Run, ec2: &Ec2) -> serde_json::Value {
    let ctx = run.debug(1);
    let report: serde_json::Value = serde_json::from_str(&run.file(1, REPORT_PATH))
        .unwrap_or_else(|e| panic!("[{}] report.json: {e}\n{ctx}", sc.name));
    assert_eq!(report["instanceId"], ec2.instance_id.as_str(), "{report:#}");
    assert_eq!(
        report["family"],
        match sc.flavour {
            Flavour::Al2 => "al2",
            Flavour::Al2023 => "al2023",
        },
        "{report:#}"
    );
    // The preflight's checks aside: in `warn` mode (the default) a failed one is the agent's
    // warning, not a failed step, and these scenarios' clusters are names that do not resolve
    // (the join scenario checks its own: join.rs).
    let failed: Vec<_> = report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| !s["step"].as_str().unwrap_or("").starts_with("check "))
        .filter(|s| !s["outcome"].as_str().unwrap_or("").starts_with("done"))
        .collect();
    assert!(failed.is_empty(), "[{}] failed steps: {failed:#?}", sc.name);
    // Created in the foreground, or by the background continuation; `alreadySet` when the
    // continuation found that a CreateTags cut off by the sync budget had landed.
    let outcome = &report["tagging"]["result"]["outcome"];
    assert!(
        outcome == "created"
            || (outcome == "alreadySet" && report["tagging"]["background"] == true),
        "[{}] the report records the tag: {report:#}",
        sc.name
    );

    report
}

/// Sysctls: live in the kernel on both boots (the second from /etc/sysctl.d via
/// systemd-sysctl), and persisted. Whether the scenario sets any.
fn check_sysctls(sc: &Scenario, run: &Run) -> bool {
    let cfg = &sc.config;
    // Every example but the proxied one sets sysctls.
    let configured = cfg["sysctls"].as_object();
    assert!(
        configured.is_some() || sc.private,
        "[{}] no sysctls",
        sc.name
    );
    let persisted = configured
        .map(|_| run.file(1, sysctls::PERSIST_PATH))
        .unwrap_or_default();
    for (k, v) in configured.into_iter().flatten() {
        for boot in [1, 2] {
            assert_eq!(
                run.must(boot, &format!("sysctl:{k}")).trim(),
                v.to_string(),
                "[{}] boot {boot}: live {k}",
                sc.name
            );
        }
        assert!(
            persisted.lines().any(|l| l == format!("{k} = {v}")),
            "[{}] {k} not persisted:\n{persisted}",
            sc.name
        );
    }

    configured.is_some()
}

/// logind took the drop-in: its InhibitDelayMaxUSec over D-Bus equals the drop-in's value,
/// and covers the grace period. Again after the reboot.
fn check_logind(sc: &Scenario, run: &Run, report: &serde_json::Value) {
    let cfg = &sc.config;
    let grace = eks_nodeinit::base::duration::parse(
        cfg["kubelet"]["shutdownGracePeriod"].as_str().unwrap(),
    )
    .unwrap()
    .as_secs_f64();
    let dropin = run.file(1, logind::DROPIN_PATH);
    let delay: f64 = dropin
        .lines()
        .find_map(|l| l.strip_prefix("InhibitDelayMaxSec="))
        .unwrap_or_else(|| panic!("no InhibitDelayMaxSec in\n{dropin}"))
        .trim()
        .parse()
        .unwrap();
    assert!(delay >= grace, "drop-in {delay} s < grace {grace} s");
    for boot in [1, 2] {
        let got = run.must(boot, "logind");
        assert_eq!(
            got.trim(),
            format!("t {}", (delay * 1e6) as u64),
            "[{}] boot {boot}: logind's InhibitDelayMaxUSec",
            sc.name
        );
    }
    assert_eq!(
        report["logindInhibitDelayMaxUsec"],
        (delay * 1e6) as u64,
        "the agent read back what logind took: {report:#}"
    );
}

/// The Name tag, set once; and where the proof found the node joined, the joined mark
/// (one CreateTags of its own, after the verdict).
fn check_tags(
    sc: &Scenario,
    run: &Run,
    ec2: &Ec2,
    rt: &tokio::runtime::Runtime,
    report: &serde_json::Value,
) {
    let group = sc.config["nodeGroup"]["name"].as_str().unwrap();
    let want = match ipv6::is_ipv6(sc.name) {
        true => format!("{group}-{}", ipv6::INSTANCE_IPV6.replace(':', "x")),
        false => format!("{group}-{}", ec2.private_ip.replace('.', "x")),
    };
    let tags = ec2.tags(rt).unwrap();
    assert_eq!(tags.get("Name"), Some(&want), "[{}] Name tag", sc.name);
    let marked = usize::from(tags.contains_key("eks-nodeinit/joined"));
    if report["join"]["verdict"] == "joined" {
        assert_eq!(marked, 1, "[{}] a joined node is marked: {tags:?}", sc.name);
    }
    assert_eq!(
        run.create_tags_after_boot1,
        1 + marked,
        "[{}] CreateTags calls during the first boot; moto saw {:?}",
        sc.name,
        ec2.actions()
    );
    assert_eq!(
        ec2.count("CreateTags"),
        1 + marked,
        "[{}] no CreateTags after the reboot: {:?}",
        sc.name,
        ec2.actions()
    );
}

/// The packaged unit runs on the first boot in every scenario. With the config in the user
/// data it runs the agent, before nodeadm's config phase; with a user-data script (no config
/// for the unit) it exits 4, which the unit counts as success, and the script runs the agent.
/// After the reboot it does not run again, and systemd reports no failure.
fn check_unit(sc: &Scenario, run: &Run, ec2: &Ec2) {
    let u1 = run.unit(1, "eks-nodeinit.service");
    let u2 = run.unit(2, "eks-nodeinit.service");
    assert_eq!(u1["ConditionResult"], "yes", "{u1:?}");
    assert_eq!(u1["ActiveState"], "active", "{u1:?}");
    assert_eq!(u1["Result"], "success", "{u1:?}");
    assert_eq!(
        u1["ExecMainStatus"],
        if sc.by_unit { "0" } else { "4" },
        "[{}] {u1:?}",
        sc.name
    );
    if sc.flavour == Flavour::Al2023 {
        let done: u64 = u1["ExecMainExitTimestampMonotonic"].parse().unwrap();
        for next_unit in ["nodeadm-config.service", "nodeadm-run.service"] {
            let n = run.unit(1, next_unit);
            let next: u64 = n["ExecMainStartTimestampMonotonic"].parse().unwrap();
            assert!(
                done > 0 && done <= next,
                "[{}] eks-nodeinit exited at {done} µs, {next_unit} started at {next} µs",
                sc.name
            );
        }
    }
    // Written by ExecStartPost, after the unit's run (on AL2: bootstrap.sh, exec'd) succeeded.
    assert!(run.get(1, "file:/var/lib/eks-nodeinit/done").is_some());
    assert_eq!(u2["ConditionResult"], "no", "boot 2: {u2:?}");
    assert_eq!(u2["Result"], "success", "boot 2: {u2:?}");
    // Name only: one lookup in Parameter Store, on the first boot; none after the reboot (the
    // unit does not run) nor by the dry runs (the agent's cache).
    assert_eq!(
        ec2.ssm_count("GetParametersByPath"),
        usize::from(sc.discovered),
        "[{}] Parameter Store lookups",
        sc.name
    );
}

/// The reboot redid nothing: the agent's files are the same inodes with the same mtimes,
/// and a dry run on the configured node plans no change, on both boots.
fn check_nothing_redone(sc: &Scenario, run: &Run, configured: bool) {
    let mut written = vec![logind::DROPIN_PATH.to_string(), REPORT_PATH.to_string()];
    if configured {
        written.push(sysctls::PERSIST_PATH.into());
    }
    written.push(match sc.flavour {
        Flavour::Al2 => kubelet_config(),
        Flavour::Al2023 => nodeconfig::DROPIN.into(),
    });
    for f in &written {
        run.unchanged(f);
    }
    for boot in [1, 2] {
        let plan: serde_json::Value = serde_json::from_str(&run.must(boot, "second-run"))
            .unwrap_or_else(|e| panic!("boot {boot}: second-run plan: {e}\n{}", run.debug(boot)));
        assert_eq!(plan["changes"], 0, "[{}] boot {boot}: {plan:#}", sc.name);
    }
}

/// The agent's logs as an operator reads them: plain lines in cloud-init's output log; in the
/// journal, MESSAGE a string (no colour codes, which journald stores as byte arrays) and the
/// priority the line carries, so `journalctl -u eks-nodeinit -p warning` shows the warning of
/// the scenario that has one and none of the info lines.
pub(super) fn check_logs(sc: &Scenario, run: &Run) {
    const INFO_LINE: &str = "report written";
    const WARNING: &str = "the instance has no `kubernetes.io/cluster/";
    let output = run.must(1, "cloud-init-output");
    assert!(
        !output.contains('\u{1b}'),
        "[{}] an ESC byte in /var/log/cloud-init-output.log:\n{output:?}",
        sc.name
    );
    let prefixed: Vec<&str> = output
        .lines()
        .filter(|l| l.len() > 3 && l.starts_with('<') && l.as_bytes()[2] == b'>')
        .collect();
    assert!(
        prefixed.is_empty(),
        "[{}] journal priority prefixes in cloud-init's output log: {prefixed:?}",
        sc.name
    );
    // Where the agent's own lines are: cloud-final's output (a script) or the unit's journal.
    let unit = match sc.by_unit {
        true => "eks-nodeinit.service",
        false => "cloud-final.service",
    };
    if !sc.by_unit {
        assert!(output.contains(INFO_LINE), "[{}] {output}", sc.name);
    }
    let entries: Vec<serde_json::Value> = run
        .must(1, "journal-json")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("journal-json: {e}: {l}")))
        .collect();
    for e in &entries {
        assert!(
            e["MESSAGE"].is_string(),
            "[{}] journald stored a MESSAGE as bytes (not a string): {e}",
            sc.name
        );
    }
    // The agent's entries holding `needle` (the plan on standard output repeats its warnings
    // under `warnings:`, at info): their priorities.
    let priorities = |needle: &str| -> Vec<String> {
        let found: Vec<String> = entries
            .iter()
            .filter(|e| {
                e["_SYSTEMD_UNIT"] == unit
                    && e["MESSAGE"].as_str().is_some_and(|m| m.contains(needle))
            })
            .map(|e| e["PRIORITY"].as_str().unwrap_or("").to_string())
            .collect();
        assert!(
            !found.is_empty(),
            "[{}] no `{needle}` from {unit} in the journal:\n{entries:#?}",
            sc.name
        );
        found
    };
    // A unit's stream carries the agent's priority; cloud-init's pipe (tee) logs it all at info.
    let p = priorities(INFO_LINE);
    assert!(p.iter().all(|p| p == "6"), "[{}] {p:?}", sc.name);
    let warnings = run.must(1, "journal-warnings");
    assert!(
        !warnings.contains(INFO_LINE),
        "[{}] info lines at warning priority:\n{warnings}",
        sc.name
    );
    if !sc.cluster_tag {
        assert!(
            warnings.contains(WARNING),
            "[{}] `journalctl -u eks-nodeinit -p warning` lacks the agent's warning:\n{warnings}",
            sc.name
        );
        let p = priorities(WARNING);
        assert!(p.contains(&"4".to_string()), "[{}] {p:?}", sc.name);
    } else {
        assert!(!warnings.contains(WARNING), "[{}] {warnings}", sc.name);
    }
}

pub(super) fn check_bootstrap(sc: &Scenario, records: &[&str], run: &Run) {
    let calls: Vec<&&str> = records
        .iter()
        .filter(|r| r.starts_with("bootstrap.sh "))
        .collect();
    assert_eq!(
        calls.len(),
        1,
        "bootstrap.sh runs once, not again after the reboot: {records:#?}"
    );
    let rec = calls[0];
    // The agent execs bootstrap.sh from where it ran: the user-data script (cloud-final) or
    // the packaged unit.
    let unit = match sc.by_unit {
        true => "eks-nodeinit.service",
        false => "cloud-final.service",
    };
    assert!(
        rec.lines().next().unwrap().contains(unit),
        "bootstrap.sh should run in {unit}: {rec}"
    );
    let argv: Vec<&str> = rec.lines().filter_map(|l| l.strip_prefix("arg ")).collect();
    let (endpoint, ca, cidr) = sc.cluster();
    assert_eq!(argv[0], sc.config["cluster"]["name"].as_str().unwrap());
    let after = |flag: &str| {
        argv.iter()
            .position(|a| *a == flag)
            .map(|i| argv[i + 1])
            .unwrap_or_else(|| panic!("{flag} missing from {argv:?}"))
    };
    assert_eq!(after("--b64-cluster-ca"), ca);
    assert_eq!(after("--apiserver-endpoint"), endpoint);
    assert_eq!(after("--service-ipv4-cidr"), cidr);
    let extra = after("--kubelet-extra-args");
    for (k, v) in sc.config["labels"].as_object().into_iter().flatten() {
        assert!(
            extra.contains(&format!("{k}={}", v.as_str().unwrap())),
            "{extra}"
        );
    }
    // With kubelet.maxPods, the numbers the node's own files gave (the guest's online CPUs,
    // its DMI vendor) go to the kubelet as flags and bootstrap.sh keeps its own max pods out.
    if !sc.config["kubelet"]["maxPods"].is_null() {
        assert_eq!(after("--use-max-pods"), "false", "{argv:?}");
        let max = pod_capacity_flag(extra, "--max-pods=");
        let reserved = pod_capacity_flag(extra, "--kube-reserved=");
        assert_eq!(max, "29", "m6i.large with secondary IPs: {extra}");
        assert!(reserved.contains("memory=574Mi"), "{extra}");
    }
    // bootstrap.sh takes `--flag value` only: after the cluster name, flags and values
    // alternate and no flag carries `=`.
    assert!(argv.len() % 2 == 1, "{argv:?}");
    assert!(
        argv[1..]
            .iter()
            .step_by(2)
            .all(|f| f.starts_with("--") && !f.contains('=')),
        "{argv:?}"
    );
    check_bootstrap_planned_again(run, &argv);
    check_after_handoff(run);
}

/// The boot that handed off left the step after it (the pause image pinned by the packaged
/// agent, no --root) for the launch-hook unit.
fn check_after_handoff(run: &Run) {
    let job = run.must(1, "file:/run/eks-nodeinit/after-handoff.json");
    let job: serde_json::Value = serde_json::from_str(&job).unwrap();
    assert_eq!(
        job["steps"][0]["argv"],
        serde_json::json!(["/usr/bin/eks-nodeinit", "pin-sandbox-image"]),
        "{job:#}"
    );
}

/// In the boot that handed off, a later run sees the per-boot marker and plans no second exec
/// of bootstrap.sh; after the reboot the plan shows the `argv` bootstrap.sh got.
fn check_bootstrap_planned_again(run: &Run, argv: &[&str]) {
    // In the boot that handed off, a later run sees the per-boot marker and plans no second
    // exec of bootstrap.sh.
    let again: serde_json::Value = serde_json::from_str(&run.must(1, "second-run")).unwrap();
    assert!(
        !again["steps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["kind"] == "handoff" && s["handoff"] == "exec"),
        "boot 1: a second hand-off planned: {again:#}"
    );
    assert!(
        again["warnings"].as_array().unwrap().iter().any(|w| w
            .as_str()
            .unwrap()
            .contains("bootstrap.sh was already exec'd in this boot")),
        "{again:#}"
    );
    // The same argv the plan shows (the CA redacted there): after the reboot (/run is empty)
    // the dry run plans the hand-off again.
    let plan: serde_json::Value = serde_json::from_str(&run.must(2, "second-run")).unwrap();
    let planned: Vec<String> = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["kind"] == "handoff" && s["handoff"] == "exec")
        .unwrap()["argv"]
        .as_array()
        .unwrap()
        .iter()
        .skip(1)
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    for (p, a) in planned.iter().zip(argv) {
        if !p.starts_with("<redacted") {
            assert_eq!(p, a);
        }
    }
    assert_eq!(planned.len(), argv.len());
}

/// The value of one `--flag=value` word in the kubelet's extra arguments.
pub(super) fn pod_capacity_flag<'a>(extra: &'a str, flag: &str) -> &'a str {
    extra
        .split(' ')
        .find_map(|w| w.strip_prefix(flag))
        .unwrap_or_else(|| panic!("{flag} missing from {extra}"))
}

pub(super) fn check_nodeadm(sc: &Scenario, records: &[&str], run: &Run) {
    let dropin = run.file(1, nodeconfig::DROPIN);
    let nc: serde_json::Value = serde_json::from_str(&dropin).unwrap();
    assert_eq!(nc["apiVersion"], "node.eks.aws/v1alpha1");
    assert_eq!(nc["kind"], "NodeConfig");
    // With kubelet.maxPods: the computed max pods and the reservation derived from it, in
    // kubelet.config (nodeadm merges it over its own).
    if !sc.config["kubelet"]["maxPods"].is_null() {
        let k = &nc["spec"]["kubelet"]["config"];
        assert_eq!(k["maxPods"], 29, "m6i.large with secondary IPs: {k}");
        assert_eq!(k["kubeReserved"]["memory"], "574Mi", "{k}");
    }
    let dropin_b64 = base64::engine::general_purpose::STANDARD.encode(&dropin);
    let with_dropin = format!("dropin /etc/eks/nodeadm.d/10-eks-nodeinit.json {dropin_b64}");
    let phase = |unit: &str| -> Vec<&&str> {
        records
            .iter()
            .filter(|r| r.lines().next().unwrap_or("").contains(unit))
            .collect()
    };
    // Both phases run on every boot, read the user data and /etc/eks/nodeadm.d/ (the config
    // phase through the package's drop-in), and pass the stand-in's check of nodeadm's own
    // rule: the merged sources hold all four cluster fields.
    for unit in ["nodeadm-config.service", "nodeadm-run.service"] {
        let runs = phase(unit);
        assert_eq!(runs.len(), 2, "[{}] {unit}: {records:#?}", sc.name);
        for r in &runs {
            assert!(r.contains("arg imds://user-data\n"), "{r}");
            assert!(r.contains("arg file:///etc/eks/nodeadm.d/\n"), "{r}");
            assert!(
                r.lines().any(|l| l.starts_with("result ok")),
                "[{}] {unit} failed:\n{r}",
                sc.name
            );
        }
    }
    // The run phase always finds the agent's final drop-in; the config phase too when the
    // unit ran the agent before it (a user-data script runs it later, in cloud-final).
    for r in phase("nodeadm-run.service") {
        assert!(
            r.contains(&with_dropin),
            "[{}] nodeadm-run started without the agent's drop-in:\n{r}",
            sc.name
        );
    }
    if sc.by_unit {
        for r in phase("nodeadm-config.service") {
            assert!(
                r.contains(&with_dropin),
                "[{}] nodeadm-config started without the agent's drop-in:\n{r}",
                sc.name
            );
        }
    }
    if sc.discovered {
        let (endpoint, ca, cidr) = sc.cluster();
        let c = &nc["spec"]["cluster"];
        assert_eq!(c["name"], CLUSTER);
        assert_eq!(c["apiServerEndpoint"], endpoint.as_str());
        assert_eq!(c["certificateAuthority"], ca.as_str());
        assert_eq!(c["cidr"], cidr.as_str());
    }
    let shutdown = sc.config["kubelet"]["shutdownGracePeriod"]
        .as_str()
        .unwrap();
    assert!(dropin.contains(shutdown), "{dropin}");
}

/// The console's last 80 lines, the newest first: what an assertion on it shows.
pub(super) fn console_tail(console: &str) -> String {
    console
        .lines()
        .rev()
        .take(80)
        .collect::<Vec<_>>()
        .join("\n")
}
