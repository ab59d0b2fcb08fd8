//! `[[rate_limit]]`: request rate limits that routes name (`[[site.route]] rate_limit`): how many
//! requests one key (client address, JA4 fingerprint, a header, a cookie, or the route itself)
//! may make per window, counted per node or across the cluster through the `[cluster]` store.

use crate::duration::Duration;
use serde::{Deserialize, Deserializer};

/// `[[rate_limit]]`
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RateLimitConfig {
    /// What routes name it by, and its `limit` label in metrics and in the RateLimit headers.
    pub name: String,
    /// What one counter is kept for: `client_address`, `ja4`, `header`, `cookie` or `route`.
    #[serde(default)]
    pub key: RateLimitKey,
    /// With `key = "header"`: the request header whose value is the key.
    #[serde(default)]
    pub header: Option<String>,
    /// With `key = "cookie"`: the cookie whose value is the key.
    #[serde(default)]
    pub cookie: Option<String>,
    /// Requests one key may make per `window` (a sliding window: the previous window's count,
    /// weighted by how much of it still overlaps, plus the current one's).
    pub requests: u32,
    /// The window's length.
    #[serde(default = "default_window")]
    pub window: Duration,
    /// `local` (each node counts alone) or `cluster` (the nodes of `[cluster]` share the count
    /// through its Redis or Memcached store, reconciled in batches).
    #[serde(default)]
    pub scope: RateLimitScope,
    /// With `key = "client_address"`: leading bits of an IPv4 address that make one key.
    #[serde(default = "default_ipv4_prefix")]
    pub ipv4_prefix: u8,
    /// With `key = "client_address"`: leading bits of an IPv6 address that make one key.
    #[serde(default = "default_ipv6_prefix")]
    pub ipv6_prefix: u8,
    /// Also send `RateLimit-Policy` and `RateLimit` on the responses the limit allows (a 429
    /// always carries them).
    #[serde(default)]
    pub headers_on_allowed: bool,
    /// Keys tracked at once (fixed memory, taken at start; when full, the key nearest to its
    /// window's end is forgotten first).
    #[serde(default = "default_tracked_keys")]
    pub tracked_keys: usize,
    /// With `scope = "cluster"`: how many gateways share the limit; between two reconciliations
    /// a node spends at most this share of what is left of the limit.
    #[serde(default = "default_cluster_nodes")]
    pub cluster_nodes: u32,
}

fn default_window() -> Duration {
    Duration::from_secs(1)
}
fn default_ipv4_prefix() -> u8 {
    32
}
fn default_ipv6_prefix() -> u8 {
    64
}
fn default_tracked_keys() -> usize {
    65_536
}
fn default_cluster_nodes() -> u32 {
    2
}

/// What one counter of a limit is kept for.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum RateLimitKey {
    /// The client's address (the PROXY header's on such a listener, the last untrusted
    /// `X-Forwarded-For` entry behind `[server] trusted_proxies`), cut to the prefix lengths.
    #[default]
    ClientAddress,
    /// The connection's JA4 TLS fingerprint.
    Ja4,
    /// The value of the request header `header`.
    Header,
    /// The value of the cookie `cookie`.
    Cookie,
    /// One counter for the whole route (each route that names the limit has its own).
    Route,
}

/// Where a limit is counted.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum RateLimitScope {
    /// Each node counts alone.
    #[default]
    Local,
    /// Counted across the cluster through the `[cluster]` store.
    Cluster,
}

/// A route's `rate_limit`: one name or a list of names.
pub(crate) fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    })
}
