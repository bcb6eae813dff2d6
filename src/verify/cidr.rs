//! Config sanity that only shows on the instance: the service CIDR against the VPC's blocks
//! (from IMDS), and the cluster DNS address the hand-off derives against the service CIDR.

use std::net::IpAddr;

use super::net::in_cidr;
use super::Cause;
use crate::spec::cluster::parse_cidr;

/// Whether two blocks share an address: the wider holds the other's network address.
pub fn overlap(a: &str, b: &str) -> bool {
    let (Some((na, ba)), Some((nb, bb))) = (parse_cidr(a), parse_cidr(b)) else {
        return false;
    };
    match ba <= bb {
        true => in_cidr(nb, a),
        false => in_cidr(na, b),
    }
}

pub fn service_cidr(cidr: &str, vpc: &[String]) -> Result<String, Cause> {
    match vpc.iter().find(|v| overlap(cidr, v)) {
        Some(v) => Err(Cause::new(
            "service-cidr",
            format!("the service CIDR {cidr} overlaps the VPC's block {v}"),
        )),
        None => Ok(format!("{cidr} is outside the VPC's {}", vpc.join(", "))),
    }
}

pub fn cluster_dns(address: &str, cidr: &str) -> Result<String, Cause> {
    let inside = address.parse::<IpAddr>().is_ok_and(|ip| in_cidr(ip, cidr));
    match inside {
        true => Ok(format!("{address} is in {cidr}")),
        false => Err(Cause::new(
            "cluster-dns",
            format!("the cluster DNS address {address} is outside the service CIDR {cidr}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_overlap_when_one_holds_the_other() {
        assert!(overlap("10.0.0.0/16", "10.0.0.0/16"));
        assert!(overlap("10.0.0.0/8", "10.100.0.0/16"));
        assert!(overlap("10.100.0.0/16", "10.0.0.0/8"));
        assert!(!overlap("172.20.0.0/16", "10.0.0.0/16"));
        assert!(!overlap("10.0.0.0/16", "2600:1f18::/56"));
        assert!(service_cidr("10.0.0.0/16", &["10.0.0.0/16".into()]).is_err());
        assert!(service_cidr("172.20.0.0/16", &["10.0.0.0/16".into()]).is_ok());
    }

    #[test]
    fn a_dns_address_derived_from_a_narrow_block_falls_outside_it() {
        assert!(cluster_dns("172.20.0.10", "172.20.0.0/16").is_ok());
        assert_eq!(
            cluster_dns("10.100.0.10", "10.100.0.128/25")
                .unwrap_err()
                .code,
            "cluster-dns"
        );
        // IPv6: the peers' `<address>a` is in a /108 that ends in `::`; appended to a block
        // written with a last group, it leaves the block, or is no address at all.
        let ip = crate::plan::handoff::al2::dns_ip;
        assert!(cluster_dns(&ip("fd00:10:20::/108"), "fd00:10:20::/108").is_ok());
        for block in ["fd00:1::10/124", "fd00:1:2:3:4:5:6:1234/112"] {
            assert_eq!(
                cluster_dns(&ip(block), block).unwrap_err().code,
                "cluster-dns"
            );
        }
    }
}
