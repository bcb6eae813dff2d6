//! The node's own cause, two like peers joined: it retires, once, saying why.

use super::*;

#[test]
fn a_node_whose_kubelet_fails_while_like_peers_joined_is_set_unhealthy_once() {
    let Some(w) = world(true, false, 3) else {
        return;
    };
    w.joined(2);
    let (root, units) = failed_proof(&w, Run::default());
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
    // kubelet stopped before the retirement: a retiring node takes no pods.
    assert!(stopped(&units), "{units:?}");
    let line = console(root.path());
    assert_eq!(line.lines().count(), 1, "{line}");
    assert!(
        line.starts_with(&format!(
            "eks-nodeinit: retiring {}: verdict deadline: kubelet.service is failed",
            w.ids[0]
        )),
        "{line}"
    );
    let join = join_of(root.path());
    assert_eq!(join["blame"], "node", "{join:#}");
    let causes = join["causes"].to_string();
    assert!(
        causes.contains("while 2 like instances of its group"),
        "{causes}"
    );
    assert!(causes.contains("retirement 1 of 2"), "{causes}");
    assert!(
        join["retired"]
            .as_str()
            .unwrap()
            .starts_with("SetInstanceHealth Unhealthy"),
        "{join:#}"
    );
    let status = common::run(common::cmd().args(["status", "--root"]).arg(root.path()));
    let text = common::stdout(&status);
    assert!(
        text.contains("retired: SetInstanceHealth Unhealthy"),
        "{text}"
    );
}

#[test]
fn outside_a_group_a_node_of_its_own_cause_terminates_itself_once() {
    let Some(w) = world(false, false, 3) else {
        return;
    };
    w.joined(2);
    let run = Run {
        group: None,
        retire: "terminate",
        ..Run::default()
    };
    let (root, units) = failed_proof(&w, run);
    let calls = w.calls();
    assert_tagged_first(&w, &calls);
    assert_eq!(
        calls[1..],
        [("TerminateInstances".into(), w.ids[0].clone())],
        "{calls:?}"
    );
    assert_eq!(units, [KUBELET_STOPPED].map(|(a, b)| (a.into(), b.into())));
    let join = join_of(root.path());
    let retired = join["retired"].as_str().unwrap();
    assert!(retired.starts_with("TerminateInstances"), "{join:#}");
    assert!(
        join["causes"]
            .to_string()
            .contains("like instances of its cluster"),
        "{join:#}"
    );
}

#[test]
fn a_refused_termination_is_tried_again_and_powers_off_only_where_that_terminates() {
    for (behaviour, off) in [("terminate", true), ("stop", false)] {
        let Some(w) = world(false, true, 3) else {
            return;
        };
        w.joined(2);
        w.ec2(|c| {
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
        let _ = std::fs::remove_file(&w.calls);
        let run = Run {
            group: None,
            retire: "terminate",
            extra: &["--retire-attempts", "3", "--retire-retry-ms", "100"],
            ..Run::default()
        };
        let (root, units) = failed_proof(&w, run);
        let calls = w.calls();
        assert!(!calls.is_empty(), "{:#}", join_of(root.path()));
        assert_tagged_first(&w, &calls);
        let terminations = calls.iter().filter(|c| c.0 == "TerminateInstances");
        let retired = join_of(root.path())["retired"]
            .as_str()
            .unwrap()
            .to_string();
        let starts: Vec<_> = units.iter().filter(|u| u.0 == "StartUnit").collect();
        match off {
            true => {
                assert_eq!(terminations.count(), 1, "{calls:?}");
                assert_eq!(starts.len(), 1, "{units:?}");
                assert_eq!(starts[0].1, "poweroff.target");
                assert!(retired.starts_with("powered off"), "{retired}");
            }
            false => {
                // Refused every time: tried 3 times, as asked, then said.
                assert_eq!(terminations.count(), 3, "{calls:?}");
                assert!(starts.is_empty(), "{units:?}");
                assert!(
                    retired.contains("its shutdown behaviour is `stop`"),
                    "{retired}"
                );
                assert!(retired.contains("tried 3 times"), "{retired}");
                assert!(retired.contains("ec2:TerminateInstances"), "{retired}");
            }
        }
    }
}

/// A Node NotReady for a reason of its own while two like peers joined retires; NotReady because
/// the network plugin is not (a CNI or a subnet out of addresses) is the fleet's, whatever joined.
#[test]
fn a_node_not_ready_retires_for_its_own_reason_and_never_for_the_network_plugin() {
    let Some(w) = world(true, false, 3) else {
        return;
    };
    w.joined(2);
    let own = Run {
        kubelet: "active",
        api: Api::NotReady("PLEG is not healthy: pleg was last seen active 3m0s ago"),
        ..Run::default()
    };
    let (root, units) = failed_proof(&w, own);
    let join = join_of(root.path());
    assert_eq!(
        (join["verdict"].as_str(), join["blame"].as_str()),
        (Some("not-ready"), Some("node")),
        "{join:#}"
    );
    let calls = w.calls();
    assert_eq!(calls[0].0, "CreateTags", "{calls:?}");
    assert_eq!(
        calls[1..],
        [("SetInstanceHealth".into(), w.ids[0].clone())],
        "{calls:?}"
    );
    assert!(stopped(&units), "{units:?}");
    let _ = std::fs::remove_file(&w.calls);
    let cni = Run {
        kubelet: "active",
        api: Api::NotReady("container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"),
        ..Run::default()
    };
    let (root, units) = failed_proof(&w, cni);
    assert_kept(&w, root.path(), &units, "the network plugin is not ready");
    assert_eq!(join_of(root.path())["verdict"], "not-ready");
}

/// The initialisation deadline's verdict: another reporter's condition set `False` on a Node that
/// joined is the node's own once two like peers initialised (and retires it by its health, the
/// hook told long before); with none initialised, kept.
#[test]
fn a_reporter_false_past_the_deadline_retires_only_when_like_peers_initialised() {
    let Some(w) = world(true, false, 3) else {
        return;
    };
    let run = || Run {
        kubelet: "active",
        api: Api::ReporterFalse,
        job: |j| {
            j["initDeadlineSecs"] = json!(2);
            j["initConditions"] = json!(["gpu.example/Ready"]);
        },
        ..Run::default()
    };
    let verdict = |root: &Path| {
        let join = join_of(root);
        (join["verdict"].clone(), join["blame"].clone())
    };
    let (root, units) = failed_proof(&w, run());
    assert_eq!(
        verdict(root.path()),
        (json!("init-deadline"), json!("cluster"))
    );
    assert!(!stopped(&units), "{units:?}");
    let calls = w.calls();
    assert!(
        !calls.iter().any(|c| c.0 == "SetInstanceHealth"),
        "{calls:?}"
    );
    w.mark(1..3, "eks-nodeinit/initialised", CLUSTER);
    let (root, units) = failed_proof(&w, run());
    assert_eq!(
        verdict(root.path()),
        (json!("init-deadline"), json!("node"))
    );
    let causes = join_of(root.path())["causes"].to_string();
    assert!(causes.contains("gpu.example/Ready is False"), "{causes}");
    assert!(causes.contains("2 like instances of its group"), "{causes}");
    let calls = w.calls();
    assert!(
        calls.contains(&("SetInstanceHealth".into(), w.ids[0].clone())),
        "{calls:?}"
    );
    assert!(stopped(&units), "{units:?}");
}
