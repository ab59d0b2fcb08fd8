//! The chunked transfer coding of a response body (RFC 9112 §7.1), decoded incrementally from a
//! read buffer: data chunks come out as slices of the buffer (no copy), then the trailer fields,
//! then the end. Chunk extensions are skipped; a size line, an extension or a trailer section
//! past its limit is an error, so a hostile origin cannot make the gateway buffer without bound.

use crate::Error;
use bytes::{Buf, Bytes, BytesMut};
use http::header::{HeaderMap, HeaderName, HeaderValue};

/// The longest chunk-size line, extensions included (nginx allows no extensions worth more).
pub const MAX_SIZE_LINE: usize = 4096;
/// The largest trailer section.
pub const MAX_TRAILERS: usize = 16 * 1024;

/// What [`Decoder::decode`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Chunk {
    /// Body bytes.
    Data(Bytes),
    /// The trailer fields (only when there are some); [`Chunk::End`] follows.
    Trailers(HeaderMap),
    /// The body has ended; the buffer holds what follows it.
    End,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Size,
    Data(u64),
    DataEnd,
    Trailers,
    Done,
}

/// A chunked body being decoded.
#[derive(Debug)]
pub struct Decoder {
    state: State,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Decoder {
    /// A decoder at the start of a body.
    pub fn new() -> Self {
        Self { state: State::Size }
    }

    /// Whether the body has ended.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Decodes from the front of `buf`. `Ok(None)`: more bytes are needed (what was consumed so
    /// far is remembered; call again after reading more). At most `max` bytes of data per chunk.
    pub fn decode(&mut self, buf: &mut BytesMut, max: usize) -> Result<Option<Chunk>, Error> {
        loop {
            match self.state {
                State::Size => {
                    let Some(line_end) = find_crlf(buf, MAX_SIZE_LINE)? else {
                        return Ok(None);
                    };
                    let size = chunk_size(&buf[..line_end])?;
                    buf.advance(line_end + 2);
                    self.state = if size == 0 { State::Trailers } else { State::Data(size) };
                }
                State::Data(left) => {
                    if buf.is_empty() {
                        return Ok(None);
                    }
                    let n = usize::try_from(left)
                        .unwrap_or(usize::MAX)
                        .min(buf.len())
                        .min(max.max(1));
                    let data = buf.split_to(n).freeze();
                    let left = left - n as u64;
                    self.state = if left == 0 { State::DataEnd } else { State::Data(left) };
                    return Ok(Some(Chunk::Data(data)));
                }
                State::DataEnd => {
                    if buf.len() < 2 {
                        return Ok(None);
                    }
                    if &buf[..2] != b"\r\n" {
                        return Err(Error::ChunkEnd);
                    }
                    buf.advance(2);
                    self.state = State::Size;
                }
                State::Trailers => {
                    if buf.len() < 2 {
                        return Ok(None);
                    }
                    if &buf[..2] == b"\r\n" {
                        buf.advance(2);
                        self.state = State::Done;
                        return Ok(Some(Chunk::End));
                    }
                    let Some(fields) = trailers(buf)? else {
                        return Ok(None);
                    };
                    // The blank line was consumed with the fields.
                    self.state = State::Done;
                    return Ok(Some(if fields.is_empty() {
                        Chunk::End
                    } else {
                        Chunk::Trailers(fields)
                    }));
                }
                State::Done => return Ok(Some(Chunk::End)),
            }
        }
    }
}

/// The offset of the first CRLF in `buf`, `None` when it has not arrived within `limit` bytes
/// yet, an error when `limit` bytes came without one or a bare LF came first.
fn find_crlf(buf: &[u8], limit: usize) -> Result<Option<usize>, Error> {
    let window = &buf[..buf.len().min(limit)];
    match window.iter().position(|&b| b == b'\n') {
        Some(0) => Err(Error::ChunkSize),
        Some(i) if window[i - 1] == b'\r' => Ok(Some(i - 1)),
        Some(_) => Err(Error::ChunkSize),
        None if buf.len() >= limit => Err(Error::ChunkSize),
        None => Ok(None),
    }
}

/// `1*HEXDIG [ BWS ";" ext ]`: the size; the extensions are skipped.
fn chunk_size(line: &[u8]) -> Result<u64, Error> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 || digits > 16 {
        return Err(Error::ChunkSize);
    }
    let rest = &line[digits..];
    let rest_ok = rest.is_empty() || {
        let after_ws = rest.iter().skip_while(|&&b| b == b' ' || b == b'\t').copied();
        matches!(after_ws.clone().next(), Some(b';')) && after_ws.into_iter().all(|b| b != b'\r')
    };
    if !rest_ok {
        return Err(Error::ChunkSize);
    }
    let mut size = 0u64;
    for &d in &line[..digits] {
        let v = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            _ => d - b'A' + 10,
        };
        size = size.checked_mul(16).ok_or(Error::ChunkSize)? | u64::from(v);
    }
    Ok(size)
}

