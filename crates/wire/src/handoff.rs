//! The binary-upgrade handoff channel: the messages a running `tlsgate serve` and its successor
//! (`tlsgate serve --upgrade`) exchange over the upgrade Unix socket, encoded and decoded without
//! I/O (the listening sockets themselves travel beside the bytes, as `SCM_RIGHTS`).
//!
//! Every message is one frame: a 4-byte big-endian body length, a 1-byte type, the body. Bodies
//! are at most [`MAX_BODY`] bytes and every field is bounded, so a peer can make the reader hold
//! no more than one frame. Decoding borrows from the frame (ticket keys and session bytes are
//! never copied by the codec; the caller wipes its buffers). The encoding is canonical: a frame
//! that decodes re-encodes to the same bytes (fuzzed: `fuzz/fuzz_targets/handoff.rs`).
//!
//! The conversation (successor → running, running → successor):
//!
//! ```text
//! Hello{version, pid}  →                ← Welcome{version, pid} | Busy{pid} | Refused{reason}
//! (the successor builds its configuration)
//! SendState            →                ← Sockets{kinds}+fds …, TicketKeys, [QuicSecret],
//!                                         Sessions …, StateEnd
//! (the successor listens, its workers accept)
//! Ready{pid}           →                ← Draining            (the running one stops accepting)
//! or Failed{reason}    →                  (the running one keeps serving)
//! ```
//!
//! [`VERSION`] is what `Hello` and `Welcome` carry; a running gateway refuses a version it does
//! not speak (`Refused`), so the format can change without mixed versions misreading each other.

/// The protocol version this codec speaks.
pub const VERSION: u16 = 3;
/// Bytes before a frame's body: the length (4) and the type (1).
pub const HEADER_LEN: usize = 5;
/// Largest body of one frame.
pub const MAX_BODY: usize = 1 << 20;
/// Most sockets (and so descriptors) announced by one `Sockets` frame.
pub const MAX_SOCKETS_PER_FRAME: usize = 64;
/// Most ticket keys in a `TicketKeys` frame.
pub const MAX_TICKET_KEYS: usize = 255;
/// Longest `Refused`/`Failed` reason, in bytes.
pub const MAX_REASON: usize = 4096;
/// Longest TLS session ID (TLS 1.2: 32 bytes).
pub const MAX_SESSION_ID: usize = 32;
/// Largest encoded session carried (a session with a client-certificate chain included).
pub const MAX_SESSION_DER: usize = 64 * 1024;

/// What a descriptor passed with a `Sockets` frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketKind {
    /// A `[[listener]]` TCP socket (one per worker; matched by its bound address).
    Listener,
    /// The `[admin] listen` TCP socket.
    Admin,
    /// The upgrade Unix socket itself (`[server] upgrade_socket`).
    Upgrade,
    /// A QUIC UDP socket (one per worker and QUIC address, in the SO_REUSEPORT group's order;
    /// matched by its bound address). Since version 2.
    Quic,
    /// The Unix datagram socket linking the QUIC socket announced just before it to the running
    /// gateway's endpoint, for the datagrams of connections the other process owns. Since
    /// version 2.
    QuicLink,
}

impl SocketKind {
    fn code(self) -> u8 {
        match self {
            Self::Listener => 1,
            Self::Admin => 2,
            Self::Upgrade => 3,
            Self::Quic => 4,
            Self::QuicLink => 5,
        }
    }

    fn from_code(b: u8) -> Result<Self, HandoffError> {
        match b {
            1 => Ok(Self::Listener),
            2 => Ok(Self::Admin),
            3 => Ok(Self::Upgrade),
            4 => Ok(Self::Quic),
            5 => Ok(Self::QuicLink),
            other => Err(HandoffError::BadSocketKind(other)),
        }
    }
}

