//! HTTP/2 toward a client, served on the `h2` crate directly: the connection's frames, settings
//! (streams, windows, frame and header-table sizes, the header-list limit, extended CONNECT) and
//! keep-alive PINGs here; each request stream ([`stream`]) through the same request path as every
//! other protocol. Served without hyper's server so that a stream can send interim responses
//! (103 Early Hints, `h2`'s `send_informational`) and so that the request path owns the stream's
//! halves (request body credit, response pipe, tunnels).
//!
//! The streams run inside the connection's own task, not a task each: a worker is one thread, so
//! a task per stream buys no parallelism, only a wake-up through the scheduler each way (the
//! connection wakes a stream with its request, the stream wakes the connection with each frame
//! to send). In one task, every response the streams queued in one pass goes out in the same
//! write (one TLS record, one `sendmsg`, instead of one per stream).

mod date;
mod stream;

use crate::context::ConnContext;
use crate::downstream::drive::{drive, Graceful, Timeouts};
use crate::downstream::frames::FrameWatch;
use crate::downstream::io::Activity;
use crate::downstream::park::ReleasedMark;
use crate::downstream::records::RecordSizer;
use crate::h2_keepalive::KeepAlive;
use bytes::Bytes;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use tlsgate_config::{Http2Config, ServerConfig};

/// Response bytes one connection may have queued beyond what the client's windows let out
/// (hyper's default for its server: bounds what a slow reader costs).
const MAX_SEND_BUFFER: usize = 400 * 1024;
/// Streams the gateway itself may reset for protocol errors before the connection is closed
/// (hyper's default: a client that keeps provoking resets is cut off).
const MAX_LOCAL_ERROR_RESETS: usize = 1024;

/// Why an HTTP/2 connection ended with an error.
#[derive(Debug, thiserror::Error)]
pub enum Http2ConnError {
    /// The `h2` connection failed (protocol error, I/O, GOAWAY with an error).
    #[error("http2: {0}")]
    Protocol(#[from] h2::Error),
    /// A keep-alive PING went unanswered for `keep_alive_timeout`.
    #[error("http2: keep-alive PING not answered in time")]
    KeepAliveTimedOut,
}

type Io = FrameWatch<RecordSizer>;

/// A stream's future, driven by its connection.
type StreamTask = Pin<Box<dyn Future<Output = ()> + Send>>;

/// An idle connection gives back its codec's buffers and empty stream tables (the patched
/// `h2`'s `release_idle_memory`, third_party/README.md) once its watchdog has seen it idle at two
/// checks this far apart: 1-2 s after its last request. Not at once: a connection between two
/// requests would take them all again for the next one (1.6 % fewer requests per CPU-second in
/// the h2load cell when released whenever no stream was open).
const RELEASE_IDLE_CHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// Rounds of accepting and stream polling in one wake-up before the connection yields to the
/// worker's other connections.
const ROUNDS_PER_POLL: usize = 16;

enum State {
    /// The handshake, with what only its end needs: kept in this variant, which is smaller than
    /// the serving one, they cost the connection nothing once it serves.
    Handshaking {
        handshake: h2::server::Handshake<Io, Bytes>,
        keepalive: Option<(std::time::Duration, std::time::Duration)>,
        /// A graceful finish was asked for during the handshake.
        close_pending: bool,
    },
    Serving(h2::server::Connection<Io, Bytes>),
}

/// One client's HTTP/2 connection: accepts streams and drives them until the connection ends;
/// finishes gracefully (GOAWAY, streams in flight completed) when asked.
///
/// Its size matters: an idle connection holds it (boxed) for its life, and 1,280 bytes is one of
/// mimalloc's size classes (the next is 1,536): the keep-alive settings live in the handshake's
/// variant and the keep-alive state, rarely configured, in a box of its own (unit test below).
pub struct Connection {
    state: State,
    ctx: Arc<ConnContext>,
    pings: Option<Box<KeepAlive>>,
    /// The streams in flight; none while the connection is released (the set allocates its
    /// wake-up queue, about 150 bytes, when made).
    streams: Option<futures_util::stream::FuturesUnordered<StreamTask>>,
    /// Counted as released ([`Graceful::release_idle`]) until its next stream.
    released: Option<ReleasedMark>,
}

impl Future for Connection {
    type Output = Result<(), Http2ConnError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        loop {
            let conn = match &mut this.state {
                State::Handshaking {
                    handshake,
                    keepalive,
                    close_pending,
                } => {
                    let mut conn = ready!(Pin::new(handshake).poll(cx))?;
                    if let Some((interval, timeout)) = *keepalive {
                        this.pings = conn
                            .ping_pong()
                            .map(|pp| Box::new(KeepAlive::new(pp, interval, timeout)));
                    }
                    if *close_pending {
                        conn.graceful_shutdown();
                    }
                    this.state = State::Serving(conn);
                    continue;
                }
                State::Serving(conn) => conn,
            };
            if let Some(pings) = &mut this.pings {
                if pings.poll_timed_out(cx).is_ready() {
                    this.ctx
                        .gateway
                        .metrics
                        .client_timeouts
                        .get_or_create(&tlsgate_admin::metrics::ClientTimeoutLabels { reason: "keepalive" })
                        .inc();
                    return Poll::Ready(Err(Http2ConnError::KeepAliveTimedOut));
                }
            }
            return serve_streams(conn, &mut this.streams, &mut this.released, &this.ctx, cx);
        }
    }
}

