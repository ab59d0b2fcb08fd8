//! `[[upstream]]`: groups of origin servers, their balancing policy, their timeouts, the HTTP
//! version spoken to them and, for `https://` servers, `[upstream.tls]`.

use crate::duration::Duration;
use serde::Deserialize;
use std::path::PathBuf;

/// `[[upstream]]`: a group of origin servers.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    /// The name routes refer to.
    pub name: String,
    /// Origin servers: `host:port` or `http://host[:port]` (plaintext), `https://host[:port]`
    /// (TLS, set up by `[upstream.tls]`).
    pub servers: Vec<String>,
    /// HTTP version spoken to the servers: `http1` (keep-alive pooled), `http2` (one multiplexed
    /// connection per server: ALPN `h2` over TLS, prior knowledge over plaintext) or `auto`
    /// (ALPN chooses `h2` or `http/1.1`; TLS servers only).
    #[serde(default)]
    pub protocol: UpstreamProtocol,
    /// TLS to `https://` servers: verification, SNI, client certificate, key-exchange groups.
    #[serde(default)]
    pub tls: UpstreamTlsConfig,
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

/// HTTP version spoken to an upstream group's servers.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum UpstreamProtocol {
    /// HTTP/1.1 with pooled keep-alive connections (what nginx's `proxy_pass` speaks).
    #[default]
    Http1,
    /// HTTP/2: ALPN `h2` over TLS, prior knowledge (h2c) over plaintext; what gRPC origins need.
    Http2,
    /// Whatever the server picks by ALPN (`h2` or `http/1.1`); TLS servers only.
    Auto,
}

impl UpstreamProtocol {
    /// The name used in the configuration, logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http1 => "http1",
            Self::Http2 => "http2",
            Self::Auto => "auto",
        }
    }
}

/// `[upstream.tls]`: how the gateway speaks TLS to a group's `https://` servers.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct UpstreamTlsConfig {
    /// PEM CA bundle the servers' certificates must chain to (default: the system bundle,
    /// `/etc/ssl/certs/ca-certificates.crt`).
    #[serde(default)]
    pub ca: Option<PathBuf>,
    /// Verify the server's certificate chain and name. Turning this off is for tests only.
    #[serde(default = "default_true")]
    pub verify: bool,
    /// The name sent in SNI and checked against the certificate (default: each server's host;
    /// no SNI for an IP address, whose certificate must then name the IP).
    #[serde(default)]
    pub server_name: Option<String>,
    /// PEM chain presented to servers that ask for a client certificate (mutual TLS).
    #[serde(default)]
    pub client_certificate: Option<PathBuf>,
    /// Private key of `client_certificate`.
    #[serde(default)]
    pub client_key: Option<PathBuf>,
    /// Key-exchange groups offered, in order (default: hybrid post-quantum first).
    #[serde(default = "default_origin_groups")]
    pub groups: Vec<String>,
}

impl Default for UpstreamTlsConfig {
    fn default() -> Self {
        Self {
            ca: None,
            verify: true,
            server_name: None,
            client_certificate: None,
            client_key: None,
            groups: default_origin_groups(),
        }
    }
}

/// The system CA bundle of Debian and its derivatives.
pub const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

fn default_true() -> bool {
    true
}

fn default_origin_groups() -> Vec<String> {
    ["X25519MLKEM768", "X25519", "P-256"].map(String::from).to_vec()
}
