//! Config sanity that only shows on the instance: the service CIDR against the VPC's blocks
//! (from IMDS), and the cluster DNS address the hand-off derives against the service CIDR.

use std::net::IpAddr;

use super::net::in_cidr;
use super::Cause;
use crate::base::cidr::parse_cidr;

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
    }
}
