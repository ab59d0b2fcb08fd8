//! One client connection's lifetime, whatever its HTTP version: it ends when the protocol
//! ends it, when it has been idle for `client_idle_timeout`, or finishes gracefully (in-flight
//! requests completed, no new ones) when the gateway drains.

use crate::downstream::io::Activity;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A hyper connection that can be asked to finish gracefully.
pub trait Graceful: Future {
    /// Stop taking new requests; finish the ones in flight.
    fn graceful(self: Pin<&mut Self>);
}

impl<I, S, B> Graceful for hyper::server::conn::http1::Connection<I, S>
where
    S: hyper::service::HttpService<hyper::body::Incoming, ResBody = B>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
    B: hyper::body::Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    fn graceful(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

impl<I, S, B, E> Graceful for hyper::server::conn::http2::Connection<I, S, E>
where
    S: hyper::service::HttpService<hyper::body::Incoming, ResBody = B>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
    B: hyper::body::Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    E: hyper::rt::bounds::Http2ServerConnExec<S::Future, B>,
{
    fn graceful(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

/// How long a connection goes on being served once the gateway drains, before it is asked to
/// finish. A keep-alive HTTP/1.1 client sends its next request as soon as a response arrives;
/// closing its idle connection at once (hyper's graceful shutdown of an idle connection) would
/// fail a request already on its way. Requests that start while draining are answered with
/// `Connection: close` instead (`conn`), so a busy connection ends after its next response and
/// only one that stays idle this long is closed. HTTP/2 connections get their GOAWAY after it.
pub const DRAIN_GRACE: Duration = Duration::from_secs(1);

/// The timeouts a connection's watchdog enforces.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// No request in flight and none arriving for this long: closed (`idle`).
    pub idle: Duration,
    /// An HTTP/2 header block open for this long: closed (`header`). HTTP/1.1's header timeout
    /// is hyper's own (`header_read_timeout`).
    pub header: Option<Duration>,
    /// The client accepted none of our bytes for this long: closed (`send`).
    pub send: Duration,
}

/// What the watchdog noted of the per-request counters: since when it has seen the connection
/// with no request in flight and none finishing, and since when with bodies waiting and none
/// taken. The request path only bumps counters; the clock is read here, at each check.
#[derive(Debug, Default)]
struct Seen {
    idle: Option<(u64, Instant)>,
    stall: Option<(u64, Instant)>,
}

impl Seen {
    /// How long `state` has held unchanged (`key` the counter that would show a change), or
    /// `None` when it does not hold; notes it first seen `now` otherwise.
    fn held(slot: &mut Option<(u64, Instant)>, holds: bool, key: u64, now: Instant) -> Option<Duration> {
        if !holds {
            *slot = None;
            return None;
        }
        match *slot {
            Some((k, since)) if k == key => Some(now - since),
            _ => {
                *slot = Some((key, now));
                Some(Duration::ZERO)
            }
        }
    }
}

impl Timeouts {
    /// The first timeout that has run out, with its metric label, or how long to wait before
    /// looking again. A state this check sees for the first time began at most one wait
    /// earlier, so the waits bound the error: a timeout whose state does not hold now is looked
    /// at again within an eighth of its length (a quarter for the header timeout, whose start is
    /// stamped exactly), and the idle timeout, whose end of requests is only seen through a
    /// counter, always within an eighth. Each timeout so fires within 12.5 % (25 %) of its
    /// length; a connection's watchdog wakes about every `client_idle_timeout / 8`.
    fn check(&self, activity: &Activity, seen: &mut Seen, now: Instant) -> Result<Duration, &'static str> {
        let p = activity.progress();
        let mut next = self.idle / 8;
        let mut run = |elapsed: Option<Duration>, limit: Duration, unheld: u32, reason: &'static str| {
            match elapsed {
                Some(e) if e >= limit => return Err(reason),
                Some(e) => next = next.min(limit - e),
                None => next = next.min(limit / unheld),
            }
            Ok(())
        };
        let body_stall = Seen::held(&mut seen.stall, p.bodies_waiting > 0, p.bodies_taken, now);
        let stalled = match (activity.write_blocked_for(), body_stall) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        run(stalled, self.send, 8, "send")?;
        if let Some(header) = self.header {
            run(activity.header_open_for(), header, 4, "header")?;
        }
        let idle = Seen::held(&mut seen.idle, p.in_flight == 0, p.finished, now);
        run(idle, self.idle, 8, "idle")?;
        Ok(next.max(Duration::from_millis(10)))
    }
}

/// Drives a connection until it ends, closing it when one of its [`Timeouts`] runs out (counted
/// in `client_timeouts_total{reason}`) and finishing it gracefully when the gateway drains.
/// Returns true when the connection ended with an error.
pub async fn drive<C, E>(
    conn: C,
    activity: Arc<Activity>,
    timeouts: Timeouts,
    metrics: &tlsgate_admin::Metrics,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) -> bool
where
    C: Graceful<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    tokio::pin!(conn);
    let mut draining = *shutdown.borrow();
    // Armed when the drain begins (allocated only then): `DRAIN_GRACE`, then graceful.
    let mut grace: Option<Pin<Box<tokio::time::Sleep>>> = draining.then(|| Box::pin(tokio::time::sleep(DRAIN_GRACE)));
    // One timer per connection, re-armed only when it fires.
    let watchdog = async {
        let mut seen = Seen::default();
        loop {
            match timeouts.check(&activity, &mut seen, Instant::now()) {
                Ok(wait) => tokio::time::sleep(wait).await,
                Err(reason) => return reason,
            }
        }
    };
    tokio::pin!(watchdog);
    loop {
        tokio::select! {
            res = conn.as_mut() => {
                return match res {
                    Ok(()) => false,
                    Err(e) => {
                        tracing::debug!(error = %e, "client connection ended with an error");
                        true
                    }
                };
            }
            reason = &mut watchdog => {
                metrics
                    .client_timeouts
                    .get_or_create(&tlsgate_admin::metrics::ClientTimeoutLabels { reason })
                    .inc();
                tracing::debug!(reason, ?timeouts, "closing client connection: timed out");
                return false;
            }
            changed = shutdown.changed(), if !draining => {
                if changed.is_err() || *shutdown.borrow() {
                    draining = true;
                    grace = Some(Box::pin(tokio::time::sleep(DRAIN_GRACE)));
                }
            }
            () = async { if let Some(g) = grace.as_mut() { g.await } }, if grace.is_some() => {
                grace = None;
                conn.as_mut().graceful();
            }
        }
    }
}
