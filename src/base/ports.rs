//! The kernel's port lists (`net.ipv4.ip_local_reserved_ports`): ports and `a-b` ranges,
//! comma-separated, as `proc_do_large_bitmap` reads them, and written back as it shows them
//! (ascending, consecutive ports as one range), so that a value the agent sets reads back the
//! same and a second run sees nothing to change.

use std::collections::BTreeSet;

/// The ports of a list, or what is wrong with it.
pub fn parse(text: &str) -> Result<BTreeSet<u16>, String> {
    let mut out = BTreeSet::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let port = |s: &str| {
            s.trim().parse::<u16>().map_err(|_| {
                format!(
                    "`{}` is not a port (0 to 65535)",
                    crate::base::text::printable(s)
                )
            })
        };
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (port(a)?, port(b)?),
            None => (port(part)?, port(part)?),
        };
        if a > b {
            return Err(format!("the range `{a}-{b}` runs backwards"));
        }
        out.extend(a..=b);
    }
    Ok(out)
}

/// The list as the kernel shows it: `2703,9808-9809,10249-10250`.
pub fn render(ports: &BTreeSet<u16>) -> String {
    let mut runs: Vec<(u16, u16)> = Vec::new();
    for &p in ports {
        match runs.last_mut() {
            Some((_, end)) if u32::from(*end) + 1 == u32::from(p) => *end = p,
            _ => runs.push((p, p)),
        }
    }
    let run = |(a, b): &(u16, u16)| match a == b {
        true => a.to_string(),
        false => format!("{a}-{b}"),
    };
    runs.iter().map(run).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_read_as_the_kernel_reads_them_and_write_as_it_shows_them() {
        let ami = parse("2703,9808,9809,10249,10250,10256,61678,61679").unwrap();
        assert_eq!(render(&ami), "2703,9808-9809,10249-10250,10256,61678-61679");
        assert_eq!(parse(&render(&ami)).unwrap(), ami);
        let mine = parse(" 30000-30002 ,2703").unwrap();
        let both: BTreeSet<u16> = ami.union(&mine).copied().collect();
        assert_eq!(
            render(&both),
            "2703,9808-9809,10249-10250,10256,30000-30002,61678-61679"
        );
        assert_eq!(parse("").unwrap(), BTreeSet::new());
        assert_eq!(render(&BTreeSet::new()), "");
        assert_eq!(render(&parse("65534-65535,0").unwrap()), "0,65534-65535");
        for bad in ["70000", "a", "5-3", "1-", "-"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
