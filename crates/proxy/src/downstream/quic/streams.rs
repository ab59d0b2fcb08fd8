//! The request streams of one HTTP/3 connection: a request's HEADERS become an
//! `http::Request<ClientBody>` for [`crate::request::service::handle`] (the same proxy layer as
//! HTTP/1.1 and HTTP/2: routes, fixed responses, upstream pools, access log), run on a task of
//! its own; its response comes back to the connection's task as [`Event`]s.
//!
//! Flow control both ways, nothing held whole: a request body is read from QUIC only while its
//! [`H3Body`] has room (a few chunks); a response body's task takes [`RESPONSE_WINDOW`] bytes of
//! credit per chunk, returned as quiche accepts the bytes, so at most that much waits here per
//! stream on top of QUIC's own send buffer. Trailers are passed both ways.

use super::body::{BodySender, H3Body};
use crate::body::ClientBody;
use crate::context::{ConnContext, InEarlyData};
use bytes::{Buf, Bytes};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Uri};
use http_body_util::BodyExt;
use quiche::h3::{self, NameValue};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::{mpsc, Semaphore};

/// Response bytes a stream's task may have handed to the connection and not yet sent.
pub const RESPONSE_WINDOW: usize = 64 * 1024;
/// H3_NO_ERROR.
const H3_NO_ERROR: u64 = 0x100;
/// H3_INTERNAL_ERROR.
const H3_INTERNAL_ERROR: u64 = 0x102;
/// H3_REQUEST_CANCELLED.
const H3_REQUEST_CANCELLED: u64 = 0x10c;
/// H3_MESSAGE_ERROR.
const H3_MESSAGE_ERROR: u64 = 0x10e;
/// Bytes read from a request stream at a time.
const READ_CHUNK: usize = 16 * 1024;

/// What a request's task tells its connection.
pub enum Event {
    /// The response's status and headers.
    Head(u64, http::response::Parts),
    /// A chunk of the response body, with the credit it holds.
    Data(u64, Bytes, u32),
    /// The response's trailers (the response ends with them).
    Trailers(u64, HeaderMap),
    /// The response is complete.
    End(u64),
    /// The response body failed: the stream is reset.
    Abort(u64),
    /// A chunk of the request body was taken: the stream may be read on.
    Taken(u64),
    /// An interim response (103 Early Hints) to send ahead of the final head.
    Interim(u64, Vec<h3::Header>),
}

/// A request stream's way to send interim responses: through its connection's events, ahead of
/// the final head (`crate::interim`). At most `interim::MAX_PENDING` bytes of heads per stream.
struct H3Interim {
    sid: u64,
    events: mpsc::UnboundedSender<Event>,
    sent: std::sync::atomic::AtomicU64,
}

impl crate::interim::InterimStream for H3Interim {
    fn offer(&self, status: http::StatusCode, headers: &HeaderMap) -> Result<(), crate::interim::Dropped> {
        use std::sync::atomic::Ordering;
        let size: usize = headers.iter().map(|(n, v)| n.as_str().len() + v.len() + 32).sum();
        let before = self.sent.fetch_add(size as u64, Ordering::Relaxed);
        if before + size as u64 > crate::interim::MAX_PENDING as u64 {
            return Err(crate::interim::Dropped::TooLarge);
        }
        let mut list = Vec::with_capacity(headers.len() + 1);
        list.push(h3::Header::new(b":status", status.as_str().as_bytes()));
        list.extend(header_list(headers));
        self.events
            .send(Event::Interim(self.sid, list))
            .map_err(|_| crate::interim::Dropped::Closed)
    }
}

/// One request stream.
struct Stream {
    /// Feeds the request body while it is open.
    body: Option<BodySender>,
    /// quiche has body bytes this stream did not take yet (its body was full).
    unread: bool,
    /// Interim heads (103) waiting for quiche, sent before `head`.
    interim: VecDeque<Vec<h3::Header>>,
    /// A HEADERS frame went out (an interim one or the final): later ones are "additional".
    initialized: bool,
    /// The response head, until quiche takes it.
    head: Option<Vec<h3::Header>>,
    /// Whether the head was sent.
    head_sent: bool,
    /// Response chunks not yet taken by quiche, with the credit each holds.
    out: VecDeque<(Bytes, u32)>,
    /// The response is complete (after `out`, with `trailers` if any).
    end: bool,
    trailers: Option<Vec<h3::Header>>,
    /// The FIN was sent: the response is done.
    done: bool,
    credit: Arc<Semaphore>,
    task: tokio::task::AbortHandle,
}

