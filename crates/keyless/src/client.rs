//! The gateway's key-server client: one named pool of key servers, each with persistent
//! connections; weighted least-outstanding-requests choice, drain, bounded retry on another
//! server, circuit breaking. Members can change at runtime ([`Client::set_members`]) without
//! disturbing requests in flight. Connections run on one small dedicated runtime; a signature
//! is driven by the handshake's own task (queue the frame, await the answer's oneshot).

use crate::client_conn::{run_slot, Conn};
use crate::client_metrics::{metrics, AttemptLabels, ServerLabels};
use crate::codec::{ErrorCode, KeyId, Request, Response};
use crate::keystore::hex;
use crate::pools::{Member, MemberStatus};
use boring::ssl::SslConnector;
use parking_lot::{Mutex, RwLock};
use rand::Rng;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};
use tlsgate_config::{KeylessConfig, OriginAddr};
use tokio::sync::watch;

/// The runtime every key-server connection runs on: one thread with a single-threaded
/// runtime, so a connection's reader and writer never hand its TLS stream between threads and a
/// request wakes one thread, not a work-stealing scheduler (measured: docs/BENCHMARKS.md,
/// "Added handshake latency").
pub(crate) static RUNTIME: LazyLock<tokio::runtime::Handle> = LazyLock::new(|| {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("start the keyless runtime");
    let handle = rt.handle().clone();
    std::thread::Builder::new()
        .name("tlsgate-keyless".into())
        .spawn(move || rt.block_on(std::future::pending::<()>()))
        .expect("start the keyless thread");
    handle
});

/// Settings shared by every connection of a client.
pub struct Settings {
    pub(crate) connector: SslConnector,
    pub(crate) connect_timeout: Duration,
    pub(crate) request_timeout: Duration,
    pub(crate) health_interval: Duration,
    connections_per_server: usize,
    retries: usize,
    failure_threshold: u32,
    breaker_cooldown: Duration,
}

/// One key server of a pool.
pub struct ServerState {
    /// `host:port`.
    pub addr: String,
    /// Host name checked against its certificate.
    pub host: String,
    pub(crate) settings: Arc<Settings>,
    labels: ServerLabels,
    slots: Vec<RwLock<Option<Arc<Conn>>>>,
    outstanding: AtomicUsize,
    failures: AtomicU32,
    open_until: Mutex<Option<Instant>>,
    weight: AtomicU32,
    drain: AtomicBool,
    stop: watch::Sender<bool>,
    /// This server's series of the per-attempt metrics, looked up once (no label hashing and
    /// no label-string copies per signature).
    hot: HotMetrics,
}

struct HotMetrics {
    ok: prometheus_client::metrics::counter::Counter,
    in_flight: prometheus_client::metrics::gauge::Gauge,
    attempt_duration: prometheus_client::metrics::histogram::Histogram,
}

impl ServerState {
    pub(crate) fn set_slot(&self, slot: usize, conn: Option<Arc<Conn>>) {
        *self.slots[slot].write() = conn;
        let live = self.slots.iter().filter(|s| s.read().is_some()).count();
        metrics().connections.get_or_create(&self.labels).set(live as i64);
    }

    /// Forgets slot `slot`'s connection without touching metrics (the server is going away).
    pub(crate) fn clear_slot(&self, slot: usize) {
        if let Some(conn) = self.slots[slot].write().take() {
            conn.close();
        }
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
        if self.open_until.lock().take().is_some() {
            metrics().circuit_open.get_or_create(&self.labels).set(0);
        }
    }

    pub(crate) fn failure(&self) {
        let n = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
        if n >= self.settings.failure_threshold {
            let mut open = self.open_until.lock();
            if open.is_none_or(|t| Instant::now() >= t) {
                tracing::warn!(key_server = %self.addr, failures = n, "key server circuit open");
                *open = Some(Instant::now() + self.settings.breaker_cooldown);
                metrics().circuit_open.get_or_create(&self.labels).set(1);
            }
        }
    }

