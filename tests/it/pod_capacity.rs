//! Max pods against an independent implementation of the VPC CNI's calculator (written from
//! awslabs/amazon-eks-ami's AL2 `max-pods-calculator.sh`, not calling the product's function)
//! over every type in the embedded table, the calculator's own upstream cases, and bootstrap.sh's
//! reservation.

use crate::common;

use std::path::Path;

use eks_nodeinit::base::podcap::{self, table, Ceiling, Cni, Mode};

/// Each type's vCPUs, where the embedded table has them.
fn vcpus() -> std::collections::BTreeMap<String, i64> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/base/podcap/instance-info.jsonl"
    ))
    .unwrap();
    text.lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let n = v["defaultVCpus"].as_i64()?;
            Some((v["instanceType"].as_str().unwrap().to_string(), n))
        })
        .collect()
}

#[test]
fn a_second_capture_fills_only_the_vcpus_the_table_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("table.jsonl");
    std::fs::write(
        &table,
        "{\"instanceType\":\"a1.large\",\"defaultMaxENIs\":3,\"ipv4AddressesPerInterface\":10}\n\
         {\"instanceType\":\"b1.large\",\"defaultMaxENIs\":4,\"ipv4AddressesPerInterface\":15,\"defaultVCpus\":2}\n",
    )
    .unwrap();
    // A capture keyed by type, gzip: other ENI numbers for a1 (the table's kept, and named), a
    // vCPU count for b1 the table has already (the table's kept).
    let capture = serde_json::json!({
        "a1.large": {"InstanceType": "a1.large", "VCpuInfo": {"DefaultVCpus": 2},
            "NetworkInfo": {"NetworkCards": [{"NetworkCardIndex": 0, "MaximumNetworkInterfaces": 9}], "Ipv4AddressesPerInterface": 10}},
        "b1.large": {"InstanceType": "b1.large", "VCpuInfo": {"DefaultVCpus": 64},
            "NetworkInfo": {"NetworkCards": [{"NetworkCardIndex": 0, "MaximumNetworkInterfaces": 4}], "Ipv4AddressesPerInterface": 15}},
    });
    let gz = dir.path().join("capture.json.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut enc, capture.to_string().as_bytes()).unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();
    let out = std::process::Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tools/instance-table.py"
        ))
        .arg("--vcpus-from")
        .arg(&gz)
        .arg(&table)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "{\"instanceType\":\"a1.large\",\"defaultMaxENIs\":3,\"ipv4AddressesPerInterface\":10,\"defaultVCpus\":2}\n\
         {\"instanceType\":\"b1.large\",\"defaultMaxENIs\":4,\"ipv4AddressesPerInterface\":15,\"defaultVCpus\":2}\n"
    );
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("a1.large: ENIs (9, 10) in") && err.contains("(3, 10) kept"),
        "{err}"
    );
}

/// The embedded table read by this test's own parser: (type, ENIs, IPv4 per ENI).
fn rows() -> Vec<(String, i64, i64)> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/base/podcap/instance-info.jsonl"
    ))
    .unwrap();
    text.lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["instanceType"].as_str().unwrap().to_string(),
                v["defaultMaxENIs"].as_i64().unwrap(),
                v["ipv4AddressesPerInterface"].as_i64().unwrap(),
            )
        })
        .collect()
}

/// The script, step by step: `enis_for_pods` (min'd with `--cni-max-eni`, minus one with
/// custom networking), the prefix-delegation formula only on Nitro, then `--show-max-allowed`
/// or the ceiling by `CPU_COUNT -gt 30`.
#[allow(clippy::too_many_arguments)]
fn calculator(
    enis: i64,
    ips: i64,
    max_eni: Option<i64>,
    custom: bool,
    pd: bool,
    nitro: bool,
    show_max_allowed: bool,
    cpus: i64,
) -> i64 {
    let mut enis_for_pods = match max_eni {
        None => enis,
        Some(m) => std::cmp::min(m, enis),
    };
    if custom {
        enis_for_pods -= 1;
    }
    let max_pods = if nitro && pd {
        enis_for_pods * ((ips - 1) * 16) + 2
    } else {
        enis_for_pods * (ips - 1) + 2
    };
    if show_max_allowed {
        return max_pods;
    }
    if cpus > 30 {
        std::cmp::min(250, max_pods)
    } else {
        std::cmp::min(110, max_pods)
    }
}

