//! The spec: the config checked once and resolved into what the node should be. Every check
//! that needs only the config runs here, once; each aspect checks its own section (its `spec`
//! function). Nothing downstream re-parses a string or re-runs a check: a [`Spec`] can only be
//! made by [`resolve`], and planning takes a `Spec`, never a `Config`.

use std::time::Duration;

pub mod bootstrap;
pub mod discovery;
pub mod host;
pub mod kernel;
pub mod kubelet;
mod local_storage;
pub mod logind;
pub mod name_tag;
pub mod nodeconfig;
pub mod pod_capacity;
pub mod proxy;
pub mod registration;
pub mod registries;
pub mod resource_managers;
pub mod sysctls;
pub mod trust;
pub mod verify;

pub(crate) use registration::Registration;

use crate::base::findings::{Findings, Invalid};
use crate::base::text::printable;
use crate::config::{Config, HandoffMode, Role};

/// What the node should be. Only [`resolve`] makes one.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Spec {
    pub cluster: ClusterSpec,
    pub role: Role,
    pub registration: Registration,
    pub kubelet: kubelet::KubeletSpec,
    pub sysctls: sysctls::SysctlSpec,
    pub logind: logind::LogindSpec,
    pub name_tag: name_tag::NameTagSpec,
    pub mode: HandoffMode,
    pub bootstrap: bootstrap::BootstrapSpec,
    pub nodeconfig: nodeconfig::NodeconfigSpec,
    pub tagging: TaggingSpec,
    pub imds: ImdsSpec,
    /// Whether a warmed instance holds its hand-off (`lifecycle.warmPool`).
    pub warm_pool: crate::config::WarmPool,
    /// The launch lifecycle hook to complete (`lifecycle.completeLaunchHook`), checked.
    pub launch_hook: Option<String>,
    /// Container registries' `hosts.toml`, in name order (`registries`).
    pub registries: Vec<registries::RegistrySpec>,
    /// The HTTP proxy and the config's NO_PROXY entries (`proxy`).
    pub proxy: Option<proxy::ProxySpec>,
    /// The CA bundles the node and the agent trust (`trust`).
    pub trust: Option<trust::TrustSpec>,
    /// Kernel modules loaded now and at every boot (`kernel`).
    pub kernel: Option<kernel::KernelSpec>,
    /// Huge pages (`host`).
    pub host: Option<host::HostSpec>,
    /// The instance store's disks, set up by the hand-off target (`localStorage`).
    pub local_storage: Option<crate::config::LocalStorageSettings>,
    /// The checks before the hand-off and the proof after it (`verify`).
    pub verify: verify::VerifySpec,
}

impl Spec {
    /// The CA bundles the node trusts beside the platform's roots (`trust.caBundles`).
    pub fn ca_bundles(&self) -> Vec<String> {
        self.trust
            .as_ref()
            .map(|t| t.bundles.clone())
            .unwrap_or_default()
    }

    /// How the agent's own AWS calls in `region` reach AWS: the config's proxy and CA bundles;
    /// `None` with neither (the SDK's defaults).
    pub fn agent_transport(&self, region: &str) -> Option<crate::aws::http::Transport> {
        let cidr = self.cluster.cidr.as_ref().map(|c| c.text.as_str());
        let proxy = self.proxy.as_ref().map(|p| p.for_agent(region, cidr));
        let ca_bundles = self.ca_bundles();
        (proxy.is_some() || !ca_bundles.is_empty())
            .then_some(crate::aws::http::Transport { proxy, ca_bundles })
    }
}

#[derive(Debug, Clone)]
pub struct ClusterSpec {
    pub name: String,
    pub api_server_endpoint: Option<String>,
    /// Base64 of the cluster CA: a secret, redacted wherever it is shown.
    pub certificate_authority: Option<String>,
    pub cidr: Option<Cidr>,
    pub container_runtime: String,
    /// Where to look up what the config leaves out (`None`: nothing is looked up).
    pub discovery: Option<discovery::DiscoverySpec>,
}

/// The service CIDR as written, and whether it is IPv6.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cidr {
    pub text: String,
    pub ipv6: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TaggingSpec {
    pub enabled: bool,
    pub required: bool,
    pub sync_budget: Duration,
    pub background_deadline: Duration,
    pub spread: Duration,
    pub ec2_endpoint: Option<String>,
}

#[derive(Debug, Clone)]
pub struct ImdsSpec {
    pub endpoint: Option<String>,
    pub allow_v1_fallback: bool,
    pub deadline: Duration,
}

/// Characters that would break bootstrap.sh's `Environment='KUBELET_EXTRA_ARGS=…'` drop-in or
/// a systemd unit line.
pub(crate) fn unsafe_for_dropin(s: &str) -> Option<char> {
    s.chars()
        .find(|c| c.is_control() || matches!(c, '\'' | '"' | '\\' | '$' | '%' | '`' | ' '))
}

