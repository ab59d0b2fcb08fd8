//! Sealing sessions for the shared store.
//!
//! Entry layout: `version (1) | secret id (4) | nonce (12) | AES-256-GCM(session DER) | tag (16)`,
//! with the session ID and the version as associated data: an entry copied under another ID, made
//! with a foreign secret, truncated or altered does not open, and the handshake falls back to a
//! full one. The sealing key is HKDF(cluster secret, "session-seal"); during a root-secret
//! rotation entries of the previous secret still open.
//!
//! The AEAD is BoringSSL's (`boring::aead`); the layout and the key are those of earlier versions
//! (sealed with aws-lc-rs), so nodes of mixed versions in one cluster open each other's entries.

use boring::aead::{AeadCtx, Algorithm};
use std::sync::Arc;
use tlsgate_error::{Classify, Side};
use tlsgate_tls::secret::ClusterSecret;

const VERSION: u8 = 1;
const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;
const KEY_LEN: usize = 32;
const HEADER: usize = 1 + 4 + NONCE_LEN;

/// Seals and opens session entries with the cluster's secrets.
pub struct Sealer {
    /// (secret id, AES-256-GCM key); the first one seals.
    keys: Vec<([u8; 4], [u8; KEY_LEN])>,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer").field("secrets", &self.keys.len()).finish()
    }
}

/// Why an entry was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// Too short or an unknown format version.
    #[error("malformed entry")]
    Malformed,
    /// Sealed with a secret this node does not hold.
    #[error("entry sealed with an unknown cluster secret")]
    UnknownSecret,
    /// Authentication failed: altered, or stored under another session ID.
    #[error("entry failed authentication")]
    Forged,
}

impl Classify for OpenError {
    fn side(&self) -> Side {
        match self {
            // Entries are written by peer nodes: what they wrote does not hold up.
            OpenError::Malformed | OpenError::Forged => Side::Downstream,
            // The nodes of the cluster were given different secrets.
            OpenError::UnknownSecret => Side::Config,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            OpenError::Malformed => "session_entry_malformed",
            OpenError::UnknownSecret => "session_entry_unknown_secret",
            OpenError::Forged => "session_entry_forged",
        }
    }
}

/// A fresh AES-256-GCM context: BoringSSL's in-place calls need it mutable, and a context per
/// call (one key schedule, next to a TLS handshake) keeps the sealer lock-free across workers.
fn aead(key: &[u8; KEY_LEN]) -> AeadCtx {
    AeadCtx::new(&Algorithm::aes_256_gcm(), key, TAG_LEN).expect("a 32-byte AES-256-GCM key")
}

impl Sealer {
    /// A sealer for `secrets` (the first seals, all open). Needs at least one secret.
    pub fn new(secrets: &[Arc<ClusterSecret>]) -> Self {
        assert!(!secrets.is_empty(), "a sealer needs a cluster secret");
        let keys = secrets
            .iter()
            .map(|s| {
                let mut key = [0u8; KEY_LEN];
                s.derive(&[b"session-seal"], &mut key);
                (s.id(), key)
            })
            .collect();
        Self { keys }
    }

    /// Seals a session's DER, bound to its session ID.
    pub fn seal(&self, session_id: &[u8], der: &[u8]) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_LEN];
        boring::rand::rand_bytes(&mut nonce).expect("BoringSSL's random generator");
        self.seal_with_nonce(session_id, der, nonce)
    }

    fn seal_with_nonce(&self, session_id: &[u8], der: &[u8], nonce: [u8; NONCE_LEN]) -> Vec<u8> {
        let (id, key) = &self.keys[0];
        let mut out = Vec::with_capacity(HEADER + der.len() + TAG_LEN);
        out.push(VERSION);
        out.extend_from_slice(id);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(der);
        let mut tag = [0u8; TAG_LEN];
        let written = aead(key)
            .seal_in_place_mut(&nonce, &mut out[HEADER..], &mut tag, &aad(session_id))
            .expect("AES-GCM sealing of a session cannot fail")
            .len();
        debug_assert_eq!(written, TAG_LEN);
        out.extend_from_slice(&tag);
        out
    }

    /// Opens an entry read back for `session_id`.
    pub fn open(&self, session_id: &[u8], entry: &[u8]) -> Result<Vec<u8>, OpenError> {
        if entry.len() < HEADER + TAG_LEN || entry[0] != VERSION {
            return Err(OpenError::Malformed);
        }
        let id = &entry[1..5];
        let (_, key) = self
            .keys
            .iter()
            .find(|(k, _)| k == id)
            .ok_or(OpenError::UnknownSecret)?;
        let nonce = &entry[5..HEADER];
        let (body, tag) = entry[HEADER..].split_at(entry.len() - HEADER - TAG_LEN);
        let mut plain = body.to_vec();
        aead(key)
            .open_in_place_mut(nonce, &mut plain, tag, &aad(session_id))
            .map_err(|_| OpenError::Forged)?;
        Ok(plain)
    }
}

