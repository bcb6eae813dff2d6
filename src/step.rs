//! A step: one thing the executor does, as the plan holds it. The aspects produce steps, the
//! plan orders and renders them, the executor runs them; the type sits below all three.

use std::path::PathBuf;

use serde::Serialize;

use crate::facts::{Family, InstanceTags, TagState};
use crate::spec::TaggingSpec;
use crate::systemd::{PropertyCheck, UnitRestart};

/// What the executor needs to run a tag step beside its key and value.
#[derive(Debug, Clone, PartialEq)]
pub struct TagHow {
    pub region: String,
    /// Every tag as read before planning (unknown: tagging reads them first).
    pub known: InstanceTags,
    pub policy: TaggingSpec,
    /// The proxy for the agent's AWS calls, if the config has one.
    pub transport: Option<Box<crate::aws_http::Transport>>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Step {
    /// Make the instance's tag `key` hold `value`. With `current` unknown, the executor reads
    /// the tags first (DescribeTags) and writes only when they differ.
    #[serde(rename_all = "camelCase")]
    Tag {
        instance_id: String,
        key: String,
        value: String,
        #[serde(flatten)]
        current: TagState,
        /// How the executor tags (region, endpoint, tags known, the tagging policy): part of the
        /// executed value, not of the printed plan.
        #[serde(skip)]
        how: TagHow,
    },
    #[serde(rename_all = "camelCase")]
    Sysctl {
        key: String,
        path: PathBuf,
        old: String,
        new: String,
    },
    #[serde(rename_all = "camelCase")]
    File {
        purpose: String,
        /// The node path (without the root).
        path: PathBuf,
        old: Option<String>,
        new: String,
        mode: u32,
        /// One-time backup of the original, when it does not exist yet.
        backup: Option<PathBuf>,
    },
    #[serde(rename_all = "camelCase")]
    NotifyLogind { inhibit_delay_max_usec: u64 },
    #[serde(rename_all = "camelCase")]
    ExecBootstrap { argv: Vec<String> },
    /// AL2023: nodeadm takes the node from here; what it reads and when.
    Nodeadm(NodeadmHandoff),
    /// A warmed instance: the hand-off waits until the instance goes into service.
    HoldHandoff(HandoffHold),
    /// In service after a held run in this boot: remove the hold marker and start what it held.
    ReleaseHold(HoldRelease),
    /// Queue a start of a packaged unit over D-Bus (without waiting for it), for a run that
    /// systemd did not start through the agent's unit.
    StartUnit(UnitStart),
    /// Have systemd reload its units (D-Bus `Manager.Reload`, what `systemctl daemon-reload`
    /// asks), so that the drop-ins this run wrote apply to the units started after it.
    /// `required`: a failure fails the run (AL2023: nodeadm-config.service starts right after
    /// the agent; on AL2 bootstrap.sh reloads again).
    #[serde(rename_all = "camelCase")]
    ReloadUnits { why: String, required: bool },
    /// Rebuild the node's CA trust store from its anchors (exec, no shell).
    RebuildTrust(TrustRebuild),
}

impl Step {
    /// Steps that change the node's files or kernel (what a second run must not plan).
    pub fn is_change(&self) -> bool {
        matches!(
            self,
            Step::Sysctl { .. }
                | Step::File { .. }
                | Step::NotifyLogind { .. }
                | Step::Tag { .. }
                | Step::ReleaseHold(_)
                | Step::ReloadUnits { .. }
                | Step::RebuildTrust(_)
        )
    }

    /// A short name for logs and the report.
    pub fn describe(&self) -> String {
        match self {
            Step::Tag { key, value, .. } => format!("tag {key}={value}"),
            Step::Sysctl { key, new, .. } => format!("sysctl {key}={new}"),
            Step::File { path, .. } => format!("write {}", path.display()),
            Step::NotifyLogind { .. } => "restart systemd-logind".into(),
            Step::ExecBootstrap { argv } => {
                format!("exec {}", argv.first().map_or("", String::as_str))
            }
            Step::Nodeadm(h) => format!("nodeadm reads {}", h.dropin.display()),
            Step::HoldHandoff(h) => format!("hold the hand-off ({})", h.state),
            Step::ReleaseHold(_) => "release the warm-pool hold".into(),
            Step::StartUnit(u) => format!("start {}", u.unit),
            Step::ReloadUnits { .. } => "reload systemd's units".into(),
            Step::RebuildTrust(t) => format!(
                "rebuild the trust store ({})",
                t.argv.first().map_or("", String::as_str)
            ),
        }
    }
}

impl Step {
    /// The unit this step restarts and the property that shows it took the change, if any.
    pub(crate) fn unit_restart(&self) -> Option<UnitRestart> {
        match self {
            Step::NotifyLogind {
                inhibit_delay_max_usec,
            } => Some(UnitRestart {
                unit: "systemd-logind.service",
                check: PropertyCheck {
                    service: "org.freedesktop.login1",
                    path: "/org/freedesktop/login1",
                    interface: "org.freedesktop.login1.Manager",
                    property: "InhibitDelayMaxUSec",
                    expected: *inhibit_delay_max_usec,
                },
            }),
            _ => None,
        }
    }