#[test]
fn every_type_in_every_mode_matches_the_calculator() {
    let rows = rows();
    assert_eq!(rows.len(), 1384);
    let mut checked = 0;
    for (t, enis, ips) in &rows {
        let info = table::lookup(t).unwrap_or_else(|| panic!("{t} is not looked up"));
        for (cni, custom, max_eni) in [
            (Cni::SecondaryIps, false, None),
            (Cni::PrefixDelegation, false, None),
            (Cni::SecondaryIps, true, None),
            (Cni::SecondaryIps, false, Some(2)),
            (Cni::PrefixDelegation, true, Some(2)),
        ] {
            for (ceiling, show) in [(Ceiling::Recommended, false), (Ceiling::None, true)] {
                for cpus in [1, 2, 30, 31, 192] {
                    for nitro in [true, false] {
                        let mode = Mode {
                            cni,
                            custom_networking: custom,
                            max_enis: max_eni.map(|m: i64| m as u64),
                            ceiling,
                        };
                        let got = podcap::max_pods(info, mode, cpus as u64, nitro).value;
                        let pd = cni == Cni::PrefixDelegation;
                        let want = calculator(*enis, *ips, max_eni, custom, pd, nitro, show, cpus);
                        assert_eq!(got as i64, want, "{t} {mode:?} cpus {cpus} nitro {nitro}");
                        checked += 1;
                    }
                }
            }
        }
    }
    assert_eq!(checked, 1384 * 5 * 2 * 5 * 2);
}

/// The calculator's test cases (awslabs/amazon-eks-ami, templates/test/cases/max-pods-cni-*.sh),
/// with each type's vCPUs and hypervisor as DescribeInstanceTypes gives them.
fn upstream(t: &str, cni: Cni, ceiling: Ceiling, vcpus: u64, nitro: bool) -> u64 {
    let mode = Mode {
        cni,
        ceiling,
        ..Mode::default()
    };
    podcap::max_pods(table::lookup(t).unwrap(), mode, vcpus, nitro).value
}

#[test]
fn upstream_m4_xlarge_cni_1_7_5() {
    // Xen, 4 vCPUs; CNI 1.7.5 has no prefix delegation.
    assert_eq!(
        upstream(
            "m4.xlarge",
            Cni::SecondaryIps,
            Ceiling::Recommended,
            4,
            false
        ),
        58
    );
}

#[test]
fn upstream_m5_8xlarge_cni_1_11_2() {
    assert_eq!(
        upstream(
            "m5.8xlarge",
            Cni::SecondaryIps,
            Ceiling::Recommended,
            32,
            true
        ),
        234
    );
}

#[test]
fn upstream_m5_8xlarge_cni_1_11_2_with_prefix_delegation() {
    assert_eq!(
        upstream(
            "m5.8xlarge",
            Cni::PrefixDelegation,
            Ceiling::Recommended,
            32,
            true
        ),
        250
    );
}

#[test]
fn upstream_c6in_32xlarge_cni_1_18_0_max_allowed() {
    // Two network cards of 8 ENIs each: only the default card's count.
    assert_eq!(
        upstream("c6in.32xlarge", Cni::SecondaryIps, Ceiling::None, 128, true),
        394
    );
}

/// bootstrap.sh's `get_cpu_millicores_to_reserve` as its shell arithmetic runs it.
fn bootstrap_cpu(nproc: i64) -> i64 {
    let total = nproc * 1000;
    let ranges = [0, 1000, 2000, 4000, total];
    let pct = [600, 100, 50, 25];
    let mut sum = 0;
    for i in 0..4 {
        let (start, end) = (ranges[i], ranges[i + 1]);
        if total > start {
            sum += ((if total < end { total } else { end }) - start) * pct[i] / 100 / 100;
        }
    }
    sum
}

