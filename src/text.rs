//! Showing values in messages: control characters escaped, long input truncated, error chains
//! flattened once.

/// The most characters of one echoed value a message shows.
pub const ECHO_MAX: usize = 120;

/// A value as a message shows it: control characters escaped (a message never carries a raw
/// newline) and cut after [`ECHO_MAX`] characters with the total length said.
pub fn printable(s: &str) -> String {
    let mut out = String::new();
    for (n, c) in s.chars().enumerate() {
        if n == ECHO_MAX {
            out.push_str(&format!("…({} characters)", s.chars().count()));
            break;
        }
        out.extend(c.escape_debug());
    }
    out
}

/// An error and its sources on one line: `outer: inner: innermost`.
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(x) = src {
        let part = x.to_string();
        if !s.ends_with(&part) {
            s.push_str(": ");
            s.push_str(&part);
        }
        src = x.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_truncates() {
        assert_eq!(printable("a\nb"), "a\\nb");
        let long = "x".repeat(1000);
        let p = printable(&long);
        assert!(p.len() < 160, "{p}");
        assert!(p.ends_with("…(1000 characters)"), "{p}");
    }

    #[derive(Debug, thiserror::Error)]
    #[error("cannot write x")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn chain_joins_sources() {
        let e = Outer(std::io::Error::other("disk full"));
        assert_eq!(chain(&e), "cannot write x: disk full");
    }
}
