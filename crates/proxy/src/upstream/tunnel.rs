//! Upgraded connections (WebSocket and any other `Upgrade` protocol) through the gateway.
//!
//! - An HTTP/1.1 client's `Connection: upgrade` + `Upgrade: X` request goes to the origin over
//!   HTTP/1.1 with those headers restored (they are hop-by-hop, so forwarding removed them).
//! - An HTTP/2 client's extended CONNECT (RFC 8441, `:protocol = websocket`; the gateway
//!   advertises `SETTINGS_ENABLE_CONNECT_PROTOCOL`) becomes that same HTTP/1.1 upgrade request
//!   towards the origin (`GET`, `Upgrade: websocket`, a fresh `Sec-WebSocket-Key`); the origin's
//!   `101` becomes a `200` on the client's stream.
//! - Once the origin answered `101`, bytes are copied both ways until either side closes, or
//!   nothing moves for the group's `tunnel_idle_timeout`.
//!
//! HTTP/1.1 clients' connections are taken over by hand (hyper's manual upgrade): the request
//! handler leaves the origin's side in the connection's [`TunnelSlot`], hyper sends the `101`
//! and stops, and the connection's own task (downstream `http1`) then copies between the client
//! socket and the origin. An HTTP/2 stream is handed over by the downstream HTTP/2 server once
//! its `200` is sent ([`PendingTunnel`]) and copied by a task of its own.

use crate::h2_stream::PendingTunnel;
use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

const SEC_WEBSOCKET_KEY: HeaderName = HeaderName::from_static("sec-websocket-key");
const SEC_WEBSOCKET_ACCEPT: HeaderName = HeaderName::from_static("sec-websocket-accept");

/// What kind of upgrade a client asked for.
pub enum Upgrade {
    /// HTTP/1.1 `Upgrade: protocol`.
    Http1 {
        /// The `Upgrade` value, forwarded as is.
        protocol: HeaderValue,
    },
    /// HTTP/2 extended CONNECT with `:protocol`.
    Http2 {
        /// The `:protocol` value, sent as `Upgrade` to the origin.
        protocol: HeaderValue,
        /// The client's stream, once the response is sent.
        stream: PendingTunnel,
    },
}

impl std::fmt::Debug for Upgrade {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Upgrade::Http1 { protocol } => write!(f, "Http1({protocol:?})"),
            Upgrade::Http2 { protocol, .. } => write!(f, "Http2({protocol:?})"),
        }
    }
}