#[test]
fn kube_reserved_is_bootstrap_sh_s_for_every_vcpu_count_and_max_pods() {
    for nproc in 1..=448 {
        assert_eq!(
            podcap::cpu_millicores_to_reserve(nproc as u64) as i64,
            bootstrap_cpu(nproc),
            "{nproc}"
        );
    }
    for max_pods in [1, 29, 110, 250, 737] {
        assert_eq!(
            podcap::memory_mebibytes_to_reserve(max_pods),
            11 * max_pods + 255
        );
    }
}

#[test]
fn the_command_prints_the_computation_offline() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_eks-nodeinit"))
        .args([
            "max-pods",
            "--instance-type",
            "m5.8xlarge",
            "--vcpus",
            "32",
            "--output",
            "json",
        ])
        .env_clear()
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["maxPods"]["value"], 234);
    assert_eq!(v["kubeReserved"]["value"]["memory"], "2829Mi");
    assert_eq!(v["kubeReserved"]["value"]["cpu"], "150m");
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_eks-nodeinit"))
        .args(["max-pods", "--instance-type", "m5.unknown", "--vcpus", "2"])
        .env_clear()
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--enis and --ipv4-per-eni"));
}

#[test]
fn the_generator_rebuilds_the_embedded_table_from_describe_instance_types() {
    // DescribeInstanceTypes output for every type in the table, out of order, each with a
    // second network card the generator must not count; one more type whose default card is
    // its second, and one with no ENI (left out).
    // The vCPUs where the table has them (VCpuInfo.DefaultVCpus).
    let vcpus = vcpus();
    let mut types: Vec<serde_json::Value> = rows()
        .iter()
        .rev()
        .map(|(t, enis, ips)| {
            let mut v = serde_json::json!({"InstanceType": t, "NetworkInfo": {
                "DefaultNetworkCardIndex": 0,
                "MaximumNetworkInterfaces": enis * 2,
                "NetworkCards": [
                    {"NetworkCardIndex": 0, "MaximumNetworkInterfaces": enis},
                    {"NetworkCardIndex": 1, "MaximumNetworkInterfaces": enis + 1}
                ],
                "Ipv4AddressesPerInterface": ips
            }});
            if let Some(n) = vcpus.get(t) {
                v["VCpuInfo"] = serde_json::json!({"DefaultVCpus": n});
            }
            v
        })
        .collect();
    types.push(
        serde_json::json!({"InstanceType": "zz1.second", "NetworkInfo": {
            "DefaultNetworkCardIndex": 1,
            "NetworkCards": [
                {"NetworkCardIndex": 0, "MaximumNetworkInterfaces": 2},
                {"NetworkCardIndex": 1, "MaximumNetworkInterfaces": 7}
            ],
            "Ipv4AddressesPerInterface": 30
        }}),
    );
    types.push(
        serde_json::json!({"InstanceType": "zz2.none", "NetworkInfo": {
            "NetworkCards": [], "Ipv4AddressesPerInterface": 30
        }}),
    );
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("types.json");
    std::fs::write(
        &input,
        serde_json::json!({ "InstanceTypes": types }).to_string(),
    )
    .unwrap();
    let out = std::process::Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tools/instance-table.py"
        ))
        .arg(&input)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let table = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/base/podcap/instance-info.jsonl"
    ))
    .unwrap();
    let extra =
        "{\"instanceType\":\"zz1.second\",\"defaultMaxENIs\":7,\"ipv4AddressesPerInterface\":30}\n";
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!("{table}{extra}")
    );
}

