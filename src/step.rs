//! A step: one thing the executor does, as the plan holds it. The aspects produce steps, the
//! plan orders and renders them, the executor runs them; the type sits below all three.

use std::path::PathBuf;

use serde::Serialize;

use crate::facts::{InstanceTags, TagState};
use crate::spec::TaggingSpec;
use crate::systemd::{PropertyCheck, UnitRestart};

/// What the executor needs to run a tag step beside its key and value.
#[derive(Debug, Clone, PartialEq)]
pub struct TagHow {
    pub region: String,
    /// Every tag as read before planning (unknown: tagging reads them first).
    pub known: InstanceTags,
    pub policy: TaggingSpec,
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
    #[serde(rename_all = "camelCase")]
    Nodeadm { dropin: PathBuf, note: String },
}

impl Step {
    /// Steps that change the node's files or kernel (what a second run must not plan).
    pub fn is_change(&self) -> bool {
        matches!(
            self,
            Step::Sysctl { .. } | Step::File { .. } | Step::NotifyLogind { .. } | Step::Tag { .. }
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
            Step::Nodeadm { dropin, .. } => format!("nodeadm reads {}", dropin.display()),
        }
    }
}

impl Step {
    /// The unit this step restarts and the property that shows it took the change, if any.
    pub fn unit_restart(&self) -> Option<UnitRestart> {
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
            Step::Nodeadm { dropin, .. } => Some(format!("NodeConfig at {}", dropin.display())),
            _ => None,
        }
    }
}
