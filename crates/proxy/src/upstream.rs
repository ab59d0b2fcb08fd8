//! Upstream groups: origin servers behind pooled keep-alive HTTP/1.1 connections, chosen round
//! robin or by fewest requests in flight; a server whose connection fails is skipped for
//! `fail_timeout`. Requests with no body are retried once on another server after a connect
//! failure (nothing reached the first one).

use crate::body::{full, Body, BoxError};
use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response, StatusCode, Uri, Version};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tlsgate_admin::metrics::{UpstreamErrorLabels, UpstreamLabels};
use tlsgate_admin::Metrics;
use tlsgate_config::{Balance, UpstreamConfig};

/// One origin server.
#[derive(Debug)]
pub struct UpstreamServer {
    /// `host:port`.
    pub authority: http::uri::Authority,
    in_flight: AtomicUsize,
    /// Milliseconds since `epoch` until which the server is skipped.
    down_until_ms: AtomicU64,
}

/// A group of origin servers with its connection pool.
pub struct UpstreamGroup {
    /// Name from the configuration.
    pub name: String,
    label: &'static str,
    servers: Vec<UpstreamServer>,
    balance: Balance,
    next: AtomicUsize,
    client: Client<HttpConnector, Body>,
    header_timeout: Duration,
    fail_timeout: Duration,
    epoch: Instant,
}

/// Headers that describe one hop and must not be forwarded (RFC 9110 7.6.1).
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "upgrade",
];

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    for n in named {
        headers.remove(n);
    }
    for h in HOP_BY_HOP {
        headers.remove(h);
    }
    headers.remove(header::TRANSFER_ENCODING);
}

/// Everything the forwarder needs to know about the client side of a request.
pub struct Downstream<'a> {
    /// The client's IP.
    pub client_ip: std::net::IpAddr,
    /// Host the client asked for (already lower-cased, without port), for the Host header.
    pub host: Option<&'a str>,
}

impl UpstreamGroup {
    /// Builds a group and its (lazy) connection pool.
    pub fn new(config: &UpstreamConfig) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(config.connect_timeout.get()));
        connector.set_keepalive(Some(Duration::from_secs(60)));
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(config.idle_timeout.get())
            .pool_max_idle_per_host(config.max_idle_per_server)
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .build(connector);
        let servers = config
            .servers
            .iter()
            .filter_map(|s| s.parse().ok())
            .map(|authority| UpstreamServer {
                authority,
                in_flight: AtomicUsize::new(0),
                down_until_ms: AtomicU64::new(0),
            })
            .collect();
        Self {
            name: config.name.clone(),
            label: tlsgate_admin::metrics::intern(&config.name),
            servers,
            balance: config.balance,
            next: AtomicUsize::new(0),
            client,
            header_timeout: config.header_timeout.get(),
            fail_timeout: config.fail_timeout.get(),
            epoch: Instant::now(),
        }
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn is_up(&self, s: &UpstreamServer, now: u64) -> bool {
        s.down_until_ms.load(Ordering::Relaxed) <= now
    }

    /// Picks a server, skipping `exclude` and servers marked down (if every server is down,
    /// the one the policy would pick anyway).
    pub fn pick(&self, exclude: Option<usize>) -> usize {
        let n = self.servers.len();
        let now = self.now_ms();
        let candidates = (0..n).filter(|i| Some(*i) != exclude);
        let healthy: Vec<usize> = candidates
            .clone()
            .filter(|i| self.is_up(&self.servers[*i], now))
            .collect();
        let pool: Vec<usize> = if healthy.is_empty() {
            candidates.collect()
        } else {
            healthy
        };
        if pool.is_empty() {
            return 0;
        }
        match self.balance {
            Balance::RoundRobin => pool[self.next.fetch_add(1, Ordering::Relaxed) % pool.len()],
            Balance::LeastConn => {
                let start = self.next.fetch_add(1, Ordering::Relaxed);
                // Rotate the start so ties are spread.
                (0..pool.len())
                    .map(|k| pool[(start + k) % pool.len()])
                    .min_by_key(|i| self.servers[*i].in_flight.load(Ordering::Relaxed))
                    .expect("non-empty")
            }
        }
    }

    /// Forwards a request and streams the response back.
    pub async fn forward(&self, req: Request<Incoming>, down: &Downstream<'_>, metrics: &Metrics) -> Response<Body> {
        let (mut parts, body) = req.into_parts();
        let retryable = http_body::Body::is_end_stream(&body);
        let mut body = Some(body);
        let host_header = parts
            .headers
            .get(header::HOST)
            .cloned()
            .or_else(|| {
                parts
                    .uri
                    .authority()
                    .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
            })
            .or_else(|| down.host.and_then(|h| HeaderValue::from_str(h).ok()));
        strip_hop_by_hop(&mut parts.headers);
        if let Some(h) = host_header {
            parts.headers.insert(header::HOST, h);
        }
        append_forwarded(&mut parts.headers, down.client_ip);
        let path = parts.uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
        parts.version = Version::HTTP_11;

        let attempts = if retryable && self.servers.len() > 1 { 2 } else { 1 };
        let mut exclude = None;
        for attempt in 0..attempts {
            let idx = self.pick(exclude);
            let server = &self.servers[idx];
            let uri = match Uri::builder()
                .scheme("http")
                .authority(server.authority.clone())
                .path_and_query(path.as_str())
                .build()
            {
                Ok(u) => u,
                Err(_) => return error_response(StatusCode::BAD_REQUEST, "bad request target"),
            };
            let req_body: Body = match body.take() {
                Some(b) if attempt == 0 => b.map_err(|e| Box::new(e) as BoxError).boxed_unsync(),
                _ => full(Bytes::new()),
            };
            let mut out = Request::from_parts(parts.clone(), req_body);
            *out.uri_mut() = uri;
            let started = Instant::now();
            server.in_flight.fetch_add(1, Ordering::Relaxed);
            let result = tokio::time::timeout(self.header_timeout, self.client.request(out)).await;
            server.in_flight.fetch_sub(1, Ordering::Relaxed);
            let labels = UpstreamLabels { upstream: self.label };
            let err = |kind: &'static str| {
                metrics
                    .upstream_errors
                    .get_or_create(&UpstreamErrorLabels {
                        upstream: self.label,
                        kind,
                    })
                    .inc();
            };
            match result {
                Ok(Ok(resp)) => {
                    metrics
                        .upstream_duration
                        .get_or_create(&labels)
                        .observe(started.elapsed().as_secs_f64());
                    let (mut rparts, rbody) = resp.into_parts();
                    strip_hop_by_hop(&mut rparts.headers);
                    return Response::from_parts(rparts, rbody.map_err(|e| Box::new(e) as BoxError).boxed_unsync());
                }
                Ok(Err(e)) if e.is_connect() => {
                    err("connect");
                    server
                        .down_until_ms
                        .store(self.now_ms() + self.fail_timeout.as_millis() as u64, Ordering::Relaxed);
                    tracing::warn!(upstream = %self.name, server = %server.authority, error = %e, "upstream connect failed; server skipped for {:?}", self.fail_timeout);
                    exclude = Some(idx);
                    if attempt + 1 == attempts {
                        return error_response(StatusCode::BAD_GATEWAY, "502 Bad Gateway: upstream unreachable");
                    }
                }
                Ok(Err(e)) => {
                    err("protocol");
                    tracing::warn!(upstream = %self.name, server = %server.authority, error = %e, "upstream request failed");
                    return error_response(StatusCode::BAD_GATEWAY, "502 Bad Gateway: upstream failed");
                }
                Err(_) => {
                    err("timeout");
                    tracing::warn!(upstream = %self.name, server = %server.authority, "upstream response header timed out after {:?}", self.header_timeout);
                    return error_response(StatusCode::GATEWAY_TIMEOUT, "504 Gateway Timeout: upstream too slow");
                }
            }
        }
        error_response(StatusCode::BAD_GATEWAY, "502 Bad Gateway")
    }
}

