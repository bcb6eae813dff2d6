//! The `images` section checked: each pull setting by the rule of the program that reads it
//! (containerd's CRI plugin, the kubelet's validation), before any change.

use crate::base::duration::{parse_go, GoDuration};
use crate::base::findings::Findings;
use crate::config::{ImagesSettings, PullSettings};

/// The most layers or pulls at once the agent sets: each is a connection to the registry, and
/// registries throttle a client well below this.
pub const MAX_CONCURRENCY: i64 = 64;

/// The pull profile, checked: `None` keeps the node's value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PullSpec {
    pub max_concurrent_downloads: Option<u32>,
    pub progress_timeout: Option<GoDuration>,
    pub serialize: Option<bool>,
    pub max_parallel: Option<u32>,
    pub registry_qps: Option<u32>,
    pub registry_burst: Option<u32>,
    pub fast_image_pull: bool,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImagesSpec {
    pub pull: Option<PullSpec>,
}

pub(crate) fn spec(c: Option<&ImagesSettings>, f: &mut Findings) -> Option<ImagesSpec> {
    let c = c?;
    let before = f.0.len();
    let pull = c.pull.as_ref().map(|p| pull(p, f));
    (f.0.len() == before).then_some(ImagesSpec { pull })
}

fn pull(p: &PullSettings, f: &mut Findings) -> PullSpec {
    let field = |k: &str| format!("images.pull.{k}");
    let serialize = p.serialize;
    let max_parallel = count(&field("maxParallel"), p.max_parallel, 1, f);
    if serialize == Some(true) && max_parallel.is_some_and(|n| n > 1) {
        f.push(
            field("maxParallel"),
            "the kubelet refuses maxParallelImagePulls above 1 with serializeImagePulls on: set `serialize` to false, or leave it out",
        );
    }
    PullSpec {
        max_concurrent_downloads: count(
            &field("maxConcurrentDownloads"),
            p.max_concurrent_downloads,
            1,
            f,
        ),
        progress_timeout: p
            .progress_timeout
            .as_deref()
            .and_then(|t| timeout(&field("progressTimeout"), t, f)),
        serialize,
        max_parallel,
        registry_qps: count(&field("registryQPS"), p.registry_qps, 0, f),
        registry_burst: burst(p, f),
        fast_image_pull: p.fast_image_pull.unwrap_or(false),
    }
}

/// A count in `min..=MAX_CONCURRENCY`.
fn count(field: &str, v: Option<i64>, min: i64, f: &mut Findings) -> Option<u32> {
    let v = v?;
    if !(min..=MAX_CONCURRENCY).contains(&v) {
        f.push(
            field,
            format!("{v} is outside {min}..={MAX_CONCURRENCY}: give a number in that range, or leave it out for the node's value"),
        );
        return None;
    }
    u32::try_from(v).ok()
}

/// The kubelet's registry burst: 0 is read as "unset" by its defaulting, which makes it 10, so
/// a 0 is refused wherever the kubelet uses the burst (a registry QPS above 0, the kubelet's
/// default 5 included); with `registryQPS: 0` the burst is unused, which the plan warns of.
fn burst(p: &PullSettings, f: &mut Findings) -> Option<u32> {
    let field = "images.pull.registryBurst";
    let b = count(field, p.registry_burst, 0, f)?;
    if b == 0 && p.registry_qps != Some(0) {
        f.push(field, "0 is not a burst the kubelet keeps: its defaulting makes a 0 burst 10 while registryQPS is above 0 (the kubelet's default is 5); give 1 or more, or leave it out");
        return None;
    }
    Some(b)
}

