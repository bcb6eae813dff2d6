//! Failing fast where no launch hook waits (`verify.onFailure`, docs/join.md): the proof of a
//! node whose API server never answers ends in `deadline`, and its blame decides. Against moto
//! (tests/moto/lifecycle_actions.py logs every SetInstanceHealth, TerminateInstances and
//! CreateTags in the order moto served them): in a group without a hook the node sets itself
//! `Unhealthy` once; outside a group it terminates itself once; a cause the cluster shares, or
//! no other instance of its group joined (the group's guard), calls neither. The cause is
//! tagged before either, and its line is on the console (the root's `/dev/console`).

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::join_proof::{
    complete_hook, imds, join_job, lines, report, stalling, write, DEADLINE, INSTANCE,
};
use crate::common;
use common::dbus::{serve_unit_states, start_bus};
use eks_nodeinit::instance::lifecycle::{CompleteAfter, LaunchHookJob, LAUNCH_HOOK_JOB};
use eks_nodeinit::verify::proof::JOIN_JOB;

const CLUSTER: &str = "prod";

/// moto logging the calls, its instances: `n` in group `asg-nodes` (no hook the node
/// completes), or `n` outside any group.
struct World {
    moto: common::Moto,
    ids: Vec<String>,
    calls: PathBuf,
    _dir: tempfile::TempDir,
}

fn world(in_group: bool, deny_terminate: bool) -> Option<World> {
    let dir = tempfile::tempdir().unwrap();
    let calls = dir.path().join("calls.jsonl");
    let script = common::manifest_dir().join("tests/moto/lifecycle_actions.py");
    let deny = if deny_terminate { "1" } else { "0" };
    let moto = common::start_moto_as(
        &[script.to_str().unwrap()],
        &[
            (
                "MOTO_LIFECYCLE_LOG",
                dir.path().join("c.jsonl").to_str().unwrap(),
            ),
            ("MOTO_CALL_LOG", calls.to_str().unwrap()),
            ("MOTO_DENY_TERMINATE", deny),
        ],
    )?;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let ids = rt.block_on(async {
        let conf = common::moto_sdk_config(&moto.url, "us-east-1").await;
        if in_group {
            let a =
                common::group_with_launch_hook(&conf, "asg-nodes", "other", "us-east-1a", 2).await;
            let out = a.describe_auto_scaling_instances().send().await.unwrap();
            let ids = out.auto_scaling_instances().iter();
            return ids.map(|i| i.instance_id().unwrap().to_string()).collect();
        }
        let ec2 = aws_sdk_ec2::Client::new(&conf);
        let out = ec2
            .run_instances()
            .image_id("ami-12c6146b")
            .min_count(2)
            .max_count(2)
            .send()
            .await
            .unwrap();
        let ids = out.instances().iter();
        ids.map(|i| i.instance_id().unwrap().to_string())
            .collect::<Vec<_>>()
    });
    Some(World {
        moto,
        ids,
        calls,
        _dir: dir,
    })
}

impl World {
    /// The other instance marked joined by its own agent.
    fn other_joined(&self) {
        self.ec2(|c, id| async move {
            let tag = aws_sdk_ec2::types::Tag::builder()
                .key("eks-nodeinit/joined")
                .value(CLUSTER)
                .build();
            c.create_tags()
                .resources(id)
                .tags(tag)
                .send()
                .await
                .unwrap();
        });
        // Marking is not the node's call: the log starts after it.
        std::fs::remove_file(&self.calls).unwrap();
    }

    fn ec2<F, Fut>(&self, f: F)
    where
        F: FnOnce(aws_sdk_ec2::Client, String) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let conf = common::moto_sdk_config(&self.moto.url, "us-east-1").await;
            f(aws_sdk_ec2::Client::new(&conf), self.ids[1].clone()).await
        });
    }

    /// The node's calls, as moto logged them: (action, instance) each.
    fn calls(&self) -> Vec<(String, String)> {
        lines(&self.calls)
            .iter()
            .map(|c| {
                let id = match c["Action"].as_str().unwrap() {
                    "SetInstanceHealth" => c["InstanceId"].clone(),
                    "TerminateInstances" => c["InstanceIds"][0].clone(),
                    _ => c["Resources"][0].clone(),
                };
                (
                    c["Action"].as_str().unwrap().into(),
                    id.as_str().unwrap().into(),
                )
            })
            .collect()
    }
}