fn append_forwarded(headers: &mut HeaderMap, ip: std::net::IpAddr) {
    let xff = match headers.get("x-forwarded-for").and_then(|v| v.to_str().ok()) {
        Some(prev) => format!("{prev}, {ip}"),
        None => ip.to_string(),
    };
    if let Ok(v) = HeaderValue::from_str(&xff) {
        headers.insert("x-forwarded-for", v);
    }
    headers.insert("x-forwarded-proto", HeaderValue::from_static("https"));
}

/// A short plain-text error response.
pub fn error_response(status: StatusCode, text: &'static str) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "text/plain")
        .body(full(Bytes::from_static(text.as_bytes())))
        .expect("static response parts are valid")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(servers: &[&str], balance: Balance) -> UpstreamGroup {
        let text = format!(
            "name = \"g\"\nservers = [{}]\nbalance = \"{}\"\n",
            servers.iter().map(|s| format!("\"{s}\"")).collect::<Vec<_>>().join(","),
            if balance == Balance::RoundRobin {
                "round_robin"
            } else {
                "least_conn"
            }
        );
        let cfg: UpstreamConfig = toml_cfg(&text);
        UpstreamGroup::new(&cfg)
    }

    fn toml_cfg(text: &str) -> UpstreamConfig {
        let full = format!("[[upstream]]\n{text}");
        tlsgate_config::parse(&full).unwrap().upstreams.remove(0)
    }

    #[tokio::test]
    async fn round_robin_skips_down_servers() {
        let g = group(&["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"], Balance::RoundRobin);
        let picks: Vec<usize> = (0..6).map(|_| g.pick(None)).collect();
        assert_eq!(picks, vec![0, 1, 2, 0, 1, 2]);
        g.servers[1].down_until_ms.store(u64::MAX, Ordering::Relaxed);
        assert!((0..6).map(|_| g.pick(None)).all(|i| i != 1));
    }

    #[tokio::test]
    async fn least_conn_prefers_idle_servers_and_exclude_is_honoured() {
        let g = group(&["127.0.0.1:1", "127.0.0.1:2"], Balance::LeastConn);
        g.servers[0].in_flight.store(5, Ordering::Relaxed);
        assert!((0..4).all(|_| g.pick(None) == 1));
        assert!((0..4).all(|_| g.pick(Some(1)) == 0));
    }

    #[tokio::test]
    async fn all_down_still_picks_someone() {
        let g = group(&["127.0.0.1:1"], Balance::RoundRobin);
        g.servers[0].down_until_ms.store(u64::MAX, Ordering::Relaxed);
        assert_eq!(g.pick(None), 0);
    }

    #[test]
    fn hop_by_hop_headers_are_removed() {
        let mut h = HeaderMap::new();
        h.insert("connection", HeaderValue::from_static("close, x-private"));
        h.insert("x-private", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert("x-kept", HeaderValue::from_static("1"));
        strip_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key("x-kept"));
    }
}
