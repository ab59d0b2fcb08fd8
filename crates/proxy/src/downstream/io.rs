//! A TCP stream wrapper that counts bytes for metrics, records what the connection's watchdog
//! needs ([`Activity`]: whether any byte arrived yet, since when the client has accepted nothing
//! we had to send, requests in flight and the last time one started or ended, an HTTP/2 header
//! block left open), buffers small reads, and holds the end of a connection's last response
//! for its close.
//!
//! Small reads are served from a read ahead ([`crate::read_ahead`]): BoringSSL reads a record
//! in two steps, and without it every request cost two `recvfrom` calls.
//!
//! Once the body of a connection's last response has ended ([`Activity::last_response_ended`]:
//! the HTTP/1.1 request asked to close, or the gateway drains), what is written next — the
//! response's last bytes, then the TLS close_notify — is held (up to [`HOLD_MAX`] bytes) and goes
//! out in one `sendto` at the shutdown, instead of one each (one segment, and one wake-up of the
//! client, fewer per short connection), followed by the TCP half-close that sets the FIN on
//! that segment (not left to `close`: unread bytes from the client would make it a reset that
//! discards what was sent with `MSG_MORE`). Flushes do not send held bytes; a read that reaches the
//! socket, a shutdown, or a write past the limit does, so nothing waits for anything but the
//! connection's own next step.

