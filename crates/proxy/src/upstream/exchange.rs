//! One HTTP/1.1 exchange with an origin, run by the request's own task (no connection task, no
//! channel: Cloudflare pingora's shape). The task writes the head that `tlsgate-h1` encodes, then
//! the body, reads until `tlsgate-h1` has parsed a response head, and hands back a response whose
//! body ([`H1Body`]) reads the connection itself. When that body has ended cleanly on a
//! persistent connection, the connection goes back to its owner through [`GiveBack`]; a body
//! that is already in the read buffer with the head (small responses) gives the connection back
//! before the response is even returned.
//!
//! Failures are an [`ExchangeError`]: which step failed, and whether it happened before a
//! response head arrived ([`ExchangeError::before_response`], the retry policy's contract). A
//! reused connection that fails before any byte of the request was written hands the request's
//! body back ([`Failed::Unsent`]) so that it can go on another connection.
//!
//! The head is read in place ([`RequestHead`]): the request's prepared fields are encoded
//! straight from where the request path keeps them, for every attempt, never copied.

use crate::body::{Body, BoxError};
use crate::interim::InterimSink;
use bytes::{Bytes, BytesMut};
use http::{Method, Response, StatusCode};
use http_body::{Frame, SizeHint};
use http_body_util::BodyExt;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tlsgate_error::{Classify, Side};
use tlsgate_h1::chunked::{Chunk, Decoder};
pub use tlsgate_h1::request::RequestHead;
use tlsgate_h1::request::{self as wire_request, CHUNK_END};
use tlsgate_h1::response::{self as wire_response, Head, HopByHop};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio_util::io::poll_read_buf;

/// The first read's size; doubled while reads fill the buffer, up to [`READ_MAX`].
const READ_MIN: usize = 8 * 1024;
/// The largest read (and so the largest data frame handed on).
const READ_MAX: usize = 64 * 1024;
/// Small request data frames that come one right after another are copied into the write
/// buffer until it holds this much (or the body has nothing more ready).
const COALESCE: usize = 16 * 1024;
/// Request data frames of at least this size are not copied on a transport that takes vectored
/// writes (plain TCP): they go out as they are, gathered behind what the write buffer holds
/// (the head, their chunk header) in one vectored write. A
/// 100 KiB upload arrives as 16 KiB frames (one TLS record each), whose copy was 1.5 % of the
/// gateway's CPU in the upload cell.
const GATHER: usize = 4 * 1024;

/// A transport that can be told that more of the message follows right away: on plain TCP the
/// kernel then keeps a partial segment back for it (`MSG_MORE`, [`crate::send_more`]), so a
/// body written in 16 KiB frames leaves in full segments (on loopback, 64 KiB) — fewer segments,
/// acknowledgements and wake-ups of the origin. The default writes as usual (TLS to origins:
/// BoringSSL writes its records itself; the in-memory streams of tests).
pub trait MoreFollows: AsyncWrite {
    /// Writes some of `bufs`; more of the same message follows without waiting for anything.
    fn poll_write_more(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, bufs)
    }
}

/// Takes a connection back when a response body has ended cleanly on it.
pub trait GiveBack<T>: Send {
    /// The connection can carry the next request.
    fn give_back(self, conn: H1Conn<T>);
}

/// An HTTP/1.1 connection to an origin with its buffers.
pub struct H1Conn<T> {
    io: T,
    read: BytesMut,
    write: BytesMut,
    read_size: usize,
    /// Requests sent on it so far.
    requests: u32,
}

