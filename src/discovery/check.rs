//! The checks a discovered value passes before the plan sees it: every value the config left
//! out is there, the endpoint an `https://` URL the hand-offs can carry, the CA base64 of PEM
//! certificates (never echoed), the CIDR an IP network.

use crate::base::text::printable;
use crate::spec::cluster::{self, Cidr};
use crate::spec::discovery::Value;

use super::{Answer, Found, SourceError};

/// `a` reduced to `missing`, every value there and checked.
pub(crate) fn complete(a: Answer, missing: &[Value]) -> Result<Answer, SourceError> {
    let gaps: Vec<&'static str> = missing
        .iter()
        .filter(|v| a.get(**v).is_none())
        .map(|v| v.field())
        .collect();
    if !gaps.is_empty() {
        return Err(SourceError::Incomplete { missing: gaps });
    }
    let a = a.only(missing);
    for v in missing {
        if let Some(f) = a.get(*v) {
            check_value(*v, f)?;
        }
    }
    Ok(a)
}

/// The checks a discovered value must pass before a hand-off carries it.
pub(crate) fn check_value(v: Value, f: &Found) -> Result<(), SourceError> {
    let bad = |why: String| SourceError::Malformed {
        field: v.field(),
        origin: f.origin.describe(),
        why,
    };
    match v {
        Value::Endpoint if !cluster::is_endpoint(&f.value) => Err(bad(format!(
            "is `{}`, not an https:// URL of a host, an optional port and a path of letters, digits and `-._~/` (bootstrap.sh's sed and a systemd drop-in carry nothing else): fix the source",
            printable(&f.value)
        ))),
        Value::Ca => check_pem(&f.value).map_err(|why| {
            // Never echo the value: it is the cluster CA.
            bad(format!("{why}: publish the cluster's certificateAuthority.data as is"))
        }),
        Value::Cidr if parse_cidr(&f.value).is_none() => Err(bad(format!(
            "is `{}`, not an IP network like `10.100.0.0/16` or `fd00:10:96::/112`: fix the source",
            printable(&f.value)
        ))),
        _ => Ok(()),
    }
}

pub(crate) fn parse_cidr(s: &str) -> Option<Cidr> {
    crate::base::cidr::parse_cidr(s).map(|(ip, _)| Cidr {
        text: s.to_string(),
        ipv6: ip.is_ipv6(),
    })
}

/// Base64 (one line) of one or more PEM certificates ([`crate::base::pem`]).
pub(crate) fn check_pem(b64: &str) -> Result<(), String> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .map_err(|_| "is not base64 on one line".to_string())?;
    let text = String::from_utf8(bytes).map_err(|_| "does not decode to PEM text".to_string())?;
    crate::base::pem::certificates(&text)
        .map(|_| ())
        .map_err(|why| format!("decodes to text that {why}"))
}
