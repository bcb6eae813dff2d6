//! The `cluster` section: the cluster's name, an https endpoint every hand-off can carry, the
//! CA as base64, the service CIDR and the runtime; its `discovery` has a file of its own.

use crate::base::findings::Findings;
use crate::base::text::printable;
use crate::config::Cluster;

#[derive(Debug, Clone)]
pub struct ClusterSpec {
    pub name: String,
    pub api_server_endpoint: Option<String>,
    /// Base64 of the cluster CA: a secret, redacted wherever it is shown.
    pub certificate_authority: Option<String>,
    pub cidr: Option<Cidr>,
    /// `cluster.ipFamily`: the family the service CIDR, given or discovered, must be of.
    pub ip_family: Option<crate::config::IpFamily>,
    pub container_runtime: String,
    /// Where to look up what the config leaves out (`None`: nothing is looked up).
    pub discovery: Option<super::discovery::DiscoverySpec>,
}

/// The service CIDR as written, and whether it is IPv6.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cidr {
    pub text: String,
    pub ipv6: bool,
}

/// Check the `cluster` section; its `discovery` is checked by [`super::discovery`].
pub fn spec(k: &Cluster, f: &mut Findings) -> ClusterSpec {
    let name_ok = !k.name.is_empty()
        && k.name.len() <= 100
        && k.name.starts_with(|ch: char| ch.is_ascii_alphanumeric())
        && k.name
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_');
    if !name_ok {
        f.push("cluster.name", format!(
            "`{}` is not an EKS cluster name (1-100 letters, digits, `-`, `_`, starting with a letter or digit)",
            printable(&k.name)
        ));
    }
    let endpoint = k.api_server_endpoint.clone().filter(|ep| {
        let ok = is_endpoint(ep);
        if !ok {
            f.push("cluster.apiServerEndpoint", format!(
                "`{}` must be an https:// URL: a host name or address, an optional port and path of letters, digits and `-._~/` (the cluster's endpoint from `aws eks describe-cluster`); other characters break bootstrap.sh's sed edits or a systemd drop-in",
                printable(ep)
            ));
        }
        ok
    });
    let ca = k.certificate_authority.clone().filter(|ca| {
        use base64::Engine;
        let ok =
            !ca.is_empty() && base64::engine::general_purpose::STANDARD.decode(ca).is_ok();
        if !ok {
            // Never echo the value: it is the cluster CA.
            f.push(
                "cluster.certificateAuthority",
                "is not valid base64 on one line; use the cluster's certificateAuthority.data as is",
            );
        }
        ok
    });
    let cidr = k.cidr.as_ref().and_then(|cidr| {
        let parsed = crate::base::cidr::parse_cidr(cidr).map(|(ip, _)| Cidr {
            text: cidr.clone(),
            ipv6: ip.is_ipv6(),
        });
        if parsed.is_none() {
            f.push(
                "cluster.cidr",
                format!(
                    "`{}` is not an IP network like `10.100.0.0/16` (the cluster's service CIDR)",
                    printable(cidr)
                ),
            );
        }
        parsed
    });
    if k.container_runtime != "containerd" {
        f.push(
            "cluster.containerRuntime",
            format!(
                "`{}` is not supported: EKS AMIs since Kubernetes 1.24 run containerd only",
                printable(&k.container_runtime)
            ),
        );
    }
    if let (Some(c), Some(family)) = (&cidr, k.ip_family) {
        if let Some(problem) = family_problem(c, family) {
            f.push("cluster.cidr", problem);
        }
    }
    ClusterSpec {
        name: k.name.clone(),
        api_server_endpoint: endpoint,
        certificate_authority: ca,
        cidr,
        ip_family: k.ip_family,
        container_runtime: k.container_runtime.clone(),
        discovery: super::discovery::spec(k, f),
    }
}

