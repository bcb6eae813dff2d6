//! The hardened-AMI scenario of the VM e2e (docs/hardening.md): the shipped
//! `al2023-name-only.mime` with `verify.hardening: fail` added (the join's own preflight stays in
//! its default `warn` mode), run by the packaged unit on AL2023, on a guest hardened as a STIG or
//! CIS image is: a sysctl file read after the AMI's `99-amazon.conf` sets `kernel.panic = 0`, and
//! /etc/fstab mounts a tmpfs `noexec` at /opt. systemd applies both before the agent's unit
//! starts: systemd-sysctl.service and local-fs.target (the fstab generator's opt.mount) are
//! ordered before sysinit.target, which the unit's default dependencies order it after.
//!
//! First boot: the checks before any change fail on both causes; nothing is changed, no
//! hand-off, the unit fails (exit 1) and is not marked done, and each cause is on the console.
//! The reporter then runs the scenario's step between the boots (/etc/e2e/between-boots):
//! `eks-nodeinit status` as an operator reads it, then the fix a corrected AMI carries (the
//! sysctl file and the fstab line removed). Second boot: the unit runs again, the four checks
//! pass, and the node hands off to the recording nodeadm.

use super::*;

/// The hardening's sysctl file: after the AMI's `99-amazon.conf`, before the agent's
/// `99-zz-eks-nodeinit.conf` (read after every file an AMI ships, docs/hardening.md).
const STIG_SYSCTL: &str = "/etc/sysctl.d/99-stig.conf";
/// The hardening's mount: /opt a tmpfs without exec (the guest's /opt is empty).
const NOEXEC_OPT: &str = "tmpfs /opt tmpfs rw,nosuid,nodev,noexec,mode=0755 0 0";
const DONE: &str = "/var/lib/eks-nodeinit/done";

/// The step between the boots, run by the reporter after the first boot's facts: what the
/// failed boot left as `status` shows it and the mount as the kernel has it, then the fix.
fn between_boots() -> String {
    format!(
        r#"#!/bin/sh
# The hardened scenario's step between the boots (tests/e2e/vm/hardened.rs).
echo "--- eks-nodeinit status"
eks-nodeinit status
echo "--- /opt in mountinfo"
grep ' /opt ' /proc/self/mountinfo
echo "--- the fix"
rm {STIG_SYSCTL} && sed -i '\| /opt |d' /etc/fstab && echo "fixed: no STIG sysctl file, no /opt line in /etc/fstab"
cat /etc/fstab
"#
    )
}

pub(super) fn is_hardened(name: &str) -> bool {
    name == "al2023-hardened"
}

/// The user data with `verify.hardening: fail` in the agent's part (this scenario only).
pub(super) fn edit_user_data(sc: &mut Scenario) {
    if !is_hardened(sc.name) {
        return;
    }
    sc.config["verify"] = serde_json::json!({"hardening": "fail"});
    rewrite_config(sc);
}

/// The guest hardened: the AMI's kernel settings and the STIG file after them, /opt noexec in
/// /etc/fstab, the reporter reading `kernel.panic` on both boots, and the step between the boots.
pub(super) fn prepare(root: &Path) {
    let text = |to: &str, body: &str| guest::write(&root.join(to), body, 0o644);
    text("etc/sysctl.d/99-amazon.conf", join::AMI_SYSCTLS);
    text(
        STIG_SYSCTL.trim_start_matches('/'),
        "# STIG: no automatic reboot after a kernel panic\nkernel.panic = 0\n",
    );
    let fstab = std::fs::read_to_string(root.join("etc/fstab")).unwrap();
    text("etc/fstab", &format!("{fstab}{NOEXEC_OPT}\n"));
    let keys = std::fs::read_to_string(root.join("etc/e2e/sysctls")).unwrap();
    text("etc/e2e/sysctls", &format!("{keys}kernel.panic\n"));
    guest::write(&root.join("etc/e2e/between-boots"), &between_boots(), 0o755);
}

fn report(run: &Run, boot: u32) -> serde_json::Value {
    serde_json::from_str(&run.file(boot, REPORT_PATH))
        .unwrap_or_else(|e| panic!("boot {boot}: report.json: {e}\n{}", run.debug(boot)))
}

/// The scenario's checks (module comment).
pub(super) fn check(sc: &Scenario, run: &Run, ec2: &Ec2, console: &str) {
    checks::check_clean_boots(sc, run);
    check_stopped(sc, run);
    check_nothing_changed(sc, run);
    check_causes_logged(sc, run, console);
    check_fixed(sc, run, ec2);
    eprintln!(
        "[{}] passed: first report at {:.0} s, two boots {:.0} s; between the boots:\n{}",
        sc.name,
        run.boot1_secs,
        run.total_secs,
        run.must(1, "between-boots")
    );
}