    /// The hand-off this step is, as the report names it.
    pub fn handoff(&self) -> Option<String> {
        match self {
            Step::ExecBootstrap { .. } => Some("exec bootstrap.sh".into()),
            Step::Nodeadm(h) => Some(format!("NodeConfig at {}", h.dropin.display())),
            Step::HoldHandoff(h) => Some(format!(
                "held: {} (handed off once the instance is in service)",
                h.state
            )),
            _ => None,
        }
    }
}

/// The AL2023 hand-off: the agent's NodeConfig drop-in, which nodeadm's units read after the
/// user data. In the plan's JSON: `dropin` and a `note` saying how nodeadm gets it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeadmHandoff {
    pub dropin: PathBuf,
    /// `nodeadm-config.service` has the package's drop-in adding `/etc/eks/nodeadm.d/` to its
    /// sources (else only `nodeadm-run.service` reads it).
    pub config_unit_reads_dropins: bool,
    /// The user data's taints the drop-in's `--register-with-taints` carries ahead of the
    /// config's: how many, and where they are.
    pub carried_taints: Option<(usize, String)>,
}

impl NodeadmHandoff {
    /// How nodeadm gets the node, in words.
    pub fn note(&self) -> String {
        let mut note = String::from(if self.config_unit_reads_dropins {
            "nodeadm-config.service (with the package's drop-in) and nodeadm-run.service read imds://user-data then file:///etc/eks/nodeadm.d/; nodeadm-run starts kubelet; the agent exits 0"
        } else {
            "nodeadm-run.service (after cloud-final.service) reads imds://user-data then file:///etc/eks/nodeadm.d/ and starts kubelet; the agent exits 0"
        });
        if let Some((n, source)) = &self.carried_taints {
            note.push_str(&format!(
                "; the drop-in's --register-with-taints carries the user data's {n} taint{} ({source}) ahead of the config's, as kubelet keeps only the last such flag",
                if *n == 1 { "" } else { "s" },
            ));
        }
        note
    }
}

impl Serialize for NodeadmHandoff {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("NodeadmHandoff", 2)?;
        st.serialize_field("dropin", &self.dropin)?;
        st.serialize_field("note", &self.note())?;
        st.end()
    }
}

/// The hold released: a run earlier in this boot held the hand-off and the instance is now in
/// service (the waiter had the agent's unit run again).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HoldRelease {
    /// The hold marker to remove (node path), so the first-boot marker is written after this run.
    pub marker: PathBuf,
    /// The unit the hold kept from starting in this boot, started over D-Bus after the files
    /// (AL2023: `nodeadm-run.service`, which starts kubelet); none on AL2, whose hand-off is the
    /// exec that follows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_unit: Option<String>,
}

/// The trust store rebuilt by its distribution's tool: the argv (no shell), or why it is not run
/// here (another `--root` on Amazon Linux, whose tool rebuilds only `/`'s store).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TrustRebuild {
    pub argv: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip: Option<String>,
    /// Written (node path, content) once the tool succeeded: a rerun after a failed or
    /// interrupted rebuild finds it missing or different and rebuilds again.
    #[serde(skip)]
    pub record: Option<(PathBuf, String)>,
}

/// A unit started over D-Bus, and why. A start already queued (the agent's unit pulls the unit
/// in) is the same job: systemd merges the two.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UnitStart {
    pub unit: String,
    pub why: String,
}

/// The hand-off held while the instance is warmed ([`crate::lifecycle`]): the node-local steps
/// ran, the marker on the per-boot tmpfs says this boot held it, and the hand-off that waits is
/// the family's.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HandoffHold {
    /// The target lifecycle state that holds it (`Warmed:Stopped`).
    pub state: String,
    /// Whose hand-off waits: bootstrap.sh's exec (AL2) or nodeadm-run's kubelet (AL2023).
    pub family: Family,
    /// The hold marker (node path).
    pub marker: PathBuf,
}