fn aad(session_id: &[u8]) -> Vec<u8> {
    let mut a = Vec::with_capacity(session_id.len() + 16);
    a.extend_from_slice(b"tlsgate-session");
    a.push(VERSION);
    a.extend_from_slice(session_id);
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(b: u8) -> Arc<ClusterSecret> {
        Arc::new(ClusterSecret::from_material(&[b; 32], "test").unwrap())
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// An entry sealed by the aws-lc-rs implementation of earlier versions (secret material
    /// 32 × 0x11, nonce 00..0b, session ID "kat-session-id", DER "kat session der"); also checked
    /// against Python's `hmac` + `cryptography` AES-GCM.
    const KAT_ENTRY: &str =
        "01c87a13d3000102030405060708090a0b2924c5493668d8ad3187e71017913e064e7cb32956de2dd1e2ba36080f8891";

    #[test]
    fn entries_of_earlier_versions_open_and_sealing_is_byte_identical() {
        let s = Sealer::new(&[secret(0x11)]);
        let nonce: [u8; NONCE_LEN] = core::array::from_fn(|i| i as u8);
        let entry = s.seal_with_nonce(b"kat-session-id", b"kat session der", nonce);
        assert_eq!(hex(&entry), KAT_ENTRY, "same bytes as the aws-lc-rs sealer");
        assert_eq!(s.open(b"kat-session-id", &entry).unwrap(), b"kat session der");
    }

    #[test]
    fn round_trip_and_every_tamper_is_refused() {
        let s = Sealer::new(&[secret(1)]);
        let entry = s.seal(b"id-1", b"session der");
        assert_eq!(entry.len(), HEADER + b"session der".len() + TAG_LEN);
        assert_eq!(s.open(b"id-1", &entry).unwrap(), b"session der");
        assert_eq!(s.open(b"id-2", &entry), Err(OpenError::Forged), "moved to another ID");
        for i in 0..entry.len() {
            let mut bad = entry.clone();
            bad[i] ^= 0x01;
            assert!(s.open(b"id-1", &bad).is_err(), "flipped byte {i} accepted");
        }
        assert_eq!(
            s.open(b"id-1", &entry[..entry.len() - 1]),
            Err(OpenError::Forged),
            "truncated"
        );
        assert_eq!(s.open(b"id-1", &entry[..10]), Err(OpenError::Malformed));
        assert_eq!(s.open(b"id-1", b""), Err(OpenError::Malformed));
        let empty = s.seal(b"id-1", b"");
        assert_eq!(s.open(b"id-1", &empty).unwrap(), b"");
    }

    #[test]
    fn nonces_are_fresh() {
        let s = Sealer::new(&[secret(1)]);
        let (a, b) = (s.seal(b"id", b"der"), s.seal(b"id", b"der"));
        assert_ne!(a[5..HEADER], b[5..HEADER]);
        assert_ne!(a, b);
    }

    #[test]
    fn foreign_secret_is_refused_and_previous_secret_still_opens() {
        let old = Sealer::new(&[secret(1)]);
        let foreign = Sealer::new(&[secret(9)]);
        let rotated = Sealer::new(&[secret(2), secret(1)]);
        let entry = old.seal(b"id", b"der");
        assert_eq!(foreign.open(b"id", &entry), Err(OpenError::UnknownSecret));
        assert_eq!(rotated.open(b"id", &entry).unwrap(), b"der");
        let fresh = rotated.seal(b"id", b"der2");
        assert_eq!(old.open(b"id", &fresh), Err(OpenError::UnknownSecret));
    }

    #[test]
    fn errors_are_classified() {
        assert_eq!(OpenError::Forged.side(), Side::Downstream);
        assert_eq!(OpenError::UnknownSecret.side(), Side::Config);
        assert_eq!(OpenError::Malformed.kind(), "session_entry_malformed");
    }
}
