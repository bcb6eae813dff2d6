//! Kernel sysctls: set live under `<root>/proc/sys` and persisted in one file under
//! `/etc/sysctl.d/`, rewritten whole on every change (never appended to). Values that kubelet's
//! `protectKernelDefaults` would refuse are findings before anything changes.

use std::collections::BTreeMap;
use std::path::Path;

use crate::base::text::printable;
use crate::facts::Family;
use crate::plan::step::{Live, Mode, Step};
use crate::spec::Spec;

pub use crate::spec::sysctls::check_key;

use super::{Aspect, Input, Out, Reads};
use crate::facts::Read;

pub(crate) const ASPECT: Aspect = Aspect {
    name: "sysctls",
    reads,
    plan,
    contribute: super::Contribution::Nothing,
};

/// The persisted file. `99-zz-` sorts after the distribution's `99-sysctl.conf`, so a later file
/// does not silently undo the agent's values.
pub const PERSIST_PATH: &str = "/etc/sysctl.d/99-zz-eks-nodeinit.conf";

/// The ports the kernel keeps out of its ephemeral range, a list the AMI sets too.
pub const RESERVED_PORTS: &str = "net.ipv4.ip_local_reserved_ports";
/// Where the AL2023 AMI reserves its add-ons' ports (amazon-eks-ami
/// templates/al2023/runtime/rootfs/etc/sysctl.d/67-eks-reserved-ports.conf): pod identity's
/// 2703, the EBS and EFS CSI drivers' 9808 and 9809, the kubelet's and kube-proxy's, the VPC CNI's
/// 61678-61679.
pub const AMI_RESERVED_PORTS: &str = "/etc/sysctl.d/67-eks-reserved-ports.conf";

fn reads(spec: &Spec, _: Option<Family>, r: &mut Reads) {
    r.extend(spec.sysctls.keys().map(|k| Read::Sysctl(k.clone())));
    r.file(PERSIST_PATH);
    if spec.sysctls.contains_key(RESERVED_PORTS) {
        r.file(AMI_RESERVED_PORTS);
    }
}

/// The config's reserved ports with the AMI's added (the AMI's file sorts before the agent's,
/// whose value would otherwise replace its list): the merged list as the kernel shows it, and
/// what the plan says of it; the config's value as it is when the AMI has no such file.
fn reserved_ports(
    facts: &crate::facts::Facts,
    v: &str,
) -> Result<(String, Option<String>), String> {
    let mine = crate::base::ports::parse(v)?;
    // Unreadable is not absent: the agent's value would drop the AMI's ports unseen.
    let ami = facts.file_text(AMI_RESERVED_PORTS)?.unwrap_or_default();
    // systemd-sysctl's reading: the last assignment wins; `-key` (errors ignored) and the
    // `net/ipv4/…` spelling name the same key.
    let mut line = ami.lines().filter_map(|l| {
        let (k, val) = l.split_once('=')?;
        let k = k.trim().trim_start_matches('-').replace('/', ".");
        (k == RESERVED_PORTS).then(|| val.trim().to_string())
    });
    let line = line.next_back();
    let Some(theirs) = line else {
        return Ok((crate::base::ports::render(&mine), None));
    };
    let theirs =
        crate::base::ports::parse(&theirs).map_err(|e| format!("{AMI_RESERVED_PORTS}: {e}"))?;
    let added: std::collections::BTreeSet<u16> = theirs.difference(&mine).copied().collect();
    let merged = mine.union(&theirs).copied().collect();
    let said = (!added.is_empty()).then(|| {
        format!(
            "sysctls[\"{RESERVED_PORTS}\"]: the AMI's reserved ports {} ({AMI_RESERVED_PORTS}) kept beside the config's",
            crate::base::ports::render(&added)
        )
    });
    Ok((crate::base::ports::render(&merged), said))
}

