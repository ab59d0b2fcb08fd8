//! The cluster secret: one value every node of a cluster holds, from which each node derives the
//! same ticket key for each time epoch and the key that seals sessions in the shared store.
//!
//! Derivation is HKDF-SHA256 (RFC 5869) with a fixed salt; each use has its own `info` label, so
//! the ticket keys, the sealing key and the secret's public identifier are independent. The
//! identifier (4 bytes) travels in ticket names and sealed entries, so a node knows which of its
//! secrets (current, or previous during a root-secret rotation) to try.
//!
//! HKDF is BoringSSL's (`boring::hkdf`); the output is the RFC's, so keys derived by nodes of
//! earlier versions (which used aws-lc-rs) are the same.

use boring::hash::MessageDigest;
use boring::hkdf::HkdfSuite;
use std::path::Path;

/// Why a secret could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file holds too little key material.
    #[error(
        "{path}: a cluster secret needs at least 32 bytes of key material (e.g. `openssl rand -hex 32`), found {found}"
    )]
    TooShort {
        /// The file.
        path: String,
        /// Bytes of key material found.
        found: usize,
    },
}

impl tlsgate_error::Classify for SecretError {
    fn side(&self) -> tlsgate_error::Side {
        tlsgate_error::Side::Config
    }

    fn kind(&self) -> &'static str {
        match self {
            SecretError::Read { .. } => "cluster_secret_read",
            SecretError::TooShort { .. } => "cluster_secret_too_short",
        }
    }
}

/// One cluster secret, ready to derive keys.
pub struct ClusterSecret {
    id: [u8; 4],
    /// HKDF-Extract(SALT, material): the pseudorandom key every derivation expands.
    prk: [u8; PRK_LEN],
}

impl std::fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print key material; the identifier is public (it is sent in every ticket).
        write!(f, "ClusterSecret({})", hex(&self.id))
    }
}

const SALT: &[u8] = b"tlsgate cluster secret v1";
/// SHA-256's output size: the length of the PRK.
const PRK_LEN: usize = 32;

fn hkdf_sha256() -> HkdfSuite {
    HkdfSuite::new(MessageDigest::sha256())
}

impl ClusterSecret {
    /// A secret from raw key material: a file of hex digits (what `openssl rand -hex 32` writes;
    /// surrounding whitespace ignored) is decoded, anything else is used as bytes, untouched.
    pub fn from_material(raw: &[u8], origin: &str) -> Result<Self, SecretError> {
        // Hex text (what `openssl rand -hex 32` writes, newline included) is decoded; anything else
        // is binary key material and used exactly as read.
        let material = decode_hex(raw.trim_ascii()).unwrap_or_else(|| raw.to_vec());
        if material.len() < 32 {
            return Err(SecretError::TooShort {
                path: origin.to_string(),
                found: material.len(),
            });
        }
        let extracted = hkdf_sha256()
            .extract(SALT, &material)
            .expect("HKDF-SHA256 extract cannot fail");
        let mut prk = [0u8; PRK_LEN];
        prk.copy_from_slice(&extracted);
        let mut id = [0u8; 4];
        expand(&prk, &[b"id"], &mut id);
        Ok(Self { id, prk })
    }

