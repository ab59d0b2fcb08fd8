//! HTTP/2 toward a client: hyper's server connection with the `[http2]` settings (streams,
//! windows, frame and header-table sizes, keep-alive PINGs) and the header-list limit.

use crate::downstream::drive::{drive, Timeouts};
use crate::downstream::frames::FrameWatch;
use crate::downstream::io::Activity;
use crate::downstream::records::RecordSizer;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::sync::Arc;
use tlsgate_config::{Http2Config, ServerConfig};

/// Serves HTTP/2 streams on `tls` with `service` until the connection ends.
pub async fn serve<S>(
    tls: RecordSizer,
    service: S,
    server: &ServerConfig,
    h2c: &Http2Config,
    activity: Arc<Activity>,
    metrics: &tlsgate_admin::Metrics,
    shutdown: tokio::sync::watch::Receiver<bool>,
) where
    S: hyper::service::HttpService<hyper::body::Incoming> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    S::ResBody: Send + 'static,
    <S::ResBody as hyper::body::Body>::Data: Send,
    <S::ResBody as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut b = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    b.timer(TokioTimer::new())
        .max_concurrent_streams(h2c.max_concurrent_streams)
        .max_header_list_size(server.max_request_header_bytes as u32)
        .initial_stream_window_size(h2c.initial_stream_window)
        .initial_connection_window_size(h2c.initial_connection_window)
        .max_frame_size(h2c.max_frame_size)
        .header_table_size(h2c.header_table_size)
        .keep_alive_interval(h2c.keep_alive_interval.map(|d| d.get()))
        .keep_alive_timeout(h2c.keep_alive_timeout.get())
        // RFC 8441: WebSocket over an HTTP/2 stream (extended CONNECT), see upstream::tunnel.
        .enable_connect_protocol();
    drive(
        b.serve_connection(TokioIo::new(FrameWatch::new(tls, activity.clone())), service),
        activity,
        Timeouts {
            idle: server.client_idle_timeout.get(),
            header: Some(server.client_header_timeout.get()),
            send: server.client_send_timeout.get(),
        },
        metrics,
        shutdown,
    )
    .await;
}
