//! The key-server wire format, without I/O (docs/KEYLESS-PROTOCOL.md is its specification).
//!
//! A frame is an 8-byte header (version, reserved byte, body length, request id) and a body of
//! typed items (tag, length, value). Decoding never panics and never reads past the buffer:
//! a partial frame is `Ok(None)` (read more), a frame whose header is bad is a fatal
//! [`FrameError`] (close the connection), a frame whose body is bad is a non-fatal one that names
//! the request id and how many bytes to skip (answer `malformed`, keep serving).

use std::fmt;
use tlsgate_error::{Classify, Side};

/// The only protocol version.
pub const VERSION: u8 = 1;
/// Header size in bytes.
pub const HEADER_LEN: usize = 8;
/// Largest body accepted or produced (a TLS signing input or an RSA-4096 signature is far smaller).
pub const MAX_BODY: usize = 16 * 1024;
/// Length of a key id (SHA-256 of the SubjectPublicKeyInfo DER).
pub const KEY_ID_LEN: usize = 32;

/// Item tags.
mod tag {
    pub const OPCODE: u8 = 0x01;
    pub const KEY_ID: u8 = 0x02;
    pub const SIGALG: u8 = 0x03;
    pub const PAYLOAD: u8 = 0x04;
    pub const ERROR: u8 = 0x05;
}

/// Opcodes.
mod op {
    pub const SIGN: u8 = 0x01;
    pub const PING: u8 = 0x02;
    pub const DELEGATE: u8 = 0x03;
    pub const NEW_KEY: u8 = 0x04;
    pub const SIGNATURE: u8 = 0xF0;
    pub const PONG: u8 = 0xF1;
    pub const CREATED: u8 = 0xF2;
    pub const ERROR: u8 = 0xFF;
}

/// A key id: SHA-256 of the key's SubjectPublicKeyInfo (DER).
pub type KeyId = [u8; KEY_ID_LEN];

/// What the gateway asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Sign `payload` (the raw TLS signing input) with the key `key_id`, as TLS signature
    /// scheme `algorithm` prescribes (the key server hashes).
    Sign {
        /// Which key.
        key_id: KeyId,
        /// TLS SignatureScheme code point, e.g. 0x0403 = ecdsa_secp256r1_sha256.
        algorithm: u16,
        /// The message to sign.
        payload: Vec<u8>,
    },
    /// Liveness check; the payload is echoed.
    Ping(Vec<u8>),
    /// Issue a delegated credential (RFC 9345): sign `payload`, which must be the RFC's
    /// credential signing input for a certificate of the key `key_id` that carries the
    /// DelegationUsage extension (docs/KEYLESS-PROTOCOL.md, "Delegated credentials").
    Delegate {
        /// Which key (the certificate's).
        key_id: KeyId,
        /// The scheme the certificate's key signs the credential with.
        algorithm: u16,
        /// The credential signing input.
        payload: Vec<u8>,
    },
    /// Create a new private key on the key server and answer a CSR for it (a keyless
    /// certificate obtained through ACME): the payload names the key type and the DNS names
    /// (`crate::new_key`). The key never leaves the key server.
    NewKey(Vec<u8>),
}

/// What the key server answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// The signature, in TLS wire encoding (DER for ECDSA, raw for RSA and Ed25519).
    Signature(Vec<u8>),
    /// Answer to a ping, echoing its payload.
    Pong(Vec<u8>),
    /// Answer to a new-key request: the CSR (DER) signed by the new key.
    Created(Vec<u8>),
    /// The request failed.
    Error(ErrorCode),
}

/// Typed errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// No key with this id.
    UnknownKey,
    /// The key cannot sign with this algorithm.
    UnsupportedAlgorithm,
    /// The request could not be decoded.
    Malformed,
    /// The signing queue is full: try another key server.
    Overloaded,
    /// The signer failed.
    Internal,
    /// Refused by policy: the input is not a TLS signing input, or this client may not use the
    /// key. Every key server of a pool would refuse it too: not retried.
    Refused,
    /// A code this implementation does not know (a newer peer).
    Other(u8),
}

