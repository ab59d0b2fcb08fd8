//! Every metric tlsgate exports, in one registry, named `tlsgate_*`.
//!
//! Hot-path metrics (per handshake, per request) are lock-free atomics behind prometheus-client
//! families; counters kept elsewhere (session cache, ticket keys) are copied in at scrape time
//! through [`Metrics::set_gauge`].

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

/// Interns a configuration-defined name (site, upstream) as a `&'static str`, so hot-path label
/// sets neither allocate nor copy. Names come from configuration files, so the set is small and
/// a name is stored once however often the configuration is reloaded.
pub fn intern(name: &str) -> &'static str {
    static NAMES: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(found) = names.iter().find(|n| **n == name) {
        return found;
    }
    let leaked: &'static str = Box::leak(name.to_string().into_boxed_str());
    names.push(leaked);
    leaked
}

/// Labels of a completed handshake.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HandshakeLabels {
    /// Site selected by SNI.
    pub site: &'static str,
    /// `full`, `session_id`, `ticket` or `tls13_psk`.
    pub outcome: &'static str,
    /// `TLSv1.2` / `TLSv1.3`.
    pub version: &'static str,
    /// Cipher suite.
    pub cipher: &'static str,
    /// Key-exchange group.
    pub group: &'static str,
    /// Certificate key type served.
    pub cert: &'static str,
    /// Whether an OCSP response was stapled (`yes`/`no`).
    pub stapled: &'static str,
}

/// Labels of a failed handshake.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailureLabels {
    /// Why it failed: `timeout`, `plaintext_http`, `malformed`, `no_shared_parameters`, `unknown_sni`, `client_cert_missing`, `client_cert_invalid`, `client_closed`, `other`.
    pub reason: &'static str,
}

/// Labels of a handshake refused by `[server.handshake_budget]`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusedLabels {
    /// `full_handshake_budget` or `resumed_handshake_budget`.
    pub reason: &'static str,
    /// Where: `client_hello` (before any key exchange), `signature` (it offered a resumption
    /// but was going to sign) or `answered_429` (resumed over budget under `resume_then_429`: the
    /// connection was served, its requests answered 429).
    pub stage: &'static str,
}

/// Labels of the idle connections that gave back their per-connection buffers.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReleasedLabels {
    /// `http1` (hyper's connection ended while idle) or `http2` (the codec's buffers and the
    /// empty stream tables freed).
    pub protocol: &'static str,
}

/// Labels of a client connection closed by one of its timeouts.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClientTimeoutLabels {
    /// `idle` (no request for `client_idle_timeout`), `header` (bytes but no complete request
    /// for `client_header_timeout`), `send` (the client took nothing for `client_send_timeout`)
    /// or `keepalive` (an HTTP/2 keep-alive PING not answered within `keep_alive_timeout`).
    pub reason: &'static str,
}

/// Labels of an interim (1xx) response from an origin.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct InterimLabels {
    /// `forwarded`, `dropped_busy` (an earlier response on the connection may still be
    /// unwritten), `dropped_too_large`, `dropped_closed` (the HTTP/2 stream was already reset),
    /// `dropped_unsupported` (HTTP/3 clients: not forwarded yet), `dropped_http10` or
    /// `dropped_off` (`[server] forward_early_hints = false`).
    pub result: &'static str,
}

/// Labels of a handshake-duration observation.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// `full` or `resumed`.
    pub outcome: &'static str,
}

/// Labels of an answered request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// Site name (`-` for the redirect listener).
    pub site: &'static str,
    /// HTTP status code.
    pub status: u16,
    /// `h1` or `h2`.
    pub protocol: &'static str,
}

/// Labels of a request that did not complete normally.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct IncompleteLabels {
    /// Site name.
    pub site: &'static str,
    /// `client_abandoned` or `upstream_aborted`.
    pub reason: &'static str,
}

/// Labels of one origin server of an upstream group.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct InFlightLabels {
    /// Upstream group.
    pub upstream: &'static str,
    /// The server's `host:port`.
    pub server: &'static str,
}

/// Labels of upstream observations.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UpstreamLabels {
    /// Upstream group.
    pub upstream: &'static str,
}

/// Labels of upstream errors.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UpstreamErrorLabels {
    /// Upstream group.
    pub upstream: &'static str,
    /// `connect`, `timeout`, `protocol`.
    pub kind: &'static str,
}

