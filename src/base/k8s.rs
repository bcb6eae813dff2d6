//! Kubernetes' own rules for what the node registers with and reserves: qualified names, label
//! values, taints, the labels a kubelet may set on itself, and resource quantities (`512Mi`,
//! `100m`), which the spec, the plan and the proof all read by the same grammar.

use crate::base::text::printable;

/// The prefix of every Node condition type the agent sets.
pub const OWN_CONDITION_PREFIX: &str = "eks-nodeinit.io/";

/// Whether `t` is a condition type the agent sets itself.
pub fn is_own_condition(t: &str) -> bool {
    t.starts_with(OWN_CONDITION_PREFIX)
}

/// What the kubelet demands with `protectKernelDefaults` (its `setupKernelTunables`, k8s
/// v1.36, pkg/kubelet/cm; component-helpers/node/util/sysctl): read from /proc/sys as
/// integers, each equal, else it exits at start. The sysctls setting and the hardened-AMI
/// check both read this table.
pub const KUBELET_KERNEL_DEFAULTS: [(&str, i64); 6] = [
    ("vm.overcommit_memory", 1),
    ("vm.panic_on_oom", 0),
    ("kernel.panic", 10),
    ("kernel.panic_on_oops", 1),
    ("kernel.keys.root_maxkeys", 1_000_000),
    ("kernel.keys.root_maxbytes", 25_000_000),
];

/// kubelet's kubeletLabels: the well-known keys a kubelet may set on itself
/// (kubernetes staging/src/k8s.io/kubelet/pkg/apis/well_known_labels.go).
pub(crate) const KUBELET_ALLOWED_LABELS: [&str; 11] = [
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
/// Label namespaces (and their subdomains) a kubelet may set on itself.
pub(crate) const KUBELET_ALLOWED_NAMESPACES: [&str; 2] =
    ["kubelet.kubernetes.io", "node.kubernetes.io"];

pub(crate) const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'
}

/// Kubernetes "name" part of a qualified name, and label values: ≤63, alphanumeric at both
/// ends, `-_.` inside.
fn check_name_part(s: &str, what: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err(format!("{what} must not be empty"));
    }
    if s.len() > 63 {
        return Err(format!(
            "{what} `{}` is {} characters; at most 63",
            printable(s),
            s.len()
        ));
    }
    let ends_ok = s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !ends_ok || !s.chars().all(is_name_char) {
        return Err(format!(
            "{what} `{}` must start and end with a letter or digit and hold only letters, digits, `-`, `_`, `.`",
            printable(s)
        ));
    }
    Ok(())
}

/// DNS-1123 subdomain as Kubernetes' `IsDNS1123Subdomain` checks it: at most 253 characters in
/// all, dot-separated parts of `[a-z0-9-]` starting and ending with a letter or digit. Unlike DNS
/// itself, Kubernetes sets no 63-character limit on one part.
fn check_dns_subdomain(s: &str) -> Result<(), String> {
    if s.is_empty() || s.len() > 253 {
        return Err(format!(
            "prefix `{}` must be a DNS subdomain of 1 to 253 characters",
            printable(s)
        ));
    }
    for label in s.split('.') {
        let ok = !label.is_empty()
            && label
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return Err(format!(
                "prefix `{}` must be a lowercase DNS subdomain (e.g. `example.com`)",
                printable(s)
            ));
        }
    }
    Ok(())
}

/// A Kubernetes qualified name: `[prefix/]name`.
pub fn check_qualified_name(key: &str) -> Result<(), String> {
    match key.split_once('/') {
        Some((prefix, name)) => {
            check_dns_subdomain(prefix)?;
            if name.contains('/') {
                return Err(format!("key `{}` has more than one `/`", printable(key)));
            }
            check_name_part(name, "name")
        }
        None => check_name_part(key, "name"),
    }
}

pub fn check_label_value(v: &str) -> Result<(), String> {
    if v.is_empty() {
        return Ok(());
    }
    check_name_part(v, "value")
}

fn in_namespace(prefix: &str, ns: &str) -> bool {
    prefix == ns || prefix.ends_with(&format!(".{ns}"))
}

