//! Idle HTTP/1.1 keep-alive connections give back hyper's per-connection state (issue 18).
//!
//! hyper's HTTP/1.1 server connection holds an 8 KiB read buffer, an 8 KiB write buffer, its
//! dispatcher and a header-timeout timer for as long as it lives, idle or not: about two thirds of
//! what an idle keep-alive connection used to cost. Between two requests HTTP/1.1 has no state, so
//! a connection that has waited [`RELEASE_AFTER`] for its next request is *parked*: hyper's
//! connection is ended, the connection's task waits for the socket to become readable holding no
//! buffer at all ([`ParkedWait`], under the usual idle timeout and drain), and a new hyper
//! connection with the same service takes the next request (`downstream::http1`).
//!
//! Ending hyper's connection at the right moment is hyper's own clean path: [`ParkIo`], the stream
//! hyper reads, reports the end of the stream while hyper waits for a request head and nothing is
//! there, which hyper treats as a client that left between requests (nothing is written; the
//! connection ends without shutting the stream down). Which moment that is, hyper tells through
//! its timer: it arms the header-read timeout when it starts waiting for a request head and drops
//! it once a head is parsed. [`HeadTimer`] is that timer; its sleep first wakes the task at
//! [`RELEASE_AFTER`] (marking the wait *due*), then at the header deadline. So no timer is added:
//! hyper arms one per request head anyway.
//!
//! The tokio sleep under those waits is the connection's one, kept from one wait to the next
//! ([`ParkState`]'s spare) and moved later with `reset`, which tokio does by updating the entry
//! alone. A new sleep per wait was registered in tokio's timer wheel with a deadline earlier than
//! the runtime's next wake-up (a wait's 250 ms against the seconds-long timers behind it), and
//! tokio then wakes its own driver through its eventfd: a `write` and a spare `epoll_wait` turn per
//! request, measured at one connection (docs/BENCHMARKS.md, "One timer per HTTP/1.1 connection").
//! A parked connection drops its spare.
//!
//! Bytes of a request head that had already arrived (the start of a pipelined request) stay with
//! hyper's read buffer; `into_parts` hands them back and the next connection reads them first
//! ([`ParkIo::new`]'s `rewind`). A wait during which any byte arrived is never parked, so a slow
//! request head keeps its header timeout.

use crate::downstream::drive::Graceful;
use bytes::Bytes;
use pin_project_lite::pin_project;
use prometheus_client::metrics::gauge::Gauge;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Sleep;

/// How long an HTTP/1.1 connection waits for its next request before it gives back hyper's
/// state. Short: parking and the next request's new hyper connection cost about a microsecond,
/// which matters only for a client that pauses this long between requests many times a second.
pub const RELEASE_AFTER: Duration = Duration::from_millis(250);

/// What hyper's timer, the stream below hyper and the connection share. Only the connection's
/// own task touches it (hyper polls its timer and its stream there): atomics because hyper's
/// timer must be `Sync`, plain loads and stores because nothing runs concurrently.
#[derive(Debug, Default)]
pub struct ParkState {
    /// Header-wait sleeps alive: hyper holds one while it waits for a request head.
    waits: AtomicUsize,
    /// The current wait has lasted [`RELEASE_AFTER`].
    due: AtomicBool,
    /// Bytes reached hyper during the current wait.
    fed: AtomicBool,
    /// [`ParkIo`] ended the stream for hyper.
    parked: AtomicBool,
    /// The tokio sleep of the last header wait, for the next one (see the module). A mutex
    /// because hyper's sleeps must be `Sync`; only the connection's task takes it.
    spare: Mutex<Option<Pin<Box<Sleep>>>>,
}

impl ParkState {
    /// A new state, shared by a connection's timer and stream.
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// Whether [`ParkIo`] ended hyper's connection (and clears the mark). A parked connection
    /// holds no timer: its spare sleep is dropped.
    pub fn take_parked(&self) -> bool {
        let parked = self.parked.swap(false, Ordering::Relaxed);
        if parked {
            drop(self.spare().take());
        }
        parked
    }

