//! The accelerator check over fake accelerated nodes (tests/common/accel.rs): the files the
//! kernel and NVIDIA's driver write, a stand-in nvidia-smi, read under the root as on a node;
//! each case's cause and whose fault it is. The upstream reader go-nvlib's `nvpci` reads the
//! same trees as an oracle (`make control-plane` builds it).

use std::time::Duration;

use eks_nodeinit::verify::accelerators::{self, Accelerators};
use eks_nodeinit::verify::check::run;
use eks_nodeinit::verify::{Check, CheckResult, Verdict};

use crate::common::accel::{row, Node};

const V: &str = "580.105.08";
const DONE: (&str, &str) = ("Completed", "Success");
const NONE: (&str, &str) = ("N/A", "N/A");

fn probe(gpus: u32, efa: Option<u32>) -> Accelerators {
    Accelerators {
        instance_type: "p5.48xlarge".into(),
        gpus,
        efa,
        ask: None,
        operator_driver: false,
        mig: None,
        nvidia_smi: "/usr/bin/nvidia-smi".into(),
    }
}

/// A node of `gpus` H100s, the driver loaded, nvidia-smi answering with `fabric`.
fn node(gpus: u32, fabric: (&str, &str)) -> (tempfile::TempDir, Node, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let n = Node::new(dir.path());
    let addrs = n.gpus(gpus);
    n.module(V);
    n.smi(&addrs.iter().map(|a| row(a, V, fabric)).collect::<Vec<_>>());
    n.runtime();
    n.fabric_manager();
    (dir, n, addrs)
}

fn check(p: Accelerators, n: &Node, budget: Duration) -> CheckResult {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let r = rt.block_on(run(&[Check::new(p)], budget, n.root.clone()));
    r.into_iter().next().unwrap()
}

fn failed(r: &CheckResult, cause: &str, own: bool) {
    assert_eq!(
        (r.result, r.cause.as_deref(), r.own_fault),
        (Verdict::Failed, Some(cause), own),
        "{r:?}"
    );
}

#[test]
fn eight_of_eight_gpus_bound_probed_and_trained_pass_asking_nvidia_smi_as_documented() {
    let (_d, n, _) = node(8, DONE);
    let r = check(probe(8, None), &n, Duration::from_secs(5));
    assert_eq!(r.result, Verdict::Passed, "{r:?}");
    assert!(
        r.detail
            .starts_with(&format!("8 GPU(s) bound to nvidia {V}")),
        "{}",
        r.detail
    );
    assert_eq!(
        n.smi_calls(),
        ["--query-gpu=pci.bus_id,persistence_mode,driver_version,mig.mode.current,fabric.state,fabric.status --format=csv,noheader"]
    );
}

#[test]
fn seven_of_eight_gpus_is_the_instances_own_fault_after_the_wait() {
    let (_d, n, _) = node(7, DONE);
    let r = check(probe(8, None), &n, Duration::from_secs(2));
    failed(&r, "gpu-missing", true);
    assert!(
        r.detail.starts_with("7 NVIDIA GPU(s) on PCI of the 8"),
        "{}",
        r.detail
    );
    // Read again while it waited, never asking nvidia-smi without the GPUs.
    assert!(n.smi_calls().is_empty());
}

#[test]
fn a_gpu_the_driver_did_not_take_is_the_instances_own() {
    let (_d, n, addrs) = node(1, NONE);
    n.gpu("0000:ca:00.0", None, false, 1);
    let r = check(probe(2, None), &n, Duration::from_secs(2));
    failed(&r, "gpu-unbound", true);
    assert!(
        r.detail.contains("0000:ca:00.0 has no driver"),
        "{}",
        r.detail
    );
    // Bound, but never probed: no directory of the driver's.
    let dir = tempfile::tempdir().unwrap();
    let m = Node::new(dir.path());
    m.gpu(&addrs[0], Some("nvidia"), false, 0);
    m.module(V);
    let r = check(probe(1, None), &m, Duration::from_secs(2));
    failed(&r, "gpu-unbound", true);
    assert!(r.detail.contains("not probed"), "{}", r.detail);
}

#[test]
fn a_fabric_in_training_is_waited_for_until_it_completes() {
    let (_d, n, addrs) = node(2, ("In Progress", "N/A"));
    let later: Vec<String> = addrs.iter().map(|a| row(a, V, DONE)).collect();
    let root = n.root.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        Node { root }.answer(&later);
    });
    let r = check(probe(2, None), &n, Duration::from_secs(8));
    t.join().unwrap();
    assert_eq!(r.result, Verdict::Passed, "{r:?}");
    assert!(n.smi_calls().len() >= 2, "{:?}", n.smi_calls());
    // Still training when the wait ends: the cause says so.
    let (_d, n, _) = node(2, ("In Progress", "N/A"));
    failed(
        &check(probe(2, None), &n, Duration::from_secs(2)),
        "fabric-in-progress",
        false,
    );
}

#[test]
fn a_fabric_completed_in_error_fails_at_once_the_instances_own() {
    let (_d, n, _) = node(2, ("Completed", "Failure"));
    let start = std::time::Instant::now();
    let r = check(probe(2, None), &n, Duration::from_secs(20));
    failed(&r, "fabric-error", true);
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(n.smi_calls().len(), 1);
}