fn plan(i: &Input, out: &mut Out) {
    let (spec, facts) = (i.spec, i.facts);
    let mut wanted = BTreeMap::new();
    let protector = crate::plan::kubelet::file::protect_kernel_defaults(spec, facts);
    for (k, v) in &spec.sysctls {
        let field = format!("sysctls[\"{}\"]", printable(k));
        let merged;
        let v = match k.as_str() {
            RESERVED_PORTS => match reserved_ports(facts, v) {
                Ok((m, said)) => {
                    out.notes.extend(said.map(|line| crate::plan::step::Note {
                        key: "reservedPorts".into(),
                        value: serde_json::json!({ "merged": m }),
                        lines: vec![line],
                    }));
                    merged = m;
                    &merged
                }
                Err(e) => {
                    out.findings.push(field, e);
                    continue;
                }
            },
            _ => v,
        };
        if let Some(protector) = &protector {
            let defaults = crate::base::k8s::KUBELET_KERNEL_DEFAULTS;
            if let Some((_, need)) = defaults.iter().find(|(pk, _)| pk == k) {
                if *v != need.to_string() {
                    out.findings.push(field, format!(
                        "{v} contradicts kubelet's protectKernelDefaults (on in {protector}), which requires {k} = {need}: kubelet would refuse to start; remove it or use {need}"
                    ));
                    continue;
                }
            }
        }
        match facts.sysctl(k) {
            Some(Ok(old)) => {
                if old != v {
                    out.steps.push(Step::Live(Live {
                        key: k.clone(),
                        path: Path::new("/proc/sys").join(k.replace('.', "/")),
                        old: old.clone(),
                        new: v.clone(),
                        read_back: None,
                    }));
                }
                wanted.insert(k.clone(), v.clone());
            }
            Some(Err(e)) => out.findings.push(field, e.clone()),
            None => out.findings.push(field, "was not read from the node"),
        }
    }
    let Some(existing) = facts.current_file(PERSIST_PATH, "sysctls", &mut out.findings) else {
        return;
    };
    if spec.sysctls.is_empty() && existing.content.is_none() {
        return;
    }
    let new = persisted_content(&wanted);
    out.file_from(
        existing,
        PERSIST_PATH,
        "persisted sysctls",
        new,
        Mode::Keep(0o644),
    );
}

