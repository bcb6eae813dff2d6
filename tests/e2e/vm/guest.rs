//! The guest side of the VM e2e (main.rs): IMDS for the instance, the guest's disk, and one
//! boot-and-reboot of the VM with its reports read back.

use super::*;

/// The guest NIC's MAC, and the instance's primary interface in IMDS.
pub(super) const GUEST_MAC: &str = "52:54:00:12:34:56";

pub(super) fn utc_in(hours: u32) -> String {
    sh(Command::new("date").args([
        "-u",
        "-d",
        &format!("+{hours} hours"),
        "+%Y-%m-%dT%H:%M:%SZ",
    ]))
    .trim()
    .to_string()
}

/// What IMDS says the instance is: a type with a GPU for the scenario that has none.
fn instance_type(sc: &Scenario) -> &'static str {
    match unfit::is_unfit(sc.name) {
        true => unfit::INSTANCE_TYPE,
        false => "m6i.large",
    }
}

/// IMDS for the instance moto launched: the paths the agent reads, what cloud-init's Ec2
/// datasource crawls (listings, the identity document), the instance role's credentials (the
/// SDK's default chain finds them here) and the scenario's user data.
pub(super) fn imds(ec2: &Ec2, sc: &Scenario) -> ImdsServer {
    let mut s = State::default();
    let host = format!(
        "ip-{}.{REGION}.compute.internal",
        ec2.private_ip.replace('.', "-")
    );
    let creds = serde_json::json!({
        "Code": "Success", "LastUpdated": utc_in(0), "Type": "AWS-HMAC",
        "AccessKeyId": "ASIAE2EEXAMPLE", "SecretAccessKey": "e2e-secret-not-logged",
        "Token": "e2e-session-token", "Expiration": utc_in(6),
    });
    for (k, v) in [
        ("ami-id", "ami-0e2e0e2e0e2e0e2e0".to_string()),
        ("instance-id", ec2.instance_id.clone()),
        ("instance-type", instance_type(sc).into()),
        ("local-ipv4", ec2.private_ip.clone()),
        ("local-hostname", host.clone()),
        ("hostname", host),
        ("mac", GUEST_MAC.into()),
        ("placement/availability-zone", format!("{REGION}a")),
        ("placement/region", REGION.into()),
        ("iam/security-credentials/", "eks-node-role".into()),
        ("iam/security-credentials/eks-node-role", creds.to_string()),
    ] {
        s.data.insert(k.to_string(), v);
    }
    s.dynamic.insert(
        "instance-identity/document".into(),
        serde_json::json!({
            "accountId": "123456789012", "architecture": "x86_64",
            "availabilityZone": format!("{REGION}a"), "imageId": "ami-0e2e0e2e0e2e0e2e0",
            "instanceId": ec2.instance_id, "instanceType": instance_type(sc),
            "privateIp": ec2.private_ip, "region": REGION, "version": "2017-09-30",
        })
        .to_string(),
    );
    let mut tags = BTreeMap::new();
    // Every scenario's instance is in a group but the ones that retire, which are a Karpenter
    // node's or a standalone instance's.
    if !retired::is_retired(sc.name) && !unfit::is_unfit(sc.name) {
        tags.insert("aws:autoscaling:groupName".into(), "eks-e2e-asg".into());
    }
    if sc.cluster_tag {
        tags.insert(
            format!("kubernetes.io/cluster/{CLUSTER}"),
            "owned".to_string(),
        );
    }
    s.tags = Some(tags);
    s.user_data = Some(sc.user_data.clone().into_bytes());
    // The VPC's block on the instance's interface, as EC2's IMDS serves it (the agent reads it
    // for a NO_PROXY).
    s.data.insert(
        format!("network/interfaces/macs/{GUEST_MAC}/vpc-ipv4-cidr-blocks"),
        private::VPC_CIDR.into(),
    );
    if let Some(state) = sc.warm {
        s.data.insert(
            eks_nodeinit::instance::lifecycle::IMDS_PATH.into(),
            state.into(),
        );
    }
    if ipv6::is_ipv6(sc.name) {
        // Where the guest's [fd00:ec2::254]:80 arrives (ipv6.rs).
        ipv6::metadata(&mut s, &ec2.instance_id);
        return ImdsServer::start_on("[::1]:80", s);
    }
    ImdsServer::start_with(s)
}

pub(super) fn write(path: &Path, text: &str, mode: u32) {
    write_bytes(path, text.as_bytes(), mode)
}

