//! Memcached as the shared store (text protocol through `async-memcached`).
//!
//! A key always goes to the same server (hash of the key modulo the server list). Each worker
//! thread keeps its own few connections per server, opened and used on its own event loop (no
//! hop to another thread inside a handshake); each connection serves one operation at a time.
//! Outside the workers (the breaker's probe) a shared set on the control loop is used. A
//! connection that fails, or whose operation was abandoned at a timeout, is dropped and reopened
//! by the next operation.

use crate::backend::{Backend, StoreError, StoreFailure};
use async_memcached::{AsciiProtocol, Client, MetaProtocol};
use futures_util::future::BoxFuture;
use std::cell::RefCell;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

type Slot = Arc<Mutex<Option<Client>>>;

struct Server {
    /// `tcp://host:port`: what the client connects to and errors name.
    dsn: Arc<str>,
    slots: Vec<Slot>,
    next: AtomicUsize,
}

static NEXT_STORE_ID: AtomicU64 = AtomicU64::new(1);

/// (store id, server index) and this thread's connections to that server.
type ThreadSlots = Vec<((u64, usize), Vec<Slot>)>;

thread_local! {
    static THREAD_SLOTS: RefCell<ThreadSlots> = const { RefCell::new(Vec::new()) };
}

struct Inner {
    id: u64,
    per_thread: usize,
    servers: Vec<Server>,
    connect_timeout: Duration,
    handle: tokio::runtime::Handle,
}

/// A set of memcached servers.
#[derive(Clone)]
pub struct MemcachedStore {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for MemcachedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dsns: Vec<&str> = self.inner.servers.iter().map(|s| &*s.dsn).collect();
        f.debug_struct("MemcachedStore").field("servers", &dsns).finish()
    }
}

/// Memcached's largest relative TTL (longer values are read as a unix time).
const MAX_RELATIVE_TTL: u64 = 30 * 24 * 3600;

impl MemcachedStore {
    /// Prepares `connections` lazily opened connections per server (must run inside a runtime).
    pub fn new(servers: &[String], connections: usize, connect_timeout: Duration) -> Self {
        let servers = servers
            .iter()
            .map(|s| Server {
                dsn: format!("tcp://{s}").into(),
                slots: (0..connections.max(1)).map(|_| Slot::default()).collect(),
                next: AtomicUsize::new(0),
            })
            .collect();
        Self {
            inner: Arc::new(Inner {
                id: NEXT_STORE_ID.fetch_add(1, Ordering::Relaxed),
                per_thread: connections.max(1),
                servers,
                connect_timeout,
                handle: tokio::runtime::Handle::current(),
            }),
        }
    }

    fn server_for(&self, key: &str) -> usize {
        server_index(key, self.inner.servers.len())
    }

    /// A connection slot to `server` for the calling thread: one of this worker thread's own
    /// (round robin), or None off a worker loop.
    fn thread_slot(&self, server: usize) -> Option<Slot> {
        let on_own_loop = tokio::runtime::Handle::try_current().is_ok_and(|h| h.id() != self.inner.handle.id());
        if !on_own_loop {
            return None;
        }
        let next = self.inner.servers[server].next.fetch_add(1, Ordering::Relaxed);
        THREAD_SLOTS.with(|all| {
            let mut all = all.borrow_mut();
            let key = (self.inner.id, server);
            let i = match all.iter().position(|(k, _)| *k == key) {
                Some(i) => i,
                None => {
                    all.push((key, (0..self.inner.per_thread).map(|_| Slot::default()).collect()));
                    all.len() - 1
                }
            };
            let slots = &all[i].1;
            // A free connection if there is one, else the next in turn.
            let free = slots.iter().find(|s| s.try_lock().is_ok());
            Some(free.unwrap_or(&slots[next % slots.len()]).clone())
        })
    }

    /// Runs `op` on a connection to `server`: inline on a worker's own connection, or spawned on
    /// the store's runtime with a shared one.
    fn with_conn<T, F>(&self, server: usize, op: F) -> BoxFuture<'static, Result<T, StoreError>>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut Client) -> BoxFuture<'c, Result<T, async_memcached::Error>> + Send + 'static,
    {
        let dsn = self.inner.servers[server].dsn.clone();
        let connect_timeout = self.inner.connect_timeout;
        if let Some(slot) = self.thread_slot(server) {
            return Box::pin(run_on(slot, dsn, connect_timeout, op));
        }
        let srv = &self.inner.servers[server];
        let slot = srv.slots[srv.next.fetch_add(1, Ordering::Relaxed) % srv.slots.len()].clone();
        let task = self.inner.handle.spawn(run_on(slot, dsn.clone(), connect_timeout, op));
        Box::pin(async move {
            // If the caller gives up (timeout), the task still finishes or fails on its own, and an
            // operation cut short marks its connection closed for the next user.
            task.await.map_err(|e| error(StoreFailure::Task, dsn).with_source(e))?
        })
    }
}

