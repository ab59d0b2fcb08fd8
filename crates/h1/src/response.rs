//! An origin's response head, parsed with httparse into `http` types: the head's bytes are
//! frozen once and every header value is a slice of them (no copy per field), and the body's
//! framing is decided by RFC 9112 §6.3.

use crate::Error;
use bytes::{Bytes, BytesMut};
use http::header::{HeaderMap, HeaderName, HeaderValue, CONNECTION, CONTENT_LENGTH, TRANSFER_ENCODING};
use http::{StatusCode, Version};

/// The largest response head read (hyper's default buffer limit is larger; nginx's
/// `proxy_buffer_size` default is 4–8 KiB and fails the response beyond it).
pub const MAX_HEAD: usize = 64 * 1024;
/// The most header fields in a response head (hyper's limit too).
pub const MAX_HEADERS: usize = 100;

/// Field positions kept on the stack; a head with more takes a vector.
const FEW_HEADERS: usize = 24;

/// How the response body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// No body: a HEAD request, 1xx, 204 or 304 (whatever `Content-Length` says).
    Empty,
    /// Exactly this many bytes.
    Length(u64),
    /// Chunked, possibly with trailers.
    Chunked,
    /// Everything until the origin closes the connection.
    UntilClose,
}

/// A parsed response head.
#[derive(Debug)]
pub struct Head {
    /// The status code.
    pub status: StatusCode,
    /// HTTP/1.0 or HTTP/1.1.
    pub version: Version,
    /// The header fields, in order, values sharing the head's bytes.
    pub headers: HeaderMap,
    /// How the body is delimited.
    pub body: Body,
    /// Whether the connection can carry another request after this response's body.
    pub keep_alive: bool,
    /// Which of the fields a proxy does not forward ([`crate::fields`]) `headers` holds.
    pub hop_by_hop: HopByHop,
}

/// The connection-specific fields of a response head, noted while it was parsed, so that a
/// proxy removes them without looking for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HopByHop {
    /// None of them.
    None,
    /// `Connection` fields naming nothing but `close` and `keep-alive` (what nearly every origin
    /// sends), and no other such field.
    Connection,
    /// Others: any of [`crate::fields::HOP_BY_HOP`] but `Connection`, a proxy authentication
    /// field, or a `Connection` field naming another field.
    Others,
}

