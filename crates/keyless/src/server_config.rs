//! `tlsgate keyserver --config F`: the key server's TOML file (docs/KEYLESS.md documents it).

use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The key server's configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyServerConfig {
    /// Address of the mutual-TLS listener for gateways.
    pub listen: SocketAddr,
    /// Admin listener (`GET /metrics`, `GET /healthz`); none when absent.
    #[serde(default)]
    pub admin: Option<SocketAddr>,
    /// Private-key files, or directories whose files holding a PEM private key are all loaded.
    pub keys: Vec<PathBuf>,
    /// PEM chain the key server presents to gateways.
    pub certificate: PathBuf,
    /// Private key of `certificate`.
    pub key: PathBuf,
    /// PEM CA bundle that gateways' client certificates must chain to.
    pub client_ca: PathBuf,
    /// When non-empty, only these client identities are served: `cn:NAME` (subject common
    /// name) or `spki:HEX` (SHA-256 of the client certificate's SubjectPublicKeyInfo).
    #[serde(default)]
    pub allowed_clients: Vec<String>,
    /// Signing threads; 0 = one per core.
    #[serde(default)]
    pub workers: usize,
    /// Signing requests waiting for a thread beyond which requests are answered `overloaded`.
    #[serde(default = "default_queue")]
    pub queue: usize,
    /// Log filter (`RUST_LOG` overrides it).
    #[serde(default = "default_log")]
    pub log_level: String,
    /// A frame that has started must arrive completely within this time, or the connection is
    /// closed (a stalled peer cannot pin a connection half-way through a frame).
    #[serde(default = "default_frame_timeout")]
    pub frame_timeout: tlsgate_config::Duration,
    /// Per-client key permissions (`[[client]]` tables). None: every client that is let in may
    /// use every key (logged as a warning at start).
    #[serde(default, rename = "client")]
    pub clients: Vec<ClientKeys>,
}

/// One `[[client]]` table: the keys a gateway identity may sign with.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientKeys {
    /// The gateway's identity, as in `allowed_clients`: `cn:NAME` or `spki:HEX`.
    pub identity: String,
    /// Keys it may use: a key's name (its file name without the extension) or its id (64 hex
    /// digits, the SHA-256 of its SubjectPublicKeyInfo, as logged at start).
    pub keys: Vec<String>,
}

/// Whether `id` is `cn:NAME` or `spki:<64 hex digits>`.
fn valid_identity(id: &str) -> bool {
    id.strip_prefix("cn:").is_some_and(|n| !n.is_empty())
        || id
            .strip_prefix("spki:")
            .is_some_and(|h| h.len() == 64 && h.chars().all(|c| c.is_ascii_hexdigit()))
}

fn default_frame_timeout() -> tlsgate_config::Duration {
    tlsgate_config::Duration::from_secs(10)
}

fn default_queue() -> usize {
    1024
}
fn default_log() -> String {
    "info".into()
}

impl KeyServerConfig {
    /// Reads and parses `path`; relative paths are resolved against its directory.
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut c: Self = toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        for p in c
            .keys
            .iter_mut()
            .chain([&mut c.certificate, &mut c.key, &mut c.client_ca])
        {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        }
        for (i, id) in c.allowed_clients.iter().enumerate() {
            if !valid_identity(id) {
                return Err(format!(
                    "{}: allowed_clients[{i}]: {id:?} is neither cn:NAME nor spki:<64 hex digits>",
                    path.display()
                ));
            }
        }
        for (i, client) in c.clients.iter().enumerate() {
            if !valid_identity(&client.identity) {
                return Err(format!(
                    "{}: client[{i}].identity: {:?} is neither cn:NAME nor spki:<64 hex digits>",
                    path.display(),
                    client.identity
                ));
            }
        }
        if c.keys.is_empty() {
            return Err(format!(
                "{}: keys: at least one key file or directory is required",
                path.display()
            ));
        }
        Ok(c)
    }
}
