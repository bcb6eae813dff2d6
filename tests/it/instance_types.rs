//! A type the embedded table lacks is asked of EC2 (moto's DescribeInstanceTypes, started here
//! on 127.0.0.1, its requests recorded): the default network card's ENIs and the IPv4 addresses
//! per ENI, one call per type, none when the node's cache holds the answer, and a type EC2 does
//! not know said so. The SDK's credentials are the test ones the binary sets before `main`
//! (tests/it/main.rs).

use crate::common;

use common::*;
use eks_nodeinit::base::podcap::{cache, TypeFact, TypeInfo, TypeSource};
use eks_nodeinit::gather::instance_type::{beyond_table, TypeLookup, TYPE_LOOKUP_DEADLINE};
use eks_nodeinit::os::fsutil::FileFact;

#[test]
fn describe_instance_types_answers_what_the_table_lacks_once() {
    let rec = tempfile::tempdir().unwrap();
    let log = rec.path().join("moto.jsonl");
    let log_s = log.to_str().unwrap();
    let Some(moto) = start_moto_with(&[
        ("MOTO_ENABLE_RECORDING", "1"),
        ("MOTO_RECORDER_FILEPATH", log_s),
    ]) else {
        return;
    };
    let how = TypeLookup {
        region: "us-east-1".into(),
        endpoint: Some(moto.url.clone()),
        deadline: TYPE_LOOKUP_DEADLINE,
        transport: None,
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let why = "not in the table";

    // Two network cards of 8 ENIs each: the default card's 8.
    let got = rt.block_on(beyond_table(&how, "c6in.32xlarge", None, why));
    let want = TypeInfo {
        enis: 8,
        ipv4_per_eni: 50,
    };
    assert_eq!(
        got,
        TypeFact::Known {
            info: want,
            source: TypeSource::Ec2
        }
    );

    // The node's cache for this type: no call.
    let cached = FileFact {
        content: Ok(Some(cache::text("c6in.32xlarge", want))),
        mode: Some(0o644),
        link: None,
    };
    let got = rt.block_on(beyond_table(&how, "c6in.32xlarge", Some(&cached), why));
    assert_eq!(
        got,
        TypeFact::Known {
            info: want,
            source: TypeSource::Cache
        }
    );

    // A type EC2 does not know.
    let TypeFact::Unknown(m) = rt.block_on(beyond_table(&how, "zz9.mega", Some(&cached), why))
    else {
        panic!("zz9.mega is known")
    };
    assert!(
        m.starts_with("not in the table; EC2 does not know zz9.mega"),
        "{m}"
    );

    // Each request moto served.
    let calls = recorded_bodies(&log);
    assert_eq!(calls.len(), 2, "{calls:#?}");
    assert!(
        calls
            .iter()
            .all(|c| c.contains("Action=DescribeInstanceTypes")),
        "{calls:#?}"
    );
    assert!(
        calls[0].contains("InstanceType.1=c6in.32xlarge"),
        "{}",
        calls[0]
    );
    assert!(calls[1].contains("InstanceType.1=zz9.mega"), "{}", calls[1]);
}
