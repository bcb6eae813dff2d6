//! Tagging against a local EC2 Query API server that scripts the failures moto cannot produce:
//! throttling, AccessDenied, eventual consistency; and the background continuation.

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::ec2_server::{Bucket, Ec2Server, Ec2State};
use common::*;
use eks_nodeinit::aws::ec2::{Ec2, TagError, TagOutcome};
use eks_nodeinit::base::retry::RetryPolicy;
use eks_nodeinit::exec::tagging;
use eks_nodeinit::facts::InstanceTags;

const ID: &str = "i-0a1b2c3d4e5f67890";

fn fast() -> RetryPolicy {
    RetryPolicy {
        base: Duration::from_millis(20),
        cap: Duration::from_millis(200),
    }
}

fn deadline() -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_secs(10)
}

/// A client of the scripted server, with the test credentials the binary sets before `main`
/// (tests/it/main.rs).
async fn ec2(s: &Ec2Server) -> Ec2 {
    Ec2::new("eu-west-1", Some(&s.url()), None).await
}

/// A server that answers CreateTags with these errors first.
fn failing(create_errors: Vec<(u16, &'static str)>) -> Ec2Server {
    Ec2Server::start(Ec2State {
        create_errors: create_errors.into(),
        ..Default::default()
    })
}

/// Tags known, none set.
fn none_set() -> InstanceTags {
    InstanceTags::Known(BTreeMap::new())
}

/// The Name tag job for instance ID against this server, tags known (no DescribeTags).
fn job(s: &Ec2Server) -> eks_nodeinit::exec::tagging::Job {
    eks_nodeinit::exec::tagging::Job {
        region: "eu-west-1".into(),
        endpoint: Some(s.url()),
        instance_id: ID.into(),
        key: "Name".into(),
        value: "v".into(),
        known: InstanceTags::Known(BTreeMap::new()),
        policy: fast(),
        transport: None,
    }
}

#[tokio::test]
async fn throttling_is_retried_until_it_lands() {
    let s = failing(vec![(503, "RequestLimitExceeded"); 3]);
    let mut c = ec2(&s).await;
    let known = InstanceTags::Known(BTreeMap::new());
    let r = tagging::ensure_tag(
        &mut c,
        ID,
        "Name",
        "scaler-10x0x12x34",
        &known,
        fast(),
        deadline(),
    )
    .await
    .unwrap();
    assert_eq!(r, TagOutcome::Created);
    let st = s.state.lock().unwrap();
    assert_eq!(st.count("CreateTags"), 4);
    assert_eq!(st.count("DescribeTags"), 0, "known tags: no DescribeTags");
    let last = &st.calls.last().unwrap().1;
    assert_eq!(last["ResourceId.1"], ID);
    assert_eq!(last["Tag.1.Key"], "Name");
    assert_eq!(last["Tag.1.Value"], "scaler-10x0x12x34");
    assert_eq!(c.calls.create_tags, 4);
}

#[tokio::test]
async fn an_empty_token_bucket_is_waited_out() {
    // EC2's throttling as the fleet bench models it: CreateTags' bucket of one token, refilled
    // once a second. The second instance's call meets it empty and is retried until it refills.
    let s = Ec2Server::start(Ec2State {
        create_bucket: Some(Bucket::new(1.0, 1.0)),
        ..Default::default()
    });
    let mut c = ec2(&s).await;
    for id in ["i-0000000000000000a", "i-0000000000000000b"] {
        let r = tagging::ensure_tag(&mut c, id, "Name", "v", &none_set(), fast(), deadline())
            .await
            .unwrap();
        assert_eq!(r, TagOutcome::Created);
    }
    let st = s.state.lock().unwrap();
    assert!(
        st.count("CreateTags") > 2,
        "the second call met an empty bucket"
    );
    let waited = st.created_at[1] - st.created_at[0];
    assert!(waited >= Duration::from_millis(900), "{waited:?}");
}

#[tokio::test]
async fn access_denied_is_not_retried_and_names_the_permission() {
    let s = failing(vec![(403, "UnauthorizedOperation")]);
    let mut c = ec2(&s).await;
    let e = tagging::ensure_tag(&mut c, ID, "Name", "v", &none_set(), fast(), deadline())
        .await
        .unwrap_err();
    assert!(matches!(e, TagError::Denied { .. }), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("\"Action\":\"ec2:CreateTags\""), "{msg}");
    assert!(msg.contains(&format!("instance/{ID}")), "{msg}");
    assert_eq!(
        s.state.lock().unwrap().count("CreateTags"),
        1,
        "no retry on AccessDenied"
    );
}

#[tokio::test]
async fn instance_not_found_yet_is_retried() {
    let s = failing(vec![(400, "InvalidInstanceID.NotFound"); 2]);
    let mut c = ec2(&s).await;
    let r = tagging::ensure_tag(&mut c, ID, "Name", "v", &none_set(), fast(), deadline())
        .await
        .unwrap();
    assert_eq!(r, TagOutcome::Created);
    assert_eq!(s.state.lock().unwrap().count("CreateTags"), 3);
}

#[tokio::test]
async fn an_existing_tag_means_no_create_call() {
    let mut tags = BTreeMap::new();
    tags.insert(
        ID.to_string(),
        BTreeMap::from([("Name".to_string(), "v".to_string())]),
    );
    let s = Ec2Server::start(Ec2State {
        tags,
        ..Default::default()
    });
    let mut c = ec2(&s).await;
    let r = tagging::ensure_tag(
        &mut c,
        ID,
        "Name",
        "v",
        &InstanceTags::Unknown,
        fast(),
        deadline(),
    )
    .await
    .unwrap();
    assert_eq!(r, TagOutcome::AlreadySet);
    let st = s.state.lock().unwrap();
    assert_eq!(st.count("DescribeTags"), 1);
    assert_eq!(st.count("CreateTags"), 0);
    assert_eq!(st.calls[0].1["Filter.1.Name"], "resource-id");
}

#[tokio::test]
async fn the_deadline_bounds_retries() {
    let s = failing(vec![(503, "RequestLimitExceeded"); 1000]);
    let mut c = ec2(&s).await;
    let t = Instant::now();
    let e = tagging::ensure_tag(
        &mut c,
        ID,
        "Name",
        "v",
        &none_set(),
        fast(),
        tokio::time::Instant::now() + Duration::from_millis(800),
    )
    .await
    .unwrap_err();
    assert!(matches!(e, TagError::Deadline { .. }), "{e}");
    assert!(
        t.elapsed() < Duration::from_millis(1200),
        "{:?}",
        t.elapsed()
    );
}

fn tagging_config(
    root: &std::path::Path,
    url: &str,
    extra: serde_json::Value,
) -> std::path::PathBuf {
    config_with(root, "c.json", |v| {
        let mut t = serde_json::json!({"ec2Endpoint": url, "syncBudgetMs": 500});
        for (k, x) in extra.as_object().unwrap() {
            t[k] = x.clone();
        }
        v["tagging"] = t;
    })
}

#[test]
fn hand_off_does_not_wait_for_a_throttled_tag() {
    // Throttled, and every answer 600 ms late: the 500 ms budget always runs out (with
    // throttles alone, full-jitter retries could by chance fit inside it).
    let s = Ec2Server::start(Ec2State {
        create_errors: vec![(503, "RequestLimitExceeded"); 4].into(),
        create_delay: Duration::from_millis(600),
        ..Default::default()
    });
    let root = sample_root("al2-root");
    let argv = recording_bootstrap(root.path());
    let cfg = tagging_config(
        root.path(),
        &s.url(),
        serde_json::json!({"backgroundDeadlineSec": 60}),
    );
    let t = Instant::now();
    let out = init(root.path(), &cfg, &[]);
    let took = t.elapsed();
    assert!(out.status.success());
    assert!(argv.exists(), "bootstrap.sh ran");
    assert!(
        took < Duration::from_millis(2500),
        "hand-off within the 500 ms budget plus start-up: {took:?}"
    );
    let report_path = root.path().join("var/lib/eks-nodeinit/report.json");
    let first: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    assert_eq!(
        first["tagging"]["result"]["outcome"], "background",
        "{first:#}"
    );

    // The continuation lands the tag later and records it.
    let r = background_report(root.path());
    assert_eq!(r["tagging"]["result"]["outcome"], "created", "{r:#}");
    assert_eq!(r["tagging"]["value"], "scaler-10x0x12x34");
    assert_eq!(r["instanceId"], ID, "the rest of the report is kept");
    let st = s.state.lock().unwrap();
    assert_eq!(st.tags[ID]["Name"], "scaler-10x0x12x34");
    assert!(st.count("CreateTags") >= 5);
    let log =
        std::fs::read_to_string(root.path().join("var/log/eks-nodeinit-tagging.log")).unwrap();
    assert!(log.contains("Name tag in place (background)"), "{log}");
}

/// The report once the background continuation has recorded its outcome.
fn background_report(root: &std::path::Path) -> serde_json::Value {
    let t = Instant::now();
    loop {
        let r = report(root);
        if r["tagging"]["background"] == true {
            return r;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the background continuation never reported: {r:#}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_create_tags_cut_off_in_flight_is_read_back_not_sent_again() {
    // CreateTags lands at once but answers after 1.5 s: the 500 ms budget abandons it. The
    // tags were known from IMDS, yet the continuation reads them back (the tag is there) instead
    // of sending CreateTags a second time. (Seen in the VM e2e under an emulated CPU.)
    let s = Ec2Server::start(Ec2State {
        create_delay: Duration::from_millis(1500),
        ..Default::default()
    });
    let root = sample_root("al2-root");
    recording_bootstrap(root.path());
    let cfg = tagging_config(root.path(), &s.url(), serde_json::json!({}));
    let mut md: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(example("metadata.json")).unwrap()).unwrap();
    md["tags"] = serde_json::json!({"aws:autoscaling:groupName": "eks-scaler"});
    let md_path = root.path().join("md.json");
    std::fs::write(&md_path, md.to_string()).unwrap();
    let out = init_with(root.path(), &cfg, &md_path, &[]);
    assert!(out.status.success());
    assert_eq!(
        report(root.path())["tagging"]["result"]["outcome"],
        "background"
    );
    let r = background_report(root.path());
    assert_eq!(r["tagging"]["result"]["outcome"], "alreadySet", "{r:#}");
    let st = s.state.lock().unwrap();
    assert_eq!(st.count("CreateTags"), 1, "{:?}", st.calls);
    assert_eq!(st.count("DescribeTags"), 1, "{:?}", st.calls);
}

#[test]
fn required_tagging_fails_the_boot_on_access_denied() {
    let s = Ec2Server::start(Ec2State {
        describe_errors: vec![(403, "UnauthorizedOperation")].into(),
        ..Default::default()
    });
    let root = sample_root("al2-root");
    let argv = recording_bootstrap(root.path());
    let cfg = tagging_config(root.path(), &s.url(), serde_json::json!({"required": true}));
    let out = init(root.path(), &cfg, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("\"Action\":\"ec2:DescribeTags\""),
        "the IAM statement is printed"
    );
    assert!(!argv.exists(), "no hand-off when required tagging failed");
    assert_eq!(s.state.lock().unwrap().count("DescribeTags"), 1);
}

#[test]
fn access_denied_without_required_still_hands_off() {
    let s = failing(vec![(403, "UnauthorizedOperation")]);
    let root = sample_root("al2-root");
    let argv = recording_bootstrap(root.path());
    let cfg = tagging_config(root.path(), &s.url(), serde_json::json!({}));
    let out = init(root.path(), &cfg, &[]);
    assert!(out.status.success());
    assert!(argv.exists());
    assert!(stderr(&out).contains("\"Action\":\"ec2:CreateTags\""));
    let st = s.state.lock().unwrap();
    assert_eq!(st.count("CreateTags"), 1);
}

#[tokio::test]
async fn a_spread_delay_beyond_the_budget_goes_straight_to_the_background() {
    use eks_nodeinit::exec::tagging::{background, foreground, Foreground};
    let s = Ec2Server::start(Ec2State::default());
    let _ = ec2(&s).await; // credentials in the environment
    let job = job(&s);
    let t = Instant::now();
    let (fg, _) = foreground(
        &job,
        Duration::from_millis(1500),
        Duration::from_millis(500),
    )
    .await;
    assert!(
        t.elapsed() < Duration::from_millis(100),
        "the hand-off does not wait for the spread"
    );
    let Foreground::Pending {
        initial_delay,
        abandoned: false,
    } = fg
    else {
        panic!("{fg:?}")
    };
    assert_eq!(initial_delay, Duration::from_millis(1500));
    assert_eq!(s.state.lock().unwrap().calls.len(), 0);
    let t = Instant::now();
    let (r, calls) = background(&job, Duration::from_millis(200), Duration::from_secs(5)).await;
    assert_eq!(r.unwrap(), TagOutcome::Created);
    assert!(t.elapsed() >= Duration::from_millis(200));
    assert_eq!(calls.create_tags, 1);
    assert_eq!(s.state.lock().unwrap().count("CreateTags"), 1);
}

#[tokio::test]
async fn the_foreground_budget_is_hard_even_mid_call() {
    use eks_nodeinit::exec::tagging::{foreground, Foreground};
    // A CreateTags that answers after 2 s: the 300 ms budget abandons it.
    let s = Ec2Server::start(Ec2State {
        create_delay: Duration::from_secs(2),
        ..Default::default()
    });
    let _ = ec2(&s).await;
    let job = job(&s);
    let t = Instant::now();
    let (fg, _) = foreground(&job, Duration::ZERO, Duration::from_millis(300)).await;
    assert!(
        t.elapsed() < Duration::from_millis(800),
        "{:?}",
        t.elapsed()
    );
    assert!(
        matches!(fg, Foreground::Pending { initial_delay, abandoned: true } if initial_delay.is_zero()),
        "{fg:?}"
    );
    assert_eq!(s.state.lock().unwrap().count("CreateTags"), 1);
}

#[test]
fn required_tagging_waits_out_the_spread_then_tags_and_hands_off() {
    // Found as a user would: `required` + `spreadSec` failed at once ("not set within 600 s")
    // with no EC2 call, after the local changes, with no tagging record and no hand-off.
    let s = Ec2Server::start(Ec2State::default());
    let root = sample_root("al2-root");
    let argv = recording_bootstrap(root.path());
    let cfg = tagging_config(
        root.path(),
        &s.url(),
        serde_json::json!({"required": true, "spreadSec": 2, "backgroundDeadlineSec": 30}),
    );
    let out = init(root.path(), &cfg, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(argv.exists(), "the hand-off happened after the tag");
    let r = report(root.path());
    assert_eq!(r["tagging"]["result"]["outcome"], "created", "{r:#}");
    assert_eq!(r["tagging"]["calls"]["createTags"], 1, "{r:#}");
    let st = s.state.lock().unwrap();
    assert_eq!(st.count("DescribeTags"), 1, "{:?}", st.calls);
    assert_eq!(st.count("CreateTags"), 1, "{:?}", st.calls);
}

#[test]
fn a_spread_as_long_as_the_deadline_is_refused() {
    let root = sample_root("al2-root");
    let cfg = tagging_config(
        root.path(),
        "http://127.0.0.1:9",
        serde_json::json!({"spreadSec": 600, "backgroundDeadlineSec": 600}),
    );
    let before = snapshot(root.path());
    let out = init(root.path(), &cfg, &[]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        stderr(&out).contains("tagging.spreadSec: 600 is not below tagging.backgroundDeadlineSec"),
        "{}",
        stderr(&out)
    );
    assert_eq!(before, snapshot(root.path()));
}
