//! The config document generator: the examples' shape with every field sometimes set, mostly to
//! valid values, sometimes to edge or wrong ones; one generator per config section.

use eks_nodeinit::plan::handoff::al2::{FLAGS_OWNED, NEWEST_OPTIONS};
use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{json, Map, Value};

use super::strategies::{
    cidr, duration_text, label_key, label_value, name_like, taint_of, taint_text,
};
use super::strategies::{valid_label_key, wild_char};
use super::{oracle, put};

pub const VALID_ENDPOINTS: &[&str] = &[
    "https://0123456789ABCDEF0123456789ABCDEF.gr7.eu-west-1.eks.amazonaws.com",
    "https://10.0.0.1:6443",
    "https://[fd00::1]:443/",
    "https://api.example.com/k8s/v1",
    "https://x",
    "https://a-b.c-d.example:65535/a_b~c.d",
];
pub const BAD_ENDPOINTS: &[&str] = &[
    "http://x.example.com",
    "https://a,b.com",
    "https://x.com:0",
    "https://x.com:65536",
    "https://x.com:",
    "https://-a.com",
    "https://a.com/p?q=1",
    "https://a.com|x",
    "https://",
    "",
    "https://a..b",
    "https://[::1",
    "https://[nope]:443",
    "https://a.com/ path",
    "https://user@a.com",
    "https://a_b.com",
    "https://a.com/%20",
    "https://x.com:+443",
];

pub const EXISTING_SYSCTLS: [&str; 7] = [
    "fs.inotify.max_user_watches",
    "fs.inotify.max_user_instances",
    "kernel.panic",
    "kernel.panic_on_oops",
    "net.core.somaxconn",
    "vm.max_map_count",
    "vm.overcommit_memory",
];

/// A config document: every section sometimes there (the cluster and node group almost always),
/// sometimes an unknown field.
pub fn config_doc() -> impl Strategy<Value = Value> {
    (
        (
            option::weighted(0.99, cluster()),
            option::weighted(0.99, node_group()),
            option::weighted(0.7, labels()),
            option::weighted(0.4, taints()),
            option::weighted(0.5, sysctls()),
            option::weighted(0.7, kubelet()),
        ),
        (
            option::weighted(0.3, logind()),
            option::weighted(0.5, handoff()),
            option::weighted(0.3, tagging()),
            option::weighted(0.2, imds()),
            option::weighted(
                0.15,
                prop_oneof![12 => Just("eks-nodeinit/v1"), 1 => select(vec!["eks-nodeinit/v2", "v1", ""])],
            ),
            option::weighted(0.02, Just(json!(1))),
        ),
    )
        .prop_map(
            |(
                (cluster, node_group, labels, taints, sysctls, kubelet),
                (logind, handoff, tagging, imds, api_version, unknown),
            )| {
                let mut m = Map::new();
                put(&mut m, "apiVersion", api_version.map(Value::from));
                put(&mut m, "cluster", cluster);
                put(&mut m, "nodeGroup", node_group);
                put(&mut m, "labels", labels);
                put(&mut m, "taints", taints);
                put(&mut m, "sysctls", sysctls);
                put(&mut m, "kubelet", kubelet);
                put(&mut m, "logind", logind);
                put(&mut m, "handoff", handoff);
                put(&mut m, "tagging", tagging);
                put(&mut m, "imds", imds);
                put(&mut m, "bogusField", unknown);
                Value::Object(m)
            },
        )
}

/// `cluster`: the name, endpoint, CA, service CIDR and container runtime.
fn cluster() -> impl Strategy<Value = Value> {
    (
        prop_oneof![
            8 => "[A-Za-z0-9][A-Za-z0-9_-]{0,20}",
            1 => "[A-Za-z0-9][A-Za-z0-9_-]{98,100}",
            1 => name_like(100),
        ],
        option::weighted(
            0.6,
            prop_oneof![12 => select(VALID_ENDPOINTS.to_vec()), 1 => select(BAD_ENDPOINTS.to_vec())],
        ),
        option::weighted(
            0.6,
            prop_oneof![
                20 => vec(any::<u8>(), 1..48).prop_map(|b| {
                    use base64::Engine;
                    base64::engine::general_purpose::STANDARD.encode(b)
                }),
                1 => select(vec!["", "not base64!", "YWI", "YR==", "YQ=", "YQ===", "Y Q==", "YQ==\n", "-_8="]).prop_map(String::from),
            ],
        ),
        option::weighted(0.6, cidr()),
        option::weighted(
            0.1,
            prop_oneof![8 => Just("containerd"), 1 => select(vec!["docker", ""])],
        ),
    )
        .prop_map(|(name, ep, ca, cidr, rt)| {
            let mut m = Map::new();
            m.insert("name".into(), json!(name));
            put(&mut m, "apiServerEndpoint", ep.map(|e| json!(e)));
            put(&mut m, "certificateAuthority", ca.map(|e| json!(e)));
            put(&mut m, "cidr", cidr.map(|e| json!(e)));
            put(&mut m, "containerRuntime", rt.map(|e| json!(e)));
            Value::Object(m)
        })
}

