//! Active health checks (`[upstream.health_check]`): one task per group probes every server each
//! `interval` with `GET path` on a short-lived connection of its own (TCP, then TLS for
//! `https://` servers through the group's [`OriginTls`]; HTTP/1.1, or HTTP/2 where the group
//! speaks it). `fall` failed probes in a row mark a server unhealthy (the balancer skips it),
//! `rise` passed probes in a row bring it back.
//!
//! - Servers start healthy, as in HAProxy and nginx: turning checks on never takes traffic away
//!   before `fall` probes failed. A reload builds new servers, which start with what the previous
//!   generation's checks last found (an unhealthy server stays out until `rise` probes pass).
//! - A group with `send_proxy_protocol` starts each probe's connection with a PROXY header too,
//!   one that names no client (v2 `LOCAL`, v1 `UNKNOWN`): an origin that requires the header
//!   accepts the probe, and knows it for the gateway's own connection.
//! - The task holds the group's pool weakly and ends once the generation is gone.
//! - Probes run on one `tlsgate-health` thread of their own (started with the first group that
//!   has checks), never on a worker: the first generation is built before any runtime exists,
//!   and a slow origin's probe must not take a worker's time.
//! - Every transition is logged (a warning with the last failure when a server goes down, info
//!   when it comes back); [`export_metrics`] fills `tlsgate_upstream_server_healthy` and
//!   `tlsgate_upstream_health_checks_total` at scrape time.

use super::connect::{self, ConnectError};
use super::pool::OriginPool;
use super::server::UpstreamServer;
use bytes::Bytes;
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{header, HeaderValue, Request, StatusCode, Uri, Version};
use http_body_util::Empty;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tlsgate_config::{SendProxyProtocol, StatusRange, UpstreamConfig, UpstreamProtocol};
use tlsgate_error::{Classify, Side};
use tlsgate_tls::origin::{alert_in, OriginTls, OriginTlsError};

/// Why a probe failed.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// No connection: refused, unreachable, TLS refused, or the connect timed out.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The HTTP/1.1 exchange broke (reset, malformed response).
    #[error("exchange failed: {0}")]
    Exchange(#[source] hyper::Error),
    /// The HTTP/2 exchange broke (reset, GOAWAY, malformed frames).
    #[error("exchange failed: {0}")]
    Http2(#[source] h2::Error),
    /// The server closed the connection without a response.
    #[error("connection closed before a response")]
    Closed,
    /// No response header within `timeout`.
    #[error("no response within {0:?}")]
    Timeout(Duration),
    /// A status outside `expect_status`.
    #[error("status {status}, expected {expected}")]
    Status {
        /// What the server answered.
        status: StatusCode,
        /// What passes.
        expected: StatusRange,
    },
}

impl Classify for ProbeError {
    fn side(&self) -> Side {
        Side::Upstream
    }

    /// The `result` label of `tlsgate_upstream_health_checks_total`.
    fn kind(&self) -> &'static str {
        match self {
            Self::Connect(ConnectError::Tcp { .. }) => "connect",
            Self::Connect(ConnectError::Timeout { .. }) | Self::Timeout(_) => "timeout",
            Self::Connect(ConnectError::Tls { .. }) => "tls",
            Self::Exchange(_) | Self::Http2(_) | Self::Closed => "protocol",
            Self::Status { .. } => "status",
        }
    }

    /// A probe is a GET, repeated every interval anyway.
    fn retry_safe(&self) -> bool {
        true
    }
}

/// One group's check settings, ready to send.
struct Probe {
    upstream: &'static str,
    path: PathAndQuery,
    host: Option<HeaderValue>,
    interval: Duration,
    timeout: Duration,
    expect: StatusRange,
    rise: u32,
    fall: u32,
    protocol: UpstreamProtocol,
    proxy: SendProxyProtocol,
}

