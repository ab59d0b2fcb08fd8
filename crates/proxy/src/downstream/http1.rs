//! HTTP/1.1 toward a client: hyper's server connection with keep-alive, the request-header
//! timeout and size limit (431 above it), and a lingering close after an error response.

use crate::downstream::drive::{drive, Timeouts};
use crate::downstream::io::{Activity, MeteredStream};
use crate::downstream::records::RecordSizer;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::sync::Arc;
use std::time::Duration;
use tlsgate_config::ServerConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Serves HTTP/1.1 requests on `tls` with `service` until the connection ends.
pub async fn serve<S>(
    mut tls: RecordSizer,
    service: S,
    server: &ServerConfig,
    activity: Arc<Activity>,
    metrics: &tlsgate_admin::Metrics,
    shutdown: tokio::sync::watch::Receiver<bool>,
) where
    S: hyper::service::HttpService<hyper::body::Incoming>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    S::ResBody: 'static,
    <S::ResBody as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut b = hyper::server::conn::http1::Builder::new();
    b.timer(TokioTimer::new())
        .keep_alive(true)
        .header_read_timeout(server.client_header_timeout.get())
        .max_buf_size(server.max_request_header_bytes.max(8192));
    let failed = drive(
        b.serve_connection(TokioIo::new(&mut tls), service),
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
    if failed {
        linger(tls.raw_mut()).await;
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