/// Why an exchange failed.
#[derive(Debug, thiserror::Error)]
pub enum ExchangeError {
    /// Writing the request failed (the connection broke).
    #[error("writing the request to the origin failed: {0}")]
    Write(#[source] io::Error),
    /// The request body failed while it was being sent (the client broke it or went away).
    #[error("the request body failed: {0}")]
    RequestBody(#[source] BoxError),
    /// Reading the response head failed.
    #[error("reading the response head failed: {0}")]
    ReadHead(#[source] io::Error),
    /// The origin closed the connection before a complete response head.
    #[error("the origin closed the connection before a complete response head")]
    Closed,
    /// The response is not readable HTTP/1.1.
    #[error(transparent)]
    Malformed(#[from] tlsgate_h1::Error),
    /// `101 Switching Protocols` to a request that asked for no upgrade.
    #[error("the origin switched protocols without being asked")]
    UnaskedSwitch,
}

impl ExchangeError {
    /// True when the exchange failed before a complete response head arrived because the
    /// connection broke or closed (the retry policy's contract, kept by every exchange).
    pub fn before_response(&self) -> bool {
        matches!(self, Self::Write(_) | Self::ReadHead(_) | Self::Closed)
    }

    /// The I/O error underneath, if any (for the TLS alert an origin sent).
    pub fn io(&self) -> Option<&io::Error> {
        match self {
            Self::Write(e) | Self::ReadHead(e) => Some(e),
            _ => None,
        }
    }
}

impl Classify for ExchangeError {
    fn side(&self) -> Side {
        match self {
            Self::RequestBody(_) => Side::Downstream,
            _ => Side::Upstream,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Self::Write(_) | Self::ReadHead(_) | Self::Closed => "reset",
            Self::RequestBody(_) => "request_body",
            Self::Malformed(e) => e.kind(),
            Self::UnaskedSwitch => "protocol",
        }
    }

    fn retry_safe(&self) -> bool {
        false
    }
}

/// How an exchange failed: the request's body back untouched (a reused connection that had
/// closed: nothing was written), or an error.
pub enum Failed {
    /// Nothing of the request was written; it can go on another connection with this body.
    Unsent(Body),
    /// The exchange failed.
    Error(ExchangeError),
}

impl<T: AsyncRead + AsyncWrite + Unpin> H1Conn<T> {
    /// A connection that has carried no request yet.
    pub fn new(io: T) -> Self {
        Self {
            io,
            read: BytesMut::new(),
            write: BytesMut::new(),
            read_size: READ_MIN,
            requests: 0,
        }
    }

    /// Whether an idle connection still looks usable: no byte and no end-of-stream has arrived
    /// since its last response (an origin closing an idle connection shows as readable). Costs
    /// no system call unless the socket became readable.
    pub fn idle_and_open(&mut self) -> bool {
        if !self.read.is_empty() {
            return false;
        }
        let mut cx = Context::from_waker(std::task::Waker::noop());
        self.read.reserve(1);
        matches!(
            poll_read_buf(Pin::new(&mut self.io), &mut cx, &mut self.read),
            Poll::Pending
        )
    }

    /// Sends the request `head` with `body` (the head's fields ready for the origin) and reads
    /// the response head. `give_back` takes the connection once the response body has ended
    /// cleanly and the connection may carry another request.
    pub async fn send<G: GiveBack<T>>(
        mut self,
        head: &RequestHead<'_>,
        mut body: Body,
        give_back: G,
        interim: Option<InterimSink<'_>>,
    ) -> Result<Response<H1Body<T, G>>, Failed>
    where
        T: MoreFollows,
    {
        let head_request = *head.method == Method::HEAD;
        let reused = self.requests > 0;
        self.requests = self.requests.saturating_add(1);
        let framing = if http_body::Body::is_end_stream(&body) {
            wire_request::Body::None
        } else {
            match http_body::Body::size_hint(&body).exact() {
                Some(n) => wire_request::Body::Length(n),
                None => wire_request::Body::Chunked,
            }
        };
        self.write.clear();
        wire_request::encode_head(head, framing, &mut self.write);
        if framing == wire_request::Body::None {
            match self.write_buffer().await {
                Ok(()) => {}
                Err((0, _)) if reused => return Err(Failed::Unsent(body)),
                Err((_, e)) => return Err(Failed::Error(ExchangeError::Write(e))),
            }
        } else if let Err(e) = self.send_body(&mut body, framing).await {
            // An origin may answer before it has read the whole body (413, 401) and close: its
            // response, if it arrived, is what the client gets.
            if let ExchangeError::Write(_) = e {
                if let Ok(resp) = self.read_head(head_request, interim).await {
                    return Ok(self.response(resp, false, give_back));
                }
            }
            return Err(Failed::Error(e));
        }
        let head = self.read_head(head_request, interim).await.map_err(Failed::Error)?;
        let keep_alive = head.keep_alive;
        Ok(self.response(head, keep_alive, give_back))
    }

    /// Writes the write buffer whole; on failure, how many bytes had gone.
    async fn write_buffer(&mut self) -> Result<(), (usize, io::Error)> {
        let mut written = 0;
        while written < self.write.len() {
            match self.io.write(&self.write[written..]).await {
                Ok(0) => return Err((written, io::ErrorKind::WriteZero.into())),
                Ok(n) => written += n,
                Err(e) => return Err((written, e)),
            }
        }
        self.io.flush().await.map_err(|e| (written, e))
    }

    /// Writes the write buffer, then `data`, then `end`, in as few vectored writes as the
    /// transport takes (one, unless the socket is full), and empties the write buffer. `more`:
    /// more of the body follows (see [`MoreFollows`]).
    async fn write_gathered(&mut self, data: &[u8], end: &[u8], more: bool) -> io::Result<()>
    where
        T: MoreFollows,
    {
        let parts = [&self.write[..], data, end];
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let mut done = 0;
        while done < total {
            let mut slices = [io::IoSlice::new(&[]); 3];
            let (mut k, mut skip) = (0, done);
            for part in parts {
                if skip >= part.len() {
                    skip -= part.len();
                    continue;
                }
                slices[k] = io::IoSlice::new(&part[skip..]);
                skip = 0;
                k += 1;
            }
            let n = if more {
                std::future::poll_fn(|cx| Pin::new(&mut self.io).poll_write_more(cx, &slices[..k])).await?
            } else {
                self.io.write_vectored(&slices[..k]).await?
            };
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            done += n;
        }
        self.write.clear();
        self.io.flush().await
    }

    /// Writes the head (in the write buffer) and the body, framed as `framing` says.
    async fn send_body(&mut self, body: &mut Body, framing: wire_request::Body) -> Result<(), ExchangeError>
    where
        T: MoreFollows,
    {
        let chunked = framing == wire_request::Body::Chunked;
        // Bytes of a `Content-Length` body not yet handed to the write buffer or the socket:
        // while some are left, what is written may wait in the kernel for them. A chunked body
        // has no such promise (it may be a stream of events), so its writes leave at once.
        let mut left = match framing {
            wire_request::Body::Length(n) => n,
            _ => 0,
        };
        loop {
            // When the body has nothing more ready, what the write buffer holds goes to the
            // socket before the wait: a streamed body's pieces reach the origin as they come, and
            // a body of known length lets the kernel keep a partial segment for what follows.
            let next =
                match std::future::poll_fn(|cx| Poll::Ready(http_body::Body::poll_frame(Pin::new(&mut *body), cx)))
                    .await
                {
                    Poll::Ready(next) => next,
                    Poll::Pending => {
                        if !self.write.is_empty() {
                            self.write_gathered(&[], &[], left > 0)
                                .await
                                .map_err(ExchangeError::Write)?;
                        }
                        body.frame().await
                    }
                };
            match next {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) if data.is_empty() => {}
                    Ok(data) => {
                        left = left.saturating_sub(data.len() as u64);
                        let more = left > 0;
                        if chunked {
                            wire_request::chunk_header(data.len(), &mut self.write);
                        }
                        let end: &[u8] = if chunked { CHUNK_END } else { &[] };
                        if data.len() >= GATHER && self.io.is_write_vectored() {
                            self.write_gathered(&data, end, more)
                                .await
                                .map_err(ExchangeError::Write)?;
                        } else if data.len() > COALESCE {
                            // A transport that takes one buffer per write (TLS: one record
                            // each): what is buffered, then the frame as it is; the chunk's
                            // end waits in the buffer for the next write.
                            self.write_gathered(&data, &[], more)
                                .await
                                .map_err(ExchangeError::Write)?;
                            self.write.extend_from_slice(end);
                        } else {
                            self.write.extend_from_slice(&data);
                            self.write.extend_from_slice(end);
                            if self.write.len() >= COALESCE {
                                self.write_gathered(&[], &[], more)
                                    .await
                                    .map_err(ExchangeError::Write)?;
                            }
                        }
                    }
                    Err(frame) => {
                        if let (true, Ok(trailers)) = (chunked, frame.into_trailers()) {
                            wire_request::last_chunk(Some(&trailers), &mut self.write);
                            return self.write_gathered(&[], &[], false).await.map_err(ExchangeError::Write);
                        }
                    }
                },
                Some(Err(e)) => return Err(ExchangeError::RequestBody(e)),
                None => break,
            }
        }
        if chunked {
            wire_request::last_chunk(None, &mut self.write);
        }
        self.write_gathered(&[], &[], false).await.map_err(ExchangeError::Write)
    }

    /// Reads until a final response head has been parsed; interim 1xx responses go to
    /// `interim` (which passes on 103 Early Hints) or are skipped.
    async fn read_head(&mut self, head_request: bool, interim: Option<InterimSink<'_>>) -> Result<Head, ExchangeError> {
        loop {
            if let Some(mut head) = wire_response::parse(&mut self.read, head_request)? {
                match head.status {
                    StatusCode::SWITCHING_PROTOCOLS => return Err(ExchangeError::UnaskedSwitch),
                    s if s.is_informational() => {
                        if let Some(sink) = interim {
                            crate::upstream::forwarding::strip_hop_by_hop(&mut head.headers);
                            sink.interim(s, &head.headers);
                        }
                        continue;
                    }
                    _ => return Ok(head),
                }
            }
            let n = std::future::poll_fn(|cx| self.poll_fill(cx))
                .await
                .map_err(ExchangeError::ReadHead)?;
            if n == 0 {
                return Err(ExchangeError::Closed);
            }
        }
    }

    /// Reads once into the read buffer; 0 at end of stream.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        if self.read.capacity() - self.read.len() < self.read_size / 2 {
            self.read.reserve(self.read_size);
        }
        let room = self.read.capacity() - self.read.len();
        let n = std::task::ready!(poll_read_buf(Pin::new(&mut self.io), cx, &mut self.read))?;
        if n == room && self.read_size < READ_MAX {
            self.read_size *= 2;
        }
        Poll::Ready(Ok(n))
    }

