//! The embedded accelerator table: for each instance type with NVIDIA GPUs or EFA, its NVIDIA
//! GPUs on PCI and its maximum EFA interfaces, from DescribeInstanceTypes' `GpuInfo` and
//! `NetworkInfo.EfaInfo` (`tools/accelerator-table.py` rebuilds `accelerators.tsv`). A type not
//! listed has neither.

const TABLE: &str = include_str!("accelerators.tsv");

/// What an instance type carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Accelerators {
    /// NVIDIA GPUs, each a PCI device of its own (a type sharing one in partitions: 0).
    pub gpus: u32,
    /// The most EFA interfaces it takes (0: no EFA); DescribeInstances says how many are
    /// attached.
    pub max_efa: u32,
}

impl Accelerators {
    /// Whether it carries either.
    pub fn any(&self) -> bool {
        self.gpus > 0 || self.max_efa > 0
    }
}

/// The type's accelerators: none when the table does not list it.
pub fn of(instance_type: &str) -> Accelerators {
    TABLE
        .lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| {
            let mut cells = l.split('\t');
            (cells.next()? == instance_type).then_some(())?;
            let gpus = cells.next()?.parse().ok()?;
            let max_efa = cells.next()?.parse().ok()?;
            Some(Accelerators { gpus, max_efa })
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_parses_sorted_once_and_the_known_types_read_as_ec2_says() {
        let rows: Vec<&str> = TABLE.lines().filter(|l| !l.starts_with('#')).collect();
        assert!(rows.len() > 200, "{}", rows.len());
        let names: Vec<&str> = rows.iter().map(|r| r.split('\t').next().unwrap()).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted, "sorted, each type once");
        for r in &rows {
            let name = r.split('\t').next().unwrap();
            assert!(of(name).any(), "{r}");
        }
        // DescribeInstanceTypes: 8 H100 and 32 EFA; 8 A100 and 4; one T4, no EFA.
        assert_eq!(
            of("p5.48xlarge"),
            Accelerators {
                gpus: 8,
                max_efa: 32
            }
        );
        assert_eq!(
            of("p4d.24xlarge"),
            Accelerators {
                gpus: 8,
                max_efa: 4
            }
        );
        assert_eq!(
            of("g4dn.xlarge"),
            Accelerators {
                gpus: 1,
                max_efa: 0
            }
        );
        assert_eq!(
            of("g6e.12xlarge"),
            Accelerators {
                gpus: 4,
                max_efa: 1
            }
        );
        // EFA without GPUs; a GPU shared in partitions is no PCI device of its own.
        assert_eq!(
            of("c5n.18xlarge"),
            Accelerators {
                gpus: 0,
                max_efa: 1
            }
        );
        assert!(!of("g6f.large").any());
        assert!(!of("m6i.large").any());
        assert!(!of("").any());
    }
}
