//! A server's open connections, counted, and its connection limit with a FIFO queue
//! (`max_connections_per_server`, `max_queue_per_server`, `queue_timeout`: HAProxy's per-server
//! `maxconn`, `maxqueue` and `timeout queue`).
//!
//! - Every connection opened for requests holds a [`ConnSlot`] inside its transport, so the slot
//!   is given back exactly when the socket closes (an upgraded tunnel keeps it until it ends).
//! - Below the limit a request takes a slot at once; at the limit it queues. It leaves the queue
//!   with an idle connection handed back by a finished response (handed to the first waiter that
//!   may use it, never to the idle stack while one waits), or with the slot of a connection that
//!   closed, whichever comes first; after `queue_timeout` it gets [`QueueError::Timeout`]; when
//!   `max_queue_per_server` wait already it gets [`QueueError::Full`] at once.
//! - Connections that announced another client in their PROXY header cannot serve a waiter:
//!   one of them is closed when a waiter queues, and one is closed instead of going idle while
//!   only such waiters wait, so the queue never stalls on idle connections it may not use.
//! - Generic over the idle connection `T` and the key `K` a connection is bound to (the PROXY
//!   pair), so that it is a leaf and its queue is tested without sockets.
//!
//! Servers without a limit only count their connections (two atomic operations per connection,
//! nothing per request).

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tlsgate_error::{Classify, Side};
use tokio::sync::oneshot;
use tokio::time::Instant;

/// Why a request got no connection to its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum QueueError {
    /// `max_queue_per_server` requests already wait for the server.
    #[error("the server's queue is full ({0} waiting)")]
    Full(usize),
    /// No connection within `queue_timeout`.
    #[error("no connection to the server within the queue timeout ({0:?})")]
    Timeout(Duration),
}

impl Classify for QueueError {
    fn side(&self) -> Side {
        Side::Upstream
    }

    fn kind(&self) -> &'static str {
        match self {
            Self::Full(_) => "queue_full",
            Self::Timeout(_) => "queue_timeout",
        }
    }

    /// Nothing was sent: another server may take the request.
    fn retry_safe(&self) -> bool {
        true
    }
}

impl From<QueueError> for crate::error::ProxyError {
    fn from(e: QueueError) -> Self {
        match e {
            QueueError::Full(_) => Self::QueueFull,
            QueueError::Timeout(_) => Self::QueueTimeout,
        }
    }
}

/// What a request got room with.
#[derive(Debug)]
pub enum Room<T> {
    /// A slot: open a new connection with it.
    Open(ConnSlot),
    /// An idle connection handed over while the request waited.
    Idle(T),
}

/// A server's connection count and, when it has one, its limit and queue.
pub struct Slots<K, T> {
    open: AtomicUsize,
    limit: Option<Limit<K, T>>,
}

struct Limit<K, T> {
    max: usize,
    max_queue: usize,
    timeout: Duration,
    state: Mutex<State<K, T>>,
    /// Waiters now (the gauge; read without the lock).
    queued: AtomicUsize,
}

struct State<K, T> {
    /// Slots taken (connections open, and slots handed to waiters that are about to open one).
    open: usize,
    waiters: VecDeque<Waiter<K, T>>,
    next_id: u64,
}

struct Waiter<K, T> {
    id: u64,
    key: Option<K>,
    tx: oneshot::Sender<Handoff<T>>,
}

enum Handoff<T> {
    Idle(T),
    Open,
}

/// One open connection's place in its server's count; given back on drop.
pub struct ConnSlot {
    owner: Arc<dyn Release>,
}

impl std::fmt::Debug for ConnSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ConnSlot")
    }
}

trait Release: Send + Sync {
    fn release(&self);
}

impl Drop for ConnSlot {
    fn drop(&mut self) {
        self.owner.release();
    }
}

