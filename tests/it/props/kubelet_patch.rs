//! Target: the kubelet config patch (AL2). Arbitrary kubelet-config.json files (random and
//! nested keys, operator values equal in another form, repeated members, any layout) get exactly
//! the wanted keys; an operator's value is kept (with a warning) unless `kubelet.overwrite`;
//! every other key is untouched; the formatting is kept when only adding; a second plan changes
//! nothing.

use std::path::{Path, PathBuf};

use eks_nodeinit::facts::InstanceTags;
use eks_nodeinit::instance::metadata;
use eks_nodeinit::plan::{self, Plan, Step};
use eks_nodeinit::{config, spec};
use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::TestCaseError;
use serde_json::{json, Map, Value};

use super::{check, oracle, Root};
use crate::common;

/// Kubelet settings the config check accepts: thresholds with low below high (kubelet's
/// defaults 85 and 80 standing in), the critical-pod period within the grace period.
#[derive(Debug, Clone)]
struct KubeletSettings {
    high: Option<i64>,
    low: Option<i64>,
    grace: Option<(String, u64)>,
    critical: Option<(String, u64)>,
    overwrite: bool,
}

impl KubeletSettings {
    /// The keys the agent is asked to set, with their values.
    fn desired(&self) -> Vec<(&'static str, Value)> {
        let mut v = Vec::new();
        if let Some(h) = self.high {
            v.push(("imageGCHighThresholdPercent", json!(h)));
        }
        if let Some(l) = self.low {
            v.push(("imageGCLowThresholdPercent", json!(l)));
        }
        if let Some((t, _)) = &self.grace {
            v.push(("shutdownGracePeriod", json!(t)));
        }
        if let Some((t, _)) = &self.critical {
            v.push(("shutdownGracePeriodCriticalPods", json!(t)));
        }
        v
    }
}

fn duration_of(secs: u64) -> impl Strategy<Value = (String, u64)> {
    let nanos = secs * 1_000_000_000;
    select(vec![
        format!("{secs}s"),
        oracle::go_string(nanos as i64),
        format!("{}ms", secs * 1000),
    ])
    .prop_map(move |t| (t, nanos))
}

fn kubelet_settings() -> impl Strategy<Value = KubeletSettings> {
    let thresholds = prop_oneof![
        (1i64..=100).prop_flat_map(|h| (Just(Some(h)), (0..h).prop_map(Some))),
        (81i64..=100).prop_map(|h| (Some(h), None)),
        (0i64..85).prop_map(|l| (None, Some(l))),
        Just((None, None)),
    ];
    let periods = prop_oneof![
        3 => (0u64..=86_400).prop_flat_map(|g| (Just(g), 0..=g)).prop_flat_map(|(g, c)| {
            (duration_of(g), option::weighted(0.6, duration_of(c)))
                .prop_map(|(g, c)| (Some(g), c))
        }),
        1 => Just((None, None)),
    ];
    (thresholds, periods, any::<bool>()).prop_map(|((high, low), (grace, critical), overwrite)| {
        KubeletSettings {
            high,
            low,
            grace,
            critical,
            overwrite,
        }
    })
}

/// Values an operator may already have under one of the agent's keys: the same, the same in
/// another form (`70.0`, Go's canonical duration), another value, another type.
fn existing_for(key: &'static str, wanted: Value) -> impl Strategy<Value = Value> {
    let same_other_form = match &wanted {
        Value::Number(n) => json!(n.as_i64().unwrap() as f64),
        Value::String(s) => {
            let g = oracle::go_duration(s).unwrap();
            json!(oracle::go_string(g.nanos as i64))
        }
        _ => unreachable!(),
    };
    let other = if key.starts_with("image") {
        select(vec![
            json!(0),
            json!(50),
            json!(99),
            json!("70"),
            json!(null),
        ])
        .boxed()
    } else {
        select(vec![
            json!("2m"),
            json!("1m30s"),
            json!("0s"),
            json!(90),
            json!("bogus"),
            json!("-5s"),
        ])
        .boxed()
    };
    prop_oneof![
        2 => Just(wanted),
        2 => Just(same_other_form),
        3 => other,
    ]
}

