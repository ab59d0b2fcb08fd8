//! TLS signature schemes on the wire (their IANA code points) and which key types may use them.
//!
//! `boring`'s `SslSignatureAlgorithm` does not expose its code point, so the schemes a key
//! server serves are listed here once, with their codes.

use boring::ssl::SslSignatureAlgorithm as A;
use tlsgate_tls::keys::KeyType;

/// Every scheme the protocol carries: (algorithm, code point, metric label).
const SCHEMES: &[(A, u16, &str)] = &[
    (A::RSA_PKCS1_SHA256, 0x0401, "rsa_pkcs1_sha256"),
    (A::RSA_PKCS1_SHA384, 0x0501, "rsa_pkcs1_sha384"),
    (A::RSA_PKCS1_SHA512, 0x0601, "rsa_pkcs1_sha512"),
    (A::ECDSA_SECP256R1_SHA256, 0x0403, "ecdsa_secp256r1_sha256"),
    (A::ECDSA_SECP384R1_SHA384, 0x0503, "ecdsa_secp384r1_sha384"),
    (A::ECDSA_SECP521R1_SHA512, 0x0603, "ecdsa_secp521r1_sha512"),
    (A::RSA_PSS_RSAE_SHA256, 0x0804, "rsa_pss_rsae_sha256"),
    (A::RSA_PSS_RSAE_SHA384, 0x0805, "rsa_pss_rsae_sha384"),
    (A::RSA_PSS_RSAE_SHA512, 0x0806, "rsa_pss_rsae_sha512"),
    (A::ED25519, 0x0807, "ed25519"),
    (A::ML_DSA_44, 0x0904, "mldsa44"),
    (A::ML_DSA_65, 0x0905, "mldsa65"),
    (A::ML_DSA_87, 0x0906, "mldsa87"),
];

/// The code point of a scheme this protocol carries.
pub fn code(alg: A) -> Option<u16> {
    SCHEMES.iter().find(|(a, _, _)| *a == alg).map(|(_, c, _)| *c)
}

/// The scheme of a code point, when known.
pub fn from_code(code: u16) -> Option<A> {
    SCHEMES.iter().find(|(_, c, _)| *c == code).map(|(a, _, _)| *a)
}

/// A label for logs and metrics (`0x1234` for unknown codes).
pub fn label(code: u16) -> String {
    SCHEMES
        .iter()
        .find(|(_, c, _)| *c == code)
        .map_or_else(|| format!("{code:#06x}"), |(_, _, n)| (*n).to_string())
}

/// Whether a key of `kind` may sign with the scheme `code`. ECDSA keys accept every ECDSA
/// hash (TLS 1.2 does not bind the curve to the hash); RSA keys PKCS#1 v1.5 and PSS-RSAE; an
/// ML-DSA key its own parameter set's scheme only.
pub fn allowed(kind: KeyType, code: u16) -> bool {
    match kind {
        KeyType::Rsa => matches!(code, 0x0401 | 0x0501 | 0x0601 | 0x0804 | 0x0805 | 0x0806),
        KeyType::EcdsaP256 | KeyType::EcdsaP384 => matches!(code, 0x0403 | 0x0503 | 0x0603),
        KeyType::Ed25519 => code == 0x0807,
        KeyType::MlDsa(level) => code == level.code(),
        KeyType::Other => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_match_boring() {
        for (alg, c, _) in SCHEMES {
            assert_eq!(code(*alg), Some(*c));
            assert_eq!(from_code(*c), Some(*alg));
            assert_eq!(A::from(*c), *alg, "code point of {alg}");
        }
        assert!(allowed(KeyType::Rsa, 0x0804) && !allowed(KeyType::Rsa, 0x0403));
        assert!(!allowed(KeyType::Ed25519, 0x0403));
        use tlsgate_tls::mldsa::Level;
        assert!(allowed(KeyType::MlDsa(Level::MlDsa65), 0x0905));
        assert!(
            !allowed(KeyType::MlDsa(Level::MlDsa65), 0x0904),
            "another parameter set"
        );
        assert!(!allowed(KeyType::MlDsa(Level::MlDsa44), 0x0403));
        assert!(!allowed(KeyType::EcdsaP256, 0x0904));
    }
}
