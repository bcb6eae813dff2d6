//! The spec: the config checked once and resolved into what the node should be. Every check
//! that needs only the config runs here, once; each aspect checks its own section (its `spec`
//! function). Nothing downstream re-parses a string or re-runs a check: a [`Spec`] can only be
//! made by [`resolve`], and planning takes a `Spec`, never a `Config`.

pub mod bootstrap;
pub mod cluster;
pub mod discovery;
pub mod host;
pub mod images;
pub mod imds;
pub mod kernel;
pub mod kubelet;
pub mod kubelet_config;
pub mod lifecycle;
mod local_storage;
pub mod logind;
pub mod name_tag;
pub mod network;
pub mod nodeconfig;
pub mod pod_capacity;
pub mod proxy;
pub mod registration;
pub mod registries;
pub mod resource_managers;
pub mod sysctls;
pub mod tagging;
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
    pub cluster: cluster::ClusterSpec,
    pub role: Role,
    pub registration: Registration,
    pub kubelet: kubelet::KubeletSpec,
    pub sysctls: sysctls::SysctlSpec,
    pub logind: logind::LogindSpec,
    pub name_tag: name_tag::NameTagSpec,
    pub mode: HandoffMode,
    pub bootstrap: bootstrap::BootstrapSpec,
    pub nodeconfig: nodeconfig::NodeconfigSpec,
    pub tagging: tagging::TaggingSpec,
    pub imds: imds::ImdsSpec,
    /// The services' dual-stack names for the agent's AWS calls (`aws.dualStack`); `None`: on
    /// an instance without IPv4, else the SDK's choice ([`crate::aws::dual_stack_for`]).
    pub dual_stack: Option<bool>,
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
    /// How the node pulls images (`images`).
    pub images: Option<images::ImagesSpec>,
    /// Huge pages (`host`).
    pub host: Option<host::HostSpec>,
    /// The instance store's disks, set up by the hand-off target (`localStorage`).
    pub local_storage: Option<crate::config::LocalStorageSettings>,
    /// The checks before the hand-off and the proof after it (`verify`).
    pub verify: verify::VerifySpec,
    /// The node's name servers and search domains (`network`), in force before discovery.
    pub network: Option<network::NetworkSpec>,
}

impl Spec {
    /// The CA bundles the node trusts beside the platform's roots (`trust.caBundles`).
    pub fn ca_bundles(&self) -> Vec<String> {
        self.trust
            .as_ref()
            .map(|t| t.bundles.clone())
            .unwrap_or_default()
    }

    /// How the agent's own AWS calls in `region` reach AWS: the config's proxy and CA bundles,
    /// and the `endpoints` the boot found; `None` with none of them (the SDK's defaults).
    pub fn agent_transport(
        &self,
        region: &str,
        endpoints: &crate::aws::Endpoints,
    ) -> Option<crate::aws::http::Transport> {
        let cidr = self.cluster.cidr.as_ref().map(|c| c.text.as_str());
        let proxy = self.proxy.as_ref().map(|p| p.for_agent(region, cidr));
        let t = crate::aws::http::Transport {
            proxy,
            ca_bundles: self.ca_bundles(),
            endpoints: endpoints.clone(),
        };
        (t != crate::aws::http::Transport::default()).then_some(t)
    }
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
    let cluster = cluster::spec(&c.cluster, &mut f);
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
        tagging: tagging::spec(&c.tagging, &mut f),
        imds: imds::spec(&c.imds, &mut f),
        dual_stack: c.aws.dual_stack,
        warm_pool: c.lifecycle.warm_pool,
        launch_hook: lifecycle::launch_hook(&c.lifecycle, &mut f),
        registries: registries::spec(&c.registries, &mut f),
        proxy: proxy::spec(c.proxy.as_ref(), &mut f),
        trust: trust::spec(c.trust.as_ref(), &mut f),
        kernel: kernel::spec(c.kernel.as_ref(), &mut f),
        images: images::spec(c.images.as_ref(), &mut f),
        host: host::spec(c.host.as_ref(), &mut f),
        local_storage: local_storage::spec(c.local_storage.as_ref(), &mut f),
        verify: verify::spec(&c.verify, &mut f),
        network: network::spec(c.network.as_ref(), &mut f),
    };
    if spec.registration.startup_taint.is_some() && spec.verify.join_deadline.is_none() {
        f.push(
            "lifecycle.startupTaint",
            "`verify.join` is `off`, so nothing sets the Node conditions the rule waits on and the taint would stay for ever; set `verify.join` to `on` or remove the startup taint".to_string(),
        );
    }
    (spec, f)
}

/// The spec, or every finding.
pub fn from_config(c: &Config) -> Result<Spec, Invalid> {
    match resolve(c) {
        (spec, f) if f.is_empty() => Ok(spec),
        (_, f) => Err(Invalid(f.0)),
    }
}

/// Whether the kubelet argument `a` is `flag`, alone or as `flag=value`.
pub(crate) fn is_flag(a: &str, flag: &str) -> bool {
    a.strip_prefix(flag)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('='))
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
