//! Sealing sessions for the shared store.
//!
//! Entry layout: `version (1) | secret id (4) | nonce (12) | AES-256-GCM(session DER) | tag (16)`,
//! with the session ID and the version as associated data: an entry copied under another ID, made
//! with a foreign secret, truncated or altered does not open, and the handshake falls back to a
//! full one. The sealing key is HKDF(cluster secret, "session-seal"); during a root-secret
//! rotation entries of the previous secret still open.

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use std::sync::Arc;
use tlsgate_tls::secret::ClusterSecret;

const VERSION: u8 = 1;
const HEADER: usize = 1 + 4 + NONCE_LEN;

/// Seals and opens session entries with the cluster's secrets.
pub struct Sealer {
    /// (secret id, key); the first one seals.
    keys: Vec<([u8; 4], LessSafeKey)>,
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

impl Sealer {
    /// A sealer for `secrets` (the first seals, all open). Needs at least one secret.
    pub fn new(secrets: &[Arc<ClusterSecret>]) -> Self {
        assert!(!secrets.is_empty(), "a sealer needs a cluster secret");
        let keys = secrets
            .iter()
            .map(|s| {
                let mut key = [0u8; 32];
                s.derive(&[b"session-seal"], &mut key);
                let key = UnboundKey::new(&AES_256_GCM, &key).expect("32-byte AES-256-GCM key");
                (s.id(), LessSafeKey::new(key))
            })
            .collect();
        Self { keys }
    }

    /// Seals a session's DER, bound to its session ID.
    pub fn seal(&self, session_id: &[u8], der: &[u8]) -> Vec<u8> {
        let (id, key) = &self.keys[0];
        let nonce: [u8; NONCE_LEN] = rand::random();
        let mut out = Vec::with_capacity(HEADER + der.len() + AES_256_GCM.tag_len());
        out.push(VERSION);
        out.extend_from_slice(id);
        out.extend_from_slice(&nonce);
        let mut body = der.to_vec();
        key.seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), aad(session_id), &mut body)
            .expect("AES-GCM sealing of a session cannot fail");
        out.extend_from_slice(&body);
        out
    }

    /// Opens an entry read back for `session_id`.
    pub fn open(&self, session_id: &[u8], entry: &[u8]) -> Result<Vec<u8>, OpenError> {
        if entry.len() < HEADER + AES_256_GCM.tag_len() || entry[0] != VERSION {
            return Err(OpenError::Malformed);
        }
        let id = &entry[1..5];
        let (_, key) = self
            .keys
            .iter()
            .find(|(k, _)| k == id)
            .ok_or(OpenError::UnknownSecret)?;
        let nonce = Nonce::try_assume_unique_for_key(&entry[5..HEADER]).map_err(|_| OpenError::Malformed)?;
        let mut body = entry[HEADER..].to_vec();
        let plain = key
            .open_in_place(nonce, aad(session_id), &mut body)
            .map_err(|_| OpenError::Forged)?;
        Ok(plain.to_vec())
    }
}

fn aad(session_id: &[u8]) -> Aad<Vec<u8>> {
    let mut a = Vec::with_capacity(session_id.len() + 16);
    a.extend_from_slice(b"tlsgate-session");
    a.push(VERSION);
    a.extend_from_slice(session_id);
    Aad::from(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(b: u8) -> Arc<ClusterSecret> {
        Arc::new(ClusterSecret::from_material(&[b; 32], "test").unwrap())
    }

    #[test]
    fn round_trip_and_every_tamper_is_refused() {
        let s = Sealer::new(&[secret(1)]);
        let entry = s.seal(b"id-1", b"session der");
        assert_eq!(s.open(b"id-1", &entry).unwrap(), b"session der");
        assert_eq!(s.open(b"id-2", &entry), Err(OpenError::Forged), "moved to another ID");
        for i in 0..entry.len() {
            let mut bad = entry.clone();
            bad[i] ^= 0x01;
            assert!(s.open(b"id-1", &bad).is_err(), "flipped byte {i} accepted");
        }
        assert_eq!(s.open(b"id-1", &entry[..10]), Err(OpenError::Malformed));
        assert_eq!(s.open(b"id-1", b""), Err(OpenError::Malformed));
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
}
