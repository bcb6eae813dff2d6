//! Accelerator readiness before the kubelet starts (docs/accelerators.md): the GPUs and EFA
//! devices the instance type carries are there and usable, read under `--root` in the formats
//! the kernel and NVIDIA's driver write them, polled until ready or the check's budget ends:
//!
//! - PCI GPUs (vendor `0x10de`, VGA or 3D class) as many as the type carries, each bound to
//!   `nvidia` with its `/proc/driver/nvidia/gpus/<bus id>/`;
//! - the kernel module's version (`/proc/driver/nvidia/version`) is `nvidia-smi`'s, which sees
//!   every GPU, persistence on, MIG as configured; where a GPU has a fabric (NVSwitch types),
//!   Fabric Manager running and every GPU's fabric `Completed` with `Success`;
//! - a runtime for them: nvidia-container-runtime, or a CDI spec of `nvidia.com/gpu`;
//! - EFA devices (vendor `0x1d0f`) as many as the instance's attached EFA interfaces
//!   (DescribeInstances: `efa`, `efa-only`), each bound to `efa` with its verbs device.
//!
//! A GPU or EFA device missing or unbound, or a fabric error, is the instance's own fault
//! ([`Probe::own_fault`]); no driver, a version mismatch, persistence off or no runtime is the
//! image's. With the GPU operator's driver container the host driver is not checked.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::check::{Env, Outcome, Probe, Stop};
use super::Cause;
use crate::base::text::printable;
use crate::os::fsutil::under;

/// How often the devices are read again while they are not ready.
const POLL: Duration = Duration::from_secs(1);
/// How long one `nvidia-smi` may take.
const SMI_TIMEOUT: Duration = Duration::from_secs(30);

/// Where EC2 is asked for the instance's attached EFA interfaces.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AskEc2 {
    pub region: String,
    pub instance_id: String,
    #[serde(default, skip_serializing_if = "crate::aws::Endpoints::is_default")]
    pub endpoints: crate::aws::Endpoints,
}

/// The check, as the plan holds it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Accelerators {
    pub instance_type: String,
    /// NVIDIA GPUs on PCI (the accelerator table).
    pub gpus: u32,
    /// EFA devices expected (the config's); else asked of EC2 (`ask`), else none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efa: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask: Option<AskEc2>,
    /// The GPU operator's driver container manages the driver: the host's is not checked.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub operator_driver: bool,
    /// MIG mode as configured (`None`: not checked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig: Option<bool>,
    /// `nvidia-smi`, by node path.
    pub nvidia_smi: String,
}

impl Accelerators {
    pub const KIND: &'static str = "accelerators";
}

/// This module's probe, for a job.
pub const LOADERS: [(&str, super::check::Loader); 1] =
    [(Accelerators::KIND, super::check::load_as::<Accelerators>)];

/// What one look at the node found.
enum Look {
    Ready(String),
    /// Not yet (a device late, a fabric training); at the budget's end, the failure.
    Waiting(Cause),
    /// A fault that waiting does not mend.
    Fault(Cause),
}

/// A PCI device: its address and the driver bound to it.
#[derive(Debug, Clone, PartialEq)]
pub struct Pci {
    pub address: String,
    pub driver: Option<String>,
}

/// The PCI devices of `vendor` whose class starts with one of `classes` (none: any), by
/// address (`/sys/bus/pci/devices`, each `vendor`, `class`, `device` and the `driver` link).
pub fn pci(root: &Path, vendor: &str, classes: &[&str], device: &str) -> Vec<Pci> {
    let dir = under(root, "/sys/bus/pci/devices");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let read = |p: &Path, f: &str| std::fs::read_to_string(p.join(f)).unwrap_or_default();
    let mut out: Vec<Pci> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let p = e.path();
            (read(&p, "vendor").trim() == vendor).then_some(())?;
            let class = read(&p, "class");
            let class_ok = classes.is_empty() || classes.iter().any(|c| class.starts_with(c));
            let device_ok = read(&p, "device").trim().starts_with(device);
            (class_ok && device_ok).then_some(())?;
            let driver = std::fs::read_link(p.join("driver")).ok();
            Some(Pci {
                address: e.file_name().to_string_lossy().to_string(),
                driver: driver.and_then(|d| Some(d.file_name()?.to_string_lossy().to_string())),
            })
        })
        .collect();
    out.sort_by(|a, b| a.address.cmp(&b.address));
    out
}

