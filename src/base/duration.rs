//! Kubernetes durations (Go's `time.ParseDuration` grammar): `90s`, `1m30s`, `1.5h`, `500ms`.

use std::time::Duration;

#[derive(Debug, thiserror::Error, PartialEq)]
#[error("`{}` is not a Kubernetes duration ({reason}); write it like \"90s\" or \"1m30s\"", crate::base::text::printable(.input))]
pub struct DurationError {
    pub input: String,
    pub reason: &'static str,
}

/// A duration as written in the config (kept, as kubelet and nodeadm take the text) and its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoDuration {
    pub text: String,
    pub value: Duration,
}

impl GoDuration {
    /// Whole seconds, rounded up (what `InhibitDelayMaxSec` needs to cover it).
    pub(crate) fn ceil_secs(&self) -> u64 {
        self.value
            .as_secs()
            .saturating_add(u64::from(self.value.subsec_nanos() > 0))
    }
}

/// Parse a duration, keeping its text.
pub fn parse_go(input: &str) -> Result<GoDuration, DurationError> {
    parse(input).map(|value| GoDuration {
        text: input.to_string(),
        value,
    })
}

/// Nanoseconds per unit, as Go's `time.ParseDuration` names them (`µs` is U+00B5, `μs` U+03BC).
fn unit_ns(u: &str) -> Option<u64> {
    Some(match u {
        "ns" => 1,
        "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return None,
    })
}

const LIMIT: u64 = 1 << 63;

/// Leading `[0-9]*`: the value, or `None` on overflow as Go's `leadingInt` reports it.
fn leading_int(s: &[u8]) -> (Option<u64>, usize) {
    let mut x: u64 = 0;
    let mut i = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        if x > LIMIT / 10 {
            return (None, i);
        }
        x = x * 10 + u64::from(s[i] - b'0');
        if x > LIMIT {
            return (None, i);
        }
        i += 1;
    }
    (Some(x), i)
}

/// Leading fraction digits: the value and its scale, dropping precision (never failing) on
/// overflow, as Go's `leadingFraction`.
fn leading_fraction(s: &[u8]) -> (u64, f64, usize) {
    let (mut x, mut scale, mut overflow, mut i) = (0u64, 1f64, false, 0);
    while i < s.len() && s[i].is_ascii_digit() {
        if !overflow {
            if x > (LIMIT - 1) / 10 {
                overflow = true;
            } else {
                let y = x * 10 + u64::from(s[i] - b'0');
                if y > LIMIT {
                    overflow = true;
                } else {
                    x = y;
                    scale *= 10.0;
                }
            }
        }
        i += 1;
    }
    (x, scale, i)
}

/// Parse a duration exactly as Go's `time.ParseDuration` does (which kubelet uses), overflow
/// included. Negative durations are refused on top (no kubelet field here takes one).
pub fn parse(input: &str) -> Result<Duration, DurationError> {
    let err = |reason| DurationError {
        input: input.to_string(),
        reason,
    };
    let mut s = input.as_bytes();
    let mut neg = false;
    if let Some((&c, rest)) = s.split_first() {
        if c == b'-' || c == b'+' {
            neg = c == b'-';
            s = rest;
        }
    }
    if s == b"0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(err("empty"));
    }
    let mut d: u64 = 0;
    while !s.is_empty() {
        if !(s[0] == b'.' || s[0].is_ascii_digit()) {
            return Err(err("expected a number"));
        }
        let (v, n) = leading_int(s);
        let mut v = v.ok_or_else(|| err("too large (overflows Go's int64 nanoseconds)"))?;
        let pre = n > 0;
        s = &s[n..];
        let (mut f, mut scale, mut post) = (0, 1.0, false);
        if let Some(rest) = s.strip_prefix(b".") {
            let (x, sc, n) = leading_fraction(rest);
            (f, scale, post) = (x, sc, n > 0);
            s = &rest[n..];
        }
        if !pre && !post {
            return Err(err("expected a number"));
        }
        let end = s
            .iter()
            .position(|c| *c == b'.' || c.is_ascii_digit())
            .unwrap_or(s.len());
        if end == 0 {
            return Err(err("missing unit"));
        }
        let unit = std::str::from_utf8(&s[..end])
            .ok()
            .and_then(unit_ns)
            .ok_or_else(|| err("unknown unit (use ns, us, ms, s, m, h)"))?;
        s = &s[end..];
        let too_large = || err("too large (overflows Go's int64 nanoseconds)");
        if v > LIMIT / unit {
            return Err(too_large());
        }
        v *= unit;
        if f > 0 {
            // As Go: float64 keeps fractions of hours nanosecond-accurate.
            v += (f as f64 * (unit as f64 / scale)) as u64;
            if v > LIMIT {
                return Err(too_large());
            }
        }
        // Each component is at most 2^63, so two of them may not fit a u64.
        d = d
            .checked_add(v)
            .filter(|d| *d <= LIMIT)
            .ok_or_else(too_large)?;
    }
    // `-0s` is zero, as `-0` is: only a value below zero is negative.
    if neg && d > 0 {
        return Err(err("negative durations are not allowed"));
    }
    if d > LIMIT - 1 {
        return Err(err("too large (overflows Go's int64 nanoseconds)"));
    }
    Ok(Duration::from_nanos(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_forms() {
        assert_eq!(parse("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse("1.5h").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse("0").unwrap(), Duration::ZERO);
        assert_eq!(parse("0s").unwrap(), Duration::ZERO);
        assert_eq!(parse("+2m").unwrap(), Duration::from_secs(120));
    }

    #[test]
    fn overflow_as_go() {
        // Go: 9223372036854775807ns is the largest duration; one more overflows.
        assert_eq!(
            parse("9223372036854775807ns").unwrap(),
            Duration::from_nanos(i64::MAX as u64)
        );
        for bad in [
            "9223372036854775808ns",
            "2562048h",
            "9999999999999999999s",
            "2562047h47m16.854775808s",
        ] {
            assert!(
                parse(bad).unwrap_err().reason.contains("too large"),
                "{bad}"
            );
        }
        assert!(parse("2562047h47m16.854775807s").is_ok());
        // Two components of 2^63 ns each: their sum does not fit the u64 accumulator (a panic
        // in a debug build, 0 in a release build); it is over the limit.
        assert!(parse("9223372036854775808ns9223372036854775808ns")
            .unwrap_err()
            .reason
            .contains("too large"));
        // Go's other corners: a bare fraction, a trailing dot, µ and μ.
        assert_eq!(parse(".5s").unwrap(), Duration::from_millis(500));
        assert_eq!(parse("5.s").unwrap(), Duration::from_secs(5));
        assert_eq!(parse("1\u{b5}s").unwrap(), Duration::from_micros(1));
        assert_eq!(parse("1\u{3bc}s").unwrap(), Duration::from_micros(1));
        assert_eq!(parse("1.0000000001s").unwrap(), Duration::from_secs(1));
    }

    #[test]
    fn a_negative_zero_is_zero() {
        // Go reads `-0s` as 0, like `-0`: zero is not a negative duration.
        for zero in ["-0", "-0s", "-0.0s", "-.0h", "-0ns0s"] {
            assert_eq!(parse(zero).unwrap(), Duration::ZERO, "{zero}");
        }
        assert!(parse("-1ns").is_err());
        assert!(parse("-0.000000001s").is_err());
    }

    #[test]
    fn refused() {
        for bad in [
            "", "90", "s", "1x", "-5s", "1..5s", "1 m", "90 s", "5sec", ".s", "+", "-",
        ] {
            assert!(parse(bad).is_err(), "{bad} should be refused");
        }
    }
}
