//! systemd-logind: the `InhibitDelayMaxSec` drop-in, and telling logind to take it over D-Bus.
//!
//! kubelet's graceful node shutdown holds a delay inhibitor lock for `shutdownGracePeriod`;
//! logind caps every delay lock at `InhibitDelayMaxSec` (default 5 s). kubelet may write its own
//! `/etc/systemd/logind.conf.d/99-kubelet.conf`; drop-ins apply in file-name order across
//! /etc, /run and /usr/lib and the last one wins, so the agent's file is named to sort after it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::facts::{Facts, Family};
use crate::os::systemd::{Expected, PropertyCheck};
use crate::plan::step::{IfFailed, Mode, Step, Unit, UnitJob};
use crate::spec::Spec;

use super::{Aspect, Input, Out, Reads};
use crate::facts::Read;

pub(crate) const ASPECT: Aspect = Aspect {
    name: "logind",
    reads,
    plan,
    contribute: super::Contribution::Nothing,
};

/// `99-zz-` sorts after kubelet's `99-kubelet.conf`.
pub const DROPIN_PATH: &str = "/etc/systemd/logind.conf.d/99-zz-eks-nodeinit.conf";
pub const MAIN_CONF: &str = "/etc/systemd/logind.conf";
/// Drop-in directories, from the one that masks the others to the one masked.
const DROPIN_DIRS: [&str; 4] = [
    "/etc/systemd/logind.conf.d",
    "/run/systemd/logind.conf.d",
    "/usr/local/lib/systemd/logind.conf.d",
    "/usr/lib/systemd/logind.conf.d",
];
pub fn dropin_content(sec: u64) -> String {
    format!(
        "# Written by eks-nodeinit: lets kubelet's graceful node shutdown hold the shutdown for\n# its whole shutdownGracePeriod. Named to sort after kubelet's 99-kubelet.conf.\n[Login]\nInhibitDelayMaxSec={sec}\n"
    )
}

fn reads(spec: &Spec, _: Option<Family>, r: &mut Reads) {
    if spec.logind.inhibit_delay_max_sec.is_some() {
        r.file(DROPIN_PATH);
        r.file(MAIN_CONF);
        r.extend(DROPIN_DIRS.iter().map(|d| Read::conf_dir(*d)));
    }
}

fn plan(i: &Input, out: &mut Out) {
    let (spec, facts) = (i.spec, i.facts);
    let Some(sec) = spec.logind.inhibit_delay_max_sec else {
        return;
    };
    let content = dropin_content(sec);
    let Some(old) = facts.current_file(DROPIN_PATH, "logind", &mut out.findings) else {
        return;
    };
    if let Some(last) = effective_settings(facts, &content).last() {
        if last.file != Path::new(DROPIN_PATH) && last.seconds < sec as f64 {
            out.warnings.push(format!(
                "{} sorts after {DROPIN_PATH} and sets InhibitDelayMaxSec={}; logind will use it, not {sec}",
                last.file.display(),
                last.seconds
            ));
        }
    }
    if out.file_from(
        old,
        DROPIN_PATH,
        "systemd-logind drop-in",
        content,
        Mode::Keep(0o644),
    ) {
        out.steps.push(Step::Unit(Unit {
            job: UnitJob::Restart {
                unit: "systemd-logind.service".into(),
                verify: PropertyCheck {
                    service: "org.freedesktop.login1",
                    path: "/org/freedesktop/login1",
                    interface: "org.freedesktop.login1.Manager",
                    property: "InhibitDelayMaxUSec",
                    // ≤ a day in seconds: the product fits easily.
                    expected: Expected::Number(sec.saturating_mul(1_000_000)),
                    // What the graceful shutdown gets, for the report.
                    record_as: Some("logindInhibitDelayMaxUsec"),
                },
            },
            why: "logind reads its drop-ins when it starts".into(),
            required: false,
            if_failed: IfFailed::default(),
        }));
    }
}

/// Parse a systemd time span as logind.conf takes it (`90`, `90s`, `1min 30s`, `infinity`)
/// into seconds.
pub(crate) fn parse_timespan(s: &str) -> Option<f64> {
    let s = s.trim();
    if s == "infinity" {
        return Some(f64::INFINITY);
    }
    if let Ok(n) = s.parse::<f64>() {
        return Some(n);
    }
    let mut total = 0.0;
    let mut rest = s;
    while !rest.trim_start().is_empty() {
        rest = rest.trim_start();
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let n: f64 = rest[..end].parse().ok()?;
        rest = rest[end..].trim_start();
        let uend = rest
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        let scale = match &rest[..uend] {
            "" | "s" | "sec" | "second" | "seconds" => 1.0,
            "us" | "usec" => 1e-6,
            "ms" | "msec" => 1e-3,
            "m" | "min" | "minute" | "minutes" => 60.0,
            "h" | "hr" | "hour" | "hours" => 3600.0,
            "d" | "day" | "days" => 86400.0,
            _ => return None,
        };
        total += n * scale;
        rest = &rest[uend..];
    }
    Some(total)
}

/// One `InhibitDelayMaxSec=` setting found on disk.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct Setting {
    pub file: PathBuf,
    pub seconds: f64,
}

fn inhibit_setting(text: &str) -> Option<f64> {
    let mut in_login = false;
    let mut found = None;
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with('[') {
            in_login = l == "[Login]";
            continue;
        }
        if !in_login || l.starts_with('#') || l.starts_with(';') {
            continue;
        }
        if let Some((k, v)) = l.split_once('=') {
            if k.trim() == "InhibitDelayMaxSec" {
                found = parse_timespan(v).or(found);
            }
        }
    }
    found
}

/// The settings logind will apply, in the order it applies them (the last wins): the main
/// logind.conf, then drop-ins by file name, a name in /etc masking the same name in /run and
/// /usr/lib. `own` is the agent's drop-in as planned.
pub(crate) fn effective_settings(facts: &Facts, own: &str) -> Vec<Setting> {
    let mut out = Vec::new();
    let text_of = |p: &Path| {
        facts
            .file(p)
            .and_then(|f| f.content.as_ref().ok().cloned().flatten())
    };
    if let Some(s) = text_of(Path::new(MAIN_CONF))
        .as_deref()
        .and_then(inhibit_setting)
    {
        out.push(Setting {
            file: PathBuf::from(MAIN_CONF),
            seconds: s,
        });
    }
    let mut by_name: BTreeMap<String, PathBuf> = BTreeMap::new();
    for dir in DROPIN_DIRS.iter().rev() {
        for name in facts.dir(dir, ".conf") {
            by_name.insert(name.clone(), Path::new(dir).join(name));
        }
    }
    let own_path = PathBuf::from(DROPIN_PATH);
    let own_name = own_path
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    by_name.insert(own_name, own_path.clone());
    for path in by_name.into_values() {
        let text = if path == own_path {
            Some(own.to_string())
        } else {
            text_of(&path)
        };
        if let Some(s) = text.as_deref().and_then(inhibit_setting) {
            out.push(Setting {
                file: path,
                seconds: s,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timespans() {
        assert_eq!(parse_timespan("90"), Some(90.0));
        assert_eq!(parse_timespan("90s"), Some(90.0));
        assert_eq!(parse_timespan("1min 30s"), Some(90.0));
        assert_eq!(parse_timespan("2m"), Some(120.0));
        assert_eq!(parse_timespan("bogus"), None);
    }
}
