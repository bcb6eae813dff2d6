//! The scenario of a node on an IPv6-only subnet of an IPv6 cluster (docs/ipv6.md): the shipped
//! `al2023-name-only.mime`, run by the packaged units on AL2023, in a guest whose network has no
//! IPv4 at all (QEMU's user network with IPv4 off and the prefix `fd00:ec2::/64`, whose host
//! address is `fd00:ec2::254`, where EC2's IPv6 IMDS answers).
//!
//! On the host, the guest's `[fd00:ec2::254]:P` is this host's `[::1]:P`: the strict IMDSv2
//! server answers on `[::1]:80`, for an instance with no `local-ipv4`, and moto's TLS terminator
//! on `[::1]:443`. The guest's /etc/hosts names only the services' dual-stack names (and the
//! preflight's) there: the IPv4-only `ec2.eu-west-1.amazonaws.com` and
//! `ssm.eu-west-1.amazonaws.com` resolve to nothing. Parameter Store holds an IPv6 service CIDR.
//!
//! cloud-init finds IMDS at `http://[fd00:ec2::254]` (the image's datasource lists it after
//! IPv4's); the agent finds it by `auto`, reads the cluster from Parameter Store and tags the
//! instance by the dual-stack names, and hands an IPv6 `cluster.cidr` to nodeadm; the Name tag
//! is the group's name and the IPv6 address with `:` as `x`. Every other check is the
//! name-only scenarios'.

use super::*;

/// The guest network's host address, where EC2 serves IMDS over IPv6.
pub(super) const GUEST_HOST6: &str = "fd00:ec2::254";
/// The instance's IPv6 address, as IMDS serves it (the guest's own comes from the network's
/// router advertisement).
pub(super) const INSTANCE_IPV6: &str = "fd00:ec2::5054:ff:fe12:3456";
/// The IPv6 cluster's service CIDR in Parameter Store.
const SERVICE_CIDR6: &str = "fd00:10:20::/108";
/// The services' dual-stack names the agent calls.
pub(super) const DUAL_STACK_HOSTS: &str =
    "ec2.eu-west-1.api.aws ssm.eu-west-1.api.aws autoscaling.eu-west-1.api.aws";

pub(super) fn is_ipv6(name: &str) -> bool {
    name == "al2023-ipv6-only"
}

/// The guest's kubelet.service, as an AL2023 AMI has it (not enabled; nodeadm's stand-in here
/// starts no kubelet): the unit the agent's IMDS drop-in is for, which systemd reads only for a
/// unit it has.
pub(super) fn prepare(root: &Path) {
    let unit = std::fs::read_to_string(e2e_dir().join("guest/kubelet.service")).unwrap();
    guest::write(
        &root.join("etc/systemd/system/kubelet.service"),
        &unit,
        0o644,
    );
}

/// The cluster's values: Parameter Store's name-only ones, with an IPv6 service CIDR.
pub(super) fn edit(sc: &mut Scenario) {
    if is_ipv6(sc.name) {
        sc.ssm = Some((SSM_ENDPOINT.into(), ssm_ca(), SERVICE_CIDR6.into()));
    }
}

/// The instance's metadata as EC2 serves it on an IPv6-only subnet: no `local-ipv4`, its IPv6
/// address, and the resource name as its hostname.
pub(super) fn metadata(s: &mut State, instance_id: &str) {
    s.data.remove("local-ipv4");
    let name = format!("{instance_id}.{REGION}.compute.internal");
    s.data.insert("local-hostname".into(), name.clone());
    s.data.insert("hostname".into(), name);
    s.data.insert("ipv6".into(), INSTANCE_IPV6.into());
    s.data.insert(
        format!("network/interfaces/macs/{}/ipv6s", guest::GUEST_MAC),
        INSTANCE_IPV6.into(),
    );
}

