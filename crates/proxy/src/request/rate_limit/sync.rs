//! Cluster-wide limits: every [`SYNC_INTERVAL`], the keys touched since the last time are sent
//! to the cluster store in one batch — for each, what this node admitted since (added to the
//! store's counter of that window, which expires two windows later) — and the store's totals
//! come back as the cluster's counts. Requests never wait on it. Each write also counts this
//! node as a writer of the key at that reconciliation (a counter per reconciliation), which tells
//! the limits whose writes an answer already holds (`Counts::writers`).
//!
//! The store itself is the binary's (`tlsgate_cluster`'s Redis or Memcached connections), seen
//! here through [`CounterStore`]. When a batch fails or times out, what it carried is put back
//! to be sent again, the limits count per node (their own admissions only), the state shows in
//! `tlsgate_rate_limit_store_up` = 0, and one WARN line says so; the first batch that succeeds
//! again brings the shared counts back, with one INFO line.

use super::metrics::{metrics, SyncLabels};
use super::window::SYNC_INTERVAL_NS;
use super::Limits;
use arc_swap::ArcSwap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often touched keys are reconciled.
pub const SYNC_INTERVAL: Duration = Duration::from_nanos(SYNC_INTERVAL_NS);
/// Longest a batch may take before it counts as failed.
const SYNC_TIMEOUT: Duration = Duration::from_secs(1);
/// Keys per store round trip.
const BATCH: usize = 1024;
/// Failed batches in a row, before the store ever answered, after which that is logged.
const SILENT_START_FAILURES: u32 = 20;

/// One key's counts to add to the store: `add` to the counter of `window`, `add_prev` to the
/// counter of the window before; both counters live for `ttl`.
#[derive(Debug, Clone)]
pub struct CountOp {
    /// The limit's name.
    pub limit: Arc<str>,
    /// The key's hash.
    pub key: u64,
    /// The window's number (Unix time / window length, plus one).
    pub window: u64,
    /// Requests this node admitted in `window` since the last reconciliation.
    pub add: u32,
    /// Requests admitted in the window before, not sent before it ended.
    pub add_prev: u32,
    /// The reconciliation's number (wall-clock time / [`SYNC_INTERVAL`]), the same on every node.
    pub tick: u64,
    /// 1 when this is the node's write at `tick` (count it as a writer of the key), 0 on a
    /// re-read.
    pub mark: u32,
    /// How long the store keeps the counters.
    pub ttl: Duration,
}

/// How long the store keeps a reconciliation's writer count.
pub const WRITERS_TTL: Duration = Duration::from_secs(2);

/// The store's totals after an operation: the cluster's count of the window and of the one before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CountTotals {
    /// The window's count, this operation's `add` included.
    pub total: u64,
    /// The previous window's count.
    pub total_prev: u64,
    /// Nodes that wrote the key at this operation's reconciliation so far (its `mark` included).
    pub writers: u64,
}

/// What a batch's answer is.
pub type CountFuture = Pin<Box<dyn Future<Output = Result<Vec<CountTotals>, tlsgate_error::Error>> + Send>>;

/// The shared counters of a cluster (the binary puts its `[cluster]` store behind this).
pub trait CounterStore: Send + Sync + 'static {
    /// Applies `ops` in one round trip where the store allows it and answers one total per op,
    /// in order.
    fn exchange(&self, ops: Vec<CountOp>) -> CountFuture;
}

/// Whether the store answers.
#[derive(Debug, Default)]
pub(crate) struct SyncState {
    up: AtomicBool,
    ever_up: AtomicBool,
    failures: AtomicU32,
}

impl SyncState {
    /// True while the last batch succeeded.
    pub(crate) fn up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    fn succeeded(&self) {
        self.failures.store(0, Ordering::Relaxed);
        if !self.up.swap(true, Ordering::Relaxed) {
            metrics().store_up.set(1);
            self.ever_up.store(true, Ordering::Relaxed);
            tracing::info!("rate limits: the cluster store answers; cluster-wide limits are shared again");
        }
    }

    fn failed(&self, error: &dyn std::fmt::Display) {
        let failures = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
        if self.up.swap(false, Ordering::Relaxed) {
            metrics().store_up.set(0);
            tracing::warn!(
                %error,
                "rate limits: the cluster store does not answer; cluster-wide limits count per node until it does"
            );
        } else if !self.ever_up.load(Ordering::Relaxed) && failures == SILENT_START_FAILURES {
            tracing::warn!(
                %error,
                "rate limits: the cluster store has not answered yet; cluster-wide limits count per node until it does"
            );
        } else {
            tracing::debug!(%error, "rate limits: reconciliation failed");
        }
    }
}