fn json_text(max: usize) -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-zA-Z0-9_]{0,12}".prop_map(move |s| s.chars().take(max).collect::<String>()),
        2 => vec(any::<char>(), 0..max).prop_map(|c| c.into_iter().collect()),
        1 => select(vec![
            "imageGCHighThresholdPercent", "shutdownGracePeriod", "}", "{", "\"", "\\", "\n",
            "protectKernelDefaults", "",
        ]).prop_map(String::from),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e12f64..1e12).prop_map(Value::from),
        json_text(12).prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            btree_map(json_text(8), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// How the file is written.
#[derive(Debug, Clone)]
enum Layout {
    Compact,
    Pretty,
    Indent(&'static str),
    TrailingSpace,
    /// A member repeated before the rest (JSON readers keep the last).
    Repeated(String, Value),
}

fn layout() -> impl Strategy<Value = Layout> {
    prop_oneof![
        Just(Layout::Compact),
        Just(Layout::Pretty),
        select(vec!["    ", "\t", " ", ""]).prop_map(Layout::Indent),
        Just(Layout::TrailingSpace),
        (
            prop_oneof![
                select(vec![
                    "imageGCHighThresholdPercent",
                    "shutdownGracePeriod",
                    "a"
                ])
                .prop_map(String::from),
                json_text(6),
            ],
            json_value()
        )
            .prop_map(|(k, v)| Layout::Repeated(k, v)),
    ]
}

fn write_layout(doc: &Map<String, Value>, l: &Layout) -> String {
    let v = Value::Object(doc.clone());
    match l {
        Layout::Compact => serde_json::to_string(&v).unwrap(),
        Layout::Pretty => serde_json::to_string_pretty(&v).unwrap() + "\n",
        Layout::Indent(ind) => {
            use serde::Serialize;
            let mut out = Vec::new();
            let f = serde_json::ser::PrettyFormatter::with_indent(ind.as_bytes());
            let mut s = serde_json::Serializer::with_formatter(&mut out, f);
            v.serialize(&mut s).unwrap();
            String::from_utf8(out).unwrap()
        }
        Layout::TrailingSpace => format!(" \n{}  \n\n", serde_json::to_string_pretty(&v).unwrap()),
        Layout::Repeated(k, val) => {
            let rest = serde_json::to_string_pretty(&v).unwrap();
            let member = format!("{}: {}", json!(k), val);
            if doc.is_empty() {
                format!("{{{member}}}")
            } else {
                format!("{{{member},{}", &rest[1..])
            }
        }
    }
}

#[derive(Debug, Clone)]
struct KubeletCase {
    settings: KubeletSettings,
    base: Map<String, Value>,
    layout: Layout,
}

fn kubelet_case() -> impl Strategy<Value = KubeletCase> {
    let fixture: Map<String, Value> = serde_json::from_str(
        &std::fs::read_to_string(common::example(
            "al2-root/etc/kubernetes/kubelet/kubelet-config.json",
        ))
        .unwrap(),
    )
    .unwrap();
    let base = prop_oneof![
        3 => Just(fixture),
        1 => Just(Map::new()),
        3 => btree_map(json_text(10), json_value(), 0..8).prop_map(|m| m.into_iter().collect()),
    ];
    (
        kubelet_settings(),
        base,
        btree_map(json_text(10), json_value(), 0..4),
        layout(),
    )
        .prop_flat_map(|(settings, mut base, extra, layout)| {
            base.extend(extra);
            let existing: Vec<_> = settings
                .desired()
                .into_iter()
                .map(|(k, w)| option::weighted(0.4, existing_for(k, w).prop_map(move |v| (k, v))))
                .collect();
            (Just(settings), Just(base), existing, Just(layout))
        })
        .prop_map(|(settings, mut base, existing, layout)| {
            for (k, v) in existing.into_iter().flatten() {
                base.insert(k.to_string(), v);
            }
            KubeletCase {
                settings,
                base,
                layout,
            }
        })
}

/// The agent's notion of an unchanged value, from the config's rules: equal JSON, numbers
/// equal as numbers, strings equal as Go durations.
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        _ if a == b => true,
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::String(x), Value::String(y)) => {
            match (oracle::go_duration(x), oracle::go_duration(y)) {
                (Some(x), Some(y)) => {
                    let ok = |g: &oracle::Go| g.accepted() && !(g.neg && g.nanos > 0);
                    ok(&x) && ok(&y) && x.nanos == y.nanos
                }
                _ => false,
            }
        }
        _ => false,
    }
}