/// Parses a response head from the start of `buf`. `Ok(None)`: not all of it has arrived yet
/// (read more; `buf` is untouched). `Ok(Some(head))`: the head's bytes have been taken off `buf`,
/// which now starts with the body. `head_request`: the request was HEAD (no body follows).
pub fn parse(buf: &mut BytesMut, head_request: bool) -> Result<Option<Head>, Error> {
    // Left uninitialised: httparse writes only the fields it found (a response has about ten of
    // the hundred allowed; initialising all would cost more than parsing them).
    let mut fields = [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut []);
    let len =
        match httparse::ParserConfig::default().parse_response_with_uninit_headers(&mut response, buf, &mut fields) {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD => return Err(Error::HeadTooLarge(MAX_HEAD)),
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(httparse::Error::TooManyHeaders) => return Err(Error::TooManyHeaders(MAX_HEADERS)),
            Err(e) => return Err(Error::Head(reason(e))),
        };
    if len > MAX_HEAD {
        return Err(Error::HeadTooLarge(MAX_HEAD));
    }
    let status = StatusCode::from_u16(response.code.unwrap_or(0)).map_err(|_| Error::Head("status code"))?;
    let version = if response.version == Some(0) {
        Version::HTTP_10
    } else {
        Version::HTTP_11
    };
    // Where each field lies in the head, so that its value can be a slice of the frozen bytes
    // (on the stack for the usual few fields, else in a vector).
    let base = buf.as_ptr() as usize;
    let count = response.headers.len();
    let mut few = [(0usize, 0usize, 0usize, 0usize); FEW_HEADERS];
    let mut many = Vec::new();
    let spans = if count <= FEW_HEADERS {
        &mut few[..count]
    } else {
        many.resize(count, (0, 0, 0, 0));
        &mut many[..]
    };
    for (span, field) in spans.iter_mut().zip(response.headers.iter()) {
        let name = field.name.as_ptr() as usize - base;
        let value = field.value.as_ptr() as usize - base;
        *span = (name, name + field.name.len(), value, value + field.value.len());
    }
    let head = buf.split_to(len).freeze();
    let mut headers = HeaderMap::with_capacity(count);
    // What the framing and the connection's reuse depend on, noted on the way (no lookups).
    let mut seen = Seen::default();
    for &(name_start, name_end, value_start, value_end) in spans.iter() {
        // Names are parsed (`HeaderName` interns the standard ones); values are slices of the head.
        let bytes = &head[name_start..name_end];
        let name = match common_name(bytes) {
            Some(name) => name,
            None => {
                let name = HeaderName::from_bytes(bytes).map_err(|_| Error::Field)?;
                // The common names that are hop-by-hop are noted by `Seen::note`.
                seen.others |= crate::fields::is_hop_by_hop(&name);
                name
            }
        };
        let value = HeaderValue::from_maybe_shared(head.slice(value_start..value_end)).map_err(|_| Error::Field)?;
        seen.note(&name, value.as_bytes());
        headers.append(name, value);
    }
    let (body, framing_keep_alive) = framing(status, head_request, &seen, &headers)?;
    let keep_alive = framing_keep_alive && persists(version, seen.close, seen.keep_alive);
    let hop_by_hop = if seen.others {
        HopByHop::Others
    } else if seen.connection {
        HopByHop::Connection
    } else {
        HopByHop::None
    };
    Ok(Some(Head {
        status,
        version,
        headers,
        body,
        keep_alive,
        hop_by_hop,
    }))
}

/// The fields nearly every origin response carries, spelled as origins send them (canonical
/// case, or all lower-case), found by length and first letter and one comparison of bytes: a
/// fraction of the work of `HeaderName::from_bytes` (which lower-cases the name into a scratch
/// buffer and matches it against every standard name), for the same `HeaderName`. `None`: any
/// other name or spelling (parsed the general way).
fn common_name(name: &[u8]) -> Option<HeaderName> {
    use http::header::{
        ACCEPT_RANGES, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_TYPE, DATE, ETAG, EXPIRES, LAST_MODIFIED, LOCATION,
        SERVER, SET_COOKIE, VARY,
    };
    let (canonical, lower, header): (&[u8], &[u8], HeaderName) = match (name.len(), name.first()? | 0x20) {
        (4, b'd') => (b"Date", b"date", DATE),
        (4, b'e') => (b"ETag", b"etag", ETAG),
        (4, b'v') => (b"Vary", b"vary", VARY),
        (6, b's') => (b"Server", b"server", SERVER),
        (7, b'e') => (b"Expires", b"expires", EXPIRES),
        (8, b'l') => (b"Location", b"location", LOCATION),
        (10, b'c') => (b"Connection", b"connection", CONNECTION),
        (10, b's') => (b"Set-Cookie", b"set-cookie", SET_COOKIE),
        (12, b'c') => (b"Content-Type", b"content-type", CONTENT_TYPE),
        (13, b'a') => (b"Accept-Ranges", b"accept-ranges", ACCEPT_RANGES),
        (13, b'c') => (b"Cache-Control", b"cache-control", CACHE_CONTROL),
        (13, b'l') => (b"Last-Modified", b"last-modified", LAST_MODIFIED),
        (14, b'c') => (b"Content-Length", b"content-length", CONTENT_LENGTH),
        (16, b'c') => (b"Content-Encoding", b"content-encoding", CONTENT_ENCODING),
        (17, b't') => (b"Transfer-Encoding", b"transfer-encoding", TRANSFER_ENCODING),
        _ => return None,
    };
    (name == canonical || name == lower).then_some(header)
}

