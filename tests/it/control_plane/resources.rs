//! The CPU and memory managers' reservations, derived by the agent, accepted by a real kubelet
//! on both families, with the Node showing them; and the kubelet itself refusing what the agent
//! steers clear of: reservedMemory one byte off, reserved CPUs beside nodeadm's reserved cgroup.
//! And swap's kubelet settings on AL2 (the swap itself is proven on a real kernel: the VM),
//! where the kubelet refuses LimitedSwap on cgroup v1, as the agent does before any change.

use serde_json::{json, Value};

use super::{agent_start, prove, ready, scaler_labels, Case, Promise};
use crate::common;
use common::control_plane::ControlPlane;
use common::kubelet::{tail, Kubelet, Start};
use common::{init, sample_root, stderr};

/// The example config with the static CPU and memory managers.
fn static_managers(v: &mut Value) {
    v["kubelet"]["cpuManager"] =
        json!({"policy": "static", "options": {"full-pcpus-only": "true"}});
    v["kubelet"]["memoryManager"] = json!({"policy": "Static"});
}

fn case(root: &'static str, name: &'static str) -> Case {
    Case {
        root,
        name,
        edit: static_managers,
        user_data: None,
        pods: 29,
        want: Promise {
            labels: scaler_labels(),
            taints: vec![],
        },
    }
}