/// The guest's network: IPv6 only, the host at `fd00:ec2::254`.
pub(super) fn netdev() -> String {
    format!("user,id=n0,ipv4=off,ipv6=on,ipv6-net=fd00:ec2::/64,ipv6-host={GUEST_HOST6}")
}

/// The guest's /etc/hosts line: the names the guest reaches at the host address.
pub(super) fn hosts_line() -> String {
    format!("{GUEST_HOST6} {DUAL_STACK_HOSTS} {PREFLIGHT_HOSTS}\n")
}

/// moto's TLS terminator on `[::1]:443`, where the guest's `[fd00:ec2::254]:443` arrives.
pub(super) fn front(sc: &Scenario, ec2: &Ec2, crt: &Path, key: &Path) -> Option<Proc> {
    if !is_ipv6(sc.name) {
        return None;
    }
    let front = aws::tls_front("443,bind=[::1],pf=ip6", &ec2._moto.url, crt, key);
    let t = Instant::now();
    while std::net::TcpStream::connect("[::1]:443").is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "no TLS front on [::1]:443"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(front)
}

/// This scenario's own checks beside the name-only ones: Parameter Store and EC2 answered the
/// agent (by the only names the guest resolves), nodeadm got the IPv6 service CIDR, and
/// systemd gave nodeadm's units and the kubelet the agent's IMDS endpoint and dual-stack names.
pub(super) fn check(sc: &Scenario, run: &Run, ec2: &Ec2) {
    assert!(
        ec2.ssm_count("GetParametersByPath") >= 1,
        "[{}] Parameter Store was not asked",
        sc.name
    );
    let dropin = run.file(1, "/etc/eks/nodeadm.d/10-eks-nodeinit.json");
    let dropin: serde_json::Value = serde_json::from_str(&dropin).unwrap();
    assert_eq!(
        dropin["spec"]["cluster"]["cidr"], SERVICE_CIDR6,
        "{dropin:#}"
    );
    // The kubelet's drop-in as the agent wrote it.
    let kubelet = run.file(
        1,
        "/etc/systemd/system/kubelet.service.d/60-eks-nodeinit-imds.conf",
    );
    assert!(
        kubelet.contains(&format!(
            "Environment=\"AWS_EC2_METADATA_SERVICE_ENDPOINT=http://[{GUEST_HOST6}]\""
        )),
        "[{}] {kubelet}",
        sc.name
    );
    // The agent's drop-in as systemd read it: both nodeadm units and the kubelet (whose
    // credential plugin signs the token it joins with, in the kubelet's environment) run with
    // IMDS's endpoint and the dual-stack names in their environment.
    for unit in [
        "nodeadm-config.service",
        "nodeadm-run.service",
        "kubelet.service",
    ] {
        let env = run.unit(1, unit).remove("Environment").unwrap_or_default();
        // systemctl show quotes an entry with characters such as `[` (no entry here holds a
        // space).
        let mut vars: Vec<&str> = env
            .split(' ')
            .map(|v| {
                v.strip_prefix('"')
                    .and_then(|v| v.strip_suffix('"'))
                    .unwrap_or(v)
            })
            .collect();
        vars.sort_unstable();
        let want = [
            format!("AWS_EC2_METADATA_SERVICE_ENDPOINT=http://[{GUEST_HOST6}]"),
            "AWS_USE_DUALSTACK_ENDPOINT=true".into(),
        ];
        assert_eq!(vars, want, "[{}] {unit}'s environment", sc.name);
    }
    // The kubelet's credential plugin (a stand-in reading IMDS as botocore does), run with the
    // environment systemd gives kubelet.service, reaches IMDS where the agent found it.
    let plugin = run.get(1, "credential-plugin").unwrap_or_default();
    assert_eq!(
        plugin.trim_end(),
        format!("credentials for eks-node-role from http://[{GUEST_HOST6}]"),
        "[{}] the kubelet's credential plugin",
        sc.name
    );
}
