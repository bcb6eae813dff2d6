//! The `host` section checked: huge pages as a count or a share of memory (docs/resources.md).

use crate::base::findings::Findings;
use crate::base::text::printable;
use std::path::{Path, PathBuf};

use crate::base::k8s::milli_value;
use crate::config::{HostSettings, HugepageAmount, SwapSettings};

/// The most 2 MiB pages a count may ask (2 TiB), and the largest share of memory.
const MAX_PAGES: u64 = 1 << 20;
const MAX_SHARE: u64 = 90;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostSpec {
    pub hugepages_2mi: Option<Pages>,
    /// 1 GiB pages the node must have (boot-time only: checked, never set).
    pub hugepages_1gi: Option<u64>,
    pub swap: Option<SwapSpec>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SwapSpec {
    pub size: SwapSize,
    pub path: PathBuf,
    /// `LimitedSwap` or `NoSwap`.
    pub behavior: &'static str,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SwapSize {
    Bytes(u64),
    /// Percent of the node's MemTotal.
    Share(u64),
}

/// mkswap's floor (ten 4 KiB pages) and a ceiling (16 TiB).
const MIN_SWAP: u64 = 40 << 10;
const MAX_SWAP: u64 = 16 << 40;
pub const DEFAULT_SWAP_PATH: &str = "/swapfile";

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pages {
    Count(u64),
    /// Percent of the node's MemTotal.
    Share(u64),
}

pub(crate) fn spec(c: Option<&HostSettings>, f: &mut Findings) -> Option<HostSpec> {
    let c = c?;
    let mut s = c
        .hugepages
        .as_ref()
        .map_or_else(HostSpec::default, |h| hugepages(h, f));
    s.swap = c.swap.as_ref().and_then(|w| swap(w, f));
    Some(s)
}

fn swap(w: &SwapSettings, f: &mut Findings) -> Option<SwapSpec> {
    let before = f.0.len();
    let size = match w.size.strip_suffix('%') {
        Some(p) => match p.parse::<u64>() {
            Ok(p) if (1..=100).contains(&p) => Some(SwapSize::Share(p)),
            _ => None,
        },
        None => milli_value(&w.size)
            .filter(|m| m % 1000 == 0)
            .and_then(|m| u64::try_from(m / 1000).ok())
            .filter(|b| (MIN_SWAP..=MAX_SWAP).contains(b))
            .map(SwapSize::Bytes),
    };
    if size.is_none() {
        f.push("host.swap.size", format!(
            "`{}` is neither a size from 40Ki to 16Ti (such as \"4Gi\") nor a share of memory from 1% to 100% (such as \"25%\")",
            printable(&w.size)
        ));
    }
    let path = w.path.clone().unwrap_or_else(|| DEFAULT_SWAP_PATH.into());
    super::check_node_path("host.swap.path", &path, f);
    if ["/proc", "/sys", "/dev", "/run", "/tmp"]
        .iter()
        .any(|p| path.starts_with(p))
        || path == Path::new("/")
    {
        f.push(
            "host.swap.path",
            format!(
                "{} is not a place for a swap file (a memory or kernel filesystem)",
                printable(&path.to_string_lossy())
            ),
        );
    }
    let behavior = match w.behavior.as_deref() {
        None | Some("LimitedSwap") => "LimitedSwap",
        Some("NoSwap") => "NoSwap",
        Some(b) => {
            f.push("host.swap.behavior", format!("`{}` is not a swap behavior the kubelet knows: LimitedSwap or NoSwap (case-sensitive)", printable(b)));
            "NoSwap"
        }
    };
    let size = size.filter(|_| f.0.len() == before)?;
    Some(SwapSpec {
        size,
        path,
        behavior,
    })
}

fn hugepages(h: &crate::config::HugepagesSettings, f: &mut Findings) -> HostSpec {
    const FIELD: &str = "host.hugepages.2Mi";
    let pages = match &h.pages_2mi {
        None => None,
        Some(HugepageAmount::Count(n)) if *n > MAX_PAGES => {
            f.push(FIELD, format!("{n} pages is more than {MAX_PAGES} (2 TiB)"));
            None
        }
        Some(HugepageAmount::Count(n)) => Some(Pages::Count(*n)),
        Some(HugepageAmount::Share(s)) => match s.strip_suffix('%').map(str::parse::<u64>) {
            Some(Ok(p)) if (1..=MAX_SHARE).contains(&p) => Some(Pages::Share(p)),
            _ => {
                f.push(FIELD, format!(
                    "`{}` is neither a page count nor a share of memory from 1% to {MAX_SHARE}% (such as \"10%\")",
                    printable(s)
                ));
                None
            }
        },
    };
    HostSpec {
        hugepages_2mi: pages,
        hugepages_1gi: h.pages_1gi,
        swap: None,
    }
}
