//! `[tls]`: protocol versions, suites, groups, ALPN, record sizing and resumption (session
//! cache and tickets), shared by every site.

use crate::duration::Duration;
use serde::Deserialize;

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
    /// How often the certificate, key and OCSP files are checked for changes; a change is
    /// installed without a reload once the new chain verifies against its key. `0s`: never.
    pub certificate_poll: Duration,
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
            certificate_poll: Duration::from_secs(10),
        }
    }
}

/// Forward-secret AEAD suites only, AES-128-GCM first for each key type: a client listing
/// AES-256-GCM first (OpenSSL's default) still gets AES-128-GCM, whose SHA-256 key schedule is
/// cheaper. Clients that list ChaCha20 first (phones without AES instructions) get it per
/// connection, unless `strict_cipher_order` (tlsgate-tls `context::chacha20_first_list`).
pub const DEFAULT_TLS12_CIPHERS: &str = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:\
ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-CHACHA20-POLY1305";

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
