//! Structured logs through tracing: text or JSON, filter from the config or `RUST_LOG`.
//!
//! `tlsgate serve` routes access-log lines (target `access`) apart from the rest: through the
//! non-blocking writer of [`crate::access_log`] to `[log] access_log_file` (or stderr), whatever
//! the level filter says (`[log] access_log` switches them on and off).

use crate::access_log::AccessLogError;
use std::io::IsTerminal;
use tlsgate_config::{LogConfig, LogFormat};
use tracing::Metadata;
use tracing_subscriber::filter::{filter_fn, FilterExt};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

type BoxedLayer = Box<dyn Layer<Registry> + Send + Sync>;

fn is_access(meta: &Metadata<'_>) -> bool {
    meta.target() == tlsgate_proxy::request::access_log::TARGET
}

fn fmt_layer<W>(format: LogFormat, writer: W, ansi: bool) -> BoxedLayer
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let layer = tracing_subscriber::fmt::layer().with_writer(writer).with_ansi(ansi);
    match format {
        LogFormat::Json => layer.json().flatten_event(true).boxed(),
        LogFormat::Text => layer.boxed(),
    }
}

fn install(log: &LogConfig, access: Option<BoxedLayer>) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&log.level));
    // Colour codes only for a person at a terminal, never into files or pipes.
    let main = fmt_layer(log.format, std::io::stderr, std::io::stderr().is_terminal())
        .with_filter(filter.and(filter_fn(|m| !is_access(m))))
        .boxed();
    let layers: Vec<BoxedLayer> = std::iter::once(main).chain(access).collect();
    let _ = tracing_subscriber::registry().with(layers).try_init();
}

/// Installs the global subscriber (once per process), for commands that serve no requests.
pub fn init(log: &LogConfig) {
    install(log, None);
}

/// Installs the global subscriber for `tlsgate serve`, with the access log; fails when
/// `[log] access_log_file` cannot be opened.
pub fn init_serve(log: &LogConfig) -> Result<(), AccessLogError> {
    let writer = crate::access_log::start(log.access_log_file.as_deref())?;
    let ansi = log.access_log_file.is_none() && std::io::stderr().is_terminal();
    let access = fmt_layer(log.format, writer, ansi)
        .with_filter(filter_fn(is_access))
        .boxed();
    install(log, Some(access));
    Ok(())
}
