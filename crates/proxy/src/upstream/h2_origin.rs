//! HTTP/2 to origins on the `h2` crate, exchanged by the request's own task.
//!
//! One task per origin connection runs `h2`'s connection (frames in and out, keep-alive PINGs);
//! everything else happens in the task of the request that uses it: the request's task opens
//! its stream (`h2` takes a lock, queues the HEADERS and wakes the connection's task), sends the
//! part of the request body that is already there at once, and awaits the response head on the
//! stream itself. Only a request body still arriving gets a task of its own, to stream it within
//! the origin's windows while the response comes back (gRPC streaming calls). Before, hyper's
//! client sat between the two: a channel to its connection task and a task per request.
//!
//! A stream the request's task drops (the client went away) is reset with `CANCEL` by `h2`.
//! 1xx interim responses reach the request's [`InterimSink`] (103 Early Hints), as on HTTP/1.1.

use crate::body::Body;
use crate::h2_keepalive::KeepAlive;
use crate::h2_stream::{content_length, send_body, send_frame, strip_connection_specific, RecvBody};
use crate::interim::InterimSink;
use bytes::Bytes;
use h2::client::{Builder, ResponseFuture, SendRequest};
use h2::SendStream;
use http::{header, HeaderValue, Request, Response};
use http_body::Body as _;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};

/// A PING to each origin connection this often (idle or not)…
const PING_INTERVAL: Duration = Duration::from_secs(30);
/// …and the connection is given up when one is not answered within this.
const PING_TIMEOUT: Duration = Duration::from_secs(20);
/// At most this many chunks of a request body that are already there go out with its head;
/// the rest is streamed by a task of its own.
const INLINE_CHUNKS: usize = 4;

/// The settings of every origin connection: 1 MiB per stream and 4 MiB per connection of
/// receive window (a large response is not throttled to one round trip per 64 KiB), no server
/// push, and room for the resets a busy connection sees.
pub(super) fn builder() -> Builder {
    let mut b = Builder::new();
    b.initial_window_size(1 << 20)
        .initial_connection_window_size(4 << 20)
        .max_concurrent_reset_streams(256)
        .enable_push(false);
    b
}

/// The sending half of a connection to an origin, shared by the server's requests (a clone is
/// a reference count).
#[derive(Clone)]
pub struct H2Sender {
    send: SendRequest<Bytes>,
    /// Set when the connection ended or refused a new stream: it takes no more requests.
    closed: Arc<AtomicBool>,
}

impl H2Sender {
    /// True when the connection takes no more requests.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }
}

/// Runs the HTTP/2 handshake on `io` and starts the connection's task (`server` names it in
/// logs).
pub(super) async fn handshake<T>(builder: &Builder, io: T, server: Arc<str>) -> Result<H2Sender, h2::Error>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (send, mut conn) = builder.handshake::<T, Bytes>(io).await?;
    let closed = Arc::new(AtomicBool::new(false));
    let pings = conn
        .ping_pong()
        .map(|pp| KeepAlive::new(pp, PING_INTERVAL, PING_TIMEOUT));
    tokio::spawn(drive(conn, pings, closed.clone(), server));
    Ok(H2Sender { send, closed })
}

/// Drives a connection until it ends (the origin closed it, it failed, a PING went unanswered,
/// or every sender and stream is gone).
async fn drive<T>(
    mut conn: h2::client::Connection<T, Bytes>,
    mut pings: Option<KeepAlive>,
    closed: Arc<AtomicBool>,
    server: Arc<str>,
) where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let ended = poll_fn(|cx| {
        if let Some(p) = &mut pings {
            if p.poll_timed_out(cx).is_ready() {
                return Poll::Ready(Err(None));
            }
        }
        Pin::new(&mut conn).poll(cx).map_err(Some)
    })
    .await;
    closed.store(true, Ordering::Relaxed);
    match ended {
        Ok(()) => {}
        Err(Some(e)) => tracing::debug!(%server, error = %e, "origin connection ended with an error"),
        Err(None) => tracing::debug!(%server, "origin connection given up: a PING went unanswered"),
    }
}

