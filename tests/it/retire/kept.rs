//! Causes a fleet shares, too few like peers, a spent budget, an unknown group: the node is kept.

use super::*;

#[test]
fn an_api_server_that_stalls_refuses_or_fails_after_the_group_joined_retires_nothing() {
    let Some(w) = world(true, false, 3) else {
        return;
    };
    w.joined(2);
    for (api, code) in [
        (Api::Stalls, "(timeout)"),
        (Api::Refused, "the last read of the API server failed"),
        (Api::Answers(503), "(unavailable)"),
        (Api::Answers(401), "(unauthenticated)"),
    ] {
        let run = Run {
            kubelet: "active",
            api,
            ..Run::default()
        };
        let (root, units) = failed_proof(&w, run);
        assert_kept(&w, root.path(), &units, code);
        assert_kept(&w, root.path(), &units, "never this node's own");
    }
}

#[test]
fn one_like_peer_a_spent_budget_or_an_unknown_group_keeps_the_node() {
    // One peer joined: not enough.
    let Some(w) = world(true, false, 5) else {
        return;
    };
    w.joined(1);
    let (root, units) = failed_proof(&w, Run::default());
    assert_kept(&w, root.path(), &units, "1 like instance of its group");
    // Two joined, two others retired within the hour: the budget is spent.
    w.joined(2);
    w.mark(
        3..5,
        "eks-nodeinit/retired",
        "deadline: kubelet.service is failed",
    );
    let (root, units) = failed_proof(&w, Run::default());
    assert_kept(&w, root.path(), &units, "2 instances of its group retired");
    // In a group whose name the boot could not read: its peers cannot be told.
    let run = Run {
        group: None,
        job: |j| j["groupUnknown"] = json!(true),
        ..Run::default()
    };
    let (root, units) = failed_proof(&w, run);
    assert_kept(
        &w,
        root.path(),
        &units,
        "whose name the boot could not read",
    );
}

#[test]
fn a_launch_the_hook_abandons_is_tagged_for_the_budget_and_not_retired_again() {
    // The group's launch hook waits: ABANDON replaces the instance, and SetInstanceHealth
    // would only be a second, racing retirement.
    let Some(w) = world(true, false, 3) else {
        return;
    };
    w.joined(2);
    let run = Run {
        hook: Some("other"),
        ..Run::default()
    };
    let (root, units) = failed_proof(&w, run);
    let join = join_of(root.path());
    assert_eq!(join["hook"], "ABANDON (other)", "{join:#}");
    assert!(join.get("retired").is_none(), "{join:#}");
    assert_tagged_first(&w, &w.calls());
    assert_eq!(w.calls().len(), 1, "{:?}", w.calls());
    assert!(!stopped(&units), "{units:?}");
}

/// The check before the hand-off that says whether this node's joined tag can be written (the
/// fleet guard counts it): CreateTags with DryRun, which changes nothing; denied, a failure
/// naming the statement.
#[test]
fn the_fleet_guard_check_says_whether_the_joined_tag_may_be_written() {
    use eks_nodeinit::verify::preflight::FleetGuard;
    use eks_nodeinit::verify::{check, Check, Context};
    for deny in [false, true] {
        let key = if deny { "eks-nodeinit/joined" } else { "" };
        let Some(w) = world_with(false, &[("MOTO_DENY_TAG_KEY", key)], 1) else {
            return;
        };
        let ctx = Context {
            cluster: CLUSTER.into(),
            region: "us-east-1".into(),
            ..Context::default()
        };
        let guard = FleetGuard {
            ctx: std::sync::Arc::new(ctx),
            instance_id: w.ids[0].clone(),
            endpoint: Some(w.moto.url.clone()),
        };
        let rt = tokio::runtime::Runtime::new().unwrap();
        let r = rt.block_on(check::run(
            &[Check::new(guard)],
            std::time::Duration::from_secs(10),
            std::env::temp_dir(),
        ));
        let r = serde_json::to_value(&r[0]).unwrap();
        let log = lines(&w.calls);
        assert_eq!(log.len(), 1, "{log:?}");
        assert_eq!(log[0]["DryRun"], true, "{log:?}");
        assert_eq!(log[0]["Tags"][0]["Key"], "eks-nodeinit/joined");
        match deny {
            false => assert_eq!(r["result"], "passed", "{r:#}"),
            true => {
                assert_eq!(r["result"], "failed", "{r:#}");
                // Said, never a reason to withhold the node (`verify.preflight: fail` too).
                assert_eq!(r["advisory"], true, "{r:#}");
                let text = r.to_string();
                assert!(
                    text.contains("fleet-guard") && text.contains("ec2:CreateTags"),
                    "{text}"
                );
            }
        }
        // A dry run: nothing tagged.
        w.ec2(|c| {
            let id = w.ids[0].clone();
            async move {
                let out = c
                    .describe_instances()
                    .instance_ids(id)
                    .send()
                    .await
                    .unwrap();
                let i = &out.reservations()[0].instances()[0];
                assert!(i.tags().is_empty(), "{:?}", i.tags());
            }
        });
    }
}