/// What a response's fields said about its framing and its connection, noted as they are
/// parsed: the framing then looks nothing up in the common case.
#[derive(Debug, Default)]
struct Seen {
    /// A Transfer-Encoding field came.
    te: bool,
    /// What the Content-Length fields said, all of them together.
    length: Length,
    /// `Connection` named `close` / `keep-alive`.
    close: bool,
    keep_alive: bool,
    /// A `Connection` field came.
    connection: bool,
    /// Another field a proxy does not forward came, or `Connection` named another field.
    others: bool,
}

/// The Content-Length fields of a head: the lists of all of them must agree on one number.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Length {
    #[default]
    Absent,
    Is(u64),
    /// Not a number, or two numbers that differ: an error if the framing comes to it.
    Invalid,
}

impl Seen {
    fn note(&mut self, name: &HeaderName, value: &[u8]) {
        if *name == CONTENT_LENGTH {
            for part in value.split(|&b| b == b',') {
                self.length = match (self.length, parse_decimal(trim(part))) {
                    (Length::Absent, Some(n)) => Length::Is(n),
                    (Length::Is(l), Some(n)) if l == n => Length::Is(n),
                    _ => Length::Invalid,
                };
            }
        } else if *name == CONNECTION {
            self.connection = true;
            self.others |= connection_tokens(value, &mut self.close, &mut self.keep_alive);
        } else if *name == TRANSFER_ENCODING {
            self.te = true;
            self.others = true;
        }
    }
}

/// RFC 9112 §6.3: the body's delimitation, and whether it allows the connection to be reused.
/// `headers` are read only for a Transfer-Encoding (`seen.te`).
fn framing(status: StatusCode, head_request: bool, seen: &Seen, headers: &HeaderMap) -> Result<(Body, bool), Error> {
    if head_request
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        return Ok((Body::Empty, true));
    }
    if seen.te {
        // Chunked only when it is the final coding; anything else runs until close. A response
        // with both `Transfer-Encoding` and `Content-Length` may have been crafted to desync a
        // proxy: read it by `Transfer-Encoding` and close the connection after it (§6.3 item 3).
        let chunked = last_token(headers, TRANSFER_ENCODING).is_some_and(|t| t.eq_ignore_ascii_case(b"chunked"));
        let clean = seen.length == Length::Absent;
        return Ok(if chunked {
            (Body::Chunked, clean)
        } else {
            (Body::UntilClose, false)
        });
    }
    Ok(match seen.length {
        Length::Invalid => return Err(Error::ContentLength),
        Length::Is(0) => (Body::Empty, true),
        Length::Is(n) => (Body::Length(n), true),
        Length::Absent => (Body::UntilClose, false),
    })
}

/// HTTP/1.1 persists unless `Connection: close`; HTTP/1.0 only with `Connection: keep-alive`
/// (RFC 9112 §9.3, the same for requests and responses).
pub fn connection_persists(version: Version, headers: &HeaderMap) -> bool {
    let (mut close, mut keep_alive) = (false, false);
    for value in headers.get_all(CONNECTION) {
        connection_tokens(value.as_bytes(), &mut close, &mut keep_alive);
    }
    persists(version, close, keep_alive)
}

/// Notes whether the `Connection` field value `value` names `close` or `keep-alive`; true if it
/// names anything else too.
fn connection_tokens(value: &[u8], close: &mut bool, keep_alive: &mut bool) -> bool {
    // What nearly every origin sends, as it sends it: one comparison instead of the split,
    // the trim and the case-blind comparisons.
    match value {
        b"keep-alive" | b"Keep-Alive" => {
            *keep_alive = true;
            return false;
        }
        b"close" | b"Close" => {
            *close = true;
            return false;
        }
        _ => {}
    }
    read_tokens(value, close, keep_alive)
}