    /// Reads a secret file.
    pub fn load(path: &Path) -> Result<Self, SecretError> {
        let raw = std::fs::read(path).map_err(|source| SecretError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_material(&raw, &path.display().to_string())
    }

    /// The secret's public 4-byte identifier.
    pub fn id(&self) -> [u8; 4] {
        self.id
    }

    /// Fills `out` with key material for the purpose named by `info` (its parts are concatenated).
    pub fn derive(&self, info: &[&[u8]], out: &mut [u8]) {
        expand(&self.prk, info, out);
    }
}

fn expand(prk: &[u8; PRK_LEN], info: &[&[u8]], out: &mut [u8]) {
    // The info parts are concatenated (what RFC 5869's `info` is; aws-lc-rs did the same).
    let info = info.concat();
    hkdf_sha256()
        .expand(prk, &info, out)
        .expect("HKDF-SHA256 output of at most 255 blocks");
}

fn decode_hex(text: &[u8]) -> Option<Vec<u8>> {
    if text.is_empty() || !text.len().is_multiple_of(2) || !text.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    text.chunks(2)
        .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect()
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &[u8] = b"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n";

    #[test]
    fn hex_and_raw_material_are_both_accepted() {
        let a = ClusterSecret::from_material(HEX, "a").unwrap();
        let b = ClusterSecret::from_material(HEX.trim_ascii(), "b").unwrap();
        assert_eq!(a.id(), b.id(), "whitespace is ignored");
        let raw = ClusterSecret::from_material(&[7u8; 40], "raw").unwrap();
        assert_ne!(raw.id(), a.id());
        // Binary material that happens to start or end with whitespace bytes is kept whole.
        let tabs = ClusterSecret::from_material(&[9u8; 32], "tabs").unwrap();
        assert_ne!(tabs.id(), raw.id());
    }

    /// Derivations of the aws-lc-rs implementation of earlier versions (material 32 × 0x11),
    /// also checked against Python's `hmac`: ticket keys, ticket names and the sealing key every
    /// node of a mixed-version cluster must agree on.
    #[test]
    fn derivations_match_earlier_versions() {
        let s = ClusterSecret::from_material(&[0x11; 32], "kat").unwrap();
        assert_eq!(hex(&s.id()), "c87a13d3");
        let mut seal = [0u8; 32];
        s.derive(&[b"session-seal"], &mut seal);
        assert_eq!(
            hex(&seal),
            "0c81e25b47c55463b40e7f012f27d91ab91bc01eb98d70aaeb27c993a48e997e"
        );
        let mut key = [0u8; 48];
        s.derive(&[b"ticket-key", &7u64.to_be_bytes()], &mut key);
        assert_eq!(
            hex(&key),
            "f294bbfc08a7099d8fe5209a5e102a6b63a34836105f19210a62abfde23c7cde7b17fc72771353e997d53603e7a7b24a"
        );
        let mut name = [0u8; 4];
        s.derive(&[b"ticket-name", &7u64.to_be_bytes()], &mut name);
        assert_eq!(hex(&name), "eb2558d8");
        // Several blocks of output, info in parts.
        let mut long = [0u8; 100];
        s.derive(&[b"a", b"bc"], &mut long);
        assert_eq!(
            hex(&long),
            "5d388c1c1ca7f6f7015e46daae97a176fc36e961f008d17d7e3a9c52ab92ee8119ae769d6b8e56c3ab1d3a9febcb699f\
             cdc65a9d1017ebe973f2bc1375a871c016c19c85e8fff6e443f8e23a922ef9242a53c6662a340a715c79ca3442c38e466661648e"
        );
    }

    #[test]
    fn short_material_is_refused() {
        let err = ClusterSecret::from_material(b"0011", "short").unwrap_err();
        assert!(err.to_string().contains("at least 32 bytes"), "{err}");
    }

    #[test]
    fn derivation_is_deterministic_and_separated_by_label() {
        let s = ClusterSecret::from_material(HEX, "s").unwrap();
        let t = ClusterSecret::from_material(HEX, "t").unwrap();
        let (mut x, mut y, mut z) = ([0u8; 32], [0u8; 32], [0u8; 32]);
        s.derive(&[b"ticket", &7u64.to_be_bytes()], &mut x);
        t.derive(&[b"ticket", &7u64.to_be_bytes()], &mut y);
        s.derive(&[b"ticket", &8u64.to_be_bytes()], &mut z);
        assert_eq!(x, y, "every node derives the same key");
        assert_ne!(x, z, "each epoch has its own key");
    }
}
