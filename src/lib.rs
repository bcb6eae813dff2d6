//! eks-nodeinit: the first-boot agent for EKS worker nodes.
//!
//! config → [`spec`] (checked once) → [`gather`] (the world, read once into [`facts`]) →
//! [`plan`] (pure: the [`kubelet`] intent, then the [`aspects`] registry) → [`exec`] (the one
//! executor, hand-off included). The layers, bottom up, and the order to read them in:
//! docs/architecture.md.

pub mod aspects;
pub mod autoscaling;
pub mod await_service;
pub mod aws;
pub(crate) mod aws_http;
pub mod bootstrap_sh;
pub mod cli;
pub mod complete_hook;
pub mod config;
pub mod discovery;
pub mod duration;
pub mod ec2;
pub mod exec;
pub mod facts;
pub mod findings;
pub mod fsutil;
pub mod gather;
pub mod handoff;
pub mod imds;
pub mod k8s;
pub mod kubelet;
pub mod lifecycle;
pub mod lock;
pub mod logging;
pub mod marker;
pub mod metadata;
pub(crate) mod pem;
pub mod plan;
pub mod podcap;
pub(crate) mod procsys;
pub mod report;
pub mod retry;
pub mod run;
pub mod spec;
pub mod step;
pub mod systemd;
pub mod tagging;
pub mod text;
pub mod userdata;
