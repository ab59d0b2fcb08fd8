//! Reading ahead below BoringSSL, for client and origin connections alike.
//!
//! BoringSSL reads a record in two steps, the 5-byte header and then the body, and ignores
//! read-ahead; without a buffer below it every record costs two `recvfrom` calls. A small read
//! is served from one [`READ_AHEAD`]-byte read instead. The buffer exists only while it holds
//! bytes, so an idle connection keeps none. While the peer sends records larger than that (a
//! request body, a large response), a header read ahead would bring half the next record with
//! it, to be copied once more into BoringSSL's buffer (12.8 % of the gateway's CPU in the 100 KiB
//! upload cell): after a large record the next header is read alone, and each record still
//! costs two reads. The small record that ends such a run (the last of a body) and the header
//! after it are read alone too ([`Streaming::Tail`]): read ahead, they brought 4 KiB of that
//! record and then 8 KiB of the next one's first record through the buffer; a small record
//! after that returns to reading ahead.
//!
//! [`ReadAhead`] is the state and the read; `downstream::io::MeteredStream` (clients) and
//! [`ReadAheadStream`] (TLS origins) put it under their `SslStream`.

use bytes::{Buf, BytesMut};
use pin_project_lite::pin_project;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Bytes read at once when the caller asks for less (a TLS record header, a small record).
pub const READ_AHEAD: usize = 8 * 1024;

/// A TLS record header: what BoringSSL asks for before a record's body.
pub const RECORD_HEADER: usize = 5;

/// What the last record headers said about the peer's records: while it streams large ones,
/// reads go straight to BoringSSL's buffer (two reads per record, no copy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Streaming {
    /// Small records: a read for less than `READ_AHEAD` reads ahead.
    No,
    /// The last header announced a body of at least `READ_AHEAD` bytes: its rest and the next
    /// header are read alone.
    Large,
    /// A small record right after a large one (the end of a body): its body and the next
    /// header are read alone as well, since the next message most likely starts with a large
    /// record again.
    Tail,
}

/// Bytes read ahead of what the caller asked for, and what the record headers said.
#[derive(Debug)]
pub struct ReadAhead {
    ahead: Option<BytesMut>,
    streaming: Streaming,
}

impl Default for ReadAhead {
    fn default() -> Self {
        Self::new()
    }
}

impl ReadAhead {
    /// Nothing read yet.
    pub fn new() -> Self {
        Self {
            ahead: None,
            streaming: Streaming::No,
        }
    }

    /// Bytes read ahead and not yet taken.
    pub fn buffered(&self) -> usize {
        self.ahead.as_ref().map_or(0, BytesMut::len)
    }

    /// Fills `buf` from what was read ahead; false (and `buf` untouched) when nothing was.
    pub fn take_buffered(&mut self, buf: &mut ReadBuf<'_>) -> bool {
        if self.ahead.is_none() {
            return false;
        }
        let header = buf.remaining() == RECORD_HEADER;
        let before = buf.filled().len();
        self.drain_into(buf);
        self.note_header(header, &buf.filled()[before..]);
        true
    }

    /// Reads from `inner` into `buf` — straight, or through a read ahead of [`READ_AHEAD`]
    /// bytes — when nothing is buffered ([`ReadAhead::take_buffered`] first). `Ready(Ok(n))`:
    /// `n` bytes came from the socket (0 at its end), some or all of them now in `buf`.
    pub fn poll_read_from<S: AsyncRead>(
        &mut self,
        inner: Pin<&mut S>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<usize>> {
        debug_assert!(self.ahead.is_none(), "buffered bytes come first");
        let header = buf.remaining() == RECORD_HEADER;
        let before = buf.filled().len();
        if buf.remaining() >= READ_AHEAD || self.streaming != Streaming::No {
            std::task::ready!(inner.poll_read(cx, buf))?;
            let got = &buf.filled()[before..];
            self.note_header(header, got);
            return Poll::Ready(Ok(got.len()));
        }
        let mut fresh = BytesMut::with_capacity(READ_AHEAD);
        let n = std::task::ready!(tokio_util::io::poll_read_buf(inner, cx, &mut fresh))?;
        if n > 0 {
            self.ahead = Some(fresh);
            self.drain_into(buf);
            self.note_header(header, &buf.filled()[before..]);
        }
        Poll::Ready(Ok(n))
    }

    fn drain_into(&mut self, buf: &mut ReadBuf<'_>) {
        if let Some(pending) = &mut self.ahead {
            let n = pending.len().min(buf.remaining());
            buf.put_slice(&pending[..n]);
            pending.advance(n);
            if pending.is_empty() {
                self.ahead = None;
            }
        }
    }

    /// After BoringSSL read a whole record header (`got`, when it asked for one): whether the
    /// peer streams large records (a body of at least `READ_AHEAD` bytes), or just ended a run
    /// of them with a small one.
    fn note_header(&mut self, header: bool, got: &[u8]) {
        if header && got.len() == RECORD_HEADER {
            self.streaming = if usize::from(u16::from_be_bytes([got[3], got[4]])) >= READ_AHEAD {
                Streaming::Large
            } else if self.streaming == Streaming::Large {
                Streaming::Tail
            } else {
                Streaming::No
            };
        }
    }
}

pin_project! {
    /// A stream that reads ahead ([`ReadAhead`]); writes pass through.
    #[derive(Debug)]
    pub struct ReadAheadStream<S> {
        #[pin]
        inner: S,
        ahead: ReadAhead,
    }
}

impl<S> ReadAheadStream<S> {
    /// Wraps `inner`.
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            ahead: ReadAhead::new(),
        }
    }

    /// Bytes read ahead and not yet taken.
    pub fn buffered(&self) -> usize {
        self.ahead.buffered()
    }
}

impl<S: AsyncRead> AsyncRead for ReadAheadStream<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.project();
        if this.ahead.take_buffered(buf) {
            return Poll::Ready(Ok(()));
        }
        std::task::ready!(this.ahead.poll_read_from(this.inner, cx, buf))?;
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite> AsyncWrite for ReadAheadStream<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.project().inner.poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.project().inner.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
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
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A TLS-like record: a 5-byte header announcing `len` bytes, then `len` bytes of `fill`.
    fn record(len: usize, fill: u8) -> Vec<u8> {
        let mut r = vec![23, 3, 3];
        r.extend_from_slice(&(len as u16).to_be_bytes());
        r.extend(std::iter::repeat_n(fill, len));
        r
    }

    #[tokio::test]
    async fn small_records_cost_one_read_of_the_socket_for_several() {
        let (mut peer, ours) = tokio::io::duplex(64 * 1024);
        let mut sent = Vec::new();
        for fill in [b'a', b'b', b'c'] {
            sent.extend(record(100, fill));
        }
        peer.write_all(&sent).await.unwrap();
        let mut stream = ReadAheadStream::new(ours);
        for (i, fill) in [b'a', b'b', b'c'].into_iter().enumerate() {
            let mut header = [0u8; RECORD_HEADER];
            stream.read_exact(&mut header).await.unwrap();
            // The first header's read brought all three records.
            assert_eq!(stream.buffered(), (3 - i) * 105 - 5);
            let mut body = [0u8; 100];
            stream.read_exact(&mut body).await.unwrap();
            assert!(body.iter().all(|&b| b == fill));
        }
        assert_eq!(stream.buffered(), 0);
    }
}
