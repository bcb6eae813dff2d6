//! Property tests: random and boundary inputs through the config, the plan, the kubelet config
//! patch, the metadata file, durations and Kubernetes' name rules. Each property is checked
//! against an oracle written here from the upstream rule — bootstrap.sh's argument loop
//! (`common::bootstrap_sh`), Go's `time.ParseDuration` and `Duration.String`, apimachinery's
//! validation, kubelet's self-label rule, the config's documented checks — never by calling the
//! function under test.
//!
//! `cargo test --test it props::` is the smoke run CI makes (part of `make test`, about a minute in
//! debug); `make fuzz` is the long run (release, `PROPTEST_CASES` cases per target). Each target
//! prints how many inputs it ran and how many were accepted and refused (`--nocapture`).

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::LazyLock;
use std::time::Instant;

use eks_nodeinit::aspects::bootstrap::NEWEST_OPTIONS;
use eks_nodeinit::facts::{Family, InstanceTags};
use eks_nodeinit::metadata::{self, Metadata};
use eks_nodeinit::plan::{self, Plan, Step};
use eks_nodeinit::userdata::UserDataFact;
use eks_nodeinit::{config, duration, k8s, spec};
use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{Config as RunnerConfig, TestCaseError, TestRunner};
use regex::Regex;
use serde_json::{json, Map, Value};

use common::bootstrap_sh;

// ---------------------------------------------------------------------------------------------
// The runner: cases per target, counts printed.

/// How many inputs were accepted and refused.
#[derive(Default)]
struct Tally {
    accepted: AtomicU64,
    refused: AtomicU64,
}

impl Tally {
    fn count(&self, accepted: bool) {
        let c = if accepted {
            &self.accepted
        } else {
            &self.refused
        };
        c.fetch_add(1, Ordering::Relaxed);
    }
}

/// Run `test` over `cases` inputs of the strategy `make` builds (`PROPTEST_CASES` when set,
/// else `smoke`), printing the counts; a failing input is shrunk and reported. It runs on a
/// thread with a 64 MiB stack: a debug build's generation of the nested config strategies
/// takes more than a test thread's 2 MiB.
fn check<S>(
    name: &str,
    smoke: u32,
    make: impl FnOnce() -> S + Send,
    test: impl Fn(S::Value, &Tally) -> Result<(), TestCaseError> + Sync,
) where
    S: Strategy,
    S::Value: std::fmt::Debug,
{
    std::thread::scope(|scope| {
        let run = std::thread::Builder::new()
            .stack_size(64 << 20)
            .spawn_scoped(scope, || run_cases(name, smoke, make(), &test))
            .unwrap();
        if let Err(panic) = run.join() {
            std::panic::resume_unwind(panic);
        }
    });
}

fn run_cases<S>(
    name: &str,
    smoke: u32,
    strategy: S,
    test: &impl Fn(S::Value, &Tally) -> Result<(), TestCaseError>,
) where
    S: Strategy,
    S::Value: std::fmt::Debug,
{
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(smoke);
    let mut runner = TestRunner::new(RunnerConfig {
        cases,
        failure_persistence: None,
        // The only filter drops sub-nanosecond fractions from the config's durations: never
        // let a long run stop on it.
        max_local_rejects: u32::MAX,
        ..RunnerConfig::default()
    });
    let tally = Tally::default();
    let start = Instant::now();
    let result = runner.run(&strategy, |v| test(v, &tally));
    let (a, r) = (
        tally.accepted.load(Ordering::Relaxed),
        tally.refused.load(Ordering::Relaxed),
    );
    eprintln!(
        "props {name}: {cases} cases, {} inputs run: {a} accepted, {r} refused; {:.1} s",
        a + r,
        start.elapsed().as_secs_f64()
    );
    if let Err(e) = result {
        panic!("props {name}: {e}");
    }
}

// ---------------------------------------------------------------------------------------------
// Oracles, written from the upstream rules.

mod oracle {
    use super::*;

    fn re(s: &str) -> Regex {
        Regex::new(s).unwrap()
    }

    /// apimachinery's qualified-name "name" part.
    static NAME: LazyLock<Regex> =
        LazyLock::new(|| re(r"\A([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\z"));
    /// apimachinery's IsDNS1123Subdomain pattern (the length is checked on the whole).
    static SUBDOMAIN: LazyLock<Regex> = LazyLock::new(|| {
        re(r"\A[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\z")
    });
    /// apimachinery's label value.
    static VALUE: LazyLock<Regex> =
        LazyLock::new(|| re(r"\A(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?\z"));
    /// `key[=value]:Effect`: none of the three parts can hold `=` or `:`.
    static TAINT: LazyLock<Regex> = LazyLock::new(|| re(r"\A([^:=]*)(=([^:=]*))?:([^:=]*)\z"));

    /// IsQualifiedName: `[prefix/]name`, the prefix a DNS-1123 subdomain of at most 253
    /// characters, the name at most 63.
    pub fn qualified_name(s: &str) -> bool {
        let parts: Vec<&str> = s.split('/').collect();
        let (prefix, name) = match parts.as_slice() {
            [n] => (None, *n),
            [p, n] => (Some(*p), *n),
            _ => return false,
        };
        if let Some(p) = prefix {
            if p.is_empty() || p.len() > 253 || !SUBDOMAIN.is_match(p) {
                return false;
            }
        }
        !name.is_empty() && name.len() <= 63 && NAME.is_match(name)
    }

    /// IsValidLabelValue: empty, or at most 63 characters of the name pattern.
    pub fn label_value(s: &str) -> bool {
        s.len() <= 63 && VALUE.is_match(s)
    }

