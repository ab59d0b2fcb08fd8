//! Session-ticket keys that rotate by themselves.
//!
//! The ring holds the current key (encrypts new tickets) and the retired keys that may still
//! decrypt: a key retired at time `t` is erased at `t + lifetime`, so a ticket never outlives its
//! key by more than the ticket lifetime, and a stolen key exposes at most `rotation + lifetime` of
//! traffic (the forward-secrecy trade-off of tickets). Tickets under a retired key are accepted
//! and renewed under the current one.
//!
//! Ticket format is BoringSSL's classic one (RFC 5077 layout): 16-byte key name, AES-128-CBC,
//! HMAC-SHA256. Reads are lock-free (`ArcSwap`), so a handshake never waits for a rotation.

use arc_swap::ArcSwap;
use boring::hash::MessageDigest;
use boring::hmac::HmacCtxRef;
use boring::ssl::{SslRef, TicketKeyCallbackResult};
use boring::symm::{Cipher, CipherCtxRef};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One ticket key.
#[derive(Clone)]
pub struct TicketKey {
    /// Key name sent in the clear in each ticket, used to find the key again.
    pub name: [u8; 16],
    aes: [u8; 16],
    hmac: [u8; 32],
    /// When this key stopped being current (None while current).
    retired_at: Option<Instant>,
}

impl std::fmt::Debug for TicketKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print key material.
        f.debug_struct("TicketKey")
            .field("name", &hex(&self.name))
            .field("retired_at", &self.retired_at)
            .finish()
    }
}

impl TicketKey {
    /// A fresh random key.
    pub fn generate() -> Self {
        Self {
            name: rand::random(),
            aes: rand::random(),
            hmac: rand::random(),
            retired_at: None,
        }
    }
}

/// Counters the metrics layer reads.
#[derive(Debug, Default)]
pub struct TicketStats {
    /// Tickets issued.
    pub encrypted: AtomicU64,
    /// Tickets accepted under the current key.
    pub decrypted_current: AtomicU64,
    /// Tickets accepted under a retired key (and renewed).
    pub decrypted_renew: AtomicU64,
    /// Tickets whose key was unknown or erased (full handshake instead).
    pub unknown_key: AtomicU64,
    /// Rotations performed.
    pub rotations: AtomicU64,
}

/// The rotating set of ticket keys shared by every TLS context of the process (survives reloads).
#[derive(Debug)]
pub struct TicketKeyRing {
    keys: ArcSwap<Vec<TicketKey>>,
    lifetime: parking_lot::Mutex<Duration>,
    /// Counters.
    pub stats: TicketStats,
}

impl TicketKeyRing {
    /// A ring with one fresh current key.
    pub fn new(lifetime: Duration) -> Self {
        Self {
            keys: ArcSwap::from_pointee(vec![TicketKey::generate()]),
            lifetime: parking_lot::Mutex::new(lifetime),
            stats: TicketStats::default(),
        }
    }

    /// Changes the ticket lifetime (on reload); takes effect at the next rotation or purge.
    pub fn set_lifetime(&self, lifetime: Duration) {
        *self.lifetime.lock() = lifetime;
    }

    /// Makes a new key current, retires the old one, and erases keys retired longer than the
    /// lifetime ago.
    pub fn rotate(&self) {
        self.rotate_at(Instant::now());
    }

    fn rotate_at(&self, now: Instant) {
        let lifetime = *self.lifetime.lock();
        let mut keys: Vec<TicketKey> = (**self.keys.load()).clone();
        for k in &mut keys {
            k.retired_at.get_or_insert(now);
        }
        keys.retain(|k| k.retired_at.is_none_or(|t| now.saturating_duration_since(t) < lifetime));
        keys.insert(0, TicketKey::generate());
        self.keys.store(Arc::new(keys));
        self.stats.rotations.fetch_add(1, Ordering::Relaxed);
    }

    /// Erases retired keys older than the lifetime without making a new key.
    pub fn purge(&self) {
        let lifetime = *self.lifetime.lock();
        let now = Instant::now();
        let keys = self.keys.load();
        if keys.iter().any(|k| {
            k.retired_at
                .is_some_and(|t| now.saturating_duration_since(t) >= lifetime)
        }) {
            let kept = keys
                .iter()
                .filter(|k| k.retired_at.is_none_or(|t| now.saturating_duration_since(t) < lifetime))
                .cloned()
                .collect();
            self.keys.store(Arc::new(kept));
        }
    }

    /// Names of the keys in the ring, current first.
    pub fn key_names(&self) -> Vec<[u8; 16]> {
        self.keys.load().iter().map(|k| k.name).collect()
    }

    /// The body of BoringSSL's ticket-key callback (installed by `ffi::install_ticket_keys`).
    pub(crate) fn ticket_callback(
        &self,
        _ssl: &SslRef,
        name: &mut [u8; 16],
        iv: &mut [u8; boring_sys::EVP_MAX_IV_LENGTH as usize],
        cipher: &mut CipherCtxRef,
        hmac: &mut HmacCtxRef,
        encrypt: bool,
    ) -> TicketKeyCallbackResult {
        let keys = self.keys.load();
        if encrypt {
            let key = &keys[0];
            *name = key.name;
            *iv = [0; boring_sys::EVP_MAX_IV_LENGTH as usize];
            let fresh_iv: [u8; 16] = rand::random();
            iv[..16].copy_from_slice(&fresh_iv);
            if cipher.init_encrypt(&Cipher::aes_128_cbc(), &key.aes, iv).is_err()
                || hmac.init(&key.hmac, &MessageDigest::sha256()).is_err()
            {
                return TicketKeyCallbackResult::Error;
            }
            self.stats.encrypted.fetch_add(1, Ordering::Relaxed);
            return TicketKeyCallbackResult::Success;
        }
        let Some(pos) = keys.iter().position(|k| k.name == *name) else {
            self.stats.unknown_key.fetch_add(1, Ordering::Relaxed);
            return crate::ffi::TICKET_UNKNOWN;
        };
        let key = &keys[pos];
        if hmac.init(&key.hmac, &MessageDigest::sha256()).is_err()
            || cipher.init_decrypt(&Cipher::aes_128_cbc(), &key.aes, iv).is_err()
        {
            return TicketKeyCallbackResult::Error;
        }
        crate::handshake_info::mark_ticket(_ssl);
        if pos == 0 {
            self.stats.decrypted_current.fetch_add(1, Ordering::Relaxed);
            TicketKeyCallbackResult::Success
        } else {
            self.stats.decrypted_renew.fetch_add(1, Ordering::Relaxed);
            TicketKeyCallbackResult::DecryptSuccessRenew
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_keeps_retired_keys_for_the_lifetime_then_erases_them() {
        let ring = TicketKeyRing::new(Duration::from_secs(10));
        let first = ring.key_names()[0];
        let t0 = Instant::now();
        ring.rotate_at(t0);
        assert_eq!(ring.key_names().len(), 2);
        assert_eq!(ring.key_names()[1], first, "old key kept, behind the new current one");
        ring.rotate_at(t0 + Duration::from_secs(5));
        assert_eq!(ring.key_names().len(), 3);
        ring.rotate_at(t0 + Duration::from_secs(11));
        let names = ring.key_names();
        assert!(
            !names.contains(&first),
            "key retired 11 s ago with a 10 s lifetime must be gone"
        );
        assert_eq!(names.len(), 3);
    }

    #[test]
    fn keys_are_distinct() {
        let a = TicketKey::generate();
        let b = TicketKey::generate();
        assert_ne!(a.name, b.name);
        assert_ne!(a.aes, b.aes);
    }
}
