//! Connections to a group's origin servers, without a pool task: each server keeps a stack of
//! idle HTTP/1.1 connections and at most one shared HTTP/2 connection, and the request's own
//! task takes a connection, sends on it and — when the response body has ended cleanly — puts
//! it back.
//!
//! - HTTP/1.1: the request's task runs the exchange itself ([`super::exchange`], no connection
//!   task); the most recently used idle connection first (warm caches, and the oldest ones age
//!   out); connections idle past `idle_timeout`, or that the origin closed meanwhile, are
//!   closed when next looked at, and by the group's sweeper; at most `max_idle_per_server` are
//!   kept. Upgrades (WebSocket) go on a new connection driven by hyper's client, which hands the
//!   connection over once the origin switched protocols.
//! - HTTP/2 (ALPN `h2` over TLS, prior knowledge over plaintext): one multiplexed connection per
//!   server, replaced when it closes; the request's task opens its stream and awaits the
//!   response on it ([`super::h2_origin`]: one task per connection runs `h2`'s connection).
//! - `auto`: the first connection's ALPN decides, and is remembered per server.
//! - A request that a reused connection turned away before any byte of it was written (the
//!   origin closed the idle connection at that moment) goes again on a fresh connection.

use super::connect::{self, ConnectError, ProxyPair, Transport};
use super::conns::{Idle, LEARNT_H1, LEARNT_H2};
use super::exchange::{BodyError, ExchangeError, Failed, GiveBack, H1Body, H1Conn, RequestHead};
use super::forwarding::is_grpc;
use super::h2_origin::{self, H2Failed, H2Sender};
use super::limit::{ConnSlot, QueueError, Room};
use super::server::UpstreamServer;
use crate::body::Body;
use crate::h2_stream::RecvBody;
use crate::interim::InterimSink;
use http::header::{self, HeaderValue};
use http::{Request, Response, Uri, Version};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tlsgate_admin::metrics::UpstreamTlsLabels;
use tlsgate_admin::Metrics;
use tlsgate_config::{UpstreamConfig, UpstreamProtocol};
use tlsgate_error::{Classify, Side};
use tlsgate_tls::origin::{alert_in, OriginAlpn, OriginHandshake, OriginTls, OriginTlsError};
use tlsgate_tls::TlsBuildError;

/// How a server is spoken to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// HTTP/1.1.
    Http1,
    /// HTTP/2.
    Http2,
}

/// How one request is to be sent, besides where.
#[derive(Clone, Copy)]
pub struct SendOpts<'a> {
    /// The request upgrades (WebSocket): only an HTTP/1.1 connection of its own can carry it.
    pub http1_only: bool,
    /// Groups with `send_proxy_protocol` only: the client connection a new connection announces,
    /// and the only one whose requests it carries.
    pub pair: Option<ProxyPair>,
    /// Where the origin's 103 Early Hints go.
    pub interim: Option<InterimSink<'a>>,
}

/// A request as prepared for a group's servers (hop-by-hop fields removed, forwarding fields
/// added), kept by the request path and read in place by every attempt: the HTTP/1.1 exchange
/// encodes it from here; the HTTP/2 exchange and hyper's client (upgrades) get a head shaped for
/// their wire.
#[derive(Clone, Copy)]
pub struct Outgoing<'a> {
    /// Method, fields and extensions.
    pub parts: &'a http::request::Parts,
    /// The origin-form target (`/path?query`), visible ASCII only (checked by the caller).
    pub target: &'a str,
}

