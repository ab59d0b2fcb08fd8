//! The admin listener: plain HTTP/1.1 on a loopback address.
//!
//! - `GET /metrics`: Prometheus text.
//! - `GET /healthz`: `ok`.
//! - `POST /reload`: re-read the configuration and certificates (what `tlsgate reload` calls);
//!   200 with a summary, or 500 with the reason the new configuration was refused.

use crate::metrics::Metrics;
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, Response, StatusCode};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

/// What the admin listener needs from the gateway.
pub trait AdminHooks: Send + Sync + 'static {
    /// Called before each scrape, to copy counters kept elsewhere into the registry.
    fn before_scrape(&self);
    /// Reloads the configuration; Ok(summary) or Err(reason it was refused).
    fn reload(&self) -> Pin<Box<dyn Future<Output = Result<String, String>> + Send>>;
}

/// Serves the admin endpoints on `listener` until the task is dropped.
pub async fn serve_admin(listener: tokio::net::TcpListener, metrics: Arc<Metrics>, hooks: Arc<dyn AdminHooks>) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "admin accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let metrics = metrics.clone();
        let hooks = hooks.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| handle(req, metrics.clone(), hooks.clone(), peer));
            let io = hyper_util::rt::TokioIo::new(stream);
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .await
            {
                tracing::debug!(error = %e, "admin connection error");
            }
        });
    }
}

async fn handle(
    req: Request<hyper::body::Incoming>,
    metrics: Arc<Metrics>,
    hooks: Arc<dyn AdminHooks>,
    peer: SocketAddr,
) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let text = |status: StatusCode, body: String| {
        Response::builder()
            .status(status)
            .header("content-type", "text/plain; charset=utf-8")
            .body(Full::new(Bytes::from(body)))
            .expect("static response parts are valid")
    };
    Ok(match (req.method(), req.uri().path()) {
        (&Method::GET, "/metrics") => {
            hooks.before_scrape();
            let body = metrics.encode();
            Response::builder()
                .header(
                    "content-type",
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                )
                .body(Full::new(Bytes::from(body)))
                .expect("static response parts are valid")
        }
        (&Method::GET, "/healthz") => text(StatusCode::OK, "ok\n".into()),
        (&Method::POST, "/reload") => {
            tracing::info!(%peer, "reload requested through the admin listener");
            match hooks.reload().await {
                Ok(summary) => text(StatusCode::OK, format!("{summary}\n")),
                Err(reason) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("reload refused: {reason}\n")),
            }
        }
        _ => text(
            StatusCode::NOT_FOUND,
            "not found; try /metrics, /healthz or POST /reload\n".into(),
        ),
    })
}