/// Starts the health checks of a group (`label` is its interned name) when its configuration
/// enables them; the task ends once `pool` is dropped with its generation.
pub fn spawn(config: &UpstreamConfig, label: &'static str, pool: &Arc<OriginPool>, servers: &[Arc<UpstreamServer>]) {
    let check = &config.health_check;
    if !check.enabled || servers.is_empty() {
        // Checks turned on again later start from nothing, not from a verdict of long ago.
        forget(label);
        return;
    }
    let probe = match Probe::new(config, label) {
        Ok(probe) => Arc::new(probe),
        // Validation refuses both; only a path that skipped it arrives here.
        Err(field) => {
            tracing::error!(upstream = %config.name, "health_check.{field} cannot be sent; the group's servers are not probed");
            return;
        }
    };
    let Some(runtime) = super::background::runtime() else {
        tracing::error!(upstream = %config.name, "no health-check thread; the group's servers are not probed");
        return;
    };
    {
        let down = DOWN.lock();
        for server in servers {
            let known_down = down.as_ref().is_some_and(|d| d.contains(&(label, server.key.clone())));
            server.set_health(!known_down);
        }
    }
    tracing::info!(
        upstream = %config.name,
        path = %probe.path,
        interval = ?probe.interval,
        "health checks on: every server probed every {:?}; {} failures in a row take it out, {} passes bring it back",
        probe.interval, probe.fall, probe.rise
    );
    runtime.spawn(run(Arc::downgrade(pool), servers.to_vec(), probe));
}

