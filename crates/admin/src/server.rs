//! The admin listener: plain HTTP/1.1 on a loopback address.
//!
//! - `GET /metrics`: Prometheus text.
//! - `GET /healthz`: `ok`.
//! - `POST /reload`: re-read the configuration and certificates (what `tlsgate reload` calls);
//!   200 with a summary, or 500 with the reason the new configuration was refused. Changes the
//!   running process cannot apply (listeners, admin address, workers, `[cluster]`, ...) are
//!   listed after the summary, one `not applied, needs a restart: ...` line each, and counted in
//!   the `tlsgate-not-applied` header (absent when everything applied).
//! - Anything else goes to [`AdminHooks::api`] (JSON APIs such as `/keyless/pools`), with the
//!   request body (at most 1 MiB).
//!
//! Every request first passes the [`Guard`] (crate::guard): `Host` must name this listener
//! (else 421), a foreign `Origin` or a cross-site `Sec-Fetch-Site` is 403, and a change
//! (`POST /reload`, `PUT /keyless/pools/NAME`, ...) needs `Content-Type: application/json` or
//! `X-Tlsgate-Request: 1` (else 403). Connections are capped and must send their request head
//! in time (crate::guard::serve_http1).

use crate::guard::{self, Guard};
use crate::metrics::Metrics;
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, Response, StatusCode};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use tlsgate_error::Classify;

/// Why a reload was refused: the gateway's own classified error (its message is the reason
/// `POST /reload` answers with).
pub type ReloadError = Box<dyn Classify + Send + Sync>;

/// What the admin listener needs from the gateway.
pub trait AdminHooks: Send + Sync + 'static {
    /// Called before each scrape, to copy counters kept elsewhere into the registry.
    fn before_scrape(&self);
    /// Reloads the configuration; Ok(what was applied and what was not) or Err(why it was
    /// refused).
    fn reload(&self) -> Pin<Box<dyn Future<Output = Result<ReloadReport, ReloadError>> + Send>>;
    /// A JSON API request: `Some((status, JSON body))`, or `None` when no API has this path.
    fn api(&self, method: &Method, path: &str, body: &[u8]) -> Option<ApiFuture> {
        let _ = (method, path, body);
        None
    }
}

/// What a reload that was accepted reports.
#[derive(Debug, Clone, Default)]
pub struct ReloadReport {
    /// One line: what was installed (file, generation).
    pub summary: String,
    /// Changes in the file that the running process did not apply (they take a restart), one
    /// phrase each, e.g. `[[listener]] 127.0.0.1:9443 added (not listening)`.
    pub not_applied: Vec<String>,
}

/// The `POST /reload` response header that counts the changes not applied.
pub const NOT_APPLIED_HEADER: &str = "tlsgate-not-applied";

/// What [`AdminHooks::api`] answers: an HTTP status and a JSON body.
pub type ApiFuture = Pin<Box<dyn Future<Output = (StatusCode, String)> + Send>>;

/// Largest request body the admin listener reads.
const MAX_BODY: usize = 1024 * 1024;

/// Serves the admin endpoints on `listener` until the task is dropped; requests are checked by
/// `guard` (built for the listener's address and `[admin] allowed_hosts`).
pub async fn serve_admin(
    listener: tokio::net::TcpListener,
    metrics: Arc<Metrics>,
    hooks: Arc<dyn AdminHooks>,
    guard: Guard,
) {
    let guard = Arc::new(guard);
    guard::serve_http1(listener, guard::Limits::default(), "admin", move |peer| {
        let (metrics, hooks, guard) = (metrics.clone(), hooks.clone(), guard.clone());
        hyper::service::service_fn(move |req| handle(req, metrics.clone(), hooks.clone(), guard.clone(), peer))
    })
    .await;
}

async fn handle(
    req: Request<hyper::body::Incoming>,
    metrics: Arc<Metrics>,
    hooks: Arc<dyn AdminHooks>,
    guard: Arc<Guard>,
    peer: SocketAddr,
) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let text = |status: StatusCode, body: String| {
        Response::builder()
            .status(status)
            .header("content-type", "text/plain; charset=utf-8")
            .body(Full::new(Bytes::from(body)))
            .expect("static response parts are valid")
    };
    if let Err(refusal) = guard.check(req.method(), req.uri(), req.headers()) {
        tracing::warn!(%peer, method = %req.method(), path = %req.uri().path(), %refusal, "admin request refused");
        return Ok(text(refusal.status(), format!("{refusal}\n")));
    }
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
                Ok(report) => {
                    let mut body = format!("{}\n", report.summary);
                    for change in &report.not_applied {
                        body.push_str(&format!("not applied, needs a restart: {change}\n"));
                    }
                    let mut response = text(StatusCode::OK, body);
                    if !report.not_applied.is_empty() {
                        response
                            .headers_mut()
                            .insert(NOT_APPLIED_HEADER, report.not_applied.len().into());
                    }
                    response
                }
                Err(reason) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("reload refused: {reason}\n")),
            }
        }
        _ => {
            let (method, path) = (req.method().clone(), req.uri().path().to_string());
            let body = match guard::read_body(req.into_body(), MAX_BODY).await {
                Ok(b) => b,
                Err(e) => return Ok(text(e.status(), format!("{e}\n"))),
            };
            match hooks.api(&method, &path, &body) {
                Some(answer) => {
                    let (status, json) = answer.await;
                    if method != Method::GET {
                        tracing::info!(%peer, %method, %path, status = status.as_u16(), "admin API change");
                    }
                    Response::builder()
                        .status(status)
                        .header("content-type", "application/json")
                        .body(Full::new(Bytes::from(json)))
                        .expect("static response parts are valid")
                }
                None => text(
                    StatusCode::NOT_FOUND,
                    "not found; try /metrics, /healthz, POST /reload or GET /keyless/pools\n".into(),
                ),
            }
        }
    })
}