    /// Where the sleep kept for the next header wait lies, if one is kept (tests: one sleep
    /// serves every wait).
    #[cfg(test)]
    fn spare_at(&self) -> Option<*const Sleep> {
        self.spare().as_ref().map(|s| &**s as *const Sleep)
    }

    fn spare(&self) -> std::sync::MutexGuard<'_, Option<Pin<Box<Sleep>>>> {
        // Nothing can be left half-done under this lock: a poisoned one is used as it is.
        self.spare.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A sleep until `at`: the spare, moved, or a new one.
    fn sleep_until(&self, at: tokio::time::Instant) -> Pin<Box<Sleep>> {
        match self.spare().take() {
            Some(mut sleep) => {
                sleep.as_mut().reset(at);
                sleep
            }
            None => Box::pin(tokio::time::sleep_until(at)),
        }
    }

    /// Whether hyper ended because it was parked (the mark stays).
    pub fn parked(&self) -> bool {
        self.parked.load(Ordering::Relaxed)
    }

    fn wait_began(&self) {
        self.due.store(false, Ordering::Relaxed);
        self.fed.store(false, Ordering::Relaxed);
    }

    fn count_waits(&self, up: bool) {
        let n = self.waits.load(Ordering::Relaxed);
        self.waits
            .store(if up { n + 1 } else { n.saturating_sub(1) }, Ordering::Relaxed);
    }

    fn parkable(&self) -> bool {
        self.waits.load(Ordering::Relaxed) > 0 && self.due.load(Ordering::Relaxed) && !self.fed.load(Ordering::Relaxed)
    }
}

/// hyper's timer for an HTTP/1.1 server connection, which hyper uses for its header-read
/// timeout only: a tokio timer whose sleeps also mark the header waits in a [`ParkState`].
#[derive(Debug, Clone)]
pub struct HeadTimer {
    state: Arc<ParkState>,
    release_after: Duration,
    header_timeout: Duration,
}

impl HeadTimer {
    /// A timer marking waits in `state`, due after `release_after`; hyper's header-read timeout
    /// is `header_timeout` (a deadline it asks for began that long before it: no clock read).
    pub fn new(state: Arc<ParkState>, release_after: Duration, header_timeout: Duration) -> Self {
        Self {
            state,
            release_after,
            header_timeout,
        }
    }
}

impl hyper::rt::Timer for HeadTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.sleep_until(self.now() + duration)
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.state.count_waits(true);
        self.state.wait_began();
        let (first, header_deadline) = self.deadlines(deadline);
        Box::pin(HeadSleep {
            sleep: Some(self.state.sleep_until(first)),
            header_deadline,
            state: self.state.clone(),
        })
    }

    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>, new_deadline: Instant) {
        match sleep.as_mut().downcast_mut_pin::<HeadSleep>() {
            Some(head) => {
                self.state.wait_began();
                let (first, header_deadline) = self.deadlines(new_deadline);
                let head = head.project();
                *head.header_deadline = header_deadline;
                match head.sleep.as_mut() {
                    Some(sleep) => sleep.as_mut().reset(first),
                    None => *head.sleep = Some(self.state.sleep_until(first)),
                }
            }
            None => *sleep = self.sleep_until(new_deadline),
        }
    }
}

impl HeadTimer {
    /// When the sleep first fires, and the header deadline that follows (if the release comes
    /// first).
    fn deadlines(&self, deadline: Instant) -> (tokio::time::Instant, Option<tokio::time::Instant>) {
        let deadline = tokio::time::Instant::from_std(deadline);
        match (deadline - self.header_timeout).checked_add(self.release_after) {
            Some(release) if self.release_after < self.header_timeout => (release, Some(deadline)),
            _ => (deadline, None),
        }
    }
}

pin_project! {
    /// One of hyper's header waits: fires at the header deadline; on the way, marks the wait
    /// due at the release moment and wakes the task so that [`ParkIo`] can park it.
    pub struct HeadSleep {
        // Boxed: it goes back to the connection's spare when the wait ends. `None` only after.
        sleep: Option<Pin<Box<Sleep>>>,
        header_deadline: Option<tokio::time::Instant>,
        state: Arc<ParkState>,
    }

    impl PinnedDrop for HeadSleep {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            this.state.count_waits(false);
            this.state.due.store(false, Ordering::Relaxed);
            if let Some(sleep) = this.sleep.take() {
                *this.state.spare() = Some(sleep);
            }
        }
    }
}

