//! Interim (1xx) responses from an origin on their way to a client: today 103 Early Hints
//! (RFC 8297), which let a browser start fetching what the `Link` headers name while the origin
//! is still computing the final response.
//!
//! HTTP/2 clients get them as a HEADERS frame on the request's stream ([`StreamInterim`]: the
//! stream's response handle, shared with the stream's task until the final response goes out).
//! HTTP/3 clients too: the request's task hands them to its QUIC connection ([`InterimStream`],
//! implemented by `downstream::quic::streams`), which sends them ahead of the final head.
//!
//! hyper's HTTP/1.1 server has no way to send an interim response, so the gateway writes it
//! below hyper, into the TLS stream ([`crate::downstream::records::RecordSizer`] drains what is
//! queued here before the next bytes hyper writes or flushes). That is only correct when nothing
//! of an earlier response can still come after it: an interim response is queued only while its
//! request is the connection's only one in flight (an earlier response's body has ended) and
//! hyper has flushed everything it wrote (`clean`: the stream's last call was a completed flush,
//! and hyper flushes the stream only when its own buffer is empty). Otherwise, and past
//! [`MAX_PENDING`] bytes, it is dropped, which RFC 8297 §2 allows an intermediary to do, and
//! counted. HTTP/1.0 clients never get one (RFC 9110 §15.2).

use crate::downstream::io::Activity;
use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderMap, StatusCode};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tlsgate_admin::metrics::InterimLabels;

/// The most bytes of interim responses waiting to be written on one connection.
pub const MAX_PENDING: usize = 16 * 1024;

/// Why an interim response did not reach the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// An earlier response on the connection may still be in flight or unflushed.
    NotAlone,
    /// More than [`MAX_PENDING`] bytes are already waiting.
    TooLarge,
    /// The HTTP/2 stream was already reset or closed.
    Closed,
}

impl Dropped {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Dropped::NotAlone => "dropped_busy",
            Dropped::TooLarge => "dropped_too_large",
            Dropped::Closed => "dropped_closed",
        }
    }
}

/// One HTTP/1.1 client connection's queue of interim responses.
#[derive(Debug)]
pub struct InterimQueue {
    activity: Arc<Activity>,
    pending: Mutex<BytesMut>,
    has_pending: AtomicBool,
    /// The stream's last call was a flush that completed (nothing of hyper's is unwritten).
    clean: AtomicBool,
    /// Interim responses written to the stream (for tests and the log).
    queued: AtomicU64,
}

impl InterimQueue {
    /// A queue for the connection whose requests `activity` counts.
    pub fn new(activity: Arc<Activity>) -> Arc<Self> {
        Arc::new(Self {
            activity,
            pending: Mutex::new(BytesMut::new()),
            has_pending: AtomicBool::new(false),
            clean: AtomicBool::new(true),
            queued: AtomicU64::new(0),
        })
    }

    /// Queues an interim response with the origin's `headers` (hop-by-hop fields already
    /// removed) to be written before anything else hyper writes; see the module header for when
    /// it is dropped instead.
    pub fn offer(&self, status: StatusCode, headers: &HeaderMap) -> Result<(), Dropped> {
        if !self.clean.load(Ordering::Acquire) || self.activity.progress().in_flight != 1 {
            return Err(Dropped::NotAlone);
        }
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let before = pending.len();
        encode(status, headers, &mut pending);
        if pending.len() > MAX_PENDING {
            pending.truncate(before);
            return Err(Dropped::TooLarge);
        }
        self.has_pending.store(true, Ordering::Release);
        self.queued.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// What is queued, taken (None when nothing is: one atomic load on the write path).
    pub fn take(&self) -> Option<Bytes> {
        if !self.has_pending.load(Ordering::Acquire) {
            return None;
        }
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        self.has_pending.store(false, Ordering::Release);
        (!pending.is_empty()).then(|| pending.split().freeze())
    }

    /// The stream was written to: until the next completed flush, hyper may hold unwritten bytes.
    pub fn note_write(&self) {
        self.clean.store(false, Ordering::Relaxed);
    }

    /// A flush of the stream completed.
    pub fn note_flushed(&self) {
        self.clean.store(true, Ordering::Release);
    }

    /// Interim responses queued on this connection so far.
    pub fn queued(&self) -> u64 {
        self.queued.load(Ordering::Relaxed)
    }
}

/// One HTTP/2 request stream's response handle, shared by the stream's future (which sends the
/// final response with it) and the request path it runs (which sends interim responses before
/// that, through a reference: nothing is allocated for it).
pub struct StreamInterim {
    respond: parking_lot::Mutex<h2::server::SendResponse<Bytes>>,
    /// Bytes of interim heads sent on the stream so far (bounded by [`MAX_PENDING`]).
    sent: AtomicU64,
}

impl StreamInterim {
    /// Holds `respond`, the stream's response handle.
    pub fn new(respond: h2::server::SendResponse<Bytes>) -> Self {
        Self {
            respond: parking_lot::Mutex::new(respond),
            sent: AtomicU64::new(0),
        }
    }

    /// The stream's response handle, for the final response and reset watching.
    pub fn respond(&self) -> parking_lot::MutexGuard<'_, h2::server::SendResponse<Bytes>> {
        self.respond.lock()
    }

