//! `[log]`: log format and level, and where the access log goes.

use serde::Deserialize;
use std::path::PathBuf;

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
    /// Add the connection's JA4 TLS fingerprint to access-log lines (field `ja4`).
    pub access_log_ja4: bool,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            format: LogFormat::Text,
            level: "info".into(),
            access_log: true,
            access_log_file: None,
            access_log_ja4: false,
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
