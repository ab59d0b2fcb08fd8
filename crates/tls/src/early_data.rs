//! 0-RTT (TLS 1.3 early data) admission: each ticket's early data is accepted at most once.
//!
//! Early data can be replayed by anyone who recorded it. BoringSSL decides on 0-RTT after the
//! certificate-selection hook, so that hook asks a [`ReplayGuard`] to *claim* the ticket the client
//! offers (an atomic set-if-absent on a hash of the PSK identity, cluster-wide when the store is
//! Redis or Memcached); if the claim is not fresh, or the store cannot say, 0-RTT is switched off
//! for that connection and the client simply sends its request after the handshake. What the
//! HTTP layer then allows from early data (safe methods only, `Early-Data: 1`, 425 Too Early) is
//! the proxy's part.

use lru::LruCache;
use parking_lot::Mutex;
use std::future::Future;
use std::num::NonZeroUsize;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// The outcome of claiming a ticket for early data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// First use: early data may be accepted.
    Fresh,
    /// Seen before (a replay, or a client reusing a ticket): refuse early data.
    Replayed,
    /// The store could not answer: refuse early data (never accept unchecked).
    Unavailable,
}

/// A claim in flight.
pub type ClaimFuture = Pin<Box<dyn Future<Output = Claim> + Send>>;

/// Remembers which tickets already carried early data.
pub trait ReplayGuard: Send + Sync + std::fmt::Debug {
    /// Atomically records `key` (a hash of the PSK identity) for `ttl`; says whether it was new.
    fn claim(&self, key: [u8; 32], ttl: Duration) -> ClaimFuture;
}

/// A single node's guard: an in-memory set (used when the cluster store is `local`).
#[derive(Debug)]
pub struct LocalReplayGuard {
    seen: Mutex<LruCache<[u8; 32], Instant>>,
}

impl LocalReplayGuard {
    /// Remembers up to `capacity` tickets; when full, the oldest entries are forgotten, so a
    /// flood of fresh tickets can only make it refuse more, never accept a replay of a live one
    /// within `capacity` newer claims.
    pub fn new(capacity: usize) -> Self {
        Self {
            seen: Mutex::new(LruCache::new(NonZeroUsize::new(capacity.max(1)).expect("nonzero"))),
        }
    }
}

impl ReplayGuard for LocalReplayGuard {
    fn claim(&self, key: [u8; 32], ttl: Duration) -> ClaimFuture {
        let now = Instant::now();
        let mut seen = self.seen.lock();
        let claim = match seen.get(&key) {
            Some(expiry) if *expiry > now => Claim::Replayed,
            _ => {
                seen.put(key, now + ttl);
                Claim::Fresh
            }
        };
        Box::pin(std::future::ready(claim))
    }
}

/// Counters the metrics layer reads.
#[derive(Debug, Default)]
pub struct EarlyDataStats {
    /// ClientHellos that offered early data with a ticket.
    pub offered: AtomicU64,
    /// Claims that were fresh (BoringSSL may still reject, e.g. on ALPN mismatch).
    pub claimed: AtomicU64,
    /// Refused: the ticket had already carried early data.
    pub refused_replay: AtomicU64,
    /// Refused: the store could not confirm the claim.
    pub refused_unavailable: AtomicU64,
    /// Handshakes that accepted early data.
    pub accepted: AtomicU64,
    /// Requests served from early data (with `Early-Data: 1` towards upstreams).
    pub requests_served: AtomicU64,
    /// Requests from early data answered 425 Too Early (unsafe method or a body).
    pub requests_too_early: AtomicU64,
}

/// The 0-RTT state shared by every configuration generation.
#[derive(Debug, Default)]
pub struct EarlyData {
    guard: OnceLock<Arc<dyn ReplayGuard>>,
    /// Counters.
    pub stats: EarlyDataStats,
}

impl EarlyData {
    /// Sets the guard (once, at startup); without one, a local guard is used.
    pub fn set_guard(&self, guard: Arc<dyn ReplayGuard>) {
        let _ = self.guard.set(guard);
    }

    fn guard(&self) -> &Arc<dyn ReplayGuard> {
        self.guard.get_or_init(|| Arc::new(LocalReplayGuard::new(1 << 20)))
    }

    /// Claims the ticket behind a ClientHello's `pre_shared_key` extension, if it offers early data.
    /// None when there is nothing to decide (no early data offered, or no readable identity).
    pub(crate) fn claim_for(&self, psk_ext: Option<&[u8]>, early_ext: bool, ttl: Duration) -> Option<ClaimFuture> {
        if !early_ext {
            return None;
        }
        let identity = tlsgate_wire::client_hello::first_psk_identity(psk_ext?)?;
        self.stats.offered.fetch_add(1, Ordering::Relaxed);
        Some(self.guard().claim(claim_key(identity), ttl))
    }

    /// Counts a claim's outcome.
    pub(crate) fn count(&self, claim: Claim) {
        let counter = match claim {
            Claim::Fresh => &self.stats.claimed,
            Claim::Replayed => &self.stats.refused_replay,
            Claim::Unavailable => &self.stats.refused_unavailable,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// The key a ticket is claimed under: SHA-256 of its PSK identity (the same on every node and
/// every version, so claims made by nodes of mixed versions in one cluster still collide).
fn claim_key(identity: &[u8]) -> [u8; 32] {
    boring::sha::sha256(identity)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_key_is_sha256_of_the_identity() {
        // Computed with aws-lc-rs's SHA-256 before the switch to BoringSSL.
        assert_eq!(
            hex(&claim_key(b"psk identity")),
            "2c79cc03feea6aa78df95103a52b6b4872680fdca3567fefcf9913c30d9bbc7a"
        );
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    fn now<F: Future>(f: F) -> F::Output {
        futures_util::FutureExt::now_or_never(f).expect("ready")
    }

    #[test]
    fn a_ticket_is_fresh_once() {
        let guard = LocalReplayGuard::new(16);
        let ttl = Duration::from_secs(60);
        assert_eq!(now(guard.claim([1; 32], ttl)), Claim::Fresh);
        assert_eq!(now(guard.claim([1; 32], ttl)), Claim::Replayed);
        assert_eq!(now(guard.claim([2; 32], ttl)), Claim::Fresh);
    }

    #[test]
    fn claims_need_early_data_and_a_readable_identity() {
        let ed = EarlyData::default();
        let ext = [0, 9, 0, 3, b'a', b'b', b'c', 0, 0, 0, 1, 0, 33];
        let ttl = Duration::from_secs(60);
        assert!(ed.claim_for(Some(&ext), false, ttl).is_none());
        assert!(ed.claim_for(None, true, ttl).is_none());
        assert!(ed.claim_for(Some(&[0, 1]), true, ttl).is_none());
        assert_eq!(now(ed.claim_for(Some(&ext), true, ttl).unwrap()), Claim::Fresh);
        assert_eq!(now(ed.claim_for(Some(&ext), true, ttl).unwrap()), Claim::Replayed);
    }
}
