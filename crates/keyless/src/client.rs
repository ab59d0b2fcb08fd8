//! The gateway's key-server client: a set of key servers, each with a pool of persistent
//! connections; least-outstanding-requests choice, bounded retry on another server, circuit
//! breaking. Everything runs on one small dedicated runtime, so the callers' event loops only
//! await a join handle.

use crate::client_conn::{run_slot, Conn};
use crate::codec::{ErrorCode, KeyId, Request, Response};
use crate::keystore::hex;
use boring::ssl::SslConnector;
use parking_lot::{Mutex, RwLock};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};
use tlsgate_config::KeylessConfig;
use tokio::sync::watch;

/// The runtime every key-server connection and request runs on.
pub(crate) static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("tlsgate-keyless")
        .enable_all()
        .build()
        .expect("start the keyless runtime")
});

/// Settings shared by every connection of a client.
pub struct Settings {
    pub(crate) connector: SslConnector,
    pub(crate) connect_timeout: Duration,
    pub(crate) request_timeout: Duration,
    pub(crate) health_interval: Duration,
    retries: usize,
    failure_threshold: u32,
    breaker_cooldown: Duration,
}

/// One key server.
pub struct ServerState {
    /// `host:port`.
    pub addr: String,
    /// Host name checked against its certificate.
    pub host: String,
    pub(crate) settings: Arc<Settings>,
    slots: Vec<RwLock<Option<Arc<Conn>>>>,
    outstanding: AtomicUsize,
    failures: AtomicU32,
    open_until: Mutex<Option<Instant>>,
}

impl ServerState {
    pub(crate) fn set_slot(&self, slot: usize, conn: Option<Arc<Conn>>) {
        *self.slots[slot].write() = conn;
    }

    /// The live connection with the fewest requests in flight.
    fn conn(&self) -> Option<Arc<Conn>> {
        self.slots
            .iter()
            .filter_map(|s| s.read().clone())
            .filter(|c| c.alive())
            .min_by_key(|c| c.outstanding.load(Ordering::Relaxed))
    }

    fn circuit_closed(&self) -> bool {
        self.open_until.lock().is_none_or(|t| Instant::now() >= t)
    }

    pub(crate) fn success(&self) {
        self.failures.store(0, Ordering::Relaxed);
        *self.open_until.lock() = None;
    }

    pub(crate) fn failure(&self) {
        let n = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
        if n >= self.settings.failure_threshold {
            let mut open = self.open_until.lock();
            if open.is_none_or(|t| Instant::now() >= t) {
                tracing::warn!(key_server = %self.addr, failures = n, "key server circuit open");
                *open = Some(Instant::now() + self.settings.breaker_cooldown);
            }
        }
    }
}

/// A pool of key servers, shared by every certificate that names the same list.
pub struct Client {
    servers: Vec<Arc<ServerState>>,
    rotate: AtomicUsize,
    _stop: watch::Sender<bool>,
}

impl Client {
    /// Starts connecting to `servers`.
    pub fn start(config: &KeylessConfig, servers: &[String]) -> Result<Arc<Self>, String> {
        let connector = crate::tls_setup::connector(&config.client_certificate, &config.client_key, &config.server_ca)?;
        let settings = Arc::new(Settings {
            connector,
            connect_timeout: config.connect_timeout.get(),
            request_timeout: config.request_timeout.get(),
            health_interval: config.health_interval.get(),
            retries: config.retries,
            failure_threshold: config.failure_threshold.max(1),
            breaker_cooldown: config.breaker_cooldown.get(),
        });
        let (stop, stop_rx) = watch::channel(false);
        let mut states = Vec::new();
        for addr in servers {
            let host = addr
                .rsplit_once(':')
                .map_or(addr.as_str(), |(h, _)| h)
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
            let state = Arc::new(ServerState {
                addr: addr.clone(),
                host,
                settings: settings.clone(),
                slots: (0..config.connections_per_server.max(1))
                    .map(|_| RwLock::new(None))
                    .collect(),
                outstanding: AtomicUsize::new(0),
                failures: AtomicU32::new(0),
                open_until: Mutex::new(None),
            });
            for slot in 0..state.slots.len() {
                RUNTIME.spawn(run_slot(state.clone(), slot, stop_rx.clone()));
            }
            states.push(state);
        }
        Ok(Arc::new(Self {
            servers: states,
            rotate: AtomicUsize::new(0),
            _stop: stop,
        }))
    }

    /// Least outstanding requests among servers with a live connection, preferring closed
    /// circuits and servers not yet tried; ties go round-robin.
    fn pick(&self, tried: &[usize]) -> Option<(usize, Arc<Conn>)> {
        let n = self.servers.len();
        let start = self.rotate.fetch_add(1, Ordering::Relaxed);
        let live: Vec<(usize, Arc<Conn>)> = (0..n)
            .map(|k| (start + k) % n)
            .filter_map(|i| self.servers[i].conn().map(|c| (i, c)))
            .collect();
        let best = |pred: &dyn Fn(usize) -> bool| {
            live.iter()
                .filter(|(i, _)| pred(*i))
                .min_by_key(|(i, _)| self.servers[*i].outstanding.load(Ordering::Relaxed))
                .cloned()
        };
        best(&|i| !tried.contains(&i) && self.servers[i].circuit_closed())
            .or_else(|| best(&|i| !tried.contains(&i)))
            .or_else(|| best(&|_| true))
    }

    /// Signs on some key server, retrying elsewhere on failure, timeout or overload.
    pub async fn sign(self: Arc<Self>, key_id: KeyId, algorithm: u16, payload: Vec<u8>) -> Result<Vec<u8>, String> {
        let request = Request::Sign {
            key_id,
            algorithm,
            payload,
        };
        let timeout = self
            .servers
            .first()
            .map_or(Duration::from_secs(1), |s| s.settings.request_timeout);
        let attempts = 1 + self.servers.first().map_or(0, |s| s.settings.retries);
        let mut tried = Vec::new();
        let mut last = "no key server is reachable".to_string();
        for _ in 0..attempts {
            let Some((i, conn)) = self.pick(&tried) else { break };
            tried.push(i);
            let server = &self.servers[i];
            let Ok((id, rx)) = conn.request(&request) else {
                last = format!("{}: connection closed", server.addr);
                continue;
            };
            server.outstanding.fetch_add(1, Ordering::Relaxed);
            conn.outstanding.fetch_add(1, Ordering::Relaxed);
            let answer = tokio::time::timeout(timeout, rx).await;
            server.outstanding.fetch_sub(1, Ordering::Relaxed);
            conn.outstanding.fetch_sub(1, Ordering::Relaxed);
            match answer {
                Ok(Ok(Response::Signature(sig))) => {
                    server.success();
                    return Ok(sig);
                }
                Ok(Ok(Response::Error(code @ (ErrorCode::UnknownKey | ErrorCode::UnsupportedAlgorithm)))) => {
                    server.success();
                    return Err(format!(
                        "key server {} answered {code} for key {}",
                        server.addr,
                        hex(&key_id)
                    ));
                }
                Ok(Ok(other)) => {
                    server.failure();
                    last = format!("{}: {other:?}", server.addr);
                }
                Ok(Err(_)) => {
                    server.failure();
                    last = format!("{}: connection lost", server.addr);
                }
                Err(_) => {
                    conn.cancel(id);
                    server.failure();
                    last = format!("{}: timed out after {timeout:?}", server.addr);
                }
            }
            tracing::debug!(error = %last, "key server request failed; retrying elsewhere");
        }
        Err(last)
    }
}