/// The first boot: the hardening in force, both causes in the report with their fixes, the
/// verdict `checks-failed`, no hand-off, the unit failed; `status` leads with a cause.
fn check_stopped(sc: &Scenario, run: &Run) {
    let name = sc.name;
    let between = run.must(1, "between-boots");
    assert_eq!(
        run.must(1, "sysctl:kernel.panic").trim(),
        "0",
        "[{name}] boot 1: the STIG file's kernel.panic live"
    );
    // mountinfo: the mount point is the fifth field, its per-mount options the sixth.
    let opt_noexec = between.lines().any(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        f.get(4) == Some(&"/opt")
            && f.get(5)
                .is_some_and(|o| o.split(',').any(|o| o == "noexec"))
    });
    assert!(
        opt_noexec,
        "[{name}] boot 1: /opt mounted noexec:\n{between}"
    );
    let r = report(run, 1);
    let join = &r["join"];
    assert_eq!(join["verdict"], "checks-failed", "[{name}] {r:#}");
    assert_eq!(r["handoff"], "", "[{name}] no hand-off: {r:#}");
    // Every check's result is in the report's `checks`, whichever setting planned it.
    let checks: Vec<&serde_json::Value> = r["checks"].as_object().unwrap().values().collect();
    // Only the checks before the changes ran: the join's own (beside the changes) never did.
    assert!(
        checks.iter().all(|c| c["phase"] == "first"),
        "[{name}] {r:#}"
    );
    let mut failed: Vec<&serde_json::Value> = checks
        .into_iter()
        .filter(|c| c["result"] == "failed")
        .collect();
    failed.sort_by_key(|c| c["cause"].as_str().unwrap_or("").to_string());
    let causes: Vec<&str> = failed.iter().filter_map(|c| c["cause"].as_str()).collect();
    assert_eq!(causes, ["kernel-defaults", "noexec"], "[{name}] {join:#}");
    let detail = |i: usize| failed[i]["detail"].as_str().unwrap_or("");
    // The AMI's other two settings applied; only the STIG file's value is wrong.
    assert!(
        detail(0).starts_with("kernel.panic is 0 (live), not 10;"),
        "[{name}] {join:#}"
    );
    assert!(
        detail(1).contains("/opt/cni/bin is on the noexec mount /opt ("),
        "[{name}] {join:#}"
    );
    for (c, fix) in failed.iter().zip(["/etc/sysctl.d", "without noexec"]) {
        assert!(
            c["todo"].as_str().is_some_and(|t| t.contains(fix)),
            "[{name}] the fix ({fix}): {c:#}"
        );
    }
    let u1 = run.unit(1, "eks-nodeinit.service");
    assert_eq!(u1["ActiveState"], "failed", "[{name}] {u1:?}");
    assert_eq!(u1["Result"], "exit-code", "[{name}] {u1:?}");
    assert_eq!(u1["ExecMainStatus"], "1", "[{name}] {u1:?}");
    let cause = between.lines().find(|l| l.starts_with("cause: "));
    assert!(
        between.contains("\nverdict: checks-failed\n")
            && cause.is_some_and(|l| l.starts_with("cause: kernel settings")),
        "[{name}] `eks-nodeinit status` leads with the cause:\n{between}"
    );
    assert!(
        between.contains("\nfixed: "),
        "[{name}] the fix between the boots:\n{between}"
    );
}

/// The first boot changed nothing: none of the agent's files, not the configured sysctls, no
/// tag, no first-boot marker; nodeadm's config phase found no drop-in (and failed, as nodeadm
/// does on user data without a NodeConfig), and its run phase, which requires it, never ran.
fn check_nothing_changed(sc: &Scenario, run: &Run) {
    let name = sc.name;
    for path in [
        nodeconfig::DROPIN,
        sysctls::PERSIST_PATH,
        logind::DROPIN_PATH,
        DONE,
    ] {
        assert!(
            run.get(1, &format!("file:{path}")).is_none(),
            "[{name}] boot 1: {path} written"
        );
    }
    for (k, v) in sc.config["sysctls"].as_object().into_iter().flatten() {
        assert_ne!(
            run.must(1, &format!("sysctl:{k}")).trim(),
            v.to_string(),
            "[{name}] boot 1: {k} set"
        );
    }
    assert_eq!(
        run.create_tags_after_boot1, 0,
        "[{name}] no tag in the first boot"
    );
    let records = run.handoff_records(1);
    let of = |unit: &str| -> Vec<&String> {
        records
            .iter()
            .filter(|r| r.lines().next().unwrap_or("").contains(unit))
            .collect()
    };
    assert!(
        of("nodeadm-run.service").is_empty(),
        "[{name}] boot 1: nodeadm-run ran: {records:#?}"
    );
    for r in of("nodeadm-config.service") {
        assert!(
            !r.contains("\ndropin ") && r.contains("\nresult error "),
            "[{name}] boot 1: nodeadm-config without the drop-in:\n{r}"
        );
    }
}

