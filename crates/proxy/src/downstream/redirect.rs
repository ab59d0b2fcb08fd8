//! The plain-HTTP listener: every request gets a 301 (or 308) to the same URL on https.

use crate::body::{full, Body};
use crate::gateway::{ConnGuard, Gateway};
use crate::request::check as request_check;
use bytes::Bytes;
use http::{header, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::net::SocketAddr;
use std::sync::Arc;
use tlsgate_admin::metrics::RequestLabels;
use tlsgate_config::ListenerConfig;
use tlsgate_tls::acme_challenges::HTTP01_PREFIX;

/// The redirect target for a request, or None without a usable Host.
pub fn location<B>(req: &Request<B>, https_port: Option<u16>) -> Option<String> {
    let host = request_check::inspect(req).ok()?.host?;
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.into_owned()
    };
    let port = match https_port {
        None | Some(443) => String::new(),
        Some(p) => format!(":{p}"),
    };
    let path = req.uri().path_and_query().map_or("/", |p| p.as_str());
    Some(format!("https://{host}{port}{path}"))
}

/// Longest wait for the cluster's store when another node may hold an HTTP-01 answer.
const CHALLENGE_LOOKUP: std::time::Duration = std::time::Duration::from_secs(2);

/// Serves one plain-HTTP connection.
pub async fn serve_redirect(
    gateway: Arc<Gateway>,
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    guard: ConnGuard,
    config: ListenerConfig,
) {
    let _guard = guard;
    let status = StatusCode::from_u16(config.redirect_status).unwrap_or(StatusCode::MOVED_PERMANENTLY);
    let metrics = gateway.metrics.clone();
    let acme = gateway.sessions.acme.clone();
    let https_port = config.https_port;
    let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
        let (acme, metrics) = (acme.clone(), metrics.clone());
        async move {
            // ACME HTTP-01: a pending token's key authorization (this node's, or one another
            // node of the cluster published) instead of the redirect.
            let path = req.uri().path();
            let challenge = if path.starts_with(HTTP01_PREFIX) {
                acme.http_answer_anywhere(path, CHALLENGE_LOOKUP).await
            } else {
                None
            };
            let response: Response<Body> = match location(&req, https_port) {
                _ if challenge.is_some() => Response::builder()
                    .header(header::CONTENT_TYPE, "application/octet-stream")
                    .body(full(Bytes::from(challenge.unwrap_or_default())))
                    .expect("valid response"),
                Some(loc) => Response::builder()
                    .status(status)
                    .header(header::LOCATION, loc)
                    .header(header::CONTENT_TYPE, "text/plain")
                    .body(full(Bytes::from_static(b"Moved to https\n")))
                    .expect("valid redirect"),
                None => Response::builder()
                    .status(StatusCode::BAD_REQUEST)
                    .body(full(Bytes::from_static(b"400 Bad Request: Host header required\n")))
                    .expect("valid response"),
            };
            metrics
                .requests
                .get_or_create(&RequestLabels {
                    site: "-",
                    status: response.status().as_u16(),
                    protocol: "h1",
                })
                .inc();
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    let mut b = hyper::server::conn::http1::Builder::new();
    b.timer(TokioTimer::new())
        .header_read_timeout(std::time::Duration::from_secs(10));
    if let Err(e) = b.serve_connection(TokioIo::new(tcp), service).await {
        tracing::debug!(%peer, error = %e, "redirect connection error");
    }
}

#[cfg(test)]
mod tests {
    use super::location;
    use http::Request;

    #[test]
    fn location_keeps_path_and_query_and_sets_port() {
        let req = Request::builder()
            .uri("/a/b?c=d")
            .header("host", "example.com:8080")
            .body(())
            .unwrap();
        assert_eq!(location(&req, Some(8443)).unwrap(), "https://example.com:8443/a/b?c=d");
        assert_eq!(location(&req, Some(443)).unwrap(), "https://example.com/a/b?c=d");
        assert_eq!(location(&req, None).unwrap(), "https://example.com/a/b?c=d");
        let no_host = Request::builder().uri("/").body(()).unwrap();
        assert!(location(&no_host, None).is_none());
    }
}
