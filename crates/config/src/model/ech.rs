//! `[ech]`: Encrypted ClientHello. The keys are not configured: each epoch's X25519 key is
//! derived from the cluster secret (`[cluster] secret_files`), so every node of a cluster serves
//! the same ECHConfigs with no key store (docs/ECH.md).

use crate::duration::Duration;
use serde::Deserialize;

/// `[ech]`
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct EchConfig {
    /// Accept Encrypted ClientHello (off: the section is kept but no ECH key is installed).
    #[serde(default = "default_enabled")]
    pub enabled: bool,
    /// The name in the outer (clear) ClientHello of ECH clients, and the name whose certificate
    /// authenticates retry configs: one of the sites' `server_names` (not a wildcard).
    pub public_name: String,
    /// How long each epoch's ECH key is the current one; a node accepts the previous, current and
    /// next epochs' configs and sends the current one as retry config. Same on every node.
    #[serde(default = "default_rotation")]
    pub rotation: Duration,
    /// `maximum_name_length` of the ECHConfig: clients pad the inner name to it (the longest
    /// name served). Part of the published config, so the same on every node.
    #[serde(default = "default_max_name_length")]
    pub max_name_length: u8,
    /// Command (program and arguments, no shell) run when the epoch changes, with the new
    /// ECHConfigList (base64) appended as last argument and in `TLSGATE_ECH_CONFIG_LIST`.
    #[serde(default)]
    pub hook: Vec<String>,
}

fn default_enabled() -> bool {
    true
}
fn default_rotation() -> Duration {
    Duration::from_secs(3600)
}
fn default_max_name_length() -> u8 {
    64
}
