//! The gateway's shared state: the current configuration *generation* (TLS contexts, routers,
//! upstream pools), swapped atomically on reload, plus what outlives generations (metrics,
//! session cache, ticket keys, the connection count and the shutdown signal).
//!
//! Connections keep the generation they were accepted with alive for their TLS state, but each
//! request routes with the newest generation, so a reload takes effect on open keep-alive
//! connections too, without closing them.

use crate::downstream::source_limit::{Source, SourceLimits};
use crate::request::router::Router;
use crate::upstream::UpstreamGroup;
use arc_swap::ArcSwap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use tlsgate_admin::Metrics;
use tlsgate_config::Config;
use tlsgate_tls::{SessionState, TlsBuildError, TlsService};
use tokio::sync::watch;

/// A site's HTTP side.
pub struct SiteRuntime {
    /// Site name.
    pub name: Arc<str>,
    /// Site name as a metric label.
    pub label: &'static str,
    /// `Strict-Transport-Security` value, if the site sets HSTS.
    pub hsts: Option<http::HeaderValue>,
    /// Its routes.
    pub router: Router,
    /// The client-certificate identity headers, when the site has `[site.client_auth]`.
    pub client_cert: Option<crate::identity::IdentityHeaders>,
    /// Routers for the fingerprints its routes name (`match_ja4`); None when none does.
    pub fingerprint_routes: Option<crate::fingerprint::FingerprintRoutes>,
}

/// Everything built from one configuration.
pub struct Generation {
    /// Increases with each successful reload (1 = the configuration at start).
    pub id: u64,
    /// The configuration.
    pub config: Arc<Config>,
    /// TLS contexts.
    pub tls: TlsService,
    /// The same sites' contexts for QUIC (ALPN `h3`, TLS 1.3), built with the generation when
    /// it serves HTTP/3, so that QUIC uses the certificate files as they were loaded.
    pub quic_tls: Option<Arc<TlsService>>,
    /// Sites in configuration order.
    pub sites: Vec<SiteRuntime>,
    /// Upstream groups in configuration order.
    pub upstreams: Vec<Arc<UpstreamGroup>>,
    /// `[server] ja4_header`: the request header carrying the client's JA4 to origins.
    pub ja4_header: Option<crate::fingerprint::Ja4Header>,
}

impl SiteRuntime {
    /// The router for a request of a connection whose JA4 fingerprint is `ja4` (the plain one
    /// unless a route names that fingerprint).
    pub fn router_for(&self, ja4: Option<&str>) -> &Router {
        crate::fingerprint::router_for(&self.router, self.fingerprint_routes.as_ref(), ja4)
    }
}

impl Generation {
    /// Replaces whatever a client sent in `[server] ja4_header` with its connection's JA4
    /// fingerprint (nothing without the setting).
    pub fn forward_ja4(&self, ja4: Option<&str>, headers: &mut http::HeaderMap) {
        crate::fingerprint::forward_header(self.ja4_header.as_ref(), ja4, headers);
    }

    /// Builds a generation; the error names the field and file at fault.
    pub fn build(config: Config, sessions: &SessionState, id: u64) -> Result<Self, TlsBuildError> {
        let tls = TlsService::build(&config, sessions)?;
        let quic_tls = if config.quic_addresses().is_empty() {
            None
        } else {
            Some(Arc::new(TlsService::build_quic(&config, sessions)?))
        };
        let upstreams: Vec<Arc<UpstreamGroup>> = config
            .upstreams
            .iter()
            .enumerate()
            .map(|(i, u)| UpstreamGroup::new(u, &format!("upstream[{i}]")).map(Arc::new))
            .collect::<Result<_, _>>()?;
        let index = |name: &str| config.upstreams.iter().position(|u| u.name == name);
        let sites = config
            .sites
            .iter()
            .map(|s| (s, crate::fingerprint::routers(&s.routes, index)))
            .map(|(s, (router, fingerprint_routes))| SiteRuntime {
                name: Arc::from(s.name.as_str()),
                label: tlsgate_admin::metrics::intern(&s.name),
                hsts: s
                    .hsts
                    .as_ref()
                    .and_then(|h| http::HeaderValue::from_str(&h.header_value()).ok()),
                router,
                fingerprint_routes,
                client_cert: s
                    .client_auth
                    .as_ref()
                    .and_then(crate::identity::IdentityHeaders::from_config),
            })
            .collect();
        let ja4_header = crate::fingerprint::Ja4Header::from_config(&config.server);
        Ok(Self {
            id,
            ja4_header,
            config: Arc::new(config),
            tls,
            quic_tls,
            sites,
            upstreams,
        })
    }

    /// Index of the site with this name.
    pub fn site_index(&self, name: &str) -> Option<usize> {
        self.sites.iter().position(|s| &*s.name == name)
    }
}