    /// kubelet's `--register-with-taints` entry: (key, value, effect).
    pub fn taint(s: &str) -> Option<(String, String, String)> {
        let c = TAINT.captures(s)?;
        let key = c.get(1).map_or("", |m| m.as_str());
        let value = c.get(3).map_or("", |m| m.as_str());
        let effect = c.get(4).map_or("", |m| m.as_str());
        let effect_ok = ["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect);
        (effect_ok && qualified_name(key) && label_value(value))
            .then(|| (key.into(), value.into(), effect.into()))
    }

    /// The labels a kubelet may set on itself (k8s.io/kubelet/pkg/apis, kubeletLabels).
    const KUBELET_LABELS: [&str; 11] = [
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
    ];

    /// kubelet refuses `--node-labels` keys in the kubernetes.io and k8s.io namespaces (the
    /// domain or a subdomain of it) unless the key is one of its own labels or sits under
    /// [*.]kubelet.kubernetes.io or [*.]node.kubernetes.io.
    pub fn kubelet_may_set(key: &str) -> bool {
        let ns = key.split_once('/').map_or("", |(p, _)| p);
        let under = |d: &str| ns == d || ns.ends_with(&format!(".{d}"));
        if !(under("kubernetes.io") || under("k8s.io")) {
            return true;
        }
        KUBELET_LABELS.contains(&key)
            || under("kubelet.kubernetes.io")
            || under("node.kubernetes.io")
    }

    /// A Go duration as Go reads it: the sign, the exact value in nanoseconds (each
    /// component's fraction cut toward zero), and `slack`: how many components carry more
    /// fraction digits than their unit resolves, where Go's float64 arithmetic may differ from
    /// the exact value by one nanosecond each. `None`: not the grammar.
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct Go {
        pub neg: bool,
        pub nanos: u128,
        pub slack: u128,
    }

    static DURATION: LazyLock<Regex> = LazyLock::new(|| {
        re(r"\A([-+]?)(0|(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|µs|μs|ms|s|m|h))+)\z")
    });
    static COMPONENT: LazyLock<Regex> =
        LazyLock::new(|| re(r"([0-9]*)(?:\.([0-9]*))?(ns|us|µs|μs|ms|s|m|h)"));

    /// Go's limit: the magnitude of an int64 of nanoseconds.
    pub const MAX: u128 = i64::MAX as u128;

    pub fn go_duration(s: &str) -> Option<Go> {
        let c = DURATION.captures(s)?;
        let neg = &c[1] == "-";
        let body = &c[2];
        if body == "0" {
            return Some(Go {
                neg,
                nanos: 0,
                slack: 0,
            });
        }
        // Anything at or above this is over every limit; values are capped there.
        const CAP: u128 = 1 << 70;
        let (mut nanos, mut slack) = (0u128, 0u128);
        for m in COMPONENT.captures_iter(body) {
            let (int, frac, unit) = (&m[1], m.get(2).map_or("", |f| f.as_str()), &m[3]);
            let (per, resolution) = match unit {
                "ns" => (1u128, 0),
                "us" | "µs" | "μs" => (1_000, 3),
                "ms" => (1_000_000, 6),
                "s" => (1_000_000_000, 9),
                "m" => (60_000_000_000, 10),
                "h" => (3_600_000_000_000, 11),
                _ => unreachable!(),
            };
            let digits = int.trim_start_matches('0');
            let whole = if digits.len() > 22 {
                CAP
            } else {
                digits
                    .parse::<u128>()
                    .unwrap_or(0)
                    .saturating_mul(per)
                    .min(CAP)
            };
            // At most 25 fraction digits count (the rest is far below a nanosecond).
            let f = &frac[..frac.len().min(25)];
            let part = if f.is_empty() {
                0
            } else {
                f.parse::<u128>().unwrap() * per / 10u128.pow(f.len() as u32)
            };
            if frac.len() > resolution {
                slack += 1;
            }
            nanos = nanos.saturating_add(whole).saturating_add(part).min(CAP);
        }
        Some(Go { neg, nanos, slack })
    }

    impl Go {
        /// Whether Go accepts it: at most 2^63-1 ns, or 2^63 when negative.
        pub fn accepted(&self) -> bool {
            self.nanos <= if self.neg { MAX + 1 } else { MAX }
        }
        /// Whether Go's float64 arithmetic could put it on the other side of a limit.
        pub fn near_limit(&self) -> bool {
            let lim = if self.neg { MAX + 1 } else { MAX };
            self.slack > 0 && (self.nanos.abs_diff(lim) <= self.slack || self.nanos <= self.slack)
        }
    }

    /// Go's `Duration.String()`: `72h3m0.5s`; leading zero units left out; under a second in
    /// ms, µs (U+00B5) or ns so that the leading digit is not zero; `0s` for zero.
    pub fn go_string(d: i64) -> String {
        if d == 0 {
            return "0s".into();
        }
        let u = d.unsigned_abs();
        let frac = |v: u64, unit: u64| {
            let (int, rem) = (v / unit, v % unit);
            if rem == 0 {
                int.to_string()
            } else {
                let width = unit.ilog10() as usize;
                let f = format!("{rem:0width$}");
                format!("{int}.{}", f.trim_end_matches('0'))
            }
        };
        let body = if u < 1_000 {
            format!("{u}ns")
        } else if u < 1_000_000 {
            format!("{}µs", frac(u, 1_000))
        } else if u < 1_000_000_000 {
            format!("{}ms", frac(u, 1_000_000))
        } else {
            let (h, rem) = (u / 3_600_000_000_000, u % 3_600_000_000_000);
            let (m, ns) = (rem / 60_000_000_000, rem % 60_000_000_000);
            let s = frac(ns, 1_000_000_000);
            match (h, m) {
                (0, 0) => format!("{s}s"),
                (0, m) => format!("{m}m{s}s"),
                (h, m) => format!("{h}h{m}m{s}s"),
            }
        };
        if d < 0 {
            format!("-{body}")
        } else {
            body
        }
    }

    /// An IPv4 address as Go's parsers take it: four decimal octets 0-255, no leading zeros.
    static IPV4: LazyLock<Regex> = LazyLock::new(|| {
        let o = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
        re(&format!(r"\A{o}\.{o}\.{o}\.{o}\z"))
    });

    /// `addr/bits`, bits in decimal digits up to the address's width: is it IPv6? `None`: not a
    /// network. IPv6 addresses are the labelled ones the generator uses.
    pub fn cidr(s: &str) -> Option<bool> {
        let (addr, bits) = s.split_once('/')?;
        if bits.is_empty() || bits.len() > 3 || !bits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let bits: u32 = bits.parse().ok()?;
        if IPV4.is_match(addr) {
            return (bits <= 32).then_some(false);
        }
        let (_, ok) = super::V6.iter().find(|(a, _)| *a == addr)?;
        (*ok && bits <= 128).then_some(true)
    }

    /// Standard base64 with padding, canonical (unused bits zero), not empty.
    pub fn base64(s: &str) -> bool {
        const ALPHABET: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let b = s.as_bytes();
        if b.is_empty() || b.len() % 4 != 0 {
            return false;
        }
        let pad = b.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 {
            return false;
        }
        let data = &b[..b.len() - pad];
        let Some(vals) = data
            .iter()
            .map(|c| ALPHABET.bytes().position(|a| a == *c))
            .collect::<Option<Vec<_>>>()
        else {
            return false;
        };
        match pad {
            1 => vals.last().unwrap() & 0b11 == 0,
            2 => vals.last().unwrap() & 0b1111 == 0,
            _ => true,
        }
    }

    /// EKS cluster names: 1-100 letters, digits, `-`, `_`, starting with a letter or digit.
    pub fn cluster_name(s: &str) -> bool {
        static R: LazyLock<Regex> = LazyLock::new(|| re(r"\A[A-Za-z0-9][A-Za-z0-9_-]{0,99}\z"));
        R.is_match(s)
    }

    /// A `kubelet.extraArgs` entry: `--flag=value`, with none of the characters that break the
    /// `Environment='KUBELET_EXTRA_ARGS=…'` line bootstrap.sh writes or split the word when
    /// systemd expands it (controls, quotes, `\`, `$`, `%`, `` ` ``, space), and not the labels'
    /// or taints' own flags.
    /// What systemd's `$VAR` splitting (ASCII whitespace only) and bash leave inside a word
    /// although a reader sees a gap or nothing: Unicode's White_Space characters but the ASCII
    /// space and tab (controls are refused on their own), and the invisible format characters
    /// (zero-width space and joiners, direction marks and embeddings, word joiner and the
    /// invisible operators, the byte-order mark).
    pub fn unsplittable(c: char) -> bool {
        (c.is_whitespace() && !c.is_ascii())
            || matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}')
    }

    pub fn kubelet_extra_arg(a: &str) -> bool {
        a.starts_with("--")
            && a.contains('=')
            && !a.chars().any(|c| c.is_control() || "'\"\\$%` ".contains(c))
            && !a.chars().any(unsplittable)
            && !a.starts_with("--node-labels=")
            && !a.starts_with("--register-with-taints=")
    }
}

// ---------------------------------------------------------------------------------------------
// Generators.

const ALNUM: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

fn chars(s: &str) -> Vec<char> {
    s.chars().collect()
}

/// A character Kubernetes names allow.
fn clean_char() -> impl Strategy<Value = char> {
    prop_oneof![12 => select(chars(ALNUM)), 2 => select(vec!['-', '_', '.'])]
}

/// Any character a hostile or careless config might hold.
fn wild_char() -> impl Strategy<Value = char> {
    prop_oneof![
        6 => select(chars(ALNUM)),
        2 => select(vec!['-', '_', '.']),
        2 => select(chars(" /:=,@$'\"\\\n\t\r\0é߀Ω\u{b5}\u{3bc}*%`!#{}[]")),
        1 => any::<char>(),
    ]
}

/// A length biased toward `limit`: 0, small, limit-1..=limit+1, or anything up to limit+8.
fn len_near(limit: usize) -> impl Strategy<Value = usize> {
    prop_oneof![1 => Just(0), 3 => 1..=4usize, 3 => (limit - 1)..=(limit + 1), 3 => 0..=(limit + 8)]
}

