//! Where the control store is ([`StoreConfig`]) and the names of its keys ([`Keys`]).

use std::time::Duration;

/// Where the store is and how long to wait for it.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// `redis://[user:password@]host:port[/db]` or `rediss://…` (TLS).
    pub url: String,
    /// Cluster name, part of the default prefix.
    pub cluster: String,
    /// Key prefix; `None`: `tlsgate:control:{CLUSTER}:`.
    pub prefix: Option<String>,
    /// Bound on establishing a connection (default 2 s).
    pub connect_timeout: Duration,
    /// Bound on each command (default 2 s).
    pub response_timeout: Duration,
}

impl StoreConfig {
    /// Defaults for `url` and `cluster`.
    pub fn new(url: impl Into<String>, cluster: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            cluster: cluster.into(),
            prefix: None,
            connect_timeout: Duration::from_secs(2),
            response_timeout: Duration::from_secs(2),
        }
    }

    /// The effective key prefix.
    pub fn key_prefix(&self) -> String {
        self.prefix
            .clone()
            .unwrap_or_else(|| format!("tlsgate:control:{{{}}}:", self.cluster))
    }
}

/// Key names under one prefix.
#[derive(Debug, Clone)]
pub struct Keys {
    prefix: String,
}

impl Keys {
    /// Keys under `prefix`.
    pub fn new(prefix: impl Into<String>) -> Self {
        Self { prefix: prefix.into() }
    }
    /// The prefix itself.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }
    /// The current version pointer.
    pub fn current(&self) -> String {
        format!("{}current", self.prefix)
    }
    /// The version counter.
    pub fn seq(&self) -> String {
        format!("{}seq", self.prefix)
    }
    /// The history list.
    pub fn history(&self) -> String {
        format!("{}history", self.prefix)
    }
    /// The record of version `n`.
    pub fn version(&self, n: u64) -> String {
        format!("{}version:{n}", self.prefix)
    }
    /// What `version(n)` puts before `n`.
    pub fn version_prefix(&self) -> String {
        format!("{}version:", self.prefix)
    }
    /// The pub/sub channel.
    pub fn changes(&self) -> String {
        format!("{}changes", self.prefix)
    }
    /// A node's registration.
    pub fn node(&self, id: &str) -> String {
        format!("{}node:{id}", self.prefix)
    }
    /// The sorted set of registered node ids (score: last heartbeat, Unix ms).
    pub fn nodes(&self) -> String {
        format!("{}nodes", self.prefix)
    }
}