    fn apply(&self, member: &Member) {
        self.weight.store(member.weight, Ordering::Relaxed);
        self.drain.store(member.drain, Ordering::Relaxed);
        let m = metrics();
        m.weight.get_or_create(&self.labels).set(i64::from(member.weight));
        m.drained.get_or_create(&self.labels).set(i64::from(member.drain));
    }

    fn status(&self) -> MemberStatus {
        MemberStatus {
            address: self.addr.clone(),
            weight: self.weight.load(Ordering::Relaxed),
            drain: self.drain.load(Ordering::Relaxed),
            connections: self
                .slots
                .iter()
                .filter(|s| s.read().as_ref().is_some_and(|c| c.alive()))
                .count(),
            in_flight: self.outstanding.load(Ordering::Relaxed),
            circuit_open: !self.circuit_closed(),
        }
    }
}

/// A pool of key servers, shared by every certificate that names the same pool.
pub struct Client {
    /// Pool name.
    pub name: String,
    settings: Arc<Settings>,
    servers: RwLock<Arc<Vec<Arc<ServerState>>>>,
    /// Serialises membership changes.
    change: Mutex<()>,
}

impl Drop for Client {
    fn drop(&mut self) {
        for s in self.servers.read().iter() {
            let _ = s.stop.send(true);
            metrics().forget_server(&s.labels);
        }
    }
}

impl Client {
    /// Starts connecting to `servers` (weight 1, not drained), a pool called `name`.
    pub fn start(config: &KeylessConfig, name: &str, servers: &[String]) -> Result<Arc<Self>, String> {
        let connector = crate::tls_setup::connector(&config.client_certificate, &config.client_key, &config.server_ca)?;
        let settings = Arc::new(Settings {
            connector,
            connect_timeout: config.connect_timeout.get(),
            request_timeout: config.request_timeout.get(),
            health_interval: config.health_interval.get(),
            connections_per_server: config.connections_per_server.max(1),
            retries: config.retries,
            failure_threshold: config.failure_threshold.max(1),
            breaker_cooldown: config.breaker_cooldown.get(),
        });
        let client = Arc::new(Self {
            name: name.to_string(),
            settings,
            servers: RwLock::new(Arc::new(Vec::new())),
            change: Mutex::new(()),
        });
        let members: Vec<Member> = servers.iter().map(|a| Member::new(a)).collect();
        client.set_members(&members)?;
        Ok(client)
    }

    fn start_server(&self, member: &Member) -> Arc<ServerState> {
        let addr = &member.address;
        // Members passed `validate_members`, so the address parses; the host goes unbracketed
        // into SNI and the certificate name check.
        let host = OriginAddr::parse_host_port(addr).map_or_else(|_| addr.clone(), |a| a.host.bare());
        let (stop, stop_rx) = watch::channel(false);
        let labels = ServerLabels {
            pool: self.name.clone(),
            server: addr.clone(),
        };
        let m = metrics();
        let hot = HotMetrics {
            ok: m
                .attempts
                .get_or_create(&AttemptLabels {
                    pool: labels.pool.clone(),
                    server: labels.server.clone(),
                    result: "ok",
                })
                .clone(),
            in_flight: m.in_flight.get_or_create(&labels).clone(),
            attempt_duration: m.attempt_duration.get_or_create(&labels).clone(),
        };
        let state = Arc::new(ServerState {
            addr: addr.clone(),
            host,
            settings: self.settings.clone(),
            labels,
            slots: (0..self.settings.connections_per_server)
                .map(|_| RwLock::new(None))
                .collect(),
            outstanding: AtomicUsize::new(0),
            failures: AtomicU32::new(0),
            open_until: Mutex::new(None),
            weight: AtomicU32::new(member.weight),
            drain: AtomicBool::new(member.drain),
            stop,
            hot,
        });
        metrics().hold_server(&state.labels);
        state.apply(member);
        metrics().connections.get_or_create(&state.labels).set(0);
        metrics().circuit_open.get_or_create(&state.labels).set(0);
        for slot in 0..state.slots.len() {
            RUNTIME.spawn(run_slot(state.clone(), slot, stop_rx.clone()));
        }
        state
    }

