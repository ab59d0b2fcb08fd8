//! Connections to a group's origin servers, without a pool task: each server keeps a stack of
//! idle HTTP/1.1 connections and at most one shared HTTP/2 connection, and the request's own
//! task takes a connection, sends on it and — when the response body has ended cleanly — puts
//! it back. The one task per connection is hyper's connection driver.
//!
//! - HTTP/1.1: the most recently used idle connection first (warm caches, and the oldest ones
//!   age out); connections idle past `idle_timeout` are closed when next looked at, and by the
//!   group's sweeper; at most `max_idle_per_server` are kept.
//! - HTTP/2 (ALPN `h2` over TLS, prior knowledge over plaintext): one multiplexed connection per
//!   server, replaced when it closes.
//! - `auto`: the first connection's ALPN decides, and is remembered per server.
//! - A request that a reused connection turned away before any byte of it was written (the
//!   origin closed the idle connection at that moment) goes again on a fresh connection.

use super::connect::{self, ConnectError};
use super::conns::{Idle, LEARNT_H1, LEARNT_H2};
use super::forwarding::is_grpc;
use super::server::UpstreamServer;
use crate::body::Body;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
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

/// Why a request could not be exchanged with an origin.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// No connection could be opened; nothing was sent.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The exchange failed after the request was (perhaps partly) sent.
    #[error("exchange with the origin failed: {0}")]
    Exchange(#[source] hyper::Error),
    /// An upgrade (WebSocket) was asked of a group that speaks only HTTP/2 to its servers.
    #[error("upgrades need HTTP/1.1 to the origin (protocol = \"http1\" or \"auto\")")]
    Http1Needed,
}

impl Classify for SendError {
    fn side(&self) -> Side {
        Side::Upstream
    }