/// Labels of retries of failed upstream requests.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UpstreamRetryLabels {
    /// Upstream group.
    pub upstream: &'static str,
    /// The failure retried: `connect_failure`, `reset` or `header_timeout`.
    pub reason: &'static str,
}

/// Labels of active health checks of an upstream group's servers.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HealthCheckLabels {
    /// Upstream group.
    pub upstream: &'static str,
    /// `ok`, `status`, `timeout`, `connect`, `tls` or `protocol`.
    pub result: &'static str,
}

/// Labels of TLS handshakes with origins.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UpstreamTlsLabels {
    /// Upstream group.
    pub upstream: &'static str,
    /// `TLSv1.3`, `TLSv1.2`.
    pub version: &'static str,
    /// Key-exchange group, e.g. `X25519MLKEM768`.
    pub group: &'static str,
    /// `true` when resumed from a session the origin gave earlier.
    pub resumed: &'static str,
}

/// Labels of the outcomes of requests that waited in (or were refused by) an origin server's
/// queue.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabels {
    /// Upstream group.
    pub upstream: &'static str,
    /// `dequeued` (got a connection), `timeout`, `full` (refused at once) or `abandoned` (the
    /// request stopped waiting for another reason: the client went away, or `header_timeout`
    /// passed first).
    pub result: &'static str,
}

/// Labels of TLS record-size decisions.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RecordLabels {
    /// Site the connection was served for.
    pub site: &'static str,
    /// `segment` (one TCP segment), `growing`, `full`, or `fixed` (dynamic sizing off).
    pub phase: &'static str,
}

/// Labels of a connection accepted with TCP Fast Open.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TfoLabels {
    /// The listener's address.
    pub listener: &'static str,
    /// Site selected by SNI (`-` for redirect listeners and failed handshakes).
    pub site: &'static str,
}

/// Labels of PROXY protocol headers read on listeners that expect them.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProxyProtocolLabels {
    /// `ok`, `untrusted_source` (closed: not from `proxy_protocol_from`), `malformed`, `timeout`
    /// or `closed` (the peer left before the header was complete).
    pub result: &'static str,
}

/// Labels with a single `name`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NameLabels {
    /// What the value is about.
    pub name: &'static str,
}

/// Labels of reload attempts.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// `ok` or `error`.
    pub result: &'static str,
}

