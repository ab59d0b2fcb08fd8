//! Delegated-credential metrics (`tlsgate_delegated_credential_*`), per keyless certificate:
//! issuance attempts by result, the current credential's expiry, and the handshakes it served.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// One keyless certificate.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DelegationLabels {
    /// Site name.
    pub site: &'static str,
    /// Key type of the certificate (as in `tlsgate_handshakes_total{cert}`).
    pub cert: &'static str,
}

/// Labels of an issuance attempt.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DelegationIssueLabels {
    /// Site name.
    pub site: &'static str,
    /// Key type of the certificate.
    pub cert: &'static str,
    /// `ok`, `refused` (a key server would not issue it), `unavailable` (no key server
    /// answered), `invalid` (the answer did not verify) or `internal`.
    pub result: &'static str,
}

/// Delegated credentials, per site and certificate.
#[derive(Debug)]
pub struct DelegationMetrics {
    /// Issuance attempts by result.
    pub issued: Family<DelegationIssueLabels, Counter>,
    /// Expiry (Unix seconds) of the credential being served; absent without one (scrape time).
    pub expires: Family<DelegationLabels, Gauge>,
    /// Handshakes completed with the credential (BoringSSL selected it: no key-server request).
    pub handshakes: Family<DelegationLabels, Counter>,
}

impl DelegationMetrics {
    /// Creates the metrics and registers them.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self {
            issued: Family::default(),
            expires: Family::default(),
            handshakes: Family::default(),
        };
        registry.register(
            "delegated_credential_issues",
            "Delegated-credential requests to key servers, by result (ok, refused, unavailable, invalid, internal)",
            m.issued.clone(),
        );
        registry.register(
            "delegated_credential_expiry_seconds",
            "Expiry (Unix time) of the delegated credential being served",
            m.expires.clone(),
        );
        registry.register(
            "delegated_credential_handshakes",
            "Handshakes completed with the delegated credential (selected by BoringSSL): no key-server signature",
            m.handshakes.clone(),
        );
        m
    }
}
