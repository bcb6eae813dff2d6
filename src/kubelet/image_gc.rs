//! Image garbage collection: `imageGCHighThresholdPercent` and `imageGCLowThresholdPercent`
//! (checked in range and ordered by `spec::kubelet`).

use crate::facts::Facts;
use crate::findings::Findings;
use crate::spec::Spec;

use super::KubeletIntent;

pub fn contribute(spec: &Spec, _: &Facts, k: &mut KubeletIntent, _: &mut Findings) {
    if let Some(x) = spec.kubelet.image_gc_high {
        k.set("imageGCHighThresholdPercent", x.into());
    }
    if let Some(x) = spec.kubelet.image_gc_low {
        k.set("imageGCLowThresholdPercent", x.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::Family;

    #[test]
    fn sets_only_the_thresholds_given() {
        let mut s = crate::spec::resolve(
            &crate::config::parse(r#"{"cluster":{"name":"c"}}"#, "t").unwrap(),
        )
        .0;
        s.kubelet.image_gc_low = Some(70);
        let mut k = KubeletIntent::default();
        contribute(
            &s,
            &Facts::builder(Family::Al2).build(),
            &mut k,
            &mut Findings::default(),
        );
        assert_eq!(k.config, [("imageGCLowThresholdPercent", 70.into())]);
    }
}