/// The process's metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// This set's number in the process (tells series of two gateways in one process apart in
    /// a worker's [`crate::local_series::LocalSeries`], even at a reused address).
    pub instance: u64,
    /// Completed handshakes.
    pub handshakes: Family<HandshakeLabels, Counter>,
    /// Failed handshakes.
    pub handshake_failures: Family<FailureLabels, Counter>,
    /// Handshake duration (from accept to finished).
    pub handshake_duration: Family<OutcomeLabels, Histogram>,
    /// Handshakes refused by the handshake budget, before any signature.
    pub handshakes_refused: Family<RefusedLabels, Counter>,
    /// Client connections closed by a timeout, by which.
    pub client_timeouts: Family<ClientTimeoutLabels, Counter>,
    /// 103 Early Hints from origins, by what became of them.
    pub early_hints: Family<InterimLabels, Counter>,
    /// Client connections open now.
    pub open_connections: Gauge,
    /// Idle keep-alive connections now waiting without their per-connection buffers (HTTP/1.1:
    /// after 250 ms without a request, `downstream::park`; HTTP/2: after 1-2 s with no stream).
    pub idle_released_connections: Family<ReleasedLabels, Gauge>,
    /// Client connections accepted.
    pub connections_accepted: Counter,
    /// Client connections closed at once because `max_connections` was reached.
    pub connections_shed: Counter,
    /// Of those, shed because their source had `max_connections_per_source` open.
    pub connections_shed_per_source: Counter,
    /// Requests answered.
    pub requests: Family<RequestLabels, Counter>,
    /// Requests that did not complete: the client went away, or the origin's body failed.
    pub requests_incomplete: Family<IncompleteLabels, Counter>,
    /// Requests in flight per origin server (what `least_conn` compares; set at scrape time).
    pub upstream_in_flight: Family<InFlightLabels, Gauge>,
    /// Time from forwarding a request to receiving the upstream's response header.
    pub upstream_duration: Family<UpstreamLabels, Histogram>,
    /// Upstream failures.
    pub upstream_errors: Family<UpstreamErrorLabels, Counter>,
    /// TLS handshakes with origins, by version, key-exchange group and resumption.
    pub upstream_tls_handshakes: Family<UpstreamTlsLabels, Counter>,
    /// 1 while an origin server passes its group's active health check, 0 while it fails it
    /// (servers of groups with checks only; set at scrape time).
    pub upstream_server_healthy: Family<InFlightLabels, Gauge>,
    /// 1 while an origin server is in its group's rotation, 0 while it is skipped: marked down
    /// after `max_fails` failures (for `fail_timeout`, or until it answers) or failing its active
    /// health check (every server; set at scrape time).
    pub upstream_server_up: Family<InFlightLabels, Gauge>,
    /// Active health-check probes by group and result (copied in at scrape time).
    pub upstream_health_checks: Family<HealthCheckLabels, Counter>,
    /// Connections open per origin server, idle and busy (set at scrape time).
    pub upstream_connections: Family<InFlightLabels, Gauge>,
    /// Requests waiting in the queues of a group's servers for a connection (set at scrape time).
    pub upstream_queued: Family<UpstreamLabels, Gauge>,
    /// Requests that waited in a server's queue (or found it full), by outcome.
    pub upstream_queue: Family<QueueLabels, Counter>,
    /// Failed upstream requests sent again, by group and the failure retried.
    pub upstream_retries: Family<UpstreamRetryLabels, Counter>,
    /// Retries not made because the group's retry budget was spent.
    pub upstream_retries_budget_exhausted: Family<UpstreamLabels, Counter>,
    /// Bytes read from clients (TLS records included).
    pub bytes_in: Counter,
    /// Bytes written to clients (TLS records included).
    pub bytes_out: Counter,
    /// Config reloads.
    pub reloads: Family<ResultLabels, Counter>,
    /// Certificate files changed on disk and installed (or refused) without a reload.
    pub certificate_reloads: Family<ResultLabels, Counter>,
    /// Writes to clients by TLS record-size phase.
    pub record_writes: Family<RecordLabels, Counter>,
    /// Connections whose SYN carried data accepted by TCP Fast Open.
    pub tfo_accepted: Family<TfoLabels, Counter>,
    /// PROXY protocol headers read (or refused) on `proxy_protocol` listeners, by result.
    pub proxy_protocol: Family<ProxyProtocolLabels, Counter>,
    /// Values copied in at scrape time (session cache, ticket keys, ...).
    pub state: Family<NameLabels, Gauge<u64, AtomicU64>>,
    /// OCSP stapling.
    pub ocsp: OcspMetrics,
    /// Delegated credentials of keyless certificates.
    pub delegation: crate::delegation_metrics::DelegationMetrics,
    /// Each served certificate's notAfter (Unix seconds; set at scrape time).
    pub certificate_not_after: Family<OcspLabels, Gauge>,
    /// Each served certificate chain's size in DER bytes (set at scrape time).
    pub certificate_chain_bytes: Family<OcspLabels, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Creates and registers every metric.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("tlsgate");
        let handshakes = Family::default();
        registry.register(
            "handshakes",
            "Completed TLS handshakes by outcome (full or resumed, and how)",
            handshakes.clone(),
        );
        let handshake_failures = Family::default();
        registry.register(
            "handshake_failures",
            "Failed TLS handshakes by reason",
            handshake_failures.clone(),
        );
        let client_timeouts = Family::default();
        registry.register(
            "client_timeouts",
            "Client connections closed by a timeout: idle (no request), header (no complete request), send (the client read nothing)",
            client_timeouts.clone(),
        );
        let early_hints = Family::default();
        registry.register(
            "early_hints",
            "103 Early Hints responses from origins: forwarded to the client, or dropped and why",
            early_hints.clone(),
        );
        let handshakes_refused = Family::default();
        registry.register(
            "handshakes_refused",
            "TLS handshakes refused by the per-source handshake budget, by budget and stage",
            handshakes_refused.clone(),
        );
        let handshake_duration = Family::<OutcomeLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.000_05, 2.0, 18))
        });
        registry.register(
            "handshake_duration_seconds",
            "TLS handshake duration",
            handshake_duration.clone(),
        );
        let open_connections = Gauge::default();
        registry.register(
            "open_connections",
            "Client connections open now",
            open_connections.clone(),
        );
        let idle_released_connections = Family::<ReleasedLabels, Gauge>::default();
        registry.register(
            "idle_released_connections",
            "Idle keep-alive connections now waiting with their per-connection buffers given back",
            idle_released_connections.clone(),
        );
        let connections_accepted = Counter::default();
        registry.register(
            "connections_accepted",
            "Client TCP connections accepted",
            connections_accepted.clone(),
        );
        let connections_shed = Counter::default();
        registry.register(
            "connections_shed",
            "Client connections closed at once over the connection limit",
            connections_shed.clone(),
        );
        let connections_shed_per_source = Counter::default();
        registry.register(
            "connections_shed_per_source",
            "Client connections closed at once because their source (IPv4 address, IPv6 /64) had max_connections_per_source open",
            connections_shed_per_source.clone(),
        );
        let requests = Family::default();
        registry.register(
            "requests",
            "HTTP requests answered, by site, status and protocol",
            requests.clone(),
        );
        let requests_incomplete = Family::default();
        registry.register(
            "requests_incomplete",
            "Requests that did not complete, by site and reason (client_abandoned, upstream_aborted)",
            requests_incomplete.clone(),
        );
        let upstream_in_flight = Family::default();
        registry.register(
            "upstream_in_flight",
            "Requests in flight per origin server, until their response body ends",
            upstream_in_flight.clone(),
        );
        let upstream_duration = Family::<UpstreamLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.000_1, 2.0, 18))
        });
        registry.register(
            "upstream_response_seconds",
            "Time to the upstream's response header",
            upstream_duration.clone(),
        );
        let upstream_errors = Family::default();
        registry.register("upstream_errors", "Upstream failures by kind", upstream_errors.clone());
        let upstream_tls_handshakes = Family::default();
        registry.register(
            "upstream_tls_handshakes",
            "TLS handshakes with origins by version, key-exchange group and resumption",
            upstream_tls_handshakes.clone(),
        );
        let upstream_server_healthy = Family::default();
        registry.register(
            "upstream_server_healthy",
            "1 while an origin server passes its group's active health check, 0 while it fails it",
            upstream_server_healthy.clone(),
        );
        let upstream_server_up = Family::default();
        registry.register(
            "upstream_server_up",
            "1 while an origin server is in its group's rotation, 0 while it is skipped (marked down after failures, or failing its health check)",
            upstream_server_up.clone(),
        );
        let upstream_health_checks = Family::default();
        registry.register(
            "upstream_health_checks",
            "Active health-check probes of origin servers by group and result",
            upstream_health_checks.clone(),
        );
        let upstream_connections = Family::default();
        registry.register(
            "upstream_connections",
            "Connections open to each origin server, idle and busy",
            upstream_connections.clone(),
        );
        let upstream_queued = Family::default();
        registry.register(
            "upstream_queued",
            "Requests waiting for a connection in the queues of an upstream group's servers",
            upstream_queued.clone(),
        );
        let upstream_queue = Family::default();
        registry.register(
            "upstream_queue",
            "Requests that waited in an origin server's queue or found it full, by outcome",
            upstream_queue.clone(),
        );
        let upstream_retries = Family::default();
        registry.register(
            "upstream_retries",
            "Failed upstream requests sent again, by group and the failure retried (connect_failure, reset, header_timeout)",
            upstream_retries.clone(),
        );
        let upstream_retries_budget_exhausted = Family::default();
        registry.register(
            "upstream_retries_budget_exhausted",
            "Retries not made because the group's retry budget (budget_percent, min_retry_concurrency) was spent",
            upstream_retries_budget_exhausted.clone(),
        );
        let bytes_in = Counter::default();
        registry.register(
            "client_bytes_received",
            "Bytes read from client connections",
            bytes_in.clone(),
        );
        let bytes_out = Counter::default();
        registry.register(
            "client_bytes_sent",
            "Bytes written to client connections",
            bytes_out.clone(),
        );
        let reloads = Family::default();
        registry.register("config_reloads", "Configuration reload attempts", reloads.clone());
        let certificate_reloads = Family::default();
        registry.register(
            "certificate_reloads",
            "Certificate files changed on disk, installed (ok) or refused (error) without a reload",
            certificate_reloads.clone(),
        );
        let record_writes = Family::default();
        registry.register(
            "tls_record_writes",
            "Writes to clients by TLS record-size phase",
            record_writes.clone(),
        );
        let tfo_accepted = Family::default();
        registry.register(
            "tfo_accepted",
            "Connections accepted with TCP Fast Open (data in the SYN), by listener and site",
            tfo_accepted.clone(),
        );
        let proxy_protocol = Family::default();
        registry.register(
            "proxy_protocol",
            "Connections on proxy_protocol listeners by header result: ok, untrusted_source, malformed, timeout, closed",
            proxy_protocol.clone(),
        );
        let state = Family::default();
        registry.register(
            "state",
            "Internal state copied at scrape time (session cache, ticket keys)",
            state.clone(),
        );
        let ocsp = OcspMetrics::register(&mut registry);
        let delegation = crate::delegation_metrics::DelegationMetrics::register(&mut registry);
        let certificate_not_after = Family::default();
        registry.register(
            "certificate_not_after_seconds",
            "NotAfter of each served certificate (Unix time), by site and key type",
            certificate_not_after.clone(),
        );
        let certificate_chain_bytes = Family::default();
        registry.register(
            "certificate_chain_bytes",
            "DER size of each served certificate chain (leaf and intermediates), by site and key type",
            certificate_chain_bytes.clone(),
        );
        static INSTANCES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        Self {
            instance: INSTANCES.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            registry,
            handshakes,
            handshake_failures,
            handshake_duration,
            handshakes_refused,
            client_timeouts,
            early_hints,
            open_connections,
            idle_released_connections,
            connections_accepted,
            connections_shed,
            connections_shed_per_source,
            requests,
            requests_incomplete,
            upstream_in_flight,
            upstream_duration,
            upstream_errors,
            upstream_tls_handshakes,
            upstream_server_healthy,
            upstream_server_up,
            upstream_health_checks,
            upstream_connections,
            upstream_queued,
            upstream_queue,
            upstream_retries,
            upstream_retries_budget_exhausted,
            bytes_in,
            bytes_out,
            reloads,
            certificate_reloads,
            record_writes,
            tfo_accepted,
            proxy_protocol,
            state,
            ocsp,
            delegation,
            certificate_not_after,
            certificate_chain_bytes,
        }
    }

    /// The registry, for metrics defined in other crates (register before sharing `self`).
    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }

    /// Sets a scrape-time value.
    pub fn set_gauge(&self, name: &'static str, value: u64) {
        self.state.get_or_create(&NameLabels { name }).set(value);
    }

    /// Prometheus text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}

