//! `[[site]]`: a virtual host chosen by SNI, its HSTS header, its certificates (key source
//! and OCSP stapling) and the client certificates it asks for (`[site.client_auth]`).

use super::route::RouteConfig;
use crate::duration::Duration;
use serde::Deserialize;
use std::path::PathBuf;

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
    #[serde(default, rename = "certificate")]
    pub certificates: Vec<CertificateConfig>,
    /// Certificates from `[acme]` instead of `[[site.certificate]]` files (docs/ACME.md).
    #[serde(default)]
    pub acme: Option<super::acme::SiteAcmeConfig>,
    /// Routes, tried longest path prefix first.
    #[serde(default, rename = "route")]
    pub routes: Vec<RouteConfig>,
    /// HTTP Strict Transport Security for this site (absent = no header).
    #[serde(default)]
    pub hsts: Option<HstsConfig>,
    /// Client certificates (mutual TLS) for this site (absent = none requested, and the
    /// identity headers are not touched).
    #[serde(default)]
    pub client_auth: Option<ClientAuthConfig>,
}

/// `[site.client_auth]`: client certificates asked for in the handshake, verified against `ca`,
/// and the verified identity forwarded to origins.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientAuthConfig {
    /// `off` (none asked for; the identity headers are still removed from requests), `optional`
    /// (asked for; none is fine, an invalid one fails the handshake) or `required`.
    #[serde(default)]
    pub mode: ClientAuthMode,
    /// PEM bundle of the CAs whose client certificates are accepted (required unless `off`).
    #[serde(default)]
    pub ca: Option<PathBuf>,
    /// How many certificates may follow the client's in its verified chain, the trusted CA
    /// included (1 = issued directly by a CA of `ca`; each intermediate adds one).
    #[serde(default = "default_verify_depth")]
    pub verify_depth: u32,
    /// Request header carrying the verified certificate's subject (RFC 4514) to the origin.
    #[serde(default = "default_identity_header")]
    pub identity_header: String,
    /// Request header carrying the SHA-256 fingerprint (lowercase hex of the DER) to the origin.
    #[serde(default = "default_fingerprint_header")]
    pub fingerprint_header: String,
}

/// See [`ClientAuthConfig::mode`].
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum ClientAuthMode {
    /// No certificate requested.
    #[default]
    Off,
    /// Requested; a client without one is served without an identity.
    Optional,
    /// Requested; a handshake without a valid one fails.
    Required,
}

fn default_verify_depth() -> u32 {
    4
}

fn default_identity_header() -> String {
    "X-Client-Cert-Subject".into()
}

fn default_fingerprint_header() -> String {
    "X-Client-Cert-Sha256".into()
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
