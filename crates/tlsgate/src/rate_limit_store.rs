//! The rate limits' shared counters on the `[cluster]` store (Redis or Memcached, through the
//! session store's own connections): each reconciliation's operations become `INCRBY` +
//! `PEXPIRE` per counter (Redis, pipelined) or one `ma` (Memcached's meta arithmetic), under
//! `{key_prefix}rl:{limit}:{{key hash}}:{window}`, with one more on the reconciliation's writer
//! count `…:{window}:t{tick}` (1 added by each node's write, 0 by its re-read). Keys are hashed
//! under a key derived from the cluster secret, so every node names a client's counter alike and
//! no client can pick another's.
//!
//! Order matters: a node adds to the window's counter *before* it marks the writer count, and
//! reads the window's counter again *after* reading the writer count, so every writer an answer
//! counts is in the total it answers (the limits trust a total that shows every node's write:
//! `window.rs`). The key hash is a hash tag (`{…}`), so one key's counters live on one server
//! (Memcached's choice of server, Redis Cluster's slot) and are updated in the order sent.

use std::sync::Arc;
use std::time::Duration;
use tlsgate_cluster::backend::Backend;
use tlsgate_cluster::ClusterStore;
use tlsgate_proxy::request::rate_limit::{CountFuture, CountOp, CountTotals, CounterStore, WRITERS_TTL};
use tlsgate_proxy::Gateway;
use tlsgate_tls::secret::ClusterSecret;

/// The store as the rate limits see it.
struct StoreCounters {
    backend: Arc<dyn Backend>,
    prefix: String,
}

/// The counter of `op`'s key in `window`.
fn key(prefix: &str, op: &CountOp, window: u64) -> String {
    format!("{prefix}rl:{}:{{{:016x}}}:{window}", op.limit, op.key)
}

/// The store operations of `ops`, four per op in this order: add to the window's counter, add to
/// the previous window's, mark the writer count, read the window's counter again.
fn items(prefix: &str, ops: &[CountOp]) -> Vec<(String, u64, Duration)> {
    ops.iter()
        .flat_map(|op| {
            let window = key(prefix, op, op.window);
            [
                (window.clone(), u64::from(op.add), op.ttl),
                (
                    key(prefix, op, op.window.saturating_sub(1)),
                    u64::from(op.add_prev),
                    op.ttl,
                ),
                (format!("{window}:t{}", op.tick), u64::from(op.mark), WRITERS_TTL),
                (window, 0, op.ttl),
            ]
        })
        .collect()
}

/// One op's totals from its four answers (see [`items`]).
fn totals(four: &[u64]) -> CountTotals {
    CountTotals {
        total: four[3].max(four[0]),
        total_prev: four[1],
        writers: four[2],
    }
}

impl CounterStore for StoreCounters {
    fn exchange(&self, ops: Vec<CountOp>) -> CountFuture {
        let answer = self.backend.incr_many(items(&self.prefix, &ops));
        Box::pin(async move {
            let answers = answer
                .await
                .map_err(|e| tlsgate_error::Error::wrap("rate-limit counters", e))?;
            Ok(answers.chunks_exact(4).map(totals).collect())
        })
    }
}

/// Shares the cluster-wide rate limits of `gateway` through `store` (call on the runtime that
/// owns the store's tasks).
pub fn attach(gateway: &Gateway, store: &ClusterStore, secret: &ClusterSecret) {
    let (backend, prefix) = store.backend();
    let mut hash_key = [0u8; 16];
    secret.derive(&[b"tlsgate rate-limit keys"], &mut hash_key);
    gateway.rate_limits.attach_store(
        Arc::new(StoreCounters {
            backend,
            prefix: prefix.to_string(),
        }),
        hash_key,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(add: u32, mark: u32) -> CountOp {
        CountOp {
            limit: Arc::from("shared"),
            key: 0xabc,
            window: 170_000_001,
            add,
            add_prev: 2,
            tick: 17_000_000_042,
            mark,
            ttl: Duration::from_secs(21),
        }
    }

    #[test]
    fn the_writer_count_is_marked_after_the_add_and_read_before_the_total() {
        let items = items("tg:", &[op(7, 1), op(0, 0)]);
        let keys: Vec<(&str, u64)> = items.iter().map(|(k, by, _)| (k.as_str(), *by)).collect();
        let w = "tg:rl:shared:{0000000000000abc}:170000001";
        let tick = format!("{w}:t17000000042");
        assert_eq!(
            keys,
            [
                (w, 7),
                ("tg:rl:shared:{0000000000000abc}:170000000", 2),
                (tick.as_str(), 1),
                (w, 0),
                (w, 0),
                ("tg:rl:shared:{0000000000000abc}:170000000", 2),
                (tick.as_str(), 0),
                (w, 0),
            ]
        );
        assert_eq!(items[2].2, WRITERS_TTL);
        // The total is the last read: a writer counted at the third answer (another node's
        // write landing between our add and our mark) is in it.
        let t = totals(&[20, 0, 2, 40]);
        assert_eq!((t.total, t.total_prev, t.writers), (40, 0, 2));
    }
}
