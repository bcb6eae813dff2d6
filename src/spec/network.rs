//! The `network` section checked: name servers as IP addresses systemd-resolved can take from
//! its global `DNS=`, domains as its `Domains=` takes them. Each value goes on one line of an
//! INI file and into nodeadm's `instance.network`, so nothing but these forms gets through.

use std::net::IpAddr;

use crate::base::findings::Findings;
use crate::base::text::printable;
use crate::config::NetworkSettings;

/// The node's resolvers, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkSpec {
    pub nameservers: Vec<IpAddr>,
    pub domains: Vec<String>,
}

impl NetworkSpec {
    /// The name servers as nodeadm's NodeConfig and the resolver file carry them.
    pub fn nameserver_texts(&self) -> Vec<String> {
        self.nameservers.iter().map(IpAddr::to_string).collect()
    }
}

pub(crate) fn spec(c: Option<&NetworkSettings>, f: &mut Findings) -> Option<NetworkSpec> {
    let c = c?;
    let before = f.0.len();
    if c.nameservers.is_empty() && c.domains.is_empty() {
        f.push(
            "network",
            "names neither `nameservers` nor `domains`: give one of them, or leave `network` out",
        );
    }
    let mut nameservers = Vec::with_capacity(c.nameservers.len());
    for (i, s) in c.nameservers.iter().enumerate() {
        let field = format!("network.nameservers[{i}]");
        match nameserver(s) {
            Ok(a) if nameservers.contains(&a) => f.push(field, format!("`{a}` is given twice")),
            Ok(a) => nameservers.push(a),
            Err(why) => f.push(field, format!("`{}` {why}", printable(s))),
        }
    }
    for (i, d) in c.domains.iter().enumerate() {
        let field = format!("network.domains[{i}]");
        if let Err(why) = domain(d) {
            f.push(field, format!("`{}` {why}", printable(d)));
        } else if c.domains[..i].iter().any(|e| same_domain(e, d)) {
            f.push(field, format!("`{}` is given twice", printable(d)));
        }
    }
    (f.0.len() == before).then(|| NetworkSpec {
        nameservers,
        domains: c.domains.clone(),
    })
}

/// An address systemd-resolved reaches without an interface named: not the unspecified
/// address, not its own stub listeners (a loop), not an IPv6 link-local address.
fn nameserver(s: &str) -> Result<IpAddr, &'static str> {
    let a: IpAddr = s.parse().map_err(|_| {
        "is not an IP address: give the server's IPv4 or IPv6 address (no port, no name, no spaces)"
    })?;
    match a {
        a if a.is_unspecified() => Err("is the unspecified address"),
        IpAddr::V4(v4) if matches!(v4.octets(), [127, 0, 0, 53] | [127, 0, 0, 54]) => Err(
            "is systemd-resolved's own stub listener: the node would ask itself; give the VPC's or your servers' addresses",
        ),
        IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80 => Err(
            "is an IPv6 link-local address, which needs an interface this field cannot name; give a global or unique-local address",
        ),
        a => Ok(a),
    }
}

/// Whether two domains name the same entry: letters in any case, a final dot or not.
fn same_domain(a: &str, b: &str) -> bool {
    let bare = |d: &str| match d {
        "~." => d.to_string(),
        _ => d.strip_suffix('.').unwrap_or(d).to_ascii_lowercase(),
    };
    bare(a) == bare(b)
}

/// A domain as `Domains=` takes it: a DNS name (labels of letters, digits, `-` and `_`, each at
/// most 63 bytes, 253 in all, an optional final dot), `~` before it for a routing-only domain,
/// or `~.` for every name.
fn domain(d: &str) -> Result<(), &'static str> {
    let name = d.strip_prefix('~').unwrap_or(d);
    if name == "." && d.starts_with('~') {
        return Ok(());
    }
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.is_empty() || name.len() > 253 {
        return Err("is not a domain name of 1 to 253 characters");
    }
    for label in name.split('.') {
        let ok_chars = label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if label.is_empty() || label.len() > 63 || !ok_chars {
            return Err("is not a domain name: labels of letters, digits, `-` and `_`, 1 to 63 characters each (`corp.example`, `~corp.example`, `~.`)");
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err("has a label that starts or ends with `-`");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(nameservers: &[&str], domains: &[&str]) -> (Option<NetworkSpec>, Vec<String>) {
        let c = NetworkSettings {
            nameservers: nameservers.iter().map(|s| s.to_string()).collect(),
            domains: domains.iter().map(|s| s.to_string()).collect(),
        };
        let mut f = Findings::default();
        let s = spec(Some(&c), &mut f);
        (s, f.0.iter().map(|x| x.to_string()).collect())
    }

    #[test]
    fn addresses_of_both_families_and_domains_of_each_kind_pass() {
        let (s, f) = check(
            &["10.0.0.2", "fd00:ec2::253", "169.254.169.253"],
            &["corp.example", "~svc.corp.example.", "~.", "a_b.example"],
        );
        assert!(f.is_empty(), "{f:?}");
        assert_eq!(
            s.unwrap().nameserver_texts(),
            ["10.0.0.2", "fd00:ec2::253", "169.254.169.253"]
        );
    }

    #[test]
    fn what_resolved_cannot_take_or_an_ini_line_would_carry_is_refused_by_its_index() {
        let (s, f) = check(
            &[
                "dns.corp.example",
                "10.0.0.2:53",
                "0.0.0.0",
                "127.0.0.53",
                "fe80::1",
                " 10.0.0.3",
                "10.0.0.2",
                "10.0.0.2",
            ],
            &[
                "corp example",
                "a\nDNS=6.6.6.6",
                "-bad.example",
                "",
                "~",
                "Corp.example",
                "corp.EXAMPLE.",
            ],
        );
        assert!(s.is_none());
        let fields: Vec<&str> = f.iter().map(|m| m.split(':').next().unwrap()).collect();
        assert_eq!(fields.len(), 13, "{f:#?}");
        for (i, want) in [
            "nameservers[0]",
            "nameservers[1]",
            "nameservers[2]",
            "nameservers[3]",
            "nameservers[4]",
            "nameservers[5]",
            "nameservers[7]",
            "domains[0]",
            "domains[1]",
            "domains[2]",
            "domains[3]",
            "domains[4]",
            "domains[6]",
        ]
        .iter()
        .enumerate()
        {
            assert!(f[i].contains(want), "{i}: {want} in {}", f[i]);
        }
        assert!(f.iter().all(|m| !m.contains('\n')), "{f:?}");
    }

    #[test]
    fn an_empty_section_is_refused() {
        let (s, f) = check(&[], &[]);
        assert!(s.is_none());
        assert!(
            f[0].contains("neither `nameservers` nor `domains`"),
            "{f:?}"
        );
    }
}