impl Probe {
    /// The probe of `config`, or the field that cannot be sent.
    fn new(config: &UpstreamConfig, upstream: &'static str) -> Result<Self, &'static str> {
        let check = &config.health_check;
        let path = PathAndQuery::try_from(check.path.as_str()).map_err(|_| "path")?;
        let host = match &check.host {
            Some(host) => Some(HeaderValue::from_str(host).map_err(|_| "host")?),
            None => None,
        };
        Ok(Self {
            upstream,
            path,
            host,
            interval: check.interval.get().max(Duration::from_millis(1)),
            timeout: check.timeout.get(),
            expect: check.expect_status,
            rise: check.rise.max(1),
            fall: check.fall.max(1),
            protocol: config.protocol,
            proxy: config.send_proxy_protocol,
        })
    }

    /// Probes `server` once: the status it answered within `timeout`, when expected.
    async fn check(&self, server: &UpstreamServer, tls: Option<&OriginTls>) -> Result<StatusCode, ProbeError> {
        let status = match tokio::time::timeout(self.timeout, self.exchange(server, tls)).await {
            Ok(result) => result?,
            Err(_) => return Err(ProbeError::Timeout(self.timeout)),
        };
        if self.expect.contains(status.as_u16()) {
            Ok(status)
        } else {
            Err(ProbeError::Status {
                status,
                expected: self.expect,
            })
        }
    }

    /// Connects, sends the request and reads the response header; the connection is closed when
    /// this returns.
    async fn exchange(&self, server: &UpstreamServer, tls: Option<&OriginTls>) -> Result<StatusCode, ProbeError> {
        let tls = if server.tls { tls } else { None };
        let local = connect::proxy_header(self.proxy, None);
        let (io, handshake) = connect::open(
            &server.host,
            server.port,
            &server.key,
            tls,
            self.timeout,
            false,
            local.as_ref(),
        )
        .await?;
        let h2 = match (self.protocol, handshake) {
            (UpstreamProtocol::Http2, _) => true,
            (UpstreamProtocol::Auto, Some(hs)) => hs.h2,
            _ => false,
        };
        let host = self.host.clone().unwrap_or_else(|| {
            HeaderValue::from_str(server.authority.as_str()).unwrap_or(HeaderValue::from_static("localhost"))
        });
        let mut request = Request::new(());
        request
            .headers_mut()
            .insert(header::USER_AGENT, HeaderValue::from_static("tlsgate-health-check"));
        let result = if h2 {
            let authority = Authority::try_from(host.as_bytes()).unwrap_or_else(|_| server.authority.clone());
            let mut parts = http::uri::Parts::default();
            parts.scheme = Some(if server.tls { Scheme::HTTPS } else { Scheme::HTTP });
            parts.authority = Some(authority);
            parts.path_and_query = Some(self.path.clone());
            *request.uri_mut() = Uri::from_parts(parts).unwrap_or_default();
            *request.version_mut() = Version::HTTP_2;
            answer_h2(io, request).await
        } else {
            *request.uri_mut() = Uri::from(self.path.clone());
            request.headers_mut().insert(header::HOST, host);
            request
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            let (mut sender, conn) = http1::handshake(TokioIo::new(io)).await.map_err(ProbeError::Exchange)?;
            answer(sender.send_request(request.map(|()| Empty::<Bytes>::new())), conn).await
        };
        // An alert in answer to the request is the origin refusing the TLS connection (TLS 1.3
        // reports a refused client certificate only then), as for requests (pool.rs).
        match result {
            Err(ProbeError::Exchange(e)) if server.tls => match alert_in(&e) {
                Some(alert) => Err(ProbeError::Connect(ConnectError::Tls {
                    server: server.key.clone(),
                    source: OriginTlsError::Alert(alert),
                })),
                None => Err(ProbeError::Exchange(e)),
            },
            Err(ProbeError::Http2(e)) if server.tls => match e.get_io().and_then(|io| alert_in(io)) {
                Some(alert) => Err(ProbeError::Connect(ConnectError::Tls {
                    server: server.key.clone(),
                    source: OriginTlsError::Alert(alert),
                })),
                None => Err(ProbeError::Http2(e)),
            },
            other => other,
        }
    }
}

/// Drives `conn` until `response` has its header: the status, or why there is none.
async fn answer<R, C>(response: R, conn: C) -> Result<StatusCode, ProbeError>
where
    R: Future<Output = hyper::Result<http::Response<hyper::body::Incoming>>>,
    C: Future<Output = hyper::Result<()>>,
{
    let mut response = std::pin::pin!(response);
    let ended = tokio::select! {
        biased;
        r = &mut response => return r.map(|r| r.status()).map_err(ProbeError::Exchange),
        ended = conn => ended,
    };
    // The connection ended (the server answered and closed it, or broke it) and is dropped
    // now: the response was handed over, or its sender reports why not.
    match (response.await, ended) {
        (Ok(r), _) => Ok(r.status()),
        (Err(_), Err(e)) => Err(ProbeError::Exchange(e)),
        (Err(e), Ok(())) if e.is_canceled() => Err(ProbeError::Closed),
        (Err(e), Ok(())) => Err(ProbeError::Exchange(e)),
    }
}

/// [`answer`] over HTTP/2 (`h2`'s client, as requests use: `super::h2_origin`): the connection
/// is driven here until the response head is in.
async fn answer_h2<T>(io: T, request: Request<()>) -> Result<StatusCode, ProbeError>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut send, conn) = h2::client::handshake(io).await.map_err(ProbeError::Http2)?;
    let (response, _) = send.send_request(request, true).map_err(ProbeError::Http2)?;
    let mut response = std::pin::pin!(response);
    let ended = tokio::select! {
        biased;
        r = &mut response => return r.map(|r| r.status()).map_err(ProbeError::Http2),
        ended = conn => ended,
    };
    // The connection ended: a response it read on the way is in, or the stream failed with it.
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match (response.as_mut().poll(&mut cx), ended) {
        (std::task::Poll::Ready(Ok(r)), _) => Ok(r.status()),
        (_, Err(e)) => Err(ProbeError::Http2(e)),
        (std::task::Poll::Ready(Err(e)), Ok(())) => Err(ProbeError::Http2(e)),
        (std::task::Poll::Pending, Ok(())) => Err(ProbeError::Closed),
    }
}

/// Probes the servers each interval, all at once, until the group is gone.
async fn run(pool: Weak<OriginPool>, servers: Vec<Arc<UpstreamServer>>, probe: Arc<Probe>) {
    let mut streaks = vec![Streak::default(); servers.len()];
    let mut tick = tokio::time::interval(probe.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(live) = pool.upgrade() else {
            tracing::debug!(upstream = %probe.upstream, "health checks of a replaced generation end");
            return;
        };
        let probes: Vec<_> = servers
            .iter()
            .map(|server| {
                let (probe, pool, server) = (probe.clone(), live.clone(), server.clone());
                tokio::spawn(async move { probe.check(&server, pool.tls()).await })
            })
            .collect();
        drop(live);
        for ((server, streak), handle) in servers.iter().zip(&mut streaks).zip(probes) {
            if let Ok(result) = handle.await {
                probe.record(server, streak, result);
            }
        }
    }
}