/// `nodeGroup`: its name and role.
fn node_group() -> impl Strategy<Value = Value> {
    (
        option::weighted(
            0.8,
            prop_oneof![
                20 => "[a-z][a-z0-9-]{0,20}",
                1 => select(vec!["", "aws:x", "AWS:y", "x\ny", "grüße", "a b"]).prop_map(String::from),
                1 => (199usize..=201).prop_map(|n| "g".repeat(n)),
            ],
        ),
        option::weighted(
            0.8,
            prop_oneof![
                20 => select(vec!["master", "scaler", "none"]),
                1 => select(vec!["Master", ""]),
            ],
        ),
    )
        .prop_map(|(name, role)| {
            let mut m = Map::new();
            put(&mut m, "name", name.map(|e| json!(e)));
            put(&mut m, "role", role.map(|e| json!(e)));
            Value::Object(m)
        })
}

/// `labels`: mostly valid keys and values, a null sometimes (it removes a preset).
fn labels() -> impl Strategy<Value = Value> {
    let key = prop_oneof![12 => valid_label_key(), 1 => label_key()];
    let value = prop_oneof![
        12 => "([A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?)?",
        1 => label_value(),
    ];
    btree_map(key, option::weighted(0.9, value), 0..4).prop_map(|m| {
        Value::Object(
            m.into_iter()
                .map(|(k, v)| (k, v.map_or(Value::Null, Value::from)))
                .collect(),
        )
    })
}

/// `taints`: mostly valid, sometimes any taint text.
fn taints() -> impl Strategy<Value = Value> {
    let taint = prop_oneof![
        12 => (valid_label_key(), option::weighted(0.6, "[A-Za-z0-9]([-A-Za-z0-9_.]{0,8}[A-Za-z0-9])?"), select(vec!["NoSchedule", "PreferNoSchedule", "NoExecute"]))
            .prop_map(|(k, v, e)| taint_of(&k, v.as_deref(), e)),
        1 => taint_text(),
    ];
    vec(taint, 0..3).prop_map(|t| json!(t))
}

/// `sysctls`: keys the sample roots have and some they have not, values of every JSON type.
fn sysctls() -> impl Strategy<Value = Value> {
    btree_map(
        prop_oneof![
            16 => select(EXISTING_SYSCTLS.to_vec()),
            1 => select(vec![
                "net.ipv4.ip_forward", "fs.inotify", "fs", "kernel/panic", "..", "kernel..panic",
                ".kernel.panic", "kernel.panic.", "", "kernel.pan ic", "kernel.panic\n",
            ]),
        ]
        .prop_map(String::from),
        prop_oneof![
            5 => select(vec![0i64, 1, 10, 128, 4096, 8192, 65530, 262144, 524288]).prop_map(Value::from),
            2 => "[0-9]{1,6}( [0-9]{1,6})?".prop_map(Value::from),
            1 => select(vec![i64::MAX, i64::MIN, -1]).prop_map(Value::from),
            1 => select(vec![
                json!(u64::MAX), json!(1.5), json!(true), Value::Null, json!(""), json!(" "),
                json!("\t"), json!("1\n"), json!("a\u{0}b"), json!(" 10 "), json!("10\t"), json!("1\t 1"),
            ]),
        ],
        0..4,
    )
    .prop_map(|m| Value::Object(m.into_iter().collect()))
}

/// An image GC threshold: mostly in `lo..=hi`, sometimes any percentage or no percentage.
fn percent(lo: i64, hi: i64) -> impl Strategy<Value = Value> {
    prop_oneof![
        12 => (lo..=hi).prop_map(Value::from),
        2 => (0i64..=100).prop_map(Value::from),
        1 => select(vec![json!(-1), json!(101), json!(i64::MAX), json!(i64::MIN), json!(u64::MAX), json!(70.0), json!("70")]),
    ]
}