/// [`connection_tokens`] for any value: token by token, trimmed, compared case-blind.
fn read_tokens(value: &[u8], close: &mut bool, keep_alive: &mut bool) -> bool {
    let mut others = false;
    for token in value.split(|&b| b == b',') {
        let token = trim(token);
        if token.eq_ignore_ascii_case(b"close") {
            *close = true;
        } else if token.eq_ignore_ascii_case(b"keep-alive") {
            *keep_alive = true;
        } else {
            others |= !token.is_empty();
        }
    }
    others
}

fn persists(version: Version, close: bool, keep_alive: bool) -> bool {
    !close && (version == Version::HTTP_11 || keep_alive)
}

fn last_token(headers: &HeaderMap, name: HeaderName) -> Option<&[u8]> {
    let value = headers.get_all(name).iter().next_back()?;
    value.as_bytes().rsplit(|&b| b == b',').map(trim).next()
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

fn parse_decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    digits
        .iter()
        .try_fold(0u64, |n, &d| d.is_ascii_digit().then(|| n * 10 + u64::from(d - b'0')))
}

fn reason(e: httparse::Error) -> &'static str {
    match e {
        httparse::Error::HeaderName => "header name",
        httparse::Error::HeaderValue => "header value",
        httparse::Error::NewLine => "line ending",
        httparse::Error::Status => "status",
        httparse::Error::Token => "token",
        httparse::Error::TooManyHeaders => "too many headers",
        httparse::Error::Version => "version",
    }
}

