//! One key server of a gateway's pool ([`ServerState`]): its connection slots, load, weight and
//! drain, its circuit breaker ([`tlsgate_timer::Breaker`], on trial again after
//! `breaker_cooldown`), its metric series, and the task that keeps each connection slot filled
//! ([`run_slot`]: connect, prove, serve, reconnect with backoff).

use crate::client_conn::{Conn, ConnSettings};
use crate::client_metrics::{metrics, AttemptLabels, ServerLabels};
use crate::members::{host_of, Member, MemberStatus};
use parking_lot::RwLock;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tlsgate_timer::Breaker;
use tokio::sync::watch;

/// Settings shared by every server and connection of a client.
pub struct Settings {
    /// What connections need.
    pub conn: ConnSettings,
    /// Longest wait for one signature before it is retried on another key server.
    pub request_timeout: Duration,
    /// Connection slots per server.
    pub connections_per_server: usize,
    /// Further attempts on other servers after a failed one.
    pub retries: usize,
    /// Consecutive failures that open a server's circuit.
    pub failure_threshold: u32,
    /// How long an open circuit skips its server before it is tried again.
    pub breaker_cooldown: Duration,
    /// Bumped whenever a connection comes up or a server's first connection attempt ends:
    /// what a signature waiting for a starting pool watches ([`ServerState::starting`]).
    pub(crate) events: watch::Sender<u64>,
}

