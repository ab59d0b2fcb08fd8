//! Redis as the shared store: a single server, masters found through Sentinel, or Redis Cluster,
//! all through the `redis` crate's multiplexed async connections.
//!
//! Each worker thread gets its own multiplexed connection, opened on its own event loop, so a
//! lookup never hops to another thread (the control loop's connection serves the probe, and the
//! workers until theirs is up). Redis pipelines the requests of all of a thread's handshakes on
//! it. A connection that breaks is dropped and re-established in the background; until then
//! operations fail fast, which the circuit breaker turns into "do not ask" after a few failures.

use crate::backend::{Backend, StoreError, StoreFailure};
use futures_util::future::BoxFuture;
use parking_lot::Mutex;
use redis::aio::MultiplexedConnection;
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::sentinel::{SentinelClient, SentinelServerType};
use redis::{AsyncConnectionConfig, Cmd, FromRedisValue, RedisError};
use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tlsgate_config::RedisMode;

/// How to (re)connect.
enum Target {
    Single(redis::Client),
    Sentinel(tokio::sync::Mutex<SentinelClient>),
    Cluster(ClusterClient),
}

#[derive(Clone)]
enum Conn {
    Plain(MultiplexedConnection),
    Cluster(ClusterConnection),
}

/// Identifies a store instance in thread-local slots.
static NEXT_STORE_ID: AtomicU64 = AtomicU64::new(1);

/// A worker thread's own connection to one store.
#[derive(Default)]
struct ThreadSlot {
    conn: Option<Conn>,
    connecting: bool,
    /// The store's `generation` when `conn` was opened; an older one is dropped on next use.
    generation: u64,
}

thread_local! {
    static THREAD_CONNS: RefCell<Vec<(u64, ThreadSlot)>> = const { RefCell::new(Vec::new()) };
}

fn with_slot<R>(store: u64, f: impl FnOnce(&mut ThreadSlot) -> R) -> R {
    THREAD_CONNS.with(|slots| {
        let mut slots = slots.borrow_mut();
        let i = match slots.iter().position(|(id, _)| *id == store) {
            Some(i) => i,
            None => {
                slots.push((store, ThreadSlot::default()));
                slots.len() - 1
            }
        };
        f(&mut slots[i].1)
    })
}

struct Inner {
    id: u64,
    mode: RedisMode,
    /// The servers as errors name them (credentials removed).
    server: Arc<str>,
    target: Target,
    conn: Mutex<Option<Conn>>,
    connecting: AtomicBool,
    /// Bumped by `reset`: every worker's connection from before is dropped on its next use.
    generation: AtomicU64,
    io_timeout: Duration,
    /// The runtime that owns the connection's driver task (the control loop's).
    handle: tokio::runtime::Handle,
}

impl Inner {
    fn error(&self, failure: StoreFailure) -> StoreError {
        StoreError::new(failure, "redis", self.server.clone())
    }

    /// A failed connect: timed out (after `io_timeout`) or refused.
    fn connect_error(&self, e: RedisError) -> StoreError {
        if e.is_timeout() {
            self.error(StoreFailure::ConnectTimeout)
                .with_timeout(self.io_timeout)
                .with_source(e)
        } else {
            self.error(StoreFailure::Connect).with_source(e)
        }
    }

    /// A failed command: no answer in time, connection lost, or an error reply.
    fn command_error(&self, e: RedisError) -> StoreError {
        let failure = if e.is_timeout() {
            StoreFailure::Timeout
        } else if e.is_io_error() || e.is_connection_dropped() {
            StoreFailure::ConnectionLost
        } else {
            StoreFailure::Command
        };
        self.error(failure).with_source(e)
    }
}