impl ErrorCode {
    /// Wire value.
    pub fn to_u8(self) -> u8 {
        match self {
            ErrorCode::UnknownKey => 1,
            ErrorCode::UnsupportedAlgorithm => 2,
            ErrorCode::Malformed => 3,
            ErrorCode::Overloaded => 4,
            ErrorCode::Internal => 5,
            ErrorCode::Refused => 6,
            ErrorCode::Other(v) => v,
        }
    }

    /// From the wire value.
    pub fn from_u8(v: u8) -> Self {
        match v {
            1 => ErrorCode::UnknownKey,
            2 => ErrorCode::UnsupportedAlgorithm,
            3 => ErrorCode::Malformed,
            4 => ErrorCode::Overloaded,
            5 => ErrorCode::Internal,
            6 => ErrorCode::Refused,
            v => ErrorCode::Other(v),
        }
    }

    /// Label for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::UnknownKey => "unknown_key",
            ErrorCode::UnsupportedAlgorithm => "unsupported_algorithm",
            ErrorCode::Malformed => "malformed",
            ErrorCode::Overloaded => "overloaded",
            ErrorCode::Internal => "internal",
            ErrorCode::Refused => "refused",
            ErrorCode::Other(_) => "other",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a frame could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameErrorKind {
    /// The version byte is not [`VERSION`].
    BadVersion(u8),
    /// The reserved header byte is not zero.
    BadReserved,
    /// The body length exceeds [`MAX_BODY`].
    Oversized(usize),
    /// The body is not a valid message (missing, duplicate or ill-sized item, unknown opcode):
    /// a fixed description of what is wrong.
    Malformed(&'static str),
}

impl FrameErrorKind {
    /// A short, stable label: `bad_version`, `oversized` or `malformed` (a bad reserved byte is
    /// malformed). The key server's `errors_total{kind}` metric uses it.
    pub fn as_str(self) -> &'static str {
        match self {
            FrameErrorKind::BadVersion(_) => "bad_version",
            FrameErrorKind::Oversized(_) => "oversized",
            FrameErrorKind::BadReserved | FrameErrorKind::Malformed(_) => "malformed",
        }
    }
}

impl fmt::Display for FrameErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            FrameErrorKind::BadVersion(v) => write!(f, "unsupported version {v}"),
            FrameErrorKind::BadReserved => f.write_str("reserved header byte is not zero"),
            FrameErrorKind::Oversized(n) => write!(f, "body of {n} bytes exceeds {MAX_BODY}"),
            FrameErrorKind::Malformed(why) => write!(f, "malformed: {why}"),
        }
    }
}

/// A frame that could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("frame {id}: {kind}")]
pub struct FrameError {
    /// Request id from the header (answer with it).
    pub id: u32,
    /// What was wrong.
    pub kind: FrameErrorKind,
    /// Bytes to skip to reach the next frame; `None` when framing cannot be trusted any more and
    /// the connection must be closed.
    pub skip: Option<usize>,
}

/// The peer that sent the frame is at fault (on the gateway, a key server's bad frame is
/// reported through `ConnError`, which names the key server as upstream). Never retry-safe:
/// the same bytes decode the same way.
impl Classify for FrameError {
    fn side(&self) -> Side {
        Side::Downstream
    }
    fn kind(&self) -> &'static str {
        self.kind.as_str()
    }
}

/// A message that cannot be encoded: its body (of this many bytes) exceeds [`MAX_BODY`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("message body of {0} bytes exceeds {MAX_BODY}")]
pub struct TooLarge(pub usize);

/// This side built the message: an internal failure (a caller passed a payload too large).
impl Classify for TooLarge {
    fn side(&self) -> Side {
        Side::Internal
    }
    fn kind(&self) -> &'static str {
        "frame_too_large"
    }
}

