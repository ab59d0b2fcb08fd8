//! The configuration model: one TOML file, deserialised into these structs.
//!
//! Every field carries a doc line that doubles as the reference (docs/CONFIG.md mirrors it).
//! Defaults are chosen to be safe (forward-secret suites only, admin on loopback) and fast
//! (one worker per core, resumption on, tickets rotating).

use crate::duration::Duration;
use crate::request_edit::{Cidr, HeaderEdits};
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::PathBuf;

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
    /// Cluster-wide session state: the shared secret for ticket keys and sealed sessions, and the
    /// store (Redis or Memcached) for TLS 1.2 session IDs and 0-RTT single-use claims.
    #[serde(default)]
    pub cluster: Option<ClusterConfig>,
    /// The control plane: the cluster's dynamic configuration document (key-server pools) in
    /// Redis, and this node's entry in the node registry (docs/CONTROL.md).
    #[serde(default)]
    pub control: Option<ControlConfig>,
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

/// `[server]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Worker threads, each with its own event loop and SO_REUSEPORT sockets. 0 = one per core.
    pub workers: usize,
    /// Longest time a client may take to complete the TLS handshake (stalled clients are dropped).
    pub handshake_timeout: Duration,
    /// Open client connections above which new ones are shed (closed at once), per process.
    pub max_connections: usize,
    /// Open client connections one source (an IPv4 address, an IPv6 /64) may hold; more are shed
    /// at once, so one source cannot fill `max_connections` for everyone. 0 = no limit.
    pub max_connections_per_source: usize,
    /// A connection that has sent no byte for this long after it was accepted is closed (an
    /// idle or bare TCP connection holds a slot for this long, not the whole handshake timeout).
    pub silent_timeout: Duration,
    /// On SIGTERM, how long open connections get to finish before the process exits.
    pub drain_timeout: Duration,
    /// How long an idle client keep-alive connection is kept open.
    pub client_idle_timeout: Duration,
    /// Longest time to receive a complete request header from a client.
    pub client_header_timeout: Duration,
    /// Largest request header block (request line + headers) accepted; larger gets 431.
    pub max_request_header_bytes: usize,
    /// Networks (CIDR) of proxies in front of the gateway whose `X-Forwarded-For`, `-Proto`,
    /// `-Host` and `Forwarded` headers are kept and extended; from anyone else they are replaced.
    pub trusted_proxies: Vec<Cidr>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            workers: 0,
            handshake_timeout: Duration::from_secs(10),
            max_connections: 100_000,
            max_connections_per_source: 1024,
            silent_timeout: Duration::from_secs(5),
            drain_timeout: Duration::from_secs(30),
            client_idle_timeout: Duration::from_secs(75),
            client_header_timeout: Duration::from_secs(30),
            max_request_header_bytes: 32 * 1024,
            trusted_proxies: Vec::new(),
        }
    }
}

/// `[log]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// `text` or `json`.
    pub format: LogFormat,
    /// A tracing filter, e.g. `info` or `tlsgate=debug,info`. `RUST_LOG` overrides it.
    pub level: String,
    /// Write one access-log line per request (target `access`), when its last byte is sent.
    pub access_log: bool,
    /// Write access-log lines to this file (appended; reopened on SIGUSR1 or
    /// `tlsgate reopen-logs`, for logrotate) instead of stderr with the other logs.
    pub access_log_file: Option<PathBuf>,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            format: LogFormat::Text,
            level: "info".into(),
            access_log: true,
            access_log_file: None,
        }
    }
}

/// Log line format.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// `[admin]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdminConfig {
    /// Address of the admin listener (`/metrics`, `POST /reload`). Loopback by default.
    pub listen: Option<SocketAddr>,
    /// Allow binding the admin listener on a non-loopback address (it has no authentication yet).
    pub allow_non_loopback: bool,
    /// More names (`host` or `host:port`; without a port any port) that requests may carry in
    /// `Host`/`Origin`, besides the listen address, `localhost` and loopback IPs (else 421).
    pub allowed_hosts: Vec<String>,
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            listen: Some(SocketAddr::from(([127, 0, 0, 1], 9090))),
            allow_non_loopback: false,
            allowed_hosts: Vec::new(),
        }
    }
}

