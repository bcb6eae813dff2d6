//! Target: the metadata file and the user data it may carry. Arbitrary bytes, mutated metadata
//! JSON, mutated, base64 and gzip'd user data: never a panic; a valid document loads to exactly
//! its values.

use std::collections::BTreeMap;

use eks_nodeinit::instance::metadata;
use eks_nodeinit::instance::userdata::UserDataFact;
use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::TestCaseError;
use serde_json::{json, Map, Value};

use super::strategies::taint_text;
use super::{check, put};

#[derive(Debug, Clone)]
struct MdFields {
    instance_id: String,
    private_ipv4: Option<String>,
    ipv6: Option<String>,
    instance_type: String,
    region: String,
    availability_zone: String,
    asg: Option<String>,
    tags: Option<BTreeMap<String, String>>,
    user_data: Option<String>,
    pretty: bool,
}

fn any_text(max: usize) -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-z0-9.:-]{0,20}",
        2 => vec(any::<char>(), 0..max).prop_map(|c| c.into_iter().collect()),
    ]
}

/// A NodeConfig in YAML whose kubelet registers these taints (as a flag or as config parts).
fn nodeconfig_yaml() -> impl Strategy<Value = String> {
    (vec(taint_text(), 0..3), select(vec!["NodeConfig", "Other", ""]), any::<bool>()).prop_map(
        |(taints, kind, parts)| {
            let mut s = format!("apiVersion: node.eks.aws/v1alpha1\nkind: {kind}\nspec:\n  cluster:\n    name: prod\n  kubelet:\n");
            if parts {
                s.push_str("    config:\n      registerWithTaints:\n");
                for t in &taints {
                    let (kv, e) = t.rsplit_once(':').unwrap_or((t, ""));
                    let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                    s.push_str(&format!(
                        "        - key: {}\n          value: {}\n          effect: {}\n",
                        json!(k),
                        json!(v),
                        json!(e)
                    ));
                }
            } else {
                let flag = format!("--register-with-taints={}", taints.join(","));
                s.push_str(&format!("    flags:\n      - {}\n", json!(flag)));
            }
            s
        },
    )
}

/// A MIME multipart document of NodeConfig and other parts, as nodeadm's user data.
fn mime() -> impl Strategy<Value = String> {
    let part = (
        select(vec![
            "application/node.eks.aws",
            "text/x-shellscript",
            "text/plain",
            "application/node.eks.aws; charset=us-ascii",
            "multipart/mixed; boundary=\"x\"",
            "",
        ]),
        prop_oneof![3 => nodeconfig_yaml(), 1 => any_text(40)],
    );
    (
        select(vec!["//", "B", "==BOUNDARY==", "", "a b", "--"]),
        vec(part, 0..4),
        any::<bool>(),
    )
        .prop_map(|(b, parts, closed)| {
            let mut s =
                format!("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"{b}\"\n\n");
            for (ct, body) in parts {
                s.push_str(&format!("--{b}\nContent-Type: {ct}\n\n{body}\n"));
            }
            if closed {
                s.push_str(&format!("--{b}--\n"));
            }
            s
        })
}

/// User data: text, MIME multipart documents with NodeConfig parts (taints included), YAML,
/// base64 and gzip of them.
fn user_data() -> impl Strategy<Value = String> {
    let encoded = (prop_oneof![mime(), nodeconfig_yaml()], any::<bool>()).prop_map(|(t, gz)| {
        use base64::Engine;
        let bytes = if gz {
            use std::io::Write;
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(t.as_bytes()).unwrap();
            e.finish().unwrap()
        } else {
            t.into_bytes()
        };
        base64::engine::general_purpose::STANDARD.encode(bytes)
    });
    prop_oneof![2 => any_text(60), 3 => mime(), 2 => nodeconfig_yaml(), 2 => encoded]
}

fn md_fields() -> impl Strategy<Value = MdFields> {
    (
        (
            any_text(20),
            option::of(any_text(16)),
            option::of(any_text(40)),
            any_text(12),
            any_text(12),
            any_text(12),
        ),
        (
            option::of(any_text(30)),
            option::of(btree_map(any_text(10), any_text(10), 0..4)),
            option::weighted(0.5, user_data()),
            any::<bool>(),
        ),
    )
        .prop_map(
            |(
                (instance_id, private_ipv4, ipv6, instance_type, region, availability_zone),
                (asg, tags, user_data, pretty),
            )| MdFields {
                instance_id,
                private_ipv4,
                ipv6,
                instance_type,
                region,
                availability_zone,
                asg,
                tags,
                user_data,
                pretty,
            },
        )
}

