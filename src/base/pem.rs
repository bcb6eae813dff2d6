//! PEM certificates as text: `BEGIN CERTIFICATE` / `END CERTIFICATE` pairs around base64 bodies
//! that decode to DER certificates (a SEQUENCE), nothing else but blank lines. What discovery
//! checks the cluster CA with (after its base64) and the registries' CA bundles are.

use base64::Engine;

/// The number of certificates in `text`, or why it is not PEM certificates (never echoing the
/// text).
pub(crate) fn certificates(text: &str) -> Result<usize, String> {
    ders(text).map(|d| d.len())
}

/// Each certificate's DER, or why `text` is not PEM certificates (never echoing the text).
pub(crate) fn ders(text: &str) -> Result<Vec<Vec<u8>>, String> {
    let mut certs = Vec::new();
    let mut body: Option<String> = None;
    for line in text.lines().map(str::trim) {
        match (&mut body, line) {
            (None, "") => {}
            (None, "-----BEGIN CERTIFICATE-----") => body = Some(String::new()),
            (None, _) => return Err("is not PEM certificates".into()),
            (Some(b), "-----END CERTIFICATE-----") => {
                let n = certs.len() + 1;
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
                certs.push(der);
                body = None;
            }
            (Some(b), l) => b.push_str(l),
        }
    }
    match (certs.is_empty(), body) {
        (_, Some(_)) => Err("has a PEM block without its END line".into()),
        (true, None) => Err("holds no PEM certificate".into()),
        (false, None) => Ok(certs),
    }
}

/// DER certificates encoded as PEM, 64 base64 characters a line, each block ended by a newline:
/// what the node's trust store and the SDK's PEM reader get, whatever the config's indentation
/// or line lengths were.
pub(crate) fn encode(ders: &[Vec<u8>]) -> String {
    let mut out = String::new();
    for der in ders {
        let b64 = base64::engine::general_purpose::STANDARD.encode(der);
        out.push_str("-----BEGIN CERTIFICATE-----\n");
        for line in b64.as_bytes().chunks(64) {
            out.push_str(&String::from_utf8_lossy(line));
            out.push('\n');
        }
        out.push_str("-----END CERTIFICATE-----\n");
    }
    out
}

/// Whether a DER certificate is a CA certificate: its basicConstraints extension (2.5.29.19)
/// says `cA` TRUE. A certificate without the extension (X.509 v1, or a server's) is not one.
/// `Err` when the DER is not a certificate's structure. Reads only what it needs, bounds
/// checked: no input panics.
pub(crate) fn is_ca(der: &[u8]) -> Result<bool, &'static str> {
    const BAD: &str = "is not an X.509 certificate";
    let (cert, _) = expect(der, 0x30).ok_or(BAD)?;
    let (mut tbs, _) = expect(cert, 0x30).ok_or(BAD)?;
    while !tbs.is_empty() {
        let (tag, value, rest) = tlv(tbs).ok_or(BAD)?;
        tbs = rest;
        if tag != 0xA3 {
            continue;
        }
        let (mut exts, _) = expect(value, 0x30).ok_or(BAD)?;
        while !exts.is_empty() {
            let (ext, rest) = expect(exts, 0x30).ok_or(BAD)?;
            exts = rest;
            let (oid, mut ext) = expect(ext, 0x06).ok_or(BAD)?;
            if oid != [0x55, 0x1D, 0x13] {
                continue;
            }
            if let Some((_, rest)) = expect(ext, 0x01) {
                ext = rest; // `critical`
            }
            let (octets, _) = expect(ext, 0x04).ok_or(BAD)?;
            let (constraints, _) = expect(octets, 0x30).ok_or(BAD)?;
            return Ok(matches!(expect(constraints, 0x01), Some(([b], _)) if *b != 0));
        }
    }
    Ok(false)
}

/// The value of the DER element at the start of `input` if its tag is `tag`, and what follows.
fn expect(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    match tlv(input)? {
        (t, value, rest) if t == tag => Some((value, rest)),
        _ => None,
    }
}

/// One DER element: (tag, value, rest). Single-byte tags, definite lengths up to 4 bytes.
fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7F);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let (bytes, after) = rest.split_at(n);
        rest = after;
        bytes
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b))
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
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
        assert!(is_ca(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(is_ca(&[]).is_err());
        assert_eq!(
            certificates(not_der),
            Err("holds certificate 1, which is not a DER certificate".into())
        );
    }

    fn der(path: &str) -> Vec<u8> {
        ders(&std::fs::read_to_string(path).unwrap())
            .unwrap()
            .remove(0)
    }

    #[test]
    fn a_ca_is_told_from_a_leaf_and_a_v1_certificate() {
        assert_eq!(is_ca(&der("tests/fixtures/cluster-ca.pem")), Ok(true));
        assert_eq!(is_ca(&der("tests/fixtures/leaf-not-ca.pem")), Ok(false));
        assert_eq!(
            is_ca(&der("tests/fixtures/v1-no-extensions.pem")),
            Ok(false)
        );
    }

    #[test]
    fn every_truncation_and_byte_flip_of_a_ca_is_answered_without_a_panic() {
        let ca = der("tests/fixtures/cluster-ca.pem");
        for n in 0..ca.len() {
            assert!(is_ca(&ca[..n]).is_err(), "{n}");
        }
        for i in 0..ca.len() {
            for x in [0x00, 0x80, 0xff] {
                let mut c = ca.clone();
                c[i] ^= x;
                let _ = is_ca(&c);
            }
        }
    }
}