fn kubelet_config_doc(s: &KubeletSettings) -> String {
    let mut k = Map::new();
    for (key, v) in s.desired() {
        k.insert(key.into(), v);
    }
    k.insert("overwrite".into(), json!(s.overwrite));
    json!({
        "cluster": {"name": "prod"},
        "nodeGroup": {"name": "g"},
        "tagging": {"enabled": false},
        "kubelet": k,
    })
    .to_string()
}

const KUBELET_PATH: &str = "/etc/kubernetes/kubelet/kubelet-config.json";

fn kubelet_step(plan: &Plan) -> Option<(&str, &Option<PathBuf>, u32)> {
    plan.steps.iter().find_map(|s| match s {
        Step::File(eks_nodeinit::plan::step::File {
            path,
            new,
            backup,
            mode,
            ..
        }) if path == Path::new(KUBELET_PATH) => Some((new.as_str(), backup, *mode)),
        _ => None,
    })
}

#[test]
fn kubelet_config_patch_sets_exactly_the_wanted_keys() {
    let root = Root::new("al2-root");
    let file = root.path().join(KUBELET_PATH.trim_start_matches('/'));
    let md = metadata::load_file(&common::example("metadata.json")).unwrap();
    check("kubelet_patch", 5000, kubelet_case, |case, tally| {
        let text = write_layout(&case.base, &case.layout);
        std::fs::write(&file, &text).unwrap();
        // The file as a JSON reader takes it (a repeated member: the last one).
        let original: Map<String, Value> = serde_json::from_str(&text).unwrap();
        let spec = spec::from_config(
            &config::parse(&kubelet_config_doc(&case.settings), "k.json").unwrap(),
        )
        .map_err(|e| TestCaseError::fail(format!("settings refused: {e}")))?;
        let facts =
            eks_nodeinit::gather::node(root.path(), &spec, Some(md.clone()), InstanceTags::Unknown);
        let plan = plan::build(&spec, &facts)
            .map_err(|e| TestCaseError::fail(format!("plan refused: {e}")))?;
        let mut expected = original.clone();
        let mut kept = Vec::new();
        for (k, wanted) in case.settings.desired() {
            match original.get(k) {
                None => {
                    expected.insert(k.into(), wanted);
                }
                Some(v) if same_value(v, &wanted) => {}
                Some(_) if case.settings.overwrite => {
                    expected.insert(k.into(), wanted);
                }
                Some(_) => kept.push(k),
            }
        }
        for k in &kept {
            prop_assert!(
                plan.warnings.iter().any(|w| w.contains(k)),
                "a warning names the kept {k}: {:?}",
                plan.warnings
            );
        }
        let step = kubelet_step(&plan);
        tally.count(step.is_some());
        match step {
            None => prop_assert_eq!(&expected, &original, "a change is planned"),
            Some((new, backup, mode)) => {
                prop_assert!(expected != original, "no change is planned");
                let patched: Map<String, Value> = serde_json::from_str(new)
                    .map_err(|e| TestCaseError::fail(format!("the new file is no JSON: {e}")))?;
                prop_assert_eq!(&patched, &expected);
                let orig_path = PathBuf::from(format!("{KUBELET_PATH}.orig"));
                prop_assert_eq!(backup.as_deref(), Some(orig_path.as_path()));
                prop_assert_eq!(mode & 0o777, 0o644);
                // Keys only added: the file's own text kept up to its closing brace.
                let replaced = case.settings.desired().iter().any(|(k, _)| {
                    original.contains_key(*k) && expected.get(*k) != original.get(*k)
                });
                if !replaced {
                    let head = text[..text.rfind('}').unwrap()].trim_end();
                    prop_assert!(new.starts_with(head), "the file's formatting is kept");
                }
                // A second plan over the patched file plans no change to it.
                std::fs::write(&file, new).unwrap();
                let facts = eks_nodeinit::gather::node(
                    root.path(),
                    &spec,
                    Some(md.clone()),
                    InstanceTags::Unknown,
                );
                let again = plan::build(&spec, &facts)
                    .map_err(|e| TestCaseError::fail(format!("second plan refused: {e}")))?;
                prop_assert!(
                    kubelet_step(&again).is_none(),
                    "a second plan changes the file again"
                );
            }
        }
        Ok(())
    });
}