/// The request streams of a connection.
pub struct Streams {
    streams: HashMap<u64, Stream>,
    events: mpsc::UnboundedSender<Event>,
    /// The largest request stream ID seen (for GOAWAY).
    pub last_id: Option<u64>,
    max_field_section_size: u64,
    buf: Vec<u8>,
}

impl Streams {
    /// No streams yet; request tasks report on `events`.
    pub fn new(events: mpsc::UnboundedSender<Event>, max_field_section_size: u64) -> Self {
        Self {
            streams: HashMap::new(),
            events,
            last_id: None,
            max_field_section_size,
            buf: vec![0; READ_CHUNK],
        }
    }

    /// Requests in flight.
    pub fn len(&self) -> usize {
        self.streams.len()
    }

    /// Whether no request is in flight.
    pub fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }

    /// A request's HEADERS (or, on a known stream, its trailers).
    pub fn on_headers(
        &mut self,
        conn: &mut quiche::Connection,
        h3c: &mut h3::Connection,
        ctx: &Arc<ConnContext>,
        sid: u64,
        list: Vec<h3::Header>,
        more_frames: bool,
    ) {
        if let Some(stream) = self.streams.get_mut(&sid) {
            // Trailers of the request body.
            if let Some(body) = &stream.body {
                let _ = body.tx.try_send(http_body::Frame::trailers(header_map(&list)));
            }
            return;
        }
        self.last_id = Some(self.last_id.map_or(sid, |l| l.max(sid)));
        let size: u64 = list
            .iter()
            .map(|h| (h.name().len() + h.value().len() + 32) as u64)
            .sum();
        if size > self.max_field_section_size {
            let head = [h3::Header::new(b":status", b"431")];
            let _ = h3c.send_response(conn, sid, &head, true);
            let _ = conn.stream_shutdown(sid, quiche::Shutdown::Read, H3_NO_ERROR);
            return;
        }
        let Some(parts) = request_parts(&list) else {
            let _ = conn.stream_shutdown(sid, quiche::Shutdown::Read, H3_MESSAGE_ERROR);
            let _ = conn.stream_shutdown(sid, quiche::Shutdown::Write, H3_MESSAGE_ERROR);
            return;
        };
        let (body, sender) = if more_frames {
            let events = self.events.clone();
            let expected = parts
                .headers
                .get(http::header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse().ok());
            let (body, sender) = H3Body::channel(
                expected,
                Box::new(move || {
                    let _ = events.send(Event::Taken(sid));
                }),
            );
            (body, Some(sender))
        } else {
            (H3Body::empty(), None)
        };
        let mut req = Request::new(ClientBody::stream(body));
        *req.method_mut() = parts.method;
        *req.uri_mut() = parts.uri;
        *req.version_mut() = http::Version::HTTP_3;
        *req.headers_mut() = parts.headers;
        if ctx.in_early_data() {
            // Read in 0-RTT: so marked even if the handshake is confirmed before its task runs.
            req.extensions_mut().insert(InEarlyData);
        }
        let credit = Arc::new(Semaphore::new(RESPONSE_WINDOW));
        let task = tokio::spawn(respond(ctx.clone(), req, sid, self.events.clone(), credit.clone())).abort_handle();
        self.streams.insert(
            sid,
            Stream {
                body: sender,
                unread: false,
                interim: VecDeque::new(),
                initialized: false,
                head: None,
                head_sent: false,
                out: VecDeque::new(),
                end: false,
                trailers: None,
                done: false,
                credit,
                task,
            },
        );
    }

    /// Body bytes are readable on `sid`: read them while its body has room.
    pub fn on_data(&mut self, conn: &mut quiche::Connection, h3c: &mut h3::Connection, sid: u64) {
        let Some(stream) = self.streams.get_mut(&sid) else {
            // A stream we answered already (431, malformed): drop what it sends.
            while let Ok(n) = h3c.recv_body(conn, sid, &mut self.buf) {
                if n == 0 {
                    break;
                }
            }
            return;
        };
        stream.unread = false;
        loop {
            let Some(body) = &stream.body else {
                // Nobody reads the body any more (the response did not need it).
                let _ = conn.stream_shutdown(sid, quiche::Shutdown::Read, H3_NO_ERROR);
                return;
            };
            let permit = match body.tx.clone().try_reserve_owned() {
                Ok(p) => p,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    stream.unread = true;
                    return;
                }
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    // Nobody reads the body any more (the response did not need it).
                    stream.body = None;
                    let _ = conn.stream_shutdown(sid, quiche::Shutdown::Read, H3_NO_ERROR);
                    return;
                }
            };
            match h3c.recv_body(conn, sid, &mut self.buf) {
                Ok(n) => {
                    permit.send(http_body::Frame::data(Bytes::copy_from_slice(&self.buf[..n])));
                }
                Err(_) => return,
            }
        }
    }

    /// The client's FIN on `sid`: its request body is complete.
    pub fn on_finished(&mut self, sid: u64) {
        if let Some(stream) = self.streams.get_mut(&sid) {
            if let Some(body) = stream.body.take() {
                body.complete.store(true, Ordering::Release);
            }
        }
    }

    /// The client reset `sid`: its body fails as abandoned, its handler is dropped (499).
    pub fn on_reset(&mut self, conn: &mut quiche::Connection, sid: u64) {
        if let Some(stream) = self.streams.remove(&sid) {
            stream.task.abort();
            stream.credit.close();
            let _ = conn.stream_shutdown(sid, quiche::Shutdown::Write, H3_REQUEST_CANCELLED);
        }
    }

    /// An event from a request's task.
    pub fn on_event(&mut self, conn: &mut quiche::Connection, h3c: &mut h3::Connection, event: Event) {
        let sid = match &event {
            Event::Head(s, _)
            | Event::Data(s, ..)
            | Event::Trailers(s, _)
            | Event::End(s)
            | Event::Abort(s)
            | Event::Interim(s, _) => *s,
            Event::Taken(s) => {
                let s = *s;
                if self.streams.get(&s).is_some_and(|st| st.unread) {
                    self.on_data(conn, h3c, s);
                }
                return;
            }
        };
        let Some(stream) = self.streams.get_mut(&sid) else {
            return;
        };
        match event {
            Event::Head(_, parts) => stream.head = Some(response_head(&parts)),
            // Queued in order with the head: the request's task sends them before it.
            Event::Interim(_, head) if !stream.head_sent => stream.interim.push_back(head),
            Event::Interim(..) => {}
            Event::Data(_, bytes, credit) => stream.out.push_back((bytes, credit)),
            Event::Trailers(_, trailers) => {
                stream.trailers = Some(header_list(&trailers));
                stream.end = true;
            }
            Event::End(_) => stream.end = true,
            Event::Abort(_) => {
                let _ = conn.stream_shutdown(sid, quiche::Shutdown::Write, H3_INTERNAL_ERROR);
                let _ = conn.stream_shutdown(sid, quiche::Shutdown::Read, H3_INTERNAL_ERROR);
                if let Some(s) = self.streams.remove(&sid) {
                    s.credit.close();
                }
            }
            Event::Taken(_) => {}
        }
    }

    /// Hands quiche what each stream has waiting, as far as flow control lets it; forgets the
    /// streams whose response is sent.
    pub fn pump(&mut self, conn: &mut quiche::Connection, h3c: &mut h3::Connection) {
        let mut finished = Vec::new();
        for (&sid, stream) in self.streams.iter_mut() {
            if pump_one(conn, h3c, sid, stream) {
                finished.push(sid);
            }
        }
        for sid in finished {
            if let Some(s) = self.streams.remove(&sid) {
                if s.body.is_some() {
                    // The response is complete before the request body: no more of it is needed.
                    let _ = conn.stream_shutdown(sid, quiche::Shutdown::Read, H3_NO_ERROR);
                }
            }
        }
    }

    /// Ends every stream (the connection is gone): handlers dropped, bodies abandoned.
    pub fn abandon_all(&mut self) {
        for (_, s) in self.streams.drain() {
            s.task.abort();
            s.credit.close();
        }
    }
}