/// Check the whole config once. Returns the spec of every part that passed, and every finding.
/// With findings, the spec is partial (failed parts left out) and serves only to look for
/// problems on the node too, so that all of them are reported together.
pub fn resolve(c: &Config) -> (Spec, Findings) {
    let mut f = Findings::default();
    let cluster = cluster(c, &mut f);
    let registration = registration::registration(c, &mut f);
    let kubelet = kubelet::spec(&c.kubelet, &mut f);
    let spec = Spec {
        cluster,
        role: c.node_group.role,
        registration,
        sysctls: sysctls::spec(&c.sysctls, &mut f),
        logind: logind::spec(&c.logind, &kubelet, &mut f),
        kubelet,
        name_tag: name_tag::spec(c, &mut f),
        mode: c.handoff.mode,
        bootstrap: bootstrap::spec(&c.handoff, &mut f),
        nodeconfig: nodeconfig::spec(&c.handoff, &mut f),
        tagging: tagging(c, &mut f),
        imds: imds(c, &mut f),
        warm_pool: c.lifecycle.warm_pool,
        launch_hook: c.lifecycle.complete_launch_hook.clone().filter(|h| {
            f.check(
                "lifecycle.completeLaunchHook",
                crate::instance::lifecycle::check_hook_name(h),
            )
            .is_some()
        }),
        registries: registries::spec(&c.registries, &mut f),
        proxy: proxy::spec(c.proxy.as_ref(), &mut f),
        trust: trust::spec(c.trust.as_ref(), &mut f),
        kernel: kernel::spec(c.kernel.as_ref(), &mut f),
        host: host::spec(c.host.as_ref(), &mut f),
        local_storage: local_storage::spec(c.local_storage.as_ref(), &mut f),
        verify: verify::spec(&c.verify, &mut f),
    };
    (spec, f)
}

/// The spec, or every finding.
pub fn from_config(c: &Config) -> Result<Spec, Invalid> {
    match resolve(c) {
        (spec, f) if f.is_empty() => Ok(spec),
        (_, f) => Err(Invalid(f.0)),
    }
}

fn cluster(c: &Config, f: &mut Findings) -> ClusterSpec {
    let k = &c.cluster;
    let name_ok = !k.name.is_empty()
        && k.name.len() <= 100
        && k.name.starts_with(|ch: char| ch.is_ascii_alphanumeric())
        && k.name
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_');
    if !name_ok {
        f.push("cluster.name", format!(
            "`{}` is not an EKS cluster name (1-100 letters, digits, `-`, `_`, starting with a letter or digit)",
            printable(&k.name)
        ));
    }
    let endpoint = k.api_server_endpoint.clone().filter(|ep| {
        let ok = is_endpoint(ep);
        if !ok {
            f.push("cluster.apiServerEndpoint", format!(
                "`{}` must be an https:// URL: a host name or address, an optional port and path of letters, digits and `-._~/` (the cluster's endpoint from `aws eks describe-cluster`); other characters break bootstrap.sh's sed edits or a systemd drop-in",
                printable(ep)
            ));
        }
        ok
    });
    let ca = k.certificate_authority.clone().filter(|ca| {
        use base64::Engine;
        let ok =
            !ca.is_empty() && base64::engine::general_purpose::STANDARD.decode(ca).is_ok();
        if !ok {
            // Never echo the value: it is the cluster CA.
            f.push(
                "cluster.certificateAuthority",
                "is not valid base64 on one line; use the cluster's certificateAuthority.data as is",
            );
        }
        ok
    });
    let cidr = k.cidr.as_ref().and_then(|cidr| {
        let parsed = parse_cidr(cidr).map(|(ip, _)| Cidr {
            text: cidr.clone(),
            ipv6: ip.is_ipv6(),
        });
        if parsed.is_none() {
            f.push(
                "cluster.cidr",
                format!(
                    "`{}` is not an IP network like `10.100.0.0/16` (the cluster's service CIDR)",
                    printable(cidr)
                ),
            );
        }
        parsed
    });
    if k.container_runtime != "containerd" {
        f.push(
            "cluster.containerRuntime",
            format!(
                "`{}` is not supported: EKS AMIs since Kubernetes 1.24 run containerd only",
                printable(&k.container_runtime)
            ),
        );
    }
    ClusterSpec {
        name: k.name.clone(),
        api_server_endpoint: endpoint,
        certificate_authority: ca,
        cidr,
        container_runtime: k.container_runtime.clone(),
        discovery: discovery::spec(k, f),
    }
}