    /// Replaces the pool's members: kept servers keep their connections (weight and drain are
    /// updated in place), new ones start connecting, removed ones take no new requests and close
    /// once the requests they hold have had `request_timeout` to finish.
    pub fn set_members(&self, members: &[Member]) -> Result<(), String> {
        crate::pools::validate_members(members)?;
        let _change = self.change.lock();
        let old = self.servers.read().clone();
        let mut next = Vec::with_capacity(members.len());
        for member in members {
            match old.iter().find(|s| s.addr == member.address) {
                Some(kept) => {
                    kept.apply(member);
                    next.push(kept.clone());
                }
                None => next.push(self.start_server(member)),
            }
        }
        *self.servers.write() = Arc::new(next);
        for gone in old.iter().filter(|s| !members.iter().any(|m| m.address == s.addr)) {
            let gone = gone.clone();
            let grace = self.settings.request_timeout;
            tracing::info!(pool = %self.name, key_server = %gone.addr, "key server removed from its pool");
            RUNTIME.spawn(async move {
                tokio::time::sleep(grace).await;
                let _ = gone.stop.send(true);
                metrics().forget_server(&gone.labels);
            });
        }
        tracing::info!(pool = %self.name, members = ?members, "key-server pool members set");
        Ok(())
    }

    /// Members and their state now.
    pub fn members(&self) -> Vec<MemberStatus> {
        self.servers.read().iter().map(|s| s.status()).collect()
    }

    /// The least loaded server (requests in flight / weight) among those with a live connection,
    /// preferring, in turn: untried, not drained, closed circuit. Ties are broken at random in
    /// proportion to weight, so an idle pool spreads load by weight.
    fn pick(&self, tried: &[Arc<ServerState>]) -> Option<Choice> {
        let servers = self.servers.read().clone();
        let live: Vec<Choice> = servers
            .iter()
            .filter_map(|s| s.conn().map(|c| (s.clone(), c)))
            .collect();
        let untried = |s: &Arc<ServerState>| !tried.iter().any(|t| Arc::ptr_eq(t, s));
        let serving = |s: &Arc<ServerState>| !s.drain.load(Ordering::Relaxed);
        best(&live, |s| untried(s) && serving(s) && s.circuit_closed())
            .or_else(|| best(&live, |s| untried(s) && serving(s)))
            .or_else(|| best(&live, untried))
            .or_else(|| best(&live, |_| true))
    }