/// Why a service CIDR cannot serve a cluster of `family`: the hand-offs would give the kubelet a
/// DNS address of the other family, and bootstrap.sh the other family's options.
pub fn family_problem(c: &Cidr, family: crate::config::IpFamily) -> Option<String> {
    let own = match c.ipv6 {
        true => crate::config::IpFamily::Ipv6,
        false => crate::config::IpFamily::Ipv4,
    };
    (own != family).then(|| {
        format!(
            "`{}` is an {} service CIDR, and cluster.ipFamily is {}: a cluster's service CIDR is of its family (DescribeCluster's kubernetesNetworkConfig gives serviceIpv4Cidr or serviceIpv6Cidr)",
            printable(&c.text),
            match c.ipv6 {
                true => "IPv6",
                false => "IPv4",
            },
            family.as_str()
        )
    })
}

/// `https://host[:port][/path]` of the characters every hand-off carries: bootstrap.sh writes
/// the endpoint with `sed` (a `,` or `|` ends its expression) and into a systemd drop-in.
pub(crate) fn is_endpoint(ep: &str) -> bool {
    let Some(rest) = ep.strip_prefix("https://") else {
        return false;
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let (host_ok, port) = match authority.strip_prefix('[') {
        // An IPv6 address: `[addr]` or `[addr]:port`.
        Some(r) => match r.split_once(']') {
            Some((v6, tail)) if tail.is_empty() || tail.starts_with(':') => (
                v6.parse::<std::net::Ipv6Addr>().is_ok(),
                tail.strip_prefix(':'),
            ),
            _ => return false,
        },
        None => {
            let (host, port) = match authority.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            };
            let label_ok = |l: &str| {
                !l.is_empty()
                    && !l.starts_with('-')
                    && !l.ends_with('-')
                    && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            };
            (host.split('.').all(label_ok), port)
        }
    };
    let port_ok = port.map_or(true, |p| {
        crate::base::cidr::decimal::<u16>(p).is_some_and(|n| n > 0)
    });
    let path_ok = path
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~' | '/'));
    host_ok && port_ok && path_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_cidr_of_the_other_family_than_cluster_ip_family_is_a_finding() {
        let of = |cidr: &str, family: &str| {
            let c: Cluster = serde_json::from_value(serde_json::json!(
                {"name": "c", "cidr": cidr, "ipFamily": family}
            ))
            .unwrap();
            let mut f = Findings::default();
            let s = spec(&c, &mut f);
            (
                s.ip_family,
                f.0.iter().map(|x| x.field.clone()).collect::<Vec<_>>(),
            )
        };
        use crate::config::IpFamily;
        assert_eq!(of("fd00:10::/108", "ipv6"), (Some(IpFamily::Ipv6), vec![]));
        assert_eq!(of("10.100.0.0/16", "ipv4"), (Some(IpFamily::Ipv4), vec![]));
        assert_eq!(of("fd00:10::/108", "ipv4").1, ["cluster.cidr"]);
        assert_eq!(of("10.100.0.0/16", "ipv6").1, ["cluster.cidr"]);
    }

    #[test]
    fn a_prefix_length_or_port_is_decimal_digits_only() {
        // Rust's integer parse takes a leading `+`; Go's ParseCIDR and url.Parse (what
        // bootstrap.sh, kubelet and nodeadm hand these to) do not.
        assert!(crate::base::cidr::parse_cidr("10.100.0.0/16").is_some());
        assert!(crate::base::cidr::parse_cidr("fd00:10:96::/108").is_some());
        for bad in [
            "10.100.0.0/+16",
            "fd00::/+64",
            "10.100.0.0/",
            "10.100.0.0/ 16",
        ] {
            assert!(crate::base::cidr::parse_cidr(bad).is_none(), "{bad}");
        }
        assert!(is_endpoint("https://x.example.com:443"));
        assert!(!is_endpoint("https://x.example.com:+443"));
        assert!(!is_endpoint("https://[fd00::1]:+443"));
    }
}