impl Probe {
    /// Counts one probe's result and applies what it means for the server's health.
    fn record(&self, server: &UpstreamServer, streak: &mut Streak, result: Result<StatusCode, ProbeError>) {
        let kind = match &result {
            Ok(_) => "ok",
            Err(e) => e.kind(),
        };
        count(self.upstream, kind);
        if let Err(e) = &result {
            tracing::debug!(upstream = %self.upstream, server = %server.key, error = %e, kind, "health check failed");
        }
        let healthy = server.passes_check();
        let Some(now) = streak.observe(result.is_ok(), healthy, self.rise, self.fall) else {
            return;
        };
        server.set_health(now);
        remember(self.upstream, &server.key, now);
        match result {
            Ok(status) => tracing::info!(
                upstream = %self.upstream,
                server = %server.key,
                status = status.as_u16(),
                "upstream server healthy again: {} health checks in a row passed (status {status}); it gets requests again",
                self.rise
            ),
            Err(e) => tracing::warn!(
                upstream = %self.upstream,
                server = %server.key,
                reason = %e,
                kind = e.kind(),
                "upstream server unhealthy: {} health checks in a row failed (last: {e}); it gets no requests until {} pass",
                self.fall,
                self.rise
            ),
        }
    }
}

/// Consecutive results of one server's probes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Streak {
    passed: u32,
    failed: u32,
}

impl Streak {
    /// Counts one probe of a server that is `healthy` now; returns its new health when this probe
    /// changes it (`fall` failures in a row take a healthy server down, `rise` passes in a row
    /// bring an unhealthy one back).
    fn observe(&mut self, passed: bool, healthy: bool, rise: u32, fall: u32) -> Option<bool> {
        if passed {
            self.passed = self.passed.saturating_add(1);
            self.failed = 0;
        } else {
            self.failed = self.failed.saturating_add(1);
            self.passed = 0;
        }
        match healthy {
            true if self.failed >= fall => Some(false),
            false if self.passed >= rise => Some(true),
            _ => None,
        }
    }
}

/// The servers (group name, `host:port`) the checks last found unhealthy: what a new generation's
/// servers start with. Bounded by the names in configurations.
static DOWN: Mutex<Option<HashSet<ServerName>>> = Mutex::new(None);