#[test]
fn a_kernel_module_other_than_nvidia_smis_driver_is_the_images() {
    let (_d, n, addrs) = node(2, NONE);
    n.answer(
        &addrs
            .iter()
            .map(|a| row(a, "580.95.05", NONE))
            .collect::<Vec<_>>(),
    );
    let r = check(probe(2, None), &n, Duration::from_secs(20));
    failed(&r, "driver-mismatch", false);
    assert!(
        r.detail.contains("580.105.08") && r.detail.contains("580.95.05"),
        "{}",
        r.detail
    );
    // No kernel module's version to read: the image's too.
    let dir = tempfile::tempdir().unwrap();
    let m = Node::new(dir.path());
    m.gpus(1);
    let r = check(probe(1, None), &m, Duration::from_secs(2));
    failed(&r, "driver-absent", false);
}

#[test]
fn efa_missing_is_the_instances_own_and_a_late_one_is_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let n = Node::new(dir.path());
    n.efa("0000:19:00.0", 0);
    let r = check(probe(0, Some(2)), &n, Duration::from_secs(2));
    failed(&r, "efa-missing", true);
    assert!(
        r.detail.starts_with("1 EFA device(s) on PCI of the 2"),
        "{}",
        r.detail
    );
    let root = n.root.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        Node { root }.efa("0000:1a:00.0", 1);
    });
    let r = check(probe(0, Some(2)), &n, Duration::from_secs(8));
    t.join().unwrap();
    assert_eq!(
        (r.result, r.detail.as_str()),
        (Verdict::Passed, "2 EFA device(s) bound to efa"),
        "{r:?}"
    );
}

#[test]
fn the_gpu_operators_driver_is_not_looked_for_on_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let n = Node::new(dir.path());
    for (i, a) in ["0000:53:00.0", "0000:64:00.0"].iter().enumerate() {
        n.gpu(a, None, false, i as u32);
    }
    let mut p = probe(2, None);
    p.operator_driver = true;
    let r = check(p.clone(), &n, Duration::from_secs(2));
    assert_eq!(r.result, Verdict::Passed, "{r:?}");
    assert!(
        r.detail
            .contains("the GPU operator's driver is not checked"),
        "{}",
        r.detail
    );
    // It still counts them.
    p.gpus = 3;
    failed(&check(p, &n, Duration::from_secs(2)), "gpu-missing", true);
}

#[test]
fn the_agent_counts_gpus_and_efa_as_the_kernel_lists_them() {
    let (_d, n, addrs) = node(3, NONE);
    n.efa("0000:19:00.0", 0);
    // An NVSwitch is no GPU.
    n.nvswitch("0000:05:00.0");
    let gpus = accelerators::gpus(&n.root);
    let found: Vec<&str> = gpus.iter().map(|g| g.address.as_str()).collect();
    assert_eq!(found, addrs.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(accelerators::efa_devices(&n.root).len(), 1);
}

/// go-nvlib's `nvpci` (NVIDIA's own reader of these files, built by `make control-plane`) on
/// the same tree as the agent: the same GPUs.
#[test]
#[ignore = "go-nvlib's nvpci: make control-plane builds it"]
fn nvidias_own_reader_counts_the_gpus_the_agent_counts() {
    let oracle = crate::common::control_plane::peers_bin().join("nvpci-oracle");
    let missing: &[&str] = match oracle.exists() {
        true => &[],
        false => &["nvpci-oracle (make peers-k8s)"],
    };
    if !crate::common::peers::peer_present(missing) {
        return;
    }
    for gpus in [1, 7, 8] {
        let (_d, n, _) = node(gpus, NONE);
        n.efa("0000:19:00.0", 0);
        n.nvswitch("0000:05:00.0");
        n.gpu("0000:f1:00.0", None, false, 9);
        let out = std::process::Command::new(&oracle)
            .arg(n.root.join("sys/bus/pci/devices"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let said = String::from_utf8_lossy(&out.stdout);
        let first = said.lines().next().unwrap();
        let agent = accelerators::gpus(&n.root);
        assert_eq!(
            first,
            format!("gpus={} nvswitches=1", agent.len()),
            "{said}"
        );
        for g in &agent {
            assert!(said.contains(&format!("gpu {} ", g.address)), "{said}");
        }
    }
}

#[test]
fn no_gpu_bound_is_the_images_missing_driver_never_the_instances() {
    // No driver loaded (or nouveau took them): every instance of the image meets it.
    let dir = tempfile::tempdir().unwrap();
    let n = Node::new(dir.path());
    n.gpu("0000:53:00.0", None, false, 0);
    n.gpu("0000:64:00.0", Some("nouveau"), false, 1);
    let r = check(probe(2, None), &n, Duration::from_secs(2));
    failed(&r, "driver-absent", false);
    assert!(r.detail.contains("0000:64:00.0: nouveau"), "{}", r.detail);
}

#[test]
fn gb200s_labelled_fabric_values_and_a_gpu_without_mig_pass() {
    // nvidia-smi 570/580 on GB200 names the field before the value in CSV.
    let (_d, n, addrs) = node(2, ("state  Completed", "status Success"));
    let r = check(probe(2, None), &n, Duration::from_secs(3));
    assert_eq!(r.result, Verdict::Passed, "{r:?}");
    // `mig: disabled` on GPUs without MIG (`[N/A]`).
    let rows: Vec<String> = addrs
        .iter()
        .map(|a| row(a, V, DONE).replace(", Disabled,", ", [N/A],"))
        .collect();
    n.answer(&rows);
    let p = Accelerators {
        mig: Some(false),
        ..probe(2, None)
    };
    let r = check(p, &n, Duration::from_secs(3));
    assert_eq!(r.result, Verdict::Passed, "{r:?}");
}