/// A decoded frame: request id, message, bytes consumed from the buffer.
pub type Decoded<T> = Option<(u32, T, usize)>;

/// The header fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Protocol version.
    pub version: u8,
    /// Body length.
    pub length: usize,
    /// Request id.
    pub id: u32,
}

/// Reads a header; `Ok(None)` when fewer than [`HEADER_LEN`] bytes are there.
pub fn decode_header(buf: &[u8]) -> Result<Option<Header>, FrameError> {
    let Some(h) = buf.get(..HEADER_LEN) else {
        return Ok(None);
    };
    let id = u32::from_be_bytes([h[4], h[5], h[6], h[7]]);
    let length = usize::from(u16::from_be_bytes([h[2], h[3]]));
    let fatal = |kind| FrameError { id, kind, skip: None };
    if h[0] != VERSION {
        return Err(fatal(FrameErrorKind::BadVersion(h[0])));
    }
    if h[1] != 0 {
        return Err(fatal(FrameErrorKind::BadReserved));
    }
    if length > MAX_BODY {
        return Err(fatal(FrameErrorKind::Oversized(length)));
    }
    Ok(Some(Header {
        version: h[0],
        length,
        id,
    }))
}

/// The items of a body, each tag at most once.
#[derive(Default)]
struct Items<'a> {
    opcode: Option<&'a [u8]>,
    key_id: Option<&'a [u8]>,
    sigalg: Option<&'a [u8]>,
    payload: Option<&'a [u8]>,
    error: Option<&'a [u8]>,
}

fn parse_items(mut body: &[u8]) -> Result<Items<'_>, &'static str> {
    let mut items = Items::default();
    while !body.is_empty() {
        let (&t, rest) = body.split_first().ok_or("empty item")?;
        let len_bytes = rest.get(..2).ok_or("truncated item length")?;
        let len = usize::from(u16::from_be_bytes([len_bytes[0], len_bytes[1]]));
        let value = rest.get(2..2 + len).ok_or("item longer than the body")?;
        body = &rest[2 + len..];
        let slot = match t {
            tag::OPCODE => &mut items.opcode,
            tag::KEY_ID => &mut items.key_id,
            tag::SIGALG => &mut items.sigalg,
            tag::PAYLOAD => &mut items.payload,
            tag::ERROR => &mut items.error,
            _ => continue, // unknown items are ignored (forward compatibility)
        };
        if slot.replace(value).is_some() {
            return Err("duplicate item");
        }
    }
    Ok(items)
}

fn one_byte(v: Option<&[u8]>, missing: &'static str) -> Result<u8, &'static str> {
    match v {
        Some([b]) => Ok(*b),
        Some(_) => Err("one-byte item of the wrong length"),
        None => Err(missing),
    }
}

/// Splits off one complete frame: `Ok(None)` = incomplete, else (header, body).
fn frame(buf: &[u8]) -> Result<Option<(Header, &[u8])>, FrameError> {
    let Some(h) = decode_header(buf)? else {
        return Ok(None);
    };
    Ok(buf.get(HEADER_LEN..HEADER_LEN + h.length).map(|body| (h, body)))
}

fn body_error(h: &Header, why: &'static str) -> FrameError {
    FrameError {
        id: h.id,
        kind: FrameErrorKind::Malformed(why),
        skip: Some(HEADER_LEN + h.length),
    }
}

/// Decodes the first request in `buf`.
pub fn decode_request(buf: &[u8]) -> Result<Decoded<Request>, FrameError> {
    let Some((h, body)) = frame(buf)? else {
        return Ok(None);
    };
    let parse = || -> Result<Request, &'static str> {
        let items = parse_items(body)?;
        match one_byte(items.opcode, "missing opcode")? {
            code @ (op::SIGN | op::DELEGATE) => {
                let key_id: KeyId = items
                    .key_id
                    .ok_or("missing key id")?
                    .try_into()
                    .map_err(|_| "key id is not 32 bytes")?;
                let alg: [u8; 2] = items
                    .sigalg
                    .ok_or("missing signature algorithm")?
                    .try_into()
                    .map_err(|_| "signature algorithm is not 2 bytes")?;
                let (algorithm, payload) = (
                    u16::from_be_bytes(alg),
                    items.payload.ok_or("missing payload")?.to_vec(),
                );
                Ok(if code == op::SIGN {
                    Request::Sign {
                        key_id,
                        algorithm,
                        payload,
                    }
                } else {
                    Request::Delegate {
                        key_id,
                        algorithm,
                        payload,
                    }
                })
            }
            op::PING => Ok(Request::Ping(items.payload.unwrap_or_default().to_vec())),
            op::NEW_KEY => Ok(Request::NewKey(items.payload.ok_or("missing payload")?.to_vec())),
            _ => Err("unknown request opcode"),
        }
    };
    match parse() {
        Ok(req) => Ok(Some((h.id, req, HEADER_LEN + h.length))),
        Err(why) => Err(body_error(&h, why)),
    }
}

