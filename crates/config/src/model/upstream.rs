//! `[[upstream]]`: groups of origin servers, their balancing policy and their timeouts.

use crate::duration::Duration;
use serde::Deserialize;

/// `[[upstream]]`: a group of origin servers.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    /// The name routes refer to.
    pub name: String,
    /// Origin servers as `host:port` (plain HTTP/1.1, keep-alive pooled).
    pub servers: Vec<String>,
    /// `round_robin` or `least_conn`.
    #[serde(default = "default_balance")]
    pub balance: Balance,
    /// Longest time to establish a TCP connection to an origin.
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout: Duration,
    /// Longest time from sending the request to receiving the response header (504 after).
    #[serde(default = "default_header_timeout")]
    pub header_timeout: Duration,
    /// Idle pooled connections are closed after this long.
    #[serde(default = "default_idle_timeout")]
    pub idle_timeout: Duration,
    /// Idle keep-alive connections kept per origin server.
    #[serde(default = "default_max_idle")]
    pub max_idle_per_server: usize,
    /// A server whose connection failed is skipped for this long.
    #[serde(default = "default_fail_timeout")]
    pub fail_timeout: Duration,
}

fn default_balance() -> Balance {
    Balance::RoundRobin
}
fn default_connect_timeout() -> Duration {
    Duration::from_secs(3)
}
fn default_header_timeout() -> Duration {
    Duration::from_secs(60)
}
fn default_idle_timeout() -> Duration {
    Duration::from_secs(60)
}
fn default_max_idle() -> usize {
    64
}
fn default_fail_timeout() -> Duration {
    Duration::from_secs(10)
}

/// Load-balancing policy of an upstream group.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Balance {
    /// Each server in turn.
    RoundRobin,
    /// The server with the fewest requests in flight.
    LeastConn,
}