/// NVIDIA's GPUs: VGA (`0x0300`) and 3D (`0x0302`) controllers.
pub fn gpus(root: &Path) -> Vec<Pci> {
    pci(root, "0x10de", &["0x0300", "0x0302"], "")
}

/// EFA devices: Amazon's `0xefa?`.
pub fn efa_devices(root: &Path) -> Vec<Pci> {
    pci(root, "0x1d0f", &[], "0xefa")
}

/// The driver version in `/proc/driver/nvidia/version`'s first line: its first word shaped
/// like one (`580.105.08`), open or proprietary module alike.
pub fn kernel_version(text: &str) -> Option<String> {
    let line = text.lines().next()?.strip_prefix("NVRM version:")?;
    line.split_whitespace()
        .find(|w| {
            let parts: Vec<&str> = w.split('.').collect();
            parts.len() >= 2
                && parts
                    .iter()
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(String::from)
}

/// A PCI address as sysfs writes it (`0000:53:00.0`), from nvidia-smi's (`00000000:53:00.0`).
pub fn bus_id(smi: &str) -> Option<String> {
    let (domain, rest) = smi.trim().split_once(':')?;
    let (bus, rest) = rest.split_once(':')?;
    let (slot, func) = rest.split_once('.')?;
    let n = |s: &str| u32::from_str_radix(s, 16).ok();
    Some(format!(
        "{:04x}:{:02x}:{:02x}.{:x}",
        n(domain)?,
        n(bus)?,
        n(slot)?,
        n(func)?
    ))
}

/// One GPU as `nvidia-smi --query-gpu` reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct SmiGpu {
    pub bus_id: String,
    pub persistence: String,
    pub driver_version: String,
    pub mig: String,
    pub fabric_state: String,
    pub fabric_status: String,
}

/// The fields asked, in order (each documented by `nvidia-smi --help-query-gpu`).
pub const QUERY: &str =
    "pci.bus_id,persistence_mode,driver_version,mig.mode.current,fabric.state,fabric.status";

/// `--format=csv,noheader` rows (`, ` between values).
pub fn smi_rows(text: &str) -> Result<Vec<SmiGpu>, String> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Vec<&str> = line.split(',').map(str::trim).collect();
        let [bus, persistence, driver, mig, state, status] = v[..] else {
            return Err(format!("an unexpected line: `{}`", printable(line)));
        };
        out.push(SmiGpu {
            bus_id: bus_id(bus).ok_or_else(|| format!("no bus id in `{}`", printable(line)))?,
            persistence: persistence.into(),
            driver_version: driver.into(),
            mig: mig.into(),
            fabric_state: unlabelled(state, "state").into(),
            fabric_status: unlabelled(status, "status").into(),
        });
    }
    Ok(out)
}

/// A fabric value without the field's name some drivers print before it in CSV (GB200 on
/// 570 and 580: `state  Completed`, `status Success`; others print `Completed`, `Success`).
fn unlabelled<'a>(value: &'a str, label: &str) -> &'a str {
    match value.strip_prefix(label) {
        Some(rest) if rest.starts_with(char::is_whitespace) => rest.trim(),
        _ => value,
    }
}

/// Whether a process of the program `name` runs: the base name of its first argument
/// (`/proc/<pid>/cmdline`, NUL-separated). Not `comm`, which the kernel cuts to 15 bytes
/// (`nv-fabricmanager` shows as `nv-fabricmanage`).
fn running(root: &Path, name: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(under(root, "/proc")) else {
        return false;
    };
    entries.filter_map(Result::ok).any(|e| {
        let pid = e
            .file_name()
            .to_string_lossy()
            .bytes()
            .all(|b| b.is_ascii_digit());
        let argv = pid
            .then(|| std::fs::read(e.path().join("cmdline")).ok())
            .flatten();
        let Some(argv) = argv else {
            return false;
        };
        let first = argv.split(|b| *b == 0).next().unwrap_or_default();
        let base = first.rsplit(|b| *b == b'/').next().unwrap_or_default();
        base == name.as_bytes()
    })
}

fn cause(code: &'static str, detail: String, todo: &str) -> Cause {
    Cause::advised(code, detail, todo)
}