use crate::read_ahead::ReadAhead;
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
    /// The body of the connection's last response has ended: writes are held for the close.
    closing: AtomicBool,
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
            closing: AtomicBool::new(false),
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

    /// The body of the connection's last response has ended (the connection closes after it):
    /// the stream holds what is written from now on for the close (module documentation).
    pub fn last_response_ended(&self) {
        self.closing.store(true, Ordering::Relaxed);
    }

    fn holds_writes(&self) -> bool {
        self.closing.load(Ordering::Relaxed)
    }

    /// The connection reads again after all: it did not close, nothing more is held.
    fn reading_again(&self) {
        if self.closing.load(Ordering::Relaxed) {
            self.closing.store(false, Ordering::Relaxed);
        }
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
    #[project = MeteredProj]
    pub struct MeteredStream<S> {
        #[pin]
        inner: S,
        activity: Arc<Activity>,
        read: u64,
        written: u64,
        metrics: Arc<tlsgate_admin::Metrics>,
        ahead: ReadAhead,
        // Bytes not yet sent: written while the connection's last response ended (for the
        // close), or handed over to go with the next write (`hold`).
        held: Option<BytesMut>,
        // `held` has bytes of the caller's own writes, which a flush must send (unless they
        // wait for the close).
        owed: bool,
        // The caller's current write continues right after this one (`more_follows`).
        more: bool,
        // What is written next is held for the write that follows it (`hold_next`).
        hold_next: bool,
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
            ahead: ReadAhead::new(),
            held: None,
            owed: false,
            more: false,
            hold_next: false,
        }
    }

    /// Bytes to send with the next write, or before the connection next waits for the client,
    /// whichever comes first (TLS 1.3 session tickets: with the first response, one `sendto`
    /// and segment fewer, or before the gateway waits for a request that has not come whole).
    pub fn hold(&mut self, bytes: &[u8]) {
        self.held
            .get_or_insert_with(|| BytesMut::with_capacity(bytes.len().max(512)))
            .extend_from_slice(bytes);
    }

    /// Whether what is written next is followed at once by more of the same write (a record
    /// of a large response that is not its last): sent with `MSG_MORE`, so that the kernel
    /// fills segments across records instead of sending one per record. The caller clears it
    /// for the last piece, which sends what was kept back.
    pub fn more_follows(&mut self, more: bool) {
        self.more = more;
    }

    /// Whether what is written next is held (up to [`HOLD_MAX`]) to go out in one system call
    /// with the write that follows it: the record of an HTTP/2 frame's head, sealed apart from
    /// the payload written right after it. The caller clears it after that write; a flush, a
    /// read that reaches the socket or the shutdown sends held bytes too.
    pub fn hold_next(&mut self, hold: bool) {
        self.hold_next = hold;
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

impl MeteredStream<tokio::net::TcpStream> {
    /// Whether a read now would find nothing and wait: nothing read ahead, nothing held to send
    /// first, and the socket not readable as far as the runtime knows (then `cx` is woken when
    /// it becomes so, as a read that found nothing would have arranged).
    pub fn read_would_wait(&self, cx: &mut Context<'_>) -> bool {
        self.ahead.buffered() == 0
            && self.held.as_ref().is_none_or(|h| h.is_empty())
            && !self.activity.holds_writes()
            && self.inner.poll_read_ready(cx).is_pending()
    }
}

/// The most bytes held for a connection's close: a larger last write goes out as it comes.
pub const HOLD_MAX: usize = 16 * 1024;

impl<S: AsyncRead + SendMore> AsyncRead for MeteredStream<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let mut this = self.project();
        if this.ahead.take_buffered(buf) {
            return Poll::Ready(Ok(()));
        }
        // Waiting for the client: whatever is held must be out first.
        this.activity.reading_again();
        std::task::ready!(send_held(&mut this, cx, false))?;
        let n = std::task::ready!(this.ahead.poll_read_from(this.inner, cx, buf))?;
        if n > 0 {
            *this.read += n as u64;
            this.activity.heard();
        }
        Poll::Ready(Ok(()))
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

/// Sends what is held, if anything (done when all of it went); `last`: as the connection's last
/// bytes ([`SendMore`]).
fn send_held<S: SendMore>(this: &mut MeteredProj<'_, S>, cx: &mut Context<'_>, last: bool) -> Poll<io::Result<()>> {
    while let Some(bytes) = this.held.as_mut() {
        if bytes.is_empty() {
            *this.held = None;
            break;
        }
        let res = if last {
            this.inner.as_mut().poll_send_more(cx, &[io::IoSlice::new(bytes)])
        } else {
            this.inner.as_mut().poll_write(cx, bytes)
        };
        account_write(&res, this.written, this.activity);
        match std::task::ready!(res) {
            Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
            Ok(n) => bytes.advance(n),
            Err(e) => return Poll::Ready(Err(e)),
        }
    }
    *this.owed = false;
    Poll::Ready(Ok(()))
}

/// A write of `bufs` and the held bytes. Kept (copied to the held bytes, `Some`: all taken)
/// when the last response has ended (for the close) or the caller asked for it
/// ([`MeteredStream::hold_next`]), if all fit in [`HOLD_MAX`]. Otherwise, with bytes held from
/// before (a frame head's record, the session tickets), both go in one vectored write (`Some`:
/// how much of `bufs` went; what is held is always sent first). `None`: nothing is held, the
/// write itself goes to the socket.
fn write_with_held<S: SendMore>(
    this: &mut MeteredProj<'_, S>,
    cx: &mut Context<'_>,
    bufs: &[io::IoSlice<'_>],
) -> Poll<io::Result<Option<usize>>> {
    let len: usize = bufs.iter().map(|b| b.len()).sum();
    let have = this.held.as_ref().map_or(0, |h| h.len());
    if (*this.hold_next || this.activity.holds_writes()) && have + len <= HOLD_MAX {
        let held = this.held.get_or_insert_with(|| BytesMut::with_capacity(len.max(512)));
        bufs.iter().for_each(|b| held.extend_from_slice(b));
        *this.owed = true;
        return Poll::Ready(Ok(Some(len)));
    }
    loop {
        let Some(held) = this.held.as_mut().filter(|h| !h.is_empty()) else {
            *this.held = None;
            *this.owed = false;
            return Poll::Ready(Ok(None));
        };
        let have = held.len();
        let mut slices = [io::IoSlice::new(&[]); 4];
        slices[0] = io::IoSlice::new(held);
        let count = 1 + bufs.len().min(3);
        slices[1..count].copy_from_slice(&bufs[..count - 1]);
        let res = if *this.more {
            this.inner.as_mut().poll_send_more(cx, &slices[..count])
        } else {
            this.inner.as_mut().poll_write_vectored(cx, &slices[..count])
        };
        account_write(&res, this.written, this.activity);
        match std::task::ready!(res) {
            Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
            // Only some of the held bytes went: the rest first, again (the socket is most
            // likely full now, and the next try waits for it).
            Ok(n) if n < have => held.advance(n),
            Ok(n) => {
                *this.held = None;
                *this.owed = false;
                if n > have {
                    return Poll::Ready(Ok(Some(n - have)));
                }
            }
            Err(e) => return Poll::Ready(Err(e)),
        }
    }
}

/// A stream that can send bytes with more to follow at once (`MSG_MORE`: the kernel keeps a
/// partial segment back for what comes next): a connection's last bytes, so that the FIN of the
/// close leaves in their segment, and all but the last record of a large write.
pub trait SendMore: AsyncWrite {
    /// Sends some of `buf`; more follows without waiting for anything.
    fn poll_send_more(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>>;
}

impl SendMore for tokio::net::TcpStream {
    fn poll_send_more(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        crate::send_more::poll_send_more(&self, cx, bufs)
    }
}

impl<S: SendMore> AsyncWrite for MeteredStream<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let mut this = self.project();
        if let Some(n) = std::task::ready!(write_with_held(&mut this, cx, &[io::IoSlice::new(buf)]))? {
            return Poll::Ready(Ok(n));
        }
        let res = if *this.more {
            this.inner.poll_send_more(cx, &[io::IoSlice::new(buf)])
        } else {
            this.inner.poll_write(cx, buf)
        };
        account_write(&res, this.written, this.activity);
        res
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let mut this = self.project();
        if let Some(n) = std::task::ready!(write_with_held(&mut this, cx, bufs))? {
            return Poll::Ready(Ok(n));
        }
        let res = this.inner.poll_write_vectored(cx, bufs);
        account_write(&res, this.written, this.activity);
        res
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    /// Sends what the caller wrote and is still held, unless it waits for the close; bytes
    /// handed over with [`MeteredStream::hold`] alone wait for a write, a read or the shutdown.
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut this = self.project();
        if *this.owed && !this.activity.holds_writes() {
            std::task::ready!(send_held(&mut this, cx, false))?;
        }
        this.inner.poll_flush(cx)
    }

    /// Sends what is held and flushes; no TCP shutdown. The gateway drops a client connection
    /// right after shutting it down, and `close` sends the FIN that `shutdown(SHUT_WR)` would: the extra system call (which fails
    /// with `ENOTCONN` whenever the client has already gone) is saved on every connection. Code
    /// that half-closes and then keeps reading (the lingering close) shuts down the inner stream
    /// itself through [`MeteredStream::get_mut`].
    ///
    /// Bytes held for the close of a connection whose last response ended are sent as its last
    /// ([`SendMore`]): the close that follows adds its FIN to their segment.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut this = self.project();
        let last = this.activity.holds_writes();
        let corked = last && this.held.as_ref().is_some_and(|h| !h.is_empty());
        std::task::ready!(send_held(&mut this, cx, last))?;
        if corked {
            // What went with `MSG_MORE` leaves now, the FIN set on its segment. Left to `close`,
            // it would be thrown away if the client had sent anything not yet read (a 0-RTT
            // client's Finished after its early request): the kernel answers that with a reset
            // and discards what was not transmitted.
            return this.inner.poll_shutdown(cx);
        }
        this.inner.poll_flush(cx)
    }
}

#[cfg(test)]
#[path = "io_tests.rs"]
mod tests;
