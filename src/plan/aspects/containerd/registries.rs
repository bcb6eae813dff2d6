//! Container registry mirrors and CAs (`registries`): each configured registry goes into the
//! containerd part of the hand-off intent, which writes its hosts directory on both families
//! ([`super::render`]).

use super::render::hosts_paths;
use crate::base::findings::Findings;
use crate::facts::{Facts, Family};
use crate::plan::handoff::HandoffIntent;
use crate::spec::Spec;

use crate::plan::aspects::{Aspect, Contribution, Reads};

pub(crate) const ASPECT: Aspect = Aspect {
    name: "registries",
    reads,
    contribute: Contribution::Handoff(contribute),
    ..Aspect::BASE
};

fn reads(spec: &Spec, family: Option<Family>, r: &mut Reads) {
    if family.is_none() {
        return;
    }
    for reg in &spec.registries {
        for p in hosts_paths(reg) {
            r.file(p);
        }
    }
}

fn contribute(spec: &Spec, _: &Facts, h: &mut HandoffIntent, _: &mut Findings) {
    h.containerd.registries.clone_from(&spec.registries);
}
