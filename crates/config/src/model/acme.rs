//! `[acme]`: certificates obtained and renewed by the gateway itself (RFC 8555), and the
//! per-site opt-in `[site.acme]` (docs/ACME.md).

use crate::duration::Duration;
use serde::Deserialize;
use std::path::PathBuf;

/// `[acme]`: the CA account and how certificates are obtained and renewed.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcmeConfig {
    /// The CA's ACME directory URL (https), e.g. Let's Encrypt's
    /// `https://acme-v02.api.letsencrypt.org/directory`.
    pub directory: String,
    /// Account contacts, e.g. `["mailto:ops@example.com"]`.
    #[serde(default)]
    pub contact: Vec<String>,
    /// PEM bundle of the CAs that sign the directory's HTTPS certificate (default: the system's
    /// roots; a test CA such as Pebble's needs its own).
    #[serde(default)]
    pub directory_ca: Option<PathBuf>,
    /// Directory for the account key (`account.key`, created when missing) and every obtained
    /// certificate and key (`sites/<site>/<key_type>.crt|.key`), so a restart does not order again.
    pub state_dir: PathBuf,
    /// External Account Binding key identifier, when the CA requires one.
    #[serde(default)]
    pub eab_key_id: Option<String>,
    /// External Account Binding HMAC key (base64url, as the CA shows it).
    #[serde(default)]
    pub eab_hmac_key: Option<String>,
    /// Challenge types to use, preferred first: `tls-alpn-01` (answered by the TLS listener),
    /// `http-01` (answered by the redirect listener), `dns-01` (through `dns_hook`).
    #[serde(default = "default_challenges")]
    pub challenges: Vec<String>,
    /// Command run for DNS-01 as `<command> set|clear <_acme-challenge.name> <value>`; it must
    /// return once the TXT record is published (or removed).
    #[serde(default)]
    pub dns_hook: Option<PathBuf>,
    /// Certificate profile to ask for (a name the CA's directory lists, e.g. `shortlived` or
    /// `tlsserver`); the CA's default without it.
    #[serde(default)]
    pub profile: Option<String>,
    /// Without renewal information from the CA (RFC 9773), renew once this fraction of the
    /// certificate's lifetime has passed.
    #[serde(default = "default_renew_at")]
    pub renew_at: f64,
    /// How often to ask the CA's renewal information again (also the longest sleep between checks).
    #[serde(default = "default_check_interval")]
    pub check_interval: Duration,
    /// First wait after a failed order; doubles per failure up to `retry_max` (a CA's
    /// `Retry-After` is honoured when longer).
    #[serde(default = "default_retry_min")]
    pub retry_min: Duration,
    /// Longest wait between failed orders.
    #[serde(default = "default_retry_max")]
    pub retry_max: Duration,
    /// The longest one order may take (validation and issuance).
    #[serde(default = "default_order_timeout")]
    pub order_timeout: Duration,
    /// In a cluster with a shared store (`[cluster]`): how long the lease of the node ordering a
    /// certificate lasts without renewal (it renews every third of it). A node that dies
    /// mid-order holds up the others at most this long.
    #[serde(default = "default_lease")]
    pub lease: Duration,
}

/// `[site.acme]`: this site's certificates come from `[acme]` (no `[[site.certificate]]`).
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SiteAcmeConfig {
    /// Names to order (default: the site's `server_names`; `*.` wildcards need `dns-01`).
    #[serde(default)]
    pub names: Vec<String>,
    /// Key types, one certificate each: `ecdsa` (P-256) and/or `rsa` (2048).
    #[serde(default = "default_key_types")]
    pub key_types: Vec<String>,
    /// A certificate profile for this site instead of `acme.profile`.
    #[serde(default)]
    pub profile: Option<String>,
    /// Challenge types for this site instead of `acme.challenges`.
    #[serde(default)]
    pub challenges: Vec<String>,
    /// Keyless: the `[[keyless.pool]]` whose key servers create the certificate's key and CSR
    /// (the key never exists anywhere else) and sign its handshakes.
    #[serde(default)]
    pub key_server_pool: Option<String>,
    /// Keyless, like `key_server_pool`, with the key servers listed here (`host:port`).
    #[serde(default)]
    pub key_servers: Vec<String>,
}

/// The challenge types tlsgate answers.
pub const ACME_CHALLENGES: [&str; 3] = ["tls-alpn-01", "http-01", "dns-01"];

/// The key types tlsgate orders.
pub const ACME_KEY_TYPES: [&str; 2] = ["ecdsa", "rsa"];

fn default_challenges() -> Vec<String> {
    vec!["tls-alpn-01".into(), "http-01".into()]
}

fn default_key_types() -> Vec<String> {
    vec!["ecdsa".into()]
}

fn default_renew_at() -> f64 {
    2.0 / 3.0
}

fn default_check_interval() -> Duration {
    Duration::from_secs(6 * 3600)
}

fn default_retry_min() -> Duration {
    Duration::from_secs(60)
}

fn default_retry_max() -> Duration {
    Duration::from_secs(6 * 3600)
}

fn default_lease() -> Duration {
    Duration::from_secs(30)
}

fn default_order_timeout() -> Duration {
    Duration::from_secs(300)
}
