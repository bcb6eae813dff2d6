//! Registration: the labels and taints the node registers with (role preset merged with the
//! config's, checked against kubelet's own rules by the spec) and `kubelet.extraArgs`.

use crate::base::findings::Findings;
use crate::facts::{Facts, Family};
use crate::spec::Spec;

use crate::plan::kubelet::KubeletIntent;

use super::{Aspect, Contribution};

pub(crate) const ASPECT: Aspect = Aspect {
    name: "registration",
    contribute: Contribution::Kubelet(contribute),
    ..Aspect::BASE
};

fn contribute(spec: &Spec, facts: &Facts, k: &mut KubeletIntent, _: &mut Findings) {
    let r = &spec.registration;
    k.labels.extend(r.labels.iter().cloned());
    k.taints.extend(r.taints.iter().cloned());
    k.flags.extend(r.extra_args.iter().cloned());
    // AL2's bootstrap.sh has no choice of name: the kubelet is told the instance id. (On AL2023
    // the NodeConfig's feature gate tells nodeadm, `handoff::al2023`.)
    let by_id = r.node_name == Some(crate::config::NodeNaming::InstanceId);
    if let (true, Some(Family::Al2), Some(md)) = (by_id, facts.family(), &facts.instance) {
        k.flags
            .push(format!("--hostname-override={}", md.instance_id));
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn on_al2_the_instance_id_name_is_the_kubelets_hostname_override() {
        use crate::plan::aspects::testing::{instance, spec};
        let s = spec(r#"{"cluster":{"name":"c"},"kubelet":{"nodeName":"instanceId"}}"#);
        for (family, flag) in [
            (crate::facts::Family::Al2, Some("--hostname-override=i-1")),
            (crate::facts::Family::Al2023, None),
        ] {
            let md = instance(&s, None).instance.unwrap();
            let facts = crate::facts::Facts::builder(family).instance(md).build();
            let mut k = crate::plan::kubelet::KubeletIntent::default();
            super::contribute(&s, &facts, &mut k, &mut Default::default());
            assert_eq!(k.flags.first().map(String::as_str), flag, "{family:?}");
        }
    }

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