/// One session-ticket key, borrowed from a frame or from the sender's copy.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TicketKeyRecord<'a> {
    /// The key name tickets carry in the clear.
    pub name: &'a [u8; 16],
    /// AES-128 key (secret).
    pub aes: &'a [u8; 16],
    /// HMAC-SHA256 key (secret).
    pub hmac: &'a [u8; 32],
    /// `None`: the key encrypts new tickets; `Some(ms)`: retired that many milliseconds ago.
    pub retired_ms: Option<u64>,
}

impl std::fmt::Debug for TicketKeyRecord<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key material.
        f.debug_struct("TicketKeyRecord")
            .field("retired_ms", &self.retired_ms)
            .finish_non_exhaustive()
    }
}

/// One cached TLS 1.2 session.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SessionRecord<'a> {
    /// The session ID (1..=32 bytes).
    pub id: &'a [u8],
    /// The session, DER-encoded (holds its master secret).
    pub der: &'a [u8],
    /// Milliseconds it has left to live.
    pub ttl_ms: u64,
}

impl std::fmt::Debug for SessionRecord<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionRecord")
            .field("id_len", &self.id.len())
            .field("der_len", &self.der.len())
            .field("ttl_ms", &self.ttl_ms)
            .finish()
    }
}

impl SessionRecord<'_> {
    /// Bytes this record takes in a `Sessions` body (to pack frames up to [`MAX_BODY`]).
    pub fn encoded_len(&self) -> usize {
        1 + self.id.len() + 4 + self.der.len() + 8
    }
}

/// One message of the channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message<'a> {
    /// Successor → running: the protocol version it speaks and its process ID.
    Hello {
        /// [`VERSION`] of the successor.
        version: u16,
        /// Its process ID (for logs).
        pid: u32,
    },
    /// Running → successor: accepted; the version it speaks and its process ID.
    Welcome {
        /// [`VERSION`] of the running gateway.
        version: u16,
        /// Its process ID.
        pid: u32,
    },
    /// Running → successor: another successor is taking over right now.
    Busy {
        /// That successor's process ID (0 when it did not say yet).
        pid: u32,
    },
    /// Running → successor: not now, and why (unknown version, shutting down, timed out).
    Refused {
        /// Why.
        reason: &'a str,
    },
    /// Successor → running: built; send the sockets and the session state.
    SendState,
    /// Running → successor: one descriptor per kind, attached to this frame.
    Sockets {
        /// What each attached descriptor is, in order.
        kinds: Vec<SocketKind>,
    },
    /// Running → successor: the session-ticket key ring, current key first.
    TicketKeys {
        /// The keys.
        keys: Vec<TicketKeyRecord<'a>>,
    },
    /// Running → successor: a batch of the session-ID cache, least recently used first.
    Sessions {
        /// The sessions.
        sessions: Vec<SessionRecord<'a>>,
    },
    /// Running → successor: the secret of its QUIC stateless resets and Retry tokens (sent when
    /// it serves HTTP/3), so that the successor's resets end the old process's connections at
    /// their clients and its Retry tokens stay valid (version 3).
    QuicSecret {
        /// The secret.
        key: &'a [u8; 32],
    },
    /// Running → successor: nothing more of the state follows.
    StateEnd,
    /// Successor → running: it cannot start, and why; the running gateway keeps serving.
    Failed {
        /// Why.
        reason: &'a str,
    },
    /// Successor → running: its listeners accept; stop accepting and drain.
    Ready {
        /// The successor's process ID.
        pid: u32,
    },
    /// Running → successor: accepting stopped; draining.
    Draining,
}