/// Sends what one stream has waiting; true once its FIN is sent (or it failed).
fn pump_one(conn: &mut quiche::Connection, h3c: &mut h3::Connection, sid: u64, s: &mut Stream) -> bool {
    while let Some(interim) = s.interim.front() {
        let sent = if s.initialized {
            h3c.send_additional_headers(conn, sid, interim, false, false)
        } else {
            h3c.send_response(conn, sid, interim, false)
        };
        match sent {
            Ok(()) => {
                s.initialized = true;
                s.interim.pop_front();
            }
            Err(h3::Error::StreamBlocked | h3::Error::Done) => return false,
            Err(_) => return true,
        }
    }
    if let Some(head) = &s.head {
        let fin = s.end && s.out.is_empty() && s.trailers.is_none();
        let sent = if s.initialized {
            h3c.send_additional_headers(conn, sid, head, false, fin)
        } else {
            h3c.send_response(conn, sid, head, fin)
        };
        match sent {
            Ok(()) => {
                s.head = None;
                s.head_sent = true;
                if fin {
                    s.done = true;
                    return true;
                }
            }
            Err(h3::Error::StreamBlocked | h3::Error::Done) => return false,
            Err(_) => return true,
        }
    }
    if !s.head_sent {
        return false;
    }
    while let Some((bytes, credit)) = s.out.front_mut() {
        match h3c.send_body(conn, sid, bytes, false) {
            Ok(n) => {
                bytes.advance(n);
                if bytes.is_empty() {
                    s.credit.add_permits(*credit as usize);
                    s.out.pop_front();
                } else {
                    return false;
                }
            }
            Err(h3::Error::Done | h3::Error::StreamBlocked) => return false,
            Err(_) => return true,
        }
    }
    if s.end && !s.done {
        let sent = match &s.trailers {
            Some(t) => h3c.send_additional_headers(conn, sid, t, true, true),
            None => h3c.send_body(conn, sid, &[], true).map(|_| ()),
        };
        match sent {
            Ok(()) => s.done = true,
            Err(h3::Error::Done | h3::Error::StreamBlocked) => return false,
            Err(_) => return true,
        }
    }
    s.done
}

