//! `tlsgate keyserver --config F`: the key server's TOML file (docs/KEYLESS.md documents it).

use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use tlsgate_error::{Classify, Side};

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
    /// Delegated credentials (RFC 9345) issued to gateways (`[delegation]`).
    #[serde(default)]
    pub delegation: DelegationConfig,
    /// Keys created on request for gateways' ACME orders (`[new_keys]`); none when absent.
    #[serde(default)]
    pub new_keys: Option<NewKeysConfig>,
}

/// `[new_keys]`: where keys created for gateways (keyless certificates through ACME) are kept.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewKeysConfig {
    /// Directory of the created keys (made, mode 0700, when missing; loaded at start).
    pub dir: PathBuf,
    /// Most keys one gateway identity may have created.
    #[serde(default = "default_max_per_client")]
    pub max_per_client: usize,
}

fn default_max_per_client() -> usize {
    20
}

/// `[delegation]`: whether the key server issues delegated credentials, and for how long.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DelegationConfig {
    /// Issue credentials (`delegate` requests); off: they are answered `refused`.
    #[serde(default)]
    pub enabled: bool,
    /// Longest remaining validity of a credential issued (at most 7 days, RFC 9345 §4.1.3).
    #[serde(default = "default_max_validity")]
    pub max_validity: tlsgate_config::Duration,
}

impl Default for DelegationConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            max_validity: default_max_validity(),
        }
    }
}

fn default_max_validity() -> tlsgate_config::Duration {
    tlsgate_config::Duration::from_secs(crate::delegation::DEFAULT_MAX_VALIDITY.as_secs())
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

/// Why the key server's configuration file was refused.
#[derive(Debug, thiserror::Error)]
pub enum ServerConfigError {
    /// The file cannot be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Not valid TOML, or not this model (unknown or missing fields, wrong types).
    #[error("{}: {source}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The TOML error (it names the field and the line).
        #[source]
        source: toml::de::Error,
    },
    /// A client identity that is neither `cn:NAME` nor `spki:<64 hex digits>`.
    #[error("{}: {at}: {identity:?} is neither cn:NAME nor spki:<64 hex digits>", path.display())]
    Identity {
        /// The file.
        path: PathBuf,
        /// Where (`allowed_clients[0]`, `client[1].identity`).
        at: String,
        /// The identity as written.
        identity: String,
    },
    /// `[delegation] max_validity` is zero or longer than RFC 9345's seven days.
    #[error("{}: delegation.max_validity: {value:?} is not between 1 s and 7 days (RFC 9345 §4.1.3)", path.display())]
    DelegationValidity {
        /// The file.
        path: PathBuf,
        /// The value.
        value: std::time::Duration,
    },
    /// `keys` is empty.
    #[error("{}: keys: at least one key file or directory is required", path.display())]
    NoKeys {
        /// The file.
        path: PathBuf,
    },
}

impl Classify for ServerConfigError {
    fn side(&self) -> Side {
        Side::Config
    }
    fn kind(&self) -> &'static str {
        match self {
            ServerConfigError::Read { .. } => "config_unreadable",
            ServerConfigError::Parse { .. } => "config_parse",
            ServerConfigError::Identity { .. } => "config_identity",
            ServerConfigError::NoKeys { .. } => "config_no_keys",
            ServerConfigError::DelegationValidity { .. } => "config_delegation_validity",
        }
    }
}

impl KeyServerConfig {
    /// Reads and parses `path`; relative paths are resolved against its directory.
    pub fn load(path: &Path) -> Result<Self, ServerConfigError> {
        let file = || path.to_path_buf();
        let text = std::fs::read_to_string(path).map_err(|source| ServerConfigError::Read { path: file(), source })?;
        let mut c: Self = toml::from_str(&text).map_err(|source| ServerConfigError::Parse { path: file(), source })?;
        let base = path.parent().unwrap_or(Path::new("."));
        for p in c
            .keys
            .iter_mut()
            .chain([&mut c.certificate, &mut c.key, &mut c.client_ca])
            .chain(c.new_keys.as_mut().map(|n| &mut n.dir))
        {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        }
        let identities = c
            .allowed_clients
            .iter()
            .enumerate()
            .map(|(i, id)| (format!("allowed_clients[{i}]"), id))
            .chain(
                c.clients
                    .iter()
                    .enumerate()
                    .map(|(i, client)| (format!("client[{i}].identity"), &client.identity)),
            );
        for (at, identity) in identities {
            if !valid_identity(identity) {
                return Err(ServerConfigError::Identity {
                    path: file(),
                    at,
                    identity: identity.clone(),
                });
            }
        }
        if c.keys.is_empty() {
            return Err(ServerConfigError::NoKeys { path: file() });
        }
        let max = tlsgate_wire::delegated_credential::MAX_VALIDITY_SECS;
        if c.delegation.max_validity.get().as_secs() > max || c.delegation.max_validity.get().is_zero() {
            return Err(ServerConfigError::DelegationValidity {
                path: file(),
                value: c.delegation.max_validity.get(),
            });
        }
        Ok(c)
    }
}
