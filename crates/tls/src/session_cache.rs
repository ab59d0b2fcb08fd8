//! The node-local TLS 1.2 session-ID cache: an LRU of DER-encoded sessions with an expiry.
//!
//! It sits behind BoringSSL's external-cache callbacks (the internal cache is off), so it
//! survives config reloads and is the L1 in front of the cluster store that a later issue adds.
//! Sessions are kept as DER, exactly as they would be kept remotely.

use boring::ssl::{SslRef, SslSession};
use lru::LruCache;
use parking_lot::Mutex;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Counters the metrics layer reads.
#[derive(Debug, Default)]
pub struct SessionCacheStats {
    /// Sessions stored.
    pub stored: AtomicU64,
    /// Lookups that found a live session.
    pub hits: AtomicU64,
    /// Lookups that found nothing or an expired session.
    pub misses: AtomicU64,
}

/// A cached session: its DER encoding and when it expires.
type Entry = (Vec<u8>, Instant);

/// A bounded, expiring session-ID cache shared by every worker.
#[derive(Debug)]
pub struct SessionCache {
    entries: Mutex<LruCache<Vec<u8>, Entry>>,
    timeout: Mutex<Duration>,
    /// Counters.
    pub stats: SessionCacheStats,
}

impl SessionCache {
    /// A cache of at most `size` sessions, each kept for `timeout`.
    pub fn new(size: usize, timeout: Duration) -> Self {
        Self {
            entries: Mutex::new(LruCache::new(NonZeroUsize::new(size.max(1)).expect("nonzero"))),
            timeout: Mutex::new(timeout),
            stats: SessionCacheStats::default(),
        }
    }

    /// Applies new limits (on reload) without dropping the sessions that still fit.
    pub fn reconfigure(&self, size: usize, timeout: Duration) {
        self.entries
            .lock()
            .resize(NonZeroUsize::new(size.max(1)).expect("nonzero"));
        *self.timeout.lock() = timeout;
    }

    /// Number of sessions held.
    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stores a session BoringSSL has just created (TLS 1.2 only: TLS 1.3 resumes by ticket).
    pub(crate) fn insert(&self, _ssl: &mut SslRef, session: SslSession) {
        let id = session.id().to_vec();
        if id.is_empty() {
            return;
        }
        let Ok(der) = session.to_der() else { return };
        let expiry = Instant::now() + *self.timeout.lock();
        self.entries.lock().put(id, (der, expiry));
        self.stats.stored.fetch_add(1, Ordering::Relaxed);
    }

    /// Finds a live session by ID; marks the connection as resumed-by-ID on a hit.
    pub(crate) fn lookup(&self, ssl: &SslRef, id: &[u8]) -> Option<Vec<u8>> {
        let found = {
            let mut entries = self.entries.lock();
            match entries.get(id) {
                Some((der, expiry)) if *expiry > Instant::now() => Some(der.clone()),
                Some(_) => {
                    entries.pop(id);
                    None
                }
                None => None,
            }
        };
        match &found {
            Some(_) => {
                self.stats.hits.fetch_add(1, Ordering::Relaxed);
                crate::handshake_info::mark_session_id(ssl);
            }
            None => {
                self.stats.misses.fetch_add(1, Ordering::Relaxed);
            }
        }
        found
    }
}
