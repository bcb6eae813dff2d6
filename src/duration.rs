//! Kubernetes durations (Go's `time.ParseDuration` grammar): `90s`, `1m30s`, `1.5h`, `500ms`.

use std::time::Duration;

#[derive(Debug, thiserror::Error, PartialEq)]
#[error("`{input}` is not a Kubernetes duration ({reason}); write it like \"90s\" or \"1m30s\"")]
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
    pub fn ceil_secs(&self) -> u64 {
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

/// Parse a Go duration string. Negative durations are refused (no kubelet field here takes one).
pub fn parse(input: &str) -> Result<Duration, DurationError> {
    let err = |reason| DurationError {
        input: input.to_string(),
        reason,
    };
    let mut s = input;
    if let Some(rest) = s.strip_prefix('+') {
        s = rest;
    } else if s.starts_with('-') {
        return Err(err("negative durations are not allowed"));
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(err("empty"));
    }
    let mut total_ns: f64 = 0.0;
    while !s.is_empty() {
        let num_end = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| err("missing unit"))?;
        let num = &s[..num_end];
        if num.is_empty() || num == "." || num.matches('.').count() > 1 {
            return Err(err("expected a number"));
        }
        let value: f64 = num.parse().map_err(|_| err("bad number"))?;
        s = &s[num_end..];
        let unit_end = s
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(s.len());
        let unit = &s[..unit_end];
        let scale: f64 = match unit {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "" => return Err(err("missing unit")),
            _ => return Err(err("unknown unit (use ns, us, ms, s, m, h)")),
        };
        total_ns += value * scale;
        s = &s[unit_end..];
    }
    if total_ns > (i64::MAX as f64) {
        return Err(err("too large"));
    }
    Ok(Duration::from_nanos(total_ns.round() as u64))
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
    fn refused() {
        for bad in ["", "90", "s", "1x", "-5s", "1..5s", "1 m", "90 s", "5sec"] {
            assert!(parse(bad).is_err(), "{bad} should be refused");
        }
    }
}
