//! Delegated credentials, the moving part: one task per keyless certificate with delegation on
//! asks the key servers for a credential (`tlsgate-tls`'s [`DelegationSlot::issue`]), stores it
//! in the certificate's slot, from where every handshake of a client that asks for one takes it,
//! and renews it `renew_before` its expiry.
//!
//! - Failure (key servers down, a refusal, a signature that does not verify): the current
//!   credential is kept until it expires, then clients are served through the key servers
//!   again. Retries back off from 1 s to 5 min, and never wait past the current credential's
//!   renewal point. One warning when a failure streak starts, one info line when it ends.
//! - A refusal (the key server will not issue: delegation off there, the certificate lacks
//!   DelegationUsage) is retried at the slowest pace: it needs an operator.
//!
//! [`run`] supervises the tasks for the running configuration generation (spawned by
//! `tlsgate serve`); [`export_metrics`] copies each slot's state into the metrics at scrape time.

use crate::gateway::Gateway;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tlsgate_admin::delegation_metrics::{DelegationIssueLabels, DelegationLabels};
use tlsgate_admin::metrics::intern;
use tlsgate_admin::Metrics;
use tlsgate_error::Classify;
use tlsgate_tls::delegation::DelegationSlot;
use tlsgate_tls::ocsp::format_time;

/// Longest wait between retries while issuance fails.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// Keeps one renewal task per delegation slot of the current configuration; returns only if the
/// runtime stops. A reload rebuilds the slots (each new one starts with its predecessor's
/// credential), so the old tasks stop and new ones start.
pub async fn run(gateway: Arc<Gateway>) {
    let metrics = gateway.metrics.clone();
    super::slot_tasks::supervise(
        gateway,
        |generation| generation.tls.delegation_slots(),
        |gateway, live| gateway.sessions.delegations.retain(live),
        move |slot| renew(slot, metrics.clone()),
    )
    .await;
}

/// Copies each slot's state into the metrics (call before a scrape).
pub fn export_metrics(gateway: &Gateway) {
    let m = &gateway.metrics.delegation;
    m.expires.clear();
    for slot in gateway.current().tls.delegation_slots() {
        let labels = DelegationLabels {
            site: intern(&slot.site),
            cert: slot.cert,
        };
        if let Some(expires) = slot.current().map(|i| i.expires) {
            let secs = expires.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
            m.expires
                .get_or_create(&labels)
                .set(i64::try_from(secs).unwrap_or(i64::MAX));
        }
        let served = slot.take_handshakes();
        if served > 0 {
            m.handshakes.get_or_create(&labels).inc_by(served);
        }
    }
}

/// One slot's renewal loop.
async fn renew(slot: Arc<DelegationSlot>, metrics: Arc<Metrics>) {
    let mut failures: u32 = 0;
    let mut backoff = Duration::from_secs(1);
    loop {
        let wait = slot.renew_in(SystemTime::now());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        let result = slot.issue().await;
        let label = match &result {
            Ok(_) => "ok",
            Err(e) => e.result(),
        };
        metrics
            .delegation
            .issued
            .get_or_create(&DelegationIssueLabels {
                site: intern(&slot.site),
                cert: slot.cert,
                result: label,
            })
            .inc();
        match result {
            Ok(issued) => {
                let expires = format_time(issued.expires);
                if failures > 0 {
                    tracing::info!(site = %slot.site, field = %slot.field, %expires, "delegated credential issued after {failures} failed attempt(s)");
                } else {
                    tracing::info!(site = %slot.site, field = %slot.field, %expires, "delegated credential issued");
                }
                slot.store(issued);
                failures = 0;
                backoff = Duration::from_secs(1);
            }
            Err(e) => {
                failures += 1;
                let held = slot.current().map(|i| format_time(i.expires));
                if failures == 1 {
                    tracing::warn!(site = %slot.site, field = %slot.field, error = %e, kind = e.kind(), current_credential_expires = ?held, "cannot obtain a delegated credential; retrying with backoff (clients are served through the key servers once the current one expires)");
                } else {
                    tracing::debug!(site = %slot.site, field = %slot.field, error = %e, failures, "delegated credential still unavailable");
                }
                // A refusal needs an operator: retry at the slowest pace.
                let pause = if e.retry_safe() { backoff } else { MAX_BACKOFF };
                backoff = (backoff * 2).min(MAX_BACKOFF);
                tokio::time::sleep(pause).await;
            }
        }
    }
}
