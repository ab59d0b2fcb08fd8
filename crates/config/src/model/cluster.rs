//! `[cluster]` and `[control]`: state shared across nodes: the cluster secret and session store,
//! and the control plane's Redis documents and node registry.

use crate::duration::Duration;
use serde::Deserialize;
use std::path::PathBuf;

/// `[cluster]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// Files each holding one cluster secret (at least 32 random bytes, e.g. `openssl rand -hex 32`).
    /// The first derives the ticket key of each epoch and seals sessions; the others are only
    /// accepted (add the new secret first, keep the old one second for a ticket lifetime, then
    /// drop it). Every node of a cluster must hold the same files.
    pub secret_files: Vec<PathBuf>,
    /// Where TLS 1.2 session IDs and 0-RTT claims are shared: `local` (this node only), `redis`
    /// or `memcached`.
    #[serde(default)]
    pub store: StoreKind,
    /// Store servers: `redis://host:port[/db]` URLs (for `sentinel`, the sentinels' URLs) or
    /// memcached `host:port`.
    #[serde(default)]
    pub servers: Vec<String>,
    /// How Redis is deployed: `single`, `sentinel` or `cluster`.
    #[serde(default)]
    pub redis_mode: RedisMode,
    /// Sentinel service (master) name, for `redis_mode = "sentinel"`.
    #[serde(default)]
    pub sentinel_service: Option<String>,
    /// Prefix of every key tlsgate writes (several clusters can share one store).
    #[serde(default = "default_key_prefix")]
    pub key_prefix: String,
    /// Longest a handshake waits for a session lookup; past it, a full handshake.
    #[serde(default = "default_lookup_timeout")]
    pub lookup_timeout: Duration,
    /// Longest a background write or a 0-RTT claim waits for the store.
    #[serde(default = "default_write_timeout")]
    pub write_timeout: Duration,
    /// Consecutive failures (errors or timeouts) that open the circuit breaker.
    #[serde(default = "default_breaker_failures")]
    pub breaker_failures: u32,
    /// While the breaker is open, how often the store is probed in the background.
    #[serde(default = "default_breaker_retry")]
    pub breaker_retry: Duration,
    /// Connections to each Memcached server (Redis multiplexes one connection).
    #[serde(default = "default_store_connections")]
    pub connections: usize,
}

fn default_key_prefix() -> String {
    "tlsgate:".into()
}
fn default_lookup_timeout() -> Duration {
    Duration(std::time::Duration::from_millis(5))
}
fn default_write_timeout() -> Duration {
    Duration(std::time::Duration::from_millis(250))
}
fn default_breaker_failures() -> u32 {
    3
}
fn default_breaker_retry() -> Duration {
    Duration::from_secs(1)
}
fn default_store_connections() -> usize {
    4
}

/// Backend of the cluster session store.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    /// This node only (tickets are still shared through the secret).
    #[default]
    Local,
    /// Redis (single server, Sentinel or Cluster).
    Redis,
    /// Memcached (text protocol).
    Memcached,
}

/// How Redis is deployed.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum RedisMode {
    /// One server (or a proxy in front of several).
    #[default]
    Single,
    /// Masters found through Redis Sentinel.
    Sentinel,
    /// Redis Cluster (keys spread over slots).
    Cluster,
}

/// `[control]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControlConfig {
    /// Redis holding the control documents: `redis://[user:password@]host:port[/db]` or
    /// `rediss://...`.
    pub redis_url: String,
    /// Cluster name: nodes with the same name follow the same document.
    #[serde(default = "default_control_cluster")]
    pub cluster_name: String,
    /// This node's id in the registry; default `HOSTNAME:PORT` of the first listener.
    #[serde(default)]
    pub node_id: Option<String>,
    /// How often the current version is read as well, in case a notification was missed.
    #[serde(default = "default_control_poll")]
    pub poll_interval: Duration,
    /// How often this node refreshes its registry entry (it expires after three intervals).
    #[serde(default = "default_control_heartbeat")]
    pub heartbeat_interval: Duration,
}

fn default_control_cluster() -> String {
    "default".into()
}
fn default_control_poll() -> Duration {
    Duration::from_secs(1)
}
fn default_control_heartbeat() -> Duration {
    Duration::from_secs(2)
}
