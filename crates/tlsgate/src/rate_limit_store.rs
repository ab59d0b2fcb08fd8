//! The rate limits' shared counters on the `[cluster]` store (Redis or Memcached, through the
//! session store's own connections): each reconciliation's operations become `INCRBY` +
//! `PEXPIRE` per window counter (Redis, pipelined) or one `ma` (Memcached's meta arithmetic), under
//! `{key_prefix}rl:{limit}:{key hash}:{window}`, and one more on the reconciliation's writer
//! count `…:{window}:t{tick}` (1 added by each node's write, 0 by its re-read). Keys are hashed under a key derived from the
//! cluster secret, so every node names a client's counter alike and no client can pick another's.

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

impl StoreCounters {
    fn key(&self, op: &CountOp, window: u64) -> String {
        format!("{}rl:{}:{:016x}:{window}", self.prefix, op.limit, op.key)
    }
}

impl CounterStore for StoreCounters {
    fn exchange(&self, ops: Vec<CountOp>) -> CountFuture {
        let items: Vec<(String, u64, Duration)> = ops
            .iter()
            .flat_map(|op| {
                [
                    (self.key(op, op.window), u64::from(op.add), op.ttl),
                    (
                        self.key(op, op.window.saturating_sub(1)),
                        u64::from(op.add_prev),
                        op.ttl,
                    ),
                    (
                        format!("{}:t{}", self.key(op, op.window), op.tick),
                        u64::from(op.mark),
                        WRITERS_TTL,
                    ),
                ]
            })
            .collect();
        let answer = self.backend.incr_many(items);
        Box::pin(async move {
            let totals = answer
                .await
                .map_err(|e| tlsgate_error::Error::wrap("rate-limit counters", e))?;
            Ok(totals
                .chunks_exact(3)
                .map(|three| CountTotals {
                    total: three[0],
                    total_prev: three[1],
                    writers: three[2],
                })
                .collect())
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