/// A name-like string near `limit` characters: mostly allowed characters, sometimes not, the
/// ends sometimes a dash, dot or underscore.
fn name_like(limit: usize) -> impl Strategy<Value = String> {
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
fn subdomain_of(len: usize, dots: &[u8]) -> String {
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
fn dns_prefix() -> impl Strategy<Value = String> {
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
fn valid_label_key() -> impl Strategy<Value = String> {
    "([a-z0-9]([-a-z0-9]{0,8}[a-z0-9])?(\\.[a-z0-9]{1,6}){1,2}/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?"
}

/// Any label key: valid, the kubelet's own and refused namespaces, boundary lengths, junk.
fn label_key() -> impl Strategy<Value = String> {
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
fn label_value() -> impl Strategy<Value = String> {
    prop_oneof![
        5 => "([A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?)?",
        3 => name_like(63),
        1 => select(vec!["", "true", "a b", "x,y", "a=b", "a:b", "-a", "a-"]).prop_map(String::from),
    ]
}

fn effect() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => select(vec!["NoSchedule", "PreferNoSchedule", "NoExecute"]),
        1 => select(vec!["", "noschedule", "NoSchedule ", "Bogus", "NoSchedule:NoSchedule", "NoExecute="]),
    ]
    .prop_map(String::from)
}

/// A taint: mostly `key[=value]:Effect` of valid parts, sometimes of any parts, no effect, extra
/// separators.
fn taint_text() -> impl Strategy<Value = String> {
    prop_oneof![
        5 => (valid_label_key(), option::weighted(0.6, "[A-Za-z0-9]([-A-Za-z0-9_.]{0,8}[A-Za-z0-9])?"), effect())
            .prop_map(|(k, v, e)| taint_of(&k, v.as_deref(), &e)),
        4 => (label_key(), option::weighted(0.6, label_value()), effect())
            .prop_map(|(k, v, e)| taint_of(&k, v.as_deref(), &e)),
        1 => (label_key(), label_value()).prop_map(|(k, v)| format!("{k}={v}")),
        1 => vec(prop_oneof![3 => wild_char(), 1 => select(vec![':', '='])], 0..20).prop_map(|c| c.into_iter().collect()),
    ]
}

fn taint_of(k: &str, v: Option<&str>, e: &str) -> String {
    match v {
        Some(v) => format!("{k}={v}:{e}"),
        None => format!("{k}:{e}"),
    }
}

/// Duration texts: Go's components with every unit and some that are not, long digit runs,
/// signs, Go's own `String()` form of any int64, the limits, junk.
fn duration_text() -> impl Strategy<Value = String> {
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
const V6: &[(&str, bool)] = &[
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

fn cidr() -> impl Strategy<Value = String> {
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

const VALID_ENDPOINTS: &[&str] = &[
    "https://0123456789ABCDEF0123456789ABCDEF.gr7.eu-west-1.eks.amazonaws.com",
    "https://10.0.0.1:6443",
    "https://[fd00::1]:443/",
    "https://api.example.com/k8s/v1",
    "https://x",
    "https://a-b.c-d.example:65535/a_b~c.d",
];
const BAD_ENDPOINTS: &[&str] = &[
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

const EXISTING_SYSCTLS: [&str; 7] = [
    "fs.inotify.max_user_watches",
    "fs.inotify.max_user_instances",
    "kernel.panic",
    "kernel.panic_on_oops",
    "net.core.somaxconn",
    "vm.max_map_count",
    "vm.overcommit_memory",
];

/// A config document: the examples' shape with every field sometimes set, mostly to valid
/// values, sometimes to edge or wrong ones.
fn config_doc() -> impl Strategy<Value = Value> {
    let cluster = (
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
        });
    let node_group = (
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
        });
    let key = prop_oneof![12 => valid_label_key(), 1 => label_key()];
    let value = prop_oneof![
        12 => "([A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?)?",
        1 => label_value(),
    ];
    let labels = btree_map(key, option::weighted(0.9, value), 0..4).prop_map(|m| {
        Value::Object(
            m.into_iter()
                .map(|(k, v)| (k, v.map_or(Value::Null, Value::from)))
                .collect(),
        )
    });
    let taint = prop_oneof![
        12 => (valid_label_key(), option::weighted(0.6, "[A-Za-z0-9]([-A-Za-z0-9_.]{0,8}[A-Za-z0-9])?"), select(vec!["NoSchedule", "PreferNoSchedule", "NoExecute"]))
            .prop_map(|(k, v, e)| taint_of(&k, v.as_deref(), e)),
        1 => taint_text(),
    ];
    let taints = vec(taint, 0..3).prop_map(|t| json!(t));
    let sysctls = btree_map(
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
    .prop_map(|m| Value::Object(m.into_iter().collect()));
    let percent = |lo: i64, hi: i64| {
        prop_oneof![
            12 => (lo..=hi).prop_map(Value::from),
            2 => (0i64..=100).prop_map(Value::from),
            1 => select(vec![json!(-1), json!(101), json!(i64::MAX), json!(i64::MIN), json!(u64::MAX), json!(70.0), json!("70")]),
        ]
    };
    let grace = || {
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
    };
    let extra_arg = prop_oneof![
        20 => select(vec!["--v=2", "--max-pods=110", "--a-b=c.d/e:f,g", "--cpu-manager-policy=static", "--x="]).prop_map(String::from),
        2 => ("[a-z][-a-z]{0,10}", vec(wild_char(), 0..8)).prop_map(|(f, v)| format!("--{f}={}", v.into_iter().collect::<String>())),
        1 => select(vec![
            "v=2", "--v", "-v=2", "--node-labels=a=b", "--register-with-taints=a:NoSchedule",
            "--a=b c", "--a='x'", "--a=$x", "--a=%h", "--a=\\", "--a=`x`", "--a=\"x\"", "--a=1\n",
            "--node-labels-extra=1",
        ]).prop_map(String::from),
    ];
    // The critical-pod period mostly within the grace period, sometimes anything.
    let periods = prop_oneof![
        2 => Just((None, None)),
        8 => (0u32..=7200).prop_flat_map(|g| (Just(g), 0..=g)).prop_flat_map(|(g, c)| {
            (select(vec![format!("{g}s"), oracle::go_string(i64::from(g) * 1_000_000_000)]), option::weighted(0.6, Just(format!("{c}s"))))
                .prop_map(|(g, c)| (Some(g), c))
        }),
        2 => (option::weighted(0.8, grace()), option::weighted(0.5, grace())),
    ];
    let kubelet = (
        option::weighted(0.5, percent(81, 100)),
        option::weighted(0.5, percent(0, 79)),
        periods,
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
        option::weighted(0.4, vec(extra_arg, 0..4)),
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
        });
    let logind = prop_oneof![
        16 => select(vec![0u64, 1, 30, 89, 90, 91, 120, 3600, 7200, 86400]).prop_map(Value::from),
        1 => Just(json!(86401)),
        1 => select(vec![json!(u64::MAX), json!(-1), json!(1.5)]),
    ]
    .prop_map(|d| json!({"inhibitDelayMaxSec": d}));
    let option_words: Vec<&str> = NEWEST_OPTIONS
        .iter()
        .copied()
        .filter(|o| !eks_nodeinit::aspects::bootstrap::FLAGS_OWNED.contains(o))
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
    let extra_bootstrap = prop_oneof![
        16 => vec((select(option_words), values), 0..3).prop_map(|p| {
            p.into_iter().flat_map(|(o, v)| [o.to_string(), v.to_string()]).collect::<Vec<_>>()
        }),
        2 => vec(all_words, 0..4).prop_map(|w| w.into_iter().map(String::from).collect()),
        1 => vec(vec(wild_char(), 0..6).prop_map(|c| c.into_iter().collect::<String>()), 0..3),
    ];
    let handoff = (
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
        option::weighted(0.4, extra_bootstrap),
    )
        .prop_map(|(mode, bp, np, extra)| {
            let mut m = Map::new();
            put(&mut m, "mode", mode.map(Value::from));
            put(&mut m, "bootstrapPath", bp.map(Value::from));
            put(&mut m, "nodeadmPath", np.map(Value::from));
            put(&mut m, "extraBootstrapArgs", extra.map(|e| json!(e)));
            Value::Object(m)
        });
    let number = |valid: Vec<u64>| {
        prop_oneof![
            20 => select(valid).prop_map(Value::from),
            1 => select(vec![json!(u64::MAX), json!(-1), json!(1.5)]),
        ]
    };
    let tagging = (
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
        });
    let imds = (
        option::weighted(0.2, select(vec!["http://169.254.169.254", "", "[::1]"])),
        option::weighted(0.2, any::<bool>()),
        option::weighted(0.5, number(vec![1, 10000, 120000, 120000, 0, 120001])),
    )
        .prop_map(|(ep, v1, deadline)| {
            let mut m = Map::new();
            put(&mut m, "endpoint", ep.map(Value::from));
            put(&mut m, "allowV1Fallback", v1.map(Value::from));
            put(&mut m, "deadlineMs", deadline);
            Value::Object(m)
        });
    (
        (
            option::weighted(0.99, cluster),
            option::weighted(0.99, node_group),
            option::weighted(0.7, labels),
            option::weighted(0.4, taints),
            option::weighted(0.5, sysctls),
            option::weighted(0.7, kubelet),
        ),
        (
            option::weighted(0.3, logind),
            option::weighted(0.5, handoff),
            option::weighted(0.3, tagging),
            option::weighted(0.2, imds),
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

fn put(m: &mut Map<String, Value>, k: &str, v: Option<Value>) {
    if let Some(v) = v {
        m.insert(k.to_string(), v);
    }
}

// ---------------------------------------------------------------------------------------------
// Target 1: config → spec → facts → plan, on both sample roots.

/// A temp copy of a sample root, made once per test and only read.
struct Root {
    dir: tempfile::TempDir,
    al2: bool,
}

impl Root {
    fn new(name: &str) -> Root {
        Root {
            dir: common::sample_root(name),
            al2: name == "al2-root",
        }
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// What the oracle expects an accepted config to plan.
#[derive(Debug)]
struct Want {
    al2: bool,
    name: String,
    ca: Option<String>,
    endpoint: Option<String>,
    /// The text and whether it is IPv6.
    cidr: Option<(String, bool)>,
    labels: BTreeMap<String, String>,
    taints: Vec<String>,
    extra_args: Vec<String>,
    extra_bootstrap: Vec<(String, String)>,
    kubelet: Map<String, Value>,
    kubelet_path: String,
    logind_sec: Option<u64>,
    /// kubelet's shutdownGracePeriod in nanoseconds.
    grace_nanos: Option<u128>,
    sysctls: BTreeMap<String, String>,
    live_changes: BTreeMap<String, String>,
    tag: Option<String>,
}

/// The config's refusals, each a reason; or what it plans.
fn predict(doc: &Value, root: &Root) -> Result<Want, Vec<String>> {
    let mut why: Vec<String> = Vec::new();
    let mut no = |r: String| why.push(r);
    let empty = Map::new();
    let top = doc.as_object().unwrap();
    const TOP: [&str; 11] = [
        "apiVersion",
        "cluster",
        "nodeGroup",
        "labels",
        "taints",
        "sysctls",
        "kubelet",
        "logind",
        "handoff",
        "tagging",
        "imds",
    ];
    for k in top.keys() {
        if !TOP.contains(&k.as_str()) {
            no(format!("unknown field {k}"));
        }
    }
    let obj = |k: &str| top.get(k).and_then(Value::as_object).unwrap_or(&empty);
    let string =
        |m: &Map<String, Value>, k: &str| m.get(k).and_then(Value::as_str).map(String::from);
    if let Some(v) = top.get("apiVersion") {
        if v != "eks-nodeinit/v1" {
            no(format!("apiVersion {v}"));
        }
    }
    // Numbers as the config's types take them.
    let mut u64_field = |m: &Map<String, Value>, k: &str, default: u64| match m.get(k) {
        None => default,
        Some(v) => v.as_u64().unwrap_or_else(|| {
            no(format!("{k} {v} is no u64"));
            default
        }),
    };
    let tagging = obj("tagging");
    let tag_enabled = tagging
        .get("enabled")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let budget = u64_field(tagging, "syncBudgetMs", 3000);
    let deadline = u64_field(tagging, "backgroundDeadlineSec", 600);
    let spread = u64_field(tagging, "spreadSec", 0);
    let imds_deadline = u64_field(obj("imds"), "deadlineMs", 10_000);
    let given_delay = obj("logind").get("inhibitDelayMaxSec").map(|v| {
        v.as_u64()
            .ok_or(format!("inhibitDelayMaxSec {v} is no u64"))
    });
    let mut no = |r: String| why.push(r);
    if budget > 60_000 {
        no("syncBudgetMs".into());
    }
    if !(1..=86_400).contains(&deadline) {
        no("backgroundDeadlineSec".into());
    }
    if spread > 86_400 || spread >= deadline {
        no("spreadSec".into());
    }
    if !(1..=120_000).contains(&imds_deadline) {
        no("imds.deadlineMs".into());
    }

    // cluster
    let Some(cluster) = top.get("cluster").and_then(Value::as_object) else {
        no("no cluster".into());
        return Err(why);
    };
    let name = string(cluster, "name").unwrap_or_default();
    if !oracle::cluster_name(&name) {
        no(format!("cluster.name {name:?}"));
    }
    let endpoint = string(cluster, "apiServerEndpoint");
    if let Some(e) = &endpoint {
        if !VALID_ENDPOINTS.contains(&e.as_str()) {
            no(format!("endpoint {e}"));
        }
    }
    let ca = string(cluster, "certificateAuthority");
    if let Some(c) = &ca {
        if !oracle::base64(c) {
            no("certificateAuthority".into());
        }
    }
    let cidr = string(cluster, "cidr").map(|c| {
        let v6 = oracle::cidr(&c);
        if v6.is_none() {
            no(format!("cidr {c}"));
        }
        (c, v6.unwrap_or(false))
    });
    if string(cluster, "containerRuntime").is_some_and(|r| r != "containerd") {
        no("containerRuntime".into());
    }

    // nodeGroup
    // Optional: every field has a default.
    let no_group = Map::new();
    let ng = match top.get("nodeGroup") {
        None => &no_group,
        Some(v) => match v.as_object() {
            Some(o) => o,
            None => {
                no("nodeGroup not an object".into());
                return Err(why);
            }
        },
    };
    let group = string(ng, "name");
    if let Some(g) = &group {
        if g.is_empty() || g.len() > 200 || g.chars().any(char::is_control) {
            no(format!("nodeGroup.name {g:?}"));
        }
    }
    let role = string(ng, "role").unwrap_or("none".into());
    let (preset_labels, preset_taints): (Vec<(&str, &str)>, Vec<&str>) = match role.as_str() {
        "master" => (
            vec![("node.kubernetes.io/role", "master")],
            vec!["CriticalAddonsOnly=true:NoSchedule"],
        ),
        "scaler" => (vec![("node.kubernetes.io/role", "scaler")], vec![]),
        "none" => (vec![], vec![]),
        r => {
            no(format!("role {r}"));
            (vec![], vec![])
        }
    };

    // labels: the preset, then the config's (null removes)
    let mut labels: BTreeMap<String, String> = preset_labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    for (k, v) in obj("labels") {
        match v.as_str() {
            Some(v) => labels.insert(k.clone(), v.to_string()),
            None => labels.remove(k),
        };
    }
    for (k, v) in &labels {
        if !oracle::qualified_name(k) || !oracle::label_value(v) || !oracle::kubelet_may_set(k) {
            no(format!("label {k:?}={v:?}"));
        }
    }

    // taints: the config's list replaces the preset's
    let taints: Vec<String> = match top.get("taints") {
        Some(t) => t
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap().to_string())
            .collect(),
        None => preset_taints.iter().map(|t| t.to_string()).collect(),
    };
    let mut seen = Vec::new();
    for t in &taints {
        match oracle::taint(t) {
            None => no(format!("taint {t:?}")),
            Some((k, _, e)) if seen.contains(&(k.clone(), e.clone())) => {
                no(format!("taint {t:?} twice"))
            }
            Some((k, _, e)) => seen.push((k, e)),
        }
    }

    // kubelet
    let kubelet = obj("kubelet");
    let mut desired = Map::new();
    let percent = |k: &str, no: &mut dyn FnMut(String)| -> Option<i64> {
        let v = kubelet.get(k)?;
        match v.as_i64() {
            None => {
                no(format!("{k} {v} is no i64"));
                None
            }
            Some(p) if !(0..=100).contains(&p) => {
                no(format!("{k} {p}"));
                None
            }
            Some(p) => Some(p),
        }
    };
    let high = percent("imageGCHighThresholdPercent", &mut no);
    let low = percent("imageGCLowThresholdPercent", &mut no);
    // kubelet's defaults stand in for the one not given.
    if (high.is_some() || low.is_some()) && low.unwrap_or(80) >= high.unwrap_or(85) {
        no("low not below high".into());
    }
    if let Some(h) = high {
        desired.insert("imageGCHighThresholdPercent".into(), json!(h));
    }
    if let Some(l) = low {
        desired.insert("imageGCLowThresholdPercent".into(), json!(l));
    }
    let dur = |k: &str, no: &mut dyn FnMut(String)| -> Option<(String, u128)> {
        let text = kubelet.get(k)?.as_str()?.to_string();
        match oracle::go_duration(&text) {
            Some(g) if g.accepted() && !(g.neg && g.nanos > 0) && g.slack == 0 => {
                Some((text, g.nanos))
            }
            Some(g) if g.slack > 0 => {
                no(format!(
                    "{k} {text:?}: fraction below a nanosecond (not generated)"
                ));
                None
            }
            _ => {
                no(format!("{k} {text:?}"));
                None
            }
        }
    };
    let grace = dur("shutdownGracePeriod", &mut no);
    let critical = dur("shutdownGracePeriodCriticalPods", &mut no);
    if let (Some((_, g)), Some((_, c))) = (&grace, &critical) {
        if c > g {
            no("critical longer than grace".into());
        }
    }
    if critical.is_some() && !kubelet.contains_key("shutdownGracePeriod") {
        no("critical without grace".into());
    }
    if let Some((t, _)) = &grace {
        desired.insert("shutdownGracePeriod".into(), json!(t));
    }
    if let Some((t, _)) = &critical {
        desired.insert("shutdownGracePeriodCriticalPods".into(), json!(t));
    }
    let kubelet_path = string(kubelet, "configPath")
        .unwrap_or("/etc/kubernetes/kubelet/kubelet-config.json".into());
    if !kubelet_path.starts_with('/') || kubelet_path.contains("/../") {
        no("kubelet.configPath".into());
    }
    let extra_args: Vec<String> = kubelet
        .get("extraArgs")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|x| x.as_str().unwrap().to_string()).collect())
        .unwrap_or_default();
    for a in &extra_args {
        if !oracle::kubelet_extra_arg(a) {
            no(format!("kubelet.extraArgs {a:?}"));
        }
    }

    // logind: the delay covers the grace period, at most a day.
    let grace_secs = grace
        .as_ref()
        .map(|(_, n)| n.div_ceil(1_000_000_000) as u64);
    let given_delay = match given_delay {
        Some(Err(e)) => {
            no(e);
            None
        }
        Some(Ok(d)) => Some(d),
        None => None,
    };
    if let Some(d) = given_delay {
        if d > 86_400 {
            no("inhibitDelayMaxSec over a day".into());
        }
        if grace_secs.is_some_and(|g| d < g) {
            no("inhibitDelayMaxSec below the grace period".into());
        }
    }
    if grace_secs.is_some_and(|g| g > 86_400) {
        no("grace over a day".into());
    }
    let logind_sec = given_delay.or(grace_secs).filter(|s| *s > 0);

    // handoff
    let handoff = obj("handoff");
    let mode = string(handoff, "mode").unwrap_or("auto".into());
    if !["auto", "al2", "al2023"].contains(&mode.as_str()) {
        no(format!("mode {mode:?}"));
    }
    let bootstrap_path = string(handoff, "bootstrapPath").unwrap_or("/etc/eks/bootstrap.sh".into());
    let nodeadm_path = string(handoff, "nodeadmPath").unwrap_or("/usr/bin/nodeadm".into());
    for p in [&bootstrap_path, &nodeadm_path] {
        if !p.starts_with('/') || p.contains("/../") {
            no(format!("path {p}"));
        }
    }
    let words: Vec<String> = handoff
        .get("extraBootstrapArgs")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|x| x.as_str().unwrap().to_string()).collect())
        .unwrap_or_default();
    // bootstrap.sh's loop: each word an option the agent does not set, then its value, which
    // is no option; no option twice; no control characters; no `--flag=value` anywhere.
    let owned = eks_nodeinit::aspects::bootstrap::FLAGS_OWNED;
    let is_option = |w: &str| NEWEST_OPTIONS.contains(&w) || w == "-h" || w == "--help";
    let mut extra_bootstrap = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        let v = words.get(i + 1);
        if !NEWEST_OPTIONS.contains(&w.as_str()) || owned.contains(&w.as_str()) {
            no(format!("extraBootstrapArgs word {w:?}"));
            i += 1;
            continue;
        }
        match v {
            Some(v) if !is_option(v) => extra_bootstrap.push((w.clone(), v.clone())),
            _ => no(format!("extraBootstrapArgs {w} without a value")),
        }
        i += 2;
    }
    for w in &words {
        if w.chars().any(|c| c.is_control() || oracle::unsplittable(c))
            || (w.starts_with("--") && w.contains('='))
        {
            no(format!("extraBootstrapArgs {w:?}"));
        }
    }
    let mut opts: Vec<&str> = extra_bootstrap.iter().map(|(o, _)| o.as_str()).collect();
    opts.sort();
    if opts.windows(2).any(|w| w[0] == w[1]) {
        no("extraBootstrapArgs option twice".into());
    }

    // The node: which family, what the aspects read.
    let bootstrap_here = root.al2 && bootstrap_path == "/etc/eks/bootstrap.sh";
    let nodeadm_here = !root.al2 && nodeadm_path == "/usr/bin/nodeadm";
    let al2 = match mode.as_str() {
        "al2" if bootstrap_here => true,
        "al2023" => false,
        "auto" if nodeadm_here => false,
        "auto" if bootstrap_here => true,
        _ => {
            no("no family".into());
            return Err(why);
        }
    };
    // protectKernelDefaults: nodeadm's default on AL2023; on AL2 the sample kubelet config's.
    let protected = !al2 || kubelet_path == "/etc/kubernetes/kubelet/kubelet-config.json";
    if al2 && !desired.is_empty() && kubelet_path != "/etc/kubernetes/kubelet/kubelet-config.json" {
        no("kubelet config missing".into());
    }
    let mut sysctls = BTreeMap::new();
    let mut live_changes = BTreeMap::new();
    for (k, v) in obj("sysctls") {
        let text = match v {
            Value::String(s) => s.clone(),
            Value::Number(n) if n.is_i64() => n.to_string(),
            _ => {
                no(format!("sysctl {k} value {v} is neither string nor i64"));
                continue;
            }
        };
        let key_ok = !k.is_empty()
            && k.split('.').all(|c| {
                !c.is_empty()
                    && c.chars()
                        .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-')
            });
        let file = root.path().join("proc/sys").join(k.replace('.', "/"));
        if !key_ok || !file.is_file() {
            no(format!("sysctl key {k:?}"));
            continue;
        }
        if text.trim().is_empty() || text.chars().any(|c| c.is_control() && c != '\t') {
            no(format!("sysctl {k} value {text:?}"));
            continue;
        }
        let value = text.split_ascii_whitespace().collect::<Vec<_>>().join(" ");
        let need = [
            ("vm.overcommit_memory", "1"),
            ("vm.panic_on_oom", "0"),
            ("kernel.panic", "10"),
            ("kernel.panic_on_oops", "1"),
            ("kernel.keys.root_maxkeys", "1000000"),
            ("kernel.keys.root_maxbytes", "25000000"),
        ];
        if protected && need.iter().any(|(nk, nv)| nk == k && *nv != value) {
            no(format!("sysctl {k}={value} against protectKernelDefaults"));
            continue;
        }
        let live = std::fs::read_to_string(&file).unwrap();
        let live = live.split_ascii_whitespace().collect::<Vec<_>>().join(" ");
        if live != value {
            live_changes.insert(k.clone(), value.clone());
        }
        sysctls.insert(k.clone(), value);
    }
    // The Name tag: `<group or the ASG's name>-<IPv4 with x for dots>`; EC2 refuses `aws:`.
    let tag = tag_enabled.then(|| {
        format!(
            "{}-10x0x12x34",
            group.clone().unwrap_or("eks-scaler-20261122-abcd".into())
        )
    });
    if tag
        .as_ref()
        .is_some_and(|t| t.to_ascii_lowercase().starts_with("aws:") || t.len() > 256)
    {
        no("Name tag".into());
    }
    // On AL2 the agent sets --ip-family for an IPv6 CIDR; the operator may not set it again.
    if al2
        && cidr.as_ref().is_some_and(|(_, v6)| *v6)
        && extra_bootstrap.iter().any(|(o, _)| o == "--ip-family")
    {
        no("--ip-family twice".into());
    }
    if !why.is_empty() {
        return Err(why);
    }
    Ok(Want {
        al2,
        name,
        ca,
        endpoint,
        cidr,
        labels,
        taints,
        extra_args,
        extra_bootstrap,
        kubelet: desired,
        kubelet_path,
        logind_sec,
        grace_nanos: grace.as_ref().map(|(_, n)| *n),
        sysctls,
        live_changes,
        tag,
    })
}

/// kubelet flags as kubelet reads them: each `--node-labels` split at `,` then `=`, each
/// `--register-with-taints` at `,`, the rest as given.
#[derive(Debug, Default)]
struct Flags {
    labels: Vec<BTreeMap<String, String>>,
    taints: Vec<Vec<String>>,
    rest: Vec<String>,
}

fn read_flags<'a>(flags: impl IntoIterator<Item = &'a str>) -> Flags {
    let mut out = Flags::default();
    for f in flags {
        if let Some(l) = f.strip_prefix("--node-labels=") {
            out.labels.push(
                l.split(',')
                    .map(|kv| {
                        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                        (k.to_string(), v.to_string())
                    })
                    .collect(),
            );
        } else if let Some(t) = f.strip_prefix("--register-with-taints=") {
            out.taints.push(t.split(',').map(String::from).collect());
        } else {
            out.rest.push(f.to_string());
        }
    }
    out
}

/// One `--node-labels` with the labels, one `--register-with-taints` with the taints (each
/// only when there are any), then `kubelet.extraArgs` as given.
fn check_flags<'a>(
    want: &Want,
    flags: impl IntoIterator<Item = &'a str>,
) -> Result<(), TestCaseError> {
    let Flags {
        labels,
        taints,
        rest,
    } = read_flags(flags);
    if want.labels.is_empty() {
        prop_assert!(labels.is_empty(), "no --node-labels: {labels:?}");
    } else {
        prop_assert_eq!(&labels, &vec![want.labels.clone()]);
    }
    if want.taints.is_empty() {
        prop_assert!(taints.is_empty(), "no --register-with-taints: {taints:?}");
    } else {
        prop_assert_eq!(&taints, &vec![want.taints.clone()]);
    }
    prop_assert_eq!(&rest, &want.extra_args);
    Ok(())
}