/// `[tls]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TlsConfig {
    /// Lowest protocol version: `1.2` or `1.3`.
    pub min_version: TlsVersion,
    /// Highest protocol version: `1.2` or `1.3`.
    pub max_version: TlsVersion,
    /// TLS 1.2 cipher list (BoringSSL syntax). Only forward-secret ECDHE AEAD suites are allowed;
    /// `[a|b]` makes an equal-preference group (the client's order decides inside it).
    pub ciphers_tls12: String,
    /// Key-exchange groups in preference order (BoringSSL names: X25519MLKEM768, X25519, P-256, P-384).
    pub groups: Vec<String>,
    /// ALPN protocols offered, in server preference order: `h2`, `http/1.1`.
    pub alpn: Vec<String>,
    /// What to do with a ClientHello whose SNI matches no site: `default` (serve the default
    /// site) or `reject` (handshake refused with an `unrecognized_name` alert).
    pub unknown_sni: UnknownSni,
    /// Dynamic TLS record sizing: a new connection, or one idle for `dynamic_records_idle`,
    /// starts with records that fit one TCP segment (the first bytes are decryptable as soon as
    /// their segment arrives), growing with the congestion window up to `max_record_size`.
    pub dynamic_records: bool,
    /// Largest TLS record sent (512..=16384); the fixed size when `dynamic_records` is off.
    pub max_record_size: usize,
    /// Idle time after which a connection starts again with one-segment records.
    pub dynamic_records_idle: Duration,
    /// Without TCP_INFO (non-Linux), how many bytes go out in one-segment records before full size.
    pub dynamic_records_fallback_bytes: usize,
    /// Server cipher order: `false` lets a client that lists ChaCha20-Poly1305 first have it
    /// (equal-preference groups, TLS 1.2 and 1.3); `true` makes the server's order strict: AES-GCM
    /// whenever the client offers it (TLS 1.2: `[a|b]` groups are flattened).
    pub strict_cipher_order: bool,
    /// RFC 8879 certificate compression (brotli and zlib) for TLS 1.3 clients that offer it; each
    /// certificate's compressed form is computed once and reused.
    pub cert_compression: bool,
    /// TLS 1.2 session-ID cache.
    pub session_cache: SessionCacheConfig,
    /// Session tickets (TLS 1.2 tickets and TLS 1.3 PSK tickets).
    pub tickets: TicketConfig,
}

impl Default for TlsConfig {
    fn default() -> Self {
        Self {
            min_version: TlsVersion::V1_2,
            max_version: TlsVersion::V1_3,
            ciphers_tls12: DEFAULT_TLS12_CIPHERS.into(),
            groups: vec!["X25519MLKEM768".into(), "X25519".into(), "P-256".into()],
            alpn: vec!["h2".into(), "http/1.1".into()],
            unknown_sni: UnknownSni::Default,
            dynamic_records: true,
            max_record_size: 16_384,
            dynamic_records_idle: Duration::from_secs(1),
            dynamic_records_fallback_bytes: 64 * 1024,
            strict_cipher_order: false,
            cert_compression: true,
            session_cache: SessionCacheConfig::default(),
            tickets: TicketConfig::default(),
        }
    }
}

/// Forward-secret AEAD suites only. Each key type's suites form one equal-preference group, so
/// the client's own order decides inside it: clients that list ChaCha20 first (phones without AES
/// instructions) get it, everyone else gets AES-GCM.
pub const DEFAULT_TLS12_CIPHERS: &str =
    "[ECDHE-ECDSA-AES128-GCM-SHA256|ECDHE-ECDSA-AES256-GCM-SHA384|ECDHE-ECDSA-CHACHA20-POLY1305]:\
[ECDHE-RSA-AES128-GCM-SHA256|ECDHE-RSA-AES256-GCM-SHA384|ECDHE-RSA-CHACHA20-POLY1305]";

/// A TLS protocol version.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    /// TLS 1.2
    #[serde(rename = "1.2")]
    V1_2,
    /// TLS 1.3
    #[serde(rename = "1.3")]
    V1_3,
}

/// See [`TlsConfig::unknown_sni`].
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum UnknownSni {
    /// Serve the default site.
    Default,
    /// Fail the handshake.
    Reject,
}

/// `[tls.session_cache]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SessionCacheConfig {
    /// Resume TLS 1.2 sessions by session ID.
    pub enabled: bool,
    /// Most sessions kept (least recently used are evicted).
    pub size: usize,
    /// Lifetime of a cached session.
    pub timeout: Duration,
}

impl Default for SessionCacheConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            size: 20_480,
            timeout: Duration::from_secs(300),
        }
    }
}

/// `[tls.tickets]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TicketConfig {
    /// Issue and accept session tickets (TLS 1.2 tickets, TLS 1.3 resumption PSKs).
    pub enabled: bool,
    /// How often a new ticket-encryption key becomes current.
    pub rotation: Duration,
    /// Ticket lifetime: a retired key still decrypts for this long, then it is erased.
    pub lifetime: Duration,
    /// Accept TLS 1.3 early data (0-RTT) on resumed connections. Only GET/HEAD requests without a
    /// body are served from early data (others get 425 Too Early); each ticket's early data is
    /// accepted at most once (across the cluster when `[cluster]` has a store; with the store
    /// unreachable, 0-RTT is refused). Off by default.
    pub early_data: bool,
}