/// The proof of the world's first instance against an API server that never answers, the job
/// retiring it as `retire` says: the run's root, the unit's StartUnit calls.
fn failed_proof(w: &World, group: Option<&str>, retire: &str) -> (tempfile::TempDir, Vec<String>) {
    failed_proof_with(w, group, retire, None)
}

/// [`failed_proof`], the launch hook `hook` of the world's group waiting when given.
fn failed_proof_with(
    w: &World,
    group: Option<&str>,
    retire: &str,
    hook: Option<&str>,
) -> (tempfile::TempDir, Vec<String>) {
    let bus = start_bus().unwrap();
    let cell = std::sync::Arc::new(std::sync::Mutex::new("active".to_string()));
    let started = serve_unit_states(&bus.address, &[("kubelet.service", cell)]);
    let imds = imds();
    let api = stalling();
    let root = tempfile::tempdir().unwrap();
    // The node's /dev, where its console is.
    std::fs::create_dir(root.path().join("dev")).unwrap();
    let endpoint = format!("https://127.0.0.1:{}", api.port);
    join_job(root.path(), &imds.url(), &endpoint, None, (DEADLINE, group));
    let path = root.path().join(&JOIN_JOB[1..]);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut job: Value = serde_json::from_str(&text.replace(INSTANCE, &w.ids[0])).unwrap();
    job["retire"] = json!(retire);
    write(root.path(), JOIN_JOB, &job.to_string());
    if let Some(hook) = hook {
        let job = LaunchHookJob {
            hook: hook.into(),
            group: group.map(String::from),
            instance_id: w.ids[0].clone(),
            region: "us-east-1".into(),
            state: "InService".into(),
            after: CompleteAfter::Kubelet,
            aws: Default::default(),
        };
        write(root.path(), LAUNCH_HOOK_JOB, &job.to_text());
    }
    let env = [
        ("AWS_ENDPOINT_URL_AUTO_SCALING", w.moto.url.as_str()),
        ("AWS_ENDPOINT_URL_EC2", w.moto.url.as_str()),
    ];
    let (out, _) = complete_hook(root.path(), &bus.address, &env, &[]);
    assert!(!out.status.success(), "the node did not join");
    let started = started
        .lock()
        .unwrap()
        .iter()
        .map(|c| c.1.clone())
        .collect();
    (root, started)
}

fn console(root: &Path) -> String {
    std::fs::read_to_string(root.join("dev/console")).unwrap_or_default()
}

/// The tag first, on the node's own instance: its value the verdict and the cause.
fn assert_tagged_first(w: &World, calls: &[(String, String)]) {
    assert_eq!(
        calls[0],
        ("CreateTags".into(), w.ids[0].clone()),
        "{calls:?}"
    );
    let log = lines(&w.calls);
    let tag = &log[0]["Tags"][0];
    assert_eq!(tag["Key"], "eks-nodeinit/retired");
    let value = tag["Value"].as_str().unwrap();
    assert!(
        value.starts_with("deadline: no Ready Node within 10s"),
        "{value}"
    );
    assert!(value.chars().count() <= 256, "{value}");
}

#[test]
fn in_a_group_without_a_hook_a_node_of_its_own_cause_is_set_unhealthy_once() {
    let Some(w) = world(true, false) else { return };
    w.other_joined();
    let (root, _) = failed_proof(&w, Some("asg-nodes"), "unhealthy");
    let calls = w.calls();
    assert_tagged_first(&w, &calls);
    assert_eq!(
        calls[1..],
        [("SetInstanceHealth".into(), w.ids[0].clone())],
        "{calls:?}"
    );
    let set = &lines(&w.calls)[1];
    assert_eq!(
        (
            set["HealthStatus"].as_str(),
            set["ShouldRespectGracePeriod"].as_bool()
        ),
        (Some("Unhealthy"), Some(false))
    );
    let line = console(root.path());
    assert_eq!(line.lines().count(), 1, "{line}");
    assert!(
        line.starts_with(&format!(
            "eks-nodeinit: retiring {}: verdict deadline: no Ready Node",
            w.ids[0]
        )),
        "{line}"
    );
    let join = &report(root.path())["join"];
    assert_eq!(join["blame"], "node", "{join:#}");
    assert!(
        join["retired"]
            .as_str()
            .unwrap()
            .starts_with("SetInstanceHealth Unhealthy"),
        "{join:#}"
    );
    let status = common::run(common::cmd().args(["status", "--root"]).arg(root.path()));
    assert!(
        stdout_of(&status).contains("retired: SetInstanceHealth Unhealthy"),
        "{}",
        stdout_of(&status)
    );
}