/// The shortest progress timeout a pull is given: containerd checks progress every half of the
/// timeout (below 10 s), and a timeout under 2 ns gives a zero interval, on which Go's
/// `time.NewTicker` panics at the first pull; below a second every pause of the network
/// cancels the pull.
const MIN_PROGRESS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// containerd parses the timeout with Go's `time.ParseDuration`, and its CRI plugin does not
/// load on one it cannot parse (containerd starts without it); 0 turns the progress check off,
/// which a boot that must not hang refuses too, and under a second a pull has no room to pause.
fn timeout(field: &str, text: &str, f: &mut Findings) -> Option<GoDuration> {
    let d = f.check(
        field,
        parse_go(text).map_err(|e| format!("{e}: containerd's CRI plugin does not load on it")),
    )?;
    if d.value.is_zero() {
        f.push(field, "0 turns off containerd's check that a pull makes progress, so a stalled pull never ends: give a duration such as `5m`");
        return None;
    }
    if d.value < MIN_PROGRESS_TIMEOUT {
        f.push(field, format!("`{}` is under 1s: containerd checks a pull's progress every half of it, and a pull cancelled at every pause of the network (or, under 2ns, a containerd that panics at its first pull) is not what a boot wants; give a duration such as `5m`", crate::base::text::printable(text)));
        return None;
    }
    Some(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(json: &str) -> Result<ImagesSpec, Vec<String>> {
        let c: ImagesSettings = serde_json::from_str(json).unwrap();
        let mut f = Findings::default();
        let s = spec(Some(&c), &mut f);
        match s {
            Some(s) if f.is_empty() => Ok(s),
            _ => Err(f.0.iter().map(ToString::to_string).collect()),
        }
    }

    #[test]
    fn a_profile_is_kept_as_given() {
        let s = checked(r#"{"pull": {"maxConcurrentDownloads": 8, "progressTimeout": "2m30s", "serialize": false, "maxParallel": 4, "registryQPS": 0, "registryBurst": 20, "fastImagePull": true}}"#).unwrap();
        let p = s.pull.unwrap();
        assert_eq!(p.max_concurrent_downloads, Some(8));
        assert_eq!(p.progress_timeout.unwrap().value.as_secs(), 150);
        assert_eq!(
            (p.max_parallel, p.registry_qps, p.registry_burst),
            (Some(4), Some(0), Some(20))
        );
        assert!(p.fast_image_pull);
    }

    #[test]
    fn bad_counts_timeouts_and_the_kubelets_rule_are_named_findings() {
        for (json, field, says) in [
            (
                r#"{"pull": {"maxConcurrentDownloads": 0}}"#,
                "images.pull.maxConcurrentDownloads",
                "outside 1..=64",
            ),
            (
                r#"{"pull": {"maxConcurrentDownloads": 100000}}"#,
                "images.pull.maxConcurrentDownloads",
                "outside 1..=64",
            ),
            (
                r#"{"pull": {"maxParallel": -1}}"#,
                "images.pull.maxParallel",
                "outside 1..=64",
            ),
            (
                r#"{"pull": {"registryQPS": -5}}"#,
                "images.pull.registryQPS",
                "outside 0..=64",
            ),
            (
                r#"{"pull": {"progressTimeout": "5 minutes"}}"#,
                "images.pull.progressTimeout",
                "CRI plugin does not load",
            ),
            (
                r#"{"pull": {"progressTimeout": "1ns"}}"#,
                "images.pull.progressTimeout",
                "under 1s",
            ),
            (
                r#"{"pull": {"progressTimeout": "999ms"}}"#,
                "images.pull.progressTimeout",
                "under 1s",
            ),
            (
                r#"{"pull": {"registryQPS": 5, "registryBurst": 0}}"#,
                "images.pull.registryBurst",
                "makes a 0 burst 10",
            ),
            (
                r#"{"pull": {"registryBurst": 0}}"#,
                "images.pull.registryBurst",
                "the kubelet's default is 5",
            ),
            (
                r#"{"pull": {"progressTimeout": "0s"}}"#,
                "images.pull.progressTimeout",
                "never ends",
            ),
            (
                r#"{"pull": {"serialize": true, "maxParallel": 2}}"#,
                "images.pull.maxParallel",
                "serializeImagePulls on",
            ),
        ] {
            let e = checked(json).unwrap_err();
            assert!(
                e.iter().any(|l| l.starts_with(field) && l.contains(says)),
                "{json}: {e:?}"
            );
        }
        // One pull at a time is allowed with serialize on, as the kubelet allows it.
        assert!(checked(r#"{"pull": {"serialize": true, "maxParallel": 1}}"#).is_ok());
        // A second is the shortest timeout; a 0 burst is kept where the QPS is 0 (unused).
        assert!(checked(r#"{"pull": {"progressTimeout": "1s"}}"#).is_ok());
        assert!(checked(r#"{"pull": {"registryQPS": 0, "registryBurst": 0}}"#).is_ok());
    }
}