impl Message<'_> {
    fn code(&self) -> u8 {
        match self {
            Self::Hello { .. } => 0x01,
            Self::Welcome { .. } => 0x02,
            Self::Busy { .. } => 0x03,
            Self::Refused { .. } => 0x04,
            Self::SendState => 0x05,
            Self::Sockets { .. } => 0x06,
            Self::TicketKeys { .. } => 0x07,
            Self::Sessions { .. } => 0x08,
            Self::StateEnd => 0x09,
            Self::Failed { .. } => 0x0a,
            Self::Ready { .. } => 0x0b,
            Self::Draining => 0x0c,
            Self::QuicSecret { .. } => 0x0d,
        }
    }

    /// A short name for logs.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Hello { .. } => "hello",
            Self::Welcome { .. } => "welcome",
            Self::Busy { .. } => "busy",
            Self::Refused { .. } => "refused",
            Self::SendState => "send_state",
            Self::Sockets { .. } => "sockets",
            Self::TicketKeys { .. } => "ticket_keys",
            Self::Sessions { .. } => "sessions",
            Self::StateEnd => "state_end",
            Self::Failed { .. } => "failed",
            Self::Ready { .. } => "ready",
            Self::Draining => "draining",
            Self::QuicSecret { .. } => "quic_secret",
        }
    }
}

/// Why bytes are not a valid frame, or a message cannot be encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandoffError {
    /// A frame announcing a body above [`MAX_BODY`].
    FrameTooLarge(usize),
    /// A frame type this version does not know.
    UnknownType(u8),
    /// The body ends inside the named field.
    Truncated(&'static str),
    /// The body goes on after the message's last field.
    TrailingBytes(&'static str),
    /// A reason that is not UTF-8.
    BadUtf8,
    /// A field above its bound.
    TooLong {
        /// The field.
        what: &'static str,
        /// Its length (or count).
        len: usize,
        /// The bound.
        max: usize,
    },
    /// A field that must not be empty is.
    Empty(&'static str),
    /// A socket kind that does not exist.
    BadSocketKind(u8),
    /// A ticket-key state other than current (0) or retired (1).
    BadKeyState(u8),
}

impl HandoffError {
    /// A short, stable label for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::FrameTooLarge(_) => "frame_too_large",
            Self::UnknownType(_) => "unknown_type",
            Self::Truncated(_) => "truncated",
            Self::TrailingBytes(_) => "trailing_bytes",
            Self::BadUtf8 => "bad_utf8",
            Self::TooLong { .. } => "too_long",
            Self::Empty(_) => "empty",
            Self::BadSocketKind(_) => "bad_socket_kind",
            Self::BadKeyState(_) => "bad_key_state",
        }
    }
}

impl std::fmt::Display for HandoffError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::FrameTooLarge(n) => write!(f, "handoff frame of {n} bytes (at most {MAX_BODY})"),
            Self::UnknownType(t) => write!(f, "unknown handoff message type 0x{t:02x}"),
            Self::Truncated(what) => write!(f, "handoff message ends inside its {what}"),
            Self::TrailingBytes(what) => write!(f, "bytes after the end of a handoff {what} message"),
            Self::BadUtf8 => f.write_str("handoff reason is not UTF-8"),
            Self::TooLong { what, len, max } => write!(f, "handoff {what} of {len} (at most {max})"),
            Self::Empty(what) => write!(f, "empty handoff {what}"),
            Self::BadSocketKind(k) => write!(f, "unknown handoff socket kind {k}"),
            Self::BadKeyState(s) => write!(f, "unknown ticket-key state {s}"),
        }
    }
}

impl std::error::Error for HandoffError {}

/// The whole length of the frame at the start of `buf` once its header is there (`None`: fewer
/// than [`HEADER_LEN`] bytes so far); an oversized frame is refused before its body is read.
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, HandoffError> {
    let Some(header) = buf.get(..HEADER_LEN) else {
        return Ok(None);
    };
    let body = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
    if body > MAX_BODY {
        return Err(HandoffError::FrameTooLarge(body));
    }
    Ok(Some(HEADER_LEN + body))
}

/// Decodes the frame at the start of `buf`: the message and the bytes it took, or `None` while
/// the frame is incomplete.
pub fn decode(buf: &[u8]) -> Result<Option<(Message<'_>, usize)>, HandoffError> {
    let Some(len) = frame_len(buf)? else {
        return Ok(None);
    };
    let Some(frame) = buf.get(..len) else {
        return Ok(None);
    };
    let body = &frame[HEADER_LEN..];
    let message = decode_body(frame[4], body)?;
    Ok(Some((message, len)))
}

