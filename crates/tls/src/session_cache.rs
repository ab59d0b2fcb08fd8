//! The node-local TLS 1.2 session-ID cache: an LRU of DER-encoded sessions with an expiry.
//!
//! It sits behind BoringSSL's external-cache callbacks (the internal cache is off), so it
//! survives config reloads and is the L1 in front of the cluster store ([`RemoteSessions`],
//! implemented by tlsgate-cluster for Redis and Memcached). Sessions are kept as DER; the remote
//! store seals them before they leave the process.

use crate::ffi::{SessionLookup, SessionStore};
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

/// A cached session: its DER encoding, when it expires and when it was last used.
type Entry = (Vec<u8>, Instant, Instant);

/// One LRU of the cache, behind its lock.
type Shard = Mutex<LruCache<Vec<u8>, Entry>>;

/// Caches of at least this many sessions are split into [`SHARDS`] LRUs, each behind its own
/// lock, so workers resuming different sessions do not wait on one mutex.
const SHARDED_FROM: usize = 1024;
/// Number of LRUs a large cache is split into.
const SHARDS: usize = 16;

/// A bounded, expiring session-ID cache shared by every worker: [`SHARDS`] LRUs chosen by the
/// session ID's first byte (IDs are random), each holding its share of the size.
#[derive(Debug)]
pub struct SessionCache {
    shards: Box<[Shard]>,
    /// The session lifetime in milliseconds (read per store and lookup: no lock).
    timeout_ms: AtomicU64,
    remote: OnceLock<Arc<dyn RemoteSessions>>,
    /// Counters.
    pub stats: SessionCacheStats,
}

/// Each of `shards` LRUs' share of `size` (rounded up: the cache holds at most `shards - 1`
/// more than `size`).
fn shard_capacity(size: usize, shards: usize) -> NonZeroUsize {
    NonZeroUsize::new(size.div_ceil(shards).max(1)).expect("nonzero")
}

impl SessionCache {
    /// A cache of at most `size` sessions, each kept for `timeout`.
    pub fn new(size: usize, timeout: Duration) -> Self {
        let n = if size >= SHARDED_FROM { SHARDS } else { 1 };
        Self {
            shards: (0..n)
                .map(|_| Mutex::new(LruCache::new(shard_capacity(size, n))))
                .collect(),
            timeout_ms: AtomicU64::new(timeout.as_millis() as u64),
            remote: OnceLock::new(),
            stats: SessionCacheStats::default(),
        }
    }

    fn shard(&self, id: &[u8]) -> &Shard {
        let i = id.first().map_or(0, |b| *b as usize) % self.shards.len();
        &self.shards[i]
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.load(Ordering::Relaxed))
    }

    /// Applies new limits (on reload) without dropping the sessions that still fit.
    pub fn reconfigure(&self, size: usize, timeout: Duration) {
        let cap = shard_capacity(size, self.shards.len());
        for shard in self.shards.iter() {
            shard.lock().resize(cap);
        }
        self.timeout_ms.store(timeout.as_millis() as u64, Ordering::Relaxed);
    }

    /// Puts a cluster store behind this cache (once, at startup).
    pub fn set_remote(&self, remote: Arc<dyn RemoteSessions>) {
        let _ = self.remote.set(remote);
    }

    /// Number of sessions held.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn put(&self, id: Vec<u8>, der: Vec<u8>, expiry: Instant) {
        let now = Instant::now();
        self.shard(&id).lock().put(id, (der, expiry, now));
    }
}

/// A cached session as handed to a successor process (binary upgrade); its bytes (which hold
/// the session's master secret) are wiped when it is dropped.
pub struct ExportedSession {
    /// The session ID.
    pub id: Vec<u8>,
    /// The session, DER-encoded.
    pub der: Vec<u8>,
    /// How long it has left to live.
    pub ttl: Duration,
}

impl Drop for ExportedSession {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.der);
    }
}

impl std::fmt::Debug for ExportedSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExportedSession")
            .field("id_len", &self.id.len())
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl SessionCache {
    /// The live sessions, least recently used first, with the time each has left: what a
    /// successor process takes over in a binary upgrade (importing them in this order keeps the
    /// LRU order).
    pub fn export(&self) -> Vec<ExportedSession> {
        let now = Instant::now();
        let mut live: Vec<(Instant, ExportedSession)> = Vec::new();
        for shard in self.shards.iter() {
            let entries = shard.lock();
            live.extend(
                entries
                    .iter()
                    .filter(|(_, (_, expiry, _))| *expiry > now)
                    .map(|(id, (der, expiry, used))| {
                        let session = ExportedSession {
                            id: id.clone(),
                            der: der.clone(),
                            ttl: *expiry - now,
                        };
                        (*used, session)
                    }),
            );
        }
        live.sort_by_key(|(used, _)| *used);
        live.into_iter().map(|(_, s)| s).collect()
    }

    /// Installs sessions of the process this one takes over from, each for the time it has
    /// left (at most this cache's timeout), oldest first; sessions already expired are skipped.
    /// Not passed on to the cluster store (the other process stored them already). Returns how
    /// many were installed.
    pub fn import<'a>(&self, sessions: impl IntoIterator<Item = (&'a [u8], &'a [u8], Duration)>) -> usize {
        let now = Instant::now();
        let timeout = self.timeout();
        let mut installed = 0;
        for (id, der, ttl) in sessions {
            if ttl.is_zero() || id.is_empty() {
                continue;
            }
            self.put(id.to_vec(), der.to_vec(), now + ttl.min(timeout));
            installed += 1;
        }
        installed
    }
}

