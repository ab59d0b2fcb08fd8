//! One origin server as the group sees it: its address and scheme, its connections, the requests
//! in flight to it (what `least_conn` compares), the passive-health mark that skips it for
//! `fail_timeout` after `max_fails` failures in a row (connect, TLS, a reset before the
//! response), and the verdict of the active health check (`[upstream.health_check]`, kept up to
//! date by [`super::health`]); its connections ([`super::conns`]: the PROXY header its
//! group sends, the connection limit and queue) and whether it has room under that limit.

use super::conns::ServerConns;
use super::UpstreamGroup;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tlsgate_config::OriginAddr;
use tlsgate_error::log_limit::LogLimit;

/// One origin server.
#[derive(Debug)]
pub struct UpstreamServer {
    /// `host:port`.
    pub authority: http::uri::Authority,
    /// The host to connect to and check the certificate against (no brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// Reached over TLS (`https://`).
    pub tls: bool,
    /// `host:port`, shared by logs, errors and the TLS session kept for the server.
    pub key: Arc<str>,
    /// Its pooled connections.
    pub(super) conns: ServerConns,
    pub(super) in_flight: AtomicUsize,
    /// Milliseconds since the group's epoch until which the server is skipped.
    pub(super) down_until_ms: AtomicU64,
    /// Failures in a row since the last response (or the last time they marked it down).
    fails: AtomicU32,
    /// The active health check's verdict: [`UNCHECKED`], [`HEALTHY`] or [`UNHEALTHY`].
    active: AtomicU8,
    /// The log lines of the server's failed requests: at most one a second (every request to a
    /// dead origin fails; a line each would flood the log at the request rate).
    pub(super) failure_log: LogLimit,
    /// A request is trying the server while it is marked down: the others do not pile up on
    /// it meanwhile ([`UpstreamServer::try_trial`]).
    trial: AtomicBool,
}

/// No active health check runs for the server's group.
const UNCHECKED: u8 = 0;
/// The active health check passes (or has not failed `fall` times in a row yet).
const HEALTHY: u8 = 1;
/// The active health check failed `fall` times in a row (and has not passed `rise` times since).
const UNHEALTHY: u8 = 2;

impl UpstreamServer {
    /// A server that is up and idle, at `addr`.
    pub fn new(addr: &OriginAddr) -> Result<Self, http::uri::InvalidUri> {
        let text = addr.authority();
        Ok(Self {
            authority: text.parse()?,
            host: addr.host.bare(),
            port: addr.port,
            tls: addr.tls,
            key: Arc::from(text.as_str()),
            conns: ServerConns::default(),
            in_flight: AtomicUsize::new(0),
            down_until_ms: AtomicU64::new(0),
            fails: AtomicU32::new(0),
            active: AtomicU8::new(UNCHECKED),
            failure_log: LogLimit::new(Duration::from_secs(1)),
            trial: AtomicBool::new(false),
        })
    }

    /// The server as a member of the group `config`: its PROXY header and connection limit.
    pub fn for_group(mut self, config: &tlsgate_config::UpstreamConfig) -> Self {
        self.conns = ServerConns::for_group(config);
        self
    }

    /// Requests in flight to this server now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// False while the server has a connection limit and as many requests in flight (sent or
    /// queued) as it allows connections: what the balancer avoids when another server has room.
    pub fn has_room(&self) -> bool {
        let max = self.conns.slots.max();
        max == 0 || self.in_flight() < max
    }

    /// True when a connection limit applies to this server.
    pub fn limited(&self) -> bool {
        self.conns.limited()
    }

    /// True when its connections start with a PROXY header (requests bring their pair).
    pub fn sends_proxy(&self) -> bool {
        self.conns.sends_proxy()
    }

    /// True unless a failure marked the server down until after `now_ms` or the active health
    /// check finds it unhealthy.
    pub fn is_up(&self, now_ms: u64) -> bool {
        self.down_until_ms.load(Ordering::Relaxed) <= now_ms && self.passes_check()
    }

    /// False only while the active health check finds the server unhealthy (always true for a
    /// group without one).
    pub fn passes_check(&self) -> bool {
        self.active.load(Ordering::Relaxed) != UNHEALTHY
    }

    /// The active health check's verdict: `None` for a group without one.
    pub fn health(&self) -> Option<bool> {
        match self.active.load(Ordering::Relaxed) {
            UNCHECKED => None,
            state => Some(state == HEALTHY),
        }
    }

    /// Records the active health check's verdict (from then on [`UpstreamServer::health`] is
    /// `Some`).
    pub(super) fn set_health(&self, healthy: bool) {
        self.active
            .store(if healthy { HEALTHY } else { UNHEALTHY }, Ordering::Relaxed);
    }

    /// For a request sent to the server while it is marked down (every server of the group is):
    /// the right to try it, held until the guard is dropped, or `None` while another request
    /// holds it. One connect at a time to a server that is down, not one per request.
    pub(super) fn try_trial(self: &Arc<Self>) -> Option<Trial> {
        self.trial
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
            .then(|| Trial(self.clone()))
    }

