//! One client connection's lifetime, whatever its HTTP version: it ends when the protocol
//! ends it, when it has been idle for `client_idle_timeout`, or finishes gracefully (in-flight
//! requests completed, no new ones) when the gateway drains.

use crate::downstream::io::Activity;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A connection that can be asked to finish gracefully.
pub trait Graceful: Future {
    /// Stop taking new requests; finish the ones in flight.
    fn graceful(self: Pin<&mut Self>);

    /// The connection has been idle a while ([`Timeouts::release_idle`]): give back what it
    /// does not need while it waits (buffers, empty tables), to be taken again when used.
    fn release_idle(self: Pin<&mut Self>) {}
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

impl<C: Graceful + ?Sized> Graceful for Pin<Box<C>> {
    fn graceful(self: Pin<&mut Self>) {
        self.get_mut().as_mut().graceful();
    }

    fn release_idle(self: Pin<&mut Self>) {
        self.get_mut().as_mut().release_idle();
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
    /// Looked at again this soon after a check that saw requests, so that a connection that
    /// went idle is seen idle at two checks in a row within about twice this, and then asked to
    /// [`Graceful::release_idle`] once per idle spell. `None`: never asked (the watchdog keeps
    /// its `idle / 8` pace).
    pub release_idle: Option<Duration>,
}

/// What a check of the [`Timeouts`] asks of the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// Look again after this long.
    Wait(Duration),
    /// Idle since the previous check: release, then look again after this long.
    Release(Duration),
}

/// What the watchdog noted of the per-request counters: since when it has seen the connection
/// with no request in flight and none finishing, and since when with bodies waiting and none
/// taken. The request path only bumps counters; the clock is read here, at each check.
#[derive(Debug, Default)]
struct Seen {
    idle: Option<(u64, Instant)>,
    stall: Option<(u64, Instant)>,
    /// The connection was asked to release in its current idle spell.
    released: bool,
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
    fn check(&self, activity: &Activity, seen: &mut Seen, now: Instant) -> Result<Verdict, &'static str> {
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
        let Some(release) = self.release_idle else {
            return Ok(Verdict::Wait(next.max(Duration::from_millis(10))));
        };
        // Idle at this check and the one before: release, once per idle spell. Otherwise (busy,
        // or idle only since this check) look again soon.
        let idle_since_last = matches!(idle, Some(e) if !e.is_zero());
        if !idle_since_last {
            seen.released = false;
            next = next.min(release);
        }
        let next = next.max(Duration::from_millis(10));
        if idle_since_last && !seen.released {
            seen.released = true;
            return Ok(Verdict::Release(next));
        }
        Ok(Verdict::Wait(next))
    }
}

/// Drives a connection until it ends, closing it when one of its [`Timeouts`] runs out (counted
/// in `client_timeouts_total{reason}`) and finishing it gracefully when the gateway drains.
/// Returns true when the connection ended with an error.
pub async fn drive<C, E>(
    conn: C,
    activity: Arc<Activity>,
    timeouts: Timeouts,
    metrics: Arc<tlsgate_admin::Metrics>,
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
    // One timer per connection, re-armed only when it fires. The first check runs here, not
    // from a timer already due: a timer earlier than every other makes tokio wake its driver
    // through the eventfd (a `write` and an extra `epoll_wait` per connection). It cannot time
    // out or release (nothing has been seen yet); if it did, the timer fires at once.
    let mut seen = Seen::default();
    let first = match timeouts.check(&activity, &mut seen, Instant::now()) {
        Ok(Verdict::Wait(next)) => next,
        Ok(Verdict::Release(_)) | Err(_) => Duration::ZERO,
    };
    let watchdog = tokio::time::sleep(first);
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
            () = &mut watchdog => {
                let next = match timeouts.check(&activity, &mut seen, Instant::now()) {
                    Ok(Verdict::Wait(next)) => next,
                    Ok(Verdict::Release(next)) => {
                        conn.as_mut().release_idle();
                        next
                    }
                    Err(reason) => {
                        metrics
                            .client_timeouts
                            .get_or_create(&tlsgate_admin::metrics::ClientTimeoutLabels { reason })
                            .inc();
                        tracing::debug!(reason, ?timeouts, "closing client connection: timed out");
                        return false;
                    }
                };
                watchdog.as_mut().reset(tokio::time::Instant::now() + next);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn timeouts(release_idle: Option<Duration>) -> Timeouts {
        Timeouts {
            idle: Duration::from_secs(80),
            header: None,
            send: Duration::from_secs(80),
            release_idle,
        }
    }

    #[test]
    fn an_idle_connection_is_released_once_per_idle_spell_at_the_second_idle_check() {
        let t = timeouts(Some(Duration::from_secs(1)));
        let activity = Activity::new();
        let mut seen = Seen::default();
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        // Busy: looked at again within the release interval, never released.
        activity.request_started();
        assert_eq!(
            t.check(&activity, &mut seen, at(0)),
            Ok(Verdict::Wait(Duration::from_secs(1)))
        );
        assert_eq!(
            t.check(&activity, &mut seen, at(1)),
            Ok(Verdict::Wait(Duration::from_secs(1)))
        );
        // Idle from here: first seen idle, then idle since the check before: released once.
        activity.request_finished();
        assert_eq!(
            t.check(&activity, &mut seen, at(2)),
            Ok(Verdict::Wait(Duration::from_secs(1)))
        );
        assert_eq!(
            t.check(&activity, &mut seen, at(3)),
            Ok(Verdict::Release(Duration::from_secs(10)))
        );
        assert_eq!(
            t.check(&activity, &mut seen, at(13)),
            Ok(Verdict::Wait(Duration::from_secs(10)))
        );
        // A request in between starts a new idle spell, released again.
        activity.request_started();
        activity.request_finished();
        assert_eq!(
            t.check(&activity, &mut seen, at(14)),
            Ok(Verdict::Wait(Duration::from_secs(1)))
        );
        assert_eq!(
            t.check(&activity, &mut seen, at(15)),
            Ok(Verdict::Release(Duration::from_secs(10)))
        );
        // The idle timeout still runs from the start of the spell.
        assert_eq!(t.check(&activity, &mut seen, at(94)), Err("idle"));
    }

    #[test]
    fn without_release_the_watchdog_keeps_its_pace() {
        let t = timeouts(None);
        let activity = Activity::new();
        let mut seen = Seen::default();
        let start = Instant::now();
        for s in [0, 10, 20] {
            let verdict = t.check(&activity, &mut seen, start + Duration::from_secs(s));
            assert_eq!(verdict, Ok(Verdict::Wait(Duration::from_secs(10))));
        }
    }
}