/// Process-wide gateway state.
pub struct Gateway {
    current: ArcSwap<Generation>,
    /// Metrics registry.
    pub metrics: Arc<Metrics>,
    /// Session cache and ticket keys (survive reloads).
    pub sessions: SessionState,
    /// Full TLS handshakes per client source (`[server.handshake_budget]`; survives reloads).
    pub handshake_budget: tlsgate_tls::handshake_budget::HandshakeBudget,
    /// Request rate limits (`[[rate_limit]]`; tables survive reloads).
    pub rate_limits: crate::request::rate_limit::RateLimiter,
    open: AtomicUsize,
    sources: SourceLimits,
    next_id: AtomicU64,
    shutdown: watch::Sender<bool>,
    /// `shutdown`'s value, read once per request (HTTP/1.1 answers `Connection: close` while
    /// draining) without touching the channel's lock.
    draining: AtomicBool,
}

impl Gateway {
    /// Builds the first generation.
    pub fn new(config: Config, metrics: Arc<Metrics>) -> Result<Arc<Self>, TlsBuildError> {
        let sessions = SessionState::new(&config.tls);
        let handshake_budget =
            tlsgate_tls::handshake_budget::HandshakeBudget::new(config.server.handshake_budget.as_ref());
        let rate_limits = crate::request::rate_limit::RateLimiter::new(&config);
        let generation = Generation::build(config, &sessions, 1)?;
        let (shutdown, _) = watch::channel(false);
        Ok(Arc::new(Self {
            current: ArcSwap::from_pointee(generation),
            metrics,
            sessions,
            handshake_budget,
            rate_limits,
            open: AtomicUsize::new(0),
            sources: SourceLimits::default(),
            next_id: AtomicU64::new(2),
            shutdown,
            draining: AtomicBool::new(false),
        }))
    }

    /// The newest generation.
    pub fn current(&self) -> Arc<Generation> {
        self.current.load_full()
    }

    /// Builds and installs a new generation; on error the running one stays.
    pub fn install(&self, config: Config) -> Result<u64, TlsBuildError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let generation = Generation::build(config, &self.sessions, id)?;
        self.sessions.reconfigure(&generation.config.tls);
        self.handshake_budget
            .reconfigure(generation.config.server.handshake_budget.as_ref());
        self.rate_limits.reconfigure(&generation.config);
        self.current.store(Arc::new(generation));
        Ok(id)
    }

    /// Whether `[[access_rule]]`s by source refuse a new connection from `client` (counted).
    pub fn refuses_source(&self, client: IpAddr) -> bool {
        self.current().tls.fingerprints().rules().refuses_at_accept(client)
    }

    /// Client connections open now.
    pub fn open_connections(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// Counts a new connection from `peer` unless the process-wide `limit` or the per-source
    /// limit (`per_source`, 0 = none; IPv4 address or IPv6 /64) is reached.
    pub fn admit(self: &Arc<Self>, limit: usize, per_source: usize, peer: IpAddr) -> Option<ConnGuard> {
        let prev = self.open.fetch_add(1, Ordering::AcqRel);
        if prev >= limit {
            self.open.fetch_sub(1, Ordering::AcqRel);
            self.metrics.connections_shed.inc();
            return None;
        }
        let source = (per_source > 0).then(|| Source::of(peer));
        if let Some(s) = source {
            if !self.sources.try_add(s, per_source) {
                self.open.fetch_sub(1, Ordering::AcqRel);
                self.metrics.connections_shed.inc();
                self.metrics.connections_shed_per_source.inc();
                return None;
            }
        }
        self.metrics.open_connections.inc();
        self.metrics.connections_accepted.inc();
        Some(ConnGuard(self.clone(), source))
    }

    /// Counts an admitted connection against its source's limit once the source is known (a
    /// PROXY protocol header names the client after the accept); false, counted as shed, when
    /// that source already has `per_source` open. The guard releases it with the connection.
    pub fn admit_source(&self, guard: &mut ConnGuard, per_source: usize, client: IpAddr) -> bool {
        if per_source == 0 || guard.1.is_some() {
            return true;
        }
        let source = Source::of(client);
        if !self.sources.try_add(source, per_source) {
            self.metrics.connections_shed.inc();
            self.metrics.connections_shed_per_source.inc();
            return false;
        }
        guard.1 = Some(source);
        true
    }

    /// Starts a graceful shutdown: listeners stop accepting, connections finish and close.
    pub fn begin_shutdown(&self) {
        self.draining.store(true, Ordering::Relaxed);
        self.shutdown.send_replace(true);
    }

    /// Whether a graceful shutdown has begun.
    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    /// Resolves when shutdown begins: a receiver of the calling worker thread's own copy of the
    /// signal (`local_signal`), which connections and accept loops poll without a lock that
    /// other threads take.
    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        crate::local_signal::local(&self.shutdown)
    }
}

/// Holds one slot of the connection limit (and of its source's, when that is limited).
pub struct ConnGuard(Arc<Gateway>, Option<Source>);

impl Drop for ConnGuard {
    fn drop(&mut self) {
        if let Some(s) = self.1 {
            self.0.sources.remove(s);
        }
        self.0.open.fetch_sub(1, Ordering::AcqRel);
        self.0.metrics.open_connections.dec();
    }
}