impl<K, T> Slots<K, T>
where
    K: PartialEq + Copy + Send + Sync + 'static,
    T: Send + 'static,
{
    /// Counting only.
    pub fn unlimited() -> Self {
        Self {
            open: AtomicUsize::new(0),
            limit: None,
        }
    }

    /// At most `max` connections (0: counting only), at most `max_queue` requests waiting, each
    /// for at most `timeout`.
    pub fn new(max: usize, max_queue: usize, timeout: Duration) -> Self {
        let limit = (max > 0).then(|| Limit {
            max,
            max_queue,
            timeout,
            state: Mutex::new(State {
                open: 0,
                waiters: VecDeque::new(),
                next_id: 0,
            }),
            queued: AtomicUsize::new(0),
        });
        Self {
            open: AtomicUsize::new(0),
            limit,
        }
    }

    /// The limit (0: none).
    pub fn max(&self) -> usize {
        self.limit.as_ref().map_or(0, |l| l.max)
    }

    /// Connections open now (and slots about to be used).
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// Requests waiting now.
    pub fn queued(&self) -> usize {
        self.limit.as_ref().map_or(0, |l| l.queued.load(Ordering::Relaxed))
    }

    /// True when the server has a limit (requests must ask [`Slots::room`]).
    pub fn limited(&self) -> bool {
        self.limit.is_some()
    }

    /// A slot without asking the limit: for servers without one (and, inside, for a slot the
    /// limit's count already holds).
    pub fn counted(self: &Arc<Self>) -> ConnSlot {
        self.open.fetch_add(1, Ordering::Relaxed);
        ConnSlot { owner: self.clone() }
    }

    /// Room for one request bound to `key`: at once below the limit, else after waiting in the
    /// queue. `take_idle` looks for an idle connection `key` may use, `evict` closes one it may
    /// not use (both called under the queue's lock, so that a connection checked in meanwhile
    /// is never missed). `deadline` is set when the request first queues and kept across calls
    /// (a handed connection that turns out closed sends it back here, not to the end of its
    /// wait). `count` is told the outcome of a wait: `dequeued`, `timeout`, `full` or
    /// `abandoned` (the request's future was dropped while it waited: the client went away, or
    /// an outer timeout passed first).
    pub async fn room(
        self: &Arc<Self>,
        key: Option<K>,
        deadline: &mut Option<Instant>,
        take_idle: impl FnOnce(Option<&K>) -> Option<T>,
        evict: impl FnOnce(Option<&K>) -> Option<T>,
        count: &(dyn Fn(&'static str) + Sync),
    ) -> Result<Room<T>, QueueError> {
        let Some(limit) = &self.limit else {
            return Ok(Room::Open(self.counted()));
        };
        let (id, rx, evicted) = {
            let mut st = limit.state.lock();
            if st.open < limit.max {
                st.open += 1;
                drop(st);
                return Ok(Room::Open(self.counted()));
            }
            if let Some(idle) = take_idle(key.as_ref()) {
                drop(st);
                return Ok(Room::Idle(idle));
            }
            if st.waiters.len() >= limit.max_queue {
                let n = st.waiters.len();
                drop(st);
                count("full");
                return Err(QueueError::Full(n));
            }
            let (tx, rx) = oneshot::channel();
            let id = st.next_id;
            st.next_id += 1;
            st.waiters.push_back(Waiter { id, key, tx });
            limit.queued.fetch_add(1, Ordering::Relaxed);
            // Every idle connection is one this request may not use: close one to make room.
            let evicted = evict(key.as_ref());
            (id, rx, evicted)
        };
        // Dropped outside the lock (its slot comes back when its socket closes).
        drop(evicted);
        let until = *deadline.get_or_insert_with(|| Instant::now() + limit.timeout);
        let mut wait = Wait {
            slots: self,
            id,
            rx,
            count,
            done: false,
        };
        let outcome = tokio::time::timeout_at(until, &mut wait.rx).await;
        wait.done = true;
        match outcome {
            Ok(Ok(Handoff::Idle(idle))) => {
                count("dequeued");
                Ok(Room::Idle(idle))
            }
            Ok(Ok(Handoff::Open)) => {
                count("dequeued");
                // The queue's count took it when it was handed over.
                Ok(Room::Open(self.counted()))
            }
            // The sender went without a word (cannot happen while `self` lives): as late.
            Ok(Err(_)) | Err(_) => {
                count("timeout");
                Err(QueueError::Timeout(limit.timeout))
            }
        }
    }

    /// An idle connection bound to `key` is free again: handed to the first waiter that may use
    /// it, else closed when others wait (it cannot serve them; its slot will), else given to
    /// `keep` (the idle stack) under the queue's lock.
    pub fn check_in(&self, key: Option<K>, idle: T, keep: impl FnOnce(T)) {
        let Some(limit) = &self.limit else {
            keep(idle);
            return;
        };
        let mut idle = idle;
        let mut st = limit.state.lock();
        while let Some(i) = st.waiters.iter().position(|w| w.key == key) {
            let Some(w) = st.waiters.remove(i) else { break };
            limit.queued.fetch_sub(1, Ordering::Relaxed);
            match w.tx.send(Handoff::Idle(idle)) {
                Ok(()) => return,
                Err(Handoff::Idle(back)) => idle = back,
                Err(Handoff::Open) => return,
            }
        }
        if st.waiters.is_empty() {
            keep(idle);
        } else {
            drop(st);
            drop(idle);
        }
    }
}

impl<K: Send + Sync, T: Send> Release for Slots<K, T> {
    fn release(&self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
        if let Some(limit) = &self.limit {
            limit.release();
        }
    }
}

impl<K, T> Limit<K, T> {
    /// A slot is free: the first waiter still waiting gets it, else the count goes down.
    fn release(&self) {
        let mut st = self.state.lock();
        self.release_locked(&mut st);
    }

    fn release_locked(&self, st: &mut State<K, T>) {
        while let Some(w) = st.waiters.pop_front() {
            self.queued.fetch_sub(1, Ordering::Relaxed);
            if w.tx.send(Handoff::Open).is_ok() {
                return;
            }
        }
        st.open = st.open.saturating_sub(1);
    }
}

/// A request in the queue; leaving it (served, timed out, or dropped with the request) takes it
/// out of the queue and passes on whatever was handed to it unused.
struct Wait<'a, K: Send + Sync + 'static, T: Send + 'static> {
    slots: &'a Arc<Slots<K, T>>,
    id: u64,
    rx: oneshot::Receiver<Handoff<T>>,
    count: &'a (dyn Fn(&'static str) + Sync),
    done: bool,
}

