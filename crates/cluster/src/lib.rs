//! Cluster-wide TLS session state for tlsgate (seed 001: resume any session on any node).
//!
//! - [`seal`]: sessions hold the master secret, so they are sealed (AES-256-GCM under a key
//!   derived from the cluster secret, bound to the session ID) before they leave the process, and
//!   anything read back that does not open is rejected.
//! - [`backend`]: the three store operations tlsgate needs (get, set with TTL, add-if-absent),
//!   implemented by [`redis_store`] (single server, Sentinel, Cluster) and [`memcached_store`];
//!   they fail with a [`store_error::StoreError`] (what failed, where, and the client's error).
//! - [`store`]: [`store::ClusterStore`], which the TLS layer sees as its remote session cache
//!   (`tlsgate_tls::session_cache::RemoteSessions`) and its 0-RTT replay guard
//!   (`tlsgate_tls::early_data::ReplayGuard`), behind a circuit breaker
//!   ([`tlsgate_timer::Breaker`], closed by a probe) so a dead or slow store stops costing
//!   handshakes time: after `breaker_failures` consecutive failures handshakes stop asking the
//!   store and writes are dropped, while a probe pings it every `breaker_retry`; it starts open,
//!   and the first answer closes it.
//!
//! Shared ticket keys need no store: they are derived from the cluster secret
//! (`tlsgate_tls::tickets`). See docs/CLUSTER.md.
#![forbid(unsafe_code)]

pub mod backend;
pub mod memcached_store;
pub mod redis_store;
pub mod seal;
pub mod store;
pub mod store_error;

pub use store::{ClusterStore, StoreStats};
