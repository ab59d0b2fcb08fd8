//! The two halves of a client's HTTP/2 stream (the `h2` crate's), seen the ways the proxy layer
//! needs them: [`RequestBody`], a request body that returns flow-control credit as the proxy
//! takes each chunk (so a client can send no more than the window ahead of the origin), and
//! [`StreamIo`], a byte stream over an extended-CONNECT stream (RFC 8441) for a tunnel, handed
//! from the stream's task to the tunnel through a [`PendingTunnel`] once the `200` has gone out.
//!
//! A leaf module: the downstream HTTP/2 server makes these, the request path and the tunnel
//! take them, and it depends on neither.

use bytes::{Buf, Bytes};
use h2::{RecvStream, SendStream};
use http_body::{Frame, SizeHint};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A request body read from a client's HTTP/2 stream. Each DATA chunk's flow-control credit is
/// given back when the chunk is taken, so the client's window tracks what the proxy consumed.
#[derive(Debug)]
pub struct RequestBody {
    recv: RecvStream,
    /// Bytes the request's `content-length` still promises (a size hint for the origin request).
    remaining: Option<u64>,
    /// DATA ended; trailers (if any) come next.
    data_done: bool,
    done: bool,
}

impl RequestBody {
    /// The body of a request whose `content-length` is `length` (when it has one).
    pub fn new(recv: RecvStream, length: Option<u64>) -> Self {
        let done = recv.is_end_stream();
        Self {
            recv,
            remaining: length,
            data_done: done,
            done,
        }
    }
}

impl http_body::Body for RequestBody {
    type Data = Bytes;
    type Error = h2::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, h2::Error>>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        if !this.data_done {
            match ready!(this.recv.poll_data(cx)) {
                Some(Ok(chunk)) => {
                    let n = chunk.len();
                    // The credit goes back now: the chunk is the proxy's from here on.
                    let _ = this.recv.flow_control().release_capacity(n);
                    if let Some(r) = &mut this.remaining {
                        *r = r.saturating_sub(n as u64);
                    }
                    return Poll::Ready(Some(Ok(Frame::data(chunk))));
                }
                Some(Err(e)) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(e)));
                }
                None => this.data_done = true,
            }
        }
        let trailers = ready!(this.recv.poll_trailers(cx));
        this.done = true;
        match trailers {
            Ok(Some(t)) => Poll::Ready(Some(Ok(Frame::trailers(t)))),
            Ok(None) => Poll::Ready(None),
            Err(e) => Poll::Ready(Some(Err(e))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done || self.recv.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        match self.remaining {
            Some(n) => SizeHint::with_exact(n),
            None => SizeHint::default(),
        }
    }
}

/// An extended-CONNECT stream as a byte stream: reads are the client's DATA (credit returned as
/// they are read), writes become DATA within the stream's send window, shutdown ends the stream.
pub struct StreamIo {
    send: SendStream<Bytes>,
    recv: RecvStream,
    /// What the last DATA frame left unread.
    unread: Bytes,
}

impl StreamIo {
    /// The stream whose response head has been sent (`send`) and whose request side is `recv`.
    pub fn new(send: SendStream<Bytes>, recv: RecvStream) -> Self {
        Self {
            send,
            recv,
            unread: Bytes::new(),
        }
    }
}

fn stream_error(e: h2::Error) -> io::Error {
    if e.is_io() {
        return e
            .into_io()
            .unwrap_or_else(|| io::Error::from(io::ErrorKind::BrokenPipe));
    }
    io::Error::new(io::ErrorKind::ConnectionReset, e)
}

impl AsyncRead for StreamIo {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        while this.unread.is_empty() {
            match ready!(this.recv.poll_data(cx)) {
                Some(Ok(chunk)) => {
                    let _ = this.recv.flow_control().release_capacity(chunk.len());
                    this.unread = chunk;
                }
                Some(Err(e)) if e.reason() == Some(h2::Reason::NO_ERROR) => return Poll::Ready(Ok(())),
                Some(Err(e)) => return Poll::Ready(Err(stream_error(e))),
                None => return Poll::Ready(Ok(())),
            }
        }
        let n = this.unread.len().min(buf.remaining());
        buf.put_slice(&this.unread[..n]);
        this.unread.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for StreamIo {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let send = &mut self.send;
        send.reserve_capacity(buf.len());
        let granted = loop {
            if let Poll::Ready(reason) = send.poll_reset(cx) {
                let e = reason.map_or_else(stream_error, |r| {
                    io::Error::new(io::ErrorKind::ConnectionReset, h2::Error::from(r))
                });
                return Poll::Ready(Err(e));
            }
            match ready!(send.poll_capacity(cx)) {
                Some(Ok(0)) => continue,
                Some(Ok(n)) => break n,
                Some(Err(e)) => return Poll::Ready(Err(stream_error(e))),
                None => return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
            }
        };
        let n = granted.min(buf.len());
        send.send_data(Bytes::copy_from_slice(&buf[..n]), false)
            .map_err(stream_error)?;
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // The connection's task writes what is queued; nothing waits here.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let _ = self.send.send_data(Bytes::new(), true);
        Poll::Ready(Ok(()))
    }
}

/// Where an extended-CONNECT request's stream arrives once its `200` has been sent: a request
/// extension the tunnel takes (the request path never sees the stream itself).
#[derive(Clone)]
pub struct PendingTunnel(Arc<parking_lot::Mutex<Option<tokio::sync::oneshot::Receiver<StreamIo>>>>);

impl PendingTunnel {
    /// A pending tunnel and the sender the stream's task completes it with.
    pub fn new() -> (Self, tokio::sync::oneshot::Sender<StreamIo>) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        (Self(Arc::new(parking_lot::Mutex::new(Some(rx)))), tx)
    }

    /// The stream, once its response head has been sent (an error when the request was answered
    /// otherwise or the stream went away first). Taken once.
    pub fn take(&self) -> impl std::future::Future<Output = io::Result<StreamIo>> + Send + 'static {
        let rx = self.0.lock().take();
        async move {
            match rx {
                Some(rx) => rx.await.map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe)),
                None => Err(io::Error::other("tunnel already taken")),
            }
        }
    }
}

impl std::fmt::Debug for PendingTunnel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PendingTunnel")
    }
}