/// What was sent for one key, to apply the answer to.
struct Sent {
    limit: usize,
    key: u64,
    window: u64,
    add: u32,
    add_prev: u32,
}

/// Reconciles the touched keys of the cluster-wide limits with `store` forever.
///
/// Ticks fall on multiples of [`SYNC_INTERVAL`] of the wall clock, so the nodes of a cluster
/// (clocks in step within milliseconds, NTP) write at about the same instants; [`READ_AFTER`]
/// later each reads the same counters again (adding nothing), and that answer includes what the
/// other nodes wrote at the tick. Without it, a node answered before the others wrote would
/// decide a whole interval on a count missing their last interval's requests.
pub(crate) async fn run(current: Arc<ArcSwap<Limits>>, state: Arc<SyncState>, store: Arc<dyn CounterStore>) {
    let interval = SYNC_INTERVAL_NS;
    loop {
        let now = super::now_ns();
        let tick = now / interval + 1;
        tokio::time::sleep(Duration::from_nanos(tick * interval - now)).await;
        let limits = current.load_full();
        let mut sent = Vec::new();
        for (i, limit) in limits.cluster.iter().enumerate() {
            limit.table.drain_touched(|key, counts| {
                let (window, add, add_prev) = counts.send();
                sent.push(Sent {
                    limit: i,
                    key,
                    window,
                    add,
                    add_prev,
                });
            });
        }
        if sent.is_empty() {
            continue;
        }
        if !exchange(&limits, &state, &*store, &sent, tick, 1).await {
            continue;
        }
        tokio::time::sleep(READ_AFTER).await;
        for s in &mut sent {
            s.add = 0;
            s.add_prev = 0;
        }
        exchange(&limits, &state, &*store, &sent, tick, 0).await;
    }
}

/// How long after its writes a node reads the counters again.
const READ_AFTER: Duration = Duration::from_millis(15);

/// Sends what `sent` describes in batches (as reconciliation `tick`'s write when `mark` is 1)
/// and applies the answers; on a failure puts the requests back as unsent and answers false.
async fn exchange(
    limits: &Limits,
    state: &SyncState,
    store: &dyn CounterStore,
    sent: &[Sent],
    tick: u64,
    mark: u32,
) -> bool {
    for (b, batch) in sent.chunks(BATCH).enumerate() {
        let ops = batch
            .iter()
            .map(|s| {
                let limit = &limits.cluster[s.limit];
                CountOp {
                    limit: limit.name.clone(),
                    key: s.key,
                    window: s.window,
                    add: s.add,
                    add_prev: s.add_prev,
                    tick,
                    mark,
                    ttl: limit.ttl,
                }
            })
            .collect();
        let n = batch.len();
        let answer = tokio::time::timeout(SYNC_TIMEOUT, store.exchange(ops)).await;
        let m = metrics();
        match answer {
            Ok(Ok(totals)) if totals.len() == n => {
                m.syncs.get_or_create(&SyncLabels { result: "ok" }).inc();
                m.synced_keys.inc_by(n as u64);
                state.succeeded();
                let clamp = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
                for (s, t) in batch.iter().zip(totals) {
                    limits.cluster[s.limit].table.with_existing(s.key, false, |c| {
                        c.answered(s.window, s.add, clamp(t.total), clamp(t.total_prev), clamp(t.writers))
                    });
                }
            }
            failure => {
                m.syncs.get_or_create(&SyncLabels { result: "error" }).inc();
                match failure {
                    Ok(Ok(totals)) => state.failed(&format_args!("{} answers for {n} operations", totals.len())),
                    Ok(Err(e)) => state.failed(&e),
                    Err(_) => state.failed(&format_args!("no answer within {SYNC_TIMEOUT:?}")),
                }
                // Put this batch and the ones not sent back, to go with the next tick.
                for s in &sent[b * BATCH..] {
                    limits.cluster[s.limit]
                        .table
                        .with_existing(s.key, true, |c| c.unsend(s.window, s.add, s.add_prev));
                }
                return false;
            }
        }
    }
    true
}