impl Settings {
    /// Wakes signatures waiting for the pool to come up.
    fn announce(&self) {
        self.events.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// One key server of a pool.
pub struct ServerState {
    /// `host:port`.
    pub addr: String,
    /// Host name checked against its certificate.
    pub host: String,
    pub(crate) settings: Arc<Settings>,
    pub(crate) labels: ServerLabels,
    slots: Vec<RwLock<Option<Arc<Conn>>>>,
    /// Requests in flight on this server.
    pub(crate) outstanding: AtomicUsize,
    breaker: Breaker,
    pub(crate) weight: AtomicU32,
    pub(crate) drain: AtomicBool,
    stop: watch::Sender<bool>,
    /// Its first connection attempt has ended (up or failed); until then a signature with no
    /// live connection anywhere waits for it instead of failing at once.
    settled: AtomicBool,
    /// This server's series of the per-attempt metrics, looked up once (no label hashing and
    /// no label-string copies per signature).
    pub(crate) hot: HotMetrics,
}

/// The per-attempt series of one server.
pub(crate) struct HotMetrics {
    pub(crate) ok: Counter,
    pub(crate) in_flight: Gauge,
    pub(crate) attempt_duration: Histogram,
}

impl ServerState {
    /// The state of `member` of pool `pool`, holding its metric series; [`run_slot`] must then
    /// be spawned for every slot with the receiver returned.
    pub(crate) fn new(pool: &str, member: &Member, settings: Arc<Settings>) -> (Arc<Self>, watch::Receiver<bool>) {
        let addr = &member.address;
        let (stop, stop_rx) = watch::channel(false);
        let labels = ServerLabels {
            pool: pool.to_string(),
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
            // Members passed `validate_members`, so the address parses; the host goes
            // unbracketed into SNI and the certificate name check.
            host: host_of(addr),
            labels,
            slots: (0..settings.connections_per_server.max(1))
                .map(|_| RwLock::new(None))
                .collect(),
            outstanding: AtomicUsize::new(0),
            breaker: Breaker::new(
                settings.failure_threshold,
                tlsgate_timer::Recovery::Cooldown(settings.breaker_cooldown),
            ),
            weight: AtomicU32::new(member.weight),
            drain: AtomicBool::new(member.drain),
            stop,
            settled: AtomicBool::new(false),
            hot,
            settings,
        });
        m.hold_server(&state.labels);
        state.apply(member);
        m.connections.get_or_create(&state.labels).set(0);
        m.circuit_open.get_or_create(&state.labels).set(0);
        (state, stop_rx)
    }

    /// How many connection slots it keeps.
    pub(crate) fn slot_count(&self) -> usize {
        self.slots.len()
    }

    fn set_slot(&self, slot: usize, conn: Option<Arc<Conn>>) {
        let up = conn.is_some();
        *self.slots[slot].write() = conn;
        let live = self.slots.iter().filter(|s| s.read().is_some()).count();
        metrics().connections.get_or_create(&self.labels).set(live as i64);
        if up {
            self.settle();
        }
    }

    /// Marks its first connection attempt as ended and wakes waiting signatures.
    fn settle(&self) {
        self.settled.store(true, Ordering::Release);
        self.settings.announce();
    }

    /// Still on its first connection attempt (a new member, or a gateway just started).
    pub(crate) fn starting(&self) -> bool {
        !self.settled.load(Ordering::Acquire) && !*self.stop.borrow()
    }

    /// Forgets slot `slot`'s connection without touching metrics (the server is going away).
    fn clear_slot(&self, slot: usize) {
        if let Some(conn) = self.slots[slot].write().take() {
            conn.close();
        }
    }

    /// Stops every slot's task and, once no other state shares its labels, drops its series.
    pub(crate) fn stop(&self) {
        let _ = self.stop.send(true);
        metrics().forget_server(&self.labels);
    }

    /// The live connection with the fewest requests in flight.
    pub(crate) fn conn(&self) -> Option<Arc<Conn>> {
        self.slots
            .iter()
            .filter_map(|s| s.read().clone())
            .filter(|c| c.alive())
            .min_by_key(|c| c.outstanding.load(Ordering::Relaxed))
    }

    /// Whether requests may go to it: circuit closed, or on trial after its cooldown.
    pub(crate) fn circuit_closed(&self) -> bool {
        self.breaker.allows()
    }

    /// It answered: resets the failure count and closes an open circuit.
    pub(crate) fn success(&self) {
        if self.breaker.success() {
            metrics().circuit_open.get_or_create(&self.labels).set(0);
        }
    }

    /// It failed (connection, timeout, error answer); opens the circuit after
    /// `failure_threshold` in a row, and again after a failed trial.
    pub(crate) fn failure(&self) {
        if self.breaker.failure() {
            tracing::warn!(key_server = %self.addr, threshold = self.settings.failure_threshold, "key server circuit open");
            metrics().circuit_open.get_or_create(&self.labels).set(1);
        }
    }

    /// Takes `member`'s weight and drain flag.
    pub(crate) fn apply(&self, member: &Member) {
        self.weight.store(member.weight, Ordering::Relaxed);
        self.drain.store(member.drain, Ordering::Relaxed);
        let m = metrics();
        m.weight.get_or_create(&self.labels).set(i64::from(member.weight));
        m.drained.get_or_create(&self.labels).set(i64::from(member.drain));
    }

    /// What the admin API shows.
    pub(crate) fn status(&self) -> MemberStatus {
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

/// Keeps slot `slot` of `server` connected until `stop` fires.
pub(crate) async fn run_slot(server: Arc<ServerState>, slot: usize, mut stop: watch::Receiver<bool>) {
    let mut backoff = Duration::from_millis(50);
    loop {
        let attempt = tokio::select! {
            r = connect_and_serve(&server, slot) => r,
            _ = stop.changed() => {
                // Dropping the connection closes its writer, then the socket.
                server.clear_slot(slot);
                return;
            }
        };
        match attempt {
            Ok(()) => {
                tracing::info!(key_server = %server.addr, slot, "key server connection closed");
                backoff = Duration::from_millis(50);
            }
            Err(e) => {
                server.failure();
                server.settle();
                if slot == 0 {
                    tracing::warn!(key_server = %server.addr, error = %e, kind = tlsgate_error::Classify::kind(&e), "key server connection failed");
                }
            }
        }
        server.set_slot(slot, None);
        let wait = tokio::time::sleep(backoff);
        tokio::select! {
            _ = wait => {}
            _ = stop.changed() => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
}

/// Connects, proves the connection with a ping, installs it, serves it until it dies.
/// `Ok(())` means it was up and then went down.
async fn connect_and_serve(server: &Arc<ServerState>, slot: usize) -> Result<(), crate::client_conn::ConnError> {
    let settings = &server.settings.conn;
    let link = crate::client_conn::connect(settings, &server.addr, &server.host).await?;
    let conn = link.conn.clone();
    link.serve(settings, || {
        server.set_slot(slot, Some(conn));
        server.success();
        if slot == 0 {
            tracing::info!(key_server = %server.addr, "key server connected");
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use boring::ssl::{SslConnector, SslMethod};

    fn server(threshold: u32, cooldown: Duration) -> Arc<ServerState> {
        let settings = Arc::new(Settings {
            conn: ConnSettings {
                connector: SslConnector::builder(SslMethod::tls()).unwrap().build(),
                connect_timeout: Duration::from_secs(1),
                health_interval: Duration::from_secs(1),
            },
            request_timeout: Duration::from_secs(1),
            connections_per_server: 2,
            retries: 0,
            failure_threshold: threshold,
            breaker_cooldown: cooldown,
            events: watch::channel(0).0,
        });
        ServerState::new("breaker-test", &Member::new("[::1]:2407"), settings).0
    }

    #[test]
    fn circuit_opens_after_the_threshold_goes_on_trial_after_the_cooldown_and_closes_on_success() {
        let cooldown = Duration::from_millis(40);
        let s = server(2, cooldown);
        let gauge = || metrics().circuit_open.get_or_create(&s.labels).get();
        assert_eq!((s.host.as_str(), s.slot_count()), ("::1", 2));
        assert!(s.circuit_closed() && !s.status().circuit_open);
        s.failure();
        assert!(s.circuit_closed(), "one failure of two");
        s.failure();
        assert!(!s.circuit_closed() && s.status().circuit_open);
        assert_eq!(gauge(), 1);
        std::thread::sleep(cooldown + Duration::from_millis(10));
        assert!(s.circuit_closed(), "on trial after the cooldown");
        assert_eq!(gauge(), 1, "the gauge stays up until a success");
        s.failure();
        assert!(!s.circuit_closed(), "a failed trial opens it again");
        s.success();
        assert!(s.circuit_closed());
        assert_eq!(gauge(), 0);
        s.stop();
    }
}
