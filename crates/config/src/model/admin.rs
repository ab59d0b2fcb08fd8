//! `[admin]`: the admin listener (metrics, reload) and who may reach it.

use serde::Deserialize;
use std::net::SocketAddr;

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
