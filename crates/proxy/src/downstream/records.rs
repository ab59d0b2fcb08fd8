//! Dynamic TLS record sizing (seed 001).
//!
//! A 16 KB record cannot be decrypted until all of its ~12 segments have arrived, which on a new
//! connection (small congestion window) or under loss delays the first byte the browser can use.
//! One-segment records waste header bytes and CPU once the window is open. So: a new connection,
//! or one idle for longer than `dynamic_records_idle`, starts with records that fit one TCP
//! segment; the record size then grows with the congestion window read from TCP_INFO — one
//! segment at the window the connection started with, twice that once the window has doubled,
//! and so on up to `max_record_size`, where it stays until the next idle period. Without TCP_INFO
//! a byte threshold decides instead.
//!
//! The size is applied with `SSL_set_max_send_fragment` right before each write, and only while
//! the connection is still ramping: a connection at full size costs one clock read per write.

use crate::downstream::io::MeteredStream;
use crate::interim::InterimQueue;
use bytes::{Buf, Bytes};
use prometheus_client::metrics::counter::Counter;
use std::io;
use std::os::fd::AsFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tlsgate_admin::metrics::RecordLabels;
use tlsgate_admin::Metrics;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_boring::SslStream;

/// A write no larger than this is one record that fits in any TCP segment (IPv4's smallest MSS,
/// 536 bytes, less a TLS record's header, content type and tag): it needs no sizing decision.
const FITS_ANY_SEGMENT: usize = 512;

/// The largest first part of a vectored write that is held for the part after it
/// (`poll_write_vectored`): the vendored `h2` puts 1 KiB of a chained payload with its frame's
/// head.
const HOLD_FIRST_MAX: usize = 4 * 1024;

/// Bytes a TLS record adds around its payload (header 5, explicit nonce 8 for TLS 1.2 GCM, tag 16).
const RECORD_OVERHEAD: usize = 29;
/// One-segment payload when the MSS is unknown (1460-byte MSS minus record overhead).
const DEFAULT_SEGMENT_PAYLOAD: usize = 1460 - RECORD_OVERHEAD;

/// How a connection sizes its records.
#[derive(Debug, Clone, Copy)]
pub struct RecordPolicy {
    /// Grow with the congestion window (true) or always use `max`.
    pub dynamic: bool,
    /// Largest record.
    pub max: usize,
    /// Idle time that restarts the ramp.
    pub idle: Duration,
    /// Bytes in small records when TCP_INFO is unavailable.
    pub fallback_bytes: usize,
}

impl RecordPolicy {
    /// From the `[tls]` configuration.
    pub fn from_config(tls: &tlsgate_config::TlsConfig) -> Self {
        Self {
            dynamic: tls.dynamic_records,
            max: tls.max_record_size.clamp(512, 16_384),
            idle: tls.dynamic_records_idle.get(),
            fallback_bytes: tls.dynamic_records_fallback_bytes,
        }
    }
}

/// The record size for a congestion window, given the window at the start of the ramp.
pub fn size_for_window(cwnd: u32, mss: u32, initial_cwnd: u32, max: usize) -> usize {
    let segment = (mss as usize).saturating_sub(RECORD_OVERHEAD).max(512);
    let growth = (cwnd / initial_cwnd.max(1)).max(1) as usize;
    segment.saturating_mul(growth).min(max)
}

/// A TLS stream that sets the record size before each write.
pub struct RecordSizer {
    inner: SslStream<MeteredStream<TcpStream>>,
    policy: RecordPolicy,
    metrics: Arc<Metrics>,
    current: usize,
    initial_cwnd: Option<u32>,
    last_write: Option<Instant>,
    sent_since_reset: usize,
    at_full_size: bool,
    phase: &'static str,
    /// Set while the handshake is unconfirmed after accepting 0-RTT early data; cleared by the
    /// first read or write that finds the handshake finished.
    early: Option<Arc<AtomicBool>>,
    site: &'static str,
    /// The write counter of the current phase (`record_writes_total{site,phase}`), looked up in
    /// the metric family only when the phase changes.
    writes: Option<(&'static str, Counter)>,
    /// Interim responses to write before hyper's next bytes (HTTP/1.1 only), and the rest of one
    /// being written.
    interim: Option<Arc<InterimQueue>>,
    draining: Option<Bytes>,
    /// The last write returned `Pending`: BoringSSL holds a sealed record that must be retried
    /// whole, so the record size may not change until it is sent.
    write_pending: bool,
}

impl RecordSizer {
    /// Wraps a TLS stream whose handshake is complete.
    pub fn new(
        mut inner: SslStream<MeteredStream<TcpStream>>,
        policy: RecordPolicy,
        metrics: Arc<Metrics>,
        site: &'static str,
    ) -> Self {
        let current = if policy.dynamic { 0 } else { policy.max };
        if !policy.dynamic && policy.max < 16_384 {
            tlsgate_tls::set_max_send_fragment(inner.ssl_mut(), policy.max);
        }
        Self {
            inner,
            policy,
            metrics,
            current,
            initial_cwnd: None,
            last_write: None,
            sent_since_reset: 0,
            at_full_size: !policy.dynamic,
            phase: "segment",
            early: None,
            site,
            writes: None,
            interim: None,
            draining: None,
            write_pending: false,
        }
    }

