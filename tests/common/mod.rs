//! What the suites share, one file per kind (tests/README.md lists which suite uses which):
//!
//! * the agent's command runner (`agent`), sample node roots and bootstrap.sh stand-ins
//!   (`roots`), the processes a test starts (`peers`): re-exported here, every suite uses them;
//! * the real peers: moto (`moto`), the strict IMDSv2 server (`imds_server`), the scripted EC2
//!   and discovery endpoints (`ec2_server`, `discovery_server`), a private dbus-daemon with
//!   stand-ins for systemd and logind (`dbus`), a CA made with openssl (`tls`), Debian's
//!   docker-registry (`registry`) and tinyproxy (`tinyproxy`); a control plane built from
//!   upstream's modules (`control_plane`) with aws-iam-authenticator as its token webhook
//!   (`iam_authenticator`, its STS front `moto/aws_front.py`), a node's role and metadata in moto
//!   (`node_identity`), and a real kubelet started from a hand-off (`kubelet`, with the
//!   hand-offs' models in `handoff_models`) and its pods (`pods`);
//! * the oracles and masks of some suites: bootstrap.sh's argv grammar (`bootstrap_sh`), the
//!   node states the fault suites compare (`faults`).

pub mod accel;
pub mod agent;
pub mod bootstrap_sh;
pub mod containerd;
pub mod control_plane;
pub mod dbus;
pub mod discovery_server;
pub mod ec2_server;
pub mod faults;
pub mod handoff_models;
pub mod iam_authenticator;
pub mod imds_server;
pub mod kubelet;
pub mod moto;
pub mod netns;
pub mod node_identity;
pub mod peers;
pub mod pods;
pub mod registry;
pub mod roots;
pub mod scheduler;
pub mod tinyproxy;
pub mod tls;

pub use agent::*;
pub use moto::*;
pub use peers::*;
pub use roots::*;