/// The policy of BoringSSL's external session cache (installed by `ffi::install_session_cache`).
impl SessionStore for SessionCache {
    /// Stores a session BoringSSL has just created (TLS 1.2 only: TLS 1.3 resumes by ticket).
    fn insert(&self, _ssl: &mut SslRef, session: SslSession) {
        let id = session.id().to_vec();
        if id.is_empty() {
            return;
        }
        let Ok(der) = session.to_der() else { return };
        let timeout = self.timeout();
        if let Some(remote) = self.remote.get() {
            remote.store(&id, &der, timeout);
        }
        self.put(id, der, Instant::now() + timeout);
        self.stats.stored.fetch_add(1, Ordering::Relaxed);
    }

    /// Finds a live session by ID: in the local cache (marking the connection as resumed by ID),
    /// else in the cluster store (marked by [`SessionStore::pending_resumed`] on success).
    fn lookup(self: Arc<Self>, ssl: &SslRef, id: &[u8]) -> Option<SessionLookup> {
        let found = {
            let now = Instant::now();
            let mut entries = self.shard(id).lock();
            match entries.get_mut(id) {
                Some((der, expiry, used)) if *expiry > now => {
                    *used = now;
                    Some(der.clone())
                }
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
            return Some(SessionLookup::Found(der));
        }
        self.stats.misses.fetch_add(1, Ordering::Relaxed);
        let remote = self.remote.get()?;
        let Some(fetch) = remote.fetch(id) else {
            self.stats.remote_misses.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        let id = id.to_vec();
        Some(SessionLookup::Pending(Box::pin(async move {
            let der = fetch.await;
            match &der {
                Some(der) => {
                    self.stats.remote_hits.fetch_add(1, Ordering::Relaxed);
                    let expiry = Instant::now() + self.timeout();
                    self.put(id, der.clone(), expiry);
                }
                None => {
                    self.stats.remote_misses.fetch_add(1, Ordering::Relaxed);
                }
            }
            der
        })))
    }

    fn pending_resumed(&self, ssl: &SslRef) {
        crate::handshake_info::mark_session_id(ssl);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handshake_info::{self, HandshakeInfo, Resumption};
    use crate::test_tls::{client_ctx, established, server_ctx, Handshake};
    use boring::ssl::{SslContext, SslOptions, SslSessionCacheMode, SslVersion};

    fn tls12() -> impl FnOnce(&mut boring::ssl::SslContextBuilder) {
        |b| b.set_max_proto_version(Some(SslVersion::TLS1_2)).unwrap()
    }

    /// A TLS 1.2 server resuming by session ID only, through `cache`.
    fn server(cache: &Arc<SessionCache>) -> SslContext {
        server_ctx(|b| {
            b.set_max_proto_version(Some(SslVersion::TLS1_2)).unwrap();
            b.set_options(SslOptions::NO_TICKET);
            b.set_session_id_context(b"test").unwrap();
            b.set_session_cache_mode(SslSessionCacheMode::SERVER | SslSessionCacheMode::NO_INTERNAL);
            crate::ffi::install_session_cache(b, cache.clone());
        })
    }

    /// One handshake offering `session`; returns what the server saw and the client's session.
    fn connect(server: &SslContext, client: &SslContext, session: Option<&SslSession>) -> (Resumption, SslSession) {
        let hs = Handshake::resuming(server, client, session, |s| {
            handshake_info::attach(s);
            // The session lookup is asynchronous: BoringSSL polls it with the connection's waker.
            s.set_task_waker(Some(std::task::Waker::noop().clone()));
        });
        let resumption = HandshakeInfo::read(established(&hs.server)).resumption;
        (resumption, established(&hs.client).session().unwrap().to_owned())
    }

    #[test]
    fn sessions_are_stored_then_resumed_by_id() {
        let cache = Arc::new(SessionCache::new(16, Duration::from_secs(60)));
        let (server, client) = (server(&cache), client_ctx(tls12()));
        let (first, session) = connect(&server, &client, None);
        assert_eq!(first, Resumption::Full);
        assert_eq!((cache.len(), cache.stats.stored.load(Ordering::Relaxed)), (1, 1));
        let (second, _) = connect(&server, &client, Some(&session));
        assert_eq!(second, Resumption::SessionId);
        assert_eq!(cache.stats.hits.load(Ordering::Relaxed), 1);
        // Expired sessions are dropped at lookup.
        cache.reconfigure(16, Duration::ZERO);
        let (_, fresh) = connect(&server, &client, None);
        let (third, _) = connect(&server, &client, Some(&fresh));
        assert_eq!(third, Resumption::Full);
        assert_eq!(cache.stats.misses.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn sessions_of_the_previous_process_resume_after_an_import() {
        let old = Arc::new(SessionCache::new(16, Duration::from_secs(60)));
        let client = client_ctx(tls12());
        let (_, first) = connect(&server(&old), &client, None);
        let (_, second) = connect(&server(&old), &client, None);
        // `first` used last: it must come out last (most recent) and survive a small cache.
        connect(&server(&old), &client, Some(&first));
        let exported = old.export();
        assert_eq!(exported.len(), 2);
        assert!(exported
            .iter()
            .all(|s| s.ttl > Duration::from_secs(59) && s.ttl <= Duration::from_secs(60)));
        assert_eq!(exported[1].id, first.id(), "most recently used last");
        assert!(!format!("{exported:?}").contains("der"), "no session bytes in Debug");

        let new = Arc::new(SessionCache::new(1, Duration::from_secs(30)));
        let installed = new.import(exported.iter().map(|s| (&s.id[..], &s.der[..], s.ttl)));
        assert_eq!((installed, new.len()), (2, 1), "the LRU keeps the most recent");
        let (resumed, _) = connect(&server(&new), &client, Some(&first));
        assert_eq!(resumed, Resumption::SessionId);
        let (evicted, _) = connect(&server(&new), &client, Some(&second));
        assert_eq!(evicted, Resumption::Full);
        assert_eq!(
            new.import([(&b"x"[..], &b"y"[..], Duration::ZERO)]),
            0,
            "expired skipped"
        );
    }

    #[test]
    fn a_large_cache_is_sharded_and_exports_in_use_order() {
        let cache = SessionCache::new(SHARDED_FROM, Duration::from_secs(60));
        assert_eq!(cache.shards.len(), SHARDS);
        let now = Instant::now();
        for b in 0..=255u8 {
            cache.put(vec![b, 1], vec![b], now + Duration::from_secs(60));
        }
        assert_eq!(cache.len(), 256, "spread over the shards, none full");
        // Used again: comes out last.
        let used = cache.shard(&[7, 1]).lock().get_mut(&vec![7u8, 1]).map(|e| {
            e.2 = Instant::now();
        });
        assert!(used.is_some());
        let exported = cache.export();
        assert_eq!(exported.len(), 256);
        assert_eq!(exported.last().map(|s| s.id.clone()), Some(vec![7, 1]));
        // Each shard holds its share of the size.
        cache.reconfigure(SHARDS, Duration::from_secs(60));
        assert_eq!(cache.len(), SHARDS, "one per shard left");
    }

    /// A cluster store holding what it was given, answering at once.
    #[derive(Debug, Default)]
    struct Remote(parking_lot::Mutex<Vec<(Vec<u8>, Vec<u8>)>>);

    impl RemoteSessions for Remote {
        fn fetch(&self, id: &[u8]) -> Option<RemoteLookup> {
            let der = self.0.lock().iter().find(|(k, _)| k == id).map(|(_, v)| v.clone());
            Some(Box::pin(std::future::ready(der)))
        }
        fn store(&self, id: &[u8], der: &[u8], _ttl: Duration) {
            self.0.lock().push((id.to_vec(), der.to_vec()));
        }
    }

    #[test]
    fn a_local_miss_resumes_from_the_cluster_store() {
        let remote = Arc::new(Remote::default());
        let node_a = Arc::new(SessionCache::new(16, Duration::from_secs(60)));
        let node_b = Arc::new(SessionCache::new(16, Duration::from_secs(60)));
        node_a.set_remote(remote.clone());
        node_b.set_remote(remote.clone());
        let client = client_ctx(tls12());
        let (_, session) = connect(&server(&node_a), &client, None);
        assert_eq!(remote.0.lock().len(), 1, "stored in the cluster too");
        let (resumed, _) = connect(&server(&node_b), &client, Some(&session));
        assert_eq!(resumed, Resumption::SessionId, "marked by the pending lookup");
        assert_eq!(node_b.stats.remote_hits.load(Ordering::Relaxed), 1);
        assert_eq!(node_b.len(), 1, "kept locally for next time");
    }
}
