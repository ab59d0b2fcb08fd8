//! What a server keeps of its origin connections: a stack of idle HTTP/1.1 connections, at most
//! one shared HTTP/2 connection, (for `auto`) what its ALPN chose, the PROXY header its group
//! sends, and the count of its open connections with their limit and queue ([`super::limit`]).
//! A leaf below `server`; `pool` uses it.
//!
//! With `send_proxy_protocol`, a connection is bound to the client it announced (the PROXY pair:
//! client address and the address the client connected to): an idle one is only taken by a
//! request of the same pair, and HTTP/2 connections are not shared at all (each request opens
//! its own), so that a connection that named client A never carries client B's requests.

use super::connect::{ProxyPair, Transport};
use super::exchange::H1Conn;
use super::limit::{ConnSlot, QueueError, Room, Slots};
use parking_lot::Mutex;
use std::sync::atomic::AtomicU8;
use std::sync::Arc;
use std::time::Instant;
use tlsgate_config::{SendProxyProtocol, UpstreamConfig};

/// What `auto` learnt of a server (0 until its first connection): `http/1.1` or `h2`.
pub(super) const LEARNT_H1: u8 = 1;
pub(super) const LEARNT_H2: u8 = 2;

/// One server's connections.
pub struct ServerConns {
    pub(super) idle: Mutex<Vec<Idle>>,
    pub(super) h2: Mutex<Option<super::h2_origin::H2Sender>>,
    /// Held while a shared HTTP/2 connection is being opened: requests that find none wait for
    /// that one instead of each opening their own.
    pub(super) h2_dial: tokio::sync::Mutex<()>,
    pub(super) learnt: AtomicU8,
    /// The PROXY header every new connection starts with (`Off`: none).
    pub(super) proxy: SendProxyProtocol,
    /// Open connections, their limit and queue.
    pub(super) slots: Arc<Slots<ProxyPair, Idle>>,
}

impl Default for ServerConns {
    fn default() -> Self {
        Self {
            idle: Mutex::default(),
            h2: Mutex::default(),
            h2_dial: tokio::sync::Mutex::new(()),
            learnt: AtomicU8::new(0),
            proxy: SendProxyProtocol::Off,
            slots: Arc::new(Slots::unlimited()),
        }
    }
}

impl std::fmt::Debug for ServerConns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConns")
            .field("idle", &self.idle.lock().len())
            .field("open", &self.slots.open())
            .finish_non_exhaustive()
    }
}

/// An idle HTTP/1.1 connection, since when it is idle, and the PROXY pair it announced.
pub(super) struct Idle {
    pub(super) since: Instant,
    pub(super) conn: H1Conn<Transport>,
    pub(super) key: Option<ProxyPair>,
}

impl ServerConns {
    /// The connections of a server of the group `config`.
    pub fn for_group(config: &UpstreamConfig) -> Self {
        Self {
            proxy: config.send_proxy_protocol,
            slots: Arc::new(Slots::new(
                config.max_connections_per_server,
                config.max_queue_per_server,
                config.queue_timeout.get(),
            )),
            ..Self::default()
        }
    }

    /// True when the group sends PROXY headers (requests then bring their pair).
    pub fn sends_proxy(&self) -> bool {
        self.proxy != SendProxyProtocol::Off
    }

    /// The newest idle HTTP/1.1 connection that `key`'s requests may use.
    pub(super) fn pop_idle(&self, key: Option<&ProxyPair>) -> Option<Idle> {
        pop_matching(&mut self.idle.lock(), key)
    }

    /// Puts a connection back: to a request waiting in the queue that may use it, else on the
    /// idle stack (at most `max_idle`: the oldest goes, as the likeliest to have been closed by
    /// the origin).
    pub(super) fn check_in(&self, idle: Idle, max_idle: usize) {
        let key = idle.key;
        self.slots.check_in(key, idle, |idle| {
            let mut stack = self.idle.lock();
            if stack.len() >= max_idle {
                stack.remove(0);
            }
            stack.push(idle);
        });
    }

    /// The HTTP/2 connection shared by the server's requests; never one for requests that bring
    /// a PROXY pair.
    pub(super) fn shared_h2(&self, key: Option<&ProxyPair>) -> Option<super::h2_origin::H2Sender> {
        if key.is_some() {
            return None;
        }
        self.h2.lock().clone()
    }

    /// Keeps a new HTTP/2 connection for sharing, unless it announced a client.
    pub(super) fn share_h2(&self, key: Option<&ProxyPair>, sender: &super::h2_origin::H2Sender) {
        if key.is_none() {
            *self.h2.lock() = Some(sender.clone());
        }
    }

    /// True when new connections must ask the limit ([`ServerConns::room`]).
    pub(super) fn limited(&self) -> bool {
        self.slots.limited()
    }

    /// The slot of a new connection of a server without a limit.
    pub(super) fn counted(&self) -> ConnSlot {
        self.slots.counted()
    }

    /// Room for a request of `key` on a limited server: a slot for a new connection, or an
    /// idle connection it may use (waiting in the server's queue when at the limit); see
    /// [`Slots::room`]. `count` is told how a wait ended.
    pub(super) async fn room(
        &self,
        key: Option<&ProxyPair>,
        deadline: &mut Option<tokio::time::Instant>,
        count: &(dyn Fn(&'static str) + Sync),
    ) -> Result<Room<Idle>, QueueError> {
        let take = |k: Option<&ProxyPair>| pop_matching(&mut self.idle.lock(), k);
        // The oldest idle connection: every one is another client's when this runs.
        let evict = |_: Option<&ProxyPair>| {
            let mut stack = self.idle.lock();
            (!stack.is_empty()).then(|| stack.remove(0))
        };
        self.slots.room(key.copied(), deadline, take, evict, count).await
    }

    /// Connections open now, the limit (0: none), requests waiting now.
    pub fn counts(&self) -> (usize, usize, usize) {
        (self.slots.open(), self.slots.max(), self.slots.queued())
    }
}

/// Takes the newest entry of `stack` bound to `key` (`None`: the newest of a group that sends
/// no PROXY header, where no entry has a key).
fn pop_matching(stack: &mut Vec<Idle>, key: Option<&ProxyPair>) -> Option<Idle> {
    match key {
        None => stack.pop(),
        Some(k) => {
            let i = stack.iter().rposition(|e| e.key.as_ref() == Some(k))?;
            Some(stack.remove(i))
        }
    }
}
