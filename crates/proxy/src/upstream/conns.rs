//! What a server keeps of its origin connections: per worker, a stack of idle HTTP/1.1
//! connections and at most one shared HTTP/2 connection; (for `auto`) what its ALPN chose, the
//! PROXY header its group sends, and the count of its open connections with their limit and
//! queue ([`super::limit`], for all workers together). A leaf below `server`; `pool` uses it.
//!
//! Per worker ([`crate::worker_slot`]): a connection's socket belongs to the event loop of the
//! worker that opened it, and a request on another worker would have each of its reads reported
//! there first and passed on across threads. So a request takes its own worker's connections,
//! and only a request waiting at the server's connection limit takes another worker's idle one
//! (better than waiting for the limit).
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

/// One worker's connections to a server (a cache line of its own: workers never share one).
#[repr(align(128))]
pub(super) struct WorkerConns {
    pub(super) idle: Mutex<Vec<Idle>>,
    pub(super) h2: Mutex<Option<super::h2_origin::H2Sender>>,
    /// Held while the worker's shared HTTP/2 connection is being opened: its requests that find
    /// none wait for that one instead of each opening their own.
    pub(super) h2_dial: tokio::sync::Mutex<()>,
}

impl Default for WorkerConns {
    fn default() -> Self {
        Self {
            idle: Mutex::default(),
            h2: Mutex::default(),
            h2_dial: tokio::sync::Mutex::new(()),
        }
    }
}

/// One server's connections.
pub struct ServerConns {
    /// Per worker, indexed by [`crate::worker_slot::current`] (modulo their number).
    pub(super) workers: Box<[WorkerConns]>,
    pub(super) learnt: AtomicU8,
    /// The PROXY header every new connection starts with (`Off`: none).
    pub(super) proxy: SendProxyProtocol,
    /// Open connections, their limit and queue.
    pub(super) slots: Arc<Slots<ProxyPair, Idle>>,
}

impl Default for ServerConns {
    fn default() -> Self {
        Self {
            workers: (0..crate::worker_slot::workers())
                .map(|_| WorkerConns::default())
                .collect(),
            learnt: AtomicU8::new(0),
            proxy: SendProxyProtocol::Off,
            slots: Arc::new(Slots::unlimited()),
        }
    }
}

impl std::fmt::Debug for ServerConns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConns")
            .field("idle", &self.idle_count())
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

    /// The calling worker's connections.
    pub(super) fn local(&self) -> &WorkerConns {
        &self.workers[crate::worker_slot::current() % self.workers.len()]
    }

    /// Idle HTTP/1.1 connections kept, all workers together.
    pub(super) fn idle_count(&self) -> usize {
        self.workers.iter().map(|w| w.idle.lock().len()).sum()
    }

    /// The calling worker's newest idle HTTP/1.1 connection that `key`'s requests may use.
    pub(super) fn pop_idle(&self, key: Option<&ProxyPair>) -> Option<Idle> {
        pop_matching(&mut self.local().idle.lock(), key)
    }

    /// Puts a connection back: to a request waiting in the queue that may use it, else on the
    /// calling worker's idle stack (at most its share of `max_idle`: the oldest goes, as the
    /// likeliest to have been closed by the origin).
    pub(super) fn check_in(&self, idle: Idle, max_idle: usize) {
        let key = idle.key;
        let share = max_idle.div_ceil(self.workers.len()).max(1);
        self.slots.check_in(key, idle, |idle| {
            let mut stack = self.local().idle.lock();
            if stack.len() >= share {
                stack.remove(0);
            }
            stack.push(idle);
        });
    }

    /// The calling worker's HTTP/2 connection, shared by its requests to the server; never one
    /// for requests that bring a PROXY pair.
    pub(super) fn shared_h2(&self, key: Option<&ProxyPair>) -> Option<super::h2_origin::H2Sender> {
        if key.is_some() {
            return None;
        }
        self.local().h2.lock().clone()
    }

    /// Keeps a new HTTP/2 connection for the calling worker's sharing, unless it announced a
    /// client.
    pub(super) fn share_h2(&self, key: Option<&ProxyPair>, sender: &super::h2_origin::H2Sender) {
        if key.is_none() {
            *self.local().h2.lock() = Some(sender.clone());
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
        // At the limit a request takes what it may use from any worker, its own first.
        let take = |k: Option<&ProxyPair>| self.in_worker_order().find_map(|w| pop_matching(&mut w.idle.lock(), k));
        // The oldest idle connection: every one is another client's when this runs.
        let evict = |_: Option<&ProxyPair>| {
            self.in_worker_order().find_map(|w| {
                let mut stack = w.idle.lock();
                (!stack.is_empty()).then(|| stack.remove(0))
            })
        };
        self.slots.room(key.copied(), deadline, take, evict, count).await
    }

    /// Every worker's connections, the calling worker's first.
    fn in_worker_order(&self) -> impl Iterator<Item = &WorkerConns> {
        let n = self.workers.len();
        let own = crate::worker_slot::current() % n;
        (0..n).map(move |i| &self.workers[(own + i) % n])
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

#[cfg(test)]
mod tests {
    use super::{Idle, ServerConns, WorkerConns};
    use crate::upstream::exchange::H1Conn;
    use crate::worker_slot;
    use std::time::Instant;

    fn conns(workers: usize) -> ServerConns {
        ServerConns {
            workers: (0..workers).map(|_| WorkerConns::default()).collect(),
            ..ServerConns::default()
        }
    }

    /// An idle connection to a listener of the test's own.
    async fn idle(listener: &tokio::net::TcpListener) -> Idle {
        Idle {
            since: Instant::now(),
            conn: H1Conn::new(crate::upstream::connect::plain_to(listener).await),
            key: None,
        }
    }

    #[tokio::test]
    async fn a_worker_takes_only_the_idle_connections_it_gave_back() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let c = conns(2);
        worker_slot::enter(0);
        c.check_in(idle(&listener).await, 8);
        worker_slot::enter(1);
        assert!(c.pop_idle(None).is_none(), "worker 1 took worker 0's connection");
        c.check_in(idle(&listener).await, 8);
        assert_eq!(c.idle_count(), 2);
        assert!(c.pop_idle(None).is_some());
        assert!(c.pop_idle(None).is_none());
        worker_slot::enter(0);
        assert!(c.pop_idle(None).is_some(), "worker 0 lost its own connection");
        assert_eq!(c.idle_count(), 0);
    }

    #[tokio::test]
    async fn each_worker_keeps_its_share_of_max_idle() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let c = conns(2);
        worker_slot::enter(1);
        for _ in 0..3 {
            c.check_in(idle(&listener).await, 4);
        }
        assert_eq!(c.idle_count(), 2, "max_idle 4 over 2 workers: 2 each");
    }

    #[test]
    fn at_the_limit_the_search_starts_with_the_calling_worker() {
        let c = conns(3);
        worker_slot::enter(1);
        let order: Vec<*const WorkerConns> = c.in_worker_order().map(|w| w as *const _).collect();
        let expect: Vec<*const WorkerConns> = [1, 2, 0].iter().map(|&i| &c.workers[i] as *const _).collect();
        assert_eq!(order, expect);
        worker_slot::enter(4);
        assert!(
            std::ptr::eq(c.local(), &c.workers[1]),
            "a slot beyond the workers wraps"
        );
    }
}
