//! tlsgate's control plane store (issue #8): the cluster's dynamic configuration document,
//! kept in Redis, versioned, with history, diff, rollback, change notification and a node
//! registry. The gateway watches it; the console and `tlsgate ctl` edit it.
//!
//! - [`document`]: [`ClusterDocument`] (key-server pools, upstream groups, site switches) and its
//!   structural validation; callers add semantic checks with [`ClusterDocument::validate_with`].
//! - [`mod@diff`]: [`diff()`](diff::diff()) between two documents as [`Change`]s with JSON-pointer-like
//!   paths, and a text rendering.
//! - [`store`]: [`ControlStore`]: [`publish`](ControlStore::publish) with optimistic
//!   concurrency (an atomic Lua script; [`ControlError::Conflict`] when someone else published
//!   first), [`get`](ControlStore::get), [`current`](ControlStore::current),
//!   [`history`](ControlStore::history) (with diffs), [`rollback`](ControlStore::rollback)
//!   (a new version equal to an old one).
//! - [`keys`]: [`StoreConfig`] and the key layout; [`history`]: [`HistoryEntry`].
//! - [`nodes`]: the node registry ([`NodeStatus`], heartbeats with a TTL, [`spawn_heartbeat`]).
//! - [`watcher`]: [`Watcher`], a task that follows the current version through pub/sub with
//!   polling as fallback, refuses invalid versions and keeps the last good one.
//! - [`ctl`]: the operations behind `tlsgate ctl` (show, history, publish, rollback, member edits).
//!
//! See docs/CONTROL.md for the format, the Redis layout and the semantics.
#![forbid(unsafe_code)]

pub mod ctl;
pub mod diff;
pub mod document;
pub mod history;
pub mod keys;
pub mod nodes;
pub mod store;
pub mod watcher;

pub use diff::{diff, Change, ChangeKind};
pub use document::{ClusterDocument, KeyServerPool, Member, SiteSwitches, UpstreamGroup};
pub use history::HistoryEntry;
pub use keys::{Keys, StoreConfig};
pub use nodes::{spawn_heartbeat, NodeStatus, RejectedVersion};
pub use store::{ControlStore, Versioned};
pub use watcher::{Validator, WatchConfig, WatchState, Watcher};

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
    /// Bad [`StoreConfig`] (URL, cluster name).
    #[error("control store configuration: {0}")]
    Config(String),
}

fn show(v: &Option<u64>) -> String {
    v.map_or_else(|| "none".into(), |v| v.to_string())
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
