//! The configuration model: one TOML file, deserialised into [`Config`] and its sections, one
//! file per section (every type is re-exported here, so `model::X` and `tlsgate_config::X` name it).
//!
//! Every field carries a doc line that doubles as the reference (docs/CONFIG.md mirrors it).
//! Defaults are chosen to be safe (forward-secret suites only, admin on loopback) and fast
//! (one worker per core, resumption on, tickets rotating).

mod access;
mod acme;
mod admin;
mod cluster;
mod ech;
mod handshake_budget;
mod http3;
mod keyless;
mod log;
mod ratelimit;
mod route;
mod server;
mod site;
mod tls;
mod upstream;

pub use access::{AccessAction, AccessRuleConfig};
pub use acme::{AcmeConfig, SiteAcmeConfig, ACME_CHALLENGES, ACME_KEY_TYPES};
pub use admin::AdminConfig;
pub use cluster::{ClusterConfig, ControlConfig, RedisMode, StoreKind};
pub use ech::EchConfig;
pub use handshake_budget::{HandshakeBudgetConfig, OverBudget};
pub use http3::{CongestionControl, Http3Config, RetryMode};
pub use keyless::{DelegatedCredentialsConfig, KeyServerPoolConfig, KeylessConfig};
pub use log::{LogConfig, LogFormat};
pub use ratelimit::{RateLimitConfig, RateLimitKey, RateLimitScope};
pub use route::{FixedResponseConfig, RouteConfig};
pub use server::{Http2Config, ListenerConfig, ListenerKind, ServerConfig, DEFAULT_TCP_FASTOPEN};
pub use site::{CertificateConfig, ClientAuthConfig, ClientAuthMode, HstsConfig, OcspMode, SiteConfig};
pub use tls::{SessionCacheConfig, TicketConfig, TlsConfig, TlsVersion, UnknownSni, DEFAULT_TLS12_CIPHERS};
pub use upstream::{
    Balance, ForwardedHeaders, HealthCheckConfig, RetryConfig, RetryOn, SendProxyProtocol, StatusRange, UpstreamConfig,
    UpstreamProtocol, UpstreamTlsConfig, SYSTEM_CA_BUNDLE,
};

use serde::Deserialize;

/// The whole configuration file.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Process-wide settings: workers, limits, timeouts.
    #[serde(default)]
    pub server: ServerConfig,
    /// Logging: format, level, access log.
    #[serde(default)]
    pub log: LogConfig,
    /// The admin listener (Prometheus metrics, reload).
    #[serde(default)]
    pub admin: AdminConfig,
    /// TLS settings shared by every site: versions, suites, groups, resumption.
    #[serde(default)]
    pub tls: TlsConfig,
    /// Listening sockets. At least one is required.
    #[serde(default, rename = "listener")]
    pub listeners: Vec<ListenerConfig>,
    /// Virtual hosts, chosen by SNI. At least one is required.
    #[serde(default, rename = "site")]
    pub sites: Vec<SiteConfig>,
    /// Upstream groups that routes forward to.
    #[serde(default, rename = "upstream")]
    pub upstreams: Vec<UpstreamConfig>,
    /// How the gateway reaches key servers (required when a certificate names `key_servers`).
    #[serde(default)]
    pub keyless: Option<KeylessConfig>,
    /// HTTP/2 settings the gateway announces to clients (streams, windows, frame and table sizes).
    #[serde(default)]
    pub http2: Http2Config,
    /// HTTP/3 over QUIC beside the TCP listeners (docs/HTTP3.md).
    #[serde(default)]
    pub http3: Http3Config,
    /// Cluster-wide session state: the shared secret for ticket keys and sealed sessions, and the
    /// store (Redis or Memcached) for TLS 1.2 session IDs and 0-RTT single-use claims.
    #[serde(default)]
    pub cluster: Option<ClusterConfig>,
    /// Encrypted ClientHello, keys derived per epoch from the cluster secret (docs/ECH.md).
    #[serde(default)]
    pub ech: Option<EchConfig>,
    /// The control plane: the cluster's dynamic configuration document (key-server pools) in
    /// Redis, and this node's entry in the node registry (docs/CONTROL.md).
    #[serde(default)]
    pub control: Option<ControlConfig>,
    /// Allow/deny rules by source network and JA4 fingerprint, first match decides.
    #[serde(default, rename = "access_rule")]
    pub access_rules: Vec<AccessRuleConfig>,
    /// Certificates obtained and renewed through ACME for sites with `[site.acme]` (docs/ACME.md).
    #[serde(default)]
    pub acme: Option<AcmeConfig>,
    /// Request rate limits that routes name (`[[site.route]] rate_limit`).
    #[serde(default, rename = "rate_limit")]
    pub rate_limits: Vec<RateLimitConfig>,
}

impl Config {
    /// The UDP addresses QUIC serves (none unless `[http3] enabled`): one per HTTPS listener it
    /// serves, on that listener's address or `[http3]`'s port.
    pub fn quic_addresses(&self) -> Vec<std::net::SocketAddr> {
        let h3 = &self.http3;
        self.listeners
            .iter()
            .filter(|l| l.kind == ListenerKind::Https && h3.serves(l.listen))
            .map(|l| h3.udp_addr(l.listen))
            .collect()
    }
}