fn md_text(f: &MdFields) -> String {
    let mut m = Map::new();
    m.insert("instanceId".into(), json!(f.instance_id));
    put(
        &mut m,
        "privateIpv4",
        f.private_ipv4.clone().map(Value::from),
    );
    put(&mut m, "ipv6", f.ipv6.clone().map(Value::from));
    m.insert("instanceType".into(), json!(f.instance_type));
    m.insert("region".into(), json!(f.region));
    m.insert("availabilityZone".into(), json!(f.availability_zone));
    put(
        &mut m,
        "autoscalingGroupName",
        f.asg.clone().map(Value::from),
    );
    put(&mut m, "tags", f.tags.clone().map(|t| json!(t)));
    put(&mut m, "userData", f.user_data.clone().map(Value::from));
    if f.pretty {
        serde_json::to_string_pretty(&Value::Object(m)).unwrap()
    } else {
        serde_json::to_string(&Value::Object(m)).unwrap()
    }
}

#[derive(Debug, Clone)]
enum MdInput {
    /// A document the metadata file format allows: it loads to these values.
    Valid(MdFields),
    /// A valid document with bytes flipped, inserted, removed or cut.
    Mutated(MdFields, Vec<(usize, u8, u8)>),
    Bytes(Vec<u8>),
    /// User data as nodeadm would read it from the instance.
    UserData(Vec<u8>),
}

fn mutate(mut b: Vec<u8>, edits: &[(usize, u8, u8)]) -> Vec<u8> {
    for &(at, op, byte) in edits {
        if b.is_empty() {
            b.push(byte);
            continue;
        }
        let i = at % b.len();
        match op % 5 {
            0 => b[i] ^= byte | 1,
            1 => b.insert(i, byte),
            2 => {
                b.remove(i);
            }
            3 => b.truncate(i),
            _ => {
                let chunk = b[i..].iter().take(8).copied().collect::<Vec<_>>();
                b.splice(i..i, chunk);
            }
        }
    }
    b
}

fn md_input() -> impl Strategy<Value = MdInput> {
    prop_oneof![
        3 => md_fields().prop_map(MdInput::Valid),
        3 => (md_fields(), vec((any::<usize>(), any::<u8>(), any::<u8>()), 1..6)).prop_map(|(f, e)| MdInput::Mutated(f, e)),
        1 => vec(any::<u8>(), 0..256).prop_map(MdInput::Bytes),
        2 => (user_data(), vec((any::<usize>(), any::<u8>(), any::<u8>()), 0..4)).prop_map(|(u, e)| MdInput::UserData(mutate(u.into_bytes(), &e))),
    ]
}

#[test]
fn metadata_files_load_what_they_say_and_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("metadata.json");
    check("metadata", 15_000, md_input, |input, tally| {
        match input {
            MdInput::Valid(f) => {
                std::fs::write(&path, md_text(&f)).unwrap();
                let md = metadata::load_file(&path)
                    .map_err(|e| TestCaseError::fail(format!("refused: {e}")))?;
                tally.count(true);
                prop_assert_eq!(&md.instance_id, &f.instance_id);
                prop_assert_eq!(&md.private_ipv4, &f.private_ipv4);
                prop_assert_eq!(&md.ipv6, &f.ipv6);
                prop_assert_eq!(&md.instance_type, &f.instance_type);
                prop_assert_eq!(&md.region, &f.region);
                prop_assert_eq!(&md.availability_zone, &f.availability_zone);
                prop_assert_eq!(&md.autoscaling_group_name, &f.asg);
                prop_assert_eq!(&md.tags, &f.tags);
                // The user data is kept as its bytes, exactly; parsed once by gathering.
                let want = match &f.user_data {
                    None => metadata::UserData::Unknown,
                    Some(u) => metadata::UserData::Bytes(u.clone().into_bytes()),
                };
                prop_assert_eq!(&md.user_data, &want);
                // And read as nodeadm reads it without a panic.
                let _ = md.user_data.fact();
            }
            MdInput::Mutated(f, edits) => {
                std::fs::write(&path, mutate(md_text(&f).into_bytes(), &edits)).unwrap();
                tally.count(metadata::load_file(&path).is_ok());
            }
            MdInput::Bytes(b) => {
                std::fs::write(&path, b).unwrap();
                tally.count(metadata::load_file(&path).is_ok());
            }
            MdInput::UserData(b) => {
                let fact = UserDataFact::from_bytes(Some(b.as_slice()));
                tally.count(matches!(fact, UserDataFact::Read(Ok(_))));
            }
        }
        Ok(())
    });
}