/// `https://host[:port][/path]` of the characters every hand-off carries: bootstrap.sh writes
/// the endpoint with `sed` (a `,` or `|` ends its expression) and into a systemd drop-in.
pub(crate) fn is_endpoint(ep: &str) -> bool {
    let Some(rest) = ep.strip_prefix("https://") else {
        return false;
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let (host_ok, port) = match authority.strip_prefix('[') {
        // An IPv6 address: `[addr]` or `[addr]:port`.
        Some(r) => match r.split_once(']') {
            Some((v6, tail)) if tail.is_empty() || tail.starts_with(':') => (
                v6.parse::<std::net::Ipv6Addr>().is_ok(),
                tail.strip_prefix(':'),
            ),
            _ => return false,
        },
        None => {
            let (host, port) = match authority.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            };
            let label_ok = |l: &str| {
                !l.is_empty()
                    && !l.starts_with('-')
                    && !l.ends_with('-')
                    && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            };
            (host.split('.').all(label_ok), port)
        }
    };
    let port_ok = port.map_or(true, |p| decimal::<u16>(p).is_some_and(|n| n > 0));
    let path_ok = path
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~' | '/'));
    host_ok && port_ok && path_ok
}

/// A number written in decimal digits alone: Rust's integer parse also takes a leading `+`,
/// which Go's parsers (bootstrap.sh's, kubelet's and nodeadm's consumers) refuse.
fn decimal<T: std::str::FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

pub(crate) fn parse_cidr(s: &str) -> Option<(std::net::IpAddr, u8)> {
    let (ip, len) = s.split_once('/')?;
    let ip: std::net::IpAddr = ip.parse().ok()?;
    let len: u8 = decimal(len)?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    (len <= max).then_some((ip, len))
}

/// The longest any tagging wait may be: a day (keeps every deadline far from overflow).
pub(crate) const TAGGING_MAX_SEC: u64 = 86_400;

fn tagging(c: &Config, f: &mut Findings) -> TaggingSpec {
    let t = &c.tagging;
    if t.sync_budget_ms > 60_000 {
        f.push(
            "tagging.syncBudgetMs",
            "at most 60000: tagging must never hold up the join for long",
        );
    }
    if t.background_deadline_sec == 0 || t.background_deadline_sec > TAGGING_MAX_SEC {
        f.push(
            "tagging.backgroundDeadlineSec",
            format!("must be between 1 and {TAGGING_MAX_SEC} (a day)"),
        );
    }
    if t.spread_sec > TAGGING_MAX_SEC {
        f.push(
            "tagging.spreadSec",
            format!("must be at most {TAGGING_MAX_SEC} (a day)"),
        );
    } else if t.spread_sec >= t.background_deadline_sec {
        f.push(
            "tagging.spreadSec",
            format!(
                "{} is not below tagging.backgroundDeadlineSec ({}): the spread delay would use up the whole deadline; lower it or raise the deadline",
                t.spread_sec, t.background_deadline_sec
            ),
        );
    }
    TaggingSpec {
        enabled: t.enabled,
        required: t.required,
        sync_budget: Duration::from_millis(t.sync_budget_ms.min(60_000)),
        background_deadline: Duration::from_secs(t.background_deadline_sec.min(TAGGING_MAX_SEC)),
        spread: Duration::from_secs(t.spread_sec.min(TAGGING_MAX_SEC)),
        ec2_endpoint: t.ec2_endpoint.clone(),
    }
}

fn imds(c: &Config, f: &mut Findings) -> ImdsSpec {
    if c.imds.deadline_ms == 0 || c.imds.deadline_ms > 120_000 {
        f.push("imds.deadlineMs", "must be between 1 and 120000");
    }
    ImdsSpec {
        endpoint: c.imds.endpoint.clone(),
        allow_v1_fallback: c.imds.allow_v1_fallback,
        deadline: Duration::from_millis(c.imds.deadline_ms.clamp(1, 120_000)),
    }
}

/// A config path: absolute, without `..`.
pub(crate) fn check_node_path(field: &str, p: &std::path::Path, f: &mut Findings) {
    if !p.is_absolute() || p.components().any(|x| x == std::path::Component::ParentDir) {
        f.push(
            field,
            format!(
                "`{}` must be an absolute path without `..`",
                printable(&p.display().to_string())
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_length_or_port_is_decimal_digits_only() {
        // Rust's integer parse takes a leading `+`; Go's ParseCIDR and url.Parse (what
        // bootstrap.sh, kubelet and nodeadm hand these to) do not.
        assert!(parse_cidr("10.100.0.0/16").is_some());
        assert!(parse_cidr("fd00:10:96::/108").is_some());
        for bad in [
            "10.100.0.0/+16",
            "fd00::/+64",
            "10.100.0.0/",
            "10.100.0.0/ 16",
        ] {
            assert!(parse_cidr(bad).is_none(), "{bad}");
        }
        assert!(is_endpoint("https://x.example.com:443"));
        assert!(!is_endpoint("https://x.example.com:+443"));
        assert!(!is_endpoint("https://[fd00::1]:+443"));
    }
}