/// Runs `op` on the connection in `slot`, (re)connecting first if it is missing or closed.
async fn run_on<T, F>(slot: Slot, dsn: Arc<str>, connect_timeout: Duration, op: F) -> Result<T, StoreError>
where
    F: for<'c> FnOnce(&'c mut Client) -> BoxFuture<'c, Result<T, async_memcached::Error>>,
{
    let mut guard = slot.lock().await;
    if guard.as_ref().is_none_or(Client::is_closed) {
        let client = match tokio::time::timeout(connect_timeout, Client::new(&*dsn)).await {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => return Err(error(StoreFailure::Connect, dsn).with_source(e)),
            Err(_) => return Err(error(StoreFailure::ConnectTimeout, dsn).with_timeout(connect_timeout)),
        };
        *guard = Some(client);
    }
    let client = guard.as_mut().expect("just connected");
    op(client).await.map_err(|e| {
        if !matches!(e, async_memcached::Error::Protocol(_)) {
            // Closed, or out of step with the server: the next operation reconnects.
            *guard = None;
        }
        error(operation_failure(&e), dsn).with_source(e)
    })
}

fn error(failure: StoreFailure, dsn: Arc<str>) -> StoreError {
    StoreError::new(failure, "memcached", dsn)
}

/// How an operation on an open connection failed: the server answered with an error status or
/// something unreadable, or the connection broke.
fn operation_failure(e: &async_memcached::Error) -> StoreFailure {
    match e {
        async_memcached::Error::Protocol(_) | async_memcached::Error::ParseError(_) => StoreFailure::Command,
        _ => StoreFailure::ConnectionLost,
    }
}

/// The server of `key` among `servers`: the hash of its hash tag (the part between its first
/// `{` and the next `}`, as in Redis Cluster and twemproxy) when it has a non-empty one, else of
/// the whole key. Keys that share a tag share a server, so operations on them keep their order.
fn server_index(key: &str, servers: usize) -> usize {
    let tagged = key
        .split_once('{')
        .and_then(|(_, rest)| rest.split_once('}'))
        .map(|(tag, _)| tag)
        .filter(|tag| !tag.is_empty());
    let mut h = std::collections::hash_map::DefaultHasher::new();
    tagged.unwrap_or(key).hash(&mut h);
    (h.finish() % servers.max(1) as u64) as usize
}

/// Adds `by` to the counter `key`, creating it at `by` with `ttl` when missing; its new value.
async fn add_to_counter(c: &mut Client, key: &str, by: u64, ttl: Duration) -> Result<u64, async_memcached::Error> {
    let (vivify, initial) = (format!("N{}", ttl_secs(ttl)), format!("J{by}"));
    let answer = c
        .meta_increment(key, false, None, Some(by), Some(&[&vivify, &initial, "v"]))
        .await?;
    answer
        .and_then(|v| v.data)
        .and_then(|d| std::str::from_utf8(&d).ok()?.trim().parse().ok())
        .ok_or(async_memcached::Error::Protocol(async_memcached::Status::Error(
            async_memcached::ErrorKind::Protocol(Some("ma answered without a number".into())),
        )))
}

fn ttl_secs(ttl: Duration) -> i64 {
    ttl.as_secs().clamp(1, MAX_RELATIVE_TTL) as i64
}

