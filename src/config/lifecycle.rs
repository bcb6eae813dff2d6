//! The `lifecycle` section: how the agent behaves in an Auto Scaling warm pool.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LifecycleSettings {
    /// `auto` (default): while the instance's target lifecycle state (IMDS
    /// `autoscaling/target-lifecycle-state`) is `Warmed:*`, do every node-local step and set the
    /// Name tag but hold the hand-off (no bootstrap.sh, nodeadm does not start kubelet) until the
    /// instance is in service: the boot after a start into service hands off, or, without a
    /// reboot, eks-nodeinit-await-service.service has the agent's unit run again at `InService`.
    /// `off`: hand off whatever the state.
    #[serde(default)]
    pub warm_pool: WarmPool,
    /// The name of the Auto Scaling group's launch lifecycle hook
    /// (`autoscaling:EC2_INSTANCE_LAUNCHING`) to complete with `CONTINUE` once the node is ready:
    /// in service, after the hand-off with kubelet active; in a warm pool, after the node is
    /// prepared. The packaged eks-nodeinit-launch-hook.service makes the call. Absent: no hook is
    /// completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub complete_launch_hook: Option<String>,
    /// A taint the Node registers with and that only a controller removes once the node's boot
    /// work is done (docs/lifecycle.md#a-startup-taint): `key[=value]:Effect` with the key
    /// under `readiness.k8s.io/`, as Kubernetes' Node Readiness Controller manages them (its
    /// shipped `NodeReadinessRule` waits on `eks-nodeinit.io/Joined` and selects the label
    /// `eks-nodeinit.io/readiness: v2`). Needs `verify.join` on. Karpenter before v1.13 must
    /// list it in a NodePool's `startupTaints`. The proof does not expect it on the Node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_taint: Option<String>,
}

#[derive(
    Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum WarmPool {
    #[default]
    Auto,
    Off,
}
