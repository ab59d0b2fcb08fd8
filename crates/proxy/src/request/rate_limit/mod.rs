//! Request rate limits (`[[rate_limit]]`, named by routes): once a request's route is known,
//! each limit the route names counts it under its key — the client's address, the connection's
//! JA4, a header, a cookie, or the route — and a request over a limit is answered 429 with
//! `Retry-After` and the `RateLimit-Policy` / `RateLimit` fields (`headers`).
//!
//! - [`window`]: the sliding-window counter of one key (this node's counts and the cluster's).
//! - [`table`]: one limit's keys in fixed memory (sharded, evicting; keys are keyed hashes).
//! - [`key`]: a request's key under a limit, hashed without allocating.
//! - [`sync`]: cluster-wide limits reconciled with the `[cluster]` store in batches.
//! - [`metrics`]: `tlsgate_rate_limited_total{limit}` and the rest.
//!
//! [`RateLimiter`] is the process's (in `Gateway`): the limits of the current configuration over
//! tables that outlive reloads (a limit keeps its table while its window and size stay), and
//! the reconciliation's state. A route that names no limit costs one length test per request.

mod headers;
mod key;
pub mod metrics;
pub mod sync;
mod table;
mod window;

pub use sync::{CountFuture, CountOp, CountTotals, CounterStore, WRITERS_TTL};

use crate::body::{Body, ClientBody};
use arc_swap::ArcSwap;
use http::{HeaderMap, HeaderValue, Request, Response};
use key::{HashKey, KeyKind};
use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;
use std::sync::{Arc, LazyLock, OnceLock};
use std::time::Duration;
use sync::SyncState;
use table::Table;
use tlsgate_config::{Cidr, Config, RateLimitConfig, RateLimitScope};
use tlsgate_error::log_limit::LogLimit;
use window::Quota;

/// Limit names as small numbers, so that a route refers to its limits without strings: a name
/// keeps its number for the life of the process (names come from configuration files only).
static NAMES: LazyLock<Mutex<Vec<Arc<str>>>> = LazyLock::new(Default::default);

fn name_id(name: &str) -> usize {
    let mut names = NAMES.lock();
    match names.iter().position(|n| &**n == name) {
        Some(i) => i,
        None => {
            names.push(Arc::from(name));
            names.len() - 1
        }
    }
}

/// The limits a route names, and the route's identity for `key = "route"` (built with the
/// route: `router.rs`).
#[derive(Debug, Clone, Default)]
pub struct RouteLimits {
    ids: Box<[u16]>,
    route: u64,
}

impl RouteLimits {
    /// The limits of a route with this `host` and `path_prefix` that names `names`.
    pub fn new(names: &[String], host: Option<&str>, prefix: &str) -> Self {
        let mut ids: Vec<u16> = names.iter().filter_map(|n| u16::try_from(name_id(n)).ok()).collect();
        ids.dedup();
        Self {
            ids: ids.into_boxed_slice(),
            route: key::route_id(host, prefix),
        }
    }