pub(super) fn write_bytes(path: &Path, bytes: &[u8], mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

pub(super) fn enable(root: &Path, unit: &str, target: &str) {
    let wants = root.join(format!("etc/systemd/system/{target}.wants"));
    std::fs::create_dir_all(&wants).unwrap();
    std::os::unix::fs::symlink(format!("/etc/systemd/system/{unit}"), wants.join(unit)).unwrap();
}

/// The guest's disk for one scenario: the cached root, the DEB installed with dpkg in a chroot,
/// the host's CA trusted, EC2_HOST pointed at the forwarded address, the flavour's recording
/// hand-off, the reporter, and the hardened scenario's hardening. Returns the raw ext4 image.
pub(super) fn disk(
    sc: &Scenario,
    image: &Path,
    work: &Path,
    ca: &Path,
    deb: &Path,
    net: Option<&private::Network>,
    cluster: Option<&join::Cluster>,
) -> PathBuf {
    let root = work.join("rootfs");
    sh(Command::new("cp")
        .args(["-a", "--reflink=auto"])
        .arg(image.join("rootfs"))
        .arg(&root));
    install_reporter(sc, &root);
    match net {
        // The CA comes from the agent (trust.caBundles); the AWS endpoints through the proxy.
        Some(net) => net.prepare(&root),
        None => trust_and_name_aws(&root, ca, ipv6::is_ipv6(sc.name)),
    }
    install_deb(&root, deb);
    install_handoff(sc, &root, cluster);
    if hardened::is_hardened(sc.name) {
        hardened::prepare(&root);
    }
    if unfit::is_unfit(sc.name) {
        unfit::prepare(&root);
    }
    if retired::is_retired(sc.name) {
        retired::prepare(&root);
    }
    if ipv6::is_ipv6(sc.name) {
        ipv6::prepare(&root);
    }
    let img = work.join("disk.img");
    sh(Command::new("mkfs.ext4")
        .args(["-q", "-F", "-L", "root", "-d"])
        .arg(&root)
        .arg(&img)
        .arg("3G"));
    sh(Command::new("rm").arg("-rf").arg(&root));
    img
}

/// A file of the guest's (tests/e2e/vm/guest/) at `to` under `root`.
fn copy_guest(root: &Path, from: &str, to: &str, mode: u32) {
    let guest = e2e_dir().join("guest");
    write(
        &root.join(to),
        &std::fs::read_to_string(guest.join(from)).unwrap(),
        mode,
    )
}

/// The reporter and what it reads: the sysctls' keys, where the hand-off records, the
/// warm-pool flag, the config for its second-run dry run.
fn install_reporter(sc: &Scenario, root: &Path) {
    copy_guest(root, "e2e-report", "usr/local/sbin/e2e-report", 0o755);
    copy_guest(
        root,
        "e2e-credential-plugin",
        "usr/local/sbin/e2e-credential-plugin",
        0o755,
    );
    copy_guest(
        root,
        "e2e-report.service",
        "etc/systemd/system/e2e-report.service",
        0o644,
    );
    enable(root, "e2e-report.service", "cloud-init.target");
    let keys: Vec<&str> = sc.config["sysctls"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.keys())
        .map(String::as_str)
        .collect();
    write(
        &root.join("etc/e2e/sysctls"),
        &(keys.join("\n") + "\n"),
        0o644,
    );
    // Where the recording hand-off writes (before the reporter ever runs).
    std::fs::create_dir_all(root.join("var/lib/e2e")).unwrap();
    if sc.warm == Some("Warmed:Running") {
        write(&root.join(warm::WAIT_RELEASE_FLAG), "", 0o644);
    }
    if !sc.by_unit {
        // For the reporter's second-run dry run only; the unit's path stays absent.
        write(
            &root.join("etc/e2e/config.json"),
            &sc.config.to_string(),
            0o600,
        );
    }
}

/// The DEB installed with dpkg in a chroot (its postinst enables the unit), and cloud-init's
/// unit as Amazon Linux renders it.
fn install_deb(root: &Path, deb: &Path) {
    std::fs::copy(deb, root.join("tmp/eks-nodeinit.deb")).unwrap();
    sh(Command::new("chroot")
        .arg(root)
        .args(["dpkg", "-i", "/tmp/eks-nodeinit.deb"]));
    std::fs::remove_file(root.join("tmp/eks-nodeinit.deb")).unwrap();
    assert!(
        // An absolute link into the guest's /lib: look at the link itself.
        root.join("etc/systemd/system/multi-user.target.wants/eks-nodeinit.service")
            .symlink_metadata()
            .is_ok(),
        "the DEB's postinst enables the unit"
    );
    // cloud-init's unit as cloud-init renders it for Amazon Linux: Debian's rendering adds
    // `Before=sysinit.target`, which with AL2023's ordering (nodeadm-config.service, and the
    // agent's unit before it, both after sysinit.target, before cloud-init.service) is a cycle.
    let unit = std::fs::read_to_string(root.join("lib/systemd/system/cloud-init.service")).unwrap();
    assert!(unit.contains("\nBefore=sysinit.target\n"), "{unit}");
    write(
        &root.join("etc/systemd/system/cloud-init.service"),
        &unit.replace("\nBefore=sysinit.target\n", "\n"),
        0o644,
    );
}

/// The flavour's recording hand-off: bootstrap.sh's stand-in and the kubelet config, or
/// nodeadm's stand-in, its units and (for a joining scenario) the cluster's parts.
fn install_handoff(sc: &Scenario, root: &Path, cluster: Option<&join::Cluster>) {
    match sc.flavour {
        Flavour::Al2 => {
            // A recording stand-in with the real script's option grammar, which fails as the
            // real one does on a flag without its value (`$2` under nounset) or on --help.
            write(
                &root.join("etc/eks/bootstrap.sh"),
                &common::bootstrap_standin(common::BOOTSTRAP_OPTIONS, GUEST_RECORD_ARGV),
                0o755,
            );
            write(
                &under(root, kubelet_config()),
                &read_example("al2-root/etc/kubernetes/kubelet/kubelet-config.json"),
                0o644,
            );
        }
        Flavour::Al2023 => {
            copy_guest(root, "nodeadm", "usr/bin/nodeadm", 0o755);
            copy_guest(
                root,
                "nodeadm-config.service",
                "etc/systemd/system/nodeadm-config.service",
                0o644,
            );
            copy_guest(
                root,
                "nodeadm-run.service",
                "etc/systemd/system/nodeadm-run.service",
                0o644,
            );
            enable(root, "nodeadm-config.service", "multi-user.target");
            // The AMI's build creates the drop-in directory (templates/al2023/provisioners/
            // install-nodeadm.sh); nodeadm refuses a missing one but passes over an empty one.
            std::fs::create_dir_all(root.join("etc/eks/nodeadm.d")).unwrap();
            enable(root, "nodeadm-run.service", "cloud-init.target");
            if let Some(c) = cluster {
                c.prepare(root);
            }
        }
    }
}

/// The host's CA trusted by the guest's store, and the AWS endpoints' names pointed at the
/// forwarded address.
fn trust_and_name_aws(root: &Path, ca: &Path, ipv6: bool) {
    write(
        &root.join("usr/local/share/ca-certificates/eks-nodeinit-e2e.crt"),
        &std::fs::read_to_string(ca).unwrap(),
        0o644,
    );
    sh(Command::new("chroot")
        .arg(root)
        .args(["update-ca-certificates"]));
    let hosts = std::fs::read_to_string(root.join("etc/hosts")).unwrap_or_default();
    let line = match ipv6 {
        true => ipv6::hosts_line(),
        false => format!("{GUEST_EC2_ADDR} {EC2_HOST} {SSM_HOST} {PREFLIGHT_HOSTS}\n"),
    };
    write(&root.join("etc/hosts"), &format!("{hosts}{line}"), 0o644);
}

pub(super) fn parse_report(text: &str) -> Facts {
    let mut m = Facts::new();
    for line in text.lines() {
        let mut w = line.trim_end_matches('\r').splitn(4, ' ');
        if w.next() != Some("E2E") {
            continue;
        }
        let (Some(boot), Some(name)) = (w.next().and_then(|b| b.parse().ok()), w.next()) else {
            continue;
        };
        let data = base64::engine::general_purpose::STANDARD
            .decode(w.next().unwrap_or("").trim())
            .unwrap_or_else(|e| format!("<bad base64: {e}>").into_bytes());
        m.insert((boot, name.to_string()), data);
    }
    m
}

/// What the guest reaches on the host: IMDS, the EC2 endpoint, the scenario's own forwards
/// (guest address:port, port on the host's 127.0.0.1), and the API server of the scenario that
/// joins, which the host tends while the VM runs.
pub(super) struct HostPeers<'a> {
    pub imds: &'a ImdsServer,
    pub ec2: &'a Ec2,
    pub forwards: Vec<(String, u16)>,
    pub cluster: Option<&'a join::Cluster>,
}

