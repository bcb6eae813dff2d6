//! Target: messages. No error line, from the parser or the checks, carries a raw control
//! character, whatever a config's values and keys hold.

use eks_nodeinit::{config, spec};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::TestCaseError;
use serde_json::json;

use super::check;
use super::config_doc::config_doc;
use super::strategies::chars;

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

/// Every line of `message` free of what [`eks_nodeinit::base::text::unsplittable`] finds.
fn one_clean_line_each(message: &str) -> Result<(), TestCaseError> {
    for line in message.split('\n') {
        if let Some(c) = eks_nodeinit::base::text::unsplittable(line) {
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
                    let all = eks_nodeinit::base::findings::Invalid(findings.0);
                    one_clean_line_each(&all.to_string())
                }
            }
        },
    );
}