impl Outgoing<'_> {
    /// The head the HTTP/1.1 exchange writes: the client's `Host` (set by `prepare_request`),
    /// else the server's authority.
    fn head<'s>(&'s self, server: &'s UpstreamServer) -> RequestHead<'s> {
        RequestHead {
            method: &self.parts.method,
            target: self.target,
            headers: &self.parts.headers,
            default_host: Some(server.authority.as_str()),
        }
    }

    /// A copy of the head in the form of `wire` (a target that is no URI is refused, the body
    /// discarded): HTTP/1.1 gets the origin-form target and a `Host` (the client's, else the
    /// server's); HTTP/2 an absolute URI whose authority is the client's host (`:authority`) and
    /// no `Host` field.
    fn request(&self, body: Body, wire: Wire, server: &UpstreamServer) -> Result<(Request<()>, Body), SendError> {
        let Ok(path) = Uri::try_from(self.target) else {
            discard_unsent(self, body);
            return Err(SendError::Target);
        };
        let mut req = Request::from_parts(self.parts.clone(), ());
        match wire {
            Wire::Http1 => {
                *req.version_mut() = Version::HTTP_11;
                *req.uri_mut() = path;
                if !req.headers().contains_key(header::HOST) {
                    if let Ok(host) = HeaderValue::from_str(server.authority.as_str()) {
                        req.headers_mut().insert(header::HOST, host);
                    }
                }
            }
            Wire::Http2 => {
                *req.version_mut() = Version::HTTP_2;
                let authority = req
                    .headers_mut()
                    .remove(header::HOST)
                    .and_then(|h| http::uri::Authority::try_from(h.as_bytes()).ok())
                    .unwrap_or_else(|| server.authority.clone());
                let mut parts = path.into_parts();
                parts.scheme = Some(if server.tls {
                    http::uri::Scheme::HTTPS
                } else {
                    http::uri::Scheme::HTTP
                });
                parts.authority = Some(authority);
                if let Ok(uri) = Uri::from_parts(parts) {
                    *req.uri_mut() = uri;
                }
            }
        }
        Ok((req, body))
    }
}

