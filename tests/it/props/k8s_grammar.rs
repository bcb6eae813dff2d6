//! Target: label keys, values and taints at the limits (names of 62-64, prefixes of 252-254
//! characters, dots and dashes at the ends, uppercase prefixes), accepted exactly as
//! apimachinery accepts them.

use eks_nodeinit::base::k8s;
use proptest::prelude::*;

use super::strategies::{label_key, label_value, taint_text};
use super::{check, oracle};

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
