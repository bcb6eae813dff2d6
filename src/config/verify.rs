//! The `verify` section: the checks before the hand-off and the proof of the join after it
//! (docs/join.md).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VerifySettings {
    /// What a failed check before the hand-off does. `warn` (default): the cause is logged at
    /// error priority, recorded in the report, and the hand-off goes on. `fail`: no hand-off,
    /// the launch hook (if any) is completed with `ABANDON`, exit status 1. `off`: no checks.
    #[serde(default)]
    pub preflight: CheckMode,
    /// How long all the checks may take together (a Go duration, default `2s`, from 100ms to
    /// 30s). They run beside the run's own work; a check not done by then fails as timed out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preflight_budget: Option<String>,
    /// The hardened-AMI checks (docs/hardening.md): the kernel settings the kubelet's
    /// `protectKernelDefaults` demands, `noexec` where the node executes programs, SELinux
    /// without the container policy, FIPS mode without FIPS endpoints. `warn` (default),
    /// `fail` and `off` as for `preflight`, under the same budget.
    #[serde(default)]
    pub hardening: CheckMode,
    /// The proof after the hand-off: `on` (default) has eks-nodeinit-launch-hook.service wait
    /// for the Node to be Ready with the node's own identity and compare it with the plan
    /// before it completes the launch hook: `ABANDON` only for a cause of the node's own (a
    /// replacement may join), `CONTINUE` with the cause named for one of the cluster's or a
    /// Node not as planned. `strict`: `ABANDON` for every verdict but `joined`. `off`: the hook
    /// is completed once kubelet is active.
    #[serde(default)]
    pub join: JoinMode,
    /// How long the Node may take to be Ready, counted from the proof's start and kubelet's
    /// wait included (a Go duration, default `5m`, from 10s to 1h): then the verdict is
    /// `deadline` or `not-ready`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub join_deadline: Option<String>,
    /// What a failed join whose cause is the node's own does where no launch hook waits
    /// (docs/join.md#fail-fast-without-a-launch-hook). `report` (default): the verdict is
    /// logged and recorded. `replace`: in an Auto Scaling group without a launch hook, the
    /// instance is set `Unhealthy` (`SetInstanceHealth`) so that the group replaces it.
    /// `terminate`: that, and outside any group (Karpenter, a standalone instance) the instance
    /// terminates itself (`TerminateInstances` on its own id; refused, it powers off when its
    /// shutdown behaviour is `terminate`). Before either, the cause is written as the instance
    /// tag `eks-nodeinit/retired` and one line on the serial console. Never for a cause the
    /// cluster or the whole group shares.
    #[serde(default)]
    pub on_failure: OnFailure,
    /// How long after kubelet is active the agent's Node conditions (and `initConditions`)
    /// may take to be all True (a Go duration from 30s to 1h; absent: no deadline). Past it
    /// the verdict is `init-deadline` and goes the way of a failed join (`onFailure`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_deadline: Option<String>,
    /// Other Node condition types the initialisation deadline waits for besides the agent's
    /// own (set by other node-local reporters: a GPU operator's, a CNI's), each True by then.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub init_conditions: Vec<String>,
    /// How long a node kept after a failed join (`deadline` or `not-ready` for a cause the
    /// fleet shares) is still watched: Ready within it, its `eks-nodeinit.io/Joined` turns
    /// True (`joined-late`) and a startup taint is released (a Go duration up to 1h, default
    /// `30m`; `0s`: not watched).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_join: Option<String>,
    /// What a Node Ready but not as planned (`mismatch`) says in `eks-nodeinit.io/Joined`.
    /// `release` (default): `True` (`NotAsPlanned`): the node joined, the finding is in
    /// `eks-nodeinit.io/AsPlanned`, and the shipped rule releases a startup taint. `hold`:
    /// `False` (`NotAsPlanned`): a startup taint stays until the initialisation deadline's
    /// verdict, and after it (docs/lifecycle.md#every-outcome).
    #[serde(default, skip_serializing_if = "MismatchMode::is_default")]
    pub mismatch: MismatchMode,
    /// The GPU and EFA checks before the kubelet starts (docs/accelerators.md), on instance
    /// types with NVIDIA GPUs or EFA.
    #[serde(default, skip_serializing_if = "AcceleratorSettings::is_default")]
    pub accelerators: AcceleratorSettings,
}

/// `verify.accelerators`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AcceleratorSettings {
    /// `auto` (default): checked on a type the embedded table lists with NVIDIA GPUs or EFA;
    /// `off`: not.
    #[serde(default)]
    pub check: AcceleratorCheck,
    /// Who manages the GPU driver. `host` (default): the image (its kernel module, nvidia-smi,
    /// persistence, Fabric Manager, a container runtime for GPUs: all checked). `operator`:
    /// the GPU operator's driver container, which runs after the kubelet: only the GPUs on PCI
    /// and EFA are checked.
    #[serde(default)]
    pub driver: DriverManager,
    /// How long the devices may take to be ready before the kubelet starts (a Go duration,
    /// default `5m`, from 10s to 30m): then the check fails with what was last seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<String>,
    /// The MIG mode every GPU must have (`enabled` or `disabled`); absent: not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig: Option<MigMode>,
    /// The EFA devices the instance must show; absent: as many as the EFA interfaces
    /// DescribeInstances says are attached (on a type that takes EFA).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efa: Option<u32>,
}

impl AcceleratorSettings {
    pub fn is_default(&self) -> bool {
        self == &AcceleratorSettings::default()
    }

    /// `check: auto`.
    pub fn is_on(&self) -> bool {
        self.check == AcceleratorCheck::Auto
    }

    /// `driver: operator`.
    pub fn operator_driver(&self) -> bool {
        self.driver == DriverManager::Operator
    }

    /// `mig`, as whether it is enabled.
    pub fn mig_enabled(&self) -> Option<bool> {
        self.mig.map(|m| m == MigMode::Enabled)
    }
}

#[derive(
    Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum AcceleratorCheck {
    #[default]
    Auto,
    Off,
}

#[derive(
    Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum DriverManager {
    #[default]
    Host,
    Operator,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MigMode {
    Enabled,
    Disabled,
}

#[derive(
    Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum MismatchMode {
    #[default]
    Release,
    Hold,
}

impl MismatchMode {
    pub fn is_default(&self) -> bool {
        *self == MismatchMode::Release
    }
}

impl VerifySettings {
    /// Nothing set: the section is left out when the config is written back.
    pub fn is_default(&self) -> bool {
        self == &VerifySettings::default()
    }
}

#[derive(
    Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum CheckMode {
    #[default]
    Warn,
    Fail,
    Off,
}

#[derive(
    Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum OnFailure {
    #[default]
    Report,
    Replace,
    Terminate,
}

impl OnFailure {
    pub fn as_str(self) -> &'static str {
        match self {
            OnFailure::Report => "report",
            OnFailure::Replace => "replace",
            OnFailure::Terminate => "terminate",
        }
    }
}

#[derive(
    Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum JoinMode {
    #[default]
    On,
    Strict,
    Off,
}