fn decode_body(code: u8, body: &[u8]) -> Result<Message<'_>, HandoffError> {
    let mut r = Reader(body);
    let message = match code {
        0x01 | 0x02 => {
            let version = r.u16("version")?;
            let pid = r.u32("pid")?;
            if code == 0x01 {
                Message::Hello { version, pid }
            } else {
                Message::Welcome { version, pid }
            }
        }
        0x03 => Message::Busy { pid: r.u32("pid")? },
        0x04 => Message::Refused { reason: r.reason()? },
        0x05 => Message::SendState,
        0x06 => {
            let kinds = r.take(r.0.len(), "sockets")?;
            if kinds.is_empty() {
                return Err(HandoffError::Empty("socket list"));
            }
            bounded("socket list", kinds.len(), MAX_SOCKETS_PER_FRAME)?;
            Message::Sockets {
                kinds: kinds
                    .iter()
                    .map(|&b| SocketKind::from_code(b))
                    .collect::<Result<_, _>>()?,
            }
        }
        0x07 => {
            let count = r.u8("key count")? as usize;
            let mut keys = Vec::with_capacity(count.min(r.0.len() / 65));
            for _ in 0..count {
                keys.push(r.ticket_key()?);
            }
            Message::TicketKeys { keys }
        }
        0x08 => {
            let count = r.u32("session count")? as usize;
            // Each record takes at least 14 bytes: no allocation beyond what the body can hold.
            let mut sessions = Vec::with_capacity(count.min(r.0.len() / 14));
            for _ in 0..count {
                sessions.push(r.session()?);
            }
            Message::Sessions { sessions }
        }
        0x09 => Message::StateEnd,
        0x0a => Message::Failed { reason: r.reason()? },
        0x0b => Message::Ready { pid: r.u32("pid")? },
        0x0c => Message::Draining,
        0x0d => Message::QuicSecret {
            key: r.array("QUIC secret")?,
        },
        other => return Err(HandoffError::UnknownType(other)),
    };
    if !r.0.is_empty() {
        return Err(HandoffError::TrailingBytes(message.name()));
    }
    Ok(message)
}

/// Appends `message` as one frame to `out`; refuses (appending nothing) what a reader would
/// refuse.
pub fn encode(message: &Message<'_>, out: &mut Vec<u8>) -> Result<(), HandoffError> {
    let start = out.len();
    out.extend_from_slice(&[0, 0, 0, 0, message.code()]);
    if let Err(e) = encode_body(message, out) {
        out.truncate(start);
        return Err(e);
    }
    let body = out.len() - start - HEADER_LEN;
    if body > MAX_BODY {
        out.truncate(start);
        return Err(HandoffError::FrameTooLarge(body));
    }
    out[start..start + 4].copy_from_slice(&(body as u32).to_be_bytes());
    Ok(())
}