fn stdout_of(o: &std::process::Output) -> String {
    common::stdout(o)
}

#[test]
fn outside_a_group_a_node_of_its_own_cause_terminates_itself_once() {
    let Some(w) = world(false, false) else { return };
    w.other_joined();
    let (root, started) = failed_proof(&w, None, "terminate");
    let calls = w.calls();
    assert_tagged_first(&w, &calls);
    assert_eq!(
        calls[1..],
        [("TerminateInstances".into(), w.ids[0].clone())],
        "{calls:?}"
    );
    assert!(started.is_empty(), "no power-off: {started:?}");
    let join = &report(root.path())["join"];
    assert!(
        join["retired"]
            .as_str()
            .unwrap()
            .starts_with("TerminateInstances"),
        "{join:#}"
    );
}

#[test]
fn a_refused_termination_powers_off_only_where_that_terminates() {
    for (behaviour, off) in [("terminate", true), ("stop", false)] {
        let Some(w) = world(false, true) else { return };
        w.other_joined();
        w.ec2(|c, _| {
            let id = w.ids[0].clone();
            async move {
                use aws_sdk_ec2::types::InstanceAttributeName;
                c.modify_instance_attribute()
                    .instance_id(id)
                    .attribute(InstanceAttributeName::InstanceInitiatedShutdownBehavior)
                    .value(behaviour)
                    .send()
                    .await
                    .unwrap();
            }
        });
        let (root, started) = failed_proof(&w, None, "terminate");
        let calls = w.calls();
        assert_tagged_first(&w, &calls);
        assert_eq!(calls[1].0, "TerminateInstances");
        let retired = report(root.path())["join"]["retired"]
            .as_str()
            .unwrap()
            .to_string();
        match off {
            true => {
                assert_eq!(started, ["poweroff.target"], "{behaviour}");
                assert!(retired.starts_with("powered off"), "{retired}");
            }
            false => {
                assert!(started.is_empty(), "{started:?}");
                assert!(
                    retired.contains("its shutdown behaviour is `stop`"),
                    "{retired}"
                );
                assert!(retired.contains("ec2:TerminateInstances"), "{retired}");
            }
        }
    }
}

#[test]
fn a_cause_the_cluster_shares_or_a_group_with_none_joined_retires_nothing() {
    // No other instance of the group joined: the guard holds, whatever is asked.
    let Some(w) = world(true, false) else { return };
    let (root, started) = failed_proof(&w, Some("asg-nodes"), "unhealthy");
    assert!(w.calls().is_empty(), "{:?}", w.calls());
    assert!(started.is_empty() && console(root.path()).is_empty());
    let join = &report(root.path())["join"];
    assert_eq!(join["blame"], "cluster", "{join:#}");
    assert!(join.get("retired").is_none(), "{join:#}");
    // Outside a group with none of the cluster's instances joined: the same.
    let Some(w) = world(false, false) else { return };
    let (root, _) = failed_proof(&w, None, "terminate");
    assert!(w.calls().is_empty(), "{:?}", w.calls());
    assert_eq!(report(root.path())["join"]["blame"], "cluster");
}

#[test]
fn a_launch_the_hook_abandons_is_not_retired_again() {
    // The group's launch hook waits: ABANDON replaces the instance, and SetInstanceHealth
    // would only be a second, racing retirement.
    let Some(w) = world(true, false) else { return };
    w.other_joined();
    let (root, _) = failed_proof_with(&w, Some("asg-nodes"), "unhealthy", Some("other"));
    let join = &report(root.path())["join"];
    assert_eq!(join["hook"], "ABANDON (other)", "{join:#}");
    assert!(join.get("retired").is_none(), "{join:#}");
    assert!(w.calls().is_empty(), "{:?}", w.calls());
}
