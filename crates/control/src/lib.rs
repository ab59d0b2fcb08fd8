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
//! - [`error`]: [`ControlError`], what every store operation can fail with.
//!
//! See docs/CONTROL.md for the format, the Redis layout and the semantics.
#![forbid(unsafe_code)]

pub mod ctl;
pub mod diff;
pub mod document;
pub mod error;
pub mod history;
pub mod keys;
pub mod nodes;
pub mod store;
pub mod watcher;

pub use diff::{diff, Change, ChangeKind};
pub use document::{AccessRule, ClusterDocument, KeyServerPool, Member, SiteSwitches, UpstreamGroup};
pub use error::{ControlError, StoreConfigError};
pub use history::HistoryEntry;
pub use keys::{Keys, StoreConfig};
pub use nodes::{spawn_heartbeat, NodeStatus};
pub use store::{ControlStore, Versioned};
pub use watcher::{RejectedVersion, Validator, WatchConfig, WatchState, Watcher};

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
