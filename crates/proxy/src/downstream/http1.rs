//! HTTP/1.1 toward a client: hyper's server connection with keep-alive, the request-header
//! timeout and size limit (431 above it), a lingering close after an error response, and
//! upgrades taken over by hand: when a request handler left a tunnel in the connection's
//! [`TunnelSlot`] (the origin answered `101`), hyper stops after sending the `101` and this
//! task copies between the client and the origin (`upstream::tunnel`).
//!
//! A keep-alive connection that waits for its next request longer than
//! [`park::RELEASE_AFTER`] gives hyper's connection back (its buffers, dispatcher and timer)
//! and waits for the socket to become readable with nothing allocated; the next request gets a
//! new hyper connection with the same service ([`park`]).

use crate::context::ConnContext;
use crate::downstream::drive::{drive, Graceful, Timeouts};
use crate::downstream::io::{Activity, MeteredStream};
use crate::downstream::park::{self, HeadTimer, ParkIo, ParkState, ParkedWait};
use crate::downstream::records::RecordSizer;
use bytes::Bytes;
use hyper::server::conn::http1::Connection;
use hyper_util::rt::TokioIo;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tlsgate_config::ServerConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What of `[server]` an HTTP/1.1 connection reads: copied, so that the connection's future
/// borrows nothing and holds no generation.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    header_timeout: Duration,
    idle_timeout: Duration,
    send_timeout: Duration,
    max_header_bytes: usize,
}

impl Limits {
    /// The limits `server` sets.
    pub fn of(server: &ServerConfig) -> Self {
        Self {
            header_timeout: server.client_header_timeout.get(),
            idle_timeout: server.client_idle_timeout.get(),
            send_timeout: server.client_send_timeout.get(),
            max_header_bytes: server.max_request_header_bytes,
        }
    }
}

/// Serves HTTP/1.1 requests on `tls` with `service` until the connection ends (or becomes a
/// tunnel left in `ctx`'s tunnel slot).
pub async fn serve<S>(
    mut tls: RecordSizer,
    service: S,
    limits: Limits,
    ctx: Arc<ConnContext>,
    activity: Arc<Activity>,
    shutdown: tokio::sync::watch::Receiver<bool>,
) where
    S: hyper::service::HttpService<hyper::body::Incoming> + Unpin,
    S::Future: Unpin,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    S::ResBody: 'static,
    <S::ResBody as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let metrics = ctx.gateway.metrics.clone();
    let park = ParkState::new();
    let mut b = hyper::server::conn::http1::Builder::new();
    b.timer(HeadTimer::new(park.clone(), park::RELEASE_AFTER, limits.header_timeout))
        .keep_alive(true)
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(limits.max_header_bytes.max(8192));
    let timeouts = Timeouts {
        idle: limits.idle_timeout,
        header: None,
        send: limits.send_timeout,
        // hyper's connection is given back whole after `park::RELEASE_AFTER` instead.
        release_idle: None,
    };
    let mut service = service;
    let mut rewind = Bytes::new();
    loop {
        let (failed, done, parts) = {
            let io = ParkIo::new(&mut tls, park.clone(), std::mem::take(&mut rewind));
            // Boxed: the connection's task then holds hyper's state only while hyper runs.
            let mut conn = Manual {
                conn: Some(Box::new(b.serve_connection(TokioIo::new(io), service))),
                done: false,
                park: &park,
            };
            let failed = drive(&mut conn, activity.clone(), timeouts, metrics.clone(), shutdown.clone()).await;
            (failed, conn.done, conn.conn.take().map(|c| c.into_parts()))
        };
        if park.take_parked() {
            let Some(hyper::server::conn::http1::Parts {
                io,
                read_buf,
                service: s,
                ..
            }) = parts
            else {
                return;
            };
            drop(io);
            // hyper waited for a request head: keep what it had of one (copied: the buffer
            // itself is hyper's 8 KiB), drop the rest before waiting.
            if !read_buf.is_empty() {
                rewind = Bytes::copy_from_slice(&read_buf);
            }
            drop(read_buf);
            service = s;
            match wait_parked(&mut tls, &activity, timeouts, &metrics, &shutdown).await {
                Parked::Readable => continue,
                // Drained: as hyper ends an idle connection when asked to finish.
                Parked::Finished => {
                    shutdown_within(&mut tls, limits.send_timeout, &metrics).await;
                    return;
                }
                Parked::Closed => return,
            }
        }
        let finished = done && !failed;
        let read_ahead = parts.map(|p| p.read_buf);
        if failed {
            linger(tls.raw_mut()).await;
            return;
        }
        if !finished {
            return;
        }
        match ctx.tunnels.take() {
            Some(tunnel) => {
                // Boxed, as the rare path: the task is not sized for the copy's state.
                if let Err(e) = Box::pin(tunnel.run(&mut tls, read_ahead.unwrap_or_default())).await {
                    tracing::debug!(error = %e, "tunnel ended with an error");
                }
            }
            // What hyper does at the end of a connection it shuts down itself: close_notify,
            // with the response's end held for it (`io`). A 0-RTT request answered before the
            // client's Finished arrived: the client is still to send it, and closing before
            // reading it would answer it with a reset; linger instead.
            None => {
                let early = tls.awaits_client_finished();
                shutdown_within(&mut tls, limits.send_timeout, &metrics).await;
                if early {
                    linger(tls.raw_mut()).await;
                }
            }
        }
        return;
    }
}