/// Runs one request through the proxy layer and streams its response to the connection.
async fn respond(
    ctx: Arc<ConnContext>,
    req: Request<ClientBody>,
    sid: u64,
    events: mpsc::UnboundedSender<Event>,
    credit: Arc<Semaphore>,
) {
    let hints = H3Interim {
        sid,
        events: events.clone(),
        sent: Default::default(),
    };
    let to = crate::interim::InterimTo::Stream(&hints);
    let Ok(response) = crate::request::service::handle(ctx, req, Some(to)).await;
    let (parts, mut body) = response.into_parts();
    if events.send(Event::Head(sid, parts)).is_err() {
        return;
    }
    loop {
        match body.frame().await {
            None => {
                let _ = events.send(Event::End(sid));
                return;
            }
            Some(Err(_)) => {
                let _ = events.send(Event::Abort(sid));
                return;
            }
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => {
                    if data.is_empty() {
                        continue;
                    }
                    let want = u32::try_from(data.len().min(RESPONSE_WINDOW)).unwrap_or(u32::MAX);
                    let Ok(permit) = credit.acquire_many(want).await else {
                        return;
                    };
                    permit.forget();
                    if events.send(Event::Data(sid, data, want)).is_err() {
                        return;
                    }
                }
                Err(frame) => {
                    if let Ok(trailers) = frame.into_trailers() {
                        let _ = events.send(Event::Trailers(sid, trailers));
                        return;
                    }
                }
            },
        }
    }
}

/// What a request's HEADERS say.
struct RequestParts {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
}

/// Reads a request's header list (RFC 9114 §4.3.1): `:method`, `:scheme`, `:path` (and
/// `:authority`) required once each, no other pseudo-header, pseudo-headers first, no
/// connection-specific field; `None` when malformed.
fn request_parts(list: &[h3::Header]) -> Option<RequestParts> {
    let (mut method, mut scheme, mut authority, mut path) = (None, None, None, None);
    let mut headers = HeaderMap::with_capacity(list.len());
    for h in list {
        let (name, value) = (h.name(), h.value());
        if let Some(pseudo) = name.strip_prefix(b":") {
            if !headers.is_empty() {
                return None;
            }
            let slot = match pseudo {
                b"method" => &mut method,
                b"scheme" => &mut scheme,
                b"authority" => &mut authority,
                b"path" => &mut path,
                _ => return None,
            };
            if slot.replace(value).is_some() {
                return None;
            }
            continue;
        }
        if name.iter().any(u8::is_ascii_uppercase) {
            return None;
        }
        let name = HeaderName::from_bytes(name).ok()?;
        if is_connection_specific(&name, value) {
            return None;
        }
        headers.append(name, HeaderValue::from_bytes(value).ok()?);
    }
    let method = Method::from_bytes(method?).ok()?;
    if method == Method::CONNECT {
        // Extended CONNECT (WebSockets over HTTP/3) is not offered.
        return None;
    }
    let (scheme, path) = (scheme?, path?);
    if path.is_empty() {
        return None;
    }
    let uri = match authority {
        Some(a) => {
            let mut text = Vec::with_capacity(scheme.len() + a.len() + path.len() + 3);
            text.extend_from_slice(scheme);
            text.extend_from_slice(b"://");
            text.extend_from_slice(a);
            text.extend_from_slice(path);
            Uri::try_from(text).ok()?
        }
        None => Uri::try_from(path).ok()?,
    };
    Some(RequestParts { method, uri, headers })
}