/// An INI file as systemd reads it: comments, `[Section]`, `Key=Value` inside a section.
fn ini(text: &str) -> Result<BTreeMap<(String, String), String>, String> {
    let mut section = None;
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') || l.starts_with(';') {
            continue;
        }
        if let Some(s) = l.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            section = Some(s.to_string());
            continue;
        }
        let (k, v) = l.split_once('=').ok_or(format!("line {l:?}"))?;
        let s = section.clone().ok_or("key outside a section")?;
        if out
            .insert((s, k.trim().to_string()), v.trim().to_string())
            .is_some()
        {
            return Err(format!("{k} twice"));
        }
    }
    Ok(out)
}

/// The whole plan against what the oracle wants.
fn check_plan(want: &Want, plan: &Plan, root: &Path) -> Result<(), TestCaseError> {
    let last = plan.steps.last();
    let files: BTreeMap<&Path, &str> = plan
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::File { path, new, .. } => Some((path.as_path(), new.as_str())),
            _ => None,
        })
        .collect();
    for (p, new) in &files {
        prop_assert!(!new.contains('\0'), "{} holds a NUL", p.display());
    }
    // The Name tag.
    let tags: Vec<&str> = plan
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Tag { value, .. } => Some(value.as_str()),
            _ => None,
        })
        .collect();
    prop_assert_eq!(
        tags,
        want.tag.iter().map(String::as_str).collect::<Vec<_>>()
    );
    // sysctls: live changes, and the persisted file as systemd-sysctl reads it.
    let live: BTreeMap<String, String> = plan
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Sysctl { key, new, .. } => Some((key.clone(), new.clone())),
            _ => None,
        })
        .collect();
    prop_assert_eq!(&live, &want.live_changes);
    let persisted = files.get(Path::new("/etc/sysctl.d/99-zz-eks-nodeinit.conf"));
    if want.sysctls.is_empty() {
        prop_assert!(persisted.is_none());
    } else {
        let text = persisted.expect("a persisted sysctl file");
        let read: BTreeMap<String, String> = text
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#') && !l.starts_with(';'))
            .map(|l| {
                let (k, v) = l.split_once('=').unwrap();
                (k.trim().to_string(), v.trim().to_string())
            })
            .collect();
        prop_assert_eq!(&read, &want.sysctls);
    }
    // logind: well-formed, the delay at least the grace period.
    let dropin = files.get(Path::new(
        "/etc/systemd/logind.conf.d/99-zz-eks-nodeinit.conf",
    ));
    match want.logind_sec {
        None => prop_assert!(dropin.is_none()),
        Some(sec) => {
            let text = dropin.expect("a logind drop-in");
            let ini = ini(text).map_err(TestCaseError::fail)?;
            let key = ("Login".to_string(), "InhibitDelayMaxSec".to_string());
            prop_assert_eq!(ini.get(&key), Some(&sec.to_string()));
            prop_assert_eq!(ini.len(), 1);
            // logind lets kubelet hold the shutdown for its whole grace period.
            let covered = u128::from(sec) * 1_000_000_000;
            prop_assert!(
                want.grace_nanos.map_or(true, |g| covered >= g),
                "{sec} s < the grace period"
            );
            let notified = plan.steps.iter().any(|s| {
                matches!(s, Step::NotifyLogind { inhibit_delay_max_usec } if *inhibit_delay_max_usec == sec * 1_000_000)
            });
            prop_assert!(notified, "logind told {sec} s");
        }
    }
    if want.al2 {
        prop_assert_eq!(plan.family, Family::Al2);
        // The kubelet config: the original with the wanted keys.
        let kubelet = files.get(Path::new(&want.kubelet_path));
        if want.kubelet.is_empty() {
            prop_assert!(kubelet.is_none());
        } else {
            let new: Map<String, Value> =
                serde_json::from_str(kubelet.expect("a kubelet config step")).unwrap();
            let orig: Map<String, Value> = serde_json::from_str(
                &std::fs::read_to_string(root.join(want.kubelet_path.trim_start_matches('/')))
                    .unwrap(),
            )
            .unwrap();
            let mut expected = orig;
            expected.extend(want.kubelet.clone());
            prop_assert_eq!(new, expected);
        }
        let execs: Vec<&Vec<String>> = plan
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::ExecBootstrap { argv } => Some(argv),
                _ => None,
            })
            .collect();
        prop_assert_eq!(execs.len(), 1, "one hand-off");
        prop_assert!(
            matches!(last, Some(Step::ExecBootstrap { .. })),
            "the hand-off is last"
        );
        let argv = execs[0];
        let script = root.join("etc/eks/bootstrap.sh");
        prop_assert_eq!(Path::new(&argv[0]), script.as_path());
        let read = bootstrap_sh::parse(&argv[1..])
            .map_err(|r| TestCaseError::fail(format!("bootstrap.sh refuses the argv: {r:?}")))?;
        prop_assert_eq!(read.cluster_name(), Some(want.name.as_str()));
        prop_assert!(read.stray().is_empty(), "stray words {:?}", read.stray());
        prop_assert!(read.repeated().is_empty(), "repeated {:?}", read.repeated());
        let mut expected: BTreeMap<&str, String> = BTreeMap::new();
        if let Some(ca) = &want.ca {
            expected.insert("--b64-cluster-ca", ca.clone());
        }
        if let Some(ep) = &want.endpoint {
            expected.insert("--apiserver-endpoint", ep.clone());
        }
        match &want.cidr {
            Some((c, true)) => {
                expected.insert("--service-ipv6-cidr", c.clone());
                expected.insert("--ip-family", "ipv6".into());
            }
            Some((c, false)) => {
                expected.insert("--service-ipv4-cidr", c.clone());
            }
            None => {}
        }
        expected.insert("--container-runtime", "containerd".into());
        for (o, v) in &want.extra_bootstrap {
            expected.insert(o.as_str(), v.clone());
        }
        let mut got: BTreeMap<&str, String> = read
            .options
            .iter()
            .map(|(o, v)| (o.as_str(), v.clone()))
            .collect();
        let extra = got.remove("--kubelet-extra-args");
        prop_assert_eq!(got, expected);
        let no_flags =
            want.labels.is_empty() && want.taints.is_empty() && want.extra_args.is_empty();
        match extra {
            None => prop_assert!(no_flags, "--kubelet-extra-args missing"),
            // bootstrap.sh hands the value to kubelet's command line, split at whitespace.
            Some(e) => check_flags(want, e.split_whitespace())?,
        }
    } else {
        prop_assert_eq!(plan.family, Family::Al2023);
        prop_assert!(
            matches!(last, Some(Step::Nodeadm(_))),
            "nodeadm reads the drop-in last"
        );
        prop_assert!(
            !plan
                .steps
                .iter()
                .any(|s| matches!(s, Step::ExecBootstrap { .. })),
            "no bootstrap.sh on AL2023"
        );
        let text = files
            .get(Path::new("/etc/eks/nodeadm.d/10-eks-nodeinit.json"))
            .expect("a NodeConfig drop-in");
        let doc: Value = yaml_serde::from_str(text)
            .map_err(|e| TestCaseError::fail(format!("the drop-in is no YAML: {e}")))?;
        prop_assert_eq!(&doc["apiVersion"], "node.eks.aws/v1alpha1");
        prop_assert_eq!(&doc["kind"], "NodeConfig");
        let mut cluster = Map::new();
        cluster.insert("name".into(), json!(want.name));
        put(
            &mut cluster,
            "apiServerEndpoint",
            want.endpoint.clone().map(Value::from),
        );
        put(
            &mut cluster,
            "certificateAuthority",
            want.ca.clone().map(Value::from),
        );
        put(
            &mut cluster,
            "cidr",
            want.cidr.clone().map(|c| Value::from(c.0)),
        );
        prop_assert_eq!(&doc["spec"]["cluster"], &Value::Object(cluster));
        let config = doc["spec"]["kubelet"].get("config");
        if want.kubelet.is_empty() {
            prop_assert!(config.is_none());
        } else {
            prop_assert_eq!(config, Some(&Value::Object(want.kubelet.clone())));
        }
        let flags: Vec<&str> = doc["spec"]["kubelet"]
            .get("flags")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(|f| f.as_str().unwrap()).collect())
            .unwrap_or_default();
        check_flags(want, flags)?;
    }
    // Rendered, the plan never shows the CA.
    let (text, json_text) = (plan.to_text(), plan.to_json());
    prop_assert!(serde_json::from_str::<Value>(&json_text).is_ok());
    if let Some(ca) = want.ca.as_ref().filter(|c| c.len() >= 16) {
        prop_assert!(!text.contains(ca.as_str()) && !json_text.contains(ca.as_str()));
    }
    Ok(())
}

