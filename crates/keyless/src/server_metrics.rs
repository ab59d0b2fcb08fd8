//! The key server's metrics (`tlsgate_keyserver_*`) and its admin listener (`GET /metrics`,
//! `GET /healthz`).

use bytes::Bytes;
use http_body_util::Full;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::Arc;

/// Labels of a signing operation.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OpLabels {
    /// First 16 hex digits of the key id.
    pub key: String,
    /// Signature scheme.
    pub algorithm: String,
}

/// Labels of an issued delegated credential.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KeyLabel {
    /// First 16 hex digits of the key id.
    pub key: String,
}

/// Labels of an error answer or refusal.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    /// `unknown_key`, `unsupported_algorithm`, `malformed`, `overloaded`, `internal`,
    /// `oversized`, `bad_version`, `handshake`, `not_allowed`, `stalled`, `not_reading`.
    pub kind: &'static str,
}

/// Labels of a refused sign request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusedLabels {
    /// `not_permitted` (the client may not use the key) or why the input is not a TLS signing
    /// input: `not_tls_input`, `transcript_hash_length`, `pkcs1_in_tls13`, `mldsa_in_tls12`,
    /// `group`, `public_key`, `length` (crate::signing_input::Refusal::reason), or why a
    /// delegated credential was refused (crate::delegation::Refusal::reason).
    pub reason: &'static str,
}

/// Every key-server metric.
pub struct ServerMetrics {
    registry: Registry,
    /// Signatures made.
    pub ops: Family<OpLabels, Counter>,
    /// Delegated credentials issued (signed), by key.
    pub delegations: Family<KeyLabel, Counter>,
    /// Keys created for gateways (`new_key`).
    pub created: Counter,
    /// Errors answered (or connections refused), by kind.
    pub errors: Family<ErrorLabels, Counter>,
    /// Sign requests refused by policy (answered `refused`), by reason.
    pub refused: Family<RefusedLabels, Counter>,
    /// Times a connection stopped being read because its unsent answers exceeded the bound.
    pub read_pauses: Counter,
    /// Time from a request's arrival to its signature being ready.
    pub latency: Histogram,
    /// Signing requests waiting for a thread.
    pub queue_depth: Gauge,
    /// Open gateway connections.
    pub connections: Gauge,
    /// Pings answered.
    pub pings: Counter,
}

impl ServerMetrics {
    /// A new registry with every metric.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("tlsgate_keyserver");
        let m = Self {
            ops: Family::default(),
            delegations: Family::default(),
            created: Counter::default(),
            errors: Family::default(),
            refused: Family::default(),
            read_pauses: Counter::default(),
            latency: Histogram::new(exponential_buckets(0.000_02, 2.0, 18)),
            queue_depth: Gauge::default(),
            connections: Gauge::default(),
            pings: Counter::default(),
            registry: Registry::default(),
        };
        registry.register("operations", "Signatures made, by key and algorithm", m.ops.clone());
        registry.register(
            "delegated_credentials",
            "Delegated credentials issued (RFC 9345), by key",
            m.delegations.clone(),
        );
        registry.register(
            "keys_created",
            "Keys created for gateways (new_key requests: keyless certificates through ACME)",
            m.created.clone(),
        );
        registry.register(
            "errors",
            "Errors answered or connections refused, by kind",
            m.errors.clone(),
        );
        registry.register(
            "refused",
            "Sign requests refused by policy (input or permission), by reason",
            m.refused.clone(),
        );
        registry.register(
            "read_pauses",
            "Times a connection was not read until its unsent answers drained",
            m.read_pauses.clone(),
        );
        registry.register(
            "sign_duration_seconds",
            "Request arrival to signature ready",
            m.latency.clone(),
        );
        registry.register(
            "queue_depth",
            "Signing requests waiting for a thread",
            m.queue_depth.clone(),
        );
        registry.register("connections", "Open gateway connections", m.connections.clone());
        registry.register("pings", "Pings answered", m.pings.clone());
        Self { registry, ..m }
    }

    /// Counts one error of `kind`.
    pub fn error(&self, kind: &'static str) {
        self.errors.get_or_create(&ErrorLabels { kind }).inc();
    }

    /// Counts one refused request.
    pub fn count_refused(&self, reason: &'static str) {
        self.refused.get_or_create(&RefusedLabels { reason }).inc();
    }

    /// Prometheus text.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}

impl Default for ServerMetrics {
    fn default() -> Self {
        Self::new()
    }
}

/// Serves `GET /metrics` and `GET /healthz` on `listener`, behind the same guard as the
/// gateway's admin listener (`tlsgate_admin::guard`): `Host` must name the listener (its address,
/// or a loopback name with its port), cross-site requests are refused, at most 256 connections,
/// 10 s to send a request head. A DNS-rebinding page therefore reads nothing.
pub async fn serve_admin(listener: tokio::net::TcpListener, metrics: Arc<ServerMetrics>) {
    use tlsgate_admin::guard::{serve_http1, Guard, Limits};
    let guard = match listener.local_addr().map(|addr| Guard::new(addr, &[])) {
        Ok(Ok(guard)) => Arc::new(guard),
        Ok(Err(e)) => return tracing::error!(error = %e, "key server admin listener not served"),
        Err(e) => return tracing::error!(error = %e, "key server admin listener not served"),
    };
    serve_http1(listener, Limits::default(), "keyserver admin", move |_peer| {
        let (metrics, guard) = (metrics.clone(), guard.clone());
        hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
            let (status, body) = match guard.check(req.method(), req.uri(), req.headers()) {
                Err(refusal) => (refusal.status().as_u16(), format!("{refusal}\n")),
                Ok(()) => match req.uri().path() {
                    "/metrics" => (200, metrics.encode()),
                    "/healthz" => (200, "ok\n".to_string()),
                    _ => (404, "not found\n".to_string()),
                },
            };
            let resp = hyper::Response::builder()
                .status(status)
                .header("content-type", "text/plain; charset=utf-8")
                .body(Full::new(Bytes::from(body)))
                .expect("static response parts are valid");
            std::future::ready(Ok::<_, std::convert::Infallible>(resp))
        })
    })
    .await;
}
