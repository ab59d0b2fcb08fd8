//! HTTP/1.1 toward a client: hyper's server connection with keep-alive, the request-header
//! timeout and size limit (431 above it), a lingering close after an error response, and
//! upgrades taken over by hand: when a request handler left a tunnel in the connection's
//! [`TunnelSlot`] (the origin answered `101`), hyper stops after sending the `101` and this
//! task copies between the client and the origin (`upstream::tunnel`).

use crate::downstream::drive::{drive, Graceful, Timeouts};
use crate::downstream::io::{Activity, MeteredStream};
use crate::downstream::records::RecordSizer;
use crate::upstream::tunnel::TunnelSlot;
use hyper::server::conn::http1::Connection;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tlsgate_config::ServerConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Serves HTTP/1.1 requests on `tls` with `service` until the connection ends (or becomes a
/// tunnel left in `tunnels`).
#[allow(clippy::too_many_arguments)]
pub async fn serve<S>(
    mut tls: RecordSizer,
    service: S,
    server: &ServerConfig,
    activity: Arc<Activity>,
    metrics: &tlsgate_admin::Metrics,
    shutdown: tokio::sync::watch::Receiver<bool>,
    tunnels: &TunnelSlot,
) where
    S: hyper::service::HttpService<hyper::body::Incoming> + Unpin,
    S::Future: Unpin,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    S::ResBody: 'static,
    <S::ResBody as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut b = hyper::server::conn::http1::Builder::new();
    b.timer(TokioTimer::new())
        .keep_alive(true)
        .header_read_timeout(server.client_header_timeout.get())
        .max_buf_size(server.max_request_header_bytes.max(8192));
    let mut conn = Manual {
        conn: Some(b.serve_connection(TokioIo::new(&mut tls), service)),
        done: false,
    };
    let failed = drive(
        &mut conn,
        activity,
        Timeouts {
            idle: server.client_idle_timeout.get(),
            header: None,
            send: server.client_send_timeout.get(),
        },
        metrics,
        shutdown,
    )
    .await;
    let finished = conn.done && !failed;
    let read_ahead = conn.conn.take().map(|c| c.into_parts().read_buf);
    if failed {
        linger(tls.raw_mut()).await;
        return;
    }
    if !finished {
        return;
    }
    match tunnels.take() {
        Some(tunnel) => {
            if let Err(e) = tunnel.run(&mut tls, read_ahead.unwrap_or_default()).await {
                tracing::debug!(error = %e, "tunnel ended with an error");
            }
        }
        // What hyper does at the end of a connection it shuts down itself: close_notify.
        None => {
            let _ = tls.shutdown().await;
        }
    }
}

/// hyper's connection polled without its final shutdown, so that an upgrade can take the
/// socket over ([`Connection::poll_without_shutdown`]); `done` once it finished.
struct Manual<C> {
    conn: Option<C>,
    done: bool,
}

impl<I, S, B> Future for Manual<Connection<I, S>>
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
        Poll::Ready(r)
    }
}

impl<I, S, B> Graceful for &mut Manual<Connection<I, S>>
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
            Pin::new(conn).graceful_shutdown();
        }
    }
}

/// Lingering close (as nginx does): after an error response such as 431, the client may still be
/// sending; closing at once with unread bytes makes the kernel send a reset that destroys the
/// response in flight. Half-close, then read and discard for a moment before closing.
async fn linger(raw: &mut MeteredStream<TcpStream>) {
    // The TCP half-close itself: `MeteredStream`'s own shutdown only flushes.
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
