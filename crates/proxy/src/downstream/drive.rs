//! One client connection's lifetime, whatever its HTTP version: it ends when the protocol
//! ends it, when it has been idle for `client_idle_timeout`, or finishes gracefully (in-flight
//! requests completed, no new ones) when the gateway drains.

use crate::downstream::io::Activity;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

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

impl Timeouts {
    /// The first timeout that has run out, with its metric label, or how long until one could.
    fn check(&self, activity: &Activity) -> Result<Duration, &'static str> {
        // A condition that is not present now can start at once and then run its whole length.
        let mut next = self.send.min(self.idle);
        let mut run = |elapsed: Option<Duration>, limit: Duration, reason: &'static str| match elapsed {
            Some(e) if e >= limit => Err(reason),
            Some(e) => {
                next = next.min(limit - e);
                Ok(())
            }
            None => {
                next = next.min(limit);
                Ok(())
            }
        };
        run(activity.client_stalled_for(), self.send, "send")?;
        if let Some(header) = self.header {
            run(activity.header_open_for(), header, "header")?;
        }
        run(activity.no_request_for(), self.idle, "idle")?;
        Ok(next)
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
    if draining {
        conn.as_mut().graceful();
    }
    // One timer per connection, re-armed only when it fires.
    let watchdog = async {
        loop {
            match timeouts.check(&activity) {
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
                    conn.as_mut().graceful();
                }
            }
        }
    }
}