/// A server by group name and `host:port`.
type ServerName = (&'static str, Arc<str>);

/// Results of every group's probes so far: (group, result, count), for the counter.
static CHECKS: Mutex<Vec<(&'static str, &'static str, u64)>> = Mutex::new(Vec::new());

fn remember(upstream: &'static str, server: &Arc<str>, healthy: bool) {
    let mut down = DOWN.lock();
    let set = down.get_or_insert_with(HashSet::new);
    if healthy {
        set.remove(&(upstream, server.clone()));
    } else {
        set.insert((upstream, server.clone()));
    }
}

/// Drops what the checks found about the servers of group `upstream`.
fn forget(upstream: &'static str) {
    if let Some(set) = DOWN.lock().as_mut() {
        set.retain(|(u, _)| *u != upstream);
    }
}

fn count(upstream: &'static str, result: &'static str) {
    let mut checks = CHECKS.lock();
    match checks.iter_mut().find(|(u, r, _)| *u == upstream && *r == result) {
        Some((_, _, n)) => *n += 1,
        None => checks.push((upstream, result, 1)),
    }
}

/// Copies the health of every current server whose group has checks into
/// `tlsgate_upstream_server_healthy` (1/0; servers no longer configured disappear) and the
/// probe counts into `tlsgate_upstream_health_checks_total` (at scrape time).
pub fn export_metrics(gateway: &crate::Gateway) {
    use tlsgate_admin::metrics::{intern, HealthCheckLabels, InFlightLabels};
    let metrics = &gateway.metrics;
    let gauge = &metrics.upstream_server_healthy;
    gauge.clear();
    for group in &gateway.current().upstreams {
        for server in &group.servers {
            if let Some(healthy) = server.health() {
                let labels = InFlightLabels {
                    upstream: group.label,
                    server: intern(server.authority.as_str()),
                };
                gauge.get_or_create(&labels).set(i64::from(healthy));
            }
        }
    }
    for &(upstream, result, n) in CHECKS.lock().iter() {
        let counter = metrics
            .upstream_health_checks
            .get_or_create(&HealthCheckLabels { upstream, result });
        counter.inc_by(n.saturating_sub(counter.get()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn fall_failures_in_a_row_take_a_server_down_and_rise_passes_bring_it_back() {
        let (rise, fall) = (2, 3);
        let mut s = Streak::default();
        let mut healthy = true;
        let mut step = |passed: bool| {
            if let Some(now) = s.observe(passed, healthy, rise, fall) {
                healthy = now;
            }
            healthy
        };
        // Two failures, a pass in between: the streak starts again.
        assert_eq!([step(false), step(false), step(true)], [true; 3]);
        assert_eq!([step(false), step(false), step(false)], [true, true, false]);
        // Down: more failures keep it down; one pass is not enough, a failure restarts the count.
        assert_eq!(
            [step(false), step(true), step(false), step(true), step(true)],
            [false, false, false, false, true]
        );
        // rise = fall = 1: every probe decides.
        let mut s = Streak::default();
        assert_eq!(s.observe(false, true, 1, 1), Some(false));
        assert_eq!(s.observe(true, false, 1, 1), Some(true));
        assert_eq!(s.observe(true, true, 1, 1), None);
    }

    #[test]
    fn probe_errors_name_their_result_label() {
        let status = ProbeError::Status {
            status: StatusCode::SERVICE_UNAVAILABLE,
            expected: StatusRange::new(200, 399),
        };
        assert_eq!(status.to_string(), "status 503 Service Unavailable, expected 200-399");
        let refused = ProbeError::Connect(ConnectError::Tcp {
            server: Arc::from("127.0.0.1:1"),
            source: std::io::ErrorKind::ConnectionRefused.into(),
        });
        let slow = ProbeError::Connect(ConnectError::Timeout {
            server: Arc::from("h:1"),
            timeout: Duration::from_secs(1),
        });
        let kinds = [
            status.kind(),
            refused.kind(),
            slow.kind(),
            ProbeError::Timeout(Duration::from_secs(1)).kind(),
            ProbeError::Closed.kind(),
        ];
        assert_eq!(kinds, ["status", "connect", "timeout", "timeout", "protocol"]);
        assert!(refused.to_string().starts_with("connect to 127.0.0.1:1 failed"));
    }

    /// A probe for a group with `table` as its `[upstream.health_check]`.
    fn probe(table: &str) -> Probe {
        let text = format!("[[upstream]]\nname = \"g\"\nservers = [\"127.0.0.1:1\"]\n[upstream.health_check]\n{table}");
        let config = tlsgate_config::parse(&text).unwrap().upstreams.remove(0);
        Probe::new(&config, "g").unwrap()
    }

    /// An origin on a free port answering each connection with `reply` after `delay`; sends
    /// what it read (the request head) on the channel.
    async fn origin(
        reply: &'static str,
        delay: Duration,
    ) -> (UpstreamServer, tokio::sync::mpsc::UnboundedReceiver<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tlsgate_config::OriginAddr::parse(&listener.local_addr().unwrap().to_string()).unwrap();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((mut tcp, _)) = listener.accept().await {
                let tx = tx.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    // Up to the end of a request head (a PROXY v2 header before it has a CRLFCRLF
                    // of its own).
                    while !(head.ends_with(b"\r\n\r\n") && head.windows(10).any(|w| w == b"HTTP/1.1\r\n")) {
                        match tcp.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let _ = tx.send(String::from_utf8_lossy(&head).into_owned());
                    tokio::time::sleep(delay).await;
                    let _ = tcp.write_all(reply.as_bytes()).await;
                });
            }
        });
        (UpstreamServer::new(&addr).unwrap(), rx)
    }

    #[tokio::test]
    async fn a_group_sending_proxy_headers_probes_with_local_ones() {
        use tlsgate_wire::proxy_protocol::{parse, Parsed, Version};
        const OK: &str = "HTTP/1.1 204 No Content\r\n\r\n";
        let (server, mut heads) = origin(OK, Duration::ZERO).await;
        for (setting, version, len) in [("v2", Version::V2, 16), ("v1", Version::V1, 15)] {
            let text = format!(
                "[[upstream]]\nname = \"g\"\nservers = [\"127.0.0.1:1\"]\nsend_proxy_protocol = \"{setting}\"\n\
                 [upstream.health_check]\nenabled = true"
            );
            let config = tlsgate_config::parse(&text).unwrap().upstreams.remove(0);
            let p = Probe::new(&config, "g").unwrap();
            assert_eq!(p.check(&server, None).await.unwrap(), StatusCode::NO_CONTENT);
            let head = heads.recv().await.unwrap();
            match parse(head.as_bytes()) {
                Ok(Parsed::Done { header, consumed }) => {
                    assert_eq!((header.version, header.addresses, consumed), (version, None, len));
                    assert!(head[consumed..].starts_with("GET /healthz HTTP/1.1\r\n"), "{head:?}");
                }
                other => panic!("{other:?}: {head:?}"),
            }
        }
    }

    #[tokio::test]
    async fn a_probe_passes_on_an_expected_status_and_fails_on_anything_else() {
        const OK: &str = "HTTP/1.1 204 No Content\r\n\r\n";
        let (server, mut heads) = origin(OK, Duration::ZERO).await;
        let p = probe("enabled = true\npath = \"/ready?deep=1\"\nhost = \"app.internal\"");
        assert_eq!(p.check(&server, None).await.unwrap(), StatusCode::NO_CONTENT);
        let head = heads.recv().await.unwrap().to_ascii_lowercase();
        assert!(head.starts_with("get /ready?deep=1 http/1.1\r\n"), "{head}");
        for line in [
            "host: app.internal\r\n",
            "connection: close\r\n",
            "user-agent: tlsgate-health-check\r\n",
        ] {
            assert!(head.contains(line), "{line:?} missing from {head}");
        }
        // Without `host`, the server's host:port.
        let p = probe("enabled = true");
        p.check(&server, None).await.unwrap();
        let head = heads.recv().await.unwrap().to_ascii_lowercase();
        assert!(head.contains(&format!("host: {}\r\n", server.authority)), "{head}");
        // 204 is outside 200-200.
        let p = probe("enabled = true\nexpect_status = 200");
        let e = p.check(&server, None).await.unwrap_err();
        assert_eq!(
            (e.kind(), e.to_string().as_str()),
            ("status", "status 204 No Content, expected 200")
        );

        let (server, _heads) = origin(
            "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n",
            Duration::ZERO,
        )
        .await;
        let e = probe("enabled = true").check(&server, None).await.unwrap_err();
        assert_eq!(e.kind(), "status");

        let (server, _heads) = origin(OK, Duration::from_secs(5)).await;
        let e = probe("enabled = true\ntimeout = \"200ms\"")
            .check(&server, None)
            .await
            .unwrap_err();
        assert_eq!(
            (e.kind(), e.to_string().as_str()),
            ("timeout", "no response within 200ms")
        );

        let (server, _heads) = origin("not http\r\n\r\n", Duration::ZERO).await;
        assert_eq!(
            probe("enabled = true").check(&server, None).await.unwrap_err().kind(),
            "protocol"
        );
        let (server, _heads) = origin("", Duration::ZERO).await;
        assert_eq!(
            probe("enabled = true").check(&server, None).await.unwrap_err().kind(),
            "protocol"
        );

        // Nobody listening.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dead =
            UpstreamServer::new(&tlsgate_config::OriginAddr::parse(&format!("127.0.0.1:{port}")).unwrap()).unwrap();
        assert_eq!(
            probe("enabled = true").check(&dead, None).await.unwrap_err().kind(),
            "connect"
        );
    }
}