fn encode_body(message: &Message<'_>, out: &mut Vec<u8>) -> Result<(), HandoffError> {
    match message {
        Message::Hello { version, pid } | Message::Welcome { version, pid } => {
            out.extend_from_slice(&version.to_be_bytes());
            out.extend_from_slice(&pid.to_be_bytes());
        }
        Message::Busy { pid } | Message::Ready { pid } => out.extend_from_slice(&pid.to_be_bytes()),
        Message::Refused { reason } | Message::Failed { reason } => {
            bounded("reason", reason.len(), MAX_REASON)?;
            out.extend_from_slice(reason.as_bytes());
        }
        Message::SendState | Message::StateEnd | Message::Draining => {}
        Message::QuicSecret { key } => out.extend_from_slice(&key[..]),
        Message::Sockets { kinds } => {
            if kinds.is_empty() {
                return Err(HandoffError::Empty("socket list"));
            }
            bounded("socket list", kinds.len(), MAX_SOCKETS_PER_FRAME)?;
            out.extend(kinds.iter().map(|k| k.code()));
        }
        Message::TicketKeys { keys } => {
            bounded("ticket key list", keys.len(), MAX_TICKET_KEYS)?;
            out.push(keys.len() as u8);
            for k in keys {
                out.extend_from_slice(k.name);
                out.extend_from_slice(k.aes);
                out.extend_from_slice(k.hmac);
                match k.retired_ms {
                    None => out.push(0),
                    Some(ms) => {
                        out.push(1);
                        out.extend_from_slice(&ms.to_be_bytes());
                    }
                }
            }
        }
        Message::Sessions { sessions } => {
            bounded("session list", sessions.len(), u32::MAX as usize)?;
            out.extend_from_slice(&(sessions.len() as u32).to_be_bytes());
            for s in sessions {
                check_session(s.id, s.der)?;
                out.push(s.id.len() as u8);
                out.extend_from_slice(s.id);
                out.extend_from_slice(&(s.der.len() as u32).to_be_bytes());
                out.extend_from_slice(s.der);
                out.extend_from_slice(&s.ttl_ms.to_be_bytes());
            }
        }
    }
    Ok(())
}

fn bounded(what: &'static str, len: usize, max: usize) -> Result<(), HandoffError> {
    if len > max {
        return Err(HandoffError::TooLong { what, len, max });
    }
    Ok(())
}

fn check_session(id: &[u8], der: &[u8]) -> Result<(), HandoffError> {
    if id.is_empty() {
        return Err(HandoffError::Empty("session ID"));
    }
    if der.is_empty() {
        return Err(HandoffError::Empty("session"));
    }
    bounded("session ID", id.len(), MAX_SESSION_ID)?;
    bounded("session", der.len(), MAX_SESSION_DER)
}

