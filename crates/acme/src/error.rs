//! The one error type of the ACME client, classified for metrics and logs.

use tlsgate_error::{Classify, Side};

/// What went wrong talking to the CA or preparing what it needs.
#[derive(Debug, thiserror::Error)]
pub enum AcmeError {
    /// The CA could not be reached, or the connection failed.
    #[error("cannot reach the ACME server: {0}")]
    Transport(String),
    /// The CA answered with an ACME problem document (RFC 8555 §6.7).
    #[error("ACME server refused ({status}): {problem_type}: {detail}")]
    Problem {
        /// HTTP status.
        status: u16,
        /// `type`, e.g. `urn:ietf:params:acme:error:badNonce`.
        problem_type: String,
        /// `detail`.
        detail: String,
        /// Seconds from `Retry-After`, when sent.
        retry_after: Option<u64>,
    },
    /// The CA's answer did not parse or lacked something required.
    #[error("unexpected answer from the ACME server: {0}")]
    Malformed(String),
    /// An authorization or order ended invalid.
    #[error("{0}")]
    Invalid(String),
    /// None of the offered challenges can be answered with the configured types.
    #[error("no usable challenge for {0}")]
    NoChallenge(String),
    /// The order did not finish in time.
    #[error("timed out waiting for {0}")]
    Timeout(&'static str),
    /// A challenge could not be set up (DNS hook failed, ...).
    #[error("challenge setup failed: {0}")]
    Solver(String),
    /// Key, CSR or signature generation failed (BoringSSL).
    #[error("crypto: {0}")]
    Crypto(#[from] boring::error::ErrorStack),
    /// The account key or a local file could not be read or written.
    #[error("{0}")]
    Io(String),
}

impl AcmeError {
    /// The `Retry-After` seconds the CA asked for, if any.
    pub fn retry_after(&self) -> Option<u64> {
        match self {
            AcmeError::Problem { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// Whether this is the CA refusing our nonce (retried with the fresh one it sent).
    pub fn is_bad_nonce(&self) -> bool {
        matches!(self, AcmeError::Problem { problem_type, .. } if problem_type.ends_with(":badNonce"))
    }
}

impl Classify for AcmeError {
    fn side(&self) -> Side {
        match self {
            AcmeError::Transport(_)
            | AcmeError::Problem { .. }
            | AcmeError::Malformed(_)
            | AcmeError::Invalid(_)
            | AcmeError::Timeout(_) => Side::Upstream,
            AcmeError::NoChallenge(_) | AcmeError::Solver(_) => Side::Config,
            AcmeError::Crypto(_) | AcmeError::Io(_) => Side::Internal,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            AcmeError::Transport(_) => "acme_unreachable",
            AcmeError::Problem { problem_type, .. } if problem_type.ends_with(":rateLimited") => "acme_rate_limited",
            AcmeError::Problem { .. } => "acme_refused",
            AcmeError::Malformed(_) => "acme_malformed",
            AcmeError::Invalid(_) => "acme_invalid",
            AcmeError::NoChallenge(_) => "acme_no_challenge",
            AcmeError::Timeout(_) => "acme_timeout",
            AcmeError::Solver(_) => "acme_solver",
            AcmeError::Crypto(_) => "acme_crypto",
            AcmeError::Io(_) => "acme_io",
        }
    }

    fn retry_safe(&self) -> bool {
        // A new order repeats nothing the CA applied: every failure may be retried later.
        true
    }
}
