//! ML-DSA (FIPS 204) certificates: what tlsgate needs beyond what `boring` wraps.
//!
//! The BoringSSL that `boring-sys` 5.4 builds knows ML-DSA at every level tlsgate uses
//! (docs/PQ-CERTS.md): `EVP_PKEY` keys (PKCS#8 "seed" form, SPKI), X.509 signing and
//! verification, and the TLS 1.3 signature schemes `mldsa44` (0x0904), `mldsa65` (0x0905) and
//! `mldsa87` (0x0906). So an ML-DSA certificate is served like any other: its key is a
//! [`PKey`], the handshake signature goes through the same private-key hook
//! (`keys::LocalKey` signs without a pre-hash, as for Ed25519), and certificate selection
//! (`context.rs`) picks it for clients that offer the matching scheme in TLS 1.3.
//!
//! This module holds the parameter sets' sizes, the scheme each level signs with, key
//! generation (a random 32-byte seed wrapped in PKCS#8: the seed *is* the private key), and the
//! ClientHello check "does this client offer ML-DSA-*n*" (over `tlsgate-wire`'s fuzzed list
//! reader).

use boring::error::ErrorStack;
use boring::pkey::{Id, PKey, Private};
use boring::ssl::SslSignatureAlgorithm;

/// An ML-DSA parameter set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Level {
    /// ML-DSA-44 (NIST category 2).
    MlDsa44,
    /// ML-DSA-65 (NIST category 3).
    MlDsa65,
    /// ML-DSA-87 (NIST category 5).
    MlDsa87,
}

impl Level {
    /// Every level, smallest first.
    pub const ALL: [Level; 3] = [Level::MlDsa44, Level::MlDsa65, Level::MlDsa87];

    /// The level of a key, from its `EVP_PKEY` type (`EVP_PKEY_ML_DSA_*` = the NIDs 967..969).
    pub fn of_id(id: Id) -> Option<Self> {
        match id.as_raw() {
            boring_sys::EVP_PKEY_ML_DSA_44 => Some(Level::MlDsa44),
            boring_sys::EVP_PKEY_ML_DSA_65 => Some(Level::MlDsa65),
            boring_sys::EVP_PKEY_ML_DSA_87 => Some(Level::MlDsa87),
            _ => None,
        }
    }

    /// The TLS 1.3 signature scheme of this level (ML-DSA is not defined for TLS 1.2).
    pub fn scheme(self) -> SslSignatureAlgorithm {
        match self {
            Level::MlDsa44 => SslSignatureAlgorithm::ML_DSA_44,
            Level::MlDsa65 => SslSignatureAlgorithm::ML_DSA_65,
            Level::MlDsa87 => SslSignatureAlgorithm::ML_DSA_87,
        }
    }

    /// The scheme's IANA code point.
    pub fn code(self) -> u16 {
        match self {
            Level::MlDsa44 => 0x0904,
            Level::MlDsa65 => 0x0905,
            Level::MlDsa87 => 0x0906,
        }
    }

    /// The level whose scheme has this code point.
    pub fn from_code(code: u16) -> Option<Self> {
        Level::ALL.into_iter().find(|l| l.code() == code)
    }

    /// Name as BoringSSL's signature-algorithm lists and tlsgate's metrics write it.
    pub fn name(self) -> &'static str {
        match self {
            Level::MlDsa44 => "mldsa44",
            Level::MlDsa65 => "mldsa65",
            Level::MlDsa87 => "mldsa87",
        }
    }

    /// Human name (`ML-DSA-65`).
    pub fn display(self) -> &'static str {
        match self {
            Level::MlDsa44 => "ML-DSA-44",
            Level::MlDsa65 => "ML-DSA-65",
            Level::MlDsa87 => "ML-DSA-87",
        }
    }

    /// Encoded public key size (FIPS 204 table 2).
    pub fn public_key_bytes(self) -> usize {
        match self {
            Level::MlDsa44 => 1312,
            Level::MlDsa65 => 1952,
            Level::MlDsa87 => 2592,
        }
    }

    /// Signature size (FIPS 204 table 2); every signature of a level has exactly this size.
    pub fn signature_bytes(self) -> usize {
        match self {
            Level::MlDsa44 => 2420,
            Level::MlDsa65 => 3309,
            Level::MlDsa87 => 4627,
        }
    }

    /// DER of the algorithm OID (2.16.840.1.101.3.4.3.17 + level), tag and length included.
    fn oid_der(self) -> [u8; 11] {
        let last = match self {
            Level::MlDsa44 => 0x11,
            Level::MlDsa65 => 0x12,
            Level::MlDsa87 => 0x13,
        };
        [0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x03, last]
    }
}

/// Length of an ML-DSA private seed.
pub const SEED_BYTES: usize = 32;

