//! Swap (`host.swap`, docs/resources.md): the kubelet told to start with swap on
//! (`failSwapOn: false`) and how pods may use it (`memorySwap.swapBehavior`).

use serde_json::json;

use crate::base::findings::Findings;
use crate::facts::{Facts, Family};
use crate::spec::Spec;

use super::KubeletIntent;

pub(crate) fn contribute(spec: &Spec, facts: &Facts, k: &mut KubeletIntent, f: &mut Findings) {
    let Some(w) = spec.host.as_ref().and_then(|h| h.swap.as_ref()) else {
        return;
    };
    k.set("failSwapOn", json!(false));
    k.set("memorySwap", json!({"swapBehavior": w.behavior}));
    // The kubelet exits at start with LimitedSwap on cgroup v1 ("only supported with
    // cgroupv2"), which Amazon Linux 2 runs.
    if facts.family() == Some(Family::Al2) && w.behavior == "LimitedSwap" {
        f.push(
            "host.swap.behavior",
            "LimitedSwap needs cgroup v2 and Amazon Linux 2 runs cgroup v1: the kubelet would exit at start; set behavior NoSwap on AL2, or use AL2023",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::aspects::testing::spec;

    const LIMITED: &str =
        r#"{"cluster":{"name":"c"},"host":{"swap":{"size":"1Gi","behavior":"LimitedSwap"}}}"#;

    fn contributed(family: Family) -> (KubeletIntent, Vec<String>) {
        let facts = Facts::builder(family).build();
        let (mut k, mut f) = (KubeletIntent::default(), Findings::default());
        contribute(&spec(LIMITED), &facts, &mut k, &mut f);
        (k, f.0.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn the_kubelet_starts_with_swap_and_its_behavior() {
        let (k, f) = contributed(Family::Al2023);
        assert!(f.is_empty(), "{f:?}");
        assert_eq!(
            k.config,
            [
                ("failSwapOn", json!(false)),
                ("memorySwap", json!({"swapBehavior": "LimitedSwap"})),
            ]
        );
    }

    #[test]
    fn limited_swap_on_al2_is_a_finding() {
        let (_, f) = contributed(Family::Al2);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].starts_with("host.swap.behavior: LimitedSwap needs cgroup v2"),
            "{f:?}"
        );
    }
}
