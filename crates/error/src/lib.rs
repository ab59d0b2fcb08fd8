//! What every tlsgate error says about itself, in the manner of pingora's error crate.
//!
//! Each crate keeps its own error enum (`thiserror`), and every such enum implements
//! [`Classify`]: which side of the gateway the failure came from ([`Side`]), whether the
//! operation may be retried without applying it twice, and a short stable `kind` that metric
//! labels and access-log fields use. Callers branch on those, never on message text.
//!
//! Where a crate needs no enum of its own (a command-line tool, a one-off setup step),
//! [`Error`] carries the same facts plus a context line and the source error.
//!
//! [`log_limit`] keeps the log lines of failures that clients (or a dead peer) can repeat at will
//! to one a second, with the count of those left out.
//!
//! This crate depends on nothing: every other crate may use it.

#![forbid(unsafe_code)]

pub mod log_limit;

use std::borrow::Cow;
use std::fmt;

/// Which side of the gateway a failure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The client, a peer node or a caller of an API: malformed, hostile or abandoned input.
    Downstream,
    /// Something the gateway depends on: an origin, a key server, Redis, a CA, an OCSP responder.
    Upstream,
    /// The gateway itself: a bug, an exhausted resource, a failed system call.
    Internal,
    /// The operator's configuration or files: fixed by editing them, not by retrying.
    Config,
}

impl Side {
    /// A short label for metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Downstream => "downstream",
            Side::Upstream => "upstream",
            Side::Internal => "internal",
            Side::Config => "config",
        }
    }
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The facts every tlsgate error type gives about itself.
pub trait Classify: std::error::Error {
    /// Which side is at fault.
    fn side(&self) -> Side;
    /// A short, stable label (snake_case) for metrics and access-log fields.
    fn kind(&self) -> &'static str;
    /// True when repeating the operation (against the same or another server) cannot apply it
    /// twice and may succeed. Defaults to false: a retry must be argued for.
    fn retry_safe(&self) -> bool {
        false
    }
}

/// A boxed source error.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A general error: a side, a kind, retry safety, a context line and an optional source.
///
/// ```
/// use tlsgate_error::{Classify, Error, Side};
/// let e = Error::new(Side::Config, "config_read", "reading /etc/tlsgate.toml")
///     .with_source(std::io::Error::from(std::io::ErrorKind::NotFound));
/// assert_eq!(e.side(), Side::Config);
/// assert!(e.to_string().starts_with("reading /etc/tlsgate.toml: "));
/// ```
#[derive(Debug)]
pub struct Error {
    side: Side,
    kind: &'static str,
    retry_safe: bool,
    context: Cow<'static, str>,
    source: Option<BoxError>,
}

impl Error {
    /// An error of `side` and `kind`, described by `context`.
    pub fn new(side: Side, kind: &'static str, context: impl Into<Cow<'static, str>>) -> Self {
        Error {
            side,
            kind,
            retry_safe: false,
            context: context.into(),
            source: None,
        }
    }

    /// Attaches the error that caused this one.
    pub fn with_source(mut self, source: impl Into<BoxError>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// Marks the operation as safe to retry.
    pub fn retryable(mut self) -> Self {
        self.retry_safe = true;
        self
    }

    /// The context line alone, without the source.
    pub fn context(&self) -> &str {
        &self.context
    }

    /// Wraps any classified error, keeping its side, kind and retry safety, under a new context.
    pub fn wrap<E: Classify + Send + Sync + 'static>(context: impl Into<Cow<'static, str>>, err: E) -> Self {
        Error {
            side: err.side(),
            kind: err.kind(),
            retry_safe: err.retry_safe(),
            context: context.into(),
            source: Some(Box::new(err)),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.context)?;
        if let Some(source) = &self.source {
            write!(f, ": {source}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|s| s as &(dyn std::error::Error + 'static))
    }
}

impl Classify for Error {
    fn side(&self) -> Side {
        self.side
    }
    fn kind(&self) -> &'static str {
        self.kind
    }
    fn retry_safe(&self) -> bool {
        self.retry_safe
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_chains_the_source_and_keeps_the_class() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let e = Error::new(Side::Upstream, "store_connect", "connecting to redis 127.0.0.1:6379")
            .with_source(io)
            .retryable();
        assert_eq!(e.to_string(), "connecting to redis 127.0.0.1:6379: refused");
        assert_eq!(e.side(), Side::Upstream);
        assert_eq!(e.kind(), "store_connect");
        assert!(e.retry_safe());
        assert!(std::error::Error::source(&e).is_some());
    }

    #[test]
    fn wrapping_keeps_side_kind_and_retry() {
        let inner = Error::new(Side::Downstream, "bad_frame", "bad frame");
        let outer = Error::wrap("reading request 7", inner);
        assert_eq!(outer.side(), Side::Downstream);
        assert_eq!(outer.kind(), "bad_frame");
        assert!(!outer.retry_safe());
        assert_eq!(outer.to_string(), "reading request 7: bad frame");
        assert_eq!(Side::Config.to_string(), "config");
    }
}
