//! Target: durations against Go's `time.ParseDuration` (any string, Go's `String()` of any
//! int64, the int64 limit, `-0s`): read as Go reads them, negatives refused, zero not negative.

use eks_nodeinit::base::duration;
use proptest::prelude::*;

use super::strategies::duration_text;
use super::{check, oracle};

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