/// The servers of a deployment as errors name them, without credentials.
fn describe(mode: RedisMode, servers: &[String], sentinel_service: Option<&str>) -> Arc<str> {
    let urls = servers.iter().map(|s| redacted(s)).collect::<Vec<_>>().join(",");
    match mode {
        RedisMode::Single => urls.into(),
        RedisMode::Sentinel => format!("{urls} (sentinel service {})", sentinel_service.unwrap_or_default()).into(),
        RedisMode::Cluster => format!("{urls} (cluster)").into(),
    }
}

/// `url` without the `user:password@` part of its authority.
fn redacted(url: &str) -> Cow<'_, str> {
    if let Some((scheme, rest)) = url.split_once("://") {
        let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
        if let Some(at) = authority.rfind('@') {
            return format!("{scheme}://{}", &rest[at + 1..]).into();
        }
    }
    url.into()
}

/// A Redis deployment.
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("mode", &self.inner.mode)
            .field("connected", &self.inner.conn.lock().is_some())
            .finish()
    }
}

impl RedisStore {
    /// Prepares the client (no connection yet: the first ping connects). Must run inside the
    /// runtime that is to own the connection.
    pub fn new(
        mode: RedisMode,
        servers: &[String],
        sentinel_service: Option<&str>,
        io_timeout: Duration,
    ) -> Result<Self, StoreError> {
        let server = describe(mode, servers, sentinel_service);
        let invalid = |e: RedisError| StoreError::new(StoreFailure::Invalid, "redis", server.clone()).with_source(e);
        let target = match mode {
            RedisMode::Single => {
                let url = servers.first().map_or("", String::as_str);
                Target::Single(redis::Client::open(url).map_err(invalid)?)
            }
            RedisMode::Sentinel => Target::Sentinel(tokio::sync::Mutex::new(
                SentinelClient::build(
                    servers.to_vec(),
                    sentinel_service.unwrap_or_default().to_string(),
                    None,
                    SentinelServerType::Master,
                )
                .map_err(invalid)?,
            )),
            RedisMode::Cluster => Target::Cluster(
                ClusterClient::builder(servers.to_vec())
                    .connection_timeout(io_timeout)
                    .response_timeout(io_timeout)
                    .retries(1)
                    .build()
                    .map_err(invalid)?,
            ),
        };
        Ok(Self {
            inner: Arc::new(Inner {
                id: NEXT_STORE_ID.fetch_add(1, Ordering::Relaxed),
                mode,
                server,
                target,
                conn: Mutex::new(None),
                connecting: AtomicBool::new(false),
                generation: AtomicU64::new(0),
                io_timeout,
                handle: tokio::runtime::Handle::current(),
            }),
        })
    }

