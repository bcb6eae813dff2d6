//! Showing values in messages: control characters escaped, long input truncated, error chains
//! flattened once.

/// The most characters of one echoed value a message shows.
pub const ECHO_MAX: usize = 120;

/// A value as a message shows it: control characters escaped (a message never carries a raw
/// newline) and cut after [`ECHO_MAX`] characters with the total length said.
pub(crate) fn printable(s: &str) -> String {
    shown(s, ECHO_MAX, |_| true)
}

/// A JSON value as a message shows it: its JSON text (`"ipvlan"`, `110`), whose escapes (`\"`,
/// `\\`, `\n`) are its only ones, with the characters JSON leaves raw that [`unsplittable`] finds
/// (DEL, C1 controls, U+2028…) escaped, cut after [`ECHO_MAX`] characters. Not [`printable`]:
/// that would escape JSON's own escapes again (`\"ipvlan\"`).
pub(crate) fn json(v: &serde_json::Value) -> String {
    shown(&v.to_string(), ECHO_MAX, is_unsplittable)
}

/// `s` cut after `max` characters (the total length said), the characters `escape` picks
/// escaped as Rust's `{:?}` escapes them.
fn shown(s: &str, max: usize, escape: impl Fn(char) -> bool) -> String {
    let mut out = String::new();
    for (n, c) in s.chars().enumerate() {
        if n == max {
            out.push_str(&format!("…({} characters)", s.chars().count()));
            break;
        }
        if escape(c) {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

/// The most characters of a message from another library (serde's, with the input it quotes)
/// shown.
pub(crate) const FOREIGN_MAX: usize = 4 * ECHO_MAX;

/// A message from another library as the agent shows it: every character [`unsplittable`] finds
/// escaped (serde quotes the input it refuses: `unknown variant "x\r"` must not carry the raw
/// carriage return to a terminal or the journal), quotes and the rest kept, cut after
/// `FOREIGN_MAX` characters.
pub fn escaped(s: &str) -> String {
    shown(s, FOREIGN_MAX, is_unsplittable)
}

/// serde_json's message without its ` at line L column C` tail (the caller says where), escaped.
pub(crate) fn serde_message(e: &serde_json::Error) -> String {
    let m = e.to_string();
    let m = m.rfind(" at line ").map_or(m.as_str(), |i| &m[..i]);
    escaped(m)
}

/// `m` with every `"…"` it quotes (serde's quoting: `\"` inside is part of the value) and every
/// `` `…` `` holding an `@` replaced by `(value not shown)`: a message about a value that may be
/// a secret (a URL with credentials).
pub(crate) fn without_quoted(m: &str) -> String {
    let mut out = String::new();
    let mut chars = m.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c != '"' && c != '`' {
            out.push(c);
            continue;
        }
        let mut end = None;
        let mut escaped = false;
        for (j, d) in chars.by_ref() {
            match d {
                '\\' if c == '"' && !escaped => escaped = true,
                d if d == c && !escaped => {
                    end = Some(j);
                    break;
                }
                _ => escaped = false,
            }
        }
        let span = &m[i..end.map_or(m.len(), |j| j + 1)];
        if c == '"' || span.contains('@') {
            out.push_str("(value not shown)");
        } else {
            out.push_str(span);
        }
    }
    out
}

/// The first character of `s` that no argument of kubelet or bootstrap.sh may hold: a control
/// character, a Unicode space, line or paragraph separator other than the ASCII space (systemd
/// splits `$VAR` arguments on ASCII whitespace only, so `--a=1\u{a0}--b=2` reaches kubelet as one
/// word), or an invisible format character (zero-width spaces and joiners, direction marks, the
/// byte-order mark), as text pasted from a web page or a document carries them.
pub fn unsplittable(s: &str) -> Option<char> {
    s.chars().find(|&c| is_unsplittable(c))
}

/// One character of the kind [`unsplittable`] looks for.
pub fn is_unsplittable(c: char) -> bool {
    c.is_control()
        || (c.is_whitespace() && c != ' ')
        || matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}')
}

/// What [`unsplittable`] found, for a message: `U+00A0 (a Unicode space)`.
pub(crate) fn describe_char(c: char) -> String {
    let kind = if c.is_control() {
        "a control character"
    } else if c.is_whitespace() {
        "a Unicode space or line break"
    } else {
        "an invisible format character"
    };
    format!("U+{:04X} ({kind})", u32::from(c))
}

/// A finding's text for a value holding what [`unsplittable`] found.
pub(crate) fn unsplittable_problem(value: &str, c: char) -> String {
    format!(
        "`{}` holds {}, as text pasted from a web page or document can; kubelet and bootstrap.sh would get it as part of a word (systemd splits arguments on ASCII whitespace only): retype it with plain ASCII",
        printable(value),
        describe_char(c)
    )
}

/// An error and its sources on one line: `outer: inner: innermost`.
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    join_chain(std::iter::successors(Some(e), |x| x.source()))
}

