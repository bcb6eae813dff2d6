//! The AL2023 hand-off's settings: where nodeadm is.

use std::path::PathBuf;

use crate::base::findings::Findings;
use crate::config::HandoffSettings;

use super::check_node_path;

#[derive(Debug, Clone)]
pub struct NodeconfigSpec {
    pub nodeadm_path: PathBuf,
}

pub fn spec(h: &HandoffSettings, f: &mut Findings) -> NodeconfigSpec {
    check_node_path("handoff.nodeadmPath", &h.nodeadm_path, f);
    NodeconfigSpec {
        nodeadm_path: h.nodeadm_path.clone(),
    }
}
