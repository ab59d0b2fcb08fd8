//! Joining a cluster at startup: load the cluster secrets, derive the shared ticket keys from
//! them, and put the shared store (Redis or Memcached) behind the session cache and the 0-RTT
//! guard. The store connects in the background; until it answers, handshakes do not wait on it.

use crate::serve::acme_cluster::AcmeCluster;
use anyhow::Context;
use std::sync::Arc;
use tlsgate_admin::Metrics;
use tlsgate_cluster::ClusterStore;
use tlsgate_config::Config;
use tlsgate_proxy::Gateway;
use tlsgate_tls::secret::ClusterSecret;

/// What joining a cluster set up.
#[derive(Default)]
pub struct Joined {
    /// The shared store, if one is configured (for metrics).
    pub store: Option<Arc<ClusterStore>>,
    /// ACME coordination through the store, when there is one and `[acme]` is configured.
    pub acme: Option<Arc<AcmeCluster>>,
}

/// Applies `[cluster]`; must run inside the runtime that will own the store's background tasks.
pub fn join(config: &Config, gateway: &Gateway) -> anyhow::Result<Joined> {
    let Some(cluster) = &config.cluster else {
        return Ok(Joined::default());
    };
    let secrets = cluster
        .secret_files
        .iter()
        .enumerate()
        .map(|(i, path)| {
            ClusterSecret::load(path)
                .map(Arc::new)
                .with_context(|| format!("cluster.secret_files[{i}]"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    if config.tls.tickets.enabled {
        gateway
            .sessions
            .tickets
            .use_cluster_secrets(secrets.clone(), config.tls.tickets.rotation.get());
    }
    // ECH keys are derived from the same secrets (docs/ECH.md); installed before workers start.
    gateway.sessions.ech.use_cluster_secrets(secrets.clone());
    crate::ech_rotate::install(gateway)?;
    let store = ClusterStore::start(cluster, &secrets).map_err(|e| anyhow::anyhow!("cluster.servers: {e}"))?;
    let mut acme = None;
    if let Some(store) = &store {
        gateway.sessions.cache.set_remote(store.clone());
        gateway.sessions.early_data.set_guard(store.clone());
        crate::rate_limit_store::attach(gateway, store, &secrets[0]);
        if config.acme.is_some() {
            // One order per certificate, results and challenge answers shared (docs/ACME.md).
            let shared = AcmeCluster::new(store, &secrets);
            gateway.sessions.acme.set_remote(shared.clone());
            acme = Some(shared);
        }
    }
    tracing::info!(
        store = store.as_ref().map_or("local", |s| s.kind()),
        secret = ?secrets[0],
        "cluster: ticket keys derived from the cluster secret{}",
        if store.is_some() { "; TLS 1.2 sessions and 0-RTT claims shared through the store" } else { "" }
    );
    Ok(Joined { store, acme })
}

/// Copies the store's counters into the scrape-time gauges.
pub fn export_metrics(store: &ClusterStore, m: &Metrics) {
    use std::sync::atomic::Ordering::Relaxed;
    let s = &store.stats;
    m.set_gauge("session_store_breaker_open", u64::from(store.breaker_open()));
    m.set_gauge("session_store_breaker_opened_total", store.breaker_opened_total());
    for (name, counter) in [
        ("session_store_lookup_hit_total", &s.lookup_hit),
        ("session_store_lookup_miss_total", &s.lookup_miss),
        ("session_store_lookup_timeout_total", &s.lookup_timeout),
        ("session_store_lookup_error_total", &s.lookup_error),
        ("session_store_lookup_skipped_total", &s.lookup_skipped),
        ("session_store_lookup_rejected_total", &s.lookup_rejected),
        ("session_store_write_ok_total", &s.write_ok),
        ("session_store_write_error_total", &s.write_error),
        ("session_store_write_dropped_total", &s.write_dropped),
        ("session_store_claim_fresh_total", &s.claim_fresh),
        ("session_store_claim_replayed_total", &s.claim_replayed),
        ("session_store_claim_unavailable_total", &s.claim_unavailable),
    ] {
        m.set_gauge(name, counter.load(Relaxed));
    }
}