impl Default for TicketConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            rotation: Duration::from_secs(3600),
            lifetime: Duration::from_secs(7200),
            early_data: false,
        }
    }
}

/// `[[listener]]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenerConfig {
    /// Address to bind, e.g. `0.0.0.0:443` or `[::]:443`.
    pub listen: SocketAddr,
    /// `https` (TLS-terminating) or `redirect` (plain HTTP answering a redirect to https).
    #[serde(default = "default_listener_kind")]
    pub kind: ListenerKind,
    /// Length of the kernel accept queue.
    #[serde(default = "default_backlog")]
    pub backlog: u32,
    /// For `redirect` listeners: the port to put in the `https://` location (443 is omitted).
    #[serde(default)]
    pub https_port: Option<u16>,
    /// For `redirect` listeners: 301 or 308.
    #[serde(default = "default_redirect_status")]
    pub redirect_status: u16,
    /// TCP Fast Open queue length (connections whose SYN data the kernel accepts before the
    /// handshake completes); 0 = off. Needs sysctl `net.ipv4.tcp_fastopen` with bit 2 set (e.g. 3).
    /// Unset: [`DEFAULT_TCP_FASTOPEN`], on when the kernel allows it (one INFO line when it does
    /// not); set: the operator asked for it, and a kernel that does not allow it is a WARN.
    #[serde(default)]
    pub tcp_fastopen: Option<u32>,
}

/// The TCP Fast Open queue length of a listener that does not set `tcp_fastopen`.
pub const DEFAULT_TCP_FASTOPEN: u32 = 256;

impl ListenerConfig {
    /// The TCP Fast Open queue length this listener asks the kernel for (0 = off).
    pub fn tfo_queue(&self) -> u32 {
        self.tcp_fastopen.unwrap_or(DEFAULT_TCP_FASTOPEN)
    }
}

fn default_listener_kind() -> ListenerKind {
    ListenerKind::Https
}
fn default_backlog() -> u32 {
    4096
}
fn default_redirect_status() -> u16 {
    301
}

/// `[http2]`: the SETTINGS the gateway announces on HTTP/2 client connections.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Http2Config {
    /// Streams a client may have open at once on one connection (SETTINGS_MAX_CONCURRENT_STREAMS).
    pub max_concurrent_streams: u32,
    /// Flow-control window per stream, in bytes (SETTINGS_INITIAL_WINDOW_SIZE; 65535..=2^31-1).
    pub initial_stream_window: u32,
    /// Flow-control window of the whole connection, in bytes (65535..=2^31-1).
    pub initial_connection_window: u32,
    /// Largest frame payload the gateway accepts (SETTINGS_MAX_FRAME_SIZE; 16384..=16777215).
    pub max_frame_size: u32,
    /// HPACK dynamic table size for headers the client sends (SETTINGS_HEADER_TABLE_SIZE).
    pub header_table_size: u32,
    /// Send a PING this often on idle connections (absent = no pings).
    pub keep_alive_interval: Option<Duration>,
    /// Close the connection when a PING is not answered within this time.
    pub keep_alive_timeout: Duration,
}

impl Default for Http2Config {
    fn default() -> Self {
        Self {
            max_concurrent_streams: 128,
            initial_stream_window: 256 * 1024,
            initial_connection_window: 1024 * 1024,
            max_frame_size: 16_384,
            header_table_size: 4096,
            keep_alive_interval: None,
            keep_alive_timeout: Duration::from_secs(20),
        }
    }
}

/// What a listener speaks.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ListenerKind {
    /// TLS termination, then HTTP/1.1 or HTTP/2 by ALPN.
    Https,
    /// Plain HTTP that redirects every request to https.
    Redirect,
}

/// `[[site]]`: a virtual host.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SiteConfig {
    /// A name for logs and metrics.
    pub name: String,
    /// Host names this site answers (exact, or `*.example.com` wildcards), matched against SNI.
    pub server_names: Vec<String>,
    /// Serve this site when SNI is absent or unknown (exactly one site may set it; otherwise the
    /// first site is the default).
    #[serde(default)]
    pub default: bool,
    /// Certificate chains with their keys (one per key type, e.g. ECDSA and RSA).
    #[serde(rename = "certificate")]
    pub certificates: Vec<CertificateConfig>,
    /// Routes, tried longest path prefix first.
    #[serde(default, rename = "route")]
    pub routes: Vec<RouteConfig>,
    /// HTTP Strict Transport Security for this site (absent = no header).
    #[serde(default)]
    pub hsts: Option<HstsConfig>,
}

