//! Registration: the labels and taints the node registers with (role preset merged with the
//! config's, checked against kubelet's own rules by the spec) and `kubelet.extraArgs`.

use crate::facts::Facts;
use crate::findings::Findings;
use crate::spec::Spec;

use super::KubeletIntent;

pub fn contribute(spec: &Spec, _: &Facts, k: &mut KubeletIntent, _: &mut Findings) {
    let r = &spec.registration;
    k.labels.extend(r.labels.iter().cloned());
    k.taints.extend(r.taints.iter().cloned());
    k.flags.extend(r.extra_args.iter().cloned());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::Family;

    #[test]
    fn labels_taints_and_extra_flags() {
        let c = r#"{"cluster":{"name":"c"},"labels":{"b":"2","a":"1"},"taints":["x=y:NoSchedule"],"kubelet":{"extraArgs":["--v=4"]}}"#;
        let s = crate::spec::from_config(&crate::config::parse(c, "t").unwrap()).unwrap();
        let mut k = KubeletIntent::default();
        contribute(
            &s,
            &Facts::builder(Family::Al2).build(),
            &mut k,
            &mut Findings::default(),
        );
        assert_eq!(
            k.labels,
            [("a".into(), "1".into()), ("b".into(), "2".into())]
        );
        assert_eq!(k.taints.len(), 1);
        assert_eq!(k.flags, ["--v=4"]);
    }
}
