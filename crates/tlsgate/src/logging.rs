//! Structured logs through tracing: text or JSON, filter from the config or `RUST_LOG`.
//!
//! `tlsgate serve` routes access-log lines (target `access`) apart from the rest: through the
//! non-blocking writer of [`crate::access_log`] to `[log] access_log_file` (or stderr), whatever
//! the level filter says (`[log] access_log` switches them on and off).
//!
//! Both filters are static (an `EnvFilter` and a `Targets`), never closures: the subscriber's
//! maximum level is then known (the configured level, or INFO for the access log), each log
//! statement's interest is decided once per call site, and the `log` crate's maximum level —
//! which quiche's `trace!` records are checked against — follows it. With a closure filter
//! the maximum level was TRACE: every `trace!` of quiche went through `tracing-log` and every
//! disabled event was filtered again each time it ran.

use crate::access_log::AccessLogError;
use std::io::IsTerminal;
use tlsgate_config::{LogConfig, LogFormat};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

type BoxedLayer = Box<dyn Layer<Registry> + Send + Sync>;

/// Only access-log lines (target `access`, written at INFO). The level is part of the filter's
/// maximum level, and so of `log`'s: INFO keeps every quiche `debug!`/`trace!` out.
fn access_only() -> Targets {
    Targets::new().with_target(tlsgate_proxy::request::access_log::TARGET, LevelFilter::INFO)
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
    let _ = subscriber(log.format, filter, access).try_init();
}

/// The subscriber: the main log through `filter` and, for `serve`, the access log.
fn subscriber(
    format: LogFormat,
    filter: EnvFilter,
    access: Option<BoxedLayer>,
) -> impl tracing::Subscriber + Send + Sync {
    // Access-log lines never go to the main log (they have their own layer).
    let filter = match format!("{}=off", tlsgate_proxy::request::access_log::TARGET).parse() {
        Ok(directive) => filter.add_directive(directive),
        Err(_) => filter,
    };
    // Colour codes only for a person at a terminal, never into files or pipes.
    let main = fmt_layer(format, std::io::stderr, std::io::stderr().is_terminal())
        .with_filter(filter)
        .boxed();
    let layers: Vec<BoxedLayer> = std::iter::once(main).chain(access).collect();
    tracing_subscriber::registry().with(layers)
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
    let access = fmt_layer(log.format, writer, ansi).with_filter(access_only()).boxed();
    install(log, Some(access));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing::Subscriber;

    fn hint(level: &str) -> Option<LevelFilter> {
        let access = fmt_layer(LogFormat::Text, std::io::sink, false)
            .with_filter(access_only())
            .boxed();
        subscriber(LogFormat::Text, EnvFilter::new(level), Some(access)).max_level_hint()
    }

    /// The maximum level is known and no finer than needed (it becomes `log`'s maximum level:
    /// TRACE here would send every quiche `trace!` through `tracing-log`).
    #[test]
    fn the_subscriber_has_a_static_maximum_level() {
        assert_eq!(hint("warn"), Some(LevelFilter::INFO), "the access log's INFO");
        assert_eq!(hint("error"), Some(LevelFilter::INFO));
        assert_eq!(hint("debug"), Some(LevelFilter::DEBUG));
        assert_eq!(hint("tlsgate_proxy=trace"), Some(LevelFilter::TRACE));
    }
}
