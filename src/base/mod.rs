//! The bottom shelf: value grammars and checks shared by every layer (text for messages,
//! findings, Go durations, Kubernetes names and quantities, PEM, retry policies, logging,
//! bootstrap.sh's option grammar, the node's CPU-list and meminfo grammars) and the embedded
//! instance-type table with the pod-capacity arithmetic. Nothing here
//! reads the world or imports anything above it.

pub mod accelerators;
pub mod bootstrap_sh;
pub(crate) mod cidr;
pub mod duration;
pub mod ecr;
pub mod findings;
pub mod gourl;
pub mod k8s;
pub mod kubelet_fields;
pub mod logging;
pub mod node;
pub(crate) mod pem;
pub mod podcap;
pub mod ports;
pub mod retry;
pub mod text;