/// Labels of a stapled certificate.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OcspLabels {
    /// Site name.
    pub site: &'static str,
    /// Key type of the certificate (as in `tlsgate_handshakes_total{cert}`).
    pub cert: &'static str,
}

/// Labels of an OCSP fetch.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OcspFetchLabels {
    /// Site name.
    pub site: &'static str,
    /// Key type of the certificate.
    pub cert: &'static str,
    /// `ok`, `http_error`, `invalid`, `revoked` or `unreachable`.
    pub outcome: &'static str,
}

/// OCSP stapling metrics, per site and certificate.
#[derive(Debug)]
pub struct OcspMetrics {
    /// 1 while a valid response is stapled, 0 otherwise (set at scrape time).
    pub present: Family<OcspLabels, Gauge>,
    /// Seconds since the stapled response's thisUpdate (set at scrape time; absent without one).
    pub age: Family<OcspLabels, Gauge>,
    /// Fetch attempts by outcome.
    pub fetches: Family<OcspFetchLabels, Counter>,
    /// Completed full handshakes that carried the staple.
    pub stapled_handshakes: Family<OcspLabels, Counter>,
}

impl OcspMetrics {
    fn register(registry: &mut Registry) -> Self {
        let m = Self {
            present: Family::default(),
            age: Family::default(),
            fetches: Family::default(),
            stapled_handshakes: Family::default(),
        };
        registry.register(
            "ocsp_staple_present",
            "Whether a valid OCSP response is stapled (1) or not (0)",
            m.present.clone(),
        );
        registry.register(
            "ocsp_staple_age_seconds",
            "Age of the stapled OCSP response (since its thisUpdate)",
            m.age.clone(),
        );
        registry.register(
            "ocsp_fetches",
            "OCSP responder fetches by outcome (ok, http_error, invalid, revoked, unreachable)",
            m.fetches.clone(),
        );
        registry.register(
            "ocsp_stapled_handshakes",
            "Completed full handshakes that carried an OCSP staple",
            m.stapled_handshakes.clone(),
        );
        m
    }
}