/// The persisted file's content for these sysctls (sorted by key).
pub fn persisted_content(sysctls: &BTreeMap<String, String>) -> String {
    let mut s = String::from(
        "# Written by eks-nodeinit from its config; rewritten on every run. Do not edit:\n# change the config's `sysctls` instead.\n",
    );
    for (k, v) in sysctls {
        s.push_str(&format!("{k} = {v}\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::testing::{findings, run, spec, Facts};
    use super::*;

    const CONFIG: &str = r#"{"cluster":{"name":"c"},"sysctls":{"vm.max_map_count":262144}}"#;

    /// A node of `family` where `key` reads `live` and nothing is persisted yet.
    fn node(family: Family, key: &str, live: Result<&str, &str>) -> Facts {
        Facts::builder(family)
            .sysctl(key, live)
            .absent([PERSIST_PATH])
            .build()
    }

    #[test]
    fn reserved_ports_keep_the_amis_beside_the_configs_and_converge() {
        let ami = "# The AMI's add-ons.\nnet.ipv4.ip_local_reserved_ports = 2703,9808,9809,10249,10250,10256,61678,61679\n";
        let c = r#"{"cluster":{"name":"c"},"sysctls":{"net.ipv4.ip_local_reserved_ports":"30000-30001,2703"}}"#;
        let merged = "2703,9808-9809,10249-10250,10256,30000-30001,61678-61679";
        let facts = Facts::builder(Family::Al2023)
            .sysctl(
                RESERVED_PORTS,
                Ok("2703,9808-9809,10249-10250,10256,61678-61679"),
            )
            .file(AMI_RESERVED_PORTS, ami)
            .absent([PERSIST_PATH])
            .build();
        let out = run(&ASPECT, &spec(c), &facts);
        assert!(
            matches!(&out.steps[0], Step::Live(crate::plan::step::Live { new, .. }) if new == merged),
            "{:?}",
            out.steps
        );
        assert!(
            out.notes[0].lines[0].contains("9808-9809,10249-10250,10256,61678-61679"),
            "{:?}",
            out.notes
        );
        // Applied and persisted: the second run plans nothing.
        let persisted =
            persisted_content(&[(RESERVED_PORTS.to_string(), merged.to_string())].into());
        let facts = Facts::builder(Family::Al2023)
            .sysctl(RESERVED_PORTS, Ok(merged))
            .file(AMI_RESERVED_PORTS, ami)
            .file(PERSIST_PATH, &persisted)
            .build();
        assert!(run(&ASPECT, &spec(c), &facts).steps.is_empty());
        // Without the AMI's file, the config's list as the kernel shows it; a bad list a finding.
        let facts = Facts::builder(Family::Al2)
            .sysctl(RESERVED_PORTS, Ok(""))
            .absent([PERSIST_PATH, AMI_RESERVED_PORTS])
            .build();
        let out = run(&ASPECT, &spec(c), &facts);
        assert!(
            matches!(&out.steps[0], Step::Live(crate::plan::step::Live { new, .. }) if new == "2703,30000-30001")
        );
        let bad =
            r#"{"cluster":{"name":"c"},"sysctls":{"net.ipv4.ip_local_reserved_ports":"9-3"}}"#;
        assert!(findings(&run(&ASPECT, &spec(bad), &facts))[0].contains("backwards"));
    }

    #[test]
    fn the_amis_list_is_read_as_systemd_sysctl_reads_it_and_unreadable_is_not_absent() {
        let c =
            r#"{"cluster":{"name":"c"},"sysctls":{"net.ipv4.ip_local_reserved_ports":"30000"}}"#;
        let live = |facts: crate::facts::FactsBuilder| {
            let out = run(&ASPECT, &spec(c), &facts.absent([PERSIST_PATH]).build());
            match &out.steps[..] {
                [Step::Live(l), ..] => Ok(l.new.clone()),
                _ => Err(findings(&out)),
            }
        };
        // The last assignment wins; `-key` and the slash spelling name the same key.
        let ami =
            "net.ipv4.ip_local_reserved_ports = 1\n-net/ipv4/ip_local_reserved_ports = 2703\n";
        let node = Facts::builder(Family::Al2023).sysctl(RESERVED_PORTS, Ok(""));
        assert_eq!(
            live(node.file(AMI_RESERVED_PORTS, ami)),
            Ok("2703,30000".into())
        );
        let unreadable = crate::os::fsutil::FileFact {
            content: Err("Permission denied".into()),
            mode: None,
            link: None,
        };
        let node = Facts::builder(Family::Al2023).sysctl(RESERVED_PORTS, Ok(""));
        let f = live(node.file_fact(AMI_RESERVED_PORTS, unreadable)).unwrap_err();
        assert!(
            f[0].contains("cannot read /etc/sysctl.d/67-eks-reserved-ports.conf"),
            "{f:?}"
        );
    }

    #[test]
    fn a_live_value_that_differs_is_set_and_persisted() {
        let facts = node(Family::Al2023, "vm.max_map_count", Ok("65530"));
        let out = run(&ASPECT, &spec(CONFIG), &facts);
        assert!(
            matches!(&out.steps[0], Step::Live(crate::plan::step::Live { old, new, .. }) if old == "65530" && new == "262144")
        );
        assert!(
            matches!(&out.steps[1], Step::File(crate::plan::step::File { path, new, .. })
            if path == Path::new(PERSIST_PATH) && new.ends_with("vm.max_map_count = 262144\n"))
        );
    }

    #[test]
    fn a_converged_node_plans_nothing() {
        let persisted =
            persisted_content(&[("vm.max_map_count".to_string(), "262144".to_string())].into());
        let facts = Facts::builder(Family::Al2023)
            .sysctl("vm.max_map_count", Ok("262144"))
            .file(PERSIST_PATH, &persisted)
            .build();
        assert!(run(&ASPECT, &spec(CONFIG), &facts).steps.is_empty());
    }

    #[test]
    fn a_value_protect_kernel_defaults_refuses_is_a_finding() {
        // nodeadm's kubelet config has protectKernelDefaults on.
        let s = spec(r#"{"cluster":{"name":"c"},"sysctls":{"vm.overcommit_memory":0}}"#);
        let facts = node(Family::Al2023, "vm.overcommit_memory", Ok("1"));
        let f = findings(&run(&ASPECT, &s, &facts));
        assert!(
            f[0].contains("contradicts kubelet's protectKernelDefaults"),
            "{f:?}"
        );
    }

    #[test]
    fn an_unreadable_live_value_is_a_finding_naming_the_key() {
        let facts = node(Family::Al2, "vm.max_map_count", Err("cannot read it"));
        let f = findings(&run(&ASPECT, &spec(CONFIG), &facts));
        assert_eq!(f, ["sysctls[\"vm.max_map_count\"]: cannot read it"]);
    }
}
