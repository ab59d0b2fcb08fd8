//! [`ControlError`]: what the control store's operations fail with, and how each failure is
//! classified ([`tlsgate_error::Classify`]).

use tlsgate_error::{Classify, Side};

/// Errors of the control store.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// Someone else published since the caller read `expected`; re-read, re-apply, retry.
    #[error("conflict: expected current version {}, but it is {}", show(.expected), show(.current))]
    Conflict {
        /// The parent the caller expected.
        expected: Option<u64>,
        /// The version that is current in the store.
        current: Option<u64>,
    },
    /// The document fails validation (nothing was written).
    #[error("invalid document: {}", .0.join("; "))]
    Invalid(Vec<String>),
    /// No such version.
    #[error("version {0} does not exist")]
    NotFound(u64),
    /// A stored value cannot be read (not JSON, wrong shape, not a number).
    #[error("stored value {key} is unreadable: {reason}")]
    Corrupt {
        /// The Redis key.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Redis answered with an error or the connection failed.
    #[error("store: {0}")]
    Store(#[from] redis::RedisError),
    /// Redis did not answer in time.
    #[error("store did not answer within {0:?}")]
    Timeout(std::time::Duration),
    /// Bad [`StoreConfig`](crate::StoreConfig) (URL, cluster name).
    #[error("control store configuration: {0}")]
    Config(#[from] StoreConfigError),
}

/// What is wrong with a [`StoreConfig`](crate::StoreConfig).
#[derive(Debug, thiserror::Error)]
pub enum StoreConfigError {
    /// The cluster name cannot be part of the key names.
    #[error("cluster name {0:?} must be non-empty A-Z a-z 0-9 . _ -")]
    ClusterName(String),
    /// The Redis URL is not one the client accepts.
    #[error("{0}")]
    Url(#[source] redis::RedisError),
}

impl Classify for ControlError {
    fn side(&self) -> Side {
        match self {
            ControlError::Conflict { .. } | ControlError::Invalid(_) | ControlError::NotFound(_) => Side::Downstream,
            ControlError::Corrupt { .. } | ControlError::Store(_) | ControlError::Timeout(_) => Side::Upstream,
            ControlError::Config(_) => Side::Config,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            ControlError::Conflict { .. } => "conflict",
            ControlError::Invalid(_) => "invalid_document",
            ControlError::NotFound(_) => "not_found",
            ControlError::Corrupt { .. } => "corrupt_record",
            ControlError::Store(_) => "store",
            ControlError::Timeout(_) => "store_timeout",
            ControlError::Config(_) => "store_config",
        }
    }

    // Not retry-safe, even a store failure: a publish whose answer was lost may have been
    // applied. A conflict is resolved by re-reading and re-applying (`ctl::edit_members`), not by
    // repeating the same request.
}

fn show(v: &Option<u64>) -> String {
    v.map_or_else(|| "none".into(), |v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        let conflict = ControlError::Conflict {
            expected: None,
            current: Some(3),
        };
        assert_eq!(
            conflict.to_string(),
            "conflict: expected current version none, but it is 3"
        );
        assert_eq!(
            (conflict.side(), conflict.kind(), conflict.retry_safe()),
            (Side::Downstream, "conflict", false)
        );
        let timeout = ControlError::Timeout(std::time::Duration::from_secs(1));
        assert_eq!((timeout.side(), timeout.kind()), (Side::Upstream, "store_timeout"));
        let name = ControlError::from(StoreConfigError::ClusterName("a}b".into()));
        assert_eq!((name.side(), name.kind()), (Side::Config, "store_config"));
        assert_eq!(
            name.to_string(),
            "control store configuration: cluster name \"a}b\" must be non-empty A-Z a-z 0-9 . _ -"
        );
        let url = redis::Client::open("nope://x")
            .map_err(StoreConfigError::Url)
            .unwrap_err();
        let url = ControlError::from(url);
        assert_eq!(url.side(), Side::Config);
        let source = std::error::Error::source(&url).expect("the URL problem");
        let redis_error = source.source().and_then(|e| e.downcast_ref::<redis::RedisError>());
        assert!(redis_error.is_some(), "the redis error is kept as the source");
        assert!(url.to_string().starts_with("control store configuration: "), "{url}");
    }
}
