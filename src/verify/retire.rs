//! How the plan has a node retire itself where no launch hook waits (`verify.onFailure`,
//! docs/join.md#fail-fast-without-a-launch-hook): the proof's job carries it, and the work after
//! the hand-off does it ([`crate::exec::retire`], the effect).

use serde::{Deserialize, Serialize};

/// How the plan has the node retire itself (the proof's job carries it).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Retire {
    /// In an Auto Scaling group: `SetInstanceHealth` `Unhealthy`; the group replaces it.
    Unhealthy,
    /// Outside any group: `TerminateInstances` on itself; refused, a power-off where the
    /// instance's shutdown behaviour is `terminate`.
    Terminate,
}
