//! The agent's reading of a credential provider's `matchImages` entry against Go's own: the
//! kubelet refuses its provider config, and does not start, when `url.Parse("https://" +
//! pattern)` fails, so `validate` must refuse exactly those. A generated corpus of patterns, each
//! judged by `eks_nodeinit::base::gourl` and by Go's net/url (tests/go/urlparse, run with the
//! machine's Go; its go.mod asks for Go 1.26's defaults, whose strict colons refuse what older
//! defaults refuse and more). The one difference allowed: the empty pattern, which Go parses and
//! the agent refuses (it matches no image).

use std::io::Write;
use std::process::{Command, Stdio};

use eks_nodeinit::base::gourl::parse_schemeless;

use crate::common::*;

/// Pieces the corpus is made of: every class of byte Go's parser tells apart (letters, hex
/// digits, host punctuation, user-information punctuation, delimiters, escapes good and bad,
/// control bytes, non-ASCII) and the shapes it treats apart (IP literals, zones, ports).
const PIECES: &[&str] = &[
    "a",
    "Z",
    "g",
    "0",
    "9",
    ".",
    "-",
    "_",
    "~",
    "*",
    ":",
    "@",
    "%",
    "[",
    "]",
    "/",
    "?",
    "#",
    "!",
    "$",
    "&",
    "'",
    "(",
    ")",
    "+",
    ",",
    ";",
    "=",
    "<",
    ">",
    "\"",
    " ",
    "\t",
    "\u{7f}",
    "{",
    "|",
    "^",
    "`",
    "\\",
    "é",
    "%25",
    "%41",
    "%e2",
    "%zz",
    "%2",
    "%20",
    "::1",
    "fe80::1",
    "1.2.3.4",
    "::ffff:1.2.3.4",
    ":443",
    ":0x",
    "registry.example",
    "*.dkr.ecr.*.amazonaws.com",
    "user:pw@",
    "%25eth0",
    "[::1]",
    "[fe80::1%25en0]",
    "[1.2.3.4]",
    "1::2::3",
];

/// A deterministic corpus: `n` patterns of 1 to 8 pieces (xorshift, fixed seed), and each piece
/// alone.
fn corpus(n: usize) -> Vec<String> {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut out: Vec<String> = PIECES.iter().map(|p| p.to_string()).collect();
    for _ in 0..n {
        let len = 1 + (next() % 8) as usize;
        let p: String = (0..len)
            .map(|_| PIECES[(next() % PIECES.len() as u64) as usize])
            .collect();
        out.push(p);
    }
    out
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

/// Go's verdict on each pattern: `Ok(())` or `Err(Go's error)`.
fn go_verdicts(patterns: &[String]) -> Vec<Result<(), String>> {
    let dir = manifest_dir().join("tests/go/urlparse");
    let mut child = Command::new("go")
        .args(["run", "."])
        .current_dir(&dir)
        .env("GOTOOLCHAIN", "local")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = String::new();
    for p in patterns {
        input.push_str(&hex(p));
        input.push('\n');
    }
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(out.status.success(), "go run: {}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<Result<(), String>> = text
        .lines()
        .map(|l| match l {
            "ok" => Ok(()),
            e => Err(e.trim_start_matches("err ").to_string()),
        })
        .collect();
    assert_eq!(lines.len(), patterns.len(), "{text}");
    lines
}

#[test]
fn match_images_are_refused_exactly_where_go_refuses_them() {
    if !peer_present(&missing_commands(&["go"])) {
        return;
    }
    let patterns = corpus(20_000);
    let go = go_verdicts(&patterns);
    let mut differ = Vec::new();
    let (mut refused, mut taken) = (0, 0);
    for (p, g) in patterns.iter().zip(&go) {
        let ours = parse_schemeless(p);
        match g {
            Ok(()) => taken += 1,
            Err(_) => refused += 1,
        }
        if ours.is_ok() != g.is_ok() {
            differ.push(format!("{p:?}: agent {ours:?}, Go {g:?}"));
        }
    }
    assert!(
        differ.is_empty(),
        "{} of {} patterns judged apart from Go:\n{}",
        differ.len(),
        patterns.len(),
        differ[..differ.len().min(30)].join("\n")
    );
    // The corpus exercises both sides, and the issue's own case.
    assert!(
        refused > 1000 && taken > 1000,
        "{refused} refused, {taken} taken"
    );
    assert!(parse_schemeless("u ser@registry.acme.example").is_err());
}