/// The bytes of a frozen head, for tests and the fuzz target: `parse` on a copy of `bytes`.
pub fn parse_bytes(bytes: &[u8], head_request: bool) -> Result<Option<(Head, Bytes)>, Error> {
    let mut buf = BytesMut::from(bytes);
    Ok(parse(&mut buf, head_request)?.map(|h| (h, buf.freeze())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> (Head, Bytes) {
        parse_bytes(text.as_bytes(), false).unwrap().unwrap()
    }

    #[test]
    fn a_head_is_parsed_and_taken_off_the_buffer() {
        let (h, rest) = ok("HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Length: 5\r\nX-A: 1\r\nX-A: 2\r\n\r\nhello");
        assert_eq!(h.status, StatusCode::OK);
        assert_eq!(h.version, Version::HTTP_11);
        assert_eq!(h.body, Body::Length(5));
        assert!(h.keep_alive);
        assert_eq!(h.headers["server"], "nginx");
        assert_eq!(h.headers.get_all("x-a").iter().collect::<Vec<_>>(), ["1", "2"]);
        assert_eq!(&rest[..], b"hello");
    }

    #[test]
    fn the_fields_a_proxy_does_not_forward_are_noted() {
        let hop = |fields: &str| {
            ok(&format!("HTTP/1.1 200 OK\r\n{fields}Content-Length: 0\r\n\r\n"))
                .0
                .hop_by_hop
        };
        assert_eq!(hop("Server: x\r\n"), HopByHop::None);
        assert_eq!(hop("Connection: keep-alive\r\n"), HopByHop::Connection);
        assert_eq!(
            hop("connection: Keep-Alive\r\nConnection: close , \r\n"),
            HopByHop::Connection
        );
        assert_eq!(hop("Connection: keep-alive, x-private\r\n"), HopByHop::Others);
        assert_eq!(
            hop("Keep-Alive: timeout=5\r\nConnection: keep-alive\r\n"),
            HopByHop::Others
        );
        assert_eq!(hop("Upgrade: h2c\r\n"), HopByHop::Others);
        assert_eq!(hop("Proxy-Authenticate: Basic\r\n"), HopByHop::Others);
        assert_eq!(hop("TE: trailers\r\n"), HopByHop::Others);
        assert_eq!(hop("CONNECTION: keep-alive\r\n"), HopByHop::Others);
        let (h, _) = ok("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert_eq!(h.hop_by_hop, HopByHop::Others);
    }

    #[test]
    fn common_names_are_the_same_names_as_parsed_the_general_way() {
        let names = [
            "Date",
            "ETag",
            "Vary",
            "Server",
            "Expires",
            "Location",
            "Connection",
            "Set-Cookie",
            "Content-Type",
            "Accept-Ranges",
            "Cache-Control",
            "Last-Modified",
            "Content-Length",
            "Content-Encoding",
            "Transfer-Encoding",
        ];
        for name in names {
            for spelled in [name.to_string(), name.to_ascii_lowercase()] {
                let fast = common_name(spelled.as_bytes());
                assert_eq!(
                    fast,
                    Some(HeaderName::from_bytes(spelled.as_bytes()).unwrap()),
                    "{spelled}"
                );
            }
            // Other spellings take the general way (and come out the same there).
            assert_eq!(common_name(name.to_ascii_uppercase().as_bytes()), None, "{name}");
        }
        // Same length and first letter, another name; names of other lengths; odd bytes.
        for other in [
            "Data",
            "Etac",
            "Servet",
            "Content-Typo",
            "Connectivy",
            "X-Date",
            "",
            "D\u{e4}te",
            "date ",
        ] {
            assert_eq!(common_name(other.as_bytes()), None, "{other}");
        }
        let (h, _) = ok("HTTP/1.1 200 OK\r\ncOnTeNt-LeNgTh: 3\r\nDATE: x\r\nData: y\r\n\r\nabc");
        assert_eq!(h.body, Body::Length(3));
        assert_eq!(h.headers["date"], "x");
        assert_eq!(h.headers["data"], "y");
    }

    #[test]
    fn heads_with_more_fields_than_the_stack_holds_keep_every_value() {
        for n in [FEW_HEADERS, FEW_HEADERS + 1, MAX_HEADERS] {
            let fields: String = (0..n).map(|i| format!("X-{i}: value-{i}\r\n")).collect();
            let (h, rest) = ok(&format!("HTTP/1.1 200 OK\r\n{fields}\r\nbody"));
            assert_eq!(h.headers.len(), n);
            for i in 0..n {
                assert_eq!(h.headers[format!("x-{i}").as_str()], format!("value-{i}").as_str());
            }
            assert_eq!(&rest[..], b"body");
        }
    }

    #[test]
    fn partial_heads_wait_and_leave_the_buffer_alone() {
        let mut buf = BytesMut::from(&b"HTTP/1.1 200 OK\r\nContent-Len"[..]);
        assert!(parse(&mut buf, false).unwrap().is_none());
        assert_eq!(buf.len(), 28);
        let big = format!("HTTP/1.1 200 OK\r\nX: {}", "a".repeat(MAX_HEAD));
        assert_eq!(
            parse_bytes(big.as_bytes(), false).unwrap_err(),
            Error::HeadTooLarge(MAX_HEAD)
        );
        let many: String = (0..=MAX_HEADERS).map(|i| format!("X-{i}: 1\r\n")).collect();
        let text = format!("HTTP/1.1 200 OK\r\n{many}\r\n");
        assert_eq!(
            parse_bytes(text.as_bytes(), false).unwrap_err(),
            Error::TooManyHeaders(MAX_HEADERS)
        );
        assert!(matches!(
            parse_bytes(b"HTTP/1.1 2x0 OK\r\n\r\n", false),
            Err(Error::Head(_))
        ));
        assert!(matches!(
            parse_bytes(b"SSH-2.0-OpenSSH\r\n\r\n", false),
            Err(Error::Head(_))
        ));
    }

    #[test]
    fn framing_follows_rfc_9112() {
        let body = |t: &str| ok(t).0.body;
        assert_eq!(
            body("HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n"),
            Body::Empty
        );
        assert_eq!(body("HTTP/1.1 304 Not Modified\r\n\r\n"), Body::Empty);
        assert_eq!(body("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"), Body::Empty);
        assert_eq!(body("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), Body::Empty);
        assert_eq!(
            body("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
            Body::Chunked
        );
        assert_eq!(body("HTTP/1.1 200 OK\r\nContent-Length: 7, 7\r\n\r\n"), Body::Length(7));
        let (h, _) = ok("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n");
        assert_eq!((h.body, h.keep_alive), (Body::UntilClose, false));
        let (h, _) = ok("HTTP/1.1 200 OK\r\n\r\n");
        assert_eq!((h.body, h.keep_alive), (Body::UntilClose, false));
        // Both framings: read as chunked, never reuse the connection.
        let (h, _) = ok("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert_eq!((h.body, h.keep_alive), (Body::Chunked, false));
        for bad in ["7, 8", "-1", "", "1e3", "99999999999999999999"] {
            let text = format!("HTTP/1.1 200 OK\r\nContent-Length: {bad}\r\n\r\n");
            assert_eq!(
                parse_bytes(text.as_bytes(), false).unwrap_err(),
                Error::ContentLength,
                "{bad}"
            );
        }
        let (h, _) = parse_bytes(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", true)
            .unwrap()
            .unwrap();
        assert_eq!(h.body, Body::Empty);
    }

    #[test]
    fn every_content_length_field_counts_whatever_its_spelling() {
        let body = |t: &str| parse_bytes(t.as_bytes(), false).map(|h| h.unwrap().0.body);
        assert_eq!(
            body("HTTP/1.1 200 OK\r\nContent-Length: 4\r\nX: y\r\ncontent-length: 4\r\n\r\n"),
            Ok(Body::Length(4))
        );
        assert_eq!(
            body("HTTP/1.1 200 OK\r\nContent-Length: 4\r\nCONTENT-LENGTH: 5\r\n\r\n"),
            Err(Error::ContentLength)
        );
        assert_eq!(
            body("HTTP/1.1 200 OK\r\nCONTENT-length: 6\r\n\r\n"),
            Ok(Body::Length(6))
        );
        // Not read where the framing does not come to it: no body, or Transfer-Encoding first.
        assert_eq!(
            body("HTTP/1.1 204 No Content\r\nContent-Length: x\r\n\r\n"),
            Ok(Body::Empty)
        );
        let (h, _) = ok("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: x\r\n\r\n");
        assert_eq!((h.body, h.keep_alive), (Body::Chunked, false));
    }

    #[test]
    fn persistence_follows_version_and_connection() {
        assert!(
            !ok("HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Length: 1\r\n\r\n")
                .0
                .keep_alive
        );
        assert!(!ok("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n").0.keep_alive);
        let (h, _) = ok("HTTP/1.0 200 OK\r\nConnection: foo, keep-alive\r\nContent-Length: 1\r\n\r\n");
        assert!(h.keep_alive);
        assert_eq!(h.version, Version::HTTP_10);
        // Every Connection field counts, whatever its spelling.
        let (h, _) = ok("HTTP/1.1 200 OK\r\nConnection: foo\r\nCONNECTION:  close \r\nContent-Length: 1\r\n\r\n");
        assert!(!h.keep_alive);
        let (h, _) = ok("HTTP/1.0 200 OK\r\nconnection: Keep-Alive\r\nContent-Length: 1\r\n\r\n");
        assert!(h.keep_alive);
    }

    /// The exact spellings taken at once note what the token-by-token reading notes.
    #[test]
    fn connection_values_read_at_once_agree_with_the_token_reading() {
        for value in [
            &b"keep-alive"[..],
            b"Keep-Alive",
            b"close",
            b"Close",
            b"KEEP-ALIVE",
            b"CLOSE",
            b" keep-alive",
            b"close ",
            b"keep-alive, close",
            b"keep-alive,x",
            b"upgrade",
            b"",
            b",",
        ] {
            let read = |f: fn(&[u8], &mut bool, &mut bool) -> bool| {
                let (mut close, mut keep_alive) = (false, false);
                let others = f(value, &mut close, &mut keep_alive);
                (close, keep_alive, others)
            };
            assert_eq!(
                read(connection_tokens),
                read(read_tokens),
                "{:?}",
                String::from_utf8_lossy(value)
            );
        }
    }
}
