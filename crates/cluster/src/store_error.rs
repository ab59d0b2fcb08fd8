//! [`StoreError`]: how a shared-store operation failed — what went wrong ([`StoreFailure`]),
//! against which store and server, and the client library's own error as the source.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tlsgate_error::{Classify, Side};

/// What went wrong with a store operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreFailure {
    /// The client could not be set up from the configuration (a malformed URL, no server).
    Invalid,
    /// No connection is open yet (one is being made in the background): failed at once.
    NotConnected,
    /// Connecting took longer than the timeout.
    ConnectTimeout,
    /// Connecting failed: refused, unreachable, or the store refused the session (auth, TLS).
    Connect,
    /// The store did not answer within the I/O timeout (the connection is dropped as hung).
    Timeout,
    /// The connection broke during the operation.
    ConnectionLost,
    /// The store answered with an error, or with something the protocol does not allow.
    Command,
    /// The task that ran the operation failed (panicked, or was cancelled at shutdown).
    Task,
}

impl StoreFailure {
    /// A short, stable label (the [`Classify::kind`] of errors of this failure).
    pub fn as_str(self) -> &'static str {
        match self {
            StoreFailure::Invalid => "store_config",
            StoreFailure::NotConnected => "store_not_connected",
            StoreFailure::ConnectTimeout => "store_connect_timeout",
            StoreFailure::Connect => "store_connect",
            StoreFailure::Timeout => "store_timeout",
            StoreFailure::ConnectionLost => "store_connection_lost",
            StoreFailure::Command => "store_command",
            StoreFailure::Task => "store_task",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            StoreFailure::Invalid => "invalid configuration",
            StoreFailure::NotConnected => "not connected",
            StoreFailure::ConnectTimeout => "connect timed out",
            StoreFailure::Connect => "connect failed",
            StoreFailure::Timeout => "no answer in time",
            StoreFailure::ConnectionLost => "connection lost",
            StoreFailure::Command => "command failed",
            StoreFailure::Task => "operation task failed",
        }
    }
}

/// The client library's error under a [`StoreError`].
#[derive(Debug, thiserror::Error)]
pub enum StoreSource {
    /// From the `redis` crate.
    #[error(transparent)]
    Redis(#[from] redis::RedisError),
    /// From the `async-memcached` crate.
    #[error(transparent)]
    Memcached(#[from] async_memcached::Error),
    /// The operation's task did not finish.
    #[error(transparent)]
    Task(#[from] tokio::task::JoinError),
}

/// A store failure: what went wrong, the store (`redis`, `memcached`) and server it concerns,
/// the timeout that ran out (for timeouts), and the client library's error where there is one.
///
/// Its message names all of them, e.g. `redis redis://10.0.0.5:6379: no answer within 100ms`
/// or `memcached tcp://10.0.0.7:11211: connect failed: Connection refused (os error 111)`.
#[derive(Debug, thiserror::Error)]
#[error("{store} {server}: {}{}", Reason(self), Source(.source.as_ref()))]
pub struct StoreError {
    failure: StoreFailure,
    store: &'static str,
    server: Arc<str>,
    timeout: Option<Duration>,
    #[source]
    source: Option<StoreSource>,
}

impl StoreError {
    /// A `failure` of `store` (`redis`, `memcached`) at `server` (an address, never credentials).
    pub fn new(failure: StoreFailure, store: &'static str, server: Arc<str>) -> Self {
        Self {
            failure,
            store,
            server,
            timeout: None,
            source: None,
        }
    }

    /// Attaches the client library's error.
    pub fn with_source(mut self, source: impl Into<StoreSource>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// Records the timeout that ran out.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// What went wrong.
    pub fn failure(&self) -> StoreFailure {
        self.failure
    }

    /// `redis` or `memcached`.
    pub fn store(&self) -> &'static str {
        self.store
    }

    /// The server (or servers) concerned, as shown in logs.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The timeout that ran out, for timeouts.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }
}

impl Classify for StoreError {
    fn side(&self) -> Side {
        match self.failure {
            StoreFailure::Invalid => Side::Config,
            StoreFailure::Task => Side::Internal,
            _ => Side::Upstream,
        }
    }

    fn kind(&self) -> &'static str {
        self.failure.as_str()
    }

    /// Every store operation is idempotent (get; set with TTL; add-if-absent, which a second
    /// time only reports the key present): retrying after a failure to reach the store, or
    /// after an answer that never came, cannot apply anything twice.
    fn retry_safe(&self) -> bool {
        matches!(
            self.failure,
            StoreFailure::NotConnected
                | StoreFailure::ConnectTimeout
                | StoreFailure::Connect
                | StoreFailure::Timeout
                | StoreFailure::ConnectionLost
        )
    }
}

/// What failed, with the timeout where one ran out.
struct Reason<'a>(&'a StoreError);

impl fmt::Display for Reason<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.0.failure, self.0.timeout) {
            (StoreFailure::Timeout, Some(t)) => write!(f, "no answer within {t:?}"),
            (StoreFailure::ConnectTimeout, Some(t)) => write!(f, "connect timed out after {t:?}"),
            (failure, _) => f.write_str(failure.describe()),
        }
    }
}

