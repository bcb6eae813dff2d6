//! Registration: the labels and taints the node registers with (role preset merged with the
//! config's, checked against kubelet's own rules by the spec) and `kubelet.extraArgs`.

use crate::base::findings::Findings;
use crate::facts::Facts;
use crate::spec::Spec;

use crate::plan::kubelet::KubeletIntent;

use super::{Aspect, Contribution};

pub(crate) const ASPECT: Aspect = Aspect {
    name: "registration",
    contribute: Contribution::Kubelet(contribute),
    ..Aspect::BASE
};

fn contribute(spec: &Spec, _: &Facts, k: &mut KubeletIntent, _: &mut Findings) {
    let r = &spec.registration;
    k.labels.extend(r.labels.iter().cloned());
    k.taints.extend(r.taints.iter().cloned());
    k.flags.extend(r.extra_args.iter().cloned());
}

#[cfg(test)]
mod tests {
    #[test]
    fn labels_taints_and_extra_flags() {
        let c = r#"{"cluster":{"name":"c"},"labels":{"b":"2","a":"1"},"taints":["x=y:NoSchedule"],"kubelet":{"extraArgs":["--v=4"]}}"#;
        let k = crate::plan::aspects::testing::contributed(super::contribute, c);
        let labels = [("a".to_string(), "1".to_string()), ("b".into(), "2".into())];
        assert_eq!(k.labels, labels);
        assert_eq!(k.taints[0].text, "x=y:NoSchedule");
        assert_eq!(k.flags, ["--v=4"]);
    }
}