/// kubelet's self-label rule: refuse keys under kubernetes.io / k8s.io that kubelet would
/// refuse at start-up. Returns what to do instead.
pub fn check_kubelet_self_label(key: &str, value: &str) -> Result<(), String> {
    let Some((prefix, name)) = key.split_once('/') else {
        return Ok(());
    };
    if in_namespace(prefix, "node-restriction.kubernetes.io") {
        return Err(format!(
            "`{key}` is reserved for labels an administrator sets on the Node object; the NodeRestriction admission plugin forbids a kubelet from setting it. Set it with kubectl or a controller, or use `node.kubernetes.io/{name}`"
        ));
    }
    if !(in_namespace(prefix, "kubernetes.io") || in_namespace(prefix, "k8s.io")) {
        return Ok(());
    }
    if KUBELET_ALLOWED_LABELS.contains(&key)
        || KUBELET_ALLOWED_NAMESPACES
            .iter()
            .any(|ns| in_namespace(prefix, ns))
    {
        return Ok(());
    }
    let instead = if key == "kubernetes.io/role" || in_namespace(prefix, "node-role.kubernetes.io")
    {
        let role = printable(if key == "kubernetes.io/role" {
            value
        } else {
            name
        });
        format!(
            "use `node.kubernetes.io/role={role}` instead (node-role.kubernetes.io/* can only be set by a controller or kubectl after the node joins)"
        )
    } else {
        format!("use `node.kubernetes.io/{name}` or a key under your own domain")
    };
    Err(format!(
        "kubelet refuses to start with `--node-labels` holding `{key}`: keys under kubernetes.io and k8s.io are limited to kubelet.kubernetes.io/*, node.kubernetes.io/* and {} well-known keys; {instead}",
        KUBELET_ALLOWED_LABELS.len()
    ))
}

/// A checked taint. `text` is how it was written (`key[=value]:Effect`), which is how kubelet's
/// `--register-with-taints` and nodeadm take it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: String,
    pub text: String,
}

/// Parse a taint `key[=value]:Effect`.
pub fn parse_taint(t: &str) -> Result<Taint, String> {
    let Some((kv, effect)) = t.rsplit_once(':') else {
        return Err(format!(
            "`{}` has no effect; write `key[=value]:Effect` with Effect one of NoSchedule, PreferNoSchedule, NoExecute",
            printable(t)
        ));
    };
    if !TAINT_EFFECTS.contains(&effect) {
        return Err(format!(
            "effect `{}` is not one of NoSchedule, PreferNoSchedule, NoExecute (case matters)",
            printable(effect)
        ));
    }
    let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
    check_qualified_name(key).map_err(|e| format!("taint key: {e}"))?;
    check_label_value(value).map_err(|e| format!("taint value: {e}"))?;
    Ok(Taint {
        key: key.into(),
        value: value.into(),
        effect: effect.into(),
        text: t.into(),
    })
}

/// Why a taint is refused, said without its text: for taints read from the instance's user
/// data, whose content is never shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaintProblem {
    /// No `:Effect` at all.
    NoEffect,
    /// An effect other than NoSchedule, PreferNoSchedule, NoExecute.
    Effect,
    /// The key is not a qualified name.
    Key,
    /// The value is not a label value.
    Value,
}

impl std::fmt::Display for TaintProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TaintProblem::NoEffect => "it has no effect (`key[=value]:Effect`)",
            TaintProblem::Effect => {
                "its effect is not one of NoSchedule, PreferNoSchedule, NoExecute (case matters)"
            }
            TaintProblem::Key => {
                "its key is not a Kubernetes qualified name (`[prefix/]name`, the name at most 63 letters, digits, `-_.`)"
            }
            TaintProblem::Value => {
                "its value is not a label value (at most 63 letters, digits, `-_.`, alphanumeric at both ends)"
            }
        })
    }
}

/// A taint from its three parts (a kubelet config's `registerWithTaints` entry), checked by the
/// same rules as [`parse_taint`]; its text is `key=value:Effect`, or `key:Effect` without a value.
pub(crate) fn taint_from_parts(
    key: &str,
    value: &str,
    effect: &str,
) -> Result<Taint, TaintProblem> {
    if effect.is_empty() {
        return Err(TaintProblem::NoEffect);
    }
    if !TAINT_EFFECTS.contains(&effect) {
        return Err(TaintProblem::Effect);
    }
    check_qualified_name(key).map_err(|_| TaintProblem::Key)?;
    check_label_value(value).map_err(|_| TaintProblem::Value)?;
    let text = if value.is_empty() {
        format!("{key}:{effect}")
    } else {
        format!("{key}={value}:{effect}")
    };
    Ok(Taint {
        key: key.into(),
        value: value.into(),
        effect: effect.into(),
        text,
    })
}

/// [`parse_taint`] without echoing the text in the error.
pub fn parse_taint_quiet(t: &str) -> Result<Taint, TaintProblem> {
    let Some((kv, effect)) = t.rsplit_once(':') else {
        return Err(TaintProblem::NoEffect);
    };
    let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
    let mut taint = taint_from_parts(key, value, effect)?;
    taint.text = t.into();
    Ok(taint)
}

