//! Tagging against moto's EC2 server (started here on 127.0.0.1 with a free port): a
//! run-instances instance gets its Name; DescribeTags shows it; a second run makes no
//! CreateTags call.

use crate::common;

use common::*;

#[test]
fn name_tag_lands_in_moto_and_a_second_run_does_not_call_create_tags() {
    let Some(moto) = start_moto() else { return };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let ec2 = rt.block_on(ec2_client(&moto.url, "us-east-1"));
    let (id, ip) = rt.block_on(run_instance(&ec2));

    let root = sample_root("al2023-root");
    let md = root.path().join("md.json");
    std::fs::write(
        &md,
        serde_json::json!({
            "instanceId": id, "privateIpv4": ip, "instanceType": "m6i.large",
            "region": "us-east-1", "availabilityZone": "us-east-1a"
        })
        .to_string(),
    )
    .unwrap();
    let cfg = config_with(root.path(), "c.json", |v| {
        v["tagging"] = serde_json::json!({"ec2Endpoint": moto.url, "syncBudgetMs": 10000})
    });

    let out = init_with(root.path(), &cfg, &md, &[]);
    assert!(out.status.success());
    let want = format!("scaler-{}", ip.replace('.', "x"));
    let tags = rt.block_on(instance_tags(&ec2, &id)).unwrap();
    assert_eq!(tags.get("Name"), Some(&want));
    let rep = report(root.path());
    assert_eq!(rep["tagging"]["result"]["outcome"], "created");
    assert_eq!(
        rep["tagging"]["calls"],
        serde_json::json!({"describeTags": 1, "createTags": 1})
    );

    // Second run: the tag is there; DescribeTags only.
    let out = init_with(root.path(), &cfg, &md, &[]);
    assert!(out.status.success());
    let rep = report(root.path());
    assert_eq!(rep["tagging"]["result"]["outcome"], "alreadySet");
    assert_eq!(
        rep["tagging"]["calls"],
        serde_json::json!({"describeTags": 1, "createTags": 0})
    );

    // With the tags known (as IMDS shows them when instance-metadata tags are on), not even
    // DescribeTags: the plan has no tag step at all.
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&md).unwrap()).unwrap();
    m["tags"] = serde_json::json!({"Name": want});
    std::fs::write(&md, m.to_string()).unwrap();
    let out = init_with(root.path(), &cfg, &md, &["--dry-run", "--output", "json"]);
    let plan: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(plan["changes"], 0, "{plan:#}");
    assert!(
        stdout(&out).contains("kubernetes.io/cluster/prod-eu"),
        "the missing cluster tag is warned about"
    );

    // Applied, the run has nothing to tag, and its report still says the Name is in place.
    let out = init_with(root.path(), &cfg, &md, &[]);
    assert!(out.status.success());
    let rep = report(root.path());
    assert_eq!(
        rep["tagging"],
        serde_json::json!({
            "result": {"outcome": "alreadySet"},
            "calls": {"describeTags": 0, "createTags": 0},
            "key": "Name",
            "value": want
        })
    );
}