    /// The server answered (a new connection established, a response): a passive down mark
    /// ends now instead of at its `fail_timeout`, and the requests the balancer sent around it
    /// come back (nginx: a success resets the failures that took a server out).
    pub fn mark_up(&self) {
        // Read first: the server is up nearly always, and a load keeps the cache line shared.
        if self.down_until_ms.load(Ordering::Relaxed) != 0 {
            self.down_until_ms.store(0, Ordering::Relaxed);
        }
    }

    /// True while a passive mark (`max_fails`) skips the server; `now_ms` is read only when a
    /// mark is set, so the usual case (never marked, or answered since) costs no clock read.
    pub(super) fn marked_down(&self, now_ms: impl FnOnce() -> u64) -> bool {
        let until = self.down_until_ms.load(Ordering::Relaxed);
        until != 0 && until > now_ms()
    }

    /// Skips the server until `until_ms` (passive ejection after a failed connect).
    pub fn mark_down_until(&self, until_ms: u64) {
        self.down_until_ms.store(until_ms, Ordering::Relaxed);
    }

    /// Counts one failure of the server (a connect or TLS failure, or its connection reset or
    /// closed before the response) at `now_ms`. The `max_fails`-th in a row marks it down until
    /// `until_ms` and starts a new count; the answer says whether this one did, and whether the
    /// server was up until then. `max_fails` 0: never marked down.
    pub fn record_failure(&self, max_fails: u32, now_ms: u64, until_ms: u64) -> Marked {
        if max_fails == 0 {
            return Marked::No;
        }
        let fails = self.fails.fetch_add(1, Ordering::Relaxed).saturating_add(1);
        if fails < max_fails {
            return Marked::No;
        }
        self.fails.store(0, Ordering::Relaxed);
        let was_down = self.down_until_ms.swap(until_ms, Ordering::Relaxed) > now_ms;
        if was_down {
            Marked::Again
        } else {
            Marked::Down
        }
    }

    /// Whether to write the log line of a failure that did `marked`: always when it marked the
    /// server down, otherwise at most one line a second. `Some(n)`: write it, and say that `n`
    /// lines were left out since the last.
    pub(super) fn failure_line(&self, marked: Marked) -> Option<u64> {
        match marked {
            Marked::Down => Some(self.failure_log.always()),
            Marked::No | Marked::Again => self.failure_log.allow(),
        }
    }

    /// A response arrived from the server: its failures are no longer in a row, and it is up.
    pub fn record_success(&self) {
        // Read first: most servers have no failures, and a load keeps the cache line shared.
        if self.fails.load(Ordering::Relaxed) != 0 {
            self.fails.store(0, Ordering::Relaxed);
        }
        self.mark_up();
    }

    /// Failures in a row counted now.
    pub fn failures(&self) -> u32 {
        self.fails.load(Ordering::Relaxed)
    }
}

/// The right to try a server that is marked down ([`UpstreamServer::try_trial`]), given back
/// when dropped (the attempt ended, or its request went away).
pub(super) struct Trial(Arc<UpstreamServer>);

impl Drop for Trial {
    fn drop(&mut self) {
        self.0.trial.store(false, Ordering::Release);
    }
}

/// What one failure did to its server's passive-health mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marked {
    /// Not marked down (fewer than `max_fails` in a row, or passive ejection off).
    No,
    /// Marked down; it was up until now (a change worth a log line of its own).
    Down,
    /// Marked down again while still down: a request tried it anyway (every server of the
    /// group was down, so one request at a time does), or it was in flight when the mark came.
    Again,
}

/// One request counted in its server's `in_flight` (what `least_conn` compares), from before it
/// is sent until the guard is dropped: with the response body's end, or whenever the request is
/// given up (its future dropped when the client goes away or resets the stream).
pub(super) struct InFlight {
    group: Arc<UpstreamGroup>,
    idx: usize,
}

impl InFlight {
    pub(super) fn enter(group: &Arc<UpstreamGroup>, idx: usize) -> Self {
        group.servers[idx].in_flight.fetch_add(1, Ordering::Relaxed);
        Self {
            group: group.clone(),
            idx,
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.group.servers[self.idx].in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Copies every current server's open connections into `tlsgate_upstream_connections` and each
/// group's queued requests into `tlsgate_upstream_queued` (groups with a connection limit only),
/// at scrape time; servers no longer configured disappear.
pub fn export_connections(gateway: &crate::Gateway) {
    use tlsgate_admin::metrics::{intern, InFlightLabels, UpstreamLabels};
    let metrics = &gateway.metrics;
    metrics.upstream_connections.clear();
    metrics.upstream_queued.clear();
    for group in &gateway.current().upstreams {
        let mut queued = 0;
        for server in &group.servers {
            let (open, max, waiting) = server.conns.counts();
            let labels = InFlightLabels {
                upstream: group.label,
                server: intern(server.authority.as_str()),
            };
            metrics.upstream_connections.get_or_create(&labels).set(open as i64);
            if max > 0 {
                queued += waiting;
            }
        }
        if group.servers.iter().any(|s| s.limited()) {
            let labels = UpstreamLabels { upstream: group.label };
            metrics.upstream_queued.get_or_create(&labels).set(queued as i64);
        }
    }
}
