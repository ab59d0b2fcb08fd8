//! The TLS-ALPN-01 challenge certificate (RFC 8737 §3): self-signed for the one name being
//! validated, with the critical acmeIdentifier extension holding SHA-256 of the key
//! authorization; served only to a ClientHello offering just the `acme-tls/1` protocol.

use crate::csr::{generate_key, self_signed, KeyKind};
use crate::error::AcmeError;
use boring::hash::{hash, MessageDigest};
use boring::pkey::{PKey, Private};
use boring::x509::{X509Extension, X509};

/// The ALPN protocol of TLS-ALPN-01.
pub const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";

/// id-pe-acmeIdentifier.
const ACME_IDENTIFIER_OID: &str = "1.3.6.1.5.5.7.1.31";

/// The certificate and key answering TLS-ALPN-01 for `name`.
pub fn challenge_certificate(name: &str, key_authorization: &str) -> Result<(X509, PKey<Private>), AcmeError> {
    let digest = hash(MessageDigest::sha256(), key_authorization.as_bytes())?;
    // extnValue: OCTET STRING (0x04, length 32) holding the digest.
    let mut der = String::from("critical,DER:04:20");
    for b in digest.iter() {
        der.push_str(&format!(":{b:02X}"));
    }
    #[allow(deprecated)]
    let ext = X509Extension::new(None, None, ACME_IDENTIFIER_OID, &der)?;
    let key = generate_key(KeyKind::EcdsaP256)?;
    let cert = self_signed(&[name.to_string()], &key, 7 * 86_400, vec![ext])?;
    Ok((cert, key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn carries_the_critical_acme_identifier() {
        let (cert, key) = challenge_certificate("a.test", "tok.thumb").unwrap();
        assert!(cert.verify(&key).unwrap());
        let der = cert.to_der().unwrap();
        let (_, parsed) = x509_parser::parse_x509_certificate(&der).unwrap();
        let oid = x509_parser::oid_registry::Oid::from(&[1, 3, 6, 1, 5, 5, 7, 1, 31]).unwrap();
        let ext = parsed
            .extensions()
            .iter()
            .find(|e| e.oid == oid)
            .expect("acmeIdentifier");
        assert!(ext.critical);
        let want = hash(MessageDigest::sha256(), b"tok.thumb").unwrap();
        assert_eq!(&ext.value[..2], &[0x04, 0x20]);
        assert_eq!(&ext.value[2..], &want[..]);
    }
}
