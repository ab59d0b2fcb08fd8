//! The node registry: each gateway heartbeats a [`NodeStatus`] with a TTL; the console lists the
//! live ones.
//!
//! A node's status is the string `node:ID` (JSON, expires after the TTL) and its id is a member
//! of the sorted set `nodes` (score: last heartbeat, Unix ms), so listing needs no `KEYS`/`SCAN`.
//! Ids whose status has expired are pruned from the set when listed.

use crate::store::ControlStore;
use crate::watcher::{RejectedVersion, WatchState};
use crate::{now_ms, ControlError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What a node reports about itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeStatus {
    /// Unique per node (e.g. hostname, or hostname:port).
    pub node_id: String,
    /// Where its admin listener answers (metrics, health), if reachable by the console.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_url: Option<String>,
    /// The document version it serves (`None`: only its static TOML).
    pub applied_version: Option<u64>,
    /// The last version it refused, if newer than the applied one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected: Option<RejectedVersion>,
    /// Its last control-store error, while the store is unreachable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_error: Option<String>,
    /// The tlsgate version it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub software: Option<String>,
    /// When it started (Unix ms).
    pub started_at: u64,
    /// Its last heartbeat (Unix ms; set by [`ControlStore::register_node`]).
    pub last_seen: u64,
    /// Anything else worth showing (health, counters), free-form.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, serde_json::Value>,
}

impl NodeStatus {
    /// A status for `node_id`, started now, nothing applied yet.
    pub fn new(node_id: impl Into<String>) -> Self {
        let now = now_ms();
        Self {
            node_id: node_id.into(),
            admin_url: None,
            applied_version: None,
            rejected: None,
            store_error: None,
            software: None,
            started_at: now,
            last_seen: now,
            extra: BTreeMap::new(),
        }
    }
}

impl NodeStatus {
    /// Copies what a [`Watcher`](crate::Watcher) knows: the applied version, the refused one
    /// and the store error.
    pub fn apply_watch_state(&mut self, state: &WatchState) {
        self.applied_version = state.current.as_ref().map(|v| v.version);
        self.rejected = state.rejected.clone();
        self.store_error = state.store_error.clone();
    }
}

/// Heartbeats `base` every `interval` with a TTL of three intervals, its watcher fields filled
/// from `state` ([`NodeStatus::apply_watch_state`]); also at once whenever `state` changes, so
/// the console sees a new or refused version without waiting. Failures are logged and retried
/// on the next beat. Abort the handle to stop (then the entry expires, or call
/// [`ControlStore::deregister_node`]).
pub fn spawn_heartbeat(
    store: ControlStore,
    base: NodeStatus,
    mut state: watch::Receiver<WatchState>,
    interval: Duration,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut watching = true;
        loop {
            let mut status = base.clone();
            status.apply_watch_state(&state.borrow_and_update());
            if let Err(e) = store.register_node(&status, interval * 3).await {
                tracing::debug!(error = %e, "control: heartbeat failed");
            }
            let beat = tokio::time::sleep(interval);
            tokio::select! {
                changed = state.changed(), if watching => watching = changed.is_ok(),
                _ = beat => {}
            }
        }
    })
}

impl ControlStore {
    /// Heartbeat: stores `status` (with `last_seen` set to now) for `ttl`. Call it well within
    /// the TTL (e.g. every TTL/3); a node that stops doing so disappears from
    /// [`nodes`](Self::nodes) when its TTL expires.
    pub async fn register_node(&self, status: &NodeStatus, ttl: Duration) -> Result<(), ControlError> {
        if status.node_id.is_empty() {
            return Err(ControlError::Invalid(vec!["node_id is empty".into()]));
        }
        let now = now_ms();
        let mut status = status.clone();
        status.last_seen = now;
        let json = serde_json::to_string(&status).expect("a node status always serialises");
        let ttl_ms = ttl.as_millis().max(1) as u64;
        let keys = self.keys();
        // One MULTI transaction of plain SET and ZADD: a gateway's ACL needs no EVAL.
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("SET")
            .arg(keys.node(&status.node_id))
            .arg(json)
            .arg("PX")
            .arg(ttl_ms)
            .ignore()
            .cmd("ZADD")
            .arg(keys.nodes())
            .arg(now)
            .arg(&status.node_id)
            .ignore();
        let () = self.run_pipe(&pipe).await?;
        Ok(())
    }

    /// Removes a node at once (clean shutdown).
    pub async fn deregister_node(&self, node_id: &str) -> Result<(), ControlError> {
        let keys = self.keys();
        let _: i64 = self.run(redis::cmd("DEL").arg(keys.node(node_id))).await?;
        let _: i64 = self.run(redis::cmd("ZREM").arg(keys.nodes()).arg(node_id)).await?;
        Ok(())
    }

    /// The live nodes (heartbeat within their TTL), sorted by id. Unreadable statuses are
    /// skipped; expired ids are pruned.
    pub async fn nodes(&self) -> Result<Vec<NodeStatus>, ControlError> {
        let keys = self.keys();
        let ids: Vec<String> = self.run(redis::cmd("ZRANGE").arg(keys.nodes()).arg(0).arg(-1)).await?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let names: Vec<String> = ids.iter().map(|id| keys.node(id)).collect();
        let raws: Vec<Option<String>> = self.run(redis::cmd("MGET").arg(&names)).await?;
        let mut live = Vec::new();
        let mut gone = Vec::new();
        for (id, raw) in ids.into_iter().zip(raws) {
            match raw {
                Some(text) => match serde_json::from_str::<NodeStatus>(&text) {
                    Ok(s) => live.push(s),
                    Err(e) => tracing::warn!(node = %id, error = %e, "control: unreadable node status"),
                },
                None => gone.push(id),
            }
        }
        if !gone.is_empty() {
            let _: i64 = self.run(redis::cmd("ZREM").arg(keys.nodes()).arg(&gone)).await?;
        }
        live.sort_by(|a, b| a.node_id.cmp(&b.node_id));
        Ok(live)
    }
}
