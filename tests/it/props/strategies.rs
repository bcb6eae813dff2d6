//! Generators shared by the targets: characters and names near Kubernetes' limits, label keys
//! and values, taints, Go duration texts, service CIDRs.

use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proptest::sample::select;

use super::oracle;

pub const ALNUM: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

pub fn chars(s: &str) -> Vec<char> {
    s.chars().collect()
}

/// A character Kubernetes names allow.
pub fn clean_char() -> impl Strategy<Value = char> {
    prop_oneof![12 => select(chars(ALNUM)), 2 => select(vec!['-', '_', '.'])]
}

/// Any character a hostile or careless config might hold.
pub fn wild_char() -> impl Strategy<Value = char> {
    prop_oneof![
        6 => select(chars(ALNUM)),
        2 => select(vec!['-', '_', '.']),
        2 => select(chars(" /:=,@$'\"\\\n\t\r\0é߀Ω\u{b5}\u{3bc}*%`!#{}[]")),
        1 => any::<char>(),
    ]
}

/// A length biased toward `limit`: 0, small, limit-1..=limit+1, or anything up to limit+8.
pub fn len_near(limit: usize) -> impl Strategy<Value = usize> {
    prop_oneof![1 => Just(0), 3 => 1..=4usize, 3 => (limit - 1)..=(limit + 1), 3 => 0..=(limit + 8)]
}

/// A name-like string near `limit` characters: mostly allowed characters, sometimes not, the
/// ends sometimes a dash, dot or underscore.
pub fn name_like(limit: usize) -> impl Strategy<Value = String> {
    (len_near(limit), 0..10u8)
        .prop_flat_map(|(n, mode)| {
            let c = if mode < 8 {
                clean_char().boxed()
            } else {
                wild_char().boxed()
            };
            (vec(c, n), Just(mode))
        })
        .prop_map(|(cs, mode)| {
            let mut s: String = cs.into_iter().collect();
            if mode == 9 && !s.is_empty() {
                s.insert(0, '-');
            }
            s
        })
}

/// A string of exactly `len` bytes of `[a-z0-9]` with a dot wherever `dots` says (never two in
/// a row, never at an end): a DNS subdomain of that length.
pub fn subdomain_of(len: usize, dots: &[u8]) -> String {
    let alnum = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut s = Vec::with_capacity(len);
    for i in 0..len {
        let d = dots.get(i).copied().unwrap_or(1);
        let dot_ok = i > 0 && i + 1 < len && s.last() != Some(&b'.');
        if d == 0 && dot_ok {
            s.push(b'.');
        } else {
            s.push(alnum[d as usize % alnum.len()]);
        }
    }
    String::from_utf8(s).unwrap()
}

/// Label-key prefixes: well-known namespaces, random subdomains, lengths around 253, one part
/// over 63, uppercase, dashes at the ends, empty parts.
pub fn dns_prefix() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => select(vec![
            "kubernetes.io", "node.kubernetes.io", "kubelet.kubernetes.io", "k8s.io", "x.k8s.io",
            "node-role.kubernetes.io", "node-restriction.kubernetes.io", "a.node.kubernetes.io",
            "topology.kubernetes.io", "beta.kubernetes.io", "example.com", "Example.com",
            "a..b", "-a.com", "a-.com", "a.com.", ".a.com", "a_b.com", "xkubernetes.io",
        ]).prop_map(String::from),
        3 => "[a-z0-9]([-a-z0-9]{0,8}[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]{0,6}[a-z0-9])?){0,3}",
        2 => (250usize..=256, vec(0u8..40, 256)).prop_map(|(n, d)| subdomain_of(n, &d)),
        1 => (62usize..=70, vec(1u8..40, 70)).prop_map(|(n, d)| format!("{}.example.com", subdomain_of(n, &d))),
        1 => vec(prop_oneof![4 => select(chars("abcxyz019")), 1 => select(chars("-.A_Z"))], 1..12)
            .prop_map(|c| c.into_iter().collect()),
    ]
}

/// A label key that is valid and no kubelet namespace.
pub fn valid_label_key() -> impl Strategy<Value = String> {
    "([a-z0-9]([-a-z0-9]{0,8}[a-z0-9])?(\\.[a-z0-9]{1,6}){1,2}/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?"
}

/// Any label key: valid, the kubelet's own and refused namespaces, boundary lengths, junk.
pub fn label_key() -> impl Strategy<Value = String> {
    prop_oneof![
        5 => valid_label_key(),
        2 => select(vec![
            "kubernetes.io/hostname", "kubernetes.io/role", "kubernetes.io/os",
            "node-role.kubernetes.io/worker", "node-restriction.kubernetes.io/x",
            "node.kubernetes.io/lifecycle", "kubelet.kubernetes.io/x", "a.node.kubernetes.io/x",
            "k8s.io/x", "x.k8s.io/y", "topology.kubernetes.io/zone", "topology.kubernetes.io/rack",
            "example.com/team", "Example.com/team", "kubernetes.io/", "/a", "a/b/c", "", "a",
            "a/", "eks.amazonaws.com/capacityType",
        ]).prop_map(String::from),
        2 => name_like(63),
        3 => (dns_prefix(), name_like(63)).prop_map(|(p, n)| format!("{p}/{n}")),
    ]
}

/// A label value: valid, empty, boundary lengths, junk.
pub fn label_value() -> impl Strategy<Value = String> {
    prop_oneof![
        5 => "([A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?)?",
        3 => name_like(63),
        1 => select(vec!["", "true", "a b", "x,y", "a=b", "a:b", "-a", "a-"]).prop_map(String::from),
    ]
}

