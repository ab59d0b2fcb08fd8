//! HTTP/2 streams (the `h2` crate's) seen the ways the proxy layer needs them, on either side:
//! [`RecvBody`], a body read from a stream (a client's request, an origin's response) that
//! returns flow-control credit as the proxy takes each chunk (so a peer can send no more than
//! the window ahead of where the bytes go); [`send_body`], a body written within the peer's
//! windows; [`StreamIo`], a byte stream over an extended-CONNECT stream (RFC 8441) for a tunnel,
//! handed from the stream's task to the tunnel through a [`PendingTunnel`] once the `200` has
//! gone out; and the head rules every HTTP/2 head obeys ([`strip_connection_specific`]).
//!
//! A leaf module: the downstream HTTP/2 server and the upstream HTTP/2 client use these, and
//! it depends on neither.

use bytes::{Buf, Bytes};
use h2::{RecvStream, SendStream};
use http::{header, HeaderMap};
use http_body::{Frame, SizeHint};
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A body read from an HTTP/2 stream (a client's request, an origin's response). Each DATA
/// chunk's flow-control credit is given back when the chunk is taken, so the peer's window
/// tracks what the proxy consumed.
#[derive(Debug)]
pub struct RecvBody {
    recv: RecvStream,
    /// Bytes the head's `content-length` still promises (a size hint for where the body goes).
    remaining: Option<u64>,
    /// DATA ended; trailers (if any) come next.
    data_done: bool,
    done: bool,
}

impl RecvBody {
    /// The body of a stream whose head's `content-length` is `length` (when it has one).
    pub fn new(recv: RecvStream, length: Option<u64>) -> Self {
        let done = recv.is_end_stream();
        Self {
            recv,
            // A stream that ended with its head has no body, whatever the head says (the
            // response to a HEAD request).
            remaining: if done { Some(0) } else { length },
            data_done: done,
            done,
        }
    }
}

