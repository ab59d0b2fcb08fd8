//! `[keyless]`: how the gateway reaches key servers (mutual TLS, timeouts, retries, circuit
//! breaking) and the named key-server pools.

use crate::duration::Duration;
use serde::Deserialize;
use std::path::PathBuf;

/// `[keyless]`: the gateway's side of keyless TLS (docs/KEYLESS.md).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeylessConfig {
    /// PEM chain the gateway presents to key servers (mutual TLS).
    pub client_certificate: PathBuf,
    /// Private key of `client_certificate`.
    pub client_key: PathBuf,
    /// PEM CA bundle that key servers' certificates must chain to.
    pub server_ca: PathBuf,
    /// Longest time to connect to a key server (TCP and TLS).
    #[serde(default = "default_keyless_connect")]
    pub connect_timeout: Duration,
    /// Longest wait for one signature before it is retried on another key server.
    #[serde(default = "default_keyless_request")]
    pub request_timeout: Duration,
    /// Persistent connections kept to each key server.
    #[serde(default = "default_keyless_connections")]
    pub connections_per_server: usize,
    /// How often each connection is pinged; a missed pong closes it.
    #[serde(default = "default_keyless_health")]
    pub health_interval: Duration,
    /// Further attempts on other key servers after a failed or timed-out request.
    #[serde(default = "default_keyless_retries")]
    pub retries: usize,
    /// Consecutive failures after which a key server is skipped (circuit open).
    #[serde(default = "default_keyless_failures")]
    pub failure_threshold: u32,
    /// How long an open circuit skips its key server before it is tried again.
    #[serde(default = "default_keyless_cooldown")]
    pub breaker_cooldown: Duration,
    /// Named key-server pools (`[[keyless.pool]]`) that certificates name with `key_server_pool`.
    #[serde(default, rename = "pool")]
    pub pools: Vec<KeyServerPoolConfig>,
    /// Delegated credentials (RFC 9345) for keyless certificates
    /// (`[keyless.delegated_credentials]`, docs/KEYLESS.md).
    #[serde(default)]
    pub delegated_credentials: DelegatedCredentialsConfig,
}

/// `[keyless.delegated_credentials]`: the gateway asks the key servers, once per validity
/// period, for a short-lived credential whose key it holds in memory; clients that support
/// delegated credentials are then served with no key-server round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DelegatedCredentialsConfig {
    /// Ask for credentials for every keyless certificate that carries the DelegationUsage
    /// extension.
    #[serde(default)]
    pub enabled: bool,
    /// How long each credential is valid (the key server caps it; RFC 9345: at most 7 days).
    #[serde(default = "default_dc_validity")]
    pub validity: Duration,
    /// A new credential is asked for this long before the current one expires.
    #[serde(default = "default_dc_renew_before")]
    pub renew_before: Duration,
}

impl Default for DelegatedCredentialsConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            validity: default_dc_validity(),
            renew_before: default_dc_renew_before(),
        }
    }
}

fn default_dc_validity() -> Duration {
    Duration::from_secs(8 * 3600)
}
fn default_dc_renew_before() -> Duration {
    Duration::from_secs(3 * 3600)
}

impl KeylessConfig {
    /// The connection settings alone (no pools): what decides whether two configuration
    /// generations can share key-server connections.
    pub fn connection_settings(&self) -> String {
        format!(
            "{:?}|{:?}|{:?}|{:?}|{:?}|{}|{:?}|{}|{}|{:?}",
            self.client_certificate,
            self.client_key,
            self.server_ca,
            self.connect_timeout,
            self.request_timeout,
            self.connections_per_server,
            self.health_interval,
            self.retries,
            self.failure_threshold,
            self.breaker_cooldown
        )
    }
}

/// `[[keyless.pool]]`: a named group of key servers.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyServerPoolConfig {
    /// The name certificates (`key_server_pool`), the admin API and the control plane use.
    pub name: String,
    /// Key servers (`host:port`) at startup; the admin API (`PUT /keyless/pools/NAME`) and the
    /// control plane can change members, weights and drain state at runtime.
    pub servers: Vec<String>,
}

fn default_keyless_connect() -> Duration {
    Duration::from_secs(2)
}
fn default_keyless_request() -> Duration {
    Duration::from_secs(1)
}
fn default_keyless_connections() -> usize {
    2
}
fn default_keyless_health() -> Duration {
    Duration::from_secs(1)
}
fn default_keyless_retries() -> usize {
    2
}
fn default_keyless_failures() -> u32 {
    3
}
fn default_keyless_cooldown() -> Duration {
    Duration::from_secs(2)
}