    /// Writes what `queue` holds before anything hyper writes next ([`crate::interim`]).
    pub fn set_interim(&mut self, queue: Arc<InterimQueue>) {
        self.interim = Some(queue);
    }

    /// When the handshake returned early to serve 0-RTT data, a flag that stays true until the
    /// handshake is confirmed (the client's Finished arrived): requests parsed while it is true came
    /// in early data and may be replays. None when the handshake is already complete.
    pub fn watch_early_data(&mut self) -> Option<Arc<AtomicBool>> {
        if self.inner.ssl().is_init_finished() {
            return None;
        }
        let flag = Arc::new(AtomicBool::new(true));
        self.early = Some(flag.clone());
        Some(flag)
    }

    fn check_confirmed(&mut self) {
        if let Some(flag) = &self.early {
            if self.inner.ssl().is_init_finished() {
                flag.store(false, Ordering::Release);
                self.early = None;
            }
        }
    }

    /// Whether the client's Finished is still to come: the handshake returned early to serve
    /// 0-RTT data and has not been confirmed yet.
    pub fn awaits_client_finished(&self) -> bool {
        !self.inner.ssl().is_init_finished()
    }

    /// The raw TCP side (for a lingering close).
    pub fn raw_mut(&mut self) -> &mut MeteredStream<TcpStream> {
        self.inner.get_mut()
    }

    fn adjust(&mut self, now: Instant, len: usize) -> &'static str {
        if !self.policy.dynamic {
            return "fixed";
        }
        if self.last_write.is_none_or(|t| now.duration_since(t) > self.policy.idle) {
            self.at_full_size = false;
            self.initial_cwnd = None;
            self.sent_since_reset = 0;
            // The size BoringSSL holds is the old ramp's: unknown to the next decision, which
            // applies its own (without this, writes up to the old size skipped the new ramp).
            self.current = 0;
            self.phase = "segment";
        }
        if self.at_full_size {
            return "full";
        }
        if len <= self.current.max(FITS_ANY_SEGMENT) {
            // One record of the current size, or small enough for any segment: nothing to
            // decide, no syscall (a short response on a new connection reads no TCP_INFO).
            return self.phase;
        }
        let window = tlsgate_tls::tcp_window(self.inner.get_ref().get_ref().as_fd());
        let (size, segment) = match window {
            Some(w) => {
                let initial = *self.initial_cwnd.get_or_insert(w.cwnd);
                let segment = size_for_window(initial, w.mss, initial, self.policy.max);
                (size_for_window(w.cwnd, w.mss, initial, self.policy.max), segment)
            }
            None if self.sent_since_reset < self.policy.fallback_bytes => {
                (DEFAULT_SEGMENT_PAYLOAD, DEFAULT_SEGMENT_PAYLOAD)
            }
            None => (self.policy.max, DEFAULT_SEGMENT_PAYLOAD),
        };
        if size != self.current {
            tlsgate_tls::set_max_send_fragment(self.inner.ssl_mut(), size);
            self.current = size;
        }
        self.phase = if size >= self.policy.max {
            self.at_full_size = true;
            "full"
        } else if size <= segment {
            "segment"
        } else {
            "growing"
        };
        self.phase
    }
}

impl AsyncRead for RecordSizer {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        // A read that would find nothing ends here, without BoringSSL's read path (its record
        // buffer allocated and freed again, the error queue): hyper's check for the client's
        // close while a request is served and its read after each response, the HTTP/2
        // codec's last read of a batch. Only when nothing is decrypted and waiting, and no
        // early data is unconfirmed; a partly read record in BoringSSL's buffer waits for the
        // socket either way.
        if this.early.is_none() && this.inner.ssl().pending() == 0 && this.inner.get_ref().read_would_wait(cx) {
            return Poll::Pending;
        }
        let res = Pin::new(&mut this.inner).poll_read(cx, buf);
        this.check_confirmed();
        res
    }
}

