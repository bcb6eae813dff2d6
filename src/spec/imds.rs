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
    let endpoint = i.endpoint.clone().filter(|e| {
        let ok = e == crate::instance::imds::AUTO
            || crate::instance::imds::ImdsClient::new(e, false).is_ok();
        if !ok {
            f.push("imds.endpoint", format!(
                "`{}` is neither `auto` nor an http:// URL (http://169.254.169.254, or http://[fd00:ec2::254] on an IPv6-only subnet)",
                crate::base::text::printable(e)
            ));
        }
        ok
    });
    ImdsSpec {
        endpoint,
        allow_v1_fallback: i.allow_v1_fallback,
        deadline: Duration::from_millis(i.deadline_ms.clamp(1, 120_000)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_is_auto_or_an_http_url_ipv6_literals_included() {
        for ok in ["auto", "http://[fd00:ec2::254]", "http://169.254.169.254"] {
            let mut f = Findings::default();
            let s = spec(
                &ImdsSettings {
                    endpoint: Some(ok.into()),
                    ..ImdsSettings::default()
                },
                &mut f,
            );
            assert!(f.is_empty(), "{ok}: {f:?}");
            assert_eq!(s.endpoint.as_deref(), Some(ok));
        }
        for bad in ["fd00:ec2::254", "https://169.254.169.254", "Auto", ""] {
            let mut f = Findings::default();
            spec(
                &ImdsSettings {
                    endpoint: Some(bad.into()),
                    ..ImdsSettings::default()
                },
                &mut f,
            );
            assert_eq!(f.0[0].field, "imds.endpoint", "{bad}");
        }
    }
}
