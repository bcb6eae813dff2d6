//! Swap (`host.swap`, docs/resources.md): the kubelet told to start with swap on
//! (`failSwapOn: false`) and how pods may use it (`memorySwap.swapBehavior`).

use serde_json::json;

use crate::base::findings::Findings;
use crate::facts::{Facts, Family};
use crate::spec::Spec;

use super::KubeletIntent;

pub(crate) fn contribute(spec: &Spec, facts: &Facts, k: &mut KubeletIntent, _: &mut Findings) {
    let Some(w) = spec.host.as_ref().and_then(|h| h.swap.as_ref()) else {
        return;
    };
    k.set("failSwapOn", json!(false));
    k.set("memorySwap", json!({"swapBehavior": w.behavior}));
    if facts.family() == Some(Family::Al2) && w.behavior == "LimitedSwap" {
        k.warnings.push(
            "host.swap: Amazon Linux 2 runs cgroup v1, where the kubelet cannot limit a pod's swap (LimitedSwap needs cgroup v2): pods may swap without limit; use AL2023, or behavior NoSwap".into(),
        );
    }
}
