//! [`ClusterStore`]: the shared store as the TLS layer sees it — a remote session cache whose
//! lookups never hold a handshake longer than `lookup_timeout`, writes that happen off the
//! handshake path, and single-use claims for 0-RTT — all behind one circuit breaker.

use crate::backend::{Backend, StoreError};
use crate::memcached_store::MemcachedStore;
use crate::redis_store::RedisStore;
use crate::seal::Sealer;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tlsgate_config::{ClusterConfig, StoreKind};
use tlsgate_error::Classify as _;
use tlsgate_timer::{Breaker, Recovery};
use tlsgate_tls::early_data::{Claim, ClaimFuture, ReplayGuard};
use tlsgate_tls::secret::ClusterSecret;
use tlsgate_tls::session_cache::{RemoteLookup, RemoteSessions};
use tokio::sync::mpsc;

/// Counters the metrics layer reads (exported as `tlsgate_session_store_*`).
#[derive(Debug, Default)]
pub struct StoreStats {
    /// Lookups that found a session that opened.
    pub lookup_hit: AtomicU64,
    /// Lookups that found nothing.
    pub lookup_miss: AtomicU64,
    /// Lookups cut off at `lookup_timeout`.
    pub lookup_timeout: AtomicU64,
    /// Lookups that failed (connection refused or lost).
    pub lookup_error: AtomicU64,
    /// Lookups not attempted because the breaker was open.
    pub lookup_skipped: AtomicU64,
    /// Entries found but refused: forged, foreign secret, malformed.
    pub lookup_rejected: AtomicU64,
    /// Sessions written.
    pub write_ok: AtomicU64,
    /// Writes that failed or timed out.
    pub write_error: AtomicU64,
    /// Writes dropped (breaker open or queue full).
    pub write_dropped: AtomicU64,
    /// 0-RTT claims that were fresh.
    pub claim_fresh: AtomicU64,
    /// 0-RTT claims refused as replays.
    pub claim_replayed: AtomicU64,
    /// 0-RTT claims the store could not confirm.
    pub claim_unavailable: AtomicU64,
}

fn inc(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

struct Write {
    key: String,
    value: Vec<u8>,
    ttl: Duration,
}

/// The shared store of a cluster.
pub struct ClusterStore {
    backend: Arc<dyn Backend>,
    sealer: Arc<Sealer>,
    breaker: Arc<Breaker>,
    prefix: String,
    lookup_timeout: Duration,
    writes: mpsc::Sender<Write>,
    /// Counters.
    pub stats: Arc<StoreStats>,
}

impl std::fmt::Debug for ClusterStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterStore")
            .field("backend", &self.backend)
            .field("breaker_open", &self.breaker.is_open())
            .finish()
    }
}

/// Queued session writes beyond which new ones are dropped (the store is not keeping up).
const WRITE_QUEUE: usize = 8192;

impl ClusterStore {
    /// Connects to the configured store (in the background: the breaker starts open and closes
    /// when the store first answers) and starts the writer and probe tasks on the current runtime.
    /// Returns None for `store = "local"`.
    pub fn start(config: &ClusterConfig, secrets: &[Arc<ClusterSecret>]) -> Result<Option<Arc<Self>>, StoreError> {
        let io_timeout = config.write_timeout.get().max(Duration::from_millis(100));
        let backend: Arc<dyn Backend> = match config.store {
            StoreKind::Local => return Ok(None),
            StoreKind::Redis => Arc::new(RedisStore::new(
                config.redis_mode,
                &config.servers,
                config.sentinel_service.as_deref(),
                io_timeout,
            )?),
            StoreKind::Memcached => Arc::new(MemcachedStore::new(&config.servers, config.connections, io_timeout)),
        };
        // Open from the start: the probe closes it as soon as the store first answers, so a
        // gateway starting before its store never waits on it.
        let breaker = Arc::new(Breaker::new(config.breaker_failures, Recovery::Probe).starting_open());
        let stats = Arc::new(StoreStats::default());
        let (tx, rx) = mpsc::channel(WRITE_QUEUE);
        tokio::spawn(write_sessions(
            rx,
            backend.clone(),
            breaker.clone(),
            stats.clone(),
            config.write_timeout.get(),
        ));
        tokio::spawn(probe(
            backend.clone(),
            breaker.clone(),
            config.breaker_retry.get(),
            io_timeout,
        ));
        Ok(Some(Arc::new(Self {
            backend,
            sealer: Arc::new(Sealer::new(secrets)),
            breaker,
            prefix: config.key_prefix.clone(),
            lookup_timeout: config.lookup_timeout.get(),
            writes: tx,
            stats,
        })))
    }

