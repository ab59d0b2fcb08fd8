//! A pass-through watch on the HTTP/2 frames a client sends (the plaintext above TLS): it reads
//! only frame headers, to tell the connection's watchdog when a header block is open (HEADERS
//! without END_HEADERS, until the CONTINUATION that ends it). hyper has no request-header timeout
//! for HTTP/2 (and the h2 crate cuts only a long run of CONTINUATION frames), so without this a
//! client that opens a header block and never ends it would hold a connection for ever. Payloads are skipped by arithmetic; nothing is copied.

use crate::downstream::io::Activity;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The client connection preface (RFC 9113 §3.4).
const PREFACE_LEN: usize = 24;
/// Frame header length.
const HEADER_LEN: usize = 9;
const TYPE_HEADERS: u8 = 0x1;
const TYPE_CONTINUATION: u8 = 0x9;
const FLAG_END_HEADERS: u8 = 0x4;

/// Where the parser stands in the client's byte stream.
#[derive(Debug)]
struct Parser {
    /// Preface bytes still to skip.
    preface: usize,
    /// The frame header being read.
    header: [u8; HEADER_LEN],
    filled: usize,
    /// Payload bytes of the current frame still to skip.
    payload: usize,
}

impl Parser {
    fn new() -> Self {
        Self {
            preface: PREFACE_LEN,
            header: [0; HEADER_LEN],
            filled: 0,
            payload: 0,
        }
    }

    /// Feeds bytes the client sent; calls `block(open)` when a header block opens or ends.
    fn feed(&mut self, mut bytes: &[u8], mut block: impl FnMut(bool)) {
        while !bytes.is_empty() {
            if self.preface > 0 {
                let n = self.preface.min(bytes.len());
                self.preface -= n;
                bytes = &bytes[n..];
            } else if self.payload > 0 {
                let n = self.payload.min(bytes.len());
                self.payload -= n;
                bytes = &bytes[n..];
            } else {
                let n = (HEADER_LEN - self.filled).min(bytes.len());
                self.header[self.filled..self.filled + n].copy_from_slice(&bytes[..n]);
                self.filled += n;
                bytes = &bytes[n..];
                if self.filled == HEADER_LEN {
                    self.filled = 0;
                    let h = &self.header;
                    self.payload = usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
                    let end = h[4] & FLAG_END_HEADERS != 0;
                    match h[3] {
                        TYPE_HEADERS => block(!end),
                        TYPE_CONTINUATION if end => block(false),
                        _ => {}
                    }
                }
            }
        }
    }
}

/// The client stream of an HTTP/2 connection, watched (see the module documentation).
pub struct FrameWatch<S> {
    inner: S,
    parser: Parser,
    activity: Arc<Activity>,
}

impl<S> FrameWatch<S> {
    /// Watches `inner`, reporting to `activity`.
    pub fn new(inner: S, activity: Arc<Activity>) -> Self {
        Self {
            inner,
            parser: Parser::new(),
            activity,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for FrameWatch<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let res = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = res {
            let activity = &this.activity;
            this.parser
                .feed(&buf.filled()[before..], |open| activity.header_block(open));
        }
        res
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for FrameWatch<S> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
        let n = payload.len();
        let mut f = vec![(n >> 16) as u8, (n >> 8) as u8, n as u8, kind, flags, 0, 0, 0, 1];
        f.extend_from_slice(payload);
        f
    }

    /// Feeds `bytes` in chunks of `chunk` and returns the block events.
    fn events(bytes: &[u8], chunk: usize) -> Vec<bool> {
        let mut p = Parser::new();
        let mut seen = Vec::new();
        for part in bytes.chunks(chunk) {
            p.feed(part, |open| seen.push(open));
        }
        seen
    }

    #[test]
    fn header_blocks_are_seen_across_any_read_boundaries() {
        let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        bytes.extend(frame(0x4, 0, &[0; 12])); // SETTINGS
        bytes.extend(frame(0x6, 0, &[7; 8])); // PING
        bytes.extend(frame(TYPE_HEADERS, 0, &[0x82; 300])); // open
        bytes.extend(frame(TYPE_CONTINUATION, 0, &[1; 5])); // still open
        bytes.extend(frame(0x8, 0, &[0, 0, 1, 0])); // WINDOW_UPDATE between: ignored
        bytes.extend(frame(TYPE_CONTINUATION, FLAG_END_HEADERS, &[2; 5])); // closed
        bytes.extend(frame(TYPE_HEADERS, FLAG_END_HEADERS | 0x1, &[0x82])); // complete at once
        bytes.extend(frame(0x0, 0x1, &[b'x'; 5000])); // DATA
        for chunk in [1, 2, 7, 9, 10, 64, 4096, bytes.len()] {
            assert_eq!(events(&bytes, chunk), [true, false, false], "chunk {chunk}");
        }
    }

    #[test]
    fn a_large_payload_is_skipped_without_being_read_as_headers() {
        let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        // A DATA payload full of bytes that would look like HEADERS frame headers.
        bytes.extend(frame(0x0, 0, &[TYPE_HEADERS; 1000]));
        bytes.extend(frame(TYPE_HEADERS, 0, &[0x82]));
        assert_eq!(events(&bytes, 13), [true]);
    }
}