/// Decodes the first response in `buf`.
pub fn decode_response(buf: &[u8]) -> Result<Decoded<Response>, FrameError> {
    let Some((h, body)) = frame(buf)? else {
        return Ok(None);
    };
    let parse = || -> Result<Response, &'static str> {
        let items = parse_items(body)?;
        match one_byte(items.opcode, "missing opcode")? {
            op::SIGNATURE => Ok(Response::Signature(items.payload.ok_or("missing payload")?.to_vec())),
            op::PONG => Ok(Response::Pong(items.payload.unwrap_or_default().to_vec())),
            op::CREATED => Ok(Response::Created(items.payload.ok_or("missing payload")?.to_vec())),
            op::ERROR => Ok(Response::Error(ErrorCode::from_u8(one_byte(
                items.error,
                "missing error code",
            )?))),
            _ => Err("unknown response opcode"),
        }
    };
    match parse() {
        Ok(resp) => Ok(Some((h.id, resp, HEADER_LEN + h.length))),
        Err(why) => Err(body_error(&h, why)),
    }
}

fn item(out: &mut Vec<u8>, t: u8, value: &[u8]) -> Result<(), TooLarge> {
    let len = u16::try_from(value.len()).map_err(|_| TooLarge(value.len()))?;
    out.push(t);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(value);
    Ok(())
}

