//! The discovery cache: the answer kept between runs and boots (mode 0600: it holds the CA),
//! used only when it was asked with the same cluster and sources and still passes every check.

use serde::{Deserialize, Serialize};

use crate::os::fsutil::FileFact;
use crate::spec::discovery::{DiscoverySpec, Value};

use super::check::complete;
use super::{Answer, ClusterFact, Outcome, CACHE};

/// The cache file's document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CacheDoc {
    api_version: String,
    kind: String,
    /// [`DiscoverySpec::key`]: the answer is used only for the same cluster and sources.
    key: String,
    values: Answer,
}

const CACHE_KIND: &str = "DiscoveryCache";

/// The cached answer, when it was asked with this cluster and these sources, covers `missing`
/// and still passes every check. Anything else is ignored (and rewritten by the plan).
pub(super) fn cached(
    file: &FileFact,
    d: &DiscoverySpec,
    cluster: &str,
    missing: &[Value],
) -> Option<Answer> {
    if file.link.is_some() {
        return None;
    }
    let text = file.content.as_ref().ok()?.as_ref()?;
    let doc: CacheDoc = match serde_json::from_str(text) {
        Ok(doc) => doc,
        Err(e) => {
            tracing::warn!("ignoring the discovery cache {CACHE}: {e}");
            return None;
        }
    };
    if doc.kind != CACHE_KIND || doc.key != d.key(cluster) {
        tracing::info!("the discovery cache {CACHE} was written for other sources or another cluster: looking up again");
        return None;
    }
    match complete(doc.values, missing) {
        Ok(a) => Some(a),
        Err(e) => {
            tracing::warn!("ignoring the discovery cache {CACHE}: {e}");
            None
        }
    }
}

impl ClusterFact {
    /// The cache document for this answer (what the plan writes).
    pub(crate) fn cache_text(&self, d: &DiscoverySpec) -> Option<String> {
        let Outcome::Found { answer, .. } = &self.outcome else {
            return None;
        };
        let doc = CacheDoc {
            api_version: "eks-nodeinit/v1".into(),
            kind: CACHE_KIND.into(),
            key: d.key(&self.name),
            values: answer.clone(),
        };
        let mut s = serde_json::to_string_pretty(&doc).ok()?;
        s.push('\n');
        Some(s)
    }
}