/// `: <source>`, or nothing.
struct Source<'a>(Option<&'a StoreSource>);

impl fmt::Display for Source<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(source) => write!(f, ": {source}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server() -> Arc<str> {
        Arc::from("tcp://127.0.0.1:11211")
    }

    #[test]
    fn the_message_names_the_store_the_server_and_the_cause() {
        let e = StoreError::new(StoreFailure::Timeout, "redis", Arc::from("redis://10.0.0.5:6379"))
            .with_timeout(Duration::from_millis(100));
        assert_eq!(e.to_string(), "redis redis://10.0.0.5:6379: no answer within 100ms");
        assert!(std::error::Error::source(&e).is_none());

        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let e = StoreError::new(StoreFailure::Connect, "memcached", server())
            .with_source(async_memcached::Error::Connect(io));
        assert!(
            e.to_string()
                .starts_with("memcached tcp://127.0.0.1:11211: connect failed: "),
            "{e}"
        );
        assert!(matches!(
            std::error::Error::source(&e).and_then(|s| s.downcast_ref::<StoreSource>()),
            Some(StoreSource::Memcached(_))
        ));
        assert_eq!((e.store(), e.server()), ("memcached", "tcp://127.0.0.1:11211"));
    }

    #[test]
    fn classification() {
        let class = |failure| {
            let e = StoreError::new(failure, "redis", server());
            (e.side(), e.kind(), e.retry_safe())
        };
        assert_eq!(class(StoreFailure::Invalid), (Side::Config, "store_config", false));
        assert_eq!(
            class(StoreFailure::NotConnected),
            (Side::Upstream, "store_not_connected", true)
        );
        assert_eq!(
            class(StoreFailure::ConnectTimeout),
            (Side::Upstream, "store_connect_timeout", true)
        );
        assert_eq!(class(StoreFailure::Connect), (Side::Upstream, "store_connect", true));
        assert_eq!(class(StoreFailure::Timeout), (Side::Upstream, "store_timeout", true));
        assert_eq!(
            class(StoreFailure::ConnectionLost),
            (Side::Upstream, "store_connection_lost", true)
        );
        assert_eq!(class(StoreFailure::Command), (Side::Upstream, "store_command", false));
        assert_eq!(class(StoreFailure::Task), (Side::Internal, "store_task", false));
        assert_eq!(
            StoreError::new(StoreFailure::ConnectTimeout, "memcached", server())
                .with_timeout(Duration::from_secs(1))
                .to_string(),
            "memcached tcp://127.0.0.1:11211: connect timed out after 1s"
        );
    }
}
