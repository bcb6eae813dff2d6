//! The CPU and memory managers' reservations (docs/resources.md), derived in process from the
//! node's CPUs, NUMA nodes and the reservation; and the configs the node cannot honour.

use eks_nodeinit::base::node::{CPU_ONLINE, NODE_ONLINE};
use eks_nodeinit::facts::Space;
use eks_nodeinit::plan::aspects::{hugepages, swap};
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
    f.set_file(CPU_ONLINE, file(cpus));
    f.set_file(NODE_ONLINE, numa.map(file).unwrap_or_else(absent));
    f
}

fn derived(s: &Spec, f: &Facts) -> (Value, Value) {
    let p = build(s, f).unwrap_or_else(|e| panic!("{e}"));
    let value = |key| {
        let d = p.derived.iter().find(|d| d.key == key);
        d.unwrap_or_else(|| panic!("{key} derived")).value.clone()
    };
    (value("reservedSystemCPUs"), value("reservedMemory"))
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

/// AL2 facts with the sample root's kubelet-config.json (the AMI's).
fn al2_sample() -> Facts {
    let path = "examples/al2-root/etc/kubernetes/kubelet/kubelet-config.json";
    al2(&std::fs::read_to_string(common::manifest_dir().join(path)).unwrap())
}

#[test]
fn al2_passes_reserved_cpus_as_the_flag_bootstrap_sh_looks_for() {
    let s = managers(|_| {});
    let mut f = al2_sample();
    f.set_file(CPU_ONLINE, file("0-1"));
    f.set_file(NODE_ONLINE, absent());
    let p = build(&s, &f).unwrap_or_else(|e| panic!("{e}"));
    let argv = exec_argv(&p);
    let extra = &argv[argv
        .iter()
        .position(|a| a == "--kubelet-extra-args")
        .unwrap()
        + 1];
    assert!(extra.ends_with("--reserved-cpus=0"), "{extra}");
}

/// AL2023 with 7.5 GiB, 2 MiB default huge pages, `live` of them now.
fn memory_node(live: &str) -> Facts {
    let mut f = al2023(&[CLUSTER_TAG]);
    let meminfo = "MemTotal:        7868788 kB\nHugepagesize:       2048 kB\n";
    f.set_file("/proc/meminfo", file(meminfo));
    f.set_file(hugepages::PERSIST_PATH, absent());
    f.set_file(CPU_ONLINE, file("0-1"));
    f.set_sysctl(hugepages::KEY, Ok(live.into()));
    f
}

fn hugepages_spec(v: Value) -> Spec {
    managers(|c| {
        c["kubelet"] = json!({"maxPods": 29});
        c["host"] = json!({"hugepages": v});
    })
}

#[test]
fn huge_pages_are_set_live_read_back_and_persisted_once() {
    let p = build(&hugepages_spec(json!({"2Mi": "10%"})), &memory_node("0")).unwrap();
    let live = p.steps.iter().find_map(|s| match s {
        Step::Live(l) if l.key == hugepages::KEY => Some(l.clone()),
        _ => None,
    });
    let live = live.expect("a live step");
    // 10% of 7868788 KiB in 2048 KiB pages.
    assert_eq!((live.old.as_str(), live.new.as_str()), ("0", "384"));
    assert!(live.read_back.unwrap().contains("fragmented"));
    let persisted = p.steps.iter().any(|s| {
        matches!(s, Step::File(f) if f.path.ends_with("98-eks-nodeinit-hugepages.conf")
            && f.new.contains("vm.nr_hugepages = 384\n"))
    });
    assert!(persisted, "{:?}", steps(&p));
    // The node as the run left it: nothing to do.
    let mut done = memory_node("384");
    let text = p.steps.iter().find_map(|s| match s {
        Step::File(f) if f.path.ends_with("98-eks-nodeinit-hugepages.conf") => Some(f.new.clone()),
        _ => None,
    });
    done.set_file(hugepages::PERSIST_PATH, file(&text.unwrap()));
    let again = build(&hugepages_spec(json!({"2Mi": "10%"})), &done).unwrap();
    let huge = |s: &Step| match s {
        Step::Live(l) => l.key == hugepages::KEY,
        Step::File(f) => f.path.ends_with("98-eks-nodeinit-hugepages.conf"),
        _ => false,
    };
    assert!(!again.steps.iter().any(huge), "{:?}", steps(&again));
}

#[test]
fn huge_pages_the_node_cannot_hold_or_set_twice_are_findings() {
    // 3600 pages (7200 MiB) + 574 MiB reserved + 100 MiB > 7684 MiB.
    let e = errors(&hugepages_spec(json!({"2Mi": 3600})), &memory_node("0"));
    assert!(
        e.iter()
            .any(|e| e.contains("leave nothing of the node's 7684 MiB")),
        "{e:?}"
    );
    let twice = managers(|c| {
        c["kubelet"] = json!({"maxPods": 29});
        c["host"] = json!({"hugepages": {"2Mi": 16}});
        c["sysctls"] = json!({"vm.nr_hugepages": 8});
    });
    let e = errors(&twice, &memory_node("0"));
    assert!(
        e.iter().any(|e| e.contains("set huge pages in one place")),
        "{e:?}"
    );
    for bad in [json!("95%"), json!("ten"), json!(-1)] {
        let c = json!({"cluster": {"name": "prod"}, "nodeGroup": {"name": "g", "role": "scaler"},
            "host": {"hugepages": {"2Mi": bad}}});
        let parsed = parse(&c.to_string(), "t.json");
        let refused = match parsed {
            Ok(c) => spec::from_config(&c).is_err(),
            Err(_) => true,
        };
        assert!(refused, "{bad}");
    }
}

#[test]
fn one_gib_pages_are_said_to_need_the_kernel_argument() {
    let p = build(&hugepages_spec(json!({"1Gi": 2})), &memory_node("0")).unwrap();
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("hugepagesz=1G hugepages=2")),
        "{:?}",
        p.warnings
    );
}