    /// True when the route names no limit.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

/// One limit, compiled.
#[derive(Debug, Clone)]
pub(crate) struct Limit {
    name: Arc<str>,
    kind: KeyKind,
    quota: Quota,
    cluster: bool,
    headers_on_allowed: bool,
    hash: HashKey,
    table: Arc<Table>,
    tracked_keys: usize,
    policy: HeaderValue,
    /// How long the store keeps a window's counter (two windows and a second).
    ttl: Duration,
    limited: Counter,
    key_absent: Counter,
}

/// The limits of one configuration.
#[derive(Debug, Default)]
pub(crate) struct Limits {
    /// By name number.
    by_id: Vec<Option<Arc<Limit>>>,
    /// The cluster-wide ones (what reconciliation visits).
    cluster: Vec<Arc<Limit>>,
    /// `[server] trusted_proxies`: whose `X-Forwarded-For` names the client.
    trusted: Vec<Cidr>,
}

/// Refusal log lines: at most one a second.
static REFUSALS_LOGGED: LogLimit = LogLimit::new(Duration::from_secs(1));

/// The process's rate limits.
#[derive(Debug)]
pub struct RateLimiter {
    current: Arc<ArcSwap<Limits>>,
    sync: Arc<SyncState>,
    local_hash: HashKey,
    /// Set when the cluster store is attached: the hash key every node shares.
    cluster_hash: OnceLock<HashKey>,
    /// The configuration's limits, to rebuild when the cluster hash key arrives.
    configs: Mutex<(Vec<RateLimitConfig>, Vec<Cidr>)>,
}

pub(crate) fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

impl RateLimiter {
    /// The limits of `config`.
    pub fn new(config: &Config) -> Self {
        let limiter = Self {
            current: Arc::default(),
            sync: Arc::default(),
            local_hash: HashKey::random(),
            cluster_hash: OnceLock::new(),
            configs: Mutex::default(),
        };
        limiter.reconfigure(config);
        limiter
    }

    /// Applies a reloaded configuration: a limit that keeps its name, window and size keeps
    /// its counts.
    pub fn reconfigure(&self, config: &Config) {
        *self.configs.lock() = (config.rate_limits.clone(), config.server.trusted_proxies.clone());
        self.rebuild();
    }

    fn rebuild(&self) {
        let (configs, trusted) = self.configs.lock().clone();
        let old = self.current.load_full();
        let m = metrics::metrics();
        let mut limits = Limits {
            trusted,
            ..Limits::default()
        };
        for c in &configs {
            let Ok(id) = u16::try_from(name_id(&c.name)) else {
                continue;
            };
            let window_ns = u64::try_from(c.window.get().as_nanos()).unwrap_or(u64::MAX).max(1);
            let cluster = c.scope == RateLimitScope::Cluster;
            let quota = Quota {
                requests: c.requests.max(1),
                window_ns,
                share: if cluster { c.cluster_nodes.max(1) } else { 1 },
            };
            let hash = match (cluster, self.cluster_hash.get()) {
                (true, Some(h)) => *h,
                _ => self.local_hash,
            };
            let table = match old.by_id.get(usize::from(id)).and_then(Option::as_ref) {
                Some(l) if l.tracked_keys == c.tracked_keys && l.quota.window_ns == window_ns && l.hash == hash => {
                    l.table.clone()
                }
                _ => Arc::new(Table::new(c.tracked_keys)),
            };
            let labels = metrics::LimitLabels { limit: c.name.clone() };
            m.table_capacity.get_or_create(&labels).set(table.capacity() as i64);
            let limit = Arc::new(Limit {
                name: Arc::from(c.name.as_str()),
                kind: KeyKind::from_config(c),
                quota,
                cluster,
                headers_on_allowed: c.headers_on_allowed,
                hash,
                table,
                tracked_keys: c.tracked_keys,
                policy: HeaderValue::from_str(&headers::policy_item(&c.name, quota.requests, window_ns))
                    .unwrap_or(HeaderValue::from_static("\"invalid\"")),
                ttl: Duration::from_nanos(window_ns.saturating_mul(2)) + Duration::from_secs(1),
                limited: m.limited.get_or_create(&labels).clone(),
                key_absent: m.key_absent.get_or_create(&labels).clone(),
            });
            let i = usize::from(id);
            if limits.by_id.len() <= i {
                limits.by_id.resize(i + 1, None);
            }
            if cluster {
                limits.cluster.push(limit.clone());
            }
            limits.by_id[i] = Some(limit);
        }
        self.current.store(Arc::new(limits));
    }