/// A non-negative Kubernetes quantity (apimachinery's `ParseQuantity` grammar: a signed decimal
/// number, then a binary suffix `Ki`…`Ei`, a decimal suffix `m`, `k`, `M`…`E`, nothing, or an
/// exponent `e`/`E` and a signed integer).
pub fn check_quantity(s: &str) -> Result<(), String> {
    let bad = || {
        format!(
            "`{}` is not a Kubernetes quantity (such as 100m, 512Mi, 1Gi)",
            printable(s)
        )
    };
    let (negative, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let num_len = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (num, suffix) = body.split_at(num_len);
    let ok_num = num.matches('.').count() <= 1 && num.bytes().any(|b| b.is_ascii_digit());
    let ok_suffix = match suffix {
        "" | "m" | "k" | "M" | "G" | "T" | "P" | "E" => true,
        "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => true,
        e => e
            .strip_prefix(['e', 'E'])
            .map(|x| x.strip_prefix(['+', '-']).unwrap_or(x))
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())),
    };
    if !(ok_num && ok_suffix) {
        return Err(bad());
    }
    if negative && num.bytes().any(|b| (b'1'..=b'9').contains(&b)) {
        return Err(format!(
            "`{}` is negative; kubelet refuses a negative reservation",
            printable(s)
        ));
    }
    Ok(())
}

/// A quantity's value × 1000 (millicores for CPU, millibytes for memory), when `s` is a
/// non-negative quantity whose value is exact at that scale and fits; else None.
pub fn milli_value(s: &str) -> Option<u128> {
    check_quantity(s).ok()?;
    let body = s.trim_start_matches(['+', '-']);
    let num_len = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (num, suffix) = body.split_at(num_len);
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    let digits: u128 = format!("{int}{frac}").parse().ok()?;
    let binary = |p: u32| (1u128 << (10 * p), 0i64);
    let (mul, dec_exp) = match suffix {
        "" => (1, 0),
        "m" => (1, -3),
        "k" => (1, 3),
        "M" => (1, 6),
        "G" => (1, 9),
        "T" => (1, 12),
        "P" => (1, 15),
        "E" => (1, 18),
        "Ki" => binary(1),
        "Mi" => binary(2),
        "Gi" => binary(3),
        "Ti" => binary(4),
        "Pi" => binary(5),
        "Ei" => binary(6),
        e => (1, e[1..].parse::<i64>().ok()?),
    };
    let exp = dec_exp + 3 - i64::try_from(frac.len()).ok()?;
    let v = digits.checked_mul(mul)?;
    let p = |e: i64| 10u128.checked_pow(u32::try_from(e).ok()?);
    match exp >= 0 {
        true => v.checked_mul(p(exp)?),
        false => {
            let d = p(-exp)?;
            (v % d == 0).then(|| v / d)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_taints_follow_the_same_rules() {
        for t in [
            "a=b:NoSchedule",
            "example.com/x:NoExecute",
            "a=:PreferNoSchedule",
            "nope",
            "a:Sometimes",
            "a=b:c:NoSchedule",
            "-a:NoSchedule",
            "a=-b:NoSchedule",
            "",
        ] {
            assert_eq!(
                parse_taint(t).ok(),
                parse_taint_quiet(t).ok(),
                "`{t}` is judged the same way"
            );
        }
        assert_eq!(
            parse_taint_quiet("a=b:Sometimes"),
            Err(TaintProblem::Effect)
        );
        assert_eq!(parse_taint_quiet("a b:NoSchedule"), Err(TaintProblem::Key));
        // The parts form cannot smuggle a `=` into the key.
        assert_eq!(
            taint_from_parts("a=b", "", "NoSchedule"),
            Err(TaintProblem::Key)
        );
        assert_eq!(
            taint_from_parts("a", "b", "NoSchedule").unwrap().text,
            "a=b:NoSchedule"
        );
        assert_eq!(
            taint_from_parts("a", "", "NoSchedule").unwrap().text,
            "a:NoSchedule"
        );
    }

    #[test]
    fn quantities_follow_kubernetes_grammar_and_are_not_negative() {
        for ok in [
            "100m", "1Gi", "1.5Gi", "0", "-0", "+5", "1e3", "2E-2", ".5", "5.", "1k", "100",
        ] {
            assert_eq!(check_quantity(ok), Ok(()), "{ok}");
        }
        for bad in [
            "", "Gi", "1gi", "1 Gi", "1..2", "1e", "1Gb", "-1Gi", "1i", "1E+",
        ] {
            assert!(check_quantity(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn milli_values_are_exact_or_none() {
        assert_eq!(milli_value("70m"), Some(70));
        assert_eq!(milli_value("2"), Some(2000));
        assert_eq!(milli_value("1.5"), Some(1500));
        assert_eq!(milli_value("574Mi"), Some(574 * 1024 * 1024 * 1000));
        assert_eq!(milli_value("1.5Gi"), Some(1536 * 1024 * 1024 * 1000));
        assert_eq!(milli_value("1e3"), Some(1_000_000));
        assert_eq!(milli_value("0.0001"), None);
        assert_eq!(milli_value("1Mx"), None);
        assert_eq!(milli_value("-1"), None);
        assert_eq!(
            milli_value("99999999999999999999999999999999999999Ei"),
            None
        );
    }
}
