//! A TCP stream wrapper that counts bytes for metrics, records what the connection's watchdog
//! needs ([`Activity`]: whether any byte arrived yet, since when the client has accepted nothing
//! we had to send, requests in flight and the last time one started or ended, an HTTP/2 header
//! block left open), and buffers small reads.
//!
//! BoringSSL reads a record in two steps, the 5-byte header and then the body, and ignores
//! read-ahead; without a buffer below it every request costs two `recvfrom` calls. A small read
//! is served from one `READ_AHEAD`-byte read instead. The buffer exists only while it holds
//! bytes, so an idle connection keeps none.

use bytes::{Buf, BytesMut};
use pin_project_lite::pin_project;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// What one client connection's watchdog reads (`downstream::drive`), written by the stream
/// below TLS, the HTTP/2 frame watch above it, and each request. The per-request marks are plain
/// counters (no clock read on the request path); the watchdog notes when it first saw a state and
/// measures from there. Rare events (a write finding the socket full, a header block left open)
/// carry their own time, in milliseconds since the connection was accepted.
#[derive(Debug)]
pub struct Activity {
    epoch: Instant,
    /// Whether any byte has arrived (the handshake's silent timeout).
    heard: AtomicBool,
    /// Since when a write has found the client's socket full and nothing moved (`NONE`: not now).
    write_blocked_ms: AtomicU64,
    /// Since when an HTTP/2 header block is open (HEADERS without END_HEADERS; `NONE`: none).
    header_open_ms: AtomicU64,
    /// Requests being served.
    in_flight: AtomicUsize,
    /// Requests finished (the watchdog sees progress by its change).
    finished: AtomicU64,
    /// Response bodies that handed data to the HTTP layer and have not been asked for more
    /// (the client has not taken what they gave: flow-control window or socket full).
    bodies_waiting: AtomicUsize,
    /// Times a waiting body was asked for more (progress while some wait).
    bodies_taken: AtomicU64,
}

/// No such moment.
const NONE: u64 = u64::MAX;

/// A snapshot of the per-request counters, for the watchdog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Requests in flight.
    pub in_flight: usize,
    /// Requests finished so far.
    pub finished: u64,
    /// Bodies waiting for the client.
    pub bodies_waiting: usize,
    /// Waiting bodies asked for more so far.
    pub bodies_taken: u64,
}

impl Activity {
    /// Starts counting now.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            epoch: Instant::now(),
            heard: AtomicBool::new(false),
            write_blocked_ms: AtomicU64::new(NONE),
            header_open_ms: AtomicU64::new(NONE),
            in_flight: AtomicUsize::new(0),
            finished: AtomicU64::new(0),
            bodies_waiting: AtomicUsize::new(0),
            bodies_taken: AtomicU64::new(0),
        })
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// True while no byte has arrived yet.
    pub fn silent(&self) -> bool {
        !self.heard.load(Ordering::Relaxed)
    }

    /// A request started; pair with [`Activity::request_finished`].
    pub fn request_started(&self) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
    }

    /// A request finished (its response sent, or given up).
    pub fn request_finished(&self) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.finished.fetch_add(1, Ordering::Relaxed);
    }

    /// A response body handed data to the HTTP layer: it now waits until it is asked for more.
    pub fn body_handed_data(&self) {
        self.bodies_waiting.fetch_add(1, Ordering::Relaxed);
    }

    /// A body that had handed data is asked for more (or dropped): the client took something.
    pub fn body_taken(&self) {
        self.bodies_waiting.fetch_sub(1, Ordering::Relaxed);
        self.bodies_taken.fetch_add(1, Ordering::Relaxed);
    }

    /// The per-request counters now.
    pub fn progress(&self) -> Progress {
        Progress {
            in_flight: self.in_flight.load(Ordering::Relaxed),
            finished: self.finished.load(Ordering::Relaxed),
            bodies_waiting: self.bodies_waiting.load(Ordering::Relaxed),
            bodies_taken: self.bodies_taken.load(Ordering::Relaxed),
        }
    }

    /// An HTTP/2 header block opened (`true`) or was completed (`false`).
    pub fn header_block(&self, open: bool) {
        let now_open = self.header_open_ms.load(Ordering::Relaxed) != NONE;
        if open && !now_open {
            self.header_open_ms.store(self.now_ms(), Ordering::Relaxed);
        } else if !open && now_open {
            self.header_open_ms.store(NONE, Ordering::Relaxed);
        }
    }

    /// How long an HTTP/2 header block has been open, if one is.
    pub fn header_open_for(&self) -> Option<std::time::Duration> {
        self.since(&self.header_open_ms)
    }

    /// How long writes have been finding the client's socket full with nothing moving, if now.
    pub fn write_blocked_for(&self) -> Option<std::time::Duration> {
        self.since(&self.write_blocked_ms)
    }

    fn since(&self, at: &AtomicU64) -> Option<std::time::Duration> {
        match at.load(Ordering::Relaxed) {
            NONE => None,
            t => Some(std::time::Duration::from_millis(self.now_ms().saturating_sub(t))),
        }
    }

    fn heard(&self) {
        if !self.heard.load(Ordering::Relaxed) {
            self.heard.store(true, Ordering::Relaxed);
        }
    }

    fn wrote(&self) {
        if self.write_blocked_ms.load(Ordering::Relaxed) != NONE {
            self.write_blocked_ms.store(NONE, Ordering::Relaxed);
        }
    }

    fn write_blocked(&self) {
        if self.write_blocked_ms.load(Ordering::Relaxed) == NONE {
            self.write_blocked_ms.store(self.now_ms(), Ordering::Relaxed);
        }
    }
}

