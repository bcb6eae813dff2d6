//! Graceful node shutdown: `shutdownGracePeriod` and `shutdownGracePeriodCriticalPods`, as the
//! Go durations the config gave (logind's delay follows the grace period: `aspects::logind`).

use crate::base::findings::Findings;
use crate::facts::Facts;
use crate::spec::Spec;

use crate::plan::kubelet::KubeletIntent;

use super::{Aspect, Contribution};

pub(crate) const ASPECT: Aspect = Aspect {
    name: "shutdown",
    contribute: Contribution::Kubelet(contribute),
    ..Aspect::BASE
};

fn contribute(spec: &Spec, _: &Facts, k: &mut KubeletIntent, _: &mut Findings) {
    if let Some(d) = &spec.kubelet.shutdown_grace_period {
        k.set("shutdownGracePeriod", d.text.clone().into());
    }
    if let Some(d) = &spec.kubelet.shutdown_grace_period_critical_pods {
        k.set("shutdownGracePeriodCriticalPods", d.text.clone().into());
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn durations_as_written() {
        let c = r#"{"cluster":{"name":"c"},"kubelet":{"shutdownGracePeriod":"1m30s","shutdownGracePeriodCriticalPods":"30s"}}"#;
        let k = crate::plan::aspects::testing::contributed(super::contribute, c);
        let want = [
            ("shutdownGracePeriod", "1m30s".into()),
            ("shutdownGracePeriodCriticalPods", "30s".into()),
        ];
        assert_eq!(k.config, want);
    }
}