/// How an exchange went wrong.
pub(super) enum H2Failed {
    /// The connection took no new stream (it is closing or failed, as the error says): nothing
    /// was sent, and the body comes back for another connection.
    Unsent(Body, h2::Error),
    /// The exchange failed after the stream was opened, or the request was one `h2` refuses.
    Error(h2::Error),
}

/// Sends `req` with `body` on `sender`'s connection and awaits the response head, passing
/// interim responses to `interim`.
pub(super) async fn send(
    sender: &H2Sender,
    mut req: Request<()>,
    body: Body,
    interim: Option<InterimSink<'_>>,
) -> Result<Response<RecvBody>, H2Failed> {
    let mut send = sender.send.clone();
    if let Err(e) = poll_fn(|cx| send.poll_ready(cx)).await {
        sender.closed.store(true, Ordering::Relaxed);
        return Err(H2Failed::Unsent(body, e));
    }
    strip_connection_specific(req.headers_mut());
    let end = body.is_end_stream();
    if !end && !req.headers().contains_key(header::CONTENT_LENGTH) {
        if let Some(n) = body.size_hint().exact() {
            req.headers_mut().insert(header::CONTENT_LENGTH, HeaderValue::from(n));
        }
    }
    let (response, stream) = match send.send_request(req, end) {
        Ok(opened) => opened,
        // A head `h2` will not send (a field it refuses) is the request's fault; anything else
        // is the connection's (it failed or is going away): nothing went out.
        Err(e) if e.is_io() || e.is_go_away() || e.reason().is_some() => {
            sender.closed.store(true, Ordering::Relaxed);
            return Err(H2Failed::Unsent(body, e));
        }
        Err(e) => return Err(H2Failed::Error(e)),
    };
    // A body that ended with the head is kept, to go again if the origin turns the stream away
    // unprocessed.
    let kept = if end {
        Some(body)
    } else {
        start_body(body, stream);
        None
    };
    match await_head(response, interim).await {
        Ok(head) => {
            let length = content_length(head.headers());
            Ok(head.map(|recv| RecvBody::new(recv, length)))
        }
        // The origin's GOAWAY named a last stream below this one: it was not processed (RFC 9113
        // §6.8; h2 fails only such streams with the GOAWAY, the others end by themselves or
        // with the connection). Not a failure of the server: the connection is closing.
        Err(e) if e.is_go_away() && e.is_remote() => {
            sender.closed.store(true, Ordering::Relaxed);
            match kept {
                Some(body) => Err(H2Failed::Unsent(body, e)),
                None => Err(H2Failed::Error(e)),
            }
        }
        Err(e) => Err(H2Failed::Error(e)),
    }
}

/// The response head, 1xx interim heads passed to `interim` as they come.
async fn await_head(
    mut response: ResponseFuture,
    interim: Option<InterimSink<'_>>,
) -> Result<Response<h2::RecvStream>, h2::Error> {
    poll_fn(|cx| {
        if let Some(sink) = &interim {
            while let Poll::Ready(Some(Ok(head))) = response.poll_informational(cx) {
                sink.interim(head.status(), head.headers());
            }
        }
        Pin::new(&mut response).poll(cx)
    })
    .await
}

/// Sends what of `body` is already there with the head (no task, no wake-up: a unary gRPC
/// call's message, a small form); what is still to come is streamed by a task of its own
/// ([`send_body`]). A body the client broke resets the stream with `CANCEL`.
fn start_body(mut body: Body, mut stream: SendStream<Bytes>) {
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..INLINE_CHUNKS {
        let Poll::Ready(frame) = Pin::new(&mut body).poll_frame(&mut cx) else {
            break;
        };
        if !send_frame(&mut stream, frame, || body.is_end_stream(), h2::Reason::CANCEL) {
            return;
        }
    }
    tokio::spawn(send_body(body, stream, h2::Reason::CANCEL));
}