impl Future for HeadSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.project();
        let Some(sleep) = this.sleep.as_mut() else {
            return Poll::Ready(());
        };
        loop {
            ready!(sleep.as_mut().poll(cx));
            let Some(deadline) = this.header_deadline.take() else {
                return Poll::Ready(());
            };
            // The release moment: hyper polls its stream again on this wake-up, and the stream
            // ends it if nothing has arrived meanwhile.
            this.state.due.store(true, Ordering::Relaxed);
            cx.waker().wake_by_ref();
            sleep.as_mut().reset(deadline);
        }
    }
}

impl hyper::rt::Sleep for HeadSleep {}

/// The stream hyper's HTTP/1.1 connection reads: serves `rewind` first (bytes a parked
/// connection's hyper had buffered), then `inner`; reports the end of the stream instead of
/// waiting when a header wait is due and nothing arrived during it (see the module).
pub struct ParkIo<S> {
    inner: S,
    state: Arc<ParkState>,
    rewind: Bytes,
}

impl<S> ParkIo<S> {
    /// `inner`, read after `rewind`, parked through `state`.
    pub fn new(inner: S, state: Arc<ParkState>, rewind: Bytes) -> Self {
        Self { inner, state, rewind }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for ParkIo<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.rewind.is_empty() {
            let n = this.rewind.len().min(buf.remaining());
            buf.put_slice(&this.rewind.split_to(n));
            this.state.fed.store(true, Ordering::Relaxed);
            return Poll::Ready(Ok(()));
        }
        let parkable = this.state.parkable();
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    this.state.fed.store(true, Ordering::Relaxed);
                }
                Poll::Ready(Ok(()))
            }
            // Nothing to read and hyper waits for a request head: the end of the stream, for
            // hyper (the socket stays as it is; the caller waits for it to become readable).
            Poll::Pending if parkable => {
                this.state.parked.store(true, Ordering::Relaxed);
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for ParkIo<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// A parked connection: done when the socket becomes readable (a request, the client's close,
/// an error), or at once when asked to finish (the gateway drains).
#[derive(Debug)]
pub struct ParkedWait<'a> {
    tcp: &'a TcpStream,
    /// Bytes (or the client's end) arrived: serve them.
    pub readable: bool,
    /// Asked to finish (drain).
    pub finishing: bool,
}

impl<'a> ParkedWait<'a> {
    /// Waits on `tcp`.
    pub fn new(tcp: &'a TcpStream) -> Self {
        Self {
            tcp,
            readable: false,
            finishing: false,
        }
    }
}

impl Future for ParkedWait<'_> {
    type Output = io::Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.finishing {
            return Poll::Ready(Ok(()));
        }
        ready!(this.tcp.poll_read_ready(cx))?;
        this.readable = true;
        Poll::Ready(Ok(()))
    }
}

impl Graceful for &mut ParkedWait<'_> {
    fn graceful(self: Pin<&mut Self>) {
        self.get_mut().finishing = true;
    }
}

#[cfg(test)]
#[path = "park_tests.rs"]
mod tests;

/// Counts a connection in `tlsgate_idle_released_connections{protocol}` for as long as it is
/// held (while the connection waits released; also when its task is dropped mid-wait).
#[derive(Debug)]
pub struct ReleasedMark(Gauge);

impl ReleasedMark {
    pub fn new(metrics: &tlsgate_admin::Metrics, protocol: &'static str) -> Self {
        let gauge = metrics
            .idle_released_connections
            .get_or_create(&tlsgate_admin::metrics::ReleasedLabels { protocol })
            .clone();
        gauge.inc();
        Self(gauge)
    }
}

impl Drop for ReleasedMark {
    fn drop(&mut self) {
        self.0.dec();
    }
}