/// Appends a header and the body that `fill` writes; undone when the body is too large.
fn frame_into(
    out: &mut Vec<u8>,
    id: u32,
    fill: impl FnOnce(&mut Vec<u8>) -> Result<(), TooLarge>,
) -> Result<(), TooLarge> {
    let start = out.len();
    out.extend_from_slice(&[VERSION, 0, 0, 0]);
    out.extend_from_slice(&id.to_be_bytes());
    let body_start = out.len();
    let filled = fill(out);
    let body_len = out.len() - body_start;
    match filled {
        Ok(()) if body_len <= MAX_BODY => {
            let len = u16::try_from(body_len).map_err(|_| TooLarge(body_len))?;
            out[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
            Ok(())
        }
        Ok(()) => {
            out.truncate(start);
            Err(TooLarge(body_len))
        }
        Err(e) => {
            out.truncate(start);
            Err(e)
        }
    }
}

/// Appends the frame of a request to `out`.
pub fn encode_request(out: &mut Vec<u8>, id: u32, req: &Request) -> Result<(), TooLarge> {
    frame_into(out, id, |out| match req {
        Request::Sign {
            key_id,
            algorithm,
            payload,
        }
        | Request::Delegate {
            key_id,
            algorithm,
            payload,
        } => {
            let code = if matches!(req, Request::Sign { .. }) {
                op::SIGN
            } else {
                op::DELEGATE
            };
            item(out, tag::OPCODE, &[code])?;
            item(out, tag::KEY_ID, key_id)?;
            item(out, tag::SIGALG, &algorithm.to_be_bytes())?;
            item(out, tag::PAYLOAD, payload)
        }
        Request::Ping(payload) => {
            item(out, tag::OPCODE, &[op::PING])?;
            item(out, tag::PAYLOAD, payload)
        }
        Request::NewKey(payload) => {
            item(out, tag::OPCODE, &[op::NEW_KEY])?;
            item(out, tag::PAYLOAD, payload)
        }
    })
}

/// Appends the frame of a response to `out`.
pub fn encode_response(out: &mut Vec<u8>, id: u32, resp: &Response) -> Result<(), TooLarge> {
    frame_into(out, id, |out| match resp {
        Response::Signature(sig) => {
            item(out, tag::OPCODE, &[op::SIGNATURE])?;
            item(out, tag::PAYLOAD, sig)
        }
        Response::Pong(payload) => {
            item(out, tag::OPCODE, &[op::PONG])?;
            item(out, tag::PAYLOAD, payload)
        }
        Response::Created(payload) => {
            item(out, tag::OPCODE, &[op::CREATED])?;
            item(out, tag::PAYLOAD, payload)
        }
        Response::Error(code) => {
            item(out, tag::OPCODE, &[op::ERROR])?;
            item(out, tag::ERROR, &[code.to_u8()])
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_errors_are_classified_with_the_metric_labels() {
        let header = |version, reserved, len: u16| {
            let [a, b] = len.to_be_bytes();
            [version, reserved, a, b, 0, 0, 0, 7]
        };
        let class = |e: FrameError| (e.id, e.side(), Classify::kind(&e), e.retry_safe(), e.to_string());
        assert_eq!(
            class(decode_request(&header(2, 0, 0)).unwrap_err()),
            (
                7,
                Side::Downstream,
                "bad_version",
                false,
                "frame 7: unsupported version 2".into()
            )
        );
        assert_eq!(
            class(decode_request(&header(VERSION, 1, 0)).unwrap_err()).2,
            "malformed"
        );
        let oversized = decode_request(&header(VERSION, 0, MAX_BODY as u16 + 1)).unwrap_err();
        assert_eq!(Classify::kind(&oversized), "oversized");
        assert_eq!(oversized.skip, None);
        let empty_body = decode_request(&header(VERSION, 0, 0)).unwrap_err();
        assert_eq!(
            class(empty_body),
            (
                7,
                Side::Downstream,
                "malformed",
                false,
                "frame 7: malformed: missing opcode".into()
            )
        );
        assert_eq!(empty_body.skip, Some(HEADER_LEN));
    }

    #[test]
    fn delegate_requests_round_trip_with_their_own_opcode() {
        let req = Request::Delegate {
            key_id: [7; 32],
            algorithm: 0x0403,
            payload: vec![1, 2, 3],
        };
        let mut out = Vec::new();
        encode_request(&mut out, 9, &req).unwrap();
        assert_eq!(&out[8..12], &[tag::OPCODE, 0, 1, op::DELEGATE]);
        let (id, back, used) = decode_request(&out).unwrap().unwrap();
        assert_eq!((id, back, used), (9, req, out.len()));
    }

    #[test]
    fn too_large_is_internal() {
        let mut out = vec![1, 2, 3];
        let e = encode_response(&mut out, 1, &Response::Signature(vec![0; MAX_BODY])).unwrap_err();
        assert_eq!(out, [1, 2, 3], "nothing is left of a frame that does not fit");
        assert_eq!(
            (e.side(), e.kind(), e.retry_safe()),
            (Side::Internal, "frame_too_large", false)
        );
        assert_eq!(
            e.to_string(),
            format!("message body of {} bytes exceeds {MAX_BODY}", e.0)
        );
    }
}
