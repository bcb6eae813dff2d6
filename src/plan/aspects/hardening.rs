//! The hardened-AMI checks (`verify.hardening`, docs/hardening.md): before the hand-off, what a
//! CIS- or STIG-hardened custom AMI changes that would stop the kubelet, containerd or nodeadm,
//! one check each ([`crate::verify::hardening`]), in `fail` mode before any change (a failure
//! stops the run: no hand-off, the launch hook abandoned), in `warn` mode beside the changes.
//! Their results are the report's `checks`, which `status` shows beside the join's own.

use std::collections::BTreeMap;

use crate::config::CheckMode;
use crate::facts::Family;
use crate::plan::step::{CheckStep, Step, When};
use crate::spec::Spec;
use crate::verify::hardening::{Exec, Fips, KernelDefaults, Selinux, KERNEL_DEFAULTS};
use crate::verify::Check;

use super::{Aspect, Input, Out, Reads};

pub(crate) const ASPECT: Aspect = Aspect {
    name: "hardening",
    reads,
    plan,
    ..Aspect::BASE
};

/// The directories the node executes from, each with who does. `/run/containerd` and `/tmp`
/// are not among them (Bottlerocket mounts both noexec); whether a noexec filesystem under
/// `/var/lib/containerd`'s overlay snapshots stops a container is not established, so it is
/// not claimed.
const DIRS: [(&str, &str); 3] = [
    ("/opt/cni/bin", "containerd runs the CNI plugins from it for every pod's network"),
    ("/var/lib/kubelet", "the pods' disk-backed volumes (emptyDir, configMap) are bind-mounted from under it and keep its noexec, so a pod cannot run what they hold"),
    (CREDENTIAL_PROVIDERS, "the kubelet runs the ECR credential provider from it to pull private images"),
];

/// The Node condition the checks share, whichever phase they ran in: `True` once every one
/// passed, else `False` with the first failure (docs/hardening.md).
pub const CONDITION: &str = "eks-nodeinit.io/HardeningFit";

/// Where both AMIs keep the kubelet's image credential providers.
const CREDENTIAL_PROVIDERS: &str = "/etc/eks/image-credential-provider";

fn reads(spec: &Spec, family: Option<Family>, r: &mut Reads) {
    // Whether the AL2 kubelet config turns protectKernelDefaults on.
    if spec.verify.hardening != CheckMode::Off && family == Some(Family::Al2) {
        r.file(spec.kubelet.config_path.clone());
    }
}

/// The hand-off's programs on this family, by node path.
fn programs(spec: &Spec, family: Family) -> BTreeMap<String, String> {
    let path = |p: &std::path::Path| p.display().to_string();
    let mut v = BTreeMap::from([
        ("/usr/bin/kubelet".to_string(), "kubelet".to_string()),
        ("/usr/bin/containerd".to_string(), "containerd".to_string()),
        (
            format!("{CREDENTIAL_PROVIDERS}/ecr-credential-provider"),
            "the ECR credential provider".to_string(),
        ),
    ]);
    match family {
        Family::Al2 => v.insert(path(&spec.bootstrap.path), "bootstrap.sh".into()),
        Family::Al2023 => v.insert(path(&spec.nodeconfig.nodeadm_path), "nodeadm".into()),
    };
    v
}

fn plan(i: &Input, out: &mut Out) {
    let (spec, facts) = (i.spec, i.facts);
    let Some(when) = When::of_checks(spec.verify.hardening) else {
        return;
    };
    let Some(family) = facts.family() else {
        return;
    };
    let mut checks = Vec::new();
    if let Some(by) = crate::plan::kubelet::file::protect_kernel_defaults(spec, facts) {
        let sets = KERNEL_DEFAULTS.iter().filter_map(|(k, _)| {
            let v = spec.sysctls.get(*k)?;
            Some((k.to_string(), v.clone()))
        });
        checks.push(Check::new(KernelDefaults {
            protected_by: by,
            agent_sets: sets.collect(),
            next_boot: false,
        }));
    }
    let dirs = DIRS.iter().map(|(d, w)| (d.to_string(), w.to_string()));
    checks.push(Check::new(Exec {
        dirs: dirs.collect(),
        programs: programs(spec, family),
    }));
    checks.push(Check::new(Selinux {}));
    checks.push(Check::new(Fips {}));
    for check in checks {
        let step = CheckStep::new(check, when, spec.verify.budget).condition(CONDITION);
        out.steps.push(Step::Check(step));
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{run, spec};
    use super::*;
    use crate::facts::Facts;
    use crate::plan::step::{Step, When};

    fn planned(config: &str, family: Family) -> Vec<(serde_json::Value, When)> {
        let s = spec(config);
        let out = run(&ASPECT, &s, &Facts::builder(family).build());
        let check = |st: &Step| match st {
            Step::Check(c) => (serde_json::to_value(&c.check).unwrap(), c.when),
            other => panic!("{other:?}"),
        };
        out.steps.iter().map(check).collect()
    }

    #[test]
    fn each_check_is_planned_in_the_mode_with_the_familys_programs() {
        let c = r#"{"cluster":{"name":"c"},"verify":{"hardening":"fail"},"sysctls":{"kernel.panic":10,"vm.swappiness":1}}"#;
        let checks = planned(c, Family::Al2023);
        let kinds: Vec<&str> = checks
            .iter()
            .map(|(v, _)| v["check"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["kernelDefaults", "exec", "selinux", "fips"]);
        assert!(checks.iter().all(|(_, w)| *w == When::First));
        // The agent's own value of a demanded key, and nothing else of its sysctls.
        assert_eq!(
            checks[0].0["agentSets"],
            serde_json::json!({"kernel.panic": "10"})
        );
        assert_eq!(
            checks[0].0["protectedBy"],
            "nodeadm's generated kubelet config"
        );
        let programs = checks[1].0["programs"].as_object().unwrap();
        assert_eq!(programs["/usr/bin/nodeadm"], "nodeadm");
        assert!(!programs.contains_key("/etc/eks/bootstrap.sh"));
        // AL2 without a kubelet config that protects: no kernel check; bootstrap.sh's program.
        let checks = planned(r#"{"cluster":{"name":"c"}}"#, Family::Al2);
        assert_eq!(checks.len(), 3);
        assert_eq!(
            checks[0].0["programs"]["/etc/eks/bootstrap.sh"],
            "bootstrap.sh"
        );
        assert!(checks.iter().all(|(_, w)| *w == When::Beside));
        assert!(planned(
            r#"{"cluster":{"name":"c"},"verify":{"hardening":"off"}}"#,
            Family::Al2
        )
        .is_empty());
    }
}
