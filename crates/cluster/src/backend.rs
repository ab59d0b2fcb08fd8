//! The store operations tlsgate needs, whatever the store, and the error they fail with
//! ([`StoreError`], defined in [`crate::store_error`]).

use futures_util::future::BoxFuture;
use std::time::Duration;

pub use crate::store_error::{StoreError, StoreFailure, StoreSource};

/// Get, set with TTL, add-if-absent with TTL, ping. Futures are `'static` so they can be polled
/// inside a handshake on any worker runtime.
pub trait Backend: Send + Sync + std::fmt::Debug + 'static {
    /// Reads a value.
    fn get(&self, key: String) -> BoxFuture<'static, Result<Option<Vec<u8>>, StoreError>>;
    /// Writes a value that expires after `ttl`.
    fn set(&self, key: String, value: Vec<u8>, ttl: Duration) -> BoxFuture<'static, Result<(), StoreError>>;
    /// Writes a value only if the key is absent (atomically); true if it was written.
    fn add(&self, key: String, value: Vec<u8>, ttl: Duration) -> BoxFuture<'static, Result<bool, StoreError>>;
    /// Checks the store answers (and reconnects if needed).
    fn ping(&self) -> BoxFuture<'static, Result<(), StoreError>>;
    /// Adds each `(key, by, ttl)`'s `by` to the counter `key` (created at 0 when absent) and
    /// keeps it for `ttl`; answers the counters' new values in order, in one round trip where
    /// the store allows it (the rate limits' reconciliation: `tlsgate_proxy`'s `CounterStore`).
    /// Counters whose keys share a hash tag (`{…}`) live on one server and are updated in the
    /// order given; others may be updated concurrently.
    fn incr_many(&self, items: Vec<(String, u64, Duration)>) -> BoxFuture<'static, Result<Vec<u64>, StoreError>>;
    /// A name for logs and metrics: `redis` or `memcached`.
    fn kind(&self) -> &'static str;
    /// The circuit breaker just opened: drop every connection, so that one left hanging (the
    /// store stopped answering without closing it) is not used again once the breaker closes.
    /// Backends that already drop a connection whose operation was abandoned need nothing here.
    fn reset(&self) {}
}
