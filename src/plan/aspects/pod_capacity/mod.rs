//! Pod capacity (`kubelet.maxPods`, `kubelet.kubeReserved`, docs/pod-capacity.md): the kubelet's
//! max pods and kube-reserved with where each came from (`kubelet`), and the instance-type
//! cache: a DescribeInstanceTypes answer (for a type the embedded table lacks) kept on the node
//! so that a reboot or a rerun asks EC2 nothing.

mod kubelet;

use crate::base::podcap::cache::{self, CACHE};
use crate::base::podcap::{TypeFact, TypeSource};
use crate::facts::{current_of, Family};
use crate::plan::step::Mode;
use crate::spec::Spec;

use super::{Aspect, Contribution, Input, Out, Reads};

pub(crate) const ASPECT: Aspect = Aspect {
    name: "pod capacity",
    reads,
    contribute: Contribution::Kubelet(kubelet::contribute),
    plan,
};

const MODE: u32 = 0o644;

fn reads(spec: &Spec, _: Option<Family>, r: &mut Reads) {
    kubelet::reads(spec, r);
    if spec.kubelet.pod_capacity.max_pods.is_some() {
        r.file(CACHE);
    }
}

fn plan(i: &Input, out: &mut Out) {
    let Some(TypeFact::Known {
        info,
        source: TypeSource::Ec2,
    }) = i.facts.type_info
    else {
        return;
    };
    let Some(md) = &i.facts.instance else { return };
    let new = cache::text(&md.instance_type, info);
    let file = i.facts.file(CACHE);
    let Some(old) = current_of(file, CACHE, "kubelet.maxPods", &mut out.findings) else {
        return;
    };
    let purpose = "instance-type cache (DescribeInstanceTypes)";
    out.file_from(old, CACHE, purpose, new, Mode::Keep(MODE));
}

#[cfg(test)]
mod tests {
    use super::super::testing::{run, spec, Facts};
    use super::*;
    use crate::base::podcap::TypeInfo;
    use crate::plan::step::Step;
    use std::path::PathBuf;

    fn facts(source: TypeSource, cached: Option<&str>) -> Facts {
        let b = Facts::builder(Family::Al2023)
            .instance(crate::instance::metadata::Metadata {
                instance_type: "x9.large".into(),
                ..Default::default()
            })
            .type_info(TypeFact::Known {
                info: TypeInfo {
                    enis: 4,
                    ipv4_per_eni: 15,
                },
                source,
            });
        match cached {
            Some(t) => b.file(CACHE, t),
            None => b.absent([CACHE]),
        }
        .build()
    }

    #[test]
    fn an_answer_from_ec2_is_kept_once() {
        let s = spec(r#"{"cluster":{"name":"c"},"kubelet":{"maxPods":{"ceiling":"none"}}}"#);
        let out = run(&ASPECT, &s, &facts(TypeSource::Ec2, None));
        let [Step::File(crate::plan::step::File { path, new, .. })] = &out.steps[..] else {
            panic!("{:?}", out.steps)
        };
        assert_eq!(path, &PathBuf::from(CACHE));
        let again = run(&ASPECT, &s, &facts(TypeSource::Ec2, Some(new)));
        assert!(again.steps.is_empty());
        let table = run(&ASPECT, &s, &facts(TypeSource::Table, None));
        assert!(table.steps.is_empty());
    }
}