/// The PCI GPUs as the type carries them, each bound to `nvidia` with its driver directory.
fn look_pci(root: &Path, want: u32, operator: bool) -> Result<Vec<Pci>, Look> {
    let found = gpus(root);
    if (found.len() as u64) < u64::from(want) {
        return Err(Look::Waiting(cause("gpu-missing", format!("{} NVIDIA GPU(s) on PCI of the {want} the instance type carries ({})", found.len(), addresses(&found)), "a GPU the type carries is not on the bus (fallen off, or never there): the instance's own hardware; a replacement gets other GPUs")));
    }
    if operator {
        return Ok(found);
    }
    // No GPU bound at all: the image loads no driver for them (or nouveau takes them), which
    // every instance of the image meets; one GPU left unbound beside bound ones is this one's.
    if !found.is_empty() && !found.iter().any(|g| g.driver.as_deref() == Some("nvidia")) {
        return Err(Look::Waiting(cause("driver-absent", format!("none of the {} GPU(s) is bound to nvidia ({})", found.len(), drivers(&found)), "the image loads no NVIDIA driver for these GPUs, or another driver (nouveau) takes them: the image's, which every instance meets; see `journalctl -u nvidia-kmod-load`")));
    }
    for g in &found {
        if g.driver.as_deref() != Some("nvidia") {
            let d = g.driver.as_deref().map_or("no driver".to_string(), |d| {
                format!("driver `{}`", printable(d))
            });
            return Err(Look::Waiting(cause("gpu-unbound", format!("GPU {} has {d}, not nvidia", g.address), "the driver did not take this GPU (see `dmesg` for NVRM lines): the instance's own, when the others are bound")));
        }
        let dir = under(root, format!("/proc/driver/nvidia/gpus/{}", g.address));
        if !dir.is_dir() {
            return Err(Look::Waiting(cause("gpu-unbound", format!("GPU {} is bound to nvidia but the driver has no /proc/driver/nvidia/gpus/{} (not probed)", g.address, g.address), "the driver did not probe this GPU (see `dmesg` for NVRM lines)")));
        }
    }
    Ok(found)
}

/// Each device's driver, as `0000:ca:00.0: none`.
fn drivers(p: &[Pci]) -> String {
    let each = p.iter().map(|g| {
        let d = g.driver.as_deref().map_or("none".into(), printable);
        format!("{}: {d}", g.address)
    });
    each.collect::<Vec<_>>().join(", ")
}

