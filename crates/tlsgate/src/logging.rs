//! Structured logs through tracing: text or JSON, filter from the config or `RUST_LOG`.

use tlsgate_config::{LogConfig, LogFormat};
use tracing_subscriber::EnvFilter;

/// Installs the global subscriber (once per process).
pub fn init(log: &LogConfig) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&log.level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match log.format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
}