/// Ends the TLS stream (close_notify, after what the stream below held for the close) within
/// the send timeout: a client that reads nothing cannot keep the connection. Running out is a
/// send timeout like one while the response was written (`client_timeouts_total{reason="send"}`).
async fn shutdown_within(tls: &mut RecordSizer, limit: Duration, metrics: &tlsgate_admin::Metrics) {
    if tokio::time::timeout(limit, tls.shutdown()).await.is_err() {
        metrics
            .client_timeouts
            .get_or_create(&tlsgate_admin::metrics::ClientTimeoutLabels { reason: "send" })
            .inc();
        tracing::debug!(
            ?limit,
            "closing client connection: its last bytes were not taken within the send timeout"
        );
    }
}

/// How a parked connection's wait ended.
enum Parked {
    /// Bytes (or the client's end of the stream) arrived: a new hyper connection reads them.
    Readable,
    /// The gateway drains.
    Finished,
    /// The idle timeout ran out, or the socket failed.
    Closed,
}

/// Waits, holding no buffer, until the parked connection's socket becomes readable, under the
/// connection's idle timeout (counted from the start of the wait for a request, which began
/// [`park::RELEASE_AFTER`] ago) and the drain.
async fn wait_parked(
    tls: &mut RecordSizer,
    activity: &Arc<Activity>,
    timeouts: Timeouts,
    metrics: &Arc<tlsgate_admin::Metrics>,
    shutdown: &tokio::sync::watch::Receiver<bool>,
) -> Parked {
    let mut wait = ParkedWait::new(tls.raw_mut().get_ref());
    let left = Timeouts {
        idle: timeouts.idle.saturating_sub(park::RELEASE_AFTER),
        ..timeouts
    };
    let failed = {
        let _released = park::ReleasedMark::new(metrics, "http1");
        drive(&mut wait, activity.clone(), left, metrics.clone(), shutdown.clone()).await
    };
    if failed {
        Parked::Closed
    } else if wait.readable {
        Parked::Readable
    } else if wait.finishing {
        Parked::Finished
    } else {
        Parked::Closed
    }
}

/// hyper's connection polled without its final shutdown, so that an upgrade can take the
/// socket over ([`Connection::poll_without_shutdown`]); `done` once it finished. A connection
/// its stream parked ends without an error, whatever hyper made of the end of the stream (a
/// server's hyper treats an end before a request head as the client leaving, and one within a
/// head as an error).
struct Manual<'a, C> {
    conn: Option<Box<C>>,
    done: bool,
    park: &'a ParkState,
}

impl<I, S, B> Future for Manual<'_, Connection<I, S>>
where
    S: hyper::service::HttpService<hyper::body::Incoming, ResBody = B> + Unpin,
    S::Future: Unpin,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
    B: hyper::body::Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Output = hyper::Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let Some(conn) = this.conn.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        let r = std::task::ready!(conn.poll_without_shutdown(cx));
        this.done = true;
        if this.park.parked() {
            return Poll::Ready(Ok(()));
        }
        Poll::Ready(r)
    }
}

impl<I, S, B> Graceful for &mut Manual<'_, Connection<I, S>>
where
    S: hyper::service::HttpService<hyper::body::Incoming, ResBody = B> + Unpin,
    S::Future: Unpin,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
    B: hyper::body::Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    fn graceful(self: Pin<&mut Self>) {
        if let Some(conn) = self.get_mut().conn.as_mut() {
            Pin::new(&mut **conn).graceful_shutdown();
        }
    }
}

/// Lingering close (as nginx does): after an error response such as 431, the client may still be
/// sending; closing at once with unread bytes makes the kernel send a reset that destroys the
/// response in flight. Half-close, then read and discard for a moment before closing.
async fn linger(raw: &mut MeteredStream<TcpStream>) {
    // What the stream held for the close goes first (`MeteredStream`'s own shutdown sends it),
    // then the TCP half-close itself.
    let _ = tokio::time::timeout(Duration::from_secs(2), raw.shutdown()).await;
    let _ = raw.get_mut().shutdown().await;
    let mut buf = vec![0u8; 16 * 1024];
    let mut total = 0usize;
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        while let Ok(n) = raw.read(&mut buf).await {
            total += n;
            if n == 0 || total > 1 << 20 {
                break;
            }
        }
    })
    .await;
}
