//! An IP block as Go's `net.ParseCIDR` takes it (what bootstrap.sh, kubelet and nodeadm hand
//! these to), and the decimal numbers in it and in a port.

/// A number written in decimal digits alone: Rust's integer parse also takes a leading `+`,
/// which Go's parsers (bootstrap.sh's, kubelet's and nodeadm's consumers) refuse.
pub(crate) fn decimal<T: std::str::FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// An address and its prefix length, within the family's bits.
pub(crate) fn parse_cidr(s: &str) -> Option<(std::net::IpAddr, u8)> {
    let (ip, len) = s.split_once('/')?;
    let ip: std::net::IpAddr = ip.parse().ok()?;
    let len: u8 = decimal(len)?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    (len <= max).then_some((ip, len))
}