/// `init --dry-run` with this metadata file and config, EC2 at `ec2` (the SDK's endpoint, as
/// DescribeInstanceTypes has no setting of its own).
fn dry_run_with_ec2(ec2: &str, md: &Path, cfg: &Path, root: &Path) -> std::process::Output {
    common::run(
        common::cmd()
            .env("AWS_ENDPOINT_URL_EC2", ec2)
            .args(["init", "--dry-run", "--metadata"])
            .arg(md)
            .arg("--config")
            .arg(cfg)
            .arg("--root")
            .arg(root),
    )
}

/// Through the binary on moto (its requests recorded): a computed max pods for a type the
/// table lacks asks EC2 once and, EC2 not knowing it either, is a finding naming the type; a
/// fixed max pods never asks (the type's numbers would only feed a warning).
#[test]
fn only_a_computed_max_pods_asks_ec2_for_a_type_the_table_lacks() {
    let rec = tempfile::tempdir().unwrap();
    let log = rec.path().join("moto.jsonl");
    let Some(moto) = common::start_moto_with(&[
        ("MOTO_ENABLE_RECORDING", "1"),
        ("MOTO_RECORDER_FILEPATH", log.to_str().unwrap()),
    ]) else {
        return;
    };
    let root = common::sample_root("al2023-root");
    let md = root.path().join("md.json");
    std::fs::write(
        &md,
        serde_json::json!({"instanceId": "i-1", "privateIpv4": "10.0.0.1",
            "instanceType": "zz9.mega", "region": "us-east-1", "availabilityZone": "us-east-1a"})
        .to_string(),
    )
    .unwrap();
    // Requests moto served that are DescribeInstanceTypes.
    let calls = || {
        common::recorded_bodies(&log)
            .iter()
            .filter(|b| b.contains("Action=DescribeInstanceTypes"))
            .count()
    };
    for (max_pods, want_calls) in [(serde_json::json!(20), 0), (serde_json::json!({}), 1)] {
        let cfg = common::config_with(root.path(), "c.json", |v| {
            // Tagging's EC2 endpoint is tagging's alone: this one is never used.
            v["tagging"] =
                serde_json::json!({"enabled": false, "ec2Endpoint": "http://127.0.0.1:9"});
            v["kubelet"]["maxPods"] = max_pods.clone();
        });
        let before = calls();
        let out = dry_run_with_ec2(&moto.url, &md, &cfg, root.path());
        assert_eq!(calls() - before, want_calls, "maxPods {max_pods}");
        if want_calls == 0 {
            assert!(out.status.success(), "{out:?}");
        } else {
            assert_eq!(out.status.code(), Some(3));
            let err = common::stderr(&out);
            assert!(
                err.contains(
                    "kubelet.maxPods: zz9.mega is not in the embedded instance-type table"
                ) && err.contains("EC2 does not know zz9.mega either"),
                "{err}"
            );
        }
    }
}

/// An instance type no EC2 type can be (a typo in a metadata file) is refused by its grammar at
/// once, as a finding naming the metadata field with the value escaped and cut: never asked of
/// EC2 (it was, with retries until the deadline).
#[test]
fn an_instance_type_no_ec2_type_can_be_is_refused_before_any_call() {
    use common::ec2_server::{Ec2Server, Ec2State};
    let ec2 = Ec2Server::start(Ec2State::default());
    let root = common::sample_root("al2023-root");
    let md = root.path().join("md.json");
    let cfg = common::config_with(root.path(), "c.json", |v| {
        v["tagging"] = serde_json::json!({"enabled": false});
        v["kubelet"]["maxPods"] = serde_json::json!({});
    });
    let long = format!("*{}", "m".repeat(300));
    for (bad, shown) in [
        ("*m6i.large\r", "`*m6i.large\\r`".to_string()),
        (
            long.as_str(),
            format!("`*{}…(301 characters)`", "m".repeat(119)),
        ),
    ] {
        std::fs::write(
            &md,
            serde_json::json!({"instanceId": "i-1", "privateIpv4": "10.0.0.1",
                "instanceType": bad, "region": "us-east-1", "availabilityZone": "us-east-1a"})
            .to_string(),
        )
        .unwrap();
        let out = dry_run_with_ec2(&ec2.url(), &md, &cfg, root.path());
        assert_eq!(out.status.code(), Some(3));
        let err = common::stderr(&out);
        let field = format!("instanceType in the metadata file {}", md.display());
        assert!(
            err.contains(&format!("kubelet.maxPods: {field} is {shown}")) && !err.contains('\r'),
            "{err}"
        );
    }
    let calls = ec2.state.lock().unwrap().calls.len();
    assert_eq!(calls, 0, "nothing asked of EC2");
}

