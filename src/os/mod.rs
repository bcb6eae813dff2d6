//! The operating system, under `--root`: files written atomically (`fsutil`), kernel values
//! (`procsys`), systemd over D-Bus (`systemd`), the run lock and the per-boot hand-off marker.

pub mod ctr;
pub mod fsutil;
pub mod lock;
pub mod marker;
pub(crate) mod procsys;
pub mod sysctl_d;
pub mod systemd;