impl Upgrade {
    /// The upgrade `req` asks for, if any (taking the HTTP/2 stream's upgrade handle).
    pub fn wanted<B>(req: &mut Request<B>) -> Option<Self> {
        if req.method() == Method::CONNECT {
            let protocol = req.extensions().get::<h2::ext::Protocol>()?;
            let protocol = HeaderValue::from_str(protocol.as_str()).ok()?;
            let stream = req.extensions_mut().remove::<PendingTunnel>()?;
            return Some(Upgrade::Http2 { protocol, stream });
        }
        // `Upgrade` first: nearly every request lacks it, and then `Connection` is not read.
        let protocol = req.headers().get(header::UPGRADE)?;
        let asks = req
            .headers()
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case("upgrade"));
        asks.then(|| Upgrade::Http1 {
            protocol: protocol.clone(),
        })
    }

    /// Turns the forwarded request into the HTTP/1.1 upgrade request the origin gets (after
    /// forwarding removed the hop-by-hop headers).
    pub fn shape(&self, parts: &mut http::request::Parts) {
        let protocol = match self {
            Upgrade::Http1 { protocol } => protocol,
            Upgrade::Http2 { protocol, .. } => {
                parts.method = Method::GET;
                if !parts.headers.contains_key(SEC_WEBSOCKET_KEY) {
                    parts.headers.insert(SEC_WEBSOCKET_KEY, websocket_key());
                }
                protocol
            }
        };
        parts
            .headers
            .insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        parts.headers.insert(header::UPGRADE, protocol.clone());
    }

    /// The client's response to the origin's `101` (`resp` with its hop-by-hop headers already
    /// removed; `switched_to` the origin's `Upgrade` value), and starts the tunnel: `origin` is
    /// the origin connection's upgrade. HTTP/1.1
    /// clients get the `101` with `Connection`/`Upgrade` restored, and the tunnel is left in
    /// `slot` for the connection's task; HTTP/2 clients get `200`, and a task copies.
    pub fn accept<B>(
        self,
        mut resp: Response<B>,
        switched_to: Option<HeaderValue>,
        origin: OnUpgrade,
        slot: &TunnelSlot,
        idle: Duration,
        hold: Box<dyn Send>,
    ) -> Response<B> {
        match self {
            Upgrade::Http1 { protocol } => {
                let h = resp.headers_mut();
                h.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
                h.insert(header::UPGRADE, switched_to.unwrap_or(protocol));
                *slot.0.lock() = Some(Tunnel { origin, idle });
                resp
            }
            Upgrade::Http2 { stream, .. } => {
                *resp.status_mut() = StatusCode::OK;
                resp.headers_mut().remove(SEC_WEBSOCKET_ACCEPT);
                let held = hold;
                tokio::spawn(async move {
                    let _held = held;
                    let origin = async { origin.await.map_err(io::Error::other) };
                    match tokio::try_join!(stream.take(), origin) {
                        Ok((client, origin)) => {
                            let _ = pump(client, TokioIo::new(origin), idle).await;
                        }
                        Err(e) => tracing::debug!(error = %e, "HTTP/2 tunnel did not start"),
                    }
                });
                resp
            }
        }
    }
}

/// A random `Sec-WebSocket-Key` (16 random bytes, base64; RFC 6455 §4.1).
fn websocket_key() -> HeaderValue {
    let mut raw = [0u8; 16];
    let _ = boring::rand::rand_bytes(&mut raw);
    let text = boring::base64::encode_block(&raw);
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static("dGhlIHNhbXBsZSBub25jZQ=="))
}

/// The origin side of an HTTP/1.1 client's upgrade, waiting for the client connection's task.
pub struct Tunnel {
    /// The origin connection, once hyper hands it over.
    pub origin: OnUpgrade,
    /// Longest time with no byte either way.
    pub idle: Duration,
}

/// Where a request handler leaves an HTTP/1.1 client's [`Tunnel`] for the connection's task.
#[derive(Default)]
pub struct TunnelSlot(Mutex<Option<Tunnel>>);

impl TunnelSlot {
    /// The tunnel left by a handler, if any.
    pub fn take(&self) -> Option<Tunnel> {
        self.0.lock().take()
    }
}

impl Tunnel {
    /// Copies between the client connection (`read_ahead` first: bytes hyper read past the
    /// request) and the origin until either side closes or the tunnel idles out.
    pub async fn run<C>(self, client: C, read_ahead: Bytes) -> io::Result<(u64, u64)>
    where
        C: AsyncRead + AsyncWrite + Unpin,
    {
        let origin = TokioIo::new(self.origin.await.map_err(io::Error::other)?);
        pump(Prefixed::new(read_ahead, client), origin, self.idle).await
    }
}

/// Copies both ways until both directions finished, or nothing moved for `idle`.
pub async fn pump<A, B>(a: A, b: B, idle: Duration) -> io::Result<(u64, u64)>
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let moved = Arc::new(AtomicU64::new(0));
    let mut a = Counted::new(a, moved.clone());
    let mut b = Counted::new(b, moved.clone());
    let copy = tokio::io::copy_bidirectional(&mut a, &mut b);
    tokio::pin!(copy);
    let mut seen = moved.load(Ordering::Relaxed);
    loop {
        tokio::select! {
            r = &mut copy => return r,
            _ = tokio::time::sleep(idle) => {
                let now = moved.load(Ordering::Relaxed);
                if now == seen {
                    tracing::debug!(?idle, "tunnel closed: idle");
                    return Err(io::Error::new(io::ErrorKind::TimedOut, "tunnel idle"));
                }
                seen = now;
            }
        }
    }
}