    /// Whether the breaker is open (the store is not being asked).
    pub fn breaker_open(&self) -> bool {
        self.breaker.is_open()
    }

    /// Times the breaker opened.
    pub fn breaker_opened_total(&self) -> u64 {
        self.breaker.opened_total()
    }

    /// The store's connections, for shared state besides sessions (the rate limits' counters,
    /// `tlsgate`'s `rate_limit_store.rs`), and the prefix of every key.
    pub fn backend(&self) -> (Arc<dyn Backend>, &str) {
        (self.backend.clone(), &self.prefix)
    }

    /// `redis` or `memcached`.
    pub fn kind(&self) -> &'static str {
        self.backend.kind()
    }

    fn session_key(&self, id: &[u8]) -> String {
        format!("{}s:{}", self.prefix, hex(id))
    }

    /// What a lookup or claim future needs after `self` is gone.
    fn ctx(&self) -> Ctx {
        Ctx {
            breaker: self.breaker.clone(),
            stats: self.stats.clone(),
            kind: self.backend.kind(),
            timeout: self.lookup_timeout,
        }
    }
}

struct Ctx {
    breaker: Arc<Breaker>,
    stats: Arc<StoreStats>,
    kind: &'static str,
    timeout: Duration,
}

impl Ctx {
    fn failed(&self, what: &str, error: &dyn std::fmt::Display) {
        if self.breaker.failure() {
            tracing::warn!(
                store = self.kind,
                %error,
                "session store {what} failed; circuit breaker open: handshakes stop waiting on the store \
                 (full handshakes, no 0-RTT) until it answers again"
            );
        } else {
            tracing::debug!(store = self.kind, %error, "session store {what} failed");
        }
    }
}

impl RemoteSessions for ClusterStore {
    fn fetch(&self, id: &[u8]) -> Option<RemoteLookup> {
        if !self.breaker.allows() {
            inc(&self.stats.lookup_skipped);
            return None;
        }
        let this = self.ctx();
        let sealer = self.sealer.clone();
        let id = id.to_vec();
        let get = self.backend.get(self.session_key(&id));
        Some(Box::pin(async move {
            // The shared per-thread timer: no timer-wheel arm (and eventfd wake) per lookup.
            match tlsgate_timer::timeout(this.timeout, get).await {
                Ok(Ok(Some(entry))) => {
                    this.breaker.success();
                    match sealer.open(&id, &entry) {
                        Ok(der) => {
                            inc(&this.stats.lookup_hit);
                            Some(der)
                        }
                        Err(e) => {
                            inc(&this.stats.lookup_rejected);
                            // Every lookup of such an entry fails (another cluster sharing
                            // the store, a rotated secret): a line a second at most.
                            static REFUSED_LOG: tlsgate_error::log_limit::LogLimit =
                                tlsgate_error::log_limit::LogLimit::new(std::time::Duration::from_secs(1));
                            if let Some(suppressed) = REFUSED_LOG.allow() {
                                tracing::warn!(error = %e, suppressed, "session store entry refused (not sealed by this cluster)");
                            }
                            None
                        }
                    }
                }
                Ok(Ok(None)) => {
                    this.breaker.success();
                    inc(&this.stats.lookup_miss);
                    None
                }
                Ok(Err(e)) => {
                    inc(&this.stats.lookup_error);
                    this.failed("lookup", &e);
                    None
                }
                Err(_) => {
                    inc(&this.stats.lookup_timeout);
                    this.failed("lookup", &format_args!("no answer within {:?}", this.timeout));
                    None
                }
            }
        }))
    }