impl Backend for MemcachedStore {
    fn get(&self, key: String) -> BoxFuture<'static, Result<Option<Vec<u8>>, StoreError>> {
        let server = self.server_for(&key);
        self.with_conn(server, move |c| {
            Box::pin(async move { Ok(c.get(&key).await?.and_then(|v| v.data)) })
        })
    }

    fn set(&self, key: String, value: Vec<u8>, ttl: Duration) -> BoxFuture<'static, Result<(), StoreError>> {
        let server = self.server_for(&key);
        self.with_conn(server, move |c| {
            Box::pin(async move { c.set(&key, value.as_slice(), Some(ttl_secs(ttl)), None).await })
        })
    }

    fn add(&self, key: String, value: Vec<u8>, ttl: Duration) -> BoxFuture<'static, Result<bool, StoreError>> {
        let server = self.server_for(&key);
        self.with_conn(server, move |c| {
            Box::pin(async move {
                match c.add(&key, value.as_slice(), Some(ttl_secs(ttl)), None).await {
                    Ok(()) => Ok(true),
                    Err(async_memcached::Error::Protocol(async_memcached::Status::NotStored)) => Ok(false),
                    Err(e) => Err(e),
                }
            })
        })
    }

    fn ping(&self) -> BoxFuture<'static, Result<(), StoreError>> {
        let pings: Vec<_> = (0..self.inner.servers.len())
            .map(|i| self.with_conn(i, |c| Box::pin(async move { c.version().await.map(|_| ()) })))
            .collect();
        Box::pin(async move {
            for p in pings {
                p.await?;
            }
            Ok(())
        })
    }

    fn incr_many(&self, items: Vec<(String, u64, Duration)>) -> BoxFuture<'static, Result<Vec<u64>, StoreError>> {
        // One meta arithmetic command per counter (memcached 1.6+): `ma <key> N<ttl> J<by>
        // D<by> v` creates a missing counter at `by` with its TTL, or adds `by` to it, and
        // answers the new value — under the item's lock, so concurrent writers from other nodes
        // never lose an increment. One exchange per counter (the text protocol's `add` + `incr`
        // took two), each server's counters on one connection and the servers at once.
        let count = items.len();
        let mut by_server: Vec<Vec<(usize, String, u64, Duration)>> = vec![Vec::new(); self.inner.servers.len()];
        for (i, (key, by, ttl)) in items.into_iter().enumerate() {
            by_server[self.server_for(&key)].push((i, key, by, ttl));
        }
        let batches: Vec<_> = by_server
            .into_iter()
            .enumerate()
            .filter(|(_, batch)| !batch.is_empty())
            .map(|(server, batch)| {
                self.with_conn(server, move |c| {
                    Box::pin(async move {
                        let mut out = Vec::with_capacity(batch.len());
                        for (i, key, by, ttl) in batch {
                            out.push((i, add_to_counter(c, &key, by, ttl).await?));
                        }
                        Ok(out)
                    })
                })
            })
            .collect();
        Box::pin(async move {
            let mut totals = vec![0; count];
            for batch in futures_util::future::join_all(batches).await {
                for (i, total) in batch? {
                    totals[i] = total;
                }
            }
            Ok(totals)
        })
    }

    fn kind(&self) -> &'static str {
        "memcached"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tlsgate_error::Classify;

    #[test]
    fn keys_with_one_hash_tag_share_a_server_and_the_others_spread() {
        let servers = 7;
        let of = |k: &str| server_index(k, servers);
        let tagged: Vec<usize> = (0..50).map(|w| of(&format!("p:rl:{{abc}}:{w}"))).collect();
        assert!(tagged.iter().all(|&s| s == tagged[0]), "{tagged:?}");
        assert_eq!(of("x{abc}y:t9"), tagged[0]);
        // Untagged and empty-tagged keys hash whole: over many keys every server is used.
        let mut used = [false; 7];
        for i in 0..200 {
            used[of(&format!("p:sess:{i}"))] = true;
            used[of(&format!("p:{{}}:{i}"))] = true;
        }
        assert!(used.iter().all(|&u| u), "{used:?}");
        assert_eq!(server_index("anything", 1), 0);
    }

    #[test]
    fn error_answers_are_command_failures_the_rest_lost_connections() {
        use async_memcached::{Error, ErrorKind, Status};
        let answer = Error::Protocol(Status::Error(ErrorKind::NonexistentCommand));
        assert_eq!(operation_failure(&answer), StoreFailure::Command);
        assert_eq!(
            operation_failure(&Error::ConnectionClosed),
            StoreFailure::ConnectionLost
        );
        let io = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        assert_eq!(operation_failure(&Error::Io(io)), StoreFailure::ConnectionLost);
    }

    #[tokio::test]
    async fn a_refused_connection_names_the_server_and_may_be_retried() {
        // Nothing listens on port 1.
        let store = MemcachedStore::new(&["127.0.0.1:1".to_string()], 1, Duration::from_secs(2));
        let e = store.get("k".into()).await.unwrap_err();
        assert!(
            matches!(e.failure(), StoreFailure::Connect | StoreFailure::ConnectTimeout),
            "{e}"
        );
        assert!(e.retry_safe());
        assert!(e.to_string().starts_with("memcached tcp://127.0.0.1:1: connect"), "{e}");
    }
}
