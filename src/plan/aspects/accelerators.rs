//! The accelerator checks (`verify.accelerators`, docs/accelerators.md): on an instance type the
//! embedded table lists with NVIDIA GPUs or EFA, one check before the kubelet starts
//! ([`crate::verify::accelerators`]) within `verify.accelerators.wait`, its result the Node
//! condition [`CONDITION`]. Where the type takes EFA and the config names no count, the check
//! asks EC2 how many EFA interfaces are attached.

use crate::plan::step::{CheckStep, Step, When};
use crate::verify::accelerators::{Accelerators, AskEc2};
use crate::verify::Check;

use super::{Aspect, Input, Out};

pub(crate) const ASPECT: Aspect = Aspect {
    name: "accelerators",
    plan,
    ..Aspect::BASE
};

/// The Node condition the check's result is: `True` once the GPUs and EFA devices are ready,
/// else `False` with what was last seen. Never the node monitoring agent's
/// `AcceleratedHardwareReady`, which it sets True when it starts and rewrites every heartbeat.
pub const CONDITION: &str = "eks-nodeinit.io/AcceleratorsReady";

/// Where the driver's user-space tools are.
const NVIDIA_SMI: &str = "/usr/bin/nvidia-smi";

fn plan(i: &Input, out: &mut Out) {
    let (spec, facts) = (i.spec, i.facts);
    let a = &spec.verify.accelerators;
    let (Some(md), Some(_)) = (&facts.instance, facts.family()) else {
        return;
    };
    let table = crate::base::accelerators::of(&md.instance_type);
    if !a.on || !(table.any() || a.efa.is_some_and(|n| n > 0)) {
        return;
    }
    let ask = (a.efa.is_none() && table.max_efa > 0).then(|| AskEc2 {
        region: md.region.clone(),
        instance_id: md.instance_id.clone(),
        endpoints: facts.endpoints(),
    });
    let probe = Accelerators {
        instance_type: md.instance_type.clone(),
        gpus: table.gpus,
        efa: a.efa,
        ask,
        operator_driver: a.operator_driver,
        mig: a.mig,
        nvidia_smi: NVIDIA_SMI.into(),
    };
    let step = CheckStep::new(Check::new(probe), When::Gate, a.wait).condition(CONDITION);
    out.steps.push(Step::Check(step));
}

#[cfg(test)]
mod tests {
    use super::super::testing::{run, spec};
    use super::*;
    use crate::facts::{Facts, Family};
    use crate::instance::metadata::Metadata;

    fn on(instance_type: &str, config: &str) -> Vec<Step> {
        let md = Metadata {
            instance_id: "i-1".into(),
            instance_type: instance_type.into(),
            region: "us-east-1".into(),
            ..Metadata::default()
        };
        let facts = Facts::builder(Family::Al2023).instance(md).build();
        run(&ASPECT, &spec(config), &facts).steps
    }

    fn probe(steps: &[Step]) -> serde_json::Value {
        match steps {
            [Step::Check(c)] => {
                assert_eq!(
                    (c.when, c.condition.as_deref()),
                    (When::Gate, Some(CONDITION))
                );
                c.check.probe.fields()
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_gpu_or_efa_type_is_checked_before_the_kubelet_and_others_are_not() {
        let c = r#"{"cluster":{"name":"c"}}"#;
        let p5 = probe(&on("p5.48xlarge", c));
        assert_eq!(
            (p5["gpus"].as_u64(), p5["ask"]["instanceId"].as_str()),
            (Some(8), Some("i-1"))
        );
        let g4 = probe(&on("g4dn.xlarge", c));
        assert_eq!((g4["gpus"].as_u64(), g4.get("ask")), (Some(1), None));
        assert!(on("m6i.large", c).is_empty());
        let off = r#"{"cluster":{"name":"c"},"verify":{"accelerators":{"check":"off"}}}"#;
        assert!(on("p5.48xlarge", off).is_empty());
        let pinned = r#"{"cluster":{"name":"c"},"verify":{"accelerators":{"efa":2,"driver":"operator","mig":"enabled","wait":"90s"}}}"#;
        let p = probe(&on("p4d.24xlarge", pinned));
        assert_eq!((p["efa"].as_u64(), p.get("ask")), (Some(2), None));
        assert_eq!(
            (p["operatorDriver"].as_bool(), p["mig"].as_bool()),
            (Some(true), Some(true))
        );
        match &on("p4d.24xlarge", pinned)[..] {
            [Step::Check(c)] => assert_eq!(c.budget_ms, 90_000),
            other => panic!("{other:?}"),
        }
    }
}
