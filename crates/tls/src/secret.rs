//! The cluster secret: one value every node of a cluster holds, from which each node derives the
//! same ticket key for each time epoch and the key that seals sessions in the shared store.
//!
//! Derivation is HKDF-SHA256 (RFC 5869) with a fixed salt; each use has its own `info` label, so
//! the ticket keys, the sealing key and the secret's public identifier are independent. The
//! identifier (4 bytes) travels in ticket names and sealed entries, so a node knows which of its
//! secrets (current, or previous during a root-secret rotation) to try.

use aws_lc_rs::hkdf;
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

/// One cluster secret, ready to derive keys.
pub struct ClusterSecret {
    id: [u8; 4],
    prk: hkdf::Prk,
}

impl std::fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print key material; the identifier is public (it is sent in every ticket).
        write!(f, "ClusterSecret({})", hex(&self.id))
    }
}

/// An output length for HKDF expansion.
struct Len(usize);

impl hkdf::KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

const SALT: &[u8] = b"tlsgate cluster secret v1";

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
        let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, SALT).extract(&material);
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

fn expand(prk: &hkdf::Prk, info: &[&[u8]], out: &mut [u8]) {
    prk.expand(info, Len(out.len()))
        .and_then(|okm| okm.fill(out))
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