/// AL2023 with 7.5 GiB, `swaps` as /proc/swaps lists them, /swapfile of `size` on a filesystem
/// with `free` bytes.
fn swap_node(swaps: &str, size: Option<u64>, free: u64) -> Facts {
    let mut f = memory_node("0");
    let header = "Filename\tType\tSize\tUsed\tPriority\n";
    f.set_file(swap::SWAPS, file(&format!("{header}{swaps}")));
    f.set_file("/etc/systemd/system/swapfile.swap", absent());
    f.set_file(swap::TARGET_DROPIN, absent());
    f.set_space(
        "/swapfile",
        Space {
            size,
            free: Ok(free),
        },
    );
    f
}

fn swap_spec(size: &str) -> Spec {
    managers(|c| {
        c["kubelet"] = json!({"maxPods": 29});
        c["host"] = json!({"swap": {"size": size}});
    })
}

/// The swap steps of a plan: each program's argv, each file's path.
fn swap_steps(p: &Plan) -> Vec<String> {
    p.steps
        .iter()
        .filter_map(|s| match s {
            Step::Run(r) => Some(r.argv.join(" ")),
            Step::Remove(r) => Some(format!("remove {}", r.path.display())),
            Step::File(f) if f.path.to_string_lossy().contains("swap") => {
                Some(format!("file {}", f.path.display()))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_swap_file_is_made_turned_on_and_persisted_and_the_kubelet_told() {
    let p = build(&swap_spec("1Gi"), &swap_node("", None, 10 << 30)).unwrap();
    assert_eq!(
        swap_steps(&p),
        [
            "fallocate --length 1073741824 /swapfile",
            "chmod 0600 /swapfile",
            "mkswap /swapfile",
            "swapon /swapfile",
            "file /etc/systemd/system/swapfile.swap",
            "file /etc/systemd/system/swap.target.d/50-eks-nodeinit.conf",
        ]
    );
    let dropin = p.steps.iter().find_map(|s| match s {
        Step::File(f) if f.path.ends_with("10-eks-nodeinit.json") => Some(f.new.clone()),
        _ => None,
    });
    let nc: Value = serde_json::from_str(&dropin.expect("the drop-in")).unwrap();
    let k = &nc["spec"]["kubelet"]["config"];
    assert_eq!(k["failSwapOn"], false);
    assert_eq!(k["memorySwap"], json!({"swapBehavior": "LimitedSwap"}));
    // 25% of 7868788 KiB, in whole pages.
    let p = build(&swap_spec("25%"), &swap_node("", None, 10 << 30)).unwrap();
    assert_eq!(swap_steps(&p)[0], "fallocate --length 2014412800 /swapfile");
}

#[test]
fn a_swap_file_on_or_there_is_not_made_again() {
    let on = "/swapfile\tfile\t1048572\t0\t-2\n";
    let p = build(&swap_spec("1Gi"), &swap_node(on, Some(1 << 30), 10 << 30)).unwrap();
    let steps = swap_steps(&p);
    assert!(steps.iter().all(|s| s.starts_with("file ")), "{steps:?}");
    let off = build(&swap_spec("1Gi"), &swap_node("", Some(1 << 30), 0)).unwrap();
    assert_eq!(
        &swap_steps(&off)[..2],
        ["mkswap /swapfile", "swapon /swapfile"]
    );
    let other = build(&swap_spec("1Gi"), &swap_node("", Some(2 << 30), 10 << 30)).unwrap();
    assert_eq!(swap_steps(&other)[0], "remove /swapfile");
}

#[test]
fn swap_the_node_cannot_take_is_a_finding() {
    let on = "/swapfile\tfile\t2097148\t0\t-2\n";
    let e = errors(&swap_spec("1Gi"), &swap_node(on, Some(2 << 30), 10 << 30));
    assert!(e.iter().any(|e| e.contains("swapoff /swapfile")), "{e:?}");
    let e = errors(&swap_spec("4Gi"), &swap_node("", None, 1 << 30));
    assert!(e.iter().any(|e| e.contains("does not fit")), "{e:?}");
    for (size, path) in [
        ("1Mx", "/swapfile"),
        ("0%", "/swapfile"),
        ("1Gi", "/proc/swap"),
    ] {
        let c = json!({"cluster": {"name": "prod"}, "nodeGroup": {"name": "g", "role": "scaler"},
            "host": {"swap": {"size": size, "path": path}}});
        let refused =
            parse(&c.to_string(), "t.json").map_or(true, |c| spec::from_config(&c).is_err());
        assert!(refused, "{size} {path}");
    }
}

#[test]
fn limited_swap_on_al2_is_a_finding_and_no_swap_is_not() {
    let mut f = al2_sample();
    let on_al2 = swap_node("", None, 10 << 30);
    f.answers.extend(on_al2.answers);
    let e = errors(&swap_spec("1Gi"), &f);
    assert!(
        e.iter().any(|e| e.contains("LimitedSwap needs cgroup v2")),
        "{e:?}"
    );
    let no_swap = managers(|c| {
        c["kubelet"] = json!({"maxPods": 29});
        c["host"] = json!({"swap": {"size": "1Gi", "behavior": "NoSwap"}});
    });
    assert!(
        errors(&no_swap, &f).is_empty(),
        "{:?}",
        errors(&no_swap, &f)
    );
}