/// PKCS#8 `PrivateKeyInfo` of an ML-DSA key in the seed-only form of RFC 9881
/// (`SEQUENCE { INTEGER 0, SEQUENCE { OID }, OCTET STRING { [0] IMPLICIT seed } }`), the only
/// private-key form BoringSSL reads and writes.
pub fn seed_pkcs8(level: Level, seed: &[u8; SEED_BYTES]) -> Vec<u8> {
    let mut der = vec![0x30, 0x34, 0x02, 0x01, 0x00, 0x30, 0x0b];
    der.extend_from_slice(&level.oid_der());
    der.extend_from_slice(&[0x04, 0x22, 0x80, 0x20]);
    der.extend_from_slice(seed);
    der
}

/// A new random ML-DSA key of `level` (BoringSSL expands the seed as FIPS 204 `KeyGen_internal`).
pub fn generate(level: Level) -> Result<PKey<Private>, ErrorStack> {
    let mut seed = [0u8; SEED_BYTES];
    boring::rand::rand_bytes(&mut seed)?;
    let key = PKey::private_key_from_der(&seed_pkcs8(level, &seed));
    seed.fill(0);
    key
}

/// Whether a ClientHello's `signature_algorithms` extension body offers `level`'s scheme.
/// Untrusted bytes: malformed lists offer nothing (read by `tlsgate-wire`, which is fuzzed).
pub fn offered(sigalgs_ext: Option<&[u8]>, level: Level) -> bool {
    sigalgs_ext.is_some_and(|ext| tlsgate_wire::client_hello::u16_items(ext, 2).any(|a| a == level.code()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use boring::sign::{Signer, Verifier};

    #[test]
    fn generated_keys_load_sign_and_verify_at_every_level() {
        for level in Level::ALL {
            let key = generate(level).unwrap();
            assert_eq!(Level::of_id(key.id()), Some(level));
            // The seed form round-trips through BoringSSL's PKCS#8 writer.
            let der = key.private_key_to_der_pkcs8().unwrap();
            assert_eq!(der.len(), 54, "{level:?}: seed-only PKCS#8");
            let public = PKey::public_key_from_der(&key.public_key_to_der().unwrap()).unwrap();
            let msg = b"TLS 1.3, server CertificateVerify";
            let sig = Signer::new_without_digest(&key)
                .unwrap()
                .sign_oneshot_to_vec(msg)
                .unwrap();
            assert_eq!(sig.len(), level.signature_bytes());
            let mut v = Verifier::new_without_digest(&public).unwrap();
            assert!(v.verify_oneshot(&sig, msg).unwrap());
            assert_eq!(Level::from_code(level.code()), Some(level));
            assert_eq!(level.scheme(), SslSignatureAlgorithm::from(level.code()));
        }
    }

    #[test]
    fn pki_issues_ml_dsa_chains_that_verify() {
        for level in [Level::MlDsa44, Level::MlDsa65] {
            let chain = crate::pki::MlDsaChain::issue(level, &["localhost"], 1).unwrap();
            let (leaf, inter, root) = (
                chain.leaf.certificate(),
                chain.intermediate.certificate(),
                chain.root.certificate(),
            );
            assert!(leaf.verify(&inter.public_key().unwrap()).unwrap());
            assert!(inter.verify(&root.public_key().unwrap()).unwrap());
            assert!(!leaf.verify(&root.public_key().unwrap()).unwrap());
            assert_eq!(Level::of_id(leaf.public_key().unwrap().id()), Some(level));
            let der = leaf.to_der().unwrap();
            let (_, parsed) = x509_parser::parse_x509_certificate(&der).unwrap();
            let oid = format!("2.16.840.1.101.3.4.3.{}", 17 + level.code() - 0x0904);
            assert_eq!(parsed.signature_algorithm.algorithm.to_id_string(), oid);
            assert!(
                parsed.signature_algorithm.parameters.is_none(),
                "RFC 9881: no parameters"
            );
            assert_eq!(parsed.signature_value.data.len(), level.signature_bytes());
            let key = PKey::private_key_from_pem(chain.leaf.key_pem.as_bytes()).unwrap();
            assert!(key.public_eq(&leaf.public_key().unwrap()));
        }
    }

    #[test]
    fn offered_reads_the_extension_and_ignores_malformed_ones() {
        // list length 4: ecdsa_secp256r1_sha256, mldsa65
        let ext = [0, 4, 0x04, 0x03, 0x09, 0x05];
        assert!(offered(Some(&ext), Level::MlDsa65));
        assert!(!offered(Some(&ext), Level::MlDsa44));
        assert!(!offered(None, Level::MlDsa65));
        assert!(!offered(Some(&ext[..5]), Level::MlDsa65), "truncated");
        assert!(!offered(Some(&[0, 3, 9, 5, 0]), Level::MlDsa65), "odd length");
    }
}