/// Errors from the outermost in, on one line; a cause the line already ends with (an error
/// whose message quotes its source) is not printed again.
pub fn join_chain<'a>(
    errors: impl Iterator<Item = &'a (dyn std::error::Error + 'static)>,
) -> String {
    let mut s = String::new();
    for x in errors {
        let part = x.to_string();
        if s.is_empty() {
            s = part;
        } else if !s.ends_with(&part) {
            s.push_str(": ");
            s.push_str(&part);
        }
    }
    s
}

/// The credentials a file holds as `scheme://USERINFO@`, for redacting its old content.
pub fn credentials_in(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.split_once("://").map(|(_, r)| r))
        .filter_map(|r| r.rsplit_once('@').map(|(u, _)| format!("{u}@")))
        .collect()
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

    #[test]
    fn json_values_are_escaped_once() {
        assert_eq!(json(&serde_json::json!("ipvlan")), r#""ipvlan""#);
        assert_eq!(json(&serde_json::json!(110)), "110");
        assert_eq!(
            json(&serde_json::json!("a\"b\\c\r\u{85}\u{2028}")),
            r#""a\"b\\c\r\u{85}\u{2028}""#
        );
        let long = json(&serde_json::json!("x".repeat(1000)));
        assert!(long.ends_with("…(1002 characters)"), "{long}");
    }

    #[test]
    fn unsplittable_finds_unicode_spaces_controls_and_invisible_characters() {
        assert_eq!(unsplittable("--max-pods=110 --v=9"), None);
        assert_eq!(unsplittable("--max-pods=110\u{a0}--v=9"), Some('\u{a0}'));
        assert_eq!(unsplittable("a\u{2028}b"), Some('\u{2028}'));
        assert_eq!(unsplittable("a\u{200b}b"), Some('\u{200b}'));
        assert_eq!(unsplittable("a\rb"), Some('\r'));
        assert_eq!(unsplittable("a\u{feff}"), Some('\u{feff}'));
        assert_eq!(unsplittable("zoné/ü"), None);
        assert_eq!(
            describe_char('\u{a0}'),
            "U+00A0 (a Unicode space or line break)"
        );
        assert_eq!(describe_char('\u{1b}'), "U+001B (a control character)");
        let p = unsplittable_problem("x\u{2028}y", '\u{2028}');
        assert!(p.contains("U+2028") && !p.contains('\u{2028}'), "{p}");
    }

    #[test]
    fn foreign_messages_keep_quotes_and_lose_raw_controls() {
        assert_eq!(
            escaped("unknown variant \"x\r\""),
            "unknown variant \"x\\r\""
        );
        assert_eq!(escaped("a\u{2028}b\u{1b}[2J"), "a\\u{2028}b\\u{1b}[2J");
        let long = "y".repeat(5000);
        assert!(escaped(&long).ends_with("…(5000 characters)"));
        #[derive(Debug, serde::Deserialize)]
        enum Mode {
            #[allow(dead_code)]
            Auto,
        }
        // The JSON escape `\r` puts a raw carriage return in the value serde quotes.
        let e = serde_json::from_str::<Mode>("\"x\\r\"").unwrap_err();
        assert!(e.to_string().contains('\r'), "{e}");
        let m = serde_message(&e);
        assert!(!m.contains('\r') && !m.contains(" at line "), "{m}");
        assert!(m.contains("x\\r"), "{m}");
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