/// `[site.hsts]`: the `Strict-Transport-Security` header on every HTTPS response of a site.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HstsConfig {
    /// How long browsers remember to use HTTPS only (`max-age`), e.g. `"365d"`. Start small
    /// (`"5m"`) and raise it once HTTPS works everywhere: a long max-age cannot be taken back.
    #[serde(default = "default_hsts_max_age")]
    pub max_age: Duration,
    /// Add `includeSubDomains`.
    #[serde(default)]
    pub include_subdomains: bool,
    /// Add `preload` (the browsers' preload list also needs includeSubDomains and max-age ≥ 1 year).
    #[serde(default)]
    pub preload: bool,
}

fn default_hsts_max_age() -> Duration {
    Duration::from_secs(365 * 86_400)
}

impl HstsConfig {
    /// The header value, e.g. `max-age=31536000; includeSubDomains; preload`.
    pub fn header_value(&self) -> String {
        let mut v = format!("max-age={}", self.max_age.get().as_secs());
        if self.include_subdomains {
            v.push_str("; includeSubDomains");
        }
        if self.preload {
            v.push_str("; preload");
        }
        v
    }
}

/// `[[site.certificate]]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CertificateConfig {
    /// PEM file: the leaf certificate first, then intermediates (no root).
    pub chain: PathBuf,
    /// PEM file with the private key (PKCS#8, SEC1 or PKCS#1). Exactly one of `key` and
    /// `key_servers` is set.
    #[serde(default)]
    pub key: Option<PathBuf>,
    /// Key servers (`host:port`) holding the private key instead of a key file (keyless TLS).
    #[serde(default)]
    pub key_servers: Vec<String>,
    /// A named `[[keyless.pool]]` holding the private key instead of a key file (keyless TLS);
    /// its members can be changed at runtime (admin API, control plane).
    #[serde(default)]
    pub key_server_pool: Option<String>,
    /// OCSP stapling: `auto` (staple a response fetched from the responder the certificate names,
    /// or from `ocsp_url`, or read from `ocsp_file`) or `off`.
    #[serde(default)]
    pub ocsp: OcspMode,
    /// OCSP responder (`http://...`) to ask instead of the one named in the certificate.
    #[serde(default)]
    pub ocsp_url: Option<String>,
    /// DER OCSP response to staple instead of fetching one (re-read on reload; checked like a
    /// fetched one, and no longer stapled once expired).
    #[serde(default)]
    pub ocsp_file: Option<PathBuf>,
    /// How often to fetch a fresh OCSP response; by default, when half of the current response's
    /// validity has passed. Never later than that.
    #[serde(default)]
    pub ocsp_refresh: Option<Duration>,
}

/// See [`CertificateConfig::ocsp`].
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum OcspMode {
    /// Staple when there is a responder (in the certificate or `ocsp_url`) or an `ocsp_file`.
    #[default]
    Auto,
    /// Never staple.
    Off,
}

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

/// `[[site.route]]`
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// Only requests whose Host (without port) equals this; absent = any host of the site.
    #[serde(default)]
    pub host: Option<String>,
    /// Request paths starting with this prefix match. Defaults to `/`.
    #[serde(default = "default_prefix")]
    pub path_prefix: String,
    /// Forward matching requests to this upstream group.
    #[serde(default)]
    pub upstream: Option<String>,
    /// Answer matching requests with this fixed response instead (for health checks and benchmarks).
    #[serde(default)]
    pub fixed_response: Option<FixedResponseConfig>,
    /// Replace the matched `path_prefix` with this before forwarding (`"/"` strips it):
    /// `path_prefix = "/api/"`, `rewrite_prefix = "/v2/"` forwards `/api/x?q` as `/v2/x?q`.
    #[serde(default)]
    pub rewrite_prefix: Option<String>,
    /// Headers set / removed on requests before they are forwarded.
    #[serde(default)]
    pub request_headers: HeaderEdits,
    /// Headers set / removed on responses (the origin's and the gateway's own) of this route.
    #[serde(default)]
    pub response_headers: HeaderEdits,
}

fn default_prefix() -> String {
    "/".into()
}

/// A response tlsgate answers itself.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixedResponseConfig {
    /// HTTP status code.
    #[serde(default = "default_fixed_status")]
    pub status: u16,
    /// Body text.
    #[serde(default)]
    pub body: String,
    /// Content-Type header.
    #[serde(default = "default_content_type")]
    pub content_type: String,
}

fn default_fixed_status() -> u16 {
    200
}
fn default_content_type() -> String {
    "text/plain".into()
}

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
