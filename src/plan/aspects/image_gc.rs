//! Image garbage collection: `imageGCHighThresholdPercent` and `imageGCLowThresholdPercent`
//! (checked in range and ordered by `spec::kubelet`).

use crate::base::findings::Findings;
use crate::facts::Facts;
use crate::spec::Spec;

use crate::plan::kubelet::KubeletIntent;

use super::{Aspect, Contribution};

pub(crate) const ASPECT: Aspect = Aspect {
    name: "image gc",
    contribute: Contribution::Kubelet(contribute),
    ..Aspect::BASE
};

fn contribute(spec: &Spec, _: &Facts, k: &mut KubeletIntent, _: &mut Findings) {
    if let Some(x) = spec.kubelet.image_gc_high {
        k.set("imageGCHighThresholdPercent", x.into());
    }
    if let Some(x) = spec.kubelet.image_gc_low {
        k.set("imageGCLowThresholdPercent", x.into());
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sets_only_the_thresholds_given() {
        let c = r#"{"cluster":{"name":"c"},"kubelet":{"imageGCLowThresholdPercent":70}}"#;
        let k = crate::plan::aspects::testing::contributed(super::contribute, c);
        assert_eq!(k.config, [("imageGCLowThresholdPercent", 70.into())]);
    }
}