impl RecordSizer {
    /// Writes `buf` in records of the current size.
    fn write_sized(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let now = Instant::now();
        // A record sealed but not yet sent is retried whole: BoringSSL refuses a retry shorter
        // than it (SSL_R_BAD_WRITE_RETRY), which a size shrunk meanwhile would make (a write
        // blocked longer than `dynamic_records_idle` restarts the ramp). So no new decision
        // until that write is done.
        let phase = if self.write_pending {
            self.phase
        } else {
            self.adjust(now, buf.len())
        };
        // At full size, a write larger than a record goes one record at a time, all but the
        // last with `MSG_MORE` (`MeteredStream::more_follows`): a large response leaves in full
        // segments instead of one segment per 16 KiB record. The caller writes the rest at once
        // (a write's contract), and the last record sends what the kernel kept back. Not while
        // ramping: those records are sized to leave one segment each, as they are written.
        let (chunk, more) = if phase == "full" && buf.len() > self.policy.max {
            (&buf[..self.policy.max], true)
        } else {
            (buf, false)
        };
        self.inner.get_mut().more_follows(more);
        let res = Pin::new(&mut self.inner).poll_write(cx, chunk);
        self.inner.get_mut().more_follows(false);
        self.write_pending = res.is_pending();
        self.check_confirmed();
        if let Poll::Ready(Ok(n)) = &res {
            self.sent_since_reset += n;
            self.last_write = Some(now);
            match &self.writes {
                Some((p, counter)) if *p == phase => {
                    counter.inc();
                }
                _ => {
                    let counter = self
                        .metrics
                        .record_writes
                        .get_or_create(&RecordLabels { site: self.site, phase })
                        .clone();
                    counter.inc();
                    self.writes = Some((phase, counter));
                }
            }
        }
        res
    }

    /// Writes the queued interim responses, if any, first.
    fn poll_interim(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            let mut out = match self.draining.take() {
                Some(b) => b,
                None => match self.interim.as_ref().and_then(|q| q.take()) {
                    Some(b) => b,
                    None => return Poll::Ready(Ok(())),
                },
            };
            while !out.is_empty() {
                match self.write_sized(cx, &out) {
                    Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                    Poll::Ready(Ok(n)) => out.advance(n),
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => {
                        self.draining = Some(out);
                        return Poll::Pending;
                    }
                }
            }
        }
    }
}

impl AsyncWrite for RecordSizer {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let Some(q) = &this.interim {
            q.note_write();
            std::task::ready!(this.poll_interim(cx))?;
        }
        this.write_sized(cx, buf)
    }

    /// Writes the first non-empty part only (the stream does not say it writes vectors, so a
    /// caller gathers only where that saves work). When more follows it and the first part is
    /// small — an HTTP/2 DATA frame's head with the start of its payload, ahead of the rest of
    /// the payload (the vendored `h2`'s chained write) — its record is held below TLS and
    /// leaves with the next write's in one system call, not one each.
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let mut parts = bufs.iter().filter(|b| !b.is_empty());
        let Some(first) = parts.next() else {
            return self.poll_write(cx, &[]);
        };
        let hold = first.len() <= HOLD_FIRST_MAX && parts.next().is_some();
        let this = self.get_mut();
        this.inner.get_mut().hold_next(hold);
        let res = Pin::new(&mut *this).poll_write(cx, first);
        this.inner.get_mut().hold_next(false);
        res
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.interim.is_none() {
            return Pin::new(&mut this.inner).poll_flush(cx);
        }
        std::task::ready!(this.poll_interim(cx))?;
        let res = Pin::new(&mut this.inner).poll_flush(cx);
        if let (Poll::Ready(Ok(())), Some(q)) = (&res, &this.interim) {
            q.note_flushed();
        }
        res
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::size_for_window;

    #[test]
    fn grows_with_the_window_from_one_segment_to_the_maximum() {
        // MSS 1448 (loopback-like with timestamps): one segment = 1419 bytes of payload.
        assert_eq!(size_for_window(10, 1448, 10, 16_384), 1419);
        assert_eq!(size_for_window(19, 1448, 10, 16_384), 1419);
        assert_eq!(size_for_window(20, 1448, 10, 16_384), 2838);
        assert_eq!(size_for_window(80, 1448, 10, 16_384), 11_352);
        assert_eq!(size_for_window(200, 1448, 10, 16_384), 16_384);
        assert_eq!(size_for_window(200, 1448, 10, 4096), 4096);
    }

    #[test]
    fn degenerate_windows_do_not_panic() {
        assert_eq!(size_for_window(0, 0, 0, 16_384), 512);
        assert_eq!(size_for_window(u32::MAX, u32::MAX, 1, 16_384), 16_384);
    }
}
