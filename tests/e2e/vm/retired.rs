//! The scenario of a node that cannot join and retires itself (docs/join.md#fail-fast-without-
//! a-launch-hook): the shipped `al2023-name-only.mime` with `verify.onFailure: terminate` and a
//! 10 s `joinDeadline`, run by the packaged units on AL2023, outside any Auto Scaling group, on a
//! guest with no kubelet (it never becomes active), while two other instances of its cluster,
//! launched just before it from the same image into the same subnet, carry `eks-nodeinit/joined`
//! (the host runs and tags them in moto before the boot).
//!
//! The launch-hook unit's proof ends in `deadline`, blamed on the node (kubelet never active, a
//! cause that may be its own, while two like peers joined and no instance retired yet). Before
//! it retires, its cause is one line on the serial console (what `aws ec2 get-console-output`
//! keeps) and the instance tag `eks-nodeinit/retired`; then `TerminateInstances` on its own id,
//! once. moto's termination stops nothing here, so the reporter goes on and reads the verdict.

use super::*;

/// What the guest's reporter looks for to wait for the launch-hook unit's end.
const MARKER: &str = "etc/e2e/retire";

pub(super) fn is_retired(name: &str) -> bool {
    name == "al2023-retired"
}

/// The scenario's `verify` in the agent's part of the user data.
pub(super) fn edit_user_data(sc: &mut Scenario) {
    if is_retired(sc.name) {
        sc.config["verify"] = serde_json::json!({"onFailure": "terminate", "joinDeadline": "10s"});
        rewrite_config(sc);
    }
}

/// The reporter waits for the proof's end and reports `status`.
pub(super) fn prepare(root: &Path) {
    guest::write(&root.join(MARKER), "", 0o644);
}

/// Before any scenario's boot: for this one, two other instances of the cluster marked joined
/// (one like peer is not enough to blame the node). How many requests moto had served then.
pub(super) fn before_boot(sc: &Scenario, ec2: &Ec2, rt: &tokio::runtime::Runtime) -> usize {
    if is_retired(sc.name) {
        for _ in 0..2 {
            other_joined(ec2, rt);
        }
    }
    common::recorded_bodies(&ec2.recording).len()
}

/// Another running instance of the cluster, which its own agent marked joined.
pub(super) fn other_joined(ec2: &Ec2, rt: &tokio::runtime::Runtime) -> String {
    rt.block_on(async {
        let (id, _) = run_instance(&ec2.client).await;
        let tag = aws_sdk_ec2::types::Tag::builder()
            .key("eks-nodeinit/joined")
            .value(CLUSTER)
            .build();
        ec2.client
            .create_tags()
            .resources(&id)
            .tags(tag)
            .send()
            .await
            .unwrap();
        id
    })
}

/// The console's line starting `line` (the cause), which comes before the unit says the node
/// retired itself.
pub(super) fn said_first<'a>(name: &str, console: &'a str, line: &str) -> &'a str {
    let said = console.find(line);
    let done = console.find("the node retired itself: TerminateInstances");
    assert!(
        said.is_some() && done.is_some() && said < done,
        "[{name}] the cause on the console first:\n{}",
        checks::console_tail(console)
    );
    console[said.unwrap_or(0)..].lines().next().unwrap_or("")
}

/// The calls that retire a node moto served after the boot began: the `eks-nodeinit/retired`
/// tag, TerminateInstances, SetInstanceHealth, each as (action, its form body).
pub(super) fn retiring_calls(ec2: &Ec2, after: usize) -> Vec<(String, String)> {
    let retiring = |(a, b): &(String, String)| {
        (a == "CreateTags" && b.contains("eks-nodeinit%2Fretired"))
            || a == "TerminateInstances"
            || a == "SetInstanceHealth"
    };
    calls(ec2, after).into_iter().filter(retiring).collect()
}

/// The EC2 calls moto served after the boot began, each as (action, its form body).
fn calls(ec2: &Ec2, after: usize) -> Vec<(String, String)> {
    common::recorded_bodies(&ec2.recording)
        .into_iter()
        .skip(after)
        .filter_map(|b| {
            let action = b.split('&').find_map(|kv| kv.strip_prefix("Action="))?;
            Some((action.to_string(), b.clone()))
        })
        .collect()
}

/// The scenario's checks (module comment); `before`: the requests moto had served before the
/// boot.
pub(super) fn check(
    sc: &Scenario,
    run: &Run,
    (ec2, rt): (&Ec2, &tokio::runtime::Runtime),
    console: &str,
    before: usize,
) {
    let name = sc.name;
    let id = &ec2.instance_id;
    let r: serde_json::Value = serde_json::from_str(&run.file(1, REPORT_PATH)).unwrap();
    let join = &r["join"];
    assert_eq!(join["verdict"], "deadline", "[{name}] {join:#}");
    assert_eq!(join["blame"], "node", "[{name}] {join:#}");
    let retired = join["retired"].as_str().unwrap_or("");
    assert!(
        retired.starts_with("TerminateInstances"),
        "[{name}] {join:#}"
    );
    let line = format!("eks-nodeinit: retiring {id}: verdict deadline: ");
    let cause = said_first(name, console, &line);
    assert!(cause.contains("kubelet"), "[{name}] {cause}");
    // The tag, then the termination of its own id, once; nothing else retires.
    let mine = retiring_calls(ec2, before);
    let actions: Vec<&str> = mine.iter().map(|(a, _)| a.as_str()).collect();
    assert_eq!(
        actions,
        ["CreateTags", "TerminateInstances"],
        "[{name}] {mine:?}"
    );
    assert!(
        mine[1].1.contains(&format!("InstanceId.1={id}")),
        "[{name}] its own id: {}",
        mine[1].1
    );
    let tags = ec2.tags(rt).unwrap();
    let tag = tags.get("eks-nodeinit/retired").map_or("", String::as_str);
    assert!(
        tag.starts_with("deadline: ") && tag.chars().count() <= 256,
        "[{name}] the tag: {tags:?}"
    );
    let status = run.must(1, "status");
    assert!(
        status.contains("verdict: deadline") && status.contains("retired: TerminateInstances"),
        "[{name}] {status}"
    );
    eprintln!(
        "[{name}] passed: first report at {:.0} s; on the console: {cause}",
        run.boot1_secs
    );
}