fn prove_static_managers(root: &'static str, name: &'static str) {
    if !ready() {
        return;
    }
    let cp = ControlPlane::shared();
    let c = case(root, name);
    let (_root, plan, start) = agent_start(&cp, &c);
    let d = &plan["derived"]["resourceManagers"];
    assert_eq!(d["reservedSystemCPUs"]["value"], "0", "{d}");
    let limits = &d["reservedMemory"]["value"][0]["limits"]["memory"];
    assert_eq!(limits, "674Mi", "574Mi kube-reserved + 100Mi eviction: {d}");
    prove(&cp, name, &start, &plan, &c.want);
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn al2_static_cpu_and_memory_managers_take_the_derived_reservations() {
    prove_static_managers("al2-root", "al2-static.node.test");
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn al2023_static_cpu_and_memory_managers_take_the_derived_reservations() {
    prove_static_managers("al2023-root", "al2023-static.node.test");
}

/// The kubelet of node `name` started from `start` exits, saying `says`.
pub(super) fn assert_refused(cp: &ControlPlane, name: &str, start: &Start, says: &str) {
    let mut k = Kubelet::start(cp, name, start);
    let accepted = k.accepted(cp);
    let log = k.log_text();
    assert!(!accepted, "kubelet {name} started:\n{}", tail(&log));
    assert!(
        log.contains(says),
        "kubelet {name} did not say {says:?}:\n{}",
        tail(&log)
    );
}

/// The agent's AL2023 start for node `name` with `edit` applied to its NodeConfig's kubelet
/// config (the kubelet's drop-in).
fn al2023_edited(cp: &ControlPlane, name: &'static str, edit: impl FnOnce(&mut Value)) -> Start {
    let (_root, _plan, mut start) = agent_start(cp, &case("al2023-root", name));
    let (_, dropin) = start
        .dropins
        .iter_mut()
        .find(|(n, _)| n == "40-nodeadm.conf")
        .expect("the drop-in");
    edit(dropin);
    start
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn the_kubelet_refuses_reserved_memory_one_byte_off() {
    if !ready() {
        return;
    }
    let cp = ControlPlane::shared();
    let name = "off-by-one.node.test";
    let start = al2023_edited(&cp, name, |d| {
        // 674Mi + 1 byte.
        d["reservedMemory"][0]["limits"]["memory"] = json!(((674u64 << 20) + 1).to_string());
    });
    assert_refused(&cp, name, &start, "is not equal to the value");
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn the_kubelet_refuses_reserved_cpus_beside_nodeadms_reserved_cgroup() {
    // Why the agent clears kubeReservedCgroup with reservedSystemCPUs: nodeadm's generated config
    // sets it, and the kubelet refuses the pair.
    if !ready() {
        return;
    }
    let cp = ControlPlane::shared();
    let name = "cgroup.node.test";
    let start = al2023_edited(&cp, name, |d| {
        d.as_object_mut().unwrap().remove("kubeReservedCgroup");
    });
    assert_refused(&cp, name, &start, "can't use reservedSystemCPUs");
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn al2_swap_settings_reach_the_kubelet_and_the_file_is_made_in_the_root() {
    if !ready() {
        return;
    }
    let cp = ControlPlane::shared();
    let c = Case {
        edit: |v| v["host"] = json!({"swap": {"size": "64Mi", "behavior": "NoSwap"}}),
        ..case("al2-root", "al2-swap.node.test")
    };
    let (root, plan, start) = agent_start(&cp, &c);
    // Made and mkswap'ed in the root (swapon runs only with --root /).
    let file = root.path().join("swapfile");
    let meta = std::fs::metadata(&file).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        (meta.len(), meta.permissions().mode() & 0o777),
        (64 << 20, 0o600)
    );
    let header = std::fs::read(&file).unwrap();
    assert_eq!(&header[4086..4096], b"SWAPSPACE2", "mkswap's signature");
    let cz = prove(&cp, c.name, &start, &plan, &c.want);
    assert_eq!(cz["failSwapOn"], false);
    assert_eq!(cz["memorySwap"]["swapBehavior"], "NoSwap");
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn limited_swap_on_al2s_cgroup_v1_is_refused_by_the_kubelet_and_by_the_agent_first() {
    // This host runs cgroup v1, as AL2 does: the kubelet exits with LimitedSwap there.
    if !ready() {
        return;
    }
    let cp = ControlPlane::shared();
    let (_root, _plan, mut start) = agent_start(&cp, &case("al2-root", "al2-limited.node.test"));
    start.config["failSwapOn"] = json!(false);
    start.config["memorySwap"] = json!({"swapBehavior": "LimitedSwap"});
    assert_refused(
        &cp,
        "al2-limited.node.test",
        &start,
        "only supported with cgroupv2",
    );
    // The agent says so before any change.
    let root = sample_root("al2-root");
    let cfg = super::config(root.path(), &cp, |v| {
        v["host"] = json!({"swap": {"size": "64Mi"}});
    });
    let out = init(root.path(), &cfg, &["--dry-run"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("LimitedSwap needs cgroup v2"),
        "{}",
        stderr(&out)
    );
}

/// `kubelet.config`'s own keys on a real kubelet: `podPidsLimit` and `clusterDNS` as given,
/// `evictionHard` merged key by key over the hand-off's thresholds (AL2023: the kubelet merges
/// the NodeConfig's drop-in over nodeadm's config; AL2: the flags bootstrap.sh cannot rewrite),
/// and the raised memory threshold held back from allocatable memory, as the proof expects.
fn passed_keys_reach_the_kubelet(root: &'static str, name: &'static str) {
    if !ready() {
        return;
    }
    let cp = ControlPlane::shared();
    let c = Case {
        edit: |v| {
            v["kubelet"]["config"] = json!({"podPidsLimit": 4096, "clusterDNS": ["169.254.20.10"],
                "evictionHard": {"memory.available": "200Mi"}});
        },
        ..case(root, name)
    };
    let (_root, plan, start) = agent_start(&cp, &c);
    let mut kubelet = Kubelet::start(&cp, name, &start);
    let node = kubelet.node(&cp);
    let cz = kubelet.configz(&cp);
    assert_eq!(cz["podPidsLimit"], 4096, "{cz}");
    assert_eq!(cz["clusterDNS"], json!(["169.254.20.10"]), "{cz}");
    let eviction = &cz["evictionHard"];
    for (signal, v) in [
        ("memory.available", "200Mi"),
        ("nodefs.available", "10%"),
        ("nodefs.inodesFree", "5%"),
    ] {
        assert_eq!(eviction[signal], v, "{eviction}");
    }
    // assert_allocatable counts the default 100Mi threshold: the other 100Mi with kube-reserved.
    let mut held = plan["derived"]["podCapacity"]["kubeReserved"]["value"].clone();
    let mib: u64 = held["memory"]
        .as_str()
        .unwrap()
        .strip_suffix("Mi")
        .unwrap()
        .parse()
        .unwrap();
    held["memory"] = json!(format!("{}Mi", mib + 100));
    common::kubelet::assert_allocatable(&node["status"], &held);
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn al2_kubelet_config_keys_reach_the_kubelet() {
    passed_keys_reach_the_kubelet("al2-root", "al2-passed.node.test");
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn al2023_kubelet_config_keys_reach_the_kubelet() {
    passed_keys_reach_the_kubelet("al2023-root", "al2023-passed.node.test");
}

#[test]
#[ignore = "a real control plane: make control-plane"]
fn the_kubelet_refuses_a_wrong_kind_and_ignores_a_name_it_lacks_as_kubelet_config_says() {
    // The premises of `kubelet.config`'s checks, on the real kubelet: a value of another JSON
    // kind stops it (the agent refuses it first); a field name it lacks is passed over without
    // stopping it (the agent refuses it, as the setting would silently do nothing).
    if !ready() {
        return;
    }
    let cp = ControlPlane::shared();
    let name = "kind.node.test";
    let start = al2023_edited(&cp, name, |d| d["podPidsLimit"] = json!("4096"));
    assert_refused(&cp, name, &start, "podPidsLimit");
    let name = "typo.node.test";
    let start = al2023_edited(&cp, name, |d| d["podPIDsLimit"] = json!(4096));
    let mut kubelet = Kubelet::start(&cp, name, &start);
    assert!(kubelet.accepted(&cp), "{}", tail(&kubelet.log_text()));
    assert!(kubelet.configz(&cp).get("podPIDsLimit").is_none());
}