    fn store(&self, id: &[u8], der: &[u8], ttl: Duration) {
        if !self.breaker.allows() {
            inc(&self.stats.write_dropped);
            return;
        }
        let write = Write {
            key: self.session_key(id),
            value: self.sealer.seal(id, der),
            ttl,
        };
        if self.writes.try_send(write).is_err() {
            inc(&self.stats.write_dropped);
        }
    }
}

impl ReplayGuard for ClusterStore {
    fn claim(&self, key: [u8; 32], ttl: Duration) -> ClaimFuture {
        if !self.breaker.allows() {
            inc(&self.stats.claim_unavailable);
            return Box::pin(std::future::ready(Claim::Unavailable));
        }
        let this = self.ctx();
        let add = self
            .backend
            .add(format!("{}e:{}", self.prefix, hex(&key)), b"1".to_vec(), ttl);
        Box::pin(async move {
            match tlsgate_timer::timeout(this.timeout, add).await {
                Ok(Ok(true)) => {
                    this.breaker.success();
                    inc(&this.stats.claim_fresh);
                    Claim::Fresh
                }
                Ok(Ok(false)) => {
                    this.breaker.success();
                    inc(&this.stats.claim_replayed);
                    Claim::Replayed
                }
                Ok(Err(e)) => {
                    inc(&this.stats.claim_unavailable);
                    this.failed("0-RTT claim", &e);
                    Claim::Unavailable
                }
                Err(_) => {
                    inc(&this.stats.claim_unavailable);
                    this.failed("0-RTT claim", &format_args!("no answer within {:?}", this.timeout));
                    Claim::Unavailable
                }
            }
        })
    }
}

/// Writes queued sessions; each write is its own task so a slow store does not serialise them.
async fn write_sessions(
    mut rx: mpsc::Receiver<Write>,
    backend: Arc<dyn Backend>,
    breaker: Arc<Breaker>,
    stats: Arc<StoreStats>,
    timeout: Duration,
) {
    while let Some(w) = rx.recv().await {
        if !breaker.allows() {
            inc(&stats.write_dropped);
            continue;
        }
        let set = backend.set(w.key, w.value, w.ttl);
        let (breaker, stats, kind) = (breaker.clone(), stats.clone(), backend.kind());
        tokio::spawn(async move {
            match tokio::time::timeout(timeout, set).await {
                Ok(Ok(())) => {
                    breaker.success();
                    inc(&stats.write_ok);
                }
                Ok(Err(e)) => {
                    inc(&stats.write_error);
                    if breaker.failure() {
                        tracing::warn!(store = kind, error = %e, "session store write failed; circuit breaker open");
                    }
                }
                Err(_) => {
                    inc(&stats.write_error);
                    if breaker.failure() {
                        tracing::warn!(store = kind, "session store write timed out; circuit breaker open");
                    }
                }
            }
        });
    }
}

/// While the breaker is open, pings the store every `retry`; closes the breaker when it answers.
async fn probe(backend: Arc<dyn Backend>, breaker: Arc<Breaker>, retry: Duration, timeout: Duration) {
    // The kind of the last failure logged: the same failure again is not logged again.
    let mut last_error: Option<&'static str> = None;
    // The breaker starts open, before any connection exists: nothing to reset then.
    let mut was_open = true;
    loop {
        let open = breaker.is_open();
        if open && !was_open {
            // It opened since the last look: connections that stopped answering must not be
            // trusted again when it closes (a hung connection never fails on its own).
            backend.reset();
        }
        was_open = open;
        if open {
            match tokio::time::timeout(timeout, backend.ping()).await {
                Ok(Ok(())) => {
                    if breaker.close() {
                        tracing::info!(store = backend.kind(), "session store answers; circuit breaker closed");
                    }
                    last_error = None;
                }
                Ok(Err(e)) => {
                    if last_error != Some(e.kind()) {
                        tracing::warn!(store = backend.kind(), error = %e, kind = e.kind(), "session store unreachable; retrying every {retry:?}");
                        last_error = Some(e.kind());
                    }
                }
                Err(_) => tracing::debug!(store = backend.kind(), "session store probe timed out"),
            }
        }
        tokio::time::sleep(retry).await;
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
