//! The rate limits' metrics (they outlive configuration generations): refusals and absent keys
//! per limit, each limit's table (capacity, keys tracked, evictions), and the cluster store's
//! reconciliation (up or not, batches by result, keys sent).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::LazyLock;

/// A limit's label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LimitLabels {
    /// The `[[rate_limit]]`'s name.
    pub limit: String,
}

/// A reconciliation's result.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SyncLabels {
    /// `ok` or `error`.
    pub result: &'static str,
}

/// The process-wide rate-limit metrics.
#[derive(Debug, Default)]
pub struct RateLimitMetrics {
    /// Requests answered 429, per limit.
    pub limited: Family<LimitLabels, Counter>,
    /// Requests a limit did not apply to because they lacked its key, per limit.
    pub key_absent: Family<LimitLabels, Counter>,
    /// Keys counted now, per limit (set at scrape time).
    pub tracked_keys: Family<LimitLabels, Gauge>,
    /// The table's fixed size, per limit.
    pub table_capacity: Family<LimitLabels, Gauge>,
    /// Keys forgotten because the table was full, per limit (set at scrape time).
    pub evictions: Family<LimitLabels, Gauge>,
    /// 1 while the cluster store answers reconciliations (cluster-wide limits shared), else 0.
    pub store_up: Gauge,
    /// Reconciliation batches with the store, by result.
    pub syncs: Family<SyncLabels, Counter>,
    /// Keys sent to the store in reconciliations.
    pub synced_keys: Counter,
}

/// The process-wide metrics.
pub fn metrics() -> &'static RateLimitMetrics {
    static METRICS: LazyLock<RateLimitMetrics> = LazyLock::new(RateLimitMetrics::default);
    &METRICS
}

/// Registers the rate-limit metrics (`tlsgate_rate_limited_total`, …) in `registry`.
pub fn register(registry: &mut Registry) {
    let m = metrics();
    registry.register(
        "rate_limited",
        "Requests answered 429 by a [[rate_limit]], per limit",
        m.limited.clone(),
    );
    registry.register(
        "rate_limit_key_absent",
        "Requests a [[rate_limit]] did not count because they lacked its key (header, cookie, JA4)",
        m.key_absent.clone(),
    );
    registry.register(
        "rate_limit_tracked_keys",
        "Keys a [[rate_limit]] counts now (at most its table capacity)",
        m.tracked_keys.clone(),
    );
    registry.register(
        "rate_limit_table_capacity",
        "The fixed number of keys a [[rate_limit]]'s table holds (tracked_keys rounded up)",
        m.table_capacity.clone(),
    );
    registry.register(
        "rate_limit_evictions_total",
        "Keys a [[rate_limit]] forgot early because its table was full",
        m.evictions.clone(),
    );
    registry.register(
        "rate_limit_store_up",
        "1 while the cluster store answers the rate limits' reconciliations, 0 while cluster-wide limits count per node",
        m.store_up.clone(),
    );
    registry.register(
        "rate_limit_syncs",
        "Rate-limit reconciliation batches with the cluster store, by result",
        m.syncs.clone(),
    );
    registry.register(
        "rate_limit_synced_keys",
        "Keys sent to the cluster store by rate-limit reconciliations",
        m.synced_keys.clone(),
    );
}
