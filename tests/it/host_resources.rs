//! The `host` section applied on both sample roots (docs/resources.md): huge pages set and
//! persisted, the swap file made (`fallocate`, `chmod`, `mkswap`; `swapon` only with `--root /`)
//! with its unit, the kubelet told on each family; and a second run that plans nothing.

use crate::common;

use common::*;
use serde_json::{json, Value};

fn host_config(root: &std::path::Path, behavior: &str) -> std::path::PathBuf {
    config_with(root, "c.json", |v| {
        v["tagging"] = json!({"enabled": false});
        v["host"] = json!({"hugepages": {"2Mi": 8}, "swap": {"size": "1Mi", "behavior": behavior}});
    })
}

fn applied(root_name: &str, behavior: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let root = sample_root(root_name);
    if root_name == "al2-root" {
        recording_bootstrap(root.path());
    }
    let cfg = host_config(root.path(), behavior);
    let out = init(root.path(), &cfg, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r = root.path();
    let read = |p: &str| std::fs::read_to_string(r.join(p)).unwrap();
    assert_eq!(read("proc/sys/vm/nr_hugepages"), "8\n");
    assert!(read("etc/sysctl.d/98-eks-nodeinit-hugepages.conf").contains("vm.nr_hugepages = 8\n"));
    let swap = std::fs::read(r.join("swapfile")).unwrap();
    assert_eq!(swap.len(), 1 << 20);
    assert_eq!(&swap[4086..4096], b"SWAPSPACE2", "mkswap's signature");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(r.join("swapfile"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert!(read("etc/systemd/system/swapfile.swap").contains("What=/swapfile\n"));
    assert_eq!(
        read("etc/systemd/system/swap.target.d/50-eks-nodeinit.conf")
            .lines()
            .last(),
        Some("Wants=swapfile.swap")
    );
    let rep = report(r);
    let swapon = report_outcome(&rep, "swap on").unwrap();
    assert!(swapon.as_str().unwrap().starts_with("skipped"), "{swapon}");
    let huge = report_outcome(&rep, "sysctl vm.nr_hugepages").unwrap();
    assert_eq!(huge, "done: vm.nr_hugepages = 8");
    (root, cfg)
}

/// The second run: nothing for the host section (the swap file counts as on where /proc/swaps
/// lists it, as the node's would after `swapon`).
fn second_run_plans_no_host_step(root: &std::path::Path, cfg: &std::path::Path) {
    std::fs::write(
        root.join("proc/swaps"),
        "Filename\tType\tSize\tUsed\tPriority\n/swapfile\tfile\t1020\t0\t-2\n",
    )
    .unwrap();
    let dry = init(root, cfg, &["--dry-run", "--output", "json"]);
    assert!(dry.status.success(), "{}", stderr(&dry));
    let plan: Value = serde_json::from_slice(&dry.stdout).unwrap();
    let text = plan["steps"].to_string();
    for word in ["nr_hugepages", "swapfile", "fallocate", "mkswap", "swapon"] {
        assert!(!text.contains(word), "{word} planned again: {text}");
    }
}

#[test]
fn al2_host_resources_apply_and_the_kubelet_config_says_swap() {
    let (root, cfg) = applied("al2-root", "NoSwap");
    let k: Value = serde_json::from_slice(
        &std::fs::read(
            root.path()
                .join("etc/kubernetes/kubelet/kubelet-config.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(k["failSwapOn"], false);
    assert_eq!(k["memorySwap"], json!({"swapBehavior": "NoSwap"}));
    second_run_plans_no_host_step(root.path(), &cfg);
}

#[test]
fn al2023_host_resources_apply_and_the_node_config_says_swap() {
    let (root, cfg) = applied("al2023-root", "LimitedSwap");
    let nc: Value = serde_json::from_slice(
        &std::fs::read(root.path().join("etc/eks/nodeadm.d/10-eks-nodeinit.json")).unwrap(),
    )
    .unwrap();
    let k = &nc["spec"]["kubelet"]["config"];
    assert_eq!(k["failSwapOn"], false);
    assert_eq!(k["memorySwap"], json!({"swapBehavior": "LimitedSwap"}));
    second_run_plans_no_host_step(root.path(), &cfg);
}

/// A config's `net.ipv4.ip_local_reserved_ports` over a root holding the AL2023 AMI's `67-` file
/// (its add-ons' ports) keeps them: set live and persisted with the config's, the plan saying
/// so, and a second run plans nothing.
#[test]
fn reserved_ports_keep_the_amis_beside_the_configs() {
    let root = sample_root("al2023-root");
    let r = root.path();
    let ami = "net.ipv4.ip_local_reserved_ports = 2703,9808,9809,10249,10250,10256,61678,61679\n";
    let write = |p: &str, text: &str| {
        std::fs::create_dir_all(r.join(p).parent().unwrap()).unwrap();
        std::fs::write(r.join(p), text).unwrap();
    };
    write("etc/sysctl.d/67-eks-reserved-ports.conf", ami);
    // What systemd-sysctl set from it at boot, as the kernel shows it.
    let live = "proc/sys/net/ipv4/ip_local_reserved_ports";
    write(live, "2703,9808-9809,10249-10250,10256,61678-61679\n");
    let cfg = config_with(r, "c.json", |v| {
        v["tagging"] = json!({"enabled": false});
        v["sysctls"] = json!({"net.ipv4.ip_local_reserved_ports": "30000-30009"});
    });
    let dry = init(r, &cfg, &["--dry-run"]);
    let text = String::from_utf8_lossy(&dry.stdout);
    assert!(
        text.contains("the AMI's reserved ports 2703,9808-9809,10249-10250,10256,61678-61679 (/etc/sysctl.d/67-eks-reserved-ports.conf) kept"),
        "{text}"
    );
    let out = init(r, &cfg, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let merged = "2703,9808-9809,10249-10250,10256,30000-30009,61678-61679";
    let read = |p: &str| std::fs::read_to_string(r.join(p)).unwrap();
    assert_eq!(read(live).trim(), merged);
    let persisted = read("etc/sysctl.d/99-zz-eks-nodeinit.conf");
    assert!(
        persisted.contains(&format!("net.ipv4.ip_local_reserved_ports = {merged}\n")),
        "{persisted}"
    );
    let again = init(r, &cfg, &["--dry-run", "--output", "json"]);
    let plan: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert!(
        !plan["steps"]
            .to_string()
            .contains("ip_local_reserved_ports"),
        "{plan:#}"
    );
}

/// The list the agent writes is the one the kernel shows back: written into a network namespace
/// of the test's own (the key is per namespace), read back, and compared with the agent's
/// rendering, so that a second run on a node finds the live value equal to its own.
#[test]
fn the_kernel_shows_a_reserved_ports_list_as_the_agent_writes_it() {
    use eks_nodeinit::base::ports::{parse, render};
    if !common::peer_present(&common::missing_commands(&["unshare"])) {
        return;
    }
    for given in [
        "2703,9808,9809,10249,10250,10256,61678,61679,30000-30009",
        "9-10,8,65535,1",
        "",
    ] {
        let script = format!(
            "echo '{given}' > /proc/sys/net/ipv4/ip_local_reserved_ports && cat /proc/sys/net/ipv4/ip_local_reserved_ports"
        );
        let out = std::process::Command::new("unshare")
            .args(["--net", "sh", "-c", &script])
            .output()
            .unwrap();
        if !out.status.success() && std::env::var_os("CI").is_none() {
            eprintln!("SKIP: unshare --net refused (not root?): {}", stderr(&out));
            return;
        }
        assert!(out.status.success(), "{}", stderr(&out));
        let shown = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert_eq!(shown, render(&parse(given).unwrap()), "{given}");
    }
}
