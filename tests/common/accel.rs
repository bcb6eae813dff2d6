//! A fake accelerated node under a test root: the PCI sysfs files the kernel writes
//! (`drivers/pci/pci-sysfs.c`: `vendor`, `device`, `class`, `numa_node`, `resource`, the `driver`
//! link), the NVIDIA driver's procfs (`kernel-open/nvidia/nv-procfs.c`: `version`,
//! `gpus/<bus id>/information`), EFA devices with their verbs device, Fabric Manager's process,
//! a container runtime, and a stand-in `nvidia-smi` that prints what the test says, in the
//! `--query-gpu … --format=csv,noheader` form, and logs how it was asked.

use std::path::{Path, PathBuf};

/// What the stand-in `nvidia-smi` logs each run's arguments to, under the root.
pub const SMI_LOG: &str = "smi-calls.log";
/// What it prints, under the root (the test rewrites it to change what the driver sees).
pub const SMI_OUT: &str = "smi-answer.csv";

pub struct Node {
    pub root: PathBuf,
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

impl Node {
    pub fn new(root: &Path) -> Node {
        let node = Node {
            root: root.to_path_buf(),
        };
        // A device of another vendor, as every node has.
        node.pci("0000:00:00.0", "0x8086", "0x060000", "0x1237", None);
        node
    }

    fn devices(&self) -> PathBuf {
        self.root.join("sys/bus/pci/devices")
    }

    /// A PCI device with the files every reader needs, bound to `driver`.
    pub fn pci(
        &self,
        address: &str,
        vendor: &str,
        class: &str,
        device: &str,
        driver: Option<&str>,
    ) {
        let d = self.devices().join(address);
        write(&d.join("vendor"), &format!("{vendor}\n"));
        write(&d.join("class"), &format!("{class}\n"));
        write(&d.join("device"), &format!("{device}\n"));
        write(&d.join("numa_node"), "0\n");
        let resource = "0x00000000c2000000 0x00000000c2ffffff 0x0000000000040200\n";
        write(&d.join("resource"), resource);
        if let Some(drv) = driver {
            let target = self.root.join("sys/bus/pci/drivers").join(drv);
            std::fs::create_dir_all(&target).unwrap();
            std::os::unix::fs::symlink(format!("../../../bus/pci/drivers/{drv}"), d.join("driver"))
                .unwrap();
        }
    }

    /// An H100 at `address`, bound to `driver` and, when `probed`, known to the driver.
    pub fn gpu(&self, address: &str, driver: Option<&str>, probed: bool, minor: u32) {
        self.pci(address, "0x10de", "0x030200", "0x2330", driver);
        if probed {
            let info = format!(
                "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 0\nGPU UUID: \t GPU-00000000-0000-0000-0000-00000000000{minor}\nVideo BIOS: \t 96.00.99.00.01\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\nBus Location: \t {address}\nDevice Minor: \t {minor}\nGPU Firmware: \t 580.105.08\nGPU Excluded:\t No\n"
            );
            let dir = self.root.join("proc/driver/nvidia/gpus").join(address);
            write(&dir.join("information"), &info);
        }
    }

    /// `count` H100s, every one bound and probed: their addresses.
    pub fn gpus(&self, count: u32) -> Vec<String> {
        (0..count)
            .map(|i| {
                let a = format!("0000:{:02x}:00.0", 0x53 + i * 0x11);
                self.gpu(&a, Some("nvidia"), true, i);
                a
            })
            .collect()
    }

    /// The open kernel module of `version` loaded.
    pub fn module(&self, version: &str) {
        let text = format!("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {version}  Release Build  (builder@host)  Fri Oct 10 01:48:12 UTC 2025\nGCC version:  gcc version 11.5.0 20240719 (Red Hat 11.5.0-5) (GCC)\n");
        write(&self.root.join("proc/driver/nvidia/version"), &text);
    }

    /// The stand-in nvidia-smi, answering `rows`.
    pub fn smi(&self, rows: &[String]) {
        let bin = self.root.join("usr/bin/nvidia-smi");
        let script = format!(
            "#!/bin/sh\necho \"$@\" >> '{}'\nexec cat '{}'\n",
            self.root.join(SMI_LOG).display(),
            self.root.join(SMI_OUT).display()
        );
        write(&bin, &script);
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        self.answer(rows);
    }

    /// What nvidia-smi prints from now on.
    pub fn answer(&self, rows: &[String]) {
        let tmp = self.root.join(format!("{SMI_OUT}.tmp"));
        std::fs::write(
            &tmp,
            rows.iter().map(|r| format!("{r}\n")).collect::<String>(),
        )
        .unwrap();
        std::fs::rename(tmp, self.root.join(SMI_OUT)).unwrap();
    }

    /// How nvidia-smi was asked, one line per run.
    pub fn smi_calls(&self) -> Vec<String> {
        let text = std::fs::read_to_string(self.root.join(SMI_LOG)).unwrap_or_default();
        text.lines().map(String::from).collect()
    }

    /// An NVSwitch (an HGX board's, on the host's PCI bus), bound to its driver.
    pub fn nvswitch(&self, address: &str) {
        let driver = Some("nvidia-nvswitch");
        self.pci(address, "0x10de", "0x068000", "0x22a3", driver);
    }

    /// The container runtime for GPUs the image installs.
    pub fn runtime(&self) {
        write(&self.root.join("usr/bin/nvidia-container-runtime"), "");
    }

    /// Fabric Manager running as the kernel shows a process: `comm` cut to 15 bytes
    /// (TASK_COMM_LEN), the whole argv in `cmdline`, NUL-separated (the package's binary,
    /// `/usr/bin/nv-fabricmanager`, and the unit's `-c` option).
    pub fn fabric_manager(&self) {
        write(&self.root.join("proc/4242/comm"), "nv-fabricmanage\n");
        let argv = "/usr/bin/nv-fabricmanager\0-c\0/usr/share/nvidia/nvswitch/fabricmanager.cfg\0";
        write(&self.root.join("proc/4242/cmdline"), argv);
        // A process whose name merely starts alike is not it.
        write(&self.root.join("proc/4243/comm"), "nv-fabricmanage\n");
        write(
            &self.root.join("proc/4243/cmdline"),
            "/opt/nv-fabricmanage-probe\0",
        );
    }

    /// An EFA device bound to `efa` with its verbs device, at `address`.
    pub fn efa(&self, address: &str, verbs: u32) {
        self.pci(address, "0x1d0f", "0x020000", "0xefa1", Some("efa"));
        let d = self.devices().join(address);
        std::fs::create_dir_all(d.join(format!("infiniband_verbs/uverbs{verbs}"))).unwrap();
        std::fs::create_dir_all(d.join(format!("infiniband/rdmap{verbs}s26"))).unwrap();
    }
}

/// A healthy row of `nvidia-smi --query-gpu` for the GPU at `address` (as sysfs writes it).
pub fn row(address: &str, version: &str, fabric: (&str, &str)) -> String {
    let smi = format!("0000{}", address.to_uppercase());
    format!(
        "{smi}, Enabled, {version}, Disabled, {}, {}",
        fabric.0, fabric.1
    )
}