/// The trailer section through its blank line, parsed and taken off `buf`; `None` until all of
/// it has arrived.
fn trailers(buf: &mut BytesMut) -> Result<Option<HeaderMap>, Error> {
    let window = &buf[..buf.len().min(MAX_TRAILERS)];
    let Some(end) = window.windows(4).position(|w| w == b"\r\n\r\n") else {
        return if buf.len() >= MAX_TRAILERS {
            Err(Error::Trailers)
        } else {
            Ok(None)
        };
    };
    let section = buf.split_to(end + 4).freeze();
    let mut fields = [httparse::EMPTY_HEADER; 32];
    let parsed = match httparse::parse_headers(&section, &mut fields) {
        Ok(httparse::Status::Complete((_, parsed))) => parsed,
        _ => return Err(Error::Trailers),
    };
    let mut map = HeaderMap::with_capacity(parsed.len());
    for field in parsed {
        let name = HeaderName::from_bytes(field.name.as_bytes()).map_err(|_| Error::Trailers)?;
        let value = HeaderValue::from_bytes(field.value).map_err(|_| Error::Trailers)?;
        map.append(name, value);
    }
    Ok(Some(map))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The data, the trailers, and what followed the body.
    type Decoded = (Vec<u8>, Option<HeaderMap>, Vec<u8>);

    /// Decodes `wire` fed in pieces of `step` bytes.
    fn run(wire: &[u8], step: usize) -> Result<Decoded, Error> {
        let mut d = Decoder::new();
        let mut buf = BytesMut::new();
        let mut data = Vec::new();
        let mut trailers = None;
        let mut fed = 0;
        loop {
            match d.decode(&mut buf, 7)? {
                Some(Chunk::Data(b)) => data.extend_from_slice(&b),
                Some(Chunk::Trailers(t)) => trailers = Some(t),
                Some(Chunk::End) => return Ok((data, trailers, buf.to_vec())),
                None if fed >= wire.len() => return Err(Error::ChunkEnd),
                None => {
                    let n = step.min(wire.len() - fed);
                    buf.extend_from_slice(&wire[fed..fed + n]);
                    fed += n;
                }
            }
        }
    }

    #[test]
    fn chunks_trailers_and_what_follows_in_any_split() {
        let wire = b"5;name=v\r\nhello\r\n10\r\n0123456789abcdef\r\n0\r\ngrpc-status: 0\r\nx-b: 2\r\n\r\nNEXT";
        for step in 1..wire.len() {
            let (data, trailers, rest) = run(wire, step).unwrap();
            assert_eq!(data, b"hello0123456789abcdef");
            let t = trailers.unwrap();
            assert_eq!(t["grpc-status"], "0");
            assert_eq!(t["x-b"], "2");
            assert!(rest.starts_with(b"N") || step < wire.len());
        }
        let (data, trailers, rest) = run(b"3\r\nabc\r\n0\r\n\r\nX", 64).unwrap();
        assert_eq!(
            (data.as_slice(), trailers, rest.as_slice()),
            (&b"abc"[..], None, &b"X"[..])
        );
    }

    #[test]
    fn malformed_framing_is_an_error() {
        for bad in [
            &b"x\r\n"[..],
            b"\r\n",
            b"5\nhello\r\n",
            b"5 x\r\nhello\r\n0\r\n\r\n",
            b"11111111111111111\r\n",
            b"3\r\nabcXY0\r\n\r\n",
            b"0\r\nbad field\r\n\r\n",
        ] {
            assert!(run(bad, 64).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        let long = format!("5;{}\r\n", "e".repeat(MAX_SIZE_LINE));
        assert_eq!(run(long.as_bytes(), 64).unwrap_err(), Error::ChunkSize);
        let big_trailers = format!("0\r\nx: {}\r\n\r\n", "v".repeat(MAX_TRAILERS));
        assert_eq!(run(big_trailers.as_bytes(), 512).unwrap_err(), Error::Trailers);
        // The largest size that fits in 64 bits is accepted as a size.
        assert_eq!(chunk_size(b"ffffffffffffffff").unwrap(), u64::MAX);
        assert_eq!(chunk_size(b"A ; x=\"y\"").unwrap(), 10);
    }
}
