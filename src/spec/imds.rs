//! The `imds` section: the metadata endpoint, the IMDSv1 fallback and a deadline of at most
//! two minutes.

use std::time::Duration;

use crate::base::findings::Findings;
use crate::config::ImdsSettings;

#[derive(Debug, Clone)]
pub struct ImdsSpec {
    pub endpoint: Option<String>,
    pub allow_v1_fallback: bool,
    pub deadline: Duration,
}

pub fn spec(i: &ImdsSettings, f: &mut Findings) -> ImdsSpec {
    if i.deadline_ms == 0 || i.deadline_ms > 120_000 {
        f.push("imds.deadlineMs", "must be between 1 and 120000");
    }
    ImdsSpec {
        endpoint: i.endpoint.clone(),
        allow_v1_fallback: i.allow_v1_fallback,
        deadline: Duration::from_millis(i.deadline_ms.clamp(1, 120_000)),
    }
}