/// Each cause and the run's error: on the serial console (what `aws ec2 get-console-output`
/// shows) and in the unit's journal at error priority.
fn check_causes_logged(sc: &Scenario, run: &Run, console: &str) {
    let name = sc.name;
    let entries: Vec<serde_json::Value> = run
        .must(1, "journal-json")
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    for (a, b) in [
        (
            "kernel settings protectKernelDefaults demands (kernel-defaults)",
            "kernel.panic is 0 (live), not 10",
        ),
        (
            "programs executable where the node runs them (noexec)",
            "/opt/cni/bin is on the noexec mount /opt",
        ),
        (
            "2 checks before the changes failed",
            "no hand-off, nothing was changed",
        ),
    ] {
        let on_console = console.lines().find(|l| l.contains(a) && l.contains(b));
        assert!(
            on_console.is_some(),
            "[{name}] `{a}` … `{b}` on the console:\n{}",
            checks::console_tail(console)
        );
        let at_error = entries.iter().any(|e| {
            e["_SYSTEMD_UNIT"] == "eks-nodeinit.service"
                && e["PRIORITY"] == "3"
                && e["MESSAGE"]
                    .as_str()
                    .is_some_and(|m| m.contains(a) && m.contains(b))
        });
        assert!(
            at_error,
            "[{name}] `{a}` at error priority in the unit's journal:\n{}",
            run.must(1, "journal")
        );
    }
}

/// The second boot, the hardening gone: the unit ran again, the four checks before the changes
/// passed, the node handed off (the drop-in, both nodeadm phases with it, after the agent), the
/// configured sysctls live, the tag set once, and nothing left to do.
fn check_fixed(sc: &Scenario, run: &Run, ec2: &Ec2) {
    let name = sc.name;
    assert_eq!(run.must(2, "sysctl:kernel.panic").trim(), "10", "[{name}]");
    let u2 = run.unit(2, "eks-nodeinit.service");
    assert_eq!(u2["ConditionResult"], "yes", "[{name}] ran again: {u2:?}");
    assert_eq!(u2["Result"], "success", "[{name}] {u2:?}");
    assert_eq!(u2["ExecMainStatus"], "0", "[{name}] {u2:?}");
    assert!(run.get(2, &format!("file:{DONE}")).is_some(), "[{name}]");
    let r = report(run, 2);
    let first: Vec<&serde_json::Value> = r["checks"]
        .as_object()
        .unwrap()
        .values()
        .filter(|c| c["phase"] == "first")
        .collect();
    assert_eq!(first.len(), 4, "[{name}] the four checks: {r:#}");
    assert!(
        first.iter().all(|c| c["result"] == "passed"),
        "[{name}] {r:#}"
    );
    assert!(
        r["handoff"]
            .as_str()
            .unwrap_or("")
            .starts_with("NodeConfig at"),
        "[{name}] {r:#}"
    );
    check_handed_off(sc, run);
    for (k, v) in sc.config["sysctls"].as_object().into_iter().flatten() {
        let live = run.must(2, &format!("sysctl:{k}"));
        assert_eq!(live.trim(), v.to_string(), "[{name}] boot 2: {k}");
    }
    assert_eq!(
        ec2.count("CreateTags"),
        1,
        "[{name}] one tag, in the second boot: {:?}",
        ec2.actions()
    );
    let plan: serde_json::Value = serde_json::from_str(&run.must(2, "second-run")).unwrap();
    assert_eq!(plan["changes"], 0, "[{name}] boot 2: {plan:#}");
}

/// The second boot's hand-off: the complete NodeConfig drop-in, and nodeadm's config and run
/// phases each once with it, started after the agent's unit exited.
fn check_handed_off(sc: &Scenario, run: &Run) {
    let name = sc.name;
    let dropin = run.file(2, nodeconfig::DROPIN);
    let nc: serde_json::Value = serde_json::from_str(&dropin).unwrap();
    assert_eq!(nc["kind"], "NodeConfig", "[{name}] {nc:#}");
    let (endpoint, _, cidr) = sc.cluster();
    let c = &nc["spec"]["cluster"];
    assert_eq!(c["name"], CLUSTER, "[{name}] {nc:#}");
    assert_eq!(c["apiServerEndpoint"], endpoint.as_str(), "[{name}]");
    assert_eq!(c["cidr"], cidr.as_str(), "[{name}]");
    let b64 = base64::engine::general_purpose::STANDARD.encode(&dropin);
    let with_dropin = format!("dropin {} {b64}\n", nodeconfig::DROPIN);
    let earlier = run.handoff_records(1).len();
    let records = run.handoff_records(2);
    let exited: u64 = run.unit(2, "eks-nodeinit.service")["ExecMainExitTimestampMonotonic"]
        .parse()
        .unwrap();
    for unit in ["nodeadm-config.service", "nodeadm-run.service"] {
        let runs: Vec<&String> = records[earlier..]
            .iter()
            .filter(|r| r.lines().next().unwrap_or("").contains(unit))
            .collect();
        assert_eq!(runs.len(), 1, "[{name}] boot 2: {unit}: {records:#?}");
        assert!(
            runs[0].contains(&with_dropin) && runs[0].contains("\nresult ok"),
            "[{name}] boot 2: {unit} with the agent's drop-in:\n{}",
            runs[0]
        );
        let started: u64 = run.unit(2, unit)["ExecMainStartTimestampMonotonic"]
            .parse()
            .unwrap();
        assert!(
            exited > 0 && exited <= started,
            "[{name}] boot 2: the agent exited at {exited} µs, {unit} started at {started} µs"
        );
    }
}
