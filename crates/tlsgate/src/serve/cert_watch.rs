//! Certificate files changed on disk are served without a reload: every `tls.certificate_poll`
//! the chain, key and OCSP files of every site are stat'ed (size, modification time, inode),
//! and a change rebuilds the running configuration (not the file: the same configuration,
//! re-reading its certificates) through the same path as a reload. A chain that does not verify
//! against its key, or does not parse, is refused and the running generation keeps serving
//! (one error line per distinct state of the files); the next change is tried again. So a tool
//! that writes the key and the chain one after the other is served once both are there.
//!
//! Any installed generation (a reload, an ACME certificate, the control plane) resets what
//! counts as unchanged.

use crate::serve::acme;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tlsgate_admin::metrics::ResultLabels;
use tlsgate_admin::Metrics;
use tlsgate_config::Config;
use tlsgate_proxy::Gateway;

/// What a file looked like: (size, mtime seconds, mtime nanoseconds, inode); `None` when missing.
type Stamp = Option<(u64, i64, i64, u64)>;

/// The files whose contents a configuration's TLS side is built from.
fn watched(config: &Config) -> Vec<PathBuf> {
    config
        .sites
        .iter()
        .flat_map(|s| s.certificates.iter())
        .flat_map(|c| [Some(c.chain.clone()), c.key.clone(), c.ocsp_file.clone()])
        .flatten()
        .collect()
}

fn stamps(paths: &[PathBuf]) -> Vec<Stamp> {
    paths
        .iter()
        .map(|p| {
            std::fs::metadata(p)
                .ok()
                .map(|m| (m.size(), m.mtime(), m.mtime_nsec(), m.ino()))
        })
        .collect()
}

/// Polls until the runtime stops (spawn it on the control runtime).
pub async fn run(gateway: Arc<Gateway>, metrics: Arc<Metrics>) {
    let mut seen_generation = 0;
    let mut baseline: Vec<Stamp> = Vec::new();
    let mut refused: Option<Vec<Stamp>> = None;
    loop {
        let generation = gateway.current();
        let every = generation.config.tls.certificate_poll.get();
        if every.is_zero() {
            tokio::time::sleep(Duration::from_secs(5)).await;
            continue;
        }
        let paths = watched(&generation.config);
        if generation.id != seen_generation {
            seen_generation = generation.id;
            baseline = stamps(&paths);
            refused = None;
        }
        drop(generation);
        tokio::time::sleep(every).await;
        let now = stamps(&paths);
        if now == baseline || refused.as_ref() == Some(&now) || gateway.current().id != seen_generation {
            continue;
        }
        let config = gateway.current().config.as_ref().clone();
        let result = acme::prepare(config).and_then(|c| gateway.install(c));
        let label = if result.is_ok() { "ok" } else { "error" };
        metrics
            .certificate_reloads
            .get_or_create(&ResultLabels { result: label })
            .inc();
        match result {
            Ok(id) => {
                tracing::info!(generation = id, "certificate files changed on disk: installed");
                seen_generation = id;
                baseline = now;
            }
            Err(e) => {
                tracing::error!(
                    "certificate files changed on disk but refused, still serving generation {}: {e}",
                    gateway.current().id
                );
                refused = Some(now);
            }
        }
    }
}