/// A shutdown period: common texts, small numbers of one unit, any duration text.
fn grace() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => select(vec![
            "90s", "2m", "1h", "30s", "0s", "0", "45s", "1m30s", "1.5m", "500ms", "24h",
            "24h0m1s", "86400s", "86400.5s", "86399.000000001s", "-5s", "-0s", "5", "",
            "1d", "90 s", "+90s", "1h1m1s1ms1us1ns", "2562047h47m16.854775807s",
            "2562047h47m16.854775808s",
        ]).prop_map(String::from),
        1 => (0u32..200, select(vec!["s", "m", "ms"])).prop_map(|(n, u)| format!("{n}{u}")),
        // Fractions finer than a nanosecond are the duration target's (Go rounds them).
        1 => duration_text().prop_filter("resolvable to the nanosecond", |s| {
            oracle::go_duration(s).map_or(true, |g| g.slack == 0)
        }),
    ]
}

/// A `kubelet.extraArgs` entry: mostly fine, sometimes what the checks refuse.
fn extra_arg() -> impl Strategy<Value = String> {
    prop_oneof![
        20 => select(vec!["--v=2", "--max-pods=110", "--a-b=c.d/e:f,g", "--cpu-manager-policy=static", "--x="]).prop_map(String::from),
        2 => ("[a-z][-a-z]{0,10}", vec(wild_char(), 0..8)).prop_map(|(f, v)| format!("--{f}={}", v.into_iter().collect::<String>())),
        1 => select(vec![
            "v=2", "--v", "-v=2", "--node-labels=a=b", "--register-with-taints=a:NoSchedule",
            "--a=b c", "--a='x'", "--a=$x", "--a=%h", "--a=\\", "--a=`x`", "--a=\"x\"", "--a=1\n",
            "--node-labels-extra=1",
        ]).prop_map(String::from),
    ]
}

/// The grace and critical-pod periods: the critical one mostly within the grace period,
/// sometimes anything.
fn periods() -> impl Strategy<Value = (Option<String>, Option<String>)> {
    prop_oneof![
        2 => Just((None, None)),
        8 => (0u32..=7200).prop_flat_map(|g| (Just(g), 0..=g)).prop_flat_map(|(g, c)| {
            (select(vec![format!("{g}s"), oracle::go_string(i64::from(g) * 1_000_000_000)]), option::weighted(0.6, Just(format!("{c}s"))))
                .prop_map(|(g, c)| (Some(g), c))
        }),
        2 => (option::weighted(0.8, grace()), option::weighted(0.5, grace())),
    ]
}

/// `kubelet`: GC thresholds, shutdown periods, overwrite, the config path, extra arguments.
fn kubelet() -> impl Strategy<Value = Value> {
    (
        option::weighted(0.5, percent(81, 100)),
        option::weighted(0.5, percent(0, 79)),
        periods(),
        option::weighted(0.2, any::<bool>()),
        option::weighted(
            0.1,
            select(vec![
                "/etc/kubernetes/kubelet/kubelet-config.json",
                "/etc/kubernetes/kubelet/missing.json",
                "etc/kubernetes/kubelet/kubelet-config.json",
                "/etc/kubernetes/../kubernetes/kubelet/kubelet-config.json",
            ]),
        ),
        option::weighted(0.4, vec(extra_arg(), 0..4)),
    )
        .prop_map(|(high, low, (grace, critical), overwrite, path, extra)| {
            let mut m = Map::new();
            put(&mut m, "imageGCHighThresholdPercent", high);
            put(&mut m, "imageGCLowThresholdPercent", low);
            put(&mut m, "shutdownGracePeriod", grace.map(Value::from));
            put(
                &mut m,
                "shutdownGracePeriodCriticalPods",
                critical.map(Value::from),
            );
            put(&mut m, "overwrite", overwrite.map(Value::from));
            put(&mut m, "configPath", path.map(Value::from));
            put(&mut m, "extraArgs", extra.map(|e| json!(e)));
            Value::Object(m)
        })
}

/// `logind`: the inhibit delay around the grace periods, a day, and wrong types.
fn logind() -> impl Strategy<Value = Value> {
    prop_oneof![
        16 => select(vec![0u64, 1, 30, 89, 90, 91, 120, 3600, 7200, 86400]).prop_map(Value::from),
        1 => Just(json!(86401)),
        1 => select(vec![json!(u64::MAX), json!(-1), json!(1.5)]),
    ]
    .prop_map(|d| json!({"inhibitDelayMaxSec": d}))
}