    async fn connect(inner: &Inner) -> Result<Conn, RedisError> {
        // No response timeout in the client: `run` applies `io_timeout` on the thread's shared
        // timer instead of one timer (and one event-loop wake-up) per command.
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(inner.io_timeout))
            .set_response_timeout(None);
        Ok(match &inner.target {
            Target::Single(client) => Conn::Plain(client.get_multiplexed_async_connection_with_config(&config).await?),
            Target::Sentinel(sentinel) => {
                // Ask the sentinels for the current master on every reconnect (failover).
                let client = sentinel.lock().await.async_get_client().await?;
                Conn::Plain(client.get_multiplexed_async_connection_with_config(&config).await?)
            }
            Target::Cluster(client) => Conn::Cluster(client.get_async_connection().await?),
        })
    }

    /// The connection for this thread: its own once open (opened in the background on first use
    /// from a worker's event loop), the control loop's until then, or an error at once.
    fn conn(&self) -> Result<Conn, StoreError> {
        let on_own_loop = tokio::runtime::Handle::try_current().is_ok_and(|h| h.id() != self.inner.handle.id());
        if on_own_loop {
            let generation = self.inner.generation.load(Ordering::Acquire);
            let own = with_slot(self.inner.id, |slot| {
                if slot.generation != generation {
                    slot.conn = None;
                }
                if slot.conn.is_none() && !slot.connecting {
                    slot.connecting = true;
                    let inner = self.inner.clone();
                    tokio::spawn(async move {
                        let conn = Self::connect(&inner).await;
                        with_slot(inner.id, |slot| {
                            slot.connecting = false;
                            match conn {
                                Ok(c) => {
                                    slot.conn = Some(c);
                                    slot.generation = generation;
                                }
                                Err(e) => tracing::debug!(error = %e, "redis: worker connection failed"),
                            }
                        });
                    });
                }
                slot.conn.clone()
            });
            if let Some(c) = own {
                return Ok(c);
            }
        }
        if let Some(c) = self.inner.conn.lock().clone() {
            return Ok(c);
        }
        if !self.inner.connecting.swap(true, Ordering::AcqRel) {
            let inner = self.inner.clone();
            self.inner.handle.spawn(async move {
                match Self::connect(&inner).await {
                    Ok(c) => *inner.conn.lock() = Some(c),
                    Err(e) => tracing::debug!(error = %e, "redis reconnect failed"),
                }
                inner.connecting.store(false, Ordering::Release);
            });
        }
        Err(self.inner.error(StoreFailure::NotConnected))
    }

    fn run<T: FromRedisValue + Send + 'static>(&self, cmd: impl Query) -> BoxFuture<'static, Result<T, StoreError>> {
        let conn = self.conn();
        let inner = self.inner.clone();
        Box::pin(async move {
            let query = async {
                match conn? {
                    Conn::Plain(mut c) => Ok(cmd.send::<T, _>(&mut c).await),
                    Conn::Cluster(mut c) => Ok(cmd.send::<T, _>(&mut c).await),
                }
            };
            let result = match tlsgate_timer::timeout(inner.io_timeout, query).await {
                Ok(Ok(r)) => r,
                Ok(Err(e)) => return Err(e),
                Err(_) => {
                    // No answer within io_timeout: treat the connection as hung, as on an error.
                    with_slot(inner.id, |slot| slot.conn = None);
                    *inner.conn.lock() = None;
                    return Err(inner.error(StoreFailure::Timeout).with_timeout(inner.io_timeout));
                }
            };
            result.map_err(|e| {
                if e.is_io_error() || e.is_connection_dropped() || e.is_unrecoverable_error() || e.is_timeout() {
                    // Drop it (this thread's and the shared one); the next operation or the
                    // breaker's probe reconnects.
                    with_slot(inner.id, |slot| slot.conn = None);
                    *inner.conn.lock() = None;
                }
                inner.command_error(e)
            })
        })
    }
}

/// A command or a pipeline (what [`RedisStore::run`] sends).
trait Query: Send + Sync + 'static {
    fn send<T: FromRedisValue, C: redis::aio::ConnectionLike + Send>(
        &self,
        conn: &mut C,
    ) -> impl std::future::Future<Output = Result<T, RedisError>> + Send;
}

impl Query for Cmd {
    fn send<T: FromRedisValue, C: redis::aio::ConnectionLike + Send>(
        &self,
        conn: &mut C,
    ) -> impl std::future::Future<Output = Result<T, RedisError>> + Send {
        self.query_async::<T>(conn)
    }
}

impl Query for redis::Pipeline {
    fn send<T: FromRedisValue, C: redis::aio::ConnectionLike + Send>(
        &self,
        conn: &mut C,
    ) -> impl std::future::Future<Output = Result<T, RedisError>> + Send {
        self.query_async::<T>(conn)
    }
}