fn addresses(p: &[Pci]) -> String {
    match p.is_empty() {
        true => "none".into(),
        false => p
            .iter()
            .map(|g| g.address.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// `nvidia-smi` run under the root: its rows, or why not.
async fn smi(root: &Path, program: &str) -> Result<Vec<SmiGpu>, (bool, String)> {
    let path = under(root, program);
    let run = tokio::process::Command::new(&path)
        .arg(format!("--query-gpu={QUERY}"))
        .arg("--format=csv,noheader")
        .kill_on_drop(true)
        .output();
    let out = match tokio::time::timeout(SMI_TIMEOUT, run).await {
        Ok(Ok(o)) => o,
        Ok(Err(e)) => return Err((false, format!("{} cannot run: {e}", path.display()))),
        Err(_) => {
            return Err((
                false,
                format!("{program} did not answer within {SMI_TIMEOUT:?}"),
            ))
        }
    };
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    if !out.status.success() {
        let said = format!("{text}{}", String::from_utf8_lossy(&out.stderr));
        let mismatch = said.contains("version mismatch");
        return Err((
            mismatch,
            format!(
                "{program} failed ({}): {}",
                out.status,
                printable(said.trim())
            ),
        ));
    }
    smi_rows(&text).map_err(|e| (false, format!("{program}: {e}")))
}

/// The host driver: its version is `nvidia-smi`'s, which sees every PCI GPU, persistence on,
/// MIG as configured, fabrics trained.
async fn look_driver(a: &Accelerators, root: &Path, pci: &[Pci]) -> Result<String, Look> {
    let text = std::fs::read_to_string(under(root, "/proc/driver/nvidia/version")).ok();
    let Some(kernel) = text.as_deref().and_then(kernel_version) else {
        return Err(Look::Waiting(cause("driver-absent", "no NVIDIA kernel module loaded (/proc/driver/nvidia/version absent or unreadable)".into(), "the image loads no driver for this GPU (on the EKS NVIDIA AMI, see `journalctl -u nvidia-kmod-load`): the image's, which every instance meets")));
    };
    let rows = match smi(root, &a.nvidia_smi).await {
        Ok(r) => r,
        Err((true, why)) => return Err(Look::Fault(cause("driver-mismatch", why, "the kernel module and the user-space driver differ: the image's; rebuild it with one driver version"))),
        Err((false, why)) => return Err(Look::Waiting(cause("nvidia-smi", why, "nvidia-smi must run on the node: the image's driver packages")))
    };
    if let Some(r) = rows.iter().find(|r| r.driver_version != kernel) {
        return Err(Look::Fault(cause("driver-mismatch", format!("the kernel module is {kernel}, nvidia-smi's driver {}", printable(&r.driver_version)), "the kernel module and the user-space driver differ: the image's; rebuild it with one driver version")));
    }
    let seen: Vec<&str> = rows.iter().map(|r| r.bus_id.as_str()).collect();
    if let Some(g) = pci.iter().find(|g| !seen.contains(&g.address.as_str())) {
        return Err(Look::Waiting(cause(
            "gpu-missing",
            format!(
                "nvidia-smi sees {} GPU(s), not GPU {} of the {} on PCI",
                rows.len(),
                g.address,
                pci.len()
            ),
            "the driver lost a GPU it probed (an Xid 79 in `dmesg`): the instance's own hardware",
        )));
    }
    if let Some(r) = rows.iter().find(|r| r.persistence != "Enabled") {
        return Err(Look::Waiting(cause("persistence-off", format!("GPU {} has persistence mode {}", r.bus_id, printable(&r.persistence)), "nvidia-persistenced keeps the driver ready between jobs: enable nvidia-persistenced.service in the image")));
    }
    if let Some(want) = a.mig {
        let word = if want { "Enabled" } else { "Disabled" };
        // A GPU without MIG says `[N/A]`: it is as disabled as MIG gets.
        let is = |r: &SmiGpu| r.mig == word || (!want && r.mig.contains("N/A"));
        if let Some(r) = rows.iter().find(|r| !is(r)) {
            return Err(Look::Fault(cause("mig-mode", format!("GPU {} has MIG mode {}, not {word} as configured", r.bus_id, printable(&r.mig)), "apply the MIG mode before the kubelet starts (nvidia-mig-parted from the image or user data), or change verify.accelerators.mig")));
        }
    }
    look_fabric(root, &rows)?;
    Ok(format!(
        "{} GPU(s) bound to nvidia {kernel}, persistence on",
        rows.len()
    ))
}

/// Where a GPU has a fabric: Fabric Manager running, every fabric `Completed` with `Success`.
fn look_fabric(root: &Path, rows: &[SmiGpu]) -> Result<(), Look> {
    let fabric: Vec<&SmiGpu> = rows
        .iter()
        .filter(|r| !r.fabric_state.contains("N/A"))
        .collect();
    if fabric.is_empty() {
        return Ok(());
    }
    if let Some(r) = fabric
        .iter()
        .find(|r| r.fabric_state == "Completed" && r.fabric_status != "Success")
    {
        return Err(Look::Fault(cause("fabric-error", format!("GPU {}'s fabric completed with {}", r.bus_id, printable(&r.fabric_status)), "a fabric error stays across reboots: the instance's own; a replacement gets another fabric")));
    }
    if !running(root, "nv-fabricmanager") {
        return Err(Look::Waiting(cause("fabric-manager", "the GPUs have a fabric (NVSwitch) and no nv-fabricmanager runs".into(), "enable nvidia-fabricmanager.service in the image (its driver version must be the kernel module's)")));
    }
    if let Some(r) = fabric.iter().find(|r| r.fabric_state != "Completed") {
        return Err(Look::Waiting(cause("fabric-in-progress", format!("GPU {}'s fabric is {}", r.bus_id, printable(&r.fabric_state)), "Fabric Manager trains the NVSwitch fabric at boot (CUDA fails with error 802 until it is done); see `journalctl -u nvidia-fabricmanager`")));
    }
    Ok(())
}

/// A runtime that hands GPUs to containers: nvidia-container-runtime, or a CDI spec.
fn look_runtime(root: &Path) -> Result<&'static str, Look> {
    if under(root, "/usr/bin/nvidia-container-runtime").is_file() {
        return Ok("nvidia-container-runtime");
    }
    for dir in ["/etc/cdi", "/var/run/cdi"] {
        let Ok(entries) = std::fs::read_dir(under(root, dir)) else {
            continue;
        };
        let spec = entries
            .filter_map(Result::ok)
            .any(|e| std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains("nvidia.com/gpu")));
        if spec {
            return Ok("a CDI spec of nvidia.com/gpu");
        }
    }
    Err(Look::Waiting(cause("runtime-absent", "neither /usr/bin/nvidia-container-runtime nor a CDI spec of nvidia.com/gpu in /etc/cdi or /var/run/cdi".into(), "install nvidia-container-toolkit in the image (nvidia-ctk cdi generate writes the spec)")))
}

/// EFA devices as many as expected, each bound to `efa` with its verbs device.
fn look_efa(root: &Path, want: u32) -> Result<String, Look> {
    let found = efa_devices(root);
    if (found.len() as u64) < u64::from(want) {
        return Err(Look::Waiting(cause("efa-missing", format!("{} EFA device(s) on PCI of the {want} attached EFA interfaces ({})", found.len(), addresses(&found)), "an attached EFA is not on the bus (some types bring theirs up late): the instance's own; a replacement gets other devices")));
    }
    for d in &found {
        if d.driver.as_deref() != Some("efa") {
            return Err(Look::Waiting(cause(
                "efa-unbound",
                format!("EFA {} is not bound to the efa driver", d.address),
                "load the efa kernel module in the image (the EFA installer's)",
            )));
        }
        let verbs = under(
            root,
            format!("/sys/bus/pci/devices/{}/infiniband_verbs", d.address),
        );
        let has = std::fs::read_dir(verbs).is_ok_and(|mut e| {
            e.any(|x| x.is_ok_and(|x| x.file_name().to_string_lossy().starts_with("uverbs")))
        });
        if !has {
            return Err(Look::Waiting(cause(
                "efa-unbound",
                format!(
                    "EFA {} has no verbs device (infiniband_verbs/uverbs*)",
                    d.address
                ),
                "load ib_uverbs in the image (the EFA installer's)",
            )));
        }
    }
    Ok(format!("{} EFA device(s) bound to efa", found.len()))
}

/// The attached EFA interfaces, as expected: the config's, else EC2's; `None`: not known
/// (EC2 did not answer), with why.
async fn efa_wanted(a: &Accelerators, deadline: tokio::time::Instant) -> Result<u32, String> {
    if let Some(n) = a.efa {
        return Ok(n);
    }
    let Some(ask) = &a.ask else {
        return Ok(0);
    };
    let t = crate::aws::Transport::from_env(ask.endpoints.clone());
    let mut ec2 = crate::aws::ec2::Ec2::new(&ask.region, None, t.as_ref()).await;
    let policy = crate::base::retry::RetryPolicy::default();
    let d = ec2.describe_self(&ask.instance_id, policy, deadline).await;
    let d = d.map_err(|e| format!("DescribeInstances: {e}"))?;
    let efa = d
        .interface_types
        .iter()
        .filter(|t| matches!(t.as_str(), "efa" | "efa-only"));
    Ok(efa.count() as u32)
}

/// One look at the node.
async fn look(a: &Accelerators, root: &Path, efa: u32) -> Look {
    let mut said = Vec::new();
    if a.gpus > 0 {
        let pci = match look_pci(root, a.gpus, a.operator_driver) {
            Ok(p) => p,
            Err(l) => return l,
        };
        match a.operator_driver {
            true => said.push(format!(
                "{} of {} GPU(s) on PCI (the GPU operator's driver is not checked)",
                pci.len(),
                a.gpus
            )),
            false => {
                match look_driver(a, root, &pci).await {
                    Ok(s) => said.push(s),
                    Err(l) => return l,
                }
                match look_runtime(root) {
                    Ok(r) => said.push(format!("runtime: {r}")),
                    Err(l) => return l,
                }
            }
        }
    }
    if efa > 0 {
        match look_efa(root, efa) {
            Ok(s) => said.push(s),
            Err(l) => return l,
        }
    }
    Look::Ready(said.join("; "))
}

impl Probe for Accelerators {
    fn kind(&self) -> &'static str {
        Self::KIND
    }
    fn describe(&self) -> String {
        format!("accelerators of {}", self.instance_type)
    }
    fn fields(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
    fn own_fault(&self, code: &str) -> bool {
        matches!(
            code,
            "gpu-missing" | "gpu-unbound" | "fabric-error" | "efa-missing"
        )
    }
    fn run<'a>(&'a self, env: &'a Env) -> Outcome<'a> {
        Box::pin(async move {
            let (efa, efa_note) = match efa_wanted(self, env.deadline).await {
                Ok(n) => (n, None),
                Err(why) => (0, Some(format!("EFA not checked: {why}"))),
            };
            loop {
                let last = match look(self, &env.root, efa).await {
                    Look::Ready(s) => {
                        let s = [Some(s), efa_note].into_iter().flatten();
                        return Ok(s.collect::<Vec<_>>().join("; ").into());
                    }
                    Look::Fault(c) => return Err(Stop::Failed(c)),
                    Look::Waiting(c) => c,
                };
                if tokio::time::Instant::now() + POLL >= env.deadline {
                    return Err(Stop::Failed(last));
                }
                tokio::time::sleep(POLL).await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fabric_manager_is_found_by_its_program_as_the_kernel_lists_it() {
        // A real process of that program's name, as this host's kernel shows it.
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("nv-fabricmanager");
        std::fs::copy("/bin/sleep", &program).unwrap();
        let mut child = std::process::Command::new(&program)
            .arg("5")
            .spawn()
            .unwrap();
        // spawn returns once the exec has begun; the kernel names the task a
        // moment later, so wait (bounded) for the name to leave the parent's.
        let path = format!("/proc/{}/comm", child.id());
        let parent = std::fs::read_to_string("/proc/thread-self/comm").unwrap();
        let mut comm = std::fs::read_to_string(&path).unwrap();
        for _ in 0..500 {
            if comm != parent {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
            comm = std::fs::read_to_string(&path).unwrap();
        }
        let found = running(Path::new("/"), "nv-fabricmanager");
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(
            comm.trim(),
            "nv-fabricmanage",
            "the kernel cuts comm to 15 bytes"
        );
        assert!(found);
        assert!(!running(Path::new("/"), "nv-fabricmanage"));
    }

    #[test]
    fn the_driver_version_is_read_from_either_modules_line() {
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.105.08  Release Build  (dvs-builder@U22-I3-AF03-09-1)  Fri Oct 10 01:48:12 UTC 2025\nGCC version:  gcc version 11.5.0 (GCC)\n";
        assert_eq!(kernel_version(open).as_deref(), Some("580.105.08"));
        let proprietary = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.135  Wed Nov 20 00:46:11 UTC 2024\n";
        assert_eq!(kernel_version(proprietary).as_deref(), Some("550.135"));
        assert_eq!(kernel_version("GCC version: 11.5.0\n"), None);
        assert_eq!(kernel_version(""), None);
    }

    #[test]
    fn nvidia_smis_rows_read_with_their_bus_ids_as_sysfs_writes_them() {
        let text = "00000000:53:00.0, Enabled, 580.105.08, Disabled, Completed, Success\n00000008:A8:00.0, Disabled, 595.80, [N/A], N/A, N/A\n";
        let rows = smi_rows(text).unwrap();
        assert_eq!(rows[0].bus_id, "0000:53:00.0");
        assert_eq!(rows[1].bus_id, "0008:a8:00.0");
        assert_eq!(
            (rows[1].mig.as_str(), rows[1].fabric_state.as_str()),
            ("[N/A]", "N/A")
        );
        assert!(smi_rows("garbage\n").is_err());
        assert!(smi_rows("x, Enabled, 1, Disabled, N/A, N/A\n").is_err());
        assert_eq!(bus_id("0000:0A:00.0").as_deref(), Some("0000:0a:00.0"));
        // GB200 on 570/580 names the field before the value.
        let gb200 =
            "00000008:01:00.0, Enabled, 570.158.01, [N/A], state  Completed, status Success\n";
        let r = &smi_rows(gb200).unwrap()[0];
        assert_eq!(
            (r.fabric_state.as_str(), r.fabric_status.as_str()),
            ("Completed", "Success")
        );
        assert_eq!(unlabelled("Statusless", "status"), "Statusless");
    }
}