/// `handoff.extraBootstrapArgs`: options with values, any words, junk.
fn extra_bootstrap_args() -> impl Strategy<Value = Vec<String>> {
    let option_words: Vec<&str> = NEWEST_OPTIONS
        .iter()
        .copied()
        .filter(|o| !FLAGS_OWNED.contains(o))
        .collect();
    let values = prop_oneof![
        16 => select(vec!["false", "true", "10.100.0.10", "ipv6", "ipv4", "raid0", "1", "", "--x", "a b"]),
        1 => select(vec!["-h", "--help", "--use-max-pods", "--x=y", "a\nb", "--kubelet-extra-args"]),
    ];
    let all_words = select(
        NEWEST_OPTIONS
            .iter()
            .copied()
            .chain([
                "foo",
                "--use-max-pod",
                "--flag=value",
                "--use-max-pods=false",
                "-h",
                "--help",
                "false",
                "a\nb",
                "",
                "--dns-cluster-ip",
                "10.100.0.10",
            ])
            .collect::<Vec<_>>(),
    );
    prop_oneof![
        16 => vec((select(option_words), values), 0..3).prop_map(|p| {
            p.into_iter().flat_map(|(o, v)| [o.to_string(), v.to_string()]).collect::<Vec<_>>()
        }),
        2 => vec(all_words, 0..4).prop_map(|w| w.into_iter().map(String::from).collect()),
        1 => vec(vec(wild_char(), 0..6).prop_map(|c| c.into_iter().collect::<String>()), 0..3),
    ]
}

/// `handoff`: the mode, both paths, extra bootstrap.sh arguments.
fn handoff() -> impl Strategy<Value = Value> {
    (
        option::weighted(
            0.2,
            prop_oneof![12 => select(vec!["auto", "al2", "al2023"]), 1 => select(vec!["AL2", ""])],
        ),
        option::weighted(
            0.05,
            select(vec![
                "/etc/eks/bootstrap.sh",
                "etc/eks/bootstrap.sh",
                "/etc/eks/../eks/bootstrap.sh",
                "/etc/eks/missing.sh",
            ]),
        ),
        option::weighted(
            0.05,
            select(vec![
                "/usr/bin/nodeadm",
                "usr/bin/nodeadm",
                "/usr/local/bin/nodeadm",
            ]),
        ),
        option::weighted(0.4, extra_bootstrap_args()),
    )
        .prop_map(|(mode, bp, np, extra)| {
            let mut m = Map::new();
            put(&mut m, "mode", mode.map(Value::from));
            put(&mut m, "bootstrapPath", bp.map(Value::from));
            put(&mut m, "nodeadmPath", np.map(Value::from));
            put(&mut m, "extraBootstrapArgs", extra.map(|e| json!(e)));
            Value::Object(m)
        })
}

/// A number of the config: mostly one of `valid`, sometimes too big, negative or a fraction.
fn number(valid: Vec<u64>) -> impl Strategy<Value = Value> {
    prop_oneof![
        20 => select(valid).prop_map(Value::from),
        1 => select(vec![json!(u64::MAX), json!(-1), json!(1.5)]),
    ]
}

/// `tagging`: the switches, budgets and the endpoint.
fn tagging() -> impl Strategy<Value = Value> {
    (
        option::weighted(0.3, any::<bool>()),
        option::weighted(0.2, any::<bool>()),
        option::weighted(0.3, number(vec![0, 1, 3000, 60000, 60000, 60001])),
        option::weighted(0.3, number(vec![1, 600, 86400, 86400, 0, 86401])),
        option::weighted(0.3, number(vec![0, 0, 10, 10, 599, 600, 86400, 86401])),
        option::weighted(0.1, select(vec!["http://127.0.0.1:5000", "", "not a url"])),
    )
        .prop_map(|(enabled, required, budget, deadline, spread, ep)| {
            let mut m = Map::new();
            put(&mut m, "enabled", enabled.map(Value::from));
            put(&mut m, "required", required.map(Value::from));
            put(&mut m, "syncBudgetMs", budget);
            put(&mut m, "backgroundDeadlineSec", deadline);
            put(&mut m, "spreadSec", spread);
            put(&mut m, "ec2Endpoint", ep.map(Value::from));
            Value::Object(m)
        })
}

/// `imds`: the endpoint, the IMDSv1 fallback, the deadline.
fn imds() -> impl Strategy<Value = Value> {
    (
        option::weighted(
            0.2,
            select(vec![
                "http://169.254.169.254",
                "",
                "[::1]",
                "auto",
                "http://[fd00:ec2::254]",
            ]),
        ),
        option::weighted(0.2, any::<bool>()),
        option::weighted(0.5, number(vec![1, 10000, 120000, 120000, 0, 120001])),
    )
        .prop_map(|(ep, v1, deadline)| {
            let mut m = Map::new();
            put(&mut m, "endpoint", ep.map(Value::from));
            put(&mut m, "allowV1Fallback", v1.map(Value::from));
            put(&mut m, "deadlineMs", deadline);
            Value::Object(m)
        })
}
