//! The checks that read only the node ([`crate::verify::check::Probe::local`]), planned as a
//! run would plan them but without an instance or a cluster: what `eks-nodeinit check` runs on
//! an image where it is built. Pure, as the plan is.

use crate::base::findings::Finding;
use crate::facts::Facts;
use crate::plan::aspects::{self, Input, REGISTRY};
use crate::plan::out::Out;
use crate::plan::step::{CheckStep, Step};
use crate::spec::Spec;

/// Every aspect's checks that read only the node and are not skipped here, in the plan's
/// order, and the findings planning makes of the config on this node (a run stops on them
/// before any change: a credential provider the image's kubelet refuses, a node file the
/// agent cannot keep), as `init` reports them when the config itself is wrong.
pub fn checks(spec: &Spec, facts: &Facts) -> (Vec<CheckStep>, Vec<Finding>) {
    let mut out = Out::default();
    let handoff = aspects::intent(spec, facts, &mut out.findings);
    let input = Input {
        spec,
        facts,
        handoff: &handoff,
    };
    for aspect in REGISTRY {
        (aspect.plan)(&input, &mut out);
    }

    let checks = out.steps.into_iter().filter_map(|s| match s {
        Step::Check(c) if c.check.skip.is_none() && c.check.probe.local() => Some(c),
        _ => None,
    });
    (checks.collect(), out.findings.0)
}