    /// Sends an interim response on the stream now (a HEADERS frame; it needs no flow-control
    /// credit, and the final response cannot have been sent yet: the request is still at the
    /// origin). Past [`MAX_PENDING`] bytes of heads on one stream, dropped.
    pub fn offer(&self, status: StatusCode, headers: &HeaderMap) -> Result<(), Dropped> {
        let size: usize = headers.iter().map(|(n, v)| n.as_str().len() + v.len() + 32).sum();
        let before = self.sent.fetch_add(size as u64, Ordering::Relaxed);
        if before + size as u64 > MAX_PENDING as u64 {
            return Err(Dropped::TooLarge);
        }
        let mut head = http::Response::new(());
        *head.status_mut() = status;
        *head.headers_mut() = headers.clone();
        self.respond().send_informational(head).map_err(|_| Dropped::Closed)
    }
}

/// A request stream of a connection that sends interim responses itself (HTTP/3).
pub trait InterimStream: Sync {
    /// Queues an interim response ahead of the stream's final response.
    fn offer(&self, status: StatusCode, headers: &HeaderMap) -> Result<(), Dropped>;
}

/// Where a request's interim responses go.
#[derive(Clone, Copy)]
pub enum InterimTo<'a> {
    /// An HTTP/1.1 connection's queue, written below hyper.
    Http1(&'a InterimQueue),
    /// An HTTP/2 stream, sent on it directly.
    Http2(&'a StreamInterim),
    /// Another stream kind (an HTTP/3 request stream).
    Stream(&'a dyn InterimStream),
}

/// Where one request's interim responses from the origin go, and their counter
/// (`tlsgate_early_hints_total{result}`).
#[derive(Clone, Copy)]
pub struct InterimSink<'a> {
    /// The client connection's queue or stream, or the label saying why they are not forwarded.
    pub to: Result<InterimTo<'a>, &'static str>,
    /// The counter family.
    pub count: &'a Family<InterimLabels, Counter>,
}

impl InterimSink<'_> {
    /// An interim response arrived from the origin (hop-by-hop fields already removed). Only
    /// 103 Early Hints are passed on: 100 Continue is hyper's to send to the client, and no other
    /// 1xx status is defined for it.
    pub fn interim(&self, status: StatusCode, headers: &HeaderMap) {
        if status.as_u16() != 103 {
            return;
        }
        let result = match self.to {
            Ok(InterimTo::Http1(queue)) => queue
                .offer(status, headers)
                .map_or_else(Dropped::label, |()| "forwarded"),
            Ok(InterimTo::Http2(stream)) => stream
                .offer(status, headers)
                .map_or_else(Dropped::label, |()| "forwarded"),
            Ok(InterimTo::Stream(stream)) => stream
                .offer(status, headers)
                .map_or_else(Dropped::label, |()| "forwarded"),
            Err(why) => why,
        };
        self.count.get_or_create(&InterimLabels { result }).inc();
    }
}

/// Writes an HTTP/1.1 interim response head (`headers` were parsed from the origin's response,
/// so they hold no CR or LF).
pub fn encode(status: StatusCode, headers: &HeaderMap, out: &mut BytesMut) {
    out.put_slice(b"HTTP/1.1 ");
    out.put_slice(status.as_str().as_bytes());
    out.put_u8(b' ');
    out.put_slice(status.canonical_reason().unwrap_or("Informational").as_bytes());
    out.put_slice(b"\r\n");
    for (name, value) in headers {
        out.put_slice(name.as_str().as_bytes());
        out.put_slice(b": ");
        out.put_slice(value.as_bytes());
        out.put_slice(b"\r\n");
    }
    out.put_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hints() -> HeaderMap {
        let mut h = HeaderMap::new();
        h.append("link", "</style.css>; rel=preload; as=style".parse().unwrap());
        h.append("link", "</app.js>; rel=preload; as=script".parse().unwrap());
        h
    }

    #[test]
    fn a_103_is_encoded_as_an_http11_head() {
        let mut out = BytesMut::new();
        encode(StatusCode::from_u16(103).unwrap(), &hints(), &mut out);
        assert_eq!(
            &out[..],
            b"HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload; as=style\r\nlink: </app.js>; rel=preload; as=script\r\n\r\n"
        );
    }

    #[test]
    fn queued_only_for_the_only_request_in_flight_on_a_flushed_stream() {
        let activity = Activity::new();
        let q = InterimQueue::new(activity.clone());
        let early = StatusCode::from_u16(103).unwrap();
        assert_eq!(q.take(), None);
        activity.request_started();
        activity.request_started();
        assert_eq!(q.offer(early, &hints()), Err(Dropped::NotAlone));
        activity.request_finished();
        q.note_write();
        assert_eq!(q.offer(early, &hints()), Err(Dropped::NotAlone));
        q.note_flushed();
        assert_eq!(q.offer(early, &hints()), Ok(()));
        assert_eq!(q.offer(early, &hints()), Ok(()));
        let both = q.take().expect("queued");
        assert_eq!(both.windows(12).filter(|w| w == b"HTTP/1.1 103").count(), 2);
        assert_eq!(q.take(), None);
        assert_eq!(q.queued(), 2);
    }

    #[test]
    fn more_than_the_bound_is_dropped_whole() {
        let activity = Activity::new();
        activity.request_started();
        let q = InterimQueue::new(activity);
        let mut big = HeaderMap::new();
        big.insert("link", "x".repeat(MAX_PENDING).parse().unwrap());
        let early = StatusCode::from_u16(103).unwrap();
        assert_eq!(q.offer(early, &big), Err(Dropped::TooLarge));
        assert_eq!(q.take(), None);
        assert_eq!(q.offer(early, &hints()), Ok(()));
        assert!(q.take().is_some());
    }
}
