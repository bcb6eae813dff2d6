//! PEM certificates as text: `BEGIN CERTIFICATE` / `END CERTIFICATE` pairs around base64 bodies
//! that decode to DER certificates (a SEQUENCE), nothing else but blank lines. What discovery
//! checks the cluster CA with (after its base64) and the registries' CA bundles are.

use base64::Engine;

/// The number of certificates in `text`, or why it is not PEM certificates (never echoing the
/// text).
pub(crate) fn certificates(text: &str) -> Result<usize, String> {
    let mut certs = 0usize;
    let mut body: Option<String> = None;
    for line in text.lines().map(str::trim) {
        match (&mut body, line) {
            (None, "") => {}
            (None, "-----BEGIN CERTIFICATE-----") => body = Some(String::new()),
            (None, _) => return Err("is not PEM certificates".into()),
            (Some(b), "-----END CERTIFICATE-----") => {
                let n = certs + 1;
                let der = base64::engine::general_purpose::STANDARD
                    .decode(b.as_bytes())
                    .map_err(|_| {
                        format!("holds certificate {n}, which is not base64 inside its PEM block")
                    })?;
                // A DER certificate is a SEQUENCE.
                if der.first() != Some(&0x30) {
                    return Err(format!(
                        "holds certificate {n}, which is not a DER certificate"
                    ));
                }
                certs = n;
                body = None;
            }
            (Some(b), l) => b.push_str(l),
        }
    }
    match (certs, body) {
        (_, Some(_)) => Err("has a PEM block without its END line".into()),
        (0, None) => Err("holds no PEM certificate".into()),
        (n, None) => Ok(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_certificates_and_what_is_not() {
        let cert = std::fs::read_to_string("tests/fixtures/cluster-ca.pem").unwrap();
        assert_eq!(certificates(&cert), Ok(1));
        assert_eq!(certificates(&format!("{cert}\n{cert}")), Ok(2));
        for bad in ["hello", "-----BEGIN CERTIFICATE-----\nMIIB\n", "", "  \n"] {
            assert!(certificates(bad).is_err(), "{bad:?}");
        }
        let not_der = "-----BEGIN CERTIFICATE-----\naGVsbG8=\n-----END CERTIFICATE-----\n";
        assert_eq!(
            certificates(not_der),
            Err("holds certificate 1, which is not a DER certificate".into())
        );
    }
}