    fn response<G: GiveBack<T>>(self, head: Head, keep_alive: bool, give_back: G) -> Response<H1Body<T, G>> {
        let Head {
            status,
            version,
            mut headers,
            body,
            hop_by_hop,
            ..
        } = head;
        // What is not forwarded, as the parser found it (an HTTP/1.1 exchange's response is never
        // a 101: upgrades go through hyper's client): usually a `Connection: keep-alive` alone.
        match hop_by_hop {
            HopByHop::None => {}
            HopByHop::Connection => {
                headers.remove(http::header::CONNECTION);
            }
            HopByHop::Others => crate::upstream::forwarding::strip_hop_by_hop(&mut headers),
        }
        let state = match body {
            wire_response::Body::Empty => State::Length(0),
            wire_response::Body::Length(n) => State::Length(n),
            wire_response::Body::Chunked => State::Chunked(Decoder::new()),
            wire_response::Body::UntilClose => State::UntilClose,
        };
        let mut body = H1Body {
            conn: Some(self),
            state,
            keep_alive,
            give_back: Some(give_back),
            ready: None,
        };
        body.take_whole_body();
        let mut resp = Response::new(body);
        *resp.status_mut() = status;
        *resp.version_mut() = version;
        *resp.headers_mut() = headers;
        resp
    }
}

