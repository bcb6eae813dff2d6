//! eks-nodeinit: the first-boot agent for EKS worker nodes.
//!
//! inputs (config, instance metadata, the node's files) → a pure [`plan`] → [`apply`] →
//! hand-off ([`handoff`]). One module per external system: [`imds`], [`ec2`], [`logind`],
//! [`sysctl`], [`kubelet`].

pub mod apply;
pub mod cli;
pub mod config;
pub mod duration;
pub mod ec2;
pub mod fsutil;
pub mod handoff;
pub mod imds;
pub mod kubelet;
pub mod logging;
pub mod logind;
pub mod metadata;
pub mod plan;
pub mod run;
pub mod sysctl;
pub mod tagging;
pub mod validate;