    fn kind(&self) -> &'static str {
        match self {
            Self::Connect(e) => e.kind(),
            Self::Exchange(_) => "protocol",
            Self::Http1Needed => "upgrade_needs_http1",
        }
    }

    fn retry_safe(&self) -> bool {
        matches!(self, Self::Connect(_))
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
    h2: http2::Builder<TokioExecutor>,
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
        let mut h2 = http2::Builder::new(TokioExecutor::new());
        h2.timer(TokioTimer::new())
            .initial_stream_window_size(1 << 20)
            .initial_connection_window_size(4 << 20)
            .max_concurrent_reset_streams(256)
            .keep_alive_interval(Duration::from_secs(30))
            .keep_alive_timeout(Duration::from_secs(20));
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

    /// Sends `req` to `server` on a pooled or new connection. `shape` turns the request into the
    /// form of the wire chosen (origin-form and `Host` for HTTP/1.1, absolute URI for HTTP/2).
    pub async fn send(
        self: &Arc<Self>,
        server: &Arc<UpstreamServer>,
        mut req: Request<Body>,
        shape: impl Fn(&mut Request<Body>, Wire),
        metrics: &Metrics,
        http1_only: bool,
    ) -> Result<Response<OriginBody>, SendError> {
        let wire = self.wire(server);
        if http1_only && self.protocol == UpstreamProtocol::Http2 {
            discard_unsent(req);
            return Err(SendError::Http1Needed);
        }
        match wire.filter(|w| !http1_only || *w == Wire::Http1) {
            Some(Wire::Http1) => {
                // Reused connections first; one that turns the request away unsent is dropped.
                while let Some(mut sender) = self.checkout_h1(server).await {
                    shape(&mut req, Wire::Http1);
                    match sender.try_send_request(req).await {
                        Ok(resp) => return Ok(self.h1_response(server, sender, resp)),
                        Err(mut e) => match e.take_message() {
                            Some(back) => req = back,
                            None => return Err(SendError::Exchange(e.into_error())),
                        },
                    }
                }
            }
            Some(Wire::Http2) => {
                let shared = server.conns.h2.lock().clone();
                if let Some(mut sender) = shared.filter(|s| !s.is_closed()) {
                    shape(&mut req, Wire::Http2);
                    match sender.try_send_request(req).await {
                        Ok(resp) => return Ok(resp.map(OriginBody::plain)),
                        Err(mut e) => match e.take_message() {
                            Some(back) => req = back,
                            None => return Err(SendError::Exchange(e.into_error())),
                        },
                    }
                }
            }
            None => {}
        }
        let refused = |e| refused(server, e);
        // Boxed: TCP + TLS handshake state is large and only new connections need it.
        let fresh = match Box::pin(self.connect(server, metrics, http1_only)).await {
            Ok(fresh) => fresh,
            Err(e) => {
                discard_unsent(req);
                return Err(e);
            }
        };
        match fresh {
            Fresh::Http1(mut sender) => {
                shape(&mut req, Wire::Http1);
                let resp = sender.send_request(req).await.map_err(refused)?;
                Ok(self.h1_response(server, sender, resp))
            }
            Fresh::Http2(mut sender) => {
                shape(&mut req, Wire::Http2);
                *server.conns.h2.lock() = Some(sender.clone());
                let resp = sender.send_request(req).await.map_err(refused)?;
                Ok(resp.map(OriginBody::plain))
            }
        }
    }

    /// The newest idle HTTP/1.1 connection of `server` that is still open and fresh.
    async fn checkout_h1(&self, server: &UpstreamServer) -> Option<http1::SendRequest<Body>> {
        loop {
            let Idle { since, mut sender } = server.conns.idle.lock().pop()?;
            if sender.is_closed() || since.elapsed() >= self.idle_timeout {
                continue;
            }
            // Put back as soon as its response body ended; the driver may not have switched
            // it to ready yet.
            if sender.ready().await.is_ok() {
                return Some(sender);
            }
        }
    }

    /// Wraps an HTTP/1.1 response so that its connection returns to the pool when the body
    /// ends cleanly.
    fn h1_response(
        self: &Arc<Self>,
        server: &Arc<UpstreamServer>,
        sender: http1::SendRequest<Body>,
        resp: Response<Incoming>,
    ) -> Response<OriginBody> {
        // A connection switched to another protocol (101) is never reused.
        let reusable = self.max_idle > 0 && resp.status() != http::StatusCode::SWITCHING_PROTOCOLS;
        let reuse = reusable.then(|| Reuse {
            pool: self.clone(),
            server: server.clone(),
            sender,
        });
        resp.map(|body| OriginBody::new(body, reuse))
    }

    /// Returns an HTTP/1.1 connection to `server`'s idle stack.
    fn checkin(&self, server: &UpstreamServer, sender: http1::SendRequest<Body>) {
        if sender.is_closed() {
            return;
        }
        let mut idle = server.conns.idle.lock();
        if idle.len() >= self.max_idle {
            // The oldest goes: it is the likeliest to have been closed by the origin.
            idle.remove(0);
        }
        idle.push(Idle {
            since: Instant::now(),
            sender,
        });
    }

    /// Closes idle connections older than `idle_timeout`.
    pub fn sweep(&self, servers: &[Arc<UpstreamServer>]) {
        for server in servers {
            let mut idle = server.conns.idle.lock();
            idle.retain(|i| !i.sender.is_closed() && i.since.elapsed() < self.idle_timeout);
        }
    }

    /// How often [`OriginPool::sweep`] should run.
    pub fn sweep_interval(&self) -> Duration {
        (self.idle_timeout / 2).max(Duration::from_millis(500))
    }

    /// Opens a connection to `server` and runs the HTTP handshake of the wire it speaks.
    async fn connect(&self, server: &UpstreamServer, metrics: &Metrics, http1_only: bool) -> Result<Fresh, SendError> {
        let tls = if server.tls { self.tls.as_ref() } else { None };
        let timeout = self.connect_timeout;
        let (io, handshake) = connect::open(&server.host, server.port, &server.key, tls, timeout, http1_only).await?;
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
        let io = TokioIo::new(io);
        if h2 {
            let (sender, conn) = self.h2.handshake(io).await.map_err(|e| refused(server, e))?;
            tokio::spawn(drive(conn, server.key.clone()));
            Ok(Fresh::Http2(sender))
        } else {
            let (sender, conn) = self.h1.handshake(io).await.map_err(|e| refused(server, e))?;
            tokio::spawn(drive(conn.with_upgrades(), server.key.clone()));
            Ok(Fresh::Http1(sender))
        }
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

/// A request that never left: its body is read and dropped in the background
/// ([`crate::body::discard`], as for requests the gateway answers itself), so that a client still
/// uploading reads the error response instead of a stream reset in the middle of its upload
/// (curl 7.88 drops an HTTP/2 response followed by `RST_STREAM(NO_ERROR)`). Not for gRPC: a
/// streaming call must learn at once that it is over, which the reset tells it (as gRPC
/// servers do).
fn discard_unsent(req: Request<Body>) {
    if !is_grpc(req.headers()) {
        tokio::spawn(crate::body::discard(req.into_body()));
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
    Http1(http1::SendRequest<Body>),
    Http2(http2::SendRequest<Body>),
}

/// Hands an HTTP/1.1 connection back to its server's idle stack.
struct Reuse {
    pool: Arc<OriginPool>,
    server: Arc<UpstreamServer>,
    sender: http1::SendRequest<Body>,
}

impl Reuse {
    fn give_back(self) {
        self.pool.checkin(&self.server, self.sender);
    }
}

pin_project_lite::pin_project! {
    /// An origin's response body. An HTTP/1.1 connection goes back to the pool when the body has
    /// ended cleanly (all of it read); a body dropped early or failed takes its connection down.
    pub struct OriginBody {
        #[pin]
        inner: Incoming,
        reuse: Option<Reuse>,
    }
}

impl OriginBody {
    fn new(inner: Incoming, reuse: Option<Reuse>) -> Self {
        let mut body = Self { inner, reuse };
        if http_body::Body::is_end_stream(&body.inner) {
            body.finish();
        }
        body
    }

    fn plain(inner: Incoming) -> Self {
        Self { inner, reuse: None }
    }

    fn finish(&mut self) {
        if let Some(reuse) = self.reuse.take() {
            reuse.give_back();
        }
    }
}

impl http_body::Body for OriginBody {
    type Data = bytes::Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, hyper::Error>>> {
        use std::task::Poll;
        let mut this = self.project();
        let polled = this.inner.as_mut().poll_frame(cx);
        let ended_cleanly = match &polled {
            Poll::Ready(Some(Ok(_))) => this.inner.is_end_stream(),
            Poll::Ready(None) => true,
            // A broken body takes its connection down with it.
            Poll::Ready(Some(Err(_))) => {
                this.reuse.take();
                false
            }
            Poll::Pending => false,
        };
        if ended_cleanly {
            if let Some(reuse) = this.reuse.take() {
                reuse.give_back();
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