/// (type, vCPUs) as EC2 lists them, all Nitro, across families, sizes and both sides of the
/// 30-vCPU threshold.
const IPV6_TYPES: [(&str, i64); 26] = [
    ("t3.small", 2),
    ("t3.medium", 2),
    ("t4g.micro", 2),
    ("c6g.medium", 1),
    ("m5.large", 2),
    ("m5.xlarge", 4),
    ("m5.2xlarge", 8),
    ("m5.4xlarge", 16),
    ("m5.8xlarge", 32),
    ("m5.12xlarge", 48),
    ("m5.24xlarge", 96),
    ("m6i.large", 2),
    ("m6i.32xlarge", 128),
    ("m6a.large", 2),
    ("m7g.large", 2),
    ("m7i.48xlarge", 192),
    ("c5.large", 2),
    ("c5.9xlarge", 36),
    ("c6g.16xlarge", 64),
    ("c7g.4xlarge", 16),
    ("r5.large", 2),
    ("r6i.8xlarge", 32),
    ("r7g.16xlarge", 64),
    ("g5.xlarge", 4),
    ("inf2.xlarge", 4),
    ("p4d.24xlarge", 96),
];

/// The IPv6 rule as this test states it: the VPC CNI gives the node one /80 (2^48 addresses),
/// so the kubelet's ceiling binds: 250 above 30 vCPUs, else 110.
fn ipv6_rule(vcpus: i64) -> i64 {
    if vcpus > 30 {
        250
    } else {
        110
    }
}

#[test]
fn the_command_answers_the_ipv6_mode_on_every_listed_type_by_the_ceiling_alone() {
    let table: std::collections::BTreeMap<String, (i64, i64)> =
        rows().into_iter().map(|(t, e, i)| (t, (e, i))).collect();
    let mut over_the_ipv4_formula = 0;
    for (t, vcpus) in IPV6_TYPES {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_eks-nodeinit"))
            .args(["max-pods", "--instance-type", t, "--cni", "ipv6", "--vcpus"])
            .arg(vcpus.to_string())
            .args(["--output", "json"])
            .env_clear()
            .output()
            .unwrap();
        assert!(out.status.success(), "{t}: {out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let want = ipv6_rule(vcpus);
        assert_eq!(v["maxPods"]["value"], want, "{t}: {v:#}");
        let memory = format!("{}Mi", 255 + 11 * want);
        assert_eq!(v["kubeReserved"]["value"]["memory"], memory, "{t}");
        // What nodeadm and Karpenter set on the same node: the IPv4 formula, uncapped by them.
        let (enis, ips) = table[t];
        if calculator(enis, ips, None, false, false, true, true, vcpus) < want {
            over_the_ipv4_formula += 1;
        }
    }
    assert_eq!(over_the_ipv4_formula, 18);
    // Xen, custom networking and no ceiling are refused, each saying why.
    for (extra, says) in [
        (&["--xen"][..], "Nitro"),
        (&["--custom-networking"][..], "custom networking"),
        (&["--ceiling", "none"][..], "2^48"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_eks-nodeinit"))
            .args(["max-pods", "--instance-type", "m5.large", "--cni", "ipv6"])
            .args(["--vcpus", "2"])
            .args(extra)
            .env_clear()
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{extra:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(says),
            "{out:?}"
        );
    }
}