    /// Shares the cluster-wide limits through `store` from now on: keys are hashed under
    /// `hash_key` (the same on every node: derived from the cluster secret) and reconciled in
    /// a task on the current runtime.
    pub fn attach_store(&self, store: Arc<dyn CounterStore>, hash_key: [u8; 16]) {
        let (a, b) = hash_key.split_at(8);
        let key = HashKey(
            u64::from_le_bytes(a.try_into().unwrap_or_default()),
            u64::from_le_bytes(b.try_into().unwrap_or_default()),
        );
        if self.cluster_hash.set(key).is_err() {
            return; // attached already
        }
        self.rebuild();
        tokio::spawn(sync::run(self.current.clone(), self.sync.clone(), store));
    }

    /// Whether the cluster store answers (cluster-wide limits are shared).
    pub fn store_up(&self) -> bool {
        self.sync.up()
    }

    /// Copies the tables' state into the metrics (at scrape time).
    pub fn export_metrics(&self) {
        let limits = self.current.load_full();
        let m = metrics::metrics();
        let now = now_ns();
        for l in limits.by_id.iter().flatten() {
            let labels = metrics::LimitLabels {
                limit: l.name.to_string(),
            };
            let w = now / l.quota.window_ns + 1;
            m.tracked_keys.get_or_create(&labels).set(l.table.tracked(w) as i64);
            m.evictions
                .get_or_create(&labels)
                .set(i64::try_from(l.table.evictions()).unwrap_or(i64::MAX));
        }
    }

    /// Counts `req` from client `peer` (fingerprint `ja4`) against the limits of its route:
    /// `Err` is the 429 to answer, `Ok` what to add to the response (nothing unless a limit sends
    /// its fields on allowed responses).
    #[allow(clippy::result_large_err)] // the error is the response itself, answered at once
    pub fn check(
        &self,
        peer: std::net::IpAddr,
        ja4: Option<&str>,
        req: &Request<ClientBody>,
        route: &RouteLimits,
    ) -> Result<Allowed, Response<Body>> {
        if route.ids.is_empty() {
            return Ok(Allowed::default());
        }
        let limits = self.current.load();
        let now = now_ns();
        let up = self.sync.up();
        let r = key::Request {
            peer,
            ja4,
            headers: req.headers(),
            route: route.route,
        };
        let mut allowed = Allowed::default();
        for &id in route.ids.iter() {
            let Some(Some(limit)) = limits.by_id.get(usize::from(id)) else {
                continue;
            };
            let Some(k) = key::key(&limit.kind, limit.hash, &r, &limits.trusted) else {
                limit.key_absent.inc();
                continue;
            };
            let shared = limit.cluster && up;
            let w = now / limit.quota.window_ns + 1;
            let d = limit
                .table
                .with(k, w, limit.cluster, |c| c.take(limit.quota, now, shared));
            let state = || headers::state_item(&limit.name, d.remaining, d.reset_ns);
            if !d.allowed {
                limit.limited.inc();
                if let Some(left_out) = REFUSALS_LOGGED.allow() {
                    tracing::info!(
                        limit = &*limit.name,
                        client = %peer,
                        shared,
                        left_out,
                        "request refused: over its rate limit (429; at most one line a second, \
                         left_out = refusals not logged since the last line)"
                    );
                }
                return Err(headers::too_many(&limit.policy, &state(), d.retry_ns));
            }
            if limit.headers_on_allowed {
                allowed.0.push((limit.policy.clone(), state()));
            }
        }
        Ok(allowed)
    }
}

/// The `RateLimit-Policy` / `RateLimit` items of an allowed request's limits that send them.
#[derive(Debug, Default)]
pub struct Allowed(Vec<(HeaderValue, String)>);

impl Allowed {
    /// Adds the fields to the response's headers.
    pub fn apply(self, headers: &mut HeaderMap) {
        for (policy, state) in self.0 {
            headers::append(headers, &headers::POLICY, policy.to_str().unwrap_or_default());
            headers::append(headers, &headers::RATELIMIT, &state);
        }
    }
}

/// Registers the rate-limit metrics in `registry`.
pub fn register(registry: &mut prometheus_client::registry::Registry) {
    metrics::register(registry);
}
