//! The gateway side's errors: why a signature failed ([`SignError`]; its `kind` is the `result`
//! label of `tlsgate_keyless_attempts_total`) and why a client could not start
//! ([`ClientError`]).

use crate::codec::ErrorCode;
use crate::members::MembersError;
use crate::tls_setup::TlsSetupError;
use std::time::Duration;
use tlsgate_error::{Classify, Side};

/// Why a signature (or one attempt of it, on one key server) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignError {
    /// No key server of the pool has a live connection.
    #[error("no key server is reachable")]
    NoServer,
    /// The connection closed before the request could be sent.
    #[error("{server}: connection closed")]
    Closed {
        /// `host:port`.
        server: String,
    },
    /// The connection died while the request was in flight.
    #[error("{server}: connection lost")]
    Lost {
        /// `host:port`.
        server: String,
    },
    /// No answer within `request_timeout`.
    #[error("{server}: timed out after {timeout:?}")]
    Timeout {
        /// `host:port`.
        server: String,
        /// The limit.
        timeout: Duration,
    },
    /// The key server could not sign now (overloaded, internal error, …): another may.
    #[error("{server}: answered {code}")]
    Failed {
        /// `host:port`.
        server: String,
        /// Its answer.
        code: ErrorCode,
    },
    /// The key server answered a sign request with something other than a signature.
    #[error("{server}: unexpected answer to a sign request")]
    Unexpected {
        /// `host:port`.
        server: String,
    },
    /// The key server will not sign this: unknown key, algorithm not supported by the key, or
    /// refused by policy. Every server of the pool would answer the same: not retried.
    #[error("key server {server} answered {code} for key {key}")]
    Refused {
        /// `host:port`.
        server: String,
        /// `unknown_key`, `unsupported_algorithm` or `refused`.
        code: ErrorCode,
        /// The key id, in hex.
        key: String,
    },
}

impl Classify for SignError {
    fn side(&self) -> Side {
        match self {
            // The certificate names a key its key servers do not hold: fix the keys or the
            // certificate.
            SignError::Refused {
                code: ErrorCode::UnknownKey,
                ..
            } => Side::Config,
            // The key server refused us (permissions, not a TLS signing input, an algorithm
            // the key cannot do).
            SignError::Refused { .. } => Side::Downstream,
            _ => Side::Upstream,
        }
    }

    /// The `result` label of the attempt: `connection_lost`, `timeout`, the key server's error
    /// code (`overloaded`, `unknown_key`, …), `other`, or `no_server` when no attempt was made.
    fn kind(&self) -> &'static str {
        match self {
            SignError::NoServer => "no_server",
            SignError::Closed { .. } | SignError::Lost { .. } => "connection_lost",
            SignError::Timeout { .. } => "timeout",
            SignError::Failed { code, .. } | SignError::Refused { code, .. } => code.as_str(),
            SignError::Unexpected { .. } => "other",
        }
    }

    /// A signature is idempotent: any failure but a refusal may be retried on another server.
    fn retry_safe(&self) -> bool {
        !matches!(self, SignError::Refused { .. })
    }
}

/// Why a key-server client could not start.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The `[keyless]` certificate, key or CA.
    #[error(transparent)]
    Tls(#[from] TlsSetupError),
    /// The pool's member list.
    #[error(transparent)]
    Members(#[from] MembersError),
}

impl Classify for ClientError {
    fn side(&self) -> Side {
        match self {
            ClientError::Tls(e) => e.side(),
            // Members given at start come from the configuration.
            ClientError::Members(_) => Side::Config,
        }
    }
    fn kind(&self) -> &'static str {
        match self {
            ClientError::Tls(e) => e.kind(),
            ClientError::Members(e) => e.kind(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_the_attempt_labels_and_refusals_are_final() {
        let server = || "ks:1".to_string();
        let cases = [
            (
                SignError::Closed { server: server() },
                "connection_lost",
                Side::Upstream,
                true,
            ),
            (
                SignError::Lost { server: server() },
                "connection_lost",
                Side::Upstream,
                true,
            ),
            (
                SignError::Timeout {
                    server: server(),
                    timeout: Duration::from_millis(5),
                },
                "timeout",
                Side::Upstream,
                true,
            ),
            (
                SignError::Failed {
                    server: server(),
                    code: ErrorCode::Overloaded,
                },
                "overloaded",
                Side::Upstream,
                true,
            ),
            (
                SignError::Unexpected { server: server() },
                "other",
                Side::Upstream,
                true,
            ),
            (SignError::NoServer, "no_server", Side::Upstream, true),
            (
                SignError::Refused {
                    server: server(),
                    code: ErrorCode::Refused,
                    key: "ab".into(),
                },
                "refused",
                Side::Downstream,
                false,
            ),
            (
                SignError::Refused {
                    server: server(),
                    code: ErrorCode::UnknownKey,
                    key: "ab".into(),
                },
                "unknown_key",
                Side::Config,
                false,
            ),
        ];
        for (e, kind, side, retry) in cases {
            assert_eq!((e.kind(), e.side(), e.retry_safe()), (kind, side, retry), "{e}");
        }
        let refused = SignError::Refused {
            server: server(),
            code: ErrorCode::UnknownKey,
            key: "ab".into(),
        };
        assert_eq!(refused.to_string(), "key server ks:1 answered unknown_key for key ab");
    }
}