/// Reads fields off the front of a body.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], HandoffError> {
        if self.0.len() < n {
            return Err(HandoffError::Truncated(what));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<&'a [u8; N], HandoffError> {
        let bytes = self.take(N, what)?;
        Ok(bytes.try_into().expect("take returned N bytes"))
    }

    fn u8(&mut self, what: &'static str) -> Result<u8, HandoffError> {
        Ok(self.take(1, what)?[0])
    }

    fn u16(&mut self, what: &'static str) -> Result<u16, HandoffError> {
        Ok(u16::from_be_bytes(*self.array(what)?))
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, HandoffError> {
        Ok(u32::from_be_bytes(*self.array(what)?))
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, HandoffError> {
        Ok(u64::from_be_bytes(*self.array(what)?))
    }

    /// The rest of the body as a bounded UTF-8 reason.
    fn reason(&mut self) -> Result<&'a str, HandoffError> {
        let bytes = self.take(self.0.len(), "reason")?;
        bounded("reason", bytes.len(), MAX_REASON)?;
        std::str::from_utf8(bytes).map_err(|_| HandoffError::BadUtf8)
    }

    fn ticket_key(&mut self) -> Result<TicketKeyRecord<'a>, HandoffError> {
        let name = self.array("ticket key name")?;
        let aes = self.array("ticket AES key")?;
        let hmac = self.array("ticket HMAC key")?;
        let retired_ms = match self.u8("ticket key state")? {
            0 => None,
            1 => Some(self.u64("ticket key age")?),
            other => return Err(HandoffError::BadKeyState(other)),
        };
        Ok(TicketKeyRecord {
            name,
            aes,
            hmac,
            retired_ms,
        })
    }

    fn session(&mut self) -> Result<SessionRecord<'a>, HandoffError> {
        let id_len = self.u8("session ID length")? as usize;
        bounded("session ID", id_len, MAX_SESSION_ID)?;
        let id = self.take(id_len, "session ID")?;
        let der_len = self.u32("session length")? as usize;
        bounded("session", der_len, MAX_SESSION_DER)?;
        let der = self.take(der_len, "session")?;
        check_session(id, der)?;
        let ttl_ms = self.u64("session lifetime")?;
        Ok(SessionRecord { id, der, ttl_ms })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(message: &Message<'_>) -> Vec<u8> {
        let mut out = Vec::new();
        encode(message, &mut out).unwrap();
        out
    }

    fn round_trip(message: Message<'_>) {
        let bytes = frame(&message);
        let (decoded, used) = decode(&bytes).unwrap().unwrap();
        assert_eq!((decoded, used), (message, bytes.len()));
        // Every strict prefix is incomplete, never an error or a different message.
        for cut in 0..bytes.len() {
            assert_eq!(decode(&bytes[..cut]), Ok(None), "prefix of {cut} bytes");
        }
    }

    #[test]
    fn every_message_round_trips() {
        let (name, aes, hmac) = ([1u8; 16], [2u8; 16], [3u8; 32]);
        round_trip(Message::Hello {
            version: VERSION,
            pid: 4242,
        });
        round_trip(Message::Welcome {
            version: 7,
            pid: u32::MAX,
        });
        round_trip(Message::Busy { pid: 0 });
        round_trip(Message::Refused {
            reason: "shutting down",
        });
        round_trip(Message::SendState);
        round_trip(Message::Sockets {
            kinds: vec![
                SocketKind::Listener,
                SocketKind::Listener,
                SocketKind::Admin,
                SocketKind::Upgrade,
            ],
        });
        round_trip(Message::TicketKeys { keys: vec![] });
        round_trip(Message::TicketKeys {
            keys: vec![
                TicketKeyRecord {
                    name: &name,
                    aes: &aes,
                    hmac: &hmac,
                    retired_ms: None,
                },
                TicketKeyRecord {
                    name: &name,
                    aes: &aes,
                    hmac: &hmac,
                    retired_ms: Some(3_600_000),
                },
            ],
        });
        round_trip(Message::Sessions {
            sessions: vec![
                SessionRecord {
                    id: &[9; 32],
                    der: &[0x30, 0x03, 1, 2, 3],
                    ttl_ms: 299_000,
                },
                SessionRecord {
                    id: &[1],
                    der: &[0],
                    ttl_ms: 0,
                },
            ],
        });
        round_trip(Message::StateEnd);
        round_trip(Message::Failed {
            reason: "tls.cert: cannot read /x.pem: No such file",
        });
        round_trip(Message::Ready { pid: 1 });
        round_trip(Message::Draining);
        round_trip(Message::QuicSecret { key: &[7u8; 32] });
    }

    #[test]
    fn the_layout_is_fixed() {
        assert_eq!(
            frame(&Message::Hello {
                version: 1,
                pid: 0x01020304
            }),
            [0, 0, 0, 6, 0x01, 0, 1, 1, 2, 3, 4]
        );
        assert_eq!(frame(&Message::Draining), [0, 0, 0, 0, 0x0c]);
        assert_eq!(
            frame(&Message::Sockets {
                kinds: vec![SocketKind::Listener, SocketKind::Upgrade]
            }),
            [0, 0, 0, 2, 0x06, 1, 3]
        );
    }

    #[test]
    fn frames_follow_each_other() {
        let mut bytes = frame(&Message::Welcome { version: 1, pid: 9 });
        let first = bytes.len();
        bytes.extend(frame(&Message::StateEnd));
        let (m, used) = decode(&bytes).unwrap().unwrap();
        assert_eq!((m, used), (Message::Welcome { version: 1, pid: 9 }, first));
        assert_eq!(decode(&bytes[used..]).unwrap().unwrap().0, Message::StateEnd);
    }

    #[test]
    fn hostile_frames_are_refused_not_trusted() {
        // A length above the bound is refused from the header alone.
        let huge = [0xff, 0xff, 0xff, 0xff, 0x08];
        assert_eq!(frame_len(&huge), Err(HandoffError::FrameTooLarge(u32::MAX as usize)));
        assert_eq!(decode(&huge).unwrap_err().kind(), "frame_too_large");
        // Unknown type.
        assert_eq!(decode(&[0, 0, 0, 0, 0x7f]), Err(HandoffError::UnknownType(0x7f)));
        // Fields cut short and bytes left over.
        assert_eq!(
            decode(&[0, 0, 0, 3, 0x01, 0, 1, 0]),
            Err(HandoffError::Truncated("pid"))
        );
        assert_eq!(
            decode(&[0, 0, 0, 1, 0x0c, 0]),
            Err(HandoffError::TrailingBytes("draining"))
        );
        // A session count far above what the body holds allocates nothing and fails cleanly.
        assert_eq!(
            decode(&[0, 0, 0, 4, 0x08, 0xff, 0xff, 0xff, 0xff]),
            Err(HandoffError::Truncated("session ID length"))
        );
        // Bounds and kinds.
        let mut long_id = vec![0, 0, 0, 0, 0x08, 0, 0, 0, 1, 33];
        long_id.extend([0u8; 33]);
        let body = (long_id.len() - HEADER_LEN) as u32;
        long_id[..4].copy_from_slice(&body.to_be_bytes());
        assert!(matches!(
            decode(&long_id),
            Err(HandoffError::TooLong { what: "session ID", .. })
        ));
        assert_eq!(decode(&[0, 0, 0, 1, 0x06, 9]), Err(HandoffError::BadSocketKind(9)));
        assert_eq!(decode(&[0, 0, 0, 0, 0x06]), Err(HandoffError::Empty("socket list")));
        assert_eq!(decode(&[0, 0, 0, 2, 0x04, 0xc3, 0x28]), Err(HandoffError::BadUtf8));
        let mut key = vec![0, 0, 0, 66, 0x07, 1];
        key.extend([0u8; 64]);
        key.push(2);
        assert_eq!(decode(&key), Err(HandoffError::BadKeyState(2)));
    }

    #[test]
    fn what_a_reader_refuses_is_not_encoded() {
        let mut out = vec![0xaa];
        let long = "x".repeat(MAX_REASON + 1);
        assert!(encode(&Message::Failed { reason: &long }, &mut out).is_err());
        assert!(encode(&Message::Sockets { kinds: vec![] }, &mut out).is_err());
        let many = vec![SocketKind::Listener; MAX_SOCKETS_PER_FRAME + 1];
        assert!(encode(&Message::Sockets { kinds: many }, &mut out).is_err());
        let empty_id = SessionRecord {
            id: &[],
            der: &[1],
            ttl_ms: 1,
        };
        assert!(encode(
            &Message::Sessions {
                sessions: vec![empty_id]
            },
            &mut out
        )
        .is_err());
        let der = vec![0u8; MAX_SESSION_DER];
        let big = SessionRecord {
            id: &[1],
            der: &der,
            ttl_ms: 1,
        };
        let too_many = vec![big; MAX_BODY / MAX_SESSION_DER + 1];
        assert_eq!(
            encode(&Message::Sessions { sessions: too_many }, &mut out)
                .unwrap_err()
                .kind(),
            "frame_too_large"
        );
        assert_eq!(out, [0xaa], "nothing appended on refusal");
        assert_eq!(big.encoded_len(), 1 + 1 + 4 + MAX_SESSION_DER + 8);
    }

    #[test]
    fn secrets_stay_out_of_debug_output() {
        let (name, aes, hmac) = ([0x11u8; 16], [0xabu8; 16], [0xcdu8; 32]);
        let key = TicketKeyRecord {
            name: &name,
            aes: &aes,
            hmac: &hmac,
            retired_ms: None,
        };
        let text = format!("{:?}", Message::TicketKeys { keys: vec![key] });
        assert!(!text.contains("171") && !text.contains("205"), "{text}");
        let s = SessionRecord {
            id: &[1],
            der: &[0xab; 4],
            ttl_ms: 5,
        };
        assert!(!format!("{s:?}").contains("171"));
    }
}
