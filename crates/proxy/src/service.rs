//! Per-request handling on a TLS connection: route, answer or forward, log, count.

use crate::body::{full, Body};
use crate::gateway::{Gateway, Generation};
use crate::router::Action;
use crate::upstream::{error_response, Downstream};
use http::{header, Request, Response, StatusCode};
use hyper::body::Incoming;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;
use tlsgate_admin::metrics::RequestLabels;

/// What a connection's requests share.
pub struct ConnContext {
    /// Gateway state.
    pub gateway: Arc<Gateway>,
    /// Generation the connection was accepted with (fallback if its site disappears on reload).
    pub accepted_with: Arc<Generation>,
    /// Name of the site selected by SNI.
    pub site: Arc<str>,
    /// Client address.
    pub peer: SocketAddr,
    /// `h1` or `h2`.
    pub protocol: &'static str,
    /// True while the connection's handshake is unconfirmed after accepting 0-RTT early data.
    pub early: Option<Arc<AtomicBool>>,
}

/// RFC 8470: early data is replayable, so only requests that are safe to repeat (GET or HEAD
/// without a body) are served from it; the rest get 425 Too Early and the client retries after
/// the handshake.
fn safe_in_early_data(req: &Request<Incoming>) -> bool {
    use hyper::body::Body as _;
    let no_body = req.body().is_end_stream()
        || req
            .headers()
            .get(header::CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() == b"0");
    (req.method() == http::Method::GET || req.method() == http::Method::HEAD) && no_body
}

/// Host from the Host header or the request URI, lower-cased, without port.
pub fn request_host<B>(req: &Request<B>) -> Option<String> {
    let raw = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| req.uri().authority().map(|a| a.as_str()))?;
    let host = if raw.starts_with('[') {
        raw.split_once(']').map_or(raw, |(h, _)| h).trim_start_matches('[')
    } else {
        raw.rsplit_once(':').map_or(raw, |(h, _)| h)
    };
    Some(host.to_ascii_lowercase())
}

/// Handles one request.
pub async fn handle(ctx: Arc<ConnContext>, mut req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let started = Instant::now();
    if ctx.early.as_ref().is_some_and(|f| f.load(Ordering::Acquire)) {
        let stats = &ctx.gateway.sessions.early_data.stats;
        if !safe_in_early_data(&req) {
            stats.requests_too_early.fetch_add(1, Ordering::Relaxed);
            return Ok(error_response(
                StatusCode::from_u16(425).expect("valid status"),
                "425 Too Early: repeat this request after the TLS handshake\n",
            ));
        }
        stats.requests_served.fetch_add(1, Ordering::Relaxed);
        req.headers_mut()
            .insert("early-data", http::HeaderValue::from_static("1"));
    }
    let current = ctx.gateway.current();
    let (generation, site_idx) = match current.site_index(&ctx.site) {
        Some(i) => (current, i),
        None => (
            ctx.accepted_with.clone(),
            ctx.accepted_with.site_index(&ctx.site).unwrap_or(0),
        ),
    };
    let host = request_host(&req);
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let site = &generation.sites[site_idx];
    let mut upstream_name = None;
    let mut response = match site.router.route(host.as_deref(), &path) {
        Some(Action::Fixed(f)) => Response::builder()
            .status(f.status)
            .header(header::CONTENT_TYPE, f.content_type.clone())
            .body(full(f.body.clone()))
            .expect("fixed response parts are valid"),
        Some(Action::Upstream(i)) => {
            let group = generation.upstreams[*i].clone();
            upstream_name = Some(group.name.clone());
            let down = Downstream {
                client_ip: ctx.peer.ip(),
                host: host.as_deref(),
            };
            group.forward(req, &down, &ctx.gateway.metrics).await
        }
        None => error_response(StatusCode::NOT_FOUND, "404 Not Found: no route\n"),
    };
    if let Some(hsts) = &site.hsts {
        response
            .headers_mut()
            .insert(header::STRICT_TRANSPORT_SECURITY, hsts.clone());
    }
    let status = response.status();
    ctx.gateway
        .metrics
        .requests
        .get_or_create(&RequestLabels {
            site: site.label,
            status: status.as_u16(),
            protocol: ctx.protocol,
        })
        .inc();
    if generation.config.log.access_log {
        tracing::info!(
            target: "access",
            client = %ctx.peer,
            site = %site.name,
            proto = ctx.protocol,
            %method,
            host = host.as_deref().unwrap_or("-"),
            path = %path,
            status = status.as_u16(),
            upstream = upstream_name.as_deref().unwrap_or("-"),
            ms = format_args!("{:.3}", started.elapsed().as_secs_f64() * 1000.0),
        );
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_is_lowercased_and_port_stripped() {
        let req = Request::builder()
            .uri("/")
            .header("host", "Example.COM:8443")
            .body(())
            .unwrap();
        assert_eq!(request_host(&req).as_deref(), Some("example.com"));
        let req = Request::builder()
            .uri("/")
            .header("host", "[::1]:8443")
            .body(())
            .unwrap();
        assert_eq!(request_host(&req).as_deref(), Some("::1"));
        let req = Request::builder().uri("https://h2.test/x").body(()).unwrap();
        assert_eq!(request_host(&req).as_deref(), Some("h2.test"));
    }
}