#[derive(Debug)]
enum State {
    Length(u64),
    Chunked(Decoder),
    UntilClose,
    Done,
}

/// An origin's HTTP/1.1 response body, read from the connection as it is polled.
pub struct H1Body<T, G> {
    conn: Option<H1Conn<T>>,
    state: State,
    keep_alive: bool,
    give_back: Option<G>,
    /// A whole body that arrived with the head, taken before the response was returned.
    ready: Option<Bytes>,
}

/// Why a response body broke off.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// Reading failed.
    #[error("reading the response body failed: {0}")]
    Read(#[source] io::Error),
    /// The origin closed the connection before the end of the body.
    #[error("the origin closed the connection before the end of the response body")]
    Truncated,
    /// Malformed chunked framing.
    #[error(transparent)]
    Malformed(#[from] tlsgate_h1::Error),
}

impl<T: AsyncRead + AsyncWrite + Unpin, G: GiveBack<T>> H1Body<T, G> {
    /// A fixed-length body already in the buffer is taken at once, and the connection given back.
    fn take_whole_body(&mut self) {
        let State::Length(n) = self.state else {
            return;
        };
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        if (conn.read.len() as u64) < n {
            return;
        }
        if n > 0 {
            self.ready = Some(conn.read.split_to(n as usize).freeze());
        }
        self.end();
    }

    /// The body ended cleanly: the connection goes back when it may carry another request.
    fn end(&mut self) {
        self.state = State::Done;
        let conn = self.conn.take();
        if let (Some(conn), Some(give_back)) = (conn, self.give_back.take()) {
            if self.keep_alive && conn.read.is_empty() {
                give_back.give_back(conn);
            }
        }
    }

    fn fail(&mut self, e: BodyError) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        self.state = State::Done;
        self.conn = None;
        Poll::Ready(Some(Err(e)))
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin, G: GiveBack<T> + Unpin> http_body::Body for H1Body<T, G> {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        if let Some(data) = this.ready.take() {
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        loop {
            let Some(conn) = this.conn.as_mut() else {
                return Poll::Ready(None);
            };
            match &mut this.state {
                State::Done => return Poll::Ready(None),
                State::Length(0) => {
                    this.end();
                    return Poll::Ready(None);
                }
                State::Length(left) if !conn.read.is_empty() => {
                    let n = (*left).min(conn.read.len() as u64);
                    let data = conn.read.split_to(n as usize).freeze();
                    *left -= n;
                    if *left == 0 {
                        this.end();
                    }
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                State::Chunked(decoder) => match decoder.decode(&mut conn.read, READ_MAX) {
                    Ok(Some(Chunk::Data(data))) => return Poll::Ready(Some(Ok(Frame::data(data)))),
                    Ok(Some(Chunk::Trailers(trailers))) => return Poll::Ready(Some(Ok(Frame::trailers(trailers)))),
                    Ok(Some(Chunk::End)) => {
                        this.end();
                        return Poll::Ready(None);
                    }
                    Ok(None) => {}
                    Err(e) => return this.fail(e.into()),
                },
                State::UntilClose if !conn.read.is_empty() => {
                    let data = conn.read.split().freeze();
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                State::Length(_) | State::UntilClose => {}
            }
            match conn.poll_fill(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return this.fail(BodyError::Read(e)),
                Poll::Ready(Ok(0)) if matches!(this.state, State::UntilClose) => {
                    this.state = State::Done;
                    this.conn = None;
                    return Poll::Ready(None);
                }
                Poll::Ready(Ok(0)) => return this.fail(BodyError::Truncated),
                Poll::Ready(Ok(_)) => {}
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ready.is_none() && matches!(self.state, State::Done)
    }

    fn size_hint(&self) -> SizeHint {
        let ready = self.ready.as_ref().map_or(0, |b| b.len() as u64);
        match self.state {
            State::Length(left) => SizeHint::with_exact(left + ready),
            State::Done => SizeHint::with_exact(ready),
            _ => SizeHint::default(),
        }
    }
}

#[cfg(test)]
#[path = "exchange_tests.rs"]
mod tests;
