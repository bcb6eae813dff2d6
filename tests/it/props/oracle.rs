//! The oracles, each written from the upstream rule, never calling the function under test:
//! apimachinery's names, label values and taints, kubelet's self-label rule, Go's
//! `time.ParseDuration` and `Duration.String`, Go's IPv4 parser, base64, EKS cluster names, and
//! what bootstrap.sh's `KUBELET_EXTRA_ARGS` line and systemd's splitting leave intact.

use std::sync::LazyLock;

use regex::Regex;

fn re(s: &str) -> Regex {
    Regex::new(s).unwrap()
}

/// apimachinery's qualified-name "name" part.
static NAME: LazyLock<Regex> =
    LazyLock::new(|| re(r"\A([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\z"));
/// apimachinery's IsDNS1123Subdomain pattern (the length is checked on the whole).
static SUBDOMAIN: LazyLock<Regex> =
    LazyLock::new(|| re(r"\A[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\z"));
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
    KUBELET_LABELS.contains(&key) || under("kubelet.kubernetes.io") || under("node.kubernetes.io")
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
    let (_, ok) = super::strategies::V6.iter().find(|(a, _)| *a == addr)?;
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

/// What systemd's `$VAR` splitting (ASCII whitespace only) and bash leave inside a word
/// although a reader sees a gap or nothing: Unicode's White_Space characters but the ASCII
/// space and tab (controls are refused on their own), and the invisible format characters
/// (zero-width space and joiners, direction marks and embeddings, word joiner and the
/// invisible operators, the byte-order mark).
pub fn unsplittable(c: char) -> bool {
    (c.is_whitespace() && !c.is_ascii())
        || matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}')
}

/// A `kubelet.extraArgs` entry: `--flag=value`, with none of the characters that break the
/// `Environment='KUBELET_EXTRA_ARGS=…'` line bootstrap.sh writes or split the word when
/// systemd expands it (controls, quotes, `\`, `$`, `%`, `` ` ``, space), and not the labels'
/// or taints' own flags.
pub fn kubelet_extra_arg(a: &str) -> bool {
    a.starts_with("--")
        && a.contains('=')
        && !a.chars().any(|c| c.is_control() || "'\"\\$%` ".contains(c))
        && !a.chars().any(unsplittable)
        && !a.starts_with("--node-labels=")
        && !a.starts_with("--register-with-taints=")
}
