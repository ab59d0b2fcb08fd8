//! A TCP stream wrapper that counts bytes for metrics, records the last time bytes moved (so the
//! connection task can close connections idle for longer than `client_idle_timeout`), and
//! buffers small reads.
//!
//! BoringSSL reads a record in two steps, the 5-byte header and then the body, and ignores
//! read-ahead; without a buffer below it every request costs two `recvfrom` calls. A small read
//! is served from one `READ_AHEAD`-byte read instead. The buffer exists only while it holds
//! bytes, so an idle connection keeps none.

use bytes::{Buf, BytesMut};
use pin_project_lite::pin_project;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// `last_ms` before any byte moved.
const NOTHING_YET: u64 = u64::MAX;

/// Activity shared between the stream and the connection's idle watchdog.
#[derive(Debug)]
pub struct Activity {
    epoch: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    /// Starts counting now.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            epoch: Instant::now(),
            last_ms: AtomicU64::new(NOTHING_YET),
        })
    }

    /// True while no byte has moved yet.
    pub fn silent(&self) -> bool {
        self.last_ms.load(Ordering::Relaxed) == NOTHING_YET
    }

    fn touch(&self) {
        self.last_ms
            .store(self.epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// How long since bytes last moved (since the start when none has).
    pub fn idle_for(&self) -> std::time::Duration {
        let now = self.epoch.elapsed().as_millis() as u64;
        let last = match self.last_ms.load(Ordering::Relaxed) {
            NOTHING_YET => 0,
            t => t,
        };
        std::time::Duration::from_millis(now.saturating_sub(last))
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
                this.activity.touch();
            }
            return res;
        }
        let mut fresh = BytesMut::with_capacity(READ_AHEAD);
        match tokio_util::io::poll_read_buf(this.inner, cx, &mut fresh) {
            Poll::Ready(Ok(0)) => Poll::Ready(Ok(())),
            Poll::Ready(Ok(n)) => {
                *this.read += n as u64;
                this.activity.touch();
                *this.ahead = Some(fresh);
                drain_into(this.ahead, buf);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncWrite> AsyncWrite for MeteredStream<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.project();
        let res = this.inner.poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &res {
            *this.written += *n as u64;
            this.activity.touch();
        }
        res
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.project();
        let res = this.inner.poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = &res {
            *this.written += *n as u64;
            this.activity.touch();
        }
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