pub fn effect() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => select(vec!["NoSchedule", "PreferNoSchedule", "NoExecute"]),
        1 => select(vec!["", "noschedule", "NoSchedule ", "Bogus", "NoSchedule:NoSchedule", "NoExecute="]),
    ]
    .prop_map(String::from)
}

/// A taint: mostly `key[=value]:Effect` of valid parts, sometimes of any parts, no effect, extra
/// separators.
pub fn taint_text() -> impl Strategy<Value = String> {
    prop_oneof![
        5 => (valid_label_key(), option::weighted(0.6, "[A-Za-z0-9]([-A-Za-z0-9_.]{0,8}[A-Za-z0-9])?"), effect())
            .prop_map(|(k, v, e)| taint_of(&k, v.as_deref(), &e)),
        4 => (label_key(), option::weighted(0.6, label_value()), effect())
            .prop_map(|(k, v, e)| taint_of(&k, v.as_deref(), &e)),
        1 => (label_key(), label_value()).prop_map(|(k, v)| format!("{k}={v}")),
        1 => vec(prop_oneof![3 => wild_char(), 1 => select(vec![':', '='])], 0..20).prop_map(|c| c.into_iter().collect()),
    ]
}

pub fn taint_of(k: &str, v: Option<&str>, e: &str) -> String {
    match v {
        Some(v) => format!("{k}={v}:{e}"),
        None => format!("{k}:{e}"),
    }
}

/// Duration texts: Go's components with every unit and some that are not, long digit runs,
/// signs, Go's own `String()` form of any int64, the limits, junk.
pub fn duration_text() -> impl Strategy<Value = String> {
    let digits = prop_oneof![
        4 => "[0-9]{0,3}",
        2 => select(vec!["0", "00", "0000000000000000000000000"]).prop_map(String::from),
        1 => "[0-9]{15,22}",
        1 => select(vec!["9223372036854775807", "9223372036854775808", "2562047", "2562048", "153722867", "00000000000000000000001"]).prop_map(String::from),
    ];
    let frac = option::weighted(0.3, prop_oneof![3 => "[0-9]{0,9}", 1 => "[0-9]{10,30}"]);
    let unit = prop_oneof![
        8 => select(vec!["ns", "us", "\u{b5}s", "\u{3bc}s", "ms", "s", "m", "h"]),
        1 => select(vec!["", "x", "sec", "S", "M", "\u{b5}", "mss", "d", " s", "hm"]),
    ];
    let components = (
        select(vec!["", "", "", "+", "-"]),
        vec((digits, frac, unit), 1..4),
    )
        .prop_map(|(sign, cs)| {
            let mut s = sign.to_string();
            for (d, f, u) in cs {
                s.push_str(&d);
                if let Some(f) = f {
                    s.push('.');
                    s.push_str(&f);
                }
                s.push_str(u);
            }
            s
        });
    prop_oneof![
        5 => components,
        2 => any::<i64>().prop_map(oracle::go_string),
        1 => select(vec![
            "0", "+0", "-0", "00", "", "+", "-", ".", ".s", "s", "1", "1.", "1.s", ".5s", "-0s",
            "-0.0s", "-.0h", "-0ns0s", "+0s",
            "9223372036854775807ns", "9223372036854775808ns", "-9223372036854775808ns",
            "-9223372036854775809ns", "2562047h47m16.854775807s", "2562047h47m16.854775808s",
            "2562047h47m16.8547758079s", "2562048h", "106751d", "1h-1m", "1e3s", "1_000s",
            "9223372036854775808ns9223372036854775808ns", "9223372036854775808ns0s",
        ]).prop_map(String::from),
        1 => "[-+0-9.a-z\u{b5}\u{3bc} ]{0,12}",
        1 => vec(any::<char>(), 0..8).prop_map(|c| c.into_iter().collect()),
    ]
}

/// IPv6 addresses for `cluster.cidr`, with whether they are addresses.
pub const V6: &[(&str, bool)] = &[
    ("fd00:10:96::", true),
    ("2600:1f18::", true),
    ("::", true),
    ("::1", true),
    ("2001:db8:0:0:0:0:0:0", true),
    ("2001:db8::1:0:0:1", true),
    ("::ffff:10.0.0.0", true),
    ("1:2:3:4:5:6:7:8", true),
    ("FD00::", true),
    ("gg::", false),
    ("1:2:3:4:5:6:7:8:9", false),
    (":::", false),
    ("fd00:::1", false),
    ("fe80::1%eth0", false),
    ("1::2::3", false),
];

pub fn cidr() -> impl Strategy<Value = String> {
    prop_oneof![
        5 => (0u16..=257, 0u16..=256, 0u16..=256, 0u16..=256, 0u8..=34)
            .prop_map(|(a, b, c, d, l)| format!("{a}.{b}.{c}.{d}/{l}")),
        3 => (select(V6.iter().map(|v| v.0).collect::<Vec<_>>()), 0u16..=130)
            .prop_map(|(a, l)| format!("{a}/{l}")),
        1 => select(vec![
            "10.0.0.0", "10.0.0.0/", "/16", "10.0.0.0/16/1", "10.0.0.0/+16", "10.0.0.0/-1",
            "010.0.0.0/16", " 10.0.0.0/16", "10.0.0.0/16 ", "fd00::/64x", "10.0.0/16",
            "1.2.3.4/0x10", "1.2.3.4/ 16", "10.100.0.0/16", "fd00:10:96::/108",
        ]).prop_map(String::from),
    ]
}
