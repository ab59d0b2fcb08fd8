//! `tlsgate_acme_*`: orders by result, each ACME certificate's expiry and planned renewal, and
//! consecutive failures (a site whose renewals fail shows it long before its certificate expires).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::LazyLock;

/// One ACME certificate.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CertLabels {
    /// Site name.
    pub site: String,
    /// `ecdsa` or `rsa`.
    pub key_type: String,
}

/// A challenge type.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ChallengeLabels {
    /// `http-01` or `tls-alpn-01`.
    pub challenge: &'static str,
}

/// An order's outcome.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OrderLabels {
    /// Site name.
    pub site: String,
    /// `ecdsa` or `rsa`.
    pub key_type: String,
    /// `issued`, or the error's kind (`acme_unreachable`, `acme_invalid`, ...).
    pub result: String,
}

/// A cluster coordination event.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClusterLabels {
    /// `lease_acquired`, `lease_busy` (another node orders), `lease_released`,
    /// `published` (an issued certificate stored for the others), `adopted` (another node's
    /// certificate installed), `store_unavailable` (ordered alone).
    pub event: &'static str,
}

/// The ACME metric families.
#[derive(Default)]
pub struct AcmeMetrics {
    /// Orders by result.
    pub orders: Family<OrderLabels, Counter>,
    /// notAfter of the certificate served, Unix seconds (the placeholder's before the first issuance).
    pub expiry: Family<CertLabels, Gauge>,
    /// When the next renewal attempt is planned, Unix seconds.
    pub renewal: Family<CertLabels, Gauge>,
    /// Failed orders since the last success.
    pub failures: Family<CertLabels, Gauge>,
    /// 1 once a CA-issued certificate is served, 0 while the placeholder is.
    pub issued: Family<CertLabels, Gauge>,
    /// badNonce answers survived by re-signing.
    pub bad_nonces: Counter,
    /// Validation requests answered by this gateway (copied from the responders after each order).
    pub answered: Family<ChallengeLabels, Gauge>,
    /// Cluster coordination (lease, shared certificates) by event.
    pub cluster: Family<ClusterLabels, Counter>,
}

/// The process's ACME metrics.
pub fn metrics() -> &'static AcmeMetrics {
    static METRICS: LazyLock<AcmeMetrics> = LazyLock::new(AcmeMetrics::default);
    &METRICS
}

/// Registers the families in `registry` (prefix `tlsgate_`).
pub fn register(registry: &mut Registry) {
    let m = metrics();
    registry.register(
        "acme_orders",
        "ACME orders by site, key type and result",
        m.orders.clone(),
    );
    registry.register(
        "acme_certificate_expiry_timestamp_seconds",
        "notAfter of the ACME certificate served, Unix seconds",
        m.expiry.clone(),
    );
    registry.register(
        "acme_renewal_timestamp_seconds",
        "When the next renewal attempt of an ACME certificate is planned, Unix seconds",
        m.renewal.clone(),
    );
    registry.register(
        "acme_consecutive_failures",
        "Failed ACME orders since the last success",
        m.failures.clone(),
    );
    registry.register(
        "acme_certificate_issued",
        "1 when the CA's certificate is served, 0 while the placeholder is",
        m.issued.clone(),
    );
    registry.register(
        "acme_challenges_answered",
        "CA validation requests this gateway answered (HTTP-01 on the redirect listener, TLS-ALPN-01 on the TLS listener)",
        m.answered.clone(),
    );
    registry.register(
        "acme_cluster_events",
        "ACME coordination through the cluster's store: lease_acquired, lease_busy, lease_released, published, adopted, store_unavailable",
        m.cluster.clone(),
    );
    registry.register(
        "acme_bad_nonces",
        "badNonce answers from the CA, survived by re-signing with its fresh nonce",
        m.bad_nonces.clone(),
    );
}