/// Accepts new streams and drives those in flight until neither makes progress: what the streams
/// queue is written when `poll_accept` next drives the connection, so both go round until quiet.
fn serve_streams(
    conn: &mut h2::server::Connection<Io, Bytes>,
    streams: &mut Option<futures_util::stream::FuturesUnordered<StreamTask>>,
    released: &mut Option<ReleasedMark>,
    ctx: &Arc<ConnContext>,
    cx: &mut Context<'_>,
) -> Poll<Result<(), Http2ConnError>> {
    use futures_util::StreamExt as _;
    for _ in 0..ROUNDS_PER_POLL {
        let mut progress = false;
        loop {
            match conn.poll_accept(cx) {
                Poll::Ready(Some(Ok((req, respond)))) => {
                    streams
                        .get_or_insert_with(Default::default)
                        .push(crate::boxed::pin_in_place(|| stream::serve(ctx.clone(), req, respond)));
                    // A stream takes the released buffers again.
                    *released = None;
                    progress = true;
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(e.into())),
                // The connection is over: streams still in flight could send nothing more.
                Poll::Ready(None) => return Poll::Ready(Ok(())),
                Poll::Pending => break,
            }
        }
        if let Some(streams) = streams.as_mut() {
            while let Poll::Ready(Some(())) = streams.poll_next_unpin(cx) {
                progress = true;
            }
        }
        if !progress {
            return Poll::Pending;
        }
    }
    // Busy: let the worker's other connections run, and come back.
    cx.waker().wake_by_ref();
    Poll::Pending
}

impl Graceful for Connection {
    fn graceful(self: Pin<&mut Self>) {
        let this = self.get_mut();
        match &mut this.state {
            State::Handshaking { close_pending, .. } => *close_pending = true,
            State::Serving(conn) => conn.graceful_shutdown(),
        }
    }

    fn release_idle(self: Pin<&mut Self>) {
        let this = self.get_mut();
        let idle = this.streams.as_ref().is_none_or(|s| s.is_empty());
        if let (State::Serving(conn), true) = (&mut this.state, idle) {
            this.streams = None;
            if conn.release_idle_memory() && this.released.is_none() {
                this.released = Some(ReleasedMark::new(&this.ctx.gateway.metrics, "http2"));
            }
        }
    }
}

/// Serves HTTP/2 streams on `tls` for the connection `ctx` until the connection ends (true when
/// it ended with an error).
///
/// Not an `async fn`: the returned future is the watchdog's alone, with the connection boxed
/// inside it. An `async fn` would keep its arguments (the TLS stream's 216 bytes, moved into the
/// connection long before) and the builder in its state beside the watchdog's for the
/// connection's whole life (1,016 bytes instead of 584, `-Zprint-type-sizes`).
pub fn serve(
    tls: RecordSizer,
    ctx: Arc<ConnContext>,
    server: &ServerConfig,
    h2c: &Http2Config,
    activity: Arc<Activity>,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> impl Future<Output = bool> + Send + 'static {
    let metrics = ctx.gateway.metrics.clone();
    let mut b = h2::server::Builder::new();
    b.max_concurrent_streams(h2c.max_concurrent_streams)
        .max_header_list_size(u32::try_from(server.max_request_header_bytes).unwrap_or(u32::MAX))
        .initial_window_size(h2c.initial_stream_window)
        .initial_connection_window_size(h2c.initial_connection_window)
        .max_frame_size(h2c.max_frame_size)
        .header_table_size(h2c.header_table_size)
        .max_send_buffer_size(MAX_SEND_BUFFER)
        .max_local_error_reset_streams(Some(MAX_LOCAL_ERROR_RESETS))
        // RFC 8441: WebSocket over an HTTP/2 stream (extended CONNECT), see upstream::tunnel.
        .enable_connect_protocol();
    let conn = Connection {
        state: State::Handshaking {
            handshake: b.handshake(FrameWatch::new(tls, activity.clone())),
            keepalive: h2c
                .keep_alive_interval
                .map(|interval| (interval.get(), h2c.keep_alive_timeout.get())),
            close_pending: false,
        },
        ctx,
        pings: None,
        streams: None,
        released: None,
    };
    let timeouts = Timeouts {
        idle: server.client_idle_timeout.get(),
        header: Some(server.client_header_timeout.get()),
        send: server.client_send_timeout.get(),
        release_idle: Some(RELEASE_IDLE_CHECK),
    };
    // Boxed, and the box handed over: moved into `drive` by value, the connection (2 KB with its
    // codec) was held twice in the task's future (the argument and the pinned local).
    drive(Box::pin(conn), activity, timeouts, metrics, shutdown)
}

#[cfg(test)]
mod tests {
    /// An idle HTTP/2 connection keeps its `Connection` boxed for its life: within 1,280 bytes,
    /// mimalloc's size class below 1,536 (1,328 bytes before the keep-alive settings moved into
    /// the handshake's variant and the keep-alive state into a box: 256 bytes more per
    /// connection). A larger `h2` connection or a new field fails here, to be weighed.
    #[test]
    fn a_connection_fits_the_1280_byte_size_class() {
        let size = std::mem::size_of::<super::Connection>();
        assert!(size <= 1280, "http2::Connection is {size} bytes");
    }
}
