//! eks-nodeinit: the first-boot agent for EKS worker nodes.
//!
//! config → [`spec`] (checked once) → [`gather`] (the world, read once into [`facts`]) →
//! [`plan`] (pure: the hand-off and kubelet intents, then the aspects' steps) → [`exec`] (the one
//! executor, hand-off included), wired by [`commands`]. Beneath them, labelled shelves:
//! [`base`] (value grammars, the embedded tables), [`os`] (files, kernel values, systemd),
//! [`aws`] (the AWS clients), [`instance`] (what IMDS and the user data say). The layers, bottom
//! up, and the order to read them in: docs/architecture.md.

pub mod aws;
pub mod base;
pub mod commands;
pub mod config;
pub mod discovery;
pub mod exec;
pub mod facts;
pub mod gather;
pub mod instance;
pub mod os;
pub mod plan;
pub mod spec;
pub mod verify;