    /// Signs on some key server, retrying elsewhere on failure, timeout or overload.
    pub async fn sign(self: Arc<Self>, key_id: KeyId, algorithm: u16, payload: Vec<u8>) -> Result<Vec<u8>, String> {
        let started = Instant::now();
        let m = metrics();
        let request = Request::Sign {
            key_id,
            algorithm,
            payload,
        };
        let timeout = self.settings.request_timeout;
        let attempts = 1 + self.settings.retries;
        let mut tried: Vec<Arc<ServerState>> = Vec::new();
        let mut last = "no key server is reachable".to_string();
        for attempt in 0..attempts {
            let Some((server, conn)) = self.pick(&tried) else { break };
            if attempt > 0 {
                m.retries.inc();
            }
            tried.push(server.clone());
            let Ok((id, rx)) = conn.request(&request) else {
                last = format!("{}: connection closed", server.addr);
                count(&server, "connection_lost");
                continue;
            };
            let in_flight = &server.hot.in_flight;
            in_flight.inc();
            server.outstanding.fetch_add(1, Ordering::Relaxed);
            conn.outstanding.fetch_add(1, Ordering::Relaxed);
            let sent = Instant::now();
            // The thread's shared timer: no timer-wheel arm (and eventfd wake) per signature.
            let answer = tlsgate_timer::timeout(timeout, rx).await;
            server.outstanding.fetch_sub(1, Ordering::Relaxed);
            conn.outstanding.fetch_sub(1, Ordering::Relaxed);
            in_flight.dec();
            if let Ok(Ok(_)) = &answer {
                server.hot.attempt_duration.observe(sent.elapsed().as_secs_f64());
            }
            match answer {
                Ok(Ok(Response::Signature(sig))) => {
                    server.success();
                    count(&server, "ok");
                    m.sign_duration.observe(started.elapsed().as_secs_f64());
                    return Ok(sig);
                }
                Ok(Ok(Response::Error(
                    code @ (ErrorCode::UnknownKey | ErrorCode::UnsupportedAlgorithm | ErrorCode::Refused),
                ))) => {
                    server.success();
                    count(&server, error_label(code));
                    m.failures.inc();
                    return Err(format!(
                        "key server {} answered {code} for key {}",
                        server.addr,
                        hex(&key_id)
                    ));
                }
                Ok(Ok(other)) => {
                    server.failure();
                    count(
                        &server,
                        match &other {
                            Response::Error(code) => error_label(*code),
                            _ => "other",
                        },
                    );
                    last = format!("{}: {other:?}", server.addr);
                }
                Ok(Err(_)) => {
                    server.failure();
                    count(&server, "connection_lost");
                    last = format!("{}: connection lost", server.addr);
                }
                Err(_) => {
                    conn.cancel(id);
                    server.failure();
                    count(&server, "timeout");
                    last = format!("{}: timed out after {timeout:?}", server.addr);
                }
            }
            tracing::debug!(error = %last, "key server request failed; retrying elsewhere");
        }
        m.failures.inc();
        Err(last)
    }
}

/// A server and the connection a request would use.
type Choice = (Arc<ServerState>, Arc<Conn>);

/// Among `live` servers accepted by `pred`, the least loaded (outstanding / weight); ties at
/// random in proportion to weight.
fn best(live: &[Choice], pred: impl Fn(&Arc<ServerState>) -> bool) -> Option<Choice> {
    let load = |s: &ServerState| {
        (
            s.outstanding.load(Ordering::Relaxed) as u64,
            u64::from(s.weight.load(Ordering::Relaxed).max(1)),
        )
    };
    let candidates: Vec<(&Choice, (u64, u64))> = live
        .iter()
        .filter(|(s, _)| pred(s))
        .map(|entry| (entry, load(&entry.0)))
        .collect();
    // a/b < c/d  <=>  a*d < c*b
    let (low_n, low_w) = candidates
        .iter()
        .map(|(_, l)| *l)
        .min_by(|(a, b), (c, d)| (a * d).cmp(&(c * b)))?;
    let ties: Vec<_> = candidates
        .into_iter()
        .filter(|(_, (n, w))| n * low_w == low_n * w)
        .collect();
    let total: u64 = ties.iter().map(|(_, (_, w))| w).sum();
    let mut ticket = rand::rng().random_range(0..total.max(1));
    for (entry, (_, w)) in &ties {
        if ticket < *w {
            return Some((entry.0.clone(), entry.1.clone()));
        }
        ticket -= w;
    }
    ties.last().map(|(entry, _)| (entry.0.clone(), entry.1.clone()))
}

fn count(server: &ServerState, result: &'static str) {
    if result == "ok" {
        server.hot.ok.inc();
        return;
    }
    metrics()
        .attempts
        .get_or_create(&AttemptLabels {
            pool: server.labels.pool.clone(),
            server: server.labels.server.clone(),
            result,
        })
        .inc();
}

fn error_label(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::UnknownKey => "unknown_key",
        ErrorCode::UnsupportedAlgorithm => "unsupported_algorithm",
        ErrorCode::Overloaded => "overloaded",
        ErrorCode::Internal => "internal",
        ErrorCode::Malformed => "malformed",
        ErrorCode::Refused => "refused",
        _ => "other",
    }
}