impl Backend for RedisStore {
    fn get(&self, key: String) -> BoxFuture<'static, Result<Option<Vec<u8>>, StoreError>> {
        let mut cmd = redis::cmd("GET");
        cmd.arg(key);
        self.run::<Option<Vec<u8>>>(cmd)
    }

    fn set(&self, key: String, value: Vec<u8>, ttl: Duration) -> BoxFuture<'static, Result<(), StoreError>> {
        let mut cmd = redis::cmd("SET");
        cmd.arg(key).arg(value).arg("PX").arg(ttl.as_millis().max(1) as u64);
        self.run::<()>(cmd)
    }

    fn add(&self, key: String, value: Vec<u8>, ttl: Duration) -> BoxFuture<'static, Result<bool, StoreError>> {
        let mut cmd = redis::cmd("SET");
        cmd.arg(key)
            .arg(value)
            .arg("NX")
            .arg("PX")
            .arg(ttl.as_millis().max(1) as u64);
        let fut = self.run::<Option<String>>(cmd);
        Box::pin(async move { Ok(fut.await?.is_some()) })
    }

    fn ping(&self) -> BoxFuture<'static, Result<(), StoreError>> {
        let inner = self.inner.clone();
        let this = self.clone();
        Box::pin(async move {
            if inner.conn.lock().is_none() {
                let c = Self::connect(&inner).await.map_err(|e| inner.connect_error(e))?;
                *inner.conn.lock() = Some(c);
            }
            this.run::<String>(redis::cmd("PING")).await.map(|_| ())
        })
    }

    fn incr_many(&self, items: Vec<(String, u64, Duration)>) -> BoxFuture<'static, Result<Vec<u64>, StoreError>> {
        // One pipeline: INCRBY and PEXPIRE per counter; only the INCRBY answers are kept.
        let mut pipe = redis::pipe();
        for (key, by, ttl) in &items {
            pipe.cmd("INCRBY").arg(key).arg(*by);
            pipe.cmd("PEXPIRE").arg(key).arg(ttl.as_millis().max(1) as u64).ignore();
        }
        self.run::<Vec<u64>>(pipe)
    }

    fn kind(&self) -> &'static str {
        "redis"
    }

    fn reset(&self) {
        self.inner.generation.fetch_add(1, Ordering::AcqRel);
        *self.inner.conn.lock() = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_never_show_credentials() {
        assert_eq!(redacted("redis://:s3cret@10.0.0.5:6379/2"), "redis://10.0.0.5:6379/2");
        assert_eq!(redacted("rediss://user:p@ss@h:6380"), "rediss://h:6380");
        assert_eq!(redacted("redis://10.0.0.5:6379"), "redis://10.0.0.5:6379");
        assert_eq!(redacted("10.0.0.5:6379"), "10.0.0.5:6379");
        let servers = ["redis://a:1@s1:26379".to_string(), "redis://s2:26379".to_string()];
        assert_eq!(
            &*describe(RedisMode::Sentinel, &servers, Some("tlsgate")),
            "redis://s1:26379,redis://s2:26379 (sentinel service tlsgate)"
        );
    }

    #[tokio::test]
    async fn a_bad_url_is_a_configuration_error_with_its_cause() {
        use tlsgate_error::{Classify, Side};
        let e = RedisStore::new(
            RedisMode::Single,
            &["nope://:pw@x".to_string()],
            None,
            Duration::from_millis(100),
        )
        .unwrap_err();
        assert_eq!(
            (e.side(), e.kind(), e.failure()),
            (Side::Config, "store_config", StoreFailure::Invalid)
        );
        assert!(
            e.to_string().starts_with("redis nope://x: invalid configuration: "),
            "{e}"
        );
        assert!(std::error::Error::source(&e).is_some());
    }

    #[tokio::test]
    async fn operations_before_the_first_connection_fail_fast_and_may_be_retried() {
        use tlsgate_error::Classify;
        // Nothing listens on port 1: the background connect fails, the operation does not wait.
        let store = RedisStore::new(
            RedisMode::Single,
            &["redis://127.0.0.1:1".to_string()],
            None,
            Duration::from_millis(100),
        )
        .unwrap();
        let e = store.get("k".into()).await.unwrap_err();
        assert_eq!(e.failure(), StoreFailure::NotConnected);
        assert!(e.retry_safe());
        assert_eq!(e.to_string(), "redis redis://127.0.0.1:1: not connected");
    }
}
