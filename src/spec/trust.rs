//! The `trust` section checked: each bundle PEM certificates, each certificate a CA. Never
//! echoed (a bundle is not a secret, but it is long and says nothing in a message).

use crate::base::findings::Findings;
use crate::config::TrustSettings;

/// The CA bundles, checked, in config order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustSpec {
    pub bundles: Vec<String>,
}

pub(crate) fn spec(c: Option<&TrustSettings>, f: &mut Findings) -> Option<TrustSpec> {
    let c = c?;
    let before = f.0.len();
    if c.ca_bundles.is_empty() {
        f.push(
            "trust.caBundles",
            "give at least one PEM bundle of CA certificates, or leave `trust` out",
        );
    }
    let bundles: Vec<String> = c
        .ca_bundles
        .iter()
        .enumerate()
        .filter_map(|(i, b)| f.check(format!("trust.caBundles[{i}]"), check_bundle(b)))
        .collect();
    (f.0.len() == before).then_some(TrustSpec { bundles })
}

/// The bundle's certificates, each a CA the SDK's TLS stack takes, as PEM every reader takes.
fn check_bundle(text: &str) -> Result<String, String> {
    let ders = crate::base::pem::ders(text).map_err(|why| format!("the value {why}"))?;
    for (n, der) in ders.iter().enumerate() {
        // As the SDK's TLS stack adds it to its roots (it panics on one it cannot parse).
        let mut roots = rustls::RootCertStore::empty();
        if let Err(e) = roots.add(rustls::pki_types::CertificateDer::from(der.clone())) {
            return Err(format!(
                "certificate {} cannot be a TLS trust anchor ({e}): give DER-encoded X.509 certificates",
                n + 1
            ));
        }
        match crate::base::pem::is_ca(der) {
            Ok(true) => {}
            Ok(false) => {
                return Err(format!(
                    "certificate {} is not a CA certificate (no basicConstraints CA:TRUE): give the CA that signs the servers, not a server's own certificate",
                    n + 1
                ))
            }
            Err(why) => return Err(format!("certificate {} {why}", n + 1)),
        }
    }
    Ok(crate::base::pem::encode(&ders))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(bundles: &[String]) -> (Option<TrustSpec>, Vec<String>) {
        let c = TrustSettings {
            ca_bundles: bundles.to_vec(),
        };
        let mut f = Findings::default();
        let s = spec(Some(&c), &mut f);
        (s, f.0.iter().map(ToString::to_string).collect())
    }

    fn read(p: &str) -> String {
        std::fs::read_to_string(p).unwrap()
    }

    #[test]
    fn ca_bundles_pass_and_leaves_v1_and_text_are_named_errors() {
        let ca = read("tests/fixtures/cluster-ca.pem");
        let (s, f) = run(&[ca.clone(), format!("{ca}\n{ca}")]);
        assert!(f.is_empty(), "{f:?}");
        assert_eq!(s.unwrap().bundles.len(), 2);
        for (bundle, want) in [
            (
                format!("{ca}\n{}", read("tests/fixtures/leaf-not-ca.pem")),
                "trust.caBundles[0]: certificate 2 is not a CA certificate",
            ),
            (
                read("tests/fixtures/v1-no-extensions.pem"),
                "trust.caBundles[0]: certificate 1 is not a CA certificate",
            ),
            (
                "secret-not-pem".to_string(),
                "trust.caBundles[0]: the value is not PEM certificates",
            ),
        ] {
            let (s, f) = run(&[bundle]);
            assert!(s.is_none());
            assert!(f.iter().any(|x| x.starts_with(want)), "{want}: {f:?}");
            assert!(
                f.iter()
                    .all(|x| !x.contains("secret-not-pem") && !x.contains("BEGIN")),
                "{f:?}"
            );
        }
        let (s, f) = run(&[]);
        assert!(s.is_none() && f[0].starts_with("trust.caBundles"), "{f:?}");
        // Indented, with long lines: accepted, and kept as PEM every reader takes.
        let b64: String = ca.lines().filter(|l| !l.starts_with("-----")).collect();
        let messy = format!("  -----BEGIN CERTIFICATE-----\n  {b64}\n  -----END CERTIFICATE-----");
        let (s, f) = run(&[messy]);
        assert!(f.is_empty(), "{f:?}");
        assert_eq!(s.unwrap().bundles[0], ca);
        // A DER length in a non-minimal form (BER): refused, as the SDK's reader would panic.
        let der = crate::base::pem::ders(&ca).unwrap().remove(0);
        let len = usize::from(der[2]) << 8 | usize::from(der[3]);
        assert_eq!(der[1], 0x82, "a two-byte length");
        let mut ber = vec![0x30, 0x83, 0x00, der[2], der[3]];
        ber.extend_from_slice(&der[4..]);
        assert_eq!(ber.len(), len + 5);
        let pem = format!(
            "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
            base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &ber)
        );
        let (s, f) = run(&[pem]);
        assert!(s.is_none(), "{f:?}");
        assert!(f[0].contains("cannot be a TLS trust anchor"), "{f:?}");
    }
}