pin_project_lite::pin_project! {
    /// A stream that counts the bytes read through it into a shared counter.
    struct Counted<S> {
        #[pin]
        inner: S,
        moved: Arc<AtomicU64>,
    }
}

impl<S> Counted<S> {
    fn new(inner: S, moved: Arc<AtomicU64>) -> Self {
        Self { inner, moved }
    }
}

impl<S: AsyncRead> AsyncRead for Counted<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.project();
        let before = buf.filled().len();
        let r = this.inner.poll_read(cx, buf);
        let n = buf.filled().len() - before;
        if n > 0 {
            this.moved.fetch_add(n as u64, Ordering::Relaxed);
        }
        r
    }
}

impl<S: AsyncWrite> AsyncWrite for Counted<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.project().inner.poll_write(cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().inner.poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().inner.poll_shutdown(cx)
    }
}

pin_project_lite::pin_project! {
    /// A stream whose first reads return `prefix`.
    struct Prefixed<S> {
        prefix: Bytes,
        #[pin]
        inner: S,
    }
}

impl<S> Prefixed<S> {
    fn new(prefix: Bytes, inner: S) -> Self {
        Self { prefix, inner }
    }
}

impl<S: AsyncRead> AsyncRead for Prefixed<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.project();
        if !this.prefix.is_empty() {
            let n = this.prefix.len().min(buf.remaining());
            buf.put_slice(&this.prefix.split_to(n));
            return Poll::Ready(Ok(()));
        }
        this.inner.poll_read(cx, buf)
    }
}

impl<S: AsyncWrite> AsyncWrite for Prefixed<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.project().inner.poll_write(cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().inner.poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().inner.poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upgrade_requests_are_recognised_and_reshaped_for_the_origin() {
        let mut req = Request::get("/ws")
            .header("connection", "keep-alive, Upgrade")
            .header("upgrade", "websocket")
            .body(())
            .unwrap();
        let up = Upgrade::wanted(&mut req).expect("an upgrade");
        assert!(matches!(&up, Upgrade::Http1 { protocol } if protocol == "websocket"));
        let (mut parts, ()) = Request::get("/ws").body(()).unwrap().into_parts();
        up.shape(&mut parts);
        assert_eq!(parts.headers["connection"], "upgrade");
        assert_eq!(parts.headers["upgrade"], "websocket");

        let mut plain = Request::get("/").header("upgrade", "websocket").body(()).unwrap();
        assert!(
            Upgrade::wanted(&mut plain).is_none(),
            "Upgrade without Connection: upgrade"
        );

        let mut connect = Request::builder()
            .method(Method::CONNECT)
            .uri("https://h/ws")
            .body(())
            .unwrap();
        connect
            .extensions_mut()
            .insert(h2::ext::Protocol::from_static("websocket"));
        connect.extensions_mut().insert(PendingTunnel::new().0);
        let up = Upgrade::wanted(&mut connect).expect("extended CONNECT");
        let (mut parts, ()) = connect.into_parts();
        up.shape(&mut parts);
        assert_eq!(parts.method, Method::GET);
        assert_eq!(parts.headers["upgrade"], "websocket");
        let key = parts.headers["sec-websocket-key"].to_str().unwrap().to_string();
        assert_eq!(boring::base64::decode_block(&key).unwrap().len(), 16);
    }

    #[tokio::test]
    async fn pump_copies_both_ways_with_the_read_ahead_first_and_idles_out() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (client, mut client_far) = tokio::io::duplex(1024);
        let (origin, mut origin_far) = tokio::io::duplex(1024);
        let task = tokio::spawn(pump(
            Prefixed::new(Bytes::from_static(b"early "), client),
            origin,
            Duration::from_millis(200),
        ));
        client_far.write_all(b"hello").await.unwrap();
        let mut got = [0u8; 11];
        origin_far.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"early hello");
        origin_far.write_all(b"back").await.unwrap();
        let mut back = [0u8; 4];
        client_far.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"back");
        let err = task.await.unwrap().unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    }
}
