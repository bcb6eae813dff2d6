//! The `kubelet` section: image GC thresholds in range and ordered as kubelet needs them,
//! shutdown periods as Go durations, the config file's path.

use std::path::PathBuf;

use crate::base::duration::{self, GoDuration};
use crate::base::findings::Findings;
use crate::config::KubeletSettings;

use super::check_node_path;

/// kubelet's own image GC defaults, compared against when only one threshold is set.
pub(crate) const DEFAULT_GC_HIGH: i64 = 85;
pub(crate) const DEFAULT_GC_LOW: i64 = 80;

/// The kubelet settings, checked and typed.
#[derive(Debug, Clone, Default)]
pub struct KubeletSpec {
    pub image_gc_high: Option<i64>,
    pub image_gc_low: Option<i64>,
    pub shutdown_grace_period: Option<GoDuration>,
    pub shutdown_grace_period_critical_pods: Option<GoDuration>,
    pub overwrite: bool,
    pub config_path: PathBuf,
    /// Max pods and kube-reserved (`spec::pod_capacity`).
    pub pod_capacity: super::pod_capacity::PodCapacitySpec,
    /// The CPU and memory managers (`spec::resource_managers`).
    pub resources: super::resource_managers::ResourceManagersSpec,
}

impl KubeletSpec {
    /// The one-time backup of the original file.
    pub(crate) fn backup_path(&self) -> PathBuf {
        let name = self.config_path.file_name().unwrap_or_default();
        self.config_path
            .with_file_name(format!("{}.orig", name.to_string_lossy()))
    }
}

pub fn spec(k: &KubeletSettings, f: &mut Findings) -> KubeletSpec {
    let mut percent = |field: &str, v: Option<i64>| {
        v.filter(|v| {
            let ok = (0..=100).contains(v);
            if !ok {
                f.push(field, format!("{v} is outside 0..100"));
            }
            ok
        })
    };
    let high = percent(
        "kubelet.imageGCHighThresholdPercent",
        k.image_gc_high_threshold_percent,
    );
    let low = percent(
        "kubelet.imageGCLowThresholdPercent",
        k.image_gc_low_threshold_percent,
    );
    if high.is_some() || low.is_some() {
        let (h, l) = (
            high.unwrap_or(DEFAULT_GC_HIGH),
            low.unwrap_or(DEFAULT_GC_LOW),
        );
        if l >= h {
            let why = match (high, low) {
                (None, _) => " (kubelet's default high)",
                (_, None) => " (kubelet's default low is 80)",
                _ => "",
            };
            f.push(
                "kubelet.imageGCLowThresholdPercent",
                format!("low ({l}) must be below high ({h}){why}"),
            );
        }
    }
    let mut go = |field: &str, v: &Option<String>| {
        v.as_deref()
            .and_then(|s| f.check(field, duration::parse_go(s).map_err(|e| e.to_string())))
    };
    let grace = go("kubelet.shutdownGracePeriod", &k.shutdown_grace_period);
    let critical = go(
        "kubelet.shutdownGracePeriodCriticalPods",
        &k.shutdown_grace_period_critical_pods,
    );
    match (&grace, &critical, &k.shutdown_grace_period) {
        (Some(g), Some(cr), _) if cr.value > g.value => f.push(
            "kubelet.shutdownGracePeriodCriticalPods",
            format!(
                "{} is longer than shutdownGracePeriod {}; the critical-pod period is part of the grace period and must not exceed it",
                cr.text, g.text
            ),
        ),
        (None, Some(_), None) => f.push(
            "kubelet.shutdownGracePeriodCriticalPods",
            "is set without kubelet.shutdownGracePeriod; set the grace period too",
        ),
        _ => {}
    }
    check_node_path("kubelet.configPath", &k.config_path, f);
    KubeletSpec {
        image_gc_high: high,
        image_gc_low: low,
        shutdown_grace_period: grace,
        shutdown_grace_period_critical_pods: critical,
        overwrite: k.overwrite,
        config_path: k.config_path.clone(),
        pod_capacity: super::pod_capacity::spec(
            k.max_pods.as_ref(),
            k.kube_reserved.as_ref(),
            &k.extra_args,
            f,
        ),
        resources: super::resource_managers::spec(
            k.cpu_manager.as_ref(),
            k.memory_manager.as_ref(),
            f,
        ),
    }
}
