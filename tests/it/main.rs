//! The integration suites, one module each, in one test binary: the crate and the AWS SDKs are
//! linked once. `cargo test --test it node::` runs one suite; tests/README.md says what each
//! proves and which real peer it talks to. The VM e2e (tests/e2e/vm) is its own binary.

#[path = "../common/mod.rs"]
mod common;

mod accelerators;
mod al2_containerd;
mod check;
mod concurrency;
mod control_plane;
mod crash;
mod discovery;
mod examples;
mod faults;
mod go_url;
mod golden;
mod hardening;
mod host_resources;
mod imds;
mod instance_types;
mod join_proof;
mod kernel_modules;
mod launch_hook;
mod layers;
mod logging;
mod logind_dbus;
mod moto;
mod node;
mod node_unwritable;
mod nodeadm_dropins;
mod plan;
mod pod_capacity;
mod props;
mod proxy;
mod registries;
mod resolver;
mod retire;
mod same_output;
mod tagging;
mod trust;
mod unfit;
mod user_data_config;
mod validation;
mod validation_echoes;
mod warm_pool;

/// The AWS SDK's test credentials (and no IMDS, no profile files) for the suites' in-process
/// clients (tagging, instance_types), set before `main` while the process has one thread: a
/// change to the environment races with every thread that reads it through the C library
/// (`getenv` in name resolution, for one), and the suites run side by side in this process, so
/// no test sets it. Children the suites start get a clean environment (`common::cmd`).
#[used]
#[link_section = ".init_array"]
static TEST_CREDENTIALS: extern "C" fn() = test_credentials;

extern "C" fn test_credentials() {
    common::ec2_server::use_test_credentials();
}