/// Boot the disk, wait for two reports (the guest reboots itself once, then powers off).
pub(super) fn boot(sc: &Scenario, image: &Path, disk: &Path, work: &Path, host: &HostPeers) -> Run {
    let HostPeers {
        imds,
        ec2,
        forwards,
        cluster,
    } = host;
    let console = work.join("console.log");
    let report = work.join("report.log");
    let netdev = match ipv6::is_ipv6(sc.name) {
        true => ipv6::netdev(),
        false => netdev(imds, ec2, forwards),
    };
    let t = Instant::now();
    let mut child = Proc(
        qemu(image, disk, &netdev, [&console, &report], cluster.is_some())
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut boot1 = None;
    loop {
        let text = std::fs::read_to_string(&report).unwrap_or_default();
        if sc.warm.is_some() {
            warm::advance(sc, &text, imds);
        }
        if let Some(c) = cluster {
            c.advance();
        }
        if boot1.is_none() && text.contains("E2E 1 end ") {
            boot1 = Some((t.elapsed().as_secs_f64(), ec2.count("CreateTags")));
            eprintln!(
                "[{}] first boot reported after {:.0} s",
                sc.name,
                t.elapsed().as_secs_f64()
            );
        }
        if child.0.try_wait().unwrap().is_some() {
            break;
        }
        if t.elapsed() > VM_TIMEOUT {
            let console = std::fs::read_to_string(&console).unwrap_or_default();
            let tail: Vec<&str> = console.lines().rev().take(60).collect();
            panic!(
                "[{}] the VM did not power off within {VM_TIMEOUT:?}; console tail:\n{}",
                sc.name,
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let total = t.elapsed().as_secs_f64();
    eprintln!("[{}] VM ran {:.0} s in all (two boots)", sc.name, total);
    let facts = parse_report(&std::fs::read_to_string(&report).unwrap_or_default());
    let (boot1_secs, create_tags_after_boot1) = boot1.unwrap_or((f64::NAN, usize::MAX));
    Run {
        facts,
        create_tags_after_boot1,
        boot1_secs,
        total_secs: total,
    }
}

/// The guest's user network: IMDS and EC2 (TLS) forwarded to the host's servers, and the
/// scenario's other forwards.
fn netdev(imds: &ImdsServer, ec2: &Ec2, forwards: &[(String, u16)]) -> String {
    let imds_port = imds.addr.port();
    let mut netdev = format!(
        "user,id=n0,net=169.254.0.0/16,\
         guestfwd=tcp:169.254.169.254:80-cmd:socat - TCP:127.0.0.1:{imds_port},\
         guestfwd=tcp:{GUEST_EC2_ADDR}:443-cmd:socat - TCP:127.0.0.1:{}",
        ec2.tls_port
    );
    for (guest, port) in forwards {
        netdev += &format!(",guestfwd=tcp:{guest}-cmd:socat - TCP:127.0.0.1:{port}");
    }
    netdev
}

/// QEMU with the image's kernel, the disk, the network, two serial ports (the console, the
/// reports) and the instance's DMI; more memory for a node that joins (the kubelet and
/// containerd want room beside cloud-init).
fn qemu(image: &Path, disk: &Path, netdev: &str, serial: [&Path; 2], joins: bool) -> Command {
    let [console, report] = serial;
    let mut c = Command::new("qemu-system-x86_64");
    c.args(["-accel", accel(image), "-smp", "1", "-m"])
        .arg(if joins { "1536" } else { "1024" })
        .args(["-nodefaults", "-display", "none"])
        .arg("-kernel")
        .arg(image.join("vmlinuz"))
        .arg("-initrd")
        .arg(image.join("initrd.img"))
        .args([
            "-append",
            "root=/dev/vda rw console=ttyS0 net.ifnames=0 systemd.show_status=1",
        ])
        .arg("-drive")
        .arg(format!("file={},format=raw,if=virtio", disk.display()))
        .args(["-netdev", netdev, "-device"])
        .arg(format!("virtio-net-pci,netdev=n0,mac={GUEST_MAC}"))
        .args([
            "-smbios",
            &format!(
                "type=1,manufacturer=Amazon EC2,product=m6i.large,uuid={DMI_UUID},serial={DMI_UUID}"
            ),
        ])
        .arg("-serial")
        .arg(format!("file:{}", console.display()))
        .arg("-serial")
        .arg(format!("file:{}", report.display()));
    c
}