/// Run one config document through the agent on one root, as `init` does: a config with
/// findings still has the node read and planned (all problems together).
fn plan_on(doc: &Value, root: &Root, md: &Metadata) -> Result<bool, TestCaseError> {
    let text = serde_json::to_string_pretty(doc).unwrap();
    let predicted = predict(doc, root);
    let accepted = match config::parse(&text, "props.json") {
        Err(e) => {
            let shown = e.to_string();
            prop_assert!(!shown.contains('\0'));
            None
        }
        Ok(c) => {
            let (spec, findings) = spec::resolve(&c);
            if findings.is_empty() {
                let facts = eks_nodeinit::gather::node(
                    root.path(),
                    &spec,
                    Some(md.clone()),
                    InstanceTags::Unknown,
                );
                match plan::build(&spec, &facts) {
                    Ok(p) => Some(Ok(p)),
                    Err(e) => Some(Err(e.0)),
                }
            } else {
                let facts =
                    eks_nodeinit::gather::node(root.path(), &spec, None, InstanceTags::Unknown);
                let mut all = findings.0;
                all.extend(plan::findings(&spec, &facts));
                Some(Err(all))
            }
        }
    };
    let ca = doc["cluster"]["certificateAuthority"]
        .as_str()
        .filter(|c| c.len() >= 16);
    match (accepted, predicted) {
        (Some(Ok(plan)), Ok(want)) => {
            check_plan(&want, &plan, root.path())?;
            Ok(true)
        }
        (Some(Ok(plan)), Err(why)) => Err(TestCaseError::fail(format!(
            "accepted, but the oracle refuses it: {why:?}\nplan steps: {:?}",
            plan.steps.iter().map(Step::describe).collect::<Vec<_>>()
        ))),
        (Some(Err(findings)), Ok(want)) => Err(TestCaseError::fail(format!(
            "refused, but the oracle accepts it ({want:?}): {findings:?}"
        ))),
        (None, Ok(_)) => Err(TestCaseError::fail(
            "the config does not parse, but the oracle accepts it",
        )),
        (Some(Err(findings)), Err(_)) => {
            prop_assert!(!findings.is_empty());
            for f in &findings {
                let line = f.to_string();
                prop_assert!(
                    !line.chars().any(char::is_control),
                    "a finding holds a control character: {line:?}"
                );
                if let Some(ca) = ca {
                    prop_assert!(!line.contains(ca), "a finding echoes the CA");
                }
            }
            Ok(false)
        }
        (None, Err(_)) => Ok(false),
    }
}

