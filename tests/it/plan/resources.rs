//! The CPU and memory managers' reservations (docs/resources.md), derived in process from the
//! node's CPUs, NUMA nodes and the reservation; and the configs the node cannot honour.

use eks_nodeinit::base::podcap::node::{CPU_ONLINE, NODE_ONLINE};
use serde_json::Value;

use super::*;

/// A complete cluster, 29 pods (kube-reserved derived from them), and the static managers;
/// `edit` on top.
fn managers(edit: impl FnOnce(&mut Value)) -> Spec {
    spec(|v| {
        v["cluster"] = json!({"name": "prod", "apiServerEndpoint": "https://example.com",
            "certificateAuthority": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJleGFtcGxlb25seW5vdGFyZWFsY2VydGlmaWNhdGUKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=",
            "cidr": "172.20.0.0/16"});
        v["kubelet"] = json!({"maxPods": 29, "cpuManager": {"policy": "static"},
            "memoryManager": {"policy": "Static"}});
        edit(v);
    })
}

/// AL2023 with `cpus` online and `numa` nodes online (None: the file absent).
fn machine(cpus: &str, numa: Option<&str>) -> Facts {
    let mut f = al2023(&[CLUSTER_TAG]);
    f.files.insert(CPU_ONLINE.into(), file(cpus));
    f.files
        .insert(NODE_ONLINE.into(), numa.map(file).unwrap_or_else(absent));
    f
}

fn derived(s: &Spec, f: &Facts) -> (Value, Value) {
    let p = build(s, f).unwrap_or_else(|e| panic!("{e}"));
    let d = p.pod_capacity.unwrap();
    (
        d.reserved_system_cpus.unwrap().value,
        d.reserved_memory.unwrap().value,
    )
}

#[test]
fn reservations_follow_the_reserve_the_cpus_and_the_numa_nodes() {
    // 4 vCPUs: kube-reserved cpu 80m, one whole CPU; 574Mi + 100Mi over two NUMA nodes.
    let (cpus, mem) = derived(&managers(|_| {}), &machine("0-3", Some("0-1")));
    assert_eq!(cpus, "0");
    assert_eq!(
        mem,
        json!([{"numaNode": 0, "limits": {"memory": "337Mi"}},
               {"numaNode": 1, "limits": {"memory": "337Mi"}}])
    );
    // An explicit reservation: 1500m is two whole CPUs, the lowest-numbered online ones.
    let s = managers(|v| {
        v["kubelet"]["kubeReserved"] = json!({"cpu": "1500m", "memory": "1Gi"});
    });
    let (cpus, mem) = derived(&s, &machine("2-5", None));
    assert_eq!(cpus, "2-3");
    assert_eq!(
        mem,
        json!([{"numaNode": 0, "limits": {"memory": "1124Mi"}}])
    );
    // An odd total: node 0 takes the remainder, in bytes.
    let s = managers(|v| {
        v["kubelet"]["kubeReserved"] = json!({"cpu": "70m", "memory": "1001"});
    });
    let (_, mem) = derived(&s, &machine("0-1", Some("0-1")));
    let total: u64 = (100 << 20) + 1001;
    assert_eq!(
        mem,
        json!([{"numaNode": 0, "limits": {"memory": (total / 2 + 1).to_string()}},
               {"numaNode": 1, "limits": {"memory": (total / 2).to_string()}}])
    );
}

#[test]
fn reservations_the_node_cannot_honour_are_findings() {
    let offline = managers(|v| v["kubelet"]["cpuManager"]["reservedSystemCPUs"] = json!("3"));
    let e = errors(&offline, &machine("0-1", None));
    assert!(
        e.iter().any(|e| e.contains("CPU 3 of `3` is not online")),
        "{e:?}"
    );
    let e = errors(&managers(|_| {}), &machine("0", None));
    assert!(e.iter().any(|e| e.contains("all 1 online CPUs")), "{e:?}");
    let unknown = managers(|v| {
        v["kubelet"] = json!({"memoryManager": {"policy": "Static"}});
    });
    let e = errors(&unknown, &machine("0-1", None));
    assert!(
        e.iter()
            .any(|e| e.contains("set kubelet.maxPods or kubelet.kubeReserved")),
        "{e:?}"
    );
}

#[test]
fn al2_passes_reserved_cpus_as_the_flag_bootstrap_sh_looks_for() {
    let s = managers(|_| {});
    let mut f = al2(&std::fs::read_to_string(
        common::manifest_dir().join("examples/al2-root/etc/kubernetes/kubelet/kubelet-config.json"),
    )
    .unwrap());
    f.files.insert(CPU_ONLINE.into(), file("0-1"));
    f.files.insert(NODE_ONLINE.into(), absent());
    let p = build(&s, &f).unwrap_or_else(|e| panic!("{e}"));
    let argv = exec_argv(&p);
    let extra = &argv[argv
        .iter()
        .position(|a| a == "--kubelet-extra-args")
        .unwrap()
        + 1];
    assert!(extra.ends_with("--reserved-cpus=0"), "{extra}");
}