/// Why a request could not be exchanged with an origin.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// No connection could be opened; nothing was sent.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The exchange of an upgrade failed after the request was (perhaps partly) sent.
    #[error("exchange with the origin failed: {0}")]
    Exchange(#[source] hyper::Error),
    /// The HTTP/2 exchange failed after the stream was opened (or `h2` refused the head).
    #[error("exchange with the origin failed: {0}")]
    Http2(#[source] h2::Error),
    /// The HTTP/1.1 exchange failed after the request was (perhaps partly) sent.
    #[error("exchange with the origin failed: {0}")]
    Http1(#[source] ExchangeError),
    /// An upgrade (WebSocket) was asked of a group that speaks only HTTP/2 to its servers.
    #[error("upgrades need HTTP/1.1 to the origin (protocol = \"http1\" or \"auto\")")]
    Http1Needed,
    /// The server is at `max_connections_per_server` and the request got no connection from its
    /// queue; nothing was sent.
    #[error(transparent)]
    Queue(#[from] QueueError),
    /// The request's target is not a URI (HTTP/2 and upgrades need one); nothing was sent. The client's request, not the origin, is at fault.
    #[error("the request target is not a valid URI")]
    Target,
}

impl SendError {
    /// True when the exchange failed before any byte of the response arrived — more exactly,
    /// before a complete response head did: the connection was reset, closed or hit EOF while
    /// the request was being sent or its response head awaited (HTTP/1.1), or the stream was
    /// reset by the origin or the connection went away before the head (HTTP/2). Not for a
    /// connect failure (`Connect`: nothing was sent), a malformed response, a body the client
    /// broke or an upgrade refused. The retry policy (`super::retry`) sends idempotent requests
    /// without a body again after such a failure; every implementation of the exchange keeps
    /// this contract.
    pub fn before_response(&self) -> bool {
        let e = match self {
            Self::Exchange(e) => e,
            Self::Http1(e) => return e.before_response(),
            Self::Http2(e) => return h2_before_response(e),
            _ => return false,
        };
        if e.is_incomplete_message() || e.is_canceled() || e.is_closed() {
            return true;
        }
        if e.is_parse() || e.is_parse_status() || e.is_user() || e.is_timeout() {
            return false;
        }
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            if let Some(io) = s.downcast_ref::<std::io::Error>() {
                use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof};
                return matches!(
                    io.kind(),
                    ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof
                );
            }
            if let Some(h2) = s.downcast_ref::<h2::Error>() {
                return h2_before_response(h2);
            }
            source = s.source();
        }
        false
    }
}

/// An HTTP/2 stream failed before its response head: the connection broke or went away, or the
/// origin reset the stream (e.g. `REFUSED_STREAM`).
fn h2_before_response(e: &h2::Error) -> bool {
    e.is_io() || e.is_go_away() || (e.is_reset() && e.is_remote())
}

impl Classify for SendError {
    fn side(&self) -> Side {
        match self {
            Self::Target => Side::Downstream,
            _ => Side::Upstream,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Self::Target => "bad_request",
            Self::Connect(e) => e.kind(),
            Self::Exchange(_) | Self::Http2(_) => "protocol",
            Self::Http1(e) => e.kind(),
            Self::Http1Needed => "upgrade_needs_http1",
            Self::Queue(e) => e.kind(),
        }
    }

    fn retry_safe(&self) -> bool {
        matches!(self, Self::Connect(_) | Self::Queue(_))
    }
}

/// A group's connection settings and TLS client.
pub struct OriginPool {
    protocol: UpstreamProtocol,
    tls: Option<OriginTls>,
    connect_timeout: Duration,
    idle_timeout: Duration,
    max_idle: usize,
    h1: http1::Builder,
    h2: h2::client::Builder,
    label: &'static str,
}

impl OriginPool {
    /// The pool of `config` (`field` names it in errors, e.g. `upstream[0]`), with the TLS client
    /// built when some server is `https://`.
    pub fn new(
        config: &UpstreamConfig,
        any_tls: bool,
        field: &str,
        label: &'static str,
    ) -> Result<Self, TlsBuildError> {
        let alpn = match config.protocol {
            UpstreamProtocol::Http1 => OriginAlpn::Http1,
            UpstreamProtocol::Http2 => OriginAlpn::Http2,
            UpstreamProtocol::Auto => OriginAlpn::Either,
        };
        let tls = if any_tls {
            Some(OriginTls::new(&config.tls, alpn, &format!("{field}.tls"))?)
        } else {
            None
        };
        let mut h1 = http1::Builder::new();
        h1.max_buf_size(512 * 1024);
        let h2 = h2_origin::builder();
        Ok(Self {
            protocol: config.protocol,
            tls,
            connect_timeout: config.connect_timeout.get(),
            idle_timeout: config.idle_timeout.get(),
            max_idle: config.max_idle_per_server,
            h1,
            h2,
            label,
        })
    }

    /// The group's TLS client (`None` when no server is `https://`), for the health checks.
    pub(crate) fn tls(&self) -> Option<&OriginTls> {
        self.tls.as_ref()
    }

    /// The HTTP version `server` is spoken to with, when known before connecting.
    pub fn wire(&self, server: &UpstreamServer) -> Option<Wire> {
        match self.protocol {
            UpstreamProtocol::Http1 => Some(Wire::Http1),
            UpstreamProtocol::Http2 => Some(Wire::Http2),
            UpstreamProtocol::Auto if !server.tls => Some(Wire::Http1),
            UpstreamProtocol::Auto => match server.conns.learnt.load(Ordering::Relaxed) {
                LEARNT_H1 => Some(Wire::Http1),
                LEARNT_H2 => Some(Wire::Http2),
                _ => None,
            },
        }
    }

    /// Sends the request `out` with `body` to `server` on a pooled or new connection; see
    /// [`SendOpts`] for the rest.
    pub async fn send(
        self: &Arc<Self>,
        server: &Arc<UpstreamServer>,
        out: Outgoing<'_>,
        mut body: Body,
        metrics: &Metrics,
        opts: SendOpts<'_>,
    ) -> Result<Response<OriginBody>, SendError> {
        let SendOpts {
            http1_only,
            pair,
            interim,
        } = opts;
        let wire = self.wire(server);
        if http1_only && self.protocol == UpstreamProtocol::Http2 {
            discard_unsent(&out, body);
            return Err(SendError::Http1Needed);
        }
        let pair = pair.as_ref();
        // With a connection limit: an idle connection handed over in the queue, and since when
        // the request waits.
        let mut handed = None;
        let mut queued = None;
        // This request opens the server's shared HTTP/2 connection (one at a time).
        let mut dialing = None;
        let slot = loop {
            match wire.filter(|w| !http1_only || *w == Wire::Http1) {
                // Reused connections first; one that turns the request away unsent is dropped.
                // Upgrades always go on a new connection (hyper's, which hands it over).
                Some(Wire::Http1) if !http1_only => {
                    while let Some(conn) = self.checkout_h1(server, pair, &mut handed) {
                        match conn
                            .send(&out.head(server), body, self.reuse(server, pair), interim)
                            .await
                        {
                            Ok(resp) => return Ok(resp.map(OriginBody::h1)),
                            Err(Failed::Unsent(back)) => body = back,
                            Err(Failed::Error(e)) => return Err(SendError::Http1(e)),
                        }
                    }
                }
                Some(Wire::Http1) => {}
                Some(Wire::Http2) => {
                    let shared = server.conns.shared_h2(pair);
                    if let Some(sender) = shared.filter(|s| !s.is_closed()) {
                        let (req, b) = out.request(body, Wire::Http2, server)?;
                        match h2_origin::send(&sender, req, b, interim).await {
                            Ok(resp) => return Ok(resp.map(OriginBody::h2)),
                            Err(H2Failed::Unsent(back, _)) => body = back,
                            Err(H2Failed::Error(e)) => return Err(SendError::Http2(e)),
                        }
                    } else if pair.is_none() && dialing.is_none() {
                        // Wait for a dial already under way (bounded by its connect timeout),
                        // then look again: a burst of first requests opens one connection.
                        dialing = Some(server.conns.local().h2_dial.lock().await);
                        continue;
                    }
                }
                None => {}
            }
            // A new connection: counted, and within the server's limit (waiting in its queue).
            if !server.conns.limited() {
                break server.conns.counted();
            }
            let count = |result| count_queue(metrics, self.label, result);
            match server.conns.room(pair, &mut queued, &count).await {
                Ok(Room::Open(slot)) => break slot,
                Ok(Room::Idle(idle)) => handed = Some(idle),
                Err(e) => {
                    discard_unsent(&out, body);
                    return Err(e.into());
                }
            }
        };
        let refused = |e| refused(server, e);
        // Boxed: TCP + TLS handshake state is large and only new connections need it.
        let fresh = match Box::pin(self.connect(server, metrics, http1_only, pair, slot)).await {
            Ok(fresh) => fresh,
            Err(e) => {
                discard_unsent(&out, body);
                return Err(e);
            }
        };
        if let Fresh::Http2(sender) = &fresh {
            server.conns.share_h2(pair, sender);
        }
        drop(dialing);
        match fresh {
            Fresh::Http1(conn) => match conn
                .send(&out.head(server), body, self.reuse(server, pair), interim)
                .await
            {
                Ok(resp) => Ok(resp.map(OriginBody::h1)),
                Err(Failed::Error(e)) => Err(refused_h1(server, e)),
                // Only a reused connection hands a request back.
                Err(Failed::Unsent(body)) => {
                    discard_unsent(&out, body);
                    Err(SendError::Http1(ExchangeError::Closed))
                }
            },
            Fresh::Upgrade(mut sender) => {
                let (req, body) = out.request(body, Wire::Http1, server)?;
                let resp = sender.send_request(req.map(|()| body)).await.map_err(refused)?;
                Ok(resp.map(OriginBody::hyper))
            }
            Fresh::Http2(sender) => {
                let (req, body) = out.request(body, Wire::Http2, server)?;
                match h2_origin::send(&sender, req, body, interim).await {
                    Ok(resp) => Ok(resp.map(OriginBody::h2)),
                    Err(H2Failed::Error(e)) => Err(refused_h2(server, e)),
                    // A new connection that takes no stream failed at once (a TLS alert, a
                    // GOAWAY in answer to the preface).
                    Err(H2Failed::Unsent(body, e)) => {
                        discard_unsent(&out, body);
                        Err(refused_h2(server, e))
                    }
                }
            }
        }
    }

    /// The newest idle HTTP/1.1 connection of `server` that is still open and fresh (and bound
    /// to `pair`, if any); `handed` first, one given to the request in the server's queue.
    fn checkout_h1(
        &self,
        server: &UpstreamServer,
        pair: Option<&ProxyPair>,
        handed: &mut Option<Idle>,
    ) -> Option<H1Conn<Transport>> {
        loop {
            let Idle { since, mut conn, .. } = match handed.take() {
                Some(idle) => idle,
                None => server.conns.pop_idle(pair)?,
            };
            if since.elapsed() < self.idle_timeout && conn.idle_and_open() {
                return Some(conn);
            }
        }
    }

    /// What gives an HTTP/1.1 connection back when its response has ended cleanly (nothing,
    /// with `max_idle_per_server = 0`).
    fn reuse(self: &Arc<Self>, server: &Arc<UpstreamServer>, pair: Option<&ProxyPair>) -> Reuse {
        Reuse((self.max_idle > 0).then(|| (self.clone(), server.clone(), pair.copied())))
    }

    /// Returns an HTTP/1.1 connection (bound to `pair`) to `server`'s idle stack, or to a request
    /// waiting in its queue.
    fn checkin(&self, server: &UpstreamServer, conn: H1Conn<Transport>, pair: Option<ProxyPair>) {
        let idle = Idle {
            since: Instant::now(),
            conn,
            key: pair,
        };
        server.conns.check_in(idle, self.max_idle);
    }

    /// Closes idle connections older than `idle_timeout`.
    pub fn sweep(&self, servers: &[Arc<UpstreamServer>]) {
        for server in servers {
            for worker in server.conns.workers.iter() {
                let mut idle = worker.idle.lock();
                idle.retain_mut(|i| i.since.elapsed() < self.idle_timeout && i.conn.idle_and_open());
            }
        }
    }

    /// How often [`OriginPool::sweep`] should run.
    pub fn sweep_interval(&self) -> Duration {
        (self.idle_timeout / 2).max(Duration::from_millis(500))
    }

    /// Opens a connection to `server` and runs the HTTP handshake of the wire it speaks.
    async fn connect(
        &self,
        server: &UpstreamServer,
        metrics: &Metrics,
        http1_only: bool,
        pair: Option<&ProxyPair>,
        slot: ConnSlot,
    ) -> Result<Fresh, SendError> {
        let tls = if server.tls { self.tls.as_ref() } else { None };
        let timeout = self.connect_timeout;
        let proxy = connect::proxy_header(server.conns.proxy, pair);
        let (io, handshake) = connect::open(
            &server.host,
            server.port,
            &server.key,
            tls,
            timeout,
            http1_only,
            proxy.as_ref(),
        )
        .await?;
        server.mark_up();
        let io = io.counted(slot);
        let h2 = match (self.protocol, handshake) {
            _ if http1_only => false,
            (UpstreamProtocol::Http2, _) => true,
            (UpstreamProtocol::Auto, Some(hs)) => {
                let learnt = if hs.h2 { LEARNT_H2 } else { LEARNT_H1 };
                server.conns.learnt.store(learnt, Ordering::Relaxed);
                hs.h2
            }
            _ => false,
        };
        if let Some(hs) = handshake {
            self.count_handshake(metrics, hs);
        }
        if !h2 && !http1_only {
            return Ok(Fresh::Http1(H1Conn::new(io)));
        }
        if h2 {
            let sender = h2_origin::handshake(&self.h2, io, server.key.clone())
                .await
                .map_err(|e| refused_h2(server, e))?;
            return Ok(Fresh::Http2(sender));
        }
        let (sender, conn) = self
            .h1
            .handshake(TokioIo::new(io))
            .await
            .map_err(|e| refused(server, e))?;
        tokio::spawn(drive(conn.with_upgrades(), server.key.clone()));
        Ok(Fresh::Upgrade(sender))
    }

    fn count_handshake(&self, metrics: &Metrics, hs: OriginHandshake) {
        metrics
            .upstream_tls_handshakes
            .get_or_create(&UpstreamTlsLabels {
                upstream: self.label,
                version: hs.version,
                group: hs.group,
                resumed: if hs.resumed { "true" } else { "false" },
            })
            .inc();
    }
}

/// An error of a new connection's first exchange: an alert in it is the origin refusing the TLS
/// connection (TLS 1.3 reports a refused client certificate only on our first read), which is
/// a TLS failure like a failed handshake; anything else is an exchange failure.
fn refused(server: &UpstreamServer, e: hyper::Error) -> SendError {
    match alert_in(&e) {
        Some(alert) if server.tls => SendError::Connect(ConnectError::Tls {
            server: server.key.clone(),
            source: OriginTlsError::Alert(alert),
        }),
        _ => SendError::Exchange(e),
    }
}

/// [`refused`] for the HTTP/2 handshake and first exchange of a new connection.
fn refused_h2(server: &UpstreamServer, e: h2::Error) -> SendError {
    match e.get_io().and_then(|io| alert_in(io)) {
        Some(alert) if server.tls => SendError::Connect(ConnectError::Tls {
            server: server.key.clone(),
            source: OriginTlsError::Alert(alert),
        }),
        _ => SendError::Http2(e),
    }
}

/// [`refused`] for the HTTP/1.1 exchange of a new connection.
fn refused_h1(server: &UpstreamServer, e: ExchangeError) -> SendError {
    match e.io().and_then(|io| alert_in(io)) {
        Some(alert) if server.tls => SendError::Connect(ConnectError::Tls {
            server: server.key.clone(),
            source: OriginTlsError::Alert(alert),
        }),
        _ => SendError::Http1(e),
    }
}

/// A request that never left: its body is read and dropped in the background
/// ([`crate::body::discard`], as for requests the gateway answers itself), so that a client still
/// uploading reads the error response instead of a stream reset in the middle of its upload
/// (curl 7.88 drops an HTTP/2 response followed by `RST_STREAM(NO_ERROR)`). Not for gRPC: a
/// streaming call must learn at once that it is over, which the reset tells it (as gRPC
/// servers do).
fn discard_unsent(out: &Outgoing<'_>, body: Body) {
    if !is_grpc(&out.parts.headers) {
        tokio::spawn(crate::body::discard(body));
    }
}

/// Runs a connection's driver until the connection ends.
async fn drive<F: std::future::Future<Output = hyper::Result<()>>>(conn: F, server: Arc<str>) {
    if let Err(e) = conn.await {
        tracing::debug!(%server, error = %e, "origin connection ended with an error");
    }
}

/// A new connection, by wire.
enum Fresh {
    /// HTTP/1.1, exchanged by the request's task.
    Http1(H1Conn<Transport>),
    /// HTTP/1.1 for an upgrade, driven by hyper (which hands the connection over on `101`).
    Upgrade(http1::SendRequest<Body>),
    /// HTTP/2, a stream per request ([`super::h2_origin`]).
    Http2(H2Sender),
}

/// Hands an HTTP/1.1 connection back to its server's idle stack (`None`: connections are not
/// kept).
pub struct Reuse(Option<(Arc<OriginPool>, Arc<UpstreamServer>, Option<ProxyPair>)>);

impl GiveBack<Transport> for Reuse {
    fn give_back(self, conn: H1Conn<Transport>) {
        if let Some((pool, server, pair)) = self.0 {
            pool.checkin(&server, conn, pair);
        }
    }
}

/// Counts how a wait in a server's queue ended (`tlsgate_upstream_queue_total`).
fn count_queue(metrics: &Metrics, upstream: &'static str, result: &'static str) {
    let labels = tlsgate_admin::metrics::QueueLabels { upstream, result };
    metrics.upstream_queue.get_or_create(&labels).inc();
}

pin_project_lite::pin_project! {
    /// An origin's response body: HTTP/1.1 read by the request's task (its connection goes back
    /// to the pool when the body has ended cleanly; a body dropped early or failed takes its
    /// connection down), an HTTP/2 stream's, or hyper's (upgrades).
    #[project = OriginBodyProj]
    pub enum OriginBody {
        /// HTTP/1.1.
        H1 { #[pin] inner: H1Body<Transport, Reuse> },
        /// HTTP/2.
        H2 { #[pin] inner: RecvBody },
        /// An upgrade's response.
        Hyper { #[pin] inner: Incoming },
    }
}

impl OriginBody {
    fn h1(inner: H1Body<Transport, Reuse>) -> Self {
        Self::H1 { inner }
    }

    fn h2(inner: RecvBody) -> Self {
        Self::H2 { inner }
    }

    fn hyper(inner: Incoming) -> Self {
        Self::Hyper { inner }
    }
}

/// Why an origin's response body broke off.
#[derive(Debug, thiserror::Error)]
pub enum OriginBodyError {
    /// HTTP/1.1.
    #[error(transparent)]
    H1(#[from] BodyError),
    /// HTTP/2.
    #[error(transparent)]
    H2(#[from] h2::Error),
    /// An upgrade's response.
    #[error(transparent)]
    Hyper(#[from] hyper::Error),
}

impl http_body::Body for OriginBody {
    type Data = bytes::Bytes;
    type Error = OriginBodyError;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, OriginBodyError>>> {
        match self.project() {
            OriginBodyProj::H1 { inner } => inner.poll_frame(cx).map_err(Into::into),
            OriginBodyProj::H2 { inner } => inner.poll_frame(cx).map_err(Into::into),
            OriginBodyProj::Hyper { inner } => inner.poll_frame(cx).map_err(Into::into),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::H1 { inner } => inner.is_end_stream(),
            Self::H2 { inner } => inner.is_end_stream(),
            Self::Hyper { inner } => inner.is_end_stream(),
        }
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match self {
            Self::H1 { inner } => inner.size_hint(),
            Self::H2 { inner } => inner.size_hint(),
            Self::Hyper { inner } => inner.size_hint(),
        }
    }
}