impl http_body::Body for RecvBody {
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

/// The `content-length` of a head, when it has exactly one valid value.
pub fn content_length(headers: &HeaderMap) -> Option<u64> {
    let mut values = headers.get_all(header::CONTENT_LENGTH).iter();
    let first = values.next()?;
    if values.next().is_some() {
        return None;
    }
    first.to_str().ok()?.parse().ok()
}

/// Connection-specific fields (RFC 9113 §8.2.2): never sent on an HTTP/2 stream.
const CONNECTION_SPECIFIC: [header::HeaderName; 5] = [
    header::CONNECTION,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::HeaderName::from_static("keep-alive"),
    header::HeaderName::from_static("proxy-connection"),
];

/// Removes what an HTTP/2 head may not carry (RFC 9113 §8.2.2; `h2` refuses to send a head
/// with any of them). The request path already drops hop-by-hop fields; this keeps a gateway
/// answer, an edit or a request bound for an HTTP/2 origin from breaking the stream.
/// One pass over the names present (comparisons, no hashing); a lookup only for what is there.
pub fn strip_connection_specific(headers: &mut HeaderMap) {
    // One copy of the list for the call (a `const` array is built wherever it is named).
    let names = CONNECTION_SPECIFIC;
    let (mut present, mut te) = (0u8, false);
    for name in headers.keys() {
        if let Some(i) = names.iter().position(|n| n == name) {
            present |= 1 << i;
        }
        te |= name == header::TE;
    }
    for (i, name) in names.iter().enumerate() {
        if present & 1 << i != 0 {
            headers.remove(name);
        }
    }
    if te && headers.get(header::TE).is_some_and(|v| v != "trailers") {
        headers.remove(header::TE);
    }
}

/// What the pipe waits for next.
enum Next<E> {
    Frame(Option<Result<Frame<Bytes>, E>>),
    Gone,
}

/// Sends `body` on `send` (a response to a client, a request to an origin): each chunk once the
/// stream has some send capacity (so a peer that reads nothing holds at most a chunk and `h2`'s
/// bounded send buffer), the end of the stream with the last chunk, trailers as a final HEADERS
/// frame. A body that fails resets the stream with `on_error`; a stream the peer reset ends it.
pub async fn send_body<B>(body: B, mut send: SendStream<Bytes>, on_error: h2::Reason)
where
    B: http_body::Body<Data = Bytes>,
    B::Error: std::fmt::Display,
{
    let mut body = std::pin::pin!(body);
    loop {
        send.reserve_capacity(1);
        let next = poll_fn(|cx| {
            if send.poll_reset(cx).is_ready() {
                return Poll::Ready(Next::Gone);
            }
            if send.capacity() == 0 {
                loop {
                    match send.poll_capacity(cx) {
                        Poll::Ready(Some(Ok(0))) => {}
                        Poll::Ready(Some(Ok(_))) => break,
                        Poll::Ready(Some(Err(_)) | None) => return Poll::Ready(Next::Gone),
                        Poll::Pending => return Poll::Pending,
                    }
                }
            }
            body.as_mut().poll_frame(cx).map(Next::Frame)
        })
        .await;
        let Next::Frame(frame) = next else {
            return;
        };
        if !send_frame(&mut send, frame, || body.is_end_stream(), on_error) {
            return;
        }
    }
}

/// Sends one step of a body on `send`: a DATA chunk (with END_STREAM when `at_end` says the body
/// ended with it), the trailers, the end, or — for a body that failed — a reset with `on_error`.
/// True while more of the body is to come.
pub fn send_frame<E: std::fmt::Display>(
    send: &mut SendStream<Bytes>,
    frame: Option<Result<Frame<Bytes>, E>>,
    at_end: impl FnOnce() -> bool,
    on_error: h2::Reason,
) -> bool {
    let frame = match frame {
        None => {
            let _ = send.send_data(Bytes::new(), true);
            return false;
        }
        Some(Err(e)) => {
            tracing::debug!(error = %e, "body failed: resetting the stream");
            send.send_reset(on_error);
            return false;
        }
        Some(Ok(frame)) => frame,
    };
    match frame.into_data() {
        Ok(data) => {
            let end = at_end();
            send.send_data(data, end).is_ok() && !end
        }
        Err(frame) => {
            if let Ok(trailers) = frame.into_trailers() {
                let _ = send.send_trailers(trailers);
            } else {
                let _ = send.send_data(Bytes::new(), true);
            }
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{header, HeaderMap};

    #[test]
    fn content_length_is_read_only_when_single_and_valid() {
        let mut h = HeaderMap::new();
        assert_eq!(content_length(&h), None);
        h.insert(header::CONTENT_LENGTH, "12".parse().unwrap());
        assert_eq!(content_length(&h), Some(12));
        h.append(header::CONTENT_LENGTH, "12".parse().unwrap());
        assert_eq!(content_length(&h), None);
        h.insert(header::CONTENT_LENGTH, "x".parse().unwrap());
        assert_eq!(content_length(&h), None);
    }

    #[test]
    fn connection_specific_fields_are_stripped_and_te_trailers_kept() {
        let mut h = HeaderMap::new();
        h.insert(header::CONNECTION, "close".parse().unwrap());
        h.insert("keep-alive", "timeout=5".parse().unwrap());
        h.insert(header::TRANSFER_ENCODING, "chunked".parse().unwrap());
        h.insert(header::TE, "trailers".parse().unwrap());
        h.insert(header::CONTENT_TYPE, "text/plain".parse().unwrap());
        strip_connection_specific(&mut h);
        assert_eq!(h.len(), 2, "{h:?}");
        h.insert(header::TE, "gzip".parse().unwrap());
        strip_connection_specific(&mut h);
        assert!(!h.contains_key(header::TE));
        // The last ones of the list alone, and nothing to strip.
        h.insert(header::UPGRADE, "h2c".parse().unwrap());
        h.insert("proxy-connection", "close".parse().unwrap());
        strip_connection_specific(&mut h);
        assert_eq!(h.keys().map(|k| k.as_str()).collect::<Vec<_>>(), ["content-type"]);
        strip_connection_specific(&mut h);
        assert_eq!(h.len(), 1);
    }
}
