//! The gateway side's key-server metrics (`tlsgate_keyless_*`): one process-wide set, registered
//! into the gateway's admin registry with [`register`].
//!
//! Per key server (labels `pool`, `server`): attempts by result, attempt latency, requests in
//! flight, live connections, circuit state, weight and drain state. Per signature: operations by
//! key and algorithm, whole-signature latency (retries included), retries and failures.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::LazyLock;

/// Labels of one key server in one pool.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ServerLabels {
    /// Pool name (`[[keyless.pool]]` name, or the comma-joined `key_servers` list).
    pub pool: String,
    /// `host:port`.
    pub server: String,
}

/// Labels of one attempt's result on one key server.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AttemptLabels {
    /// Pool name.
    pub pool: String,
    /// `host:port`.
    pub server: String,
    /// `ok`, `unknown_key`, `unsupported_algorithm`, `refused`, `overloaded`, `internal`,
    /// `malformed`, `timeout`, `connection_lost`, `other`.
    pub result: &'static str,
}

/// Labels of a completed signature.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationLabels {
    /// First 16 hex digits of the key id (SHA-256 of the SPKI), as on the key server.
    pub key: String,
    /// Signature scheme.
    pub algorithm: String,
}

/// Every gateway-side keyless metric.
pub struct ClientMetrics {
    /// Attempts sent to key servers, by result.
    pub attempts: Family<AttemptLabels, Counter>,
    /// Time from sending an attempt to its answer (answered attempts only).
    pub attempt_duration: Family<ServerLabels, Histogram>,
    /// Requests waiting for an answer now.
    pub in_flight: Family<ServerLabels, Gauge>,
    /// Proven (pinged) connections now.
    pub connections: Family<ServerLabels, Gauge>,
    /// 1 while the server's circuit is open (skipped after consecutive failures).
    pub circuit_open: Family<ServerLabels, Gauge>,
    /// Configured weight.
    pub weight: Family<ServerLabels, Gauge>,
    /// 1 while the server is drained (no new requests while others are available).
    pub drained: Family<ServerLabels, Gauge>,
    /// Signatures obtained, by key and algorithm.
    pub operations: Family<OperationLabels, Counter>,
    /// Whole signature time as the handshake sees it, retries included.
    pub sign_duration: Histogram,
    /// Attempts repeated on another key server.
    pub retries: Counter,
    /// Signatures that failed on every attempt (their handshakes failed).
    pub failures: Counter,
    /// Signatures that found no live connection and waited for a starting key server's first
    /// connection (a gateway just started, or a member just added) instead of failing.
    pub startup_waits: Counter,
    /// How many live server states use each label set: a server removed from its pool and added
    /// back before the removed one's grace period ends has two, and its series must survive the
    /// first one's departure.
    live: parking_lot::Mutex<std::collections::HashMap<ServerLabels, usize>>,
}

impl ClientMetrics {
    fn new() -> Self {
        Self {
            attempts: Family::default(),
            attempt_duration: Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.000_02, 2.0, 18))),
            in_flight: Family::default(),
            connections: Family::default(),
            circuit_open: Family::default(),
            weight: Family::default(),
            drained: Family::default(),
            operations: Family::default(),
            sign_duration: Histogram::new(exponential_buckets(0.000_02, 2.0, 18)),
            retries: Counter::default(),
            failures: Counter::default(),
            startup_waits: Counter::default(),
            live: parking_lot::Mutex::new(std::collections::HashMap::new()),
        }
    }

    /// A server state with these labels started.
    pub(crate) fn hold_server(&self, labels: &ServerLabels) {
        *self.live.lock().entry(labels.clone()).or_insert(0) += 1;
    }

    /// A server state with these labels stopped: drops every series of the server once no live
    /// state uses its labels (it left its pool and was not added back).
    pub(crate) fn forget_server(&self, labels: &ServerLabels) {
        {
            let mut live = self.live.lock();
            match live.get_mut(labels) {
                Some(n) if *n > 1 => {
                    *n -= 1;
                    return;
                }
                _ => {
                    live.remove(labels);
                }
            }
        }
        self.attempt_duration.remove(labels);
        self.in_flight.remove(labels);
        self.connections.remove(labels);
        self.circuit_open.remove(labels);
        self.weight.remove(labels);
        self.drained.remove(labels);
        for result in RESULTS {
            self.attempts.remove(&AttemptLabels {
                pool: labels.pool.clone(),
                server: labels.server.clone(),
                result,
            });
        }
    }
}

const RESULTS: [&str; 10] = [
    "ok",
    "unknown_key",
    "unsupported_algorithm",
    "refused",
    "overloaded",
    "internal",
    "malformed",
    "timeout",
    "connection_lost",
    "other",
];

/// The process's keyless client metrics.
pub fn metrics() -> &'static ClientMetrics {
    static METRICS: LazyLock<ClientMetrics> = LazyLock::new(ClientMetrics::new);
    &METRICS
}

/// Registers the metrics as `tlsgate_keyless_*` in `registry` (a registry prefixed `tlsgate`).
pub fn register(registry: &mut Registry) {
    let m = metrics();
    let r = registry.sub_registry_with_prefix("keyless");
    r.register(
        "attempts",
        "Signing attempts sent to key servers, by pool, server and result",
        m.attempts.clone(),
    );
    r.register(
        "attempt_duration_seconds",
        "Time from sending a signing attempt to its answer",
        m.attempt_duration.clone(),
    );
    r.register(
        "in_flight",
        "Signing requests waiting for an answer",
        m.in_flight.clone(),
    );
    r.register(
        "connections",
        "Proven connections to each key server",
        m.connections.clone(),
    );
    r.register(
        "circuit_open",
        "1 while a key server is skipped after consecutive failures",
        m.circuit_open.clone(),
    );
    r.register("weight", "Configured weight of each key server", m.weight.clone());
    r.register(
        "drained",
        "1 while a key server is drained (no new requests while others are available)",
        m.drained.clone(),
    );
    r.register(
        "operations",
        "Signatures obtained from key servers, by key and algorithm",
        m.operations.clone(),
    );
    r.register(
        "sign_duration_seconds",
        "Whole keyless signature time as a handshake sees it, retries included",
        m.sign_duration.clone(),
    );
    r.register(
        "retries",
        "Signing attempts repeated on another key server",
        m.retries.clone(),
    );
    r.register(
        "failures",
        "Signatures that failed on every attempt (handshake aborted)",
        m.failures.clone(),
    );
    r.register(
        "startup_waits",
        "Signatures that waited for a starting key server's first connection",
        m.startup_waits.clone(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server removed and added back within the grace period keeps its series when the
    /// removed state's delayed `forget_server` runs.
    #[test]
    fn readded_server_keeps_its_series() {
        let m = ClientMetrics::new();
        let labels = ServerLabels {
            pool: "p".into(),
            server: "ks:1".into(),
        };
        m.hold_server(&labels);
        m.weight.get_or_create(&labels).set(3);
        m.hold_server(&labels); // added back while the old state drains
        m.forget_server(&labels); // the old state's grace period ends
        assert_eq!(m.weight.get(&labels).map(|g| g.get()), Some(3));
        m.forget_server(&labels); // removed for good
        assert!(m.weight.get(&labels).is_none());
    }
}
