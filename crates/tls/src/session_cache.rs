//! The node-local TLS 1.2 session-ID cache: an LRU of DER-encoded sessions with an expiry.
//!
//! It sits behind BoringSSL's external-cache callbacks (the internal cache is off), so it
//! survives config reloads and is the L1 in front of the cluster store ([`RemoteSessions`],
//! implemented by tlsgate-cluster for Redis and Memcached). Sessions are kept as DER; the remote
//! store seals them before they leave the process.

use boring::ssl::{SslRef, SslSession};
use lru::LruCache;
use parking_lot::Mutex;
use std::future::Future;
use std::num::NonZeroUsize;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// A remote lookup in flight: resolves to the session's DER, or None (miss, timeout, error).
pub type RemoteLookup = Pin<Box<dyn Future<Output = Option<Vec<u8>>> + Send>>;

/// A cluster-wide session store behind the local cache (tlsgate-cluster implements it).
///
/// Both calls must return at once: `fetch` hands back a future that is polled inside the
/// handshake (and must bound its own wait), `store` queues the write for the background.
pub trait RemoteSessions: Send + Sync + std::fmt::Debug {
    /// Starts looking up session `id`; None when the store is not to be asked (breaker open).
    fn fetch(&self, id: &[u8]) -> Option<RemoteLookup>;
    /// Queues a new session for the store, to expire after `ttl`.
    fn store(&self, id: &[u8], der: &[u8], ttl: Duration);
}

/// Where a session lookup goes on.
pub(crate) enum Lookup {
    /// Found in the local cache.
    Local(Vec<u8>),
    /// Asked of the cluster store.
    Remote(RemoteLookup),
}

/// Counters the metrics layer reads.
#[derive(Debug, Default)]
pub struct SessionCacheStats {
    /// Sessions stored.
    pub stored: AtomicU64,
    /// Lookups that found a live session.
    pub hits: AtomicU64,
    /// Lookups that found nothing or an expired session.
    pub misses: AtomicU64,
    /// Lookups answered by the cluster store.
    pub remote_hits: AtomicU64,
    /// Lookups the cluster store could not answer (miss, timeout, error, breaker open).
    pub remote_misses: AtomicU64,
}

/// A cached session: its DER encoding and when it expires.
type Entry = (Vec<u8>, Instant);

/// A bounded, expiring session-ID cache shared by every worker.
#[derive(Debug)]
pub struct SessionCache {
    entries: Mutex<LruCache<Vec<u8>, Entry>>,
    timeout: Mutex<Duration>,
    remote: OnceLock<Arc<dyn RemoteSessions>>,
    /// Counters.
    pub stats: SessionCacheStats,
}

impl SessionCache {
    /// A cache of at most `size` sessions, each kept for `timeout`.
    pub fn new(size: usize, timeout: Duration) -> Self {
        Self {
            entries: Mutex::new(LruCache::new(NonZeroUsize::new(size.max(1)).expect("nonzero"))),
            timeout: Mutex::new(timeout),
            remote: OnceLock::new(),
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

    /// Puts a cluster store behind this cache (once, at startup).
    pub fn set_remote(&self, remote: Arc<dyn RemoteSessions>) {
        let _ = self.remote.set(remote);
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
        let timeout = *self.timeout.lock();
        if let Some(remote) = self.remote.get() {
            remote.store(&id, &der, timeout);
        }
        self.entries.lock().put(id, (der, Instant::now() + timeout));
        self.stats.stored.fetch_add(1, Ordering::Relaxed);
    }

    /// Finds a live session by ID: in the local cache (marking the connection as resumed by ID),
    /// else in the cluster store (the caller marks on success).
    pub(crate) fn lookup(self: &Arc<Self>, ssl: &SslRef, id: &[u8]) -> Option<Lookup> {
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
        if let Some(der) = found {
            self.stats.hits.fetch_add(1, Ordering::Relaxed);
            crate::handshake_info::mark_session_id(ssl);
            return Some(Lookup::Local(der));
        }
        self.stats.misses.fetch_add(1, Ordering::Relaxed);
        let remote = self.remote.get()?;
        let Some(fetch) = remote.fetch(id) else {
            self.stats.remote_misses.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        let cache = self.clone();
        let id = id.to_vec();
        Some(Lookup::Remote(Box::pin(async move {
            let der = fetch.await;
            match &der {
                Some(der) => {
                    cache.stats.remote_hits.fetch_add(1, Ordering::Relaxed);
                    let expiry = Instant::now() + *cache.timeout.lock();
                    cache.entries.lock().put(id, (der.clone(), expiry));
                }
                None => {
                    cache.stats.remote_misses.fetch_add(1, Ordering::Relaxed);
                }
            }
            der
        })))
    }
}