pin_project! {
    /// Counts bytes read and written; reports them to metrics when dropped.
    pub struct MeteredStream<S> {
        #[pin]
        inner: S,
        activity: Arc<Activity>,
        read: u64,
        written: u64,
        metrics: Arc<tlsgate_admin::Metrics>,
        ahead: Option<BytesMut>,
    }

    impl<S> PinnedDrop for MeteredStream<S> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            this.metrics.bytes_in.inc_by(*this.read);
            this.metrics.bytes_out.inc_by(*this.written);
        }
    }
}

/// Shown in handshake errors (`tokio_boring::HandshakeError` is an `Error` only over a `Debug` stream).
impl<S> std::fmt::Debug for MeteredStream<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MeteredStream")
            .field("read", &self.read)
            .field("written", &self.written)
            .finish_non_exhaustive()
    }
}

impl<S> MeteredStream<S> {
    /// Wraps `inner`.
    pub fn new(inner: S, activity: Arc<Activity>, metrics: Arc<tlsgate_admin::Metrics>) -> Self {
        Self {
            inner,
            activity,
            read: 0,
            written: 0,
            metrics,
            ahead: None,
        }
    }

    /// The wrapped stream.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped stream, mutably (bytes moved through it directly are not counted).
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }
}

/// Bytes read at once when the caller asks for less (a TLS record header, a small record).
const READ_AHEAD: usize = 8 * 1024;

fn drain_into(ahead: &mut Option<BytesMut>, buf: &mut ReadBuf<'_>) {
    if let Some(pending) = ahead {
        let n = pending.len().min(buf.remaining());
        buf.put_slice(&pending[..n]);
        pending.advance(n);
        if pending.is_empty() {
            *ahead = None;
        }
    }
}

impl<S: AsyncRead> AsyncRead for MeteredStream<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.project();
        if this.ahead.is_some() {
            drain_into(this.ahead, buf);
            return Poll::Ready(Ok(()));
        }
        if buf.remaining() >= READ_AHEAD {
            let before = buf.filled().len();
            let res = this.inner.poll_read(cx, buf);
            let n = (buf.filled().len() - before) as u64;
            if n > 0 {
                *this.read += n;
                this.activity.heard();
            }
            return res;
        }
        let mut fresh = BytesMut::with_capacity(READ_AHEAD);
        match tokio_util::io::poll_read_buf(this.inner, cx, &mut fresh) {
            Poll::Ready(Ok(0)) => Poll::Ready(Ok(())),
            Poll::Ready(Ok(n)) => {
                *this.read += n as u64;
                this.activity.heard();
                *this.ahead = Some(fresh);
                drain_into(this.ahead, buf);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Counts a write's bytes, and tells the activity whether the client's socket took them.
fn account_write(res: &Poll<io::Result<usize>>, written: &mut u64, activity: &Activity) {
    match res {
        Poll::Ready(Ok(n)) => {
            *written += *n as u64;
            activity.wrote();
        }
        Poll::Pending => activity.write_blocked(),
        Poll::Ready(Err(_)) => {}
    }
}

impl<S: AsyncWrite> AsyncWrite for MeteredStream<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.project();
        let res = this.inner.poll_write(cx, buf);
        account_write(&res, this.written, this.activity);
        res
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.project();
        let res = this.inner.poll_write_vectored(cx, bufs);
        account_write(&res, this.written, this.activity);
        res
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().inner.poll_flush(cx)
    }

    /// Flushes only. The gateway drops a client connection right after shutting it down, and
    /// `close` sends the FIN that `shutdown(SHUT_WR)` would: the extra system call (which fails
    /// with `ENOTCONN` whenever the client has already gone) is saved on every connection. Code
    /// that half-closes and then keeps reading (the lingering close) shuts down the inner stream
    /// itself through [`MeteredStream::get_mut`].
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().inner.poll_flush(cx)
    }
}