#[test]
fn config_to_plan_on_al2_and_al2023_matches_the_oracle() {
    let al2 = Root::new("al2-root");
    let al2023 = Root::new("al2023-root");
    let md = metadata::load_file(&common::example("metadata.json")).unwrap();
    check("config_to_plan", 8000, config_doc, |doc, tally| {
        for root in [&al2, &al2023] {
            tally.count(plan_on(&doc, root, &md)?);
        }
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------------
// Target 2: the kubelet config patch (AL2).

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
        Step::File {
            path,
            new,
            backup,
            mode,
            ..
        } if path == Path::new(KUBELET_PATH) => Some((new.as_str(), backup, *mode)),
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

// ---------------------------------------------------------------------------------------------
// Target 3: the metadata file (and the user data it may carry).

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

// ---------------------------------------------------------------------------------------------
// Target 4: durations against Go's time.ParseDuration.

/// The agent's rule on top of Go's: a negative duration is refused (zero is not negative).
fn agent_takes(g: &oracle::Go) -> bool {
    g.accepted() && !(g.neg && g.nanos > 0)
}

#[test]
fn durations_are_read_as_go_reads_them() {
    check("duration", 80_000, duration_text, |s, tally| {
        let got = duration::parse(&s);
        let kept = duration::parse_go(&s);
        prop_assert_eq!(got.is_ok(), kept.is_ok());
        if let Ok(k) = &kept {
            prop_assert_eq!(&k.text, &s);
        }
        tally.count(got.is_ok());
        match oracle::go_duration(&s) {
            None => prop_assert!(got.is_err(), "Go refuses {s:?}, the agent reads {got:?}"),
            Some(g) => {
                // Go's rounding of a sub-nanosecond fraction may tip it over a limit, or a negative
                // value to zero.
                let ambiguous = g.near_limit() || (g.slack > 0 && g.neg && g.nanos <= g.slack);
                if !ambiguous {
                    prop_assert_eq!(
                        got.is_ok(),
                        agent_takes(&g),
                        "{:?}: Go reads {:?}, the agent {:?}",
                        s,
                        g,
                        got
                    );
                }
                if let Ok(v) = got {
                    let diff = v.as_nanos().abs_diff(g.nanos);
                    prop_assert!(
                        diff <= g.slack,
                        "{s:?}: {} ns, Go {} ns",
                        v.as_nanos(),
                        g.nanos
                    );
                }
            }
        }
        Ok(())
    });
}

#[test]
fn go_duration_strings_read_back_to_themselves() {
    check("duration_string", 50_000, any::<i64>, |d, tally| {
        let s = oracle::go_string(d);
        // The oracle reads Go's own form back exactly.
        let g = oracle::go_duration(&s).expect("Go's form is Go's grammar");
        prop_assert_eq!(g.slack, 0);
        prop_assert_eq!(g.nanos, u128::from(d.unsigned_abs()));
        prop_assert_eq!(g.neg, d < 0);
        let got = duration::parse(&s);
        tally.count(got.is_ok());
        if d >= 0 {
            prop_assert_eq!(got.map(|v| v.as_nanos()), Ok(d as u128), "{}", s);
        } else {
            prop_assert!(got.is_err(), "negative {s} refused");
        }
        Ok(())
    });
}

#[test]
fn duration_limit_is_int64_nanoseconds() {
    for (s, ok) in [
        ("9223372036854775807ns", true),
        ("9223372036854775808ns", false),
        ("2562047h47m16.854775807s", true),
        ("2562047h47m16.854775808s", false),
    ] {
        let g = oracle::go_duration(s).unwrap();
        assert_eq!(g.accepted(), ok, "oracle: {s}");
        assert_eq!(duration::parse(s).is_ok(), ok, "agent: {s}");
        if ok {
            assert_eq!(duration::parse(s).unwrap().as_nanos(), oracle::MAX);
        }
    }
    assert_eq!(oracle::go_string(i64::MAX), "2562047h47m16.854775807s");
    assert_eq!(oracle::go_string(i64::MIN), "-2562047h47m16.854775808s");
    assert_eq!(oracle::go_string(1_500), "1.5\u{b5}s");
    assert_eq!(oracle::go_string(3_600_000_000_000), "1h0m0s");
}

// ---------------------------------------------------------------------------------------------
// Target 5: label and taint grammars against apimachinery's rules.

#[derive(Debug, Clone)]
enum Grammar {
    Key(String),
    Value(String),
    Taint(String),
}

fn grammar_input() -> impl Strategy<Value = Grammar> {
    prop_oneof![
        4 => label_key().prop_map(Grammar::Key),
        2 => label_value().prop_map(Grammar::Value),
        4 => taint_text().prop_map(Grammar::Taint),
    ]
}

#[test]
fn label_and_taint_grammars_match_apimachinery() {
    check("k8s_grammar", 50_000, grammar_input, |input, tally| {
        match input {
            Grammar::Key(k) => {
                let ok = k8s::check_qualified_name(&k).is_ok();
                prop_assert_eq!(ok, oracle::qualified_name(&k), "qualified name {:?}", k);
                tally.count(ok);
            }
            Grammar::Value(v) => {
                let ok = k8s::check_label_value(&v).is_ok();
                prop_assert_eq!(ok, oracle::label_value(&v), "label value {:?}", v);
                tally.count(ok);
            }
            Grammar::Taint(t) => {
                let got = k8s::parse_taint(&t);
                let quiet = k8s::parse_taint_quiet(&t);
                let want = oracle::taint(&t);
                tally.count(got.is_ok());
                prop_assert_eq!(got.is_ok(), want.is_some(), "taint {:?}: {:?}", t, got);
                prop_assert_eq!(quiet.is_ok(), want.is_some(), "quiet taint {:?}", t);
                if let (Ok(x), Some((k, v, e))) = (got, want) {
                    prop_assert_eq!((x.key, x.value, x.effect, x.text), (k, v, e, t));
                }
            }
        }
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------------
// Messages: no error line carries a raw control character.

/// Text with what a terminal or the journal must never get raw: control characters, Unicode
/// line and paragraph separators and spaces, invisible format characters.
fn hostile_text() -> impl Strategy<Value = String> {
    vec(
        prop_oneof![
            3 => select(vec![
                '\r', '\n', '\t', '\0', '\u{7}', '\u{1b}', '\u{7f}', '\u{85}', '\u{a0}',
                '\u{2028}', '\u{2029}', '\u{200b}', '\u{202e}', '\u{feff}', '\u{3000}'
            ]),
            2 => select(chars("ab-./\"\\")),
            1 => any::<char>(),
        ],
        1..8,
    )
    .prop_map(|c| c.into_iter().collect())
}

/// Every line of `message` free of what [`eks_nodeinit::text::unsplittable`] finds.
fn one_clean_line_each(message: &str) -> Result<(), TestCaseError> {
    for line in message.split('\n') {
        if let Some(c) = eks_nodeinit::text::unsplittable(line) {
            return Err(TestCaseError::fail(format!(
                "a raw U+{:04X} in the error line {line:?}",
                u32::from(c)
            )));
        }
    }
    Ok(())
}

#[test]
fn no_error_line_carries_a_raw_control_character() {
    check(
        "error lines",
        2000,
        || (config_doc(), hostile_text(), 0..5u8),
        |(mut doc, hostile, where_), tally| {
            match where_ {
                // serde's unknown variant, quoting the value.
                1 => doc["handoff"] = json!({ "mode": hostile }),
                // serde's unknown field, quoting the key.
                2 => doc[hostile.as_str()] = json!(1),
                // A wrong type under a key: serde_path_to_error's path holds the key.
                3 => doc["labels"] = json!({ hostile.clone(): 5 }),
                // The checks' own findings.
                4 => doc["labels"] = json!({ hostile.clone(): hostile }),
                _ => {}
            }
            let text = doc.to_string();
            match config::parse(&text, "t.json") {
                Err(e) => {
                    tally.count(false);
                    one_clean_line_each(&e.to_string())
                }
                Ok(c) => {
                    let (_, findings) = spec::resolve(&c);
                    tally.count(findings.is_empty());
                    let all = eks_nodeinit::findings::Invalid(findings.0);
                    one_clean_line_each(&all.to_string())
                }
            }
        },
    );
}
