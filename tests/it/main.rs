//! The integration suites, one module each, in one test binary: the crate and the AWS SDKs are
//! linked once. `cargo test --test it node::` runs one suite; tests/README.md says what each
//! proves and which real peer it talks to. The VM e2e (tests/e2e/vm) is its own binary.

#[path = "../common/mod.rs"]
mod common;

mod concurrency;
mod crash;
mod discovery;
mod examples;
mod faults;
mod golden;
mod imds;
mod instance_types;
mod launch_hook;
mod logging;
mod logind_dbus;
mod moto;
mod node;
mod plan;
mod pod_capacity;
mod props;
mod proxy;
mod registries;
mod same_output;
mod tagging;
mod trust;
mod user_data_config;
mod validation;
mod warm_pool;
