//! The request as the origin reads it: the head written straight into the connection's write
//! buffer (no intermediate string per field), and the chunk framing of a streamed upload.

use bytes::{BufMut, BytesMut};
use http::header::{HeaderMap, CONTENT_LENGTH, HOST, TRANSFER_ENCODING};
use http::Method;

/// How the request body is framed on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// No body.
    None,
    /// Exactly this many bytes (`Content-Length`).
    Length(u64),
    /// A body of unknown length: `Transfer-Encoding: chunked`, trailers allowed.
    Chunked,
}

/// Methods whose requests announce an empty body with `Content-Length: 0` (as curl and hyper
/// do: an origin may otherwise wait for a body, or answer 411).
fn announces_empty_body(method: &Method) -> bool {
    matches!(*method, Method::POST | Method::PUT | Method::PATCH)
}

/// What [`encode_head`] writes: read in place, so every attempt of a request (a retry, another
/// connection) encodes the same prepared fields without copying them.
#[derive(Debug, Clone, Copy)]
pub struct RequestHead<'a> {
    /// The method.
    pub method: &'a Method,
    /// The origin-form target (`/path?query`), checked by the caller.
    pub target: &'a str,
    /// The fields, framing fields excepted (the framing written is the body's).
    pub headers: &'a HeaderMap,
    /// Written as `host` when `headers` has no `Host` (the origin server's authority).
    pub default_host: Option<&'a str>,
}

/// Writes `METHOD target HTTP/1.1`, the head's fields (minus any framing fields: the framing
/// written is `body`'s) and the blank line into `out`. The caller has checked `target` (no
/// byte outside visible ASCII) and `http` guarantees names and values free of CR and LF, so
/// nothing here can split the head; `default_host` is an authority the caller parsed.
pub fn encode_head(head: &RequestHead<'_>, body: Body, out: &mut BytesMut) {
    let RequestHead {
        method,
        target,
        headers,
        default_host,
    } = *head;
    let estimate = 32 + target.len() + headers.len() * 32;
    out.reserve(estimate);
    out.put_slice(method.as_str().as_bytes());
    out.put_u8(b' ');
    out.put_slice(target.as_bytes());
    out.put_slice(b" HTTP/1.1\r\n");
    if let Some(host) = default_host.filter(|_| !headers.contains_key(HOST)) {
        out.put_slice(b"host: ");
        out.put_slice(host.as_bytes());
        out.put_slice(b"\r\n");
    }
    // Whether the head has a Content-Length, seen on the way (not a lookup of its own).
    let mut has_length = false;
    for (name, value) in headers {
        if name == CONTENT_LENGTH || name == TRANSFER_ENCODING {
            has_length |= name == CONTENT_LENGTH;
            continue;
        }
        out.put_slice(name.as_str().as_bytes());
        out.put_slice(b": ");
        out.put_slice(value.as_bytes());
        out.put_slice(b"\r\n");
    }
    match body {
        Body::None if announces_empty_body(method) || has_length => {
            out.put_slice(b"content-length: 0\r\n");
        }
        Body::None => {}
        Body::Length(n) => {
            out.put_slice(b"content-length: ");
            put_decimal(out, n);
            out.put_slice(b"\r\n");
        }
        Body::Chunked => out.put_slice(b"transfer-encoding: chunked\r\n"),
    }
    out.put_slice(b"\r\n");
}

/// The size line of a chunk of `len` bytes (`len` > 0; the data and [`CHUNK_END`] follow).
pub fn chunk_header(len: usize, out: &mut BytesMut) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0u8; 16];
    let mut i = digits.len();
    let mut n = len;
    loop {
        i -= 1;
        digits[i] = HEX[n & 0xf];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    out.put_slice(&digits[i..]);
    out.put_slice(b"\r\n");
}

/// What ends each chunk's data.
pub const CHUNK_END: &[u8] = b"\r\n";

/// The last chunk, the trailer fields if any, and the blank line that ends the message.
pub fn last_chunk(trailers: Option<&HeaderMap>, out: &mut BytesMut) {
    out.put_slice(b"0\r\n");
    for (name, value) in trailers.into_iter().flatten() {
        out.put_slice(name.as_str().as_bytes());
        out.put_slice(b": ");
        out.put_slice(value.as_bytes());
        out.put_slice(b"\r\n");
    }
    out.put_slice(b"\r\n");
}

fn put_decimal(out: &mut BytesMut, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.put_slice(&digits[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn head(method: Method, headers: &[(&'static str, &'static str)], body: Body) -> String {
        let mut map = HeaderMap::new();
        for (k, v) in headers {
            map.append(*k, HeaderValue::from_static(v));
        }
        let mut out = BytesMut::new();
        let head = RequestHead {
            method: &method,
            target: "/a?b=1",
            headers: &map,
            default_host: Some("origin:8080"),
        };
        encode_head(&head, body, &mut out);
        String::from_utf8(out.to_vec()).unwrap()
    }

    #[test]
    fn heads_carry_the_fields_and_the_framing_of_the_body() {
        assert_eq!(
            head(Method::GET, &[("host", "h"), ("x-a", "1"), ("x-a", "2")], Body::None),
            "GET /a?b=1 HTTP/1.1\r\nhost: h\r\nx-a: 1\r\nx-a: 2\r\n\r\n"
        );
        // Without the client's `Host`, the origin server's authority.
        assert_eq!(
            head(Method::GET, &[("x-a", "1")], Body::None),
            "GET /a?b=1 HTTP/1.1\r\nhost: origin:8080\r\nx-a: 1\r\n\r\n"
        );
        // The client's framing fields never pass: the framing is the one written.
        assert_eq!(
            head(
                Method::POST,
                &[("content-length", "99"), ("transfer-encoding", "chunked")],
                Body::Length(1234567)
            ),
            "POST /a?b=1 HTTP/1.1\r\nhost: origin:8080\r\ncontent-length: 1234567\r\n\r\n"
        );
        assert_eq!(
            head(Method::PUT, &[], Body::Chunked),
            "PUT /a?b=1 HTTP/1.1\r\nhost: origin:8080\r\ntransfer-encoding: chunked\r\n\r\n"
        );
        assert_eq!(
            head(Method::POST, &[], Body::None),
            "POST /a?b=1 HTTP/1.1\r\nhost: origin:8080\r\ncontent-length: 0\r\n\r\n"
        );
        assert_eq!(
            head(Method::DELETE, &[("content-length", "0")], Body::None),
            "DELETE /a?b=1 HTTP/1.1\r\nhost: origin:8080\r\ncontent-length: 0\r\n\r\n"
        );
        assert_eq!(
            head(Method::GET, &[], Body::Length(0)),
            "GET /a?b=1 HTTP/1.1\r\nhost: origin:8080\r\ncontent-length: 0\r\n\r\n"
        );
    }

    #[test]
    fn chunks_and_trailers_are_framed() {
        let mut out = BytesMut::new();
        for len in [1, 15, 16, 255, 4096, usize::MAX] {
            chunk_header(len, &mut out);
        }
        assert_eq!(
            &out[..],
            format!("1\r\nf\r\n10\r\nff\r\n1000\r\n{:x}\r\n", usize::MAX).as_bytes()
        );
        out.clear();
        last_chunk(None, &mut out);
        assert_eq!(&out[..], b"0\r\n\r\n");
        out.clear();
        let mut t = HeaderMap::new();
        t.insert("grpc-status", HeaderValue::from_static("0"));
        last_chunk(Some(&t), &mut out);
        assert_eq!(&out[..], b"0\r\ngrpc-status: 0\r\n\r\n");
    }
}
