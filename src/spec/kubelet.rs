//! The `kubelet` section: image GC thresholds in range and ordered as kubelet needs them,
//! shutdown periods as Go durations, the config file's path, and the image credential
//! providers by the kubelet's own `CredentialProviderConfig` rules.

use std::collections::BTreeSet;
use std::path::PathBuf;

use crate::base::duration::{self, GoDuration};
use crate::base::findings::Findings;
use crate::base::gourl;
use crate::base::text::printable;
use crate::config::{CredentialProviderSettings, KubeletSettings, TokenAttributes};

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
    /// `kubelet.credentialProviders`, checked as the kubelet checks them at start.
    pub credential_providers: Vec<CredentialProviderSettings>,
    /// `kubelet.config`: the kubelet's own keys, passed as given (`spec::kubelet_config`).
    pub config: Vec<(&'static str, serde_json::Value)>,
}

impl KubeletSpec {
    /// The one-time backup of the original file.
    pub(crate) fn backup_path(&self) -> PathBuf {
        let name = self.config_path.file_name().unwrap_or_default();
        self.config_path
            .with_file_name(format!("{}.orig", name.to_string_lossy()))
    }
}

/// The image GC thresholds, each in 0..100 and low below high (the kubelet's defaults for the
/// one not given).
fn image_gc(k: &KubeletSettings, f: &mut Findings) -> (Option<i64>, Option<i64>) {
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
    (high, low)
}

pub fn spec(k: &KubeletSettings, f: &mut Findings) -> KubeletSpec {
    let (high, low) = image_gc(k, f);
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
    // Like every section, the providers reach the plan only when their checks passed: the plan
    // joins each name to the plugin directory.
    let before = f.0.len();
    credential_providers(&k.credential_providers, f);
    let chosen = k.extra_args.iter().enumerate();
    for (i, a) in chosen.filter(|(_, a)| super::is_flag(a, "--image-credential-provider-config")) {
        if !k.credential_providers.is_empty() {
            f.push(format!("kubelet.extraArgs[{i}]"), format!("`{}` and kubelet.credentialProviders both choose the kubelet's credential provider config: keep one", printable(a)));
        }
    }
    let providers = match f.0.len() == before {
        true => k.credential_providers.clone(),
        false => Vec::new(),
    };
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
        credential_providers: providers,
        config: super::kubelet_config::spec(&k.config, f),
    }
}

/// The kubelet's rules for each provider (`validateCredentialProviderConfig` in
/// kubernetes' `pkg/credentialprovider/plugin/config.go`), each finding naming its field. What
/// depends on the node (its own providers' names, the plugin binaries, the kubelet's version)
/// is checked by the plan (`plan::aspects::credential_providers`).
fn credential_providers(list: &[CredentialProviderSettings], f: &mut Findings) {
    let mut seen = BTreeSet::new();
    for (i, p) in list.iter().enumerate() {
        let at = format!("kubelet.credentialProviders[{i}]");
        if let Err(e) = provider_name(&p.name) {
            f.push(format!("{at}.name"), e);
        } else if !seen.insert(p.name.as_str()) {
            f.push(
                format!("{at}.name"),
                format!("`{}` is named twice: names are unique", printable(&p.name)),
            );
        }
        if p.match_images.is_empty() {
            f.push(
                format!("{at}.matchImages"),
                "at least one image pattern is required",
            );
        }
        for (j, m) in p.match_images.iter().enumerate() {
            f.check(format!("{at}.matchImages[{j}]"), match_image(m));
        }
        f.check(
            format!("{at}.defaultCacheDuration"),
            duration::parse_go(&p.default_cache_duration).map_err(|e| e.to_string()),
        );
        for (j, a) in p.args.iter().enumerate() {
            if a.contains('\0') {
                f.push(format!("{at}.args[{j}]"), "holds a NUL byte");
            }
        }
        for (j, e) in p.env.iter().enumerate() {
            if e.name.is_empty() || e.name.contains(['=', '\0']) || e.value.contains('\0') {
                f.push(
                    format!("{at}.env[{j}]"),
                    "needs a name without `=` and a value, neither with a NUL byte",
                );
            }
        }
        if let Some(t) = &p.token_attributes {
            token_attributes(&format!("{at}.tokenAttributes"), t, f);
        }
    }
}

/// The plugin's file name in the plugin directory.
fn provider_name(name: &str) -> Result<(), String> {
    let why = match name {
        "" => "is required: the plugin's file name in the node's plugin directory",
        "." | ".." => "cannot be `.` or `..`",
        n if n.contains('/') => "cannot contain `/`: it is a file name in the plugin directory",
        n if n.contains(' ') => "cannot contain spaces",
        _ => return Ok(()),
    };
    Err(why.into())
}

/// A `matchImages` entry as the kubelet parses it: Go's `url.Parse` of `https://` and the
/// pattern ([`gourl`]). An empty pattern, which Go parses, matches no image: refused too.
fn match_image(m: &str) -> Result<(), String> {
    let why = if m.is_empty() {
        "it is empty (a pattern names a registry host, e.g. `*.example.com`)".to_string()
    } else {
        match gourl::parse_schemeless(m) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        }
    };
    Err(format!(
        "`{}` is not an image pattern the kubelet accepts: {why}",
        printable(m)
    ))
}

/// `tokenAttributes` by the kubelet's rules (whether the kubelet's version has them is the
/// plan's to say).
fn token_attributes(at: &str, t: &TokenAttributes, f: &mut Findings) {
    if t.service_account_token_audience.is_empty() {
        f.push(format!("{at}.serviceAccountTokenAudience"), "is required");
    }
    match t.require_service_account {
        None => f.push(format!("{at}.requireServiceAccount"), "is required (true or false)"),
        Some(false) if !t.required_service_account_annotation_keys.is_empty() => f.push(
            format!("{at}.requiredServiceAccountAnnotationKeys"),
            "requireServiceAccount cannot be false when requiredServiceAccountAnnotationKeys is set",
        ),
        Some(_) => {}
    }
    let required = annotation_keys(
        at,
        "required",
        &t.required_service_account_annotation_keys,
        f,
    );
    let optional = annotation_keys(
        at,
        "optional",
        &t.optional_service_account_annotation_keys,
        f,
    );
    let both: Vec<&str> = required.intersection(&optional).copied().collect();
    if !both.is_empty() {
        f.push(
            at,
            format!(
                "annotation keys cannot be both required and optional: {}",
                both.join(", ")
            ),
        );
    }
    match t.cache_type.as_deref() {
        Some("ServiceAccount" | "Token") => {}
        None => f.push(
            format!("{at}.cacheType"),
            "is required: ServiceAccount or Token",
        ),
        Some(c) => f.push(
            format!("{at}.cacheType"),
            format!("`{}` is not ServiceAccount or Token", printable(c)),
        ),
    }
}

/// One list of annotation keys: each a qualified name (case aside), none twice.
fn annotation_keys<'a>(
    at: &str,
    which: &str,
    keys: &'a [String],
    f: &mut Findings,
) -> BTreeSet<&'a str> {
    let field = format!("{at}.{which}ServiceAccountAnnotationKeys");
    let mut seen = BTreeSet::new();
    for (j, k) in keys.iter().enumerate() {
        let checked = crate::base::k8s::check_qualified_name(&k.to_lowercase());
        f.check(format!("{field}[{j}]"), checked);
        if !seen.insert(k.as_str()) {
            f.push(
                format!("{field}[{j}]"),
                format!("`{}` is listed twice", printable(k)),
            );
        }
    }
    seen
}
