//! The smallest HTTP/1.1 response reader that is still correct: status line, `Content-Length`,
//! `Transfer-Encoding: chunked`, close-delimited bodies, `Connection: close`, interim 1xx.
//! No allocation per response: it only looks at the bytes already received.

/// What the bytes received so far hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// Not a complete response yet.
    Incomplete,
    /// An interim (1xx) response of `len` bytes to skip.
    Interim { len: usize },
    /// A complete response of `len` bytes.
    Done {
        /// Bytes of head and body.
        len: usize,
        /// Status code.
        status: u16,
        /// The server will close the connection after it.
        close: bool,
    },
}

/// A response that is not HTTP/1.1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpError(pub &'static str);

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for HttpError {}

const MAX_HEAD: usize = 64 * 1024;

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn parse_usize(text: &[u8], radix: u32) -> Option<usize> {
    let text = std::str::from_utf8(text).ok()?.trim();
    if text.is_empty() {
        return None;
    }
    usize::from_str_radix(text, radix).ok()
}

/// Parses the response at the start of `buf`; `eof` says the peer has closed (which completes a
/// close-delimited body).
pub fn parse_response(buf: &[u8], eof: bool) -> Result<Parsed, HttpError> {
    let Some(head_end) = find(buf, b"\r\n\r\n") else {
        if buf.len() > MAX_HEAD {
            return Err(HttpError("response head too large"));
        }
        if eof {
            return Err(HttpError("connection closed before the response head"));
        }
        if buf.len() >= 5 && !buf.starts_with(b"HTTP/") {
            return Err(HttpError("not an HTTP/1.x response"));
        }
        return Ok(Parsed::Incomplete);
    };
    let head = &buf[..head_end];
    let body_start = head_end + 4;
    let mut lines = head.split(|&b| b == b'\n').map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let status_line = lines.next().unwrap_or_default();
    if !status_line.starts_with(b"HTTP/1.") || status_line.len() < 12 || status_line[8] != b' ' {
        return Err(HttpError("bad status line"));
    }
    let http10 = status_line[7] == b'0';
    let status = std::str::from_utf8(&status_line[9..12])
        .ok()
        .and_then(|s| s.parse::<u16>().ok())
        .filter(|s| (100..1000).contains(s))
        .ok_or(HttpError("bad status code"))?;
    if (100..200).contains(&status) && status != 101 {
        return Ok(Parsed::Interim { len: body_start });
    }
    let mut content_length = None;
    let mut chunked = false;
    let mut close = http10;
    for line in lines {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            return Err(HttpError("bad header line"));
        };
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        if name.eq_ignore_ascii_case(b"content-length") {
            content_length = Some(parse_usize(value, 10).ok_or(HttpError("bad Content-Length"))?);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            chunked = value
                .split(|&b| b == b',')
                .any(|v| v.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if name.eq_ignore_ascii_case(b"connection") {
            for token in value.split(|&b| b == b',').map(|v| v.trim_ascii()) {
                if token.eq_ignore_ascii_case(b"close") {
                    close = true;
                } else if token.eq_ignore_ascii_case(b"keep-alive") && http10 {
                    close = false;
                }
            }
        }
    }
    let done = |len: usize| Ok(Parsed::Done { len, status, close });
    if status == 204 || status == 304 {
        return done(body_start);
    }
    if chunked {
        return match chunked_len(&buf[body_start..])? {
            Some(n) => done(body_start + n),
            None if eof => Err(HttpError("connection closed inside a chunked body")),
            None => Ok(Parsed::Incomplete),
        };
    }
    match content_length {
        Some(n) if buf.len() >= body_start + n => done(body_start + n),
        Some(_) if eof => Err(HttpError("connection closed inside the body")),
        Some(_) => Ok(Parsed::Incomplete),
        None if eof => Ok(Parsed::Done {
            len: buf.len(),
            status,
            close: true,
        }),
        None => Ok(Parsed::Incomplete),
    }
}

/// Length of a complete chunked body (through the final CRLF), or `None` if more is needed.
fn chunked_len(body: &[u8]) -> Result<Option<usize>, HttpError> {
    let mut at = 0;
    loop {
        let Some(eol) = find(&body[at..], b"\r\n") else {
            return Ok(None);
        };
        let size_text = &body[at..at + eol];
        let size_text = size_text.split(|&b| b == b';').next().unwrap_or_default();
        let size = parse_usize(size_text, 16).ok_or(HttpError("bad chunk size"))?;
        at += eol + 2;
        if size == 0 {
            // Trailers, then an empty line.
            loop {
                let Some(eol) = find(&body[at..], b"\r\n") else {
                    return Ok(None);
                };
                at += eol + 2;
                if eol == 0 {
                    return Ok(Some(at));
                }
            }
        }
        if body.len() < at + size + 2 {
            return Ok(None);
        }
        if &body[at + size..at + size + 2] != b"\r\n" {
            return Err(HttpError("chunk not followed by CRLF"));
        }
        at += size + 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HELLO: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 13\r\n\r\nHello, world!";

    #[test]
    fn content_length_body_complete_only_when_all_bytes_arrived() {
        for cut in 0..HELLO.len() {
            assert_eq!(
                parse_response(&HELLO[..cut], false),
                Ok(Parsed::Incomplete),
                "cut {cut}"
            );
        }
        assert_eq!(
            parse_response(HELLO, false),
            Ok(Parsed::Done {
                len: HELLO.len(),
                status: 200,
                close: false
            })
        );
        let mut two = HELLO.to_vec();
        two.extend_from_slice(HELLO);
        assert_eq!(
            parse_response(&two, false),
            Ok(Parsed::Done {
                len: HELLO.len(),
                status: 200,
                close: false
            })
        );
        assert!(parse_response(&HELLO[..HELLO.len() - 1], true).is_err());
    }

    #[test]
    fn connection_close_and_http10() {
        let r = b"HTTP/1.1 503 Busy\r\nConnection: Close\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(
            parse_response(r, false),
            Ok(Parsed::Done {
                len: r.len(),
                status: 503,
                close: true
            })
        );
        let r = b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok";
        assert!(matches!(parse_response(r, false), Ok(Parsed::Done { close: true, .. })));
        let r = b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok";
        assert!(matches!(
            parse_response(r, false),
            Ok(Parsed::Done { close: false, .. })
        ));
    }

    #[test]
    fn chunked_bodies() {
        let r = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nHello\r\n8;x=y\r\n, world!\r\n0\r\nX-Trailer: 1\r\n\r\n";
        for cut in 0..r.len() {
            assert_eq!(parse_response(&r[..cut], false), Ok(Parsed::Incomplete), "cut {cut}");
        }
        assert_eq!(
            parse_response(r, false),
            Ok(Parsed::Done {
                len: r.len(),
                status: 200,
                close: false
            })
        );
        let bad = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
        assert!(parse_response(bad, false).is_err());
    }

    #[test]
    fn close_delimited_no_body_and_interim() {
        let r = b"HTTP/1.1 200 OK\r\n\r\nabc";
        assert_eq!(parse_response(r, false), Ok(Parsed::Incomplete));
        assert_eq!(
            parse_response(r, true),
            Ok(Parsed::Done {
                len: r.len(),
                status: 200,
                close: true
            })
        );
        let r = b"HTTP/1.1 204 No Content\r\n\r\n";
        assert!(matches!(parse_response(r, false), Ok(Parsed::Done { status: 204, .. })));
        let r = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n";
        assert_eq!(parse_response(r, false), Ok(Parsed::Interim { len: 25 }));
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(parse_response(b"SSH-2.0-OpenSSH\r\n", false).is_err());
        assert!(parse_response(b"HTTP/1.1 2x0 OK\r\n\r\n", false).is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n", false).is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n", false).is_err());
        assert!(parse_response(b"HTTP/1.1 200", true).is_err());
    }
}