fn is_connection_specific(name: &HeaderName, value: &[u8]) -> bool {
    use http::header;
    *name == header::CONNECTION
        || *name == header::TRANSFER_ENCODING
        || *name == header::UPGRADE
        || name.as_str() == "keep-alive"
        || name.as_str() == "proxy-connection"
        || (*name == header::TE && value != b"trailers")
}

/// Fields never sent to an HTTP/3 client (connection-specific in HTTP/1.1).
fn drop_on_h3(name: &HeaderName) -> bool {
    use http::header;
    *name == header::CONNECTION
        || *name == header::TRANSFER_ENCODING
        || *name == header::UPGRADE
        || name.as_str() == "keep-alive"
        || name.as_str() == "proxy-connection"
}

/// A response's HEADERS.
fn response_head(parts: &http::response::Parts) -> Vec<h3::Header> {
    let mut list = Vec::with_capacity(parts.headers.len() + 1);
    list.push(h3::Header::new(b":status", parts.status.as_str().as_bytes()));
    list.extend(header_list(&parts.headers));
    list
}

fn header_list(headers: &HeaderMap) -> Vec<h3::Header> {
    headers
        .iter()
        .filter(|(n, _)| !drop_on_h3(n))
        .map(|(n, v)| h3::Header::new(n.as_str().as_bytes(), v.as_bytes()))
        .collect()
}

fn header_map(list: &[h3::Header]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for h in list {
        if let (Ok(n), Ok(v)) = (HeaderName::from_bytes(h.name()), HeaderValue::from_bytes(h.value())) {
            map.append(n, v);
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(pairs: &[(&str, &str)]) -> Vec<h3::Header> {
        pairs
            .iter()
            .map(|(n, v)| h3::Header::new(n.as_bytes(), v.as_bytes()))
            .collect()
    }

    #[test]
    fn reads_a_request_and_refuses_malformed_ones() {
        let ok = list(&[
            (":method", "GET"),
            (":scheme", "https"),
            (":authority", "example.com"),
            (":path", "/a?b"),
            ("accept", "*/*"),
        ]);
        let parts = request_parts(&ok).unwrap();
        assert_eq!(parts.method, Method::GET);
        assert_eq!(parts.uri.to_string(), "https://example.com/a?b");
        assert_eq!(parts.headers["accept"], "*/*");
        for bad in [
            list(&[(":method", "GET"), (":scheme", "https")]),
            list(&[(":method", "GET"), (":scheme", "https"), (":path", "/"), (":path", "/")]),
            list(&[(":method", "GET"), (":scheme", "https"), (":path", "/"), (":foo", "x")]),
            list(&[(":method", "GET"), ("a", "b"), (":scheme", "https"), (":path", "/")]),
            list(&[(":method", "GET"), (":scheme", "https"), (":path", "/"), ("Upper", "x")]),
            list(&[
                (":method", "GET"),
                (":scheme", "https"),
                (":path", "/"),
                ("connection", "x"),
            ]),
            list(&[(":method", "GET"), (":scheme", "https"), (":path", "/"), ("te", "gzip")]),
            list(&[(":method", "CONNECT"), (":authority", "a:1")]),
        ] {
            assert!(request_parts(&bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn responses_drop_connection_fields() {
        let mut parts = http::Response::new(()).into_parts().0;
        parts.headers.insert("connection", HeaderValue::from_static("close"));
        parts.headers.insert("x-a", HeaderValue::from_static("1"));
        let head = response_head(&parts);
        assert_eq!(head[0].value(), b"200");
        assert_eq!(head.len(), 2);
        assert_eq!(head[1].name(), b"x-a");
    }
}