impl<K: Send + Sync + 'static, T: Send + 'static> Drop for Wait<'_, K, T> {
    fn drop(&mut self) {
        if !self.done {
            (self.count)("abandoned");
        }
        let Some(limit) = &self.slots.limit else {
            return;
        };
        let mut st = limit.state.lock();
        if let Some(i) = st.waiters.iter().position(|w| w.id == self.id) {
            st.waiters.remove(i);
            limit.queued.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        // Handed something after all: a slot goes to the next waiter, a connection is closed
        // (outside the lock), which frees its slot for the next waiter too.
        match self.rx.try_recv() {
            Ok(Handoff::Open) => limit.release_locked(&mut st),
            Ok(Handoff::Idle(idle)) => {
                drop(st);
                drop(idle);
            }
            Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex as StdMutex;

    type TestSlots = Slots<u8, u32>;

    fn slots(max: usize, max_queue: usize, timeout_ms: u64) -> Arc<TestSlots> {
        Arc::new(Slots::new(max, max_queue, Duration::from_millis(timeout_ms)))
    }

    /// Outcomes told to `count`, in order.
    #[derive(Default)]
    struct Outcomes(StdMutex<Vec<&'static str>>);

    impl Outcomes {
        fn push(&self, o: &'static str) {
            self.0.lock().unwrap().push(o);
        }
        fn take(&self) -> Vec<&'static str> {
            std::mem::take(&mut self.0.lock().unwrap())
        }
    }

    async fn room(s: &Arc<TestSlots>, key: Option<u8>, outcomes: &Outcomes) -> Result<Room<u32>, QueueError> {
        let mut deadline = None;
        s.room(key, &mut deadline, |_| None, |_| None, &|o| outcomes.push(o))
            .await
    }

    fn slot(r: Result<Room<u32>, QueueError>) -> ConnSlot {
        match r {
            Ok(Room::Open(s)) => s,
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn without_a_limit_every_request_gets_a_slot_and_the_count_follows() {
        let s: Arc<TestSlots> = Arc::new(Slots::unlimited());
        let outcomes = Outcomes::default();
        let mut held = Vec::new();
        for _ in 0..5 {
            held.push(slot(room(&s, None, &outcomes).await));
        }
        assert_eq!((s.open(), s.queued(), s.max()), (5, 0, 0));
        drop(held);
        assert_eq!(s.open(), 0);
        assert!(outcomes.take().is_empty(), "no request queued");
    }

    #[tokio::test]
    async fn at_the_limit_requests_wait_in_order_for_a_closed_connections_slot() {
        let s = slots(2, 10, 5_000);
        let outcomes = Outcomes::default();
        let a = slot(room(&s, None, &outcomes).await);
        let b = slot(room(&s, None, &outcomes).await);
        assert_eq!(s.open(), 2);
        let order = Arc::new(StdMutex::new(Vec::new()));
        let mut waiters = Vec::new();
        for n in 0..3u32 {
            let (mine, order) = (s.clone(), order.clone());
            waiters.push(tokio::spawn(async move {
                let outcomes = Outcomes::default();
                let got = slot(room(&mine, None, &outcomes).await);
                order.lock().unwrap().push(n);
                tokio::time::sleep(Duration::from_millis(20)).await;
                drop(got);
                outcomes.take()
            }));
            // Queued in this order.
            while s.queued() < n as usize + 1 {
                tokio::task::yield_now().await;
            }
        }
        assert_eq!(s.open(), 2);
        drop(a);
        drop(b);
        for w in waiters {
            assert_eq!(w.await.unwrap(), ["dequeued"]);
        }
        assert_eq!(*order.lock().unwrap(), [0, 1, 2], "first come, first served");
        assert_eq!((s.open(), s.queued()), (0, 0));
    }

    #[tokio::test]
    async fn a_waiter_times_out_and_a_full_queue_refuses_at_once() {
        let s = slots(1, 1, 100);
        let outcomes = Outcomes::default();
        let _held = slot(room(&s, None, &outcomes).await);
        let waiter = {
            let s = s.clone();
            tokio::spawn(async move {
                let outcomes = Outcomes::default();
                let started = Instant::now();
                let r = room(&s, None, &outcomes).await;
                (r.map(|_| ()), started.elapsed(), outcomes.take())
            })
        };
        while s.queued() == 0 {
            tokio::task::yield_now().await;
        }
        let full = room(&s, None, &outcomes).await;
        assert_eq!(full.map(|_| ()).unwrap_err(), QueueError::Full(1));
        assert_eq!(outcomes.take(), ["full"]);
        let (r, waited, told) = waiter.await.unwrap();
        assert_eq!(r.unwrap_err(), QueueError::Timeout(Duration::from_millis(100)));
        assert!(waited >= Duration::from_millis(100), "{waited:?}");
        assert_eq!(told, ["timeout"]);
        assert_eq!((s.open(), s.queued()), (1, 0));
        assert_eq!(QueueError::Full(1).kind(), "queue_full");
        assert_eq!(QueueError::Timeout(Duration::ZERO).kind(), "queue_timeout");
    }

    #[tokio::test]
    async fn no_queue_means_refused_at_the_limit() {
        let s = slots(1, 0, 1_000);
        let outcomes = Outcomes::default();
        let _held = slot(room(&s, None, &outcomes).await);
        assert_eq!(
            room(&s, None, &outcomes).await.map(|_| ()).unwrap_err(),
            QueueError::Full(0)
        );
    }

    #[tokio::test]
    async fn an_idle_connection_goes_to_the_first_waiter_that_may_use_it() {
        let s = slots(1, 10, 5_000);
        let outcomes = Outcomes::default();
        let _busy = slot(room(&s, Some(1), &outcomes).await);
        let spawn_waiter = |key: u8| {
            let s = s.clone();
            tokio::spawn(async move {
                let outcomes = Outcomes::default();
                match room(&s, Some(key), &outcomes).await {
                    Ok(Room::Idle(n)) => Some(n),
                    _ => None,
                }
            })
        };
        let for_two = spawn_waiter(2);
        while s.queued() < 1 {
            tokio::task::yield_now().await;
        }
        let for_one = spawn_waiter(1);
        while s.queued() < 2 {
            tokio::task::yield_now().await;
        }
        // Key 1's connection goes to the waiter for key 1, though it queued second.
        let kept = StdMutex::new(Vec::new());
        s.check_in(Some(1), 7, |n| kept.lock().unwrap().push(n));
        assert_eq!(for_one.await.unwrap(), Some(7));
        assert!(kept.lock().unwrap().is_empty());
        // Nobody may use key 3's connection, but someone waits: it is closed, not kept.
        s.check_in(Some(3), 8, |n| kept.lock().unwrap().push(n));
        assert!(kept.lock().unwrap().is_empty());
        assert_eq!(s.queued(), 1);
        for_two.abort();
        let _ = for_two.await;
        assert_eq!(s.queued(), 0, "an abandoned waiter leaves the queue");
        // Nobody waits: kept idle.
        s.check_in(Some(3), 9, |n| kept.lock().unwrap().push(n));
        assert_eq!(*kept.lock().unwrap(), [9]);
    }

    #[tokio::test]
    async fn a_queued_request_closes_an_idle_connection_it_may_not_use() {
        let s = slots(1, 10, 5_000);
        let outcomes = Outcomes::default();
        let other = slot(room(&s, Some(1), &outcomes).await);
        let evicted = Arc::new(StdMutex::new(None));
        let waiter = {
            let (s, evicted) = (s.clone(), evicted.clone());
            tokio::spawn(async move {
                let outcomes = Outcomes::default();
                let mut deadline = None;
                let r = s
                    .room(
                        Some(2),
                        &mut deadline,
                        |_| None,
                        |key| {
                            *evicted.lock().unwrap() = key.copied();
                            None
                        },
                        &|o| outcomes.push(o),
                    )
                    .await;
                (r.is_ok_and(|r| matches!(r, Room::Open(_))), outcomes.take())
            })
        };
        while s.queued() == 0 {
            tokio::task::yield_now().await;
        }
        assert_eq!(*evicted.lock().unwrap(), Some(2), "asked to close one for key 2");
        // The evicted connection's socket closes: its slot goes to the waiter.
        drop(other);
        assert_eq!(waiter.await.unwrap(), (true, vec!["dequeued"]));
    }
}
