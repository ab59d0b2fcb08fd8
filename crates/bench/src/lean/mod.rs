//! `bench --lean`: full TLS 1.3 handshakes completed with the least client work, so that one
//! client core keeps a server core busy with them (a real client's key generation and signature
//! check cost about as much as the server's handshake). Per thread: one fixed ClientHello (an
//! X25519 key share generated once, TLS_AES_128_GCM_SHA256 only, no PSK modes so no tickets).
//! Per connection: one X25519 with the server's share, the key schedule ([`schedule`]), the
//! server's flight decrypted and its Finished checked (the certificate and CertificateVerify
//! are hashed, not verified: a load generator, never a client to trust), then the client
//! Finished and the request in one write, and the response read to the server's close (the
//! server closes first, so the client keeps no TIME_WAIT sockets).
//!
//! The protocol only; the load loop that records it is `run::lean`.

mod hello;
pub mod schedule;

use crate::http::{parse_response, Parsed};
use boring::derive::Deriver;
use boring::error::ErrorStack;
use boring::pkey::{Id, PKey, Private};
use boring::sha::Sha256;
use schedule::{finished, HandshakeSecrets, KeySchedule, Protection};
use std::time::Instant;
use tlsgate_wire::tls13_flight::{
    certificate_has_delegated_credential, certificate_verify_scheme, first_message, inner_plaintext, record_header,
    server_hello, ServerHelloError, ALERT, APPLICATION_DATA, CERTIFICATE, CERTIFICATE_VERIFY, CHANGE_CIPHER_SPEC,
    FINISHED, HANDSHAKE, RECORD_HEADER_LEN, X25519,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The cipher suite offered and expected.
const TLS_AES_128_GCM_SHA256: u16 = 0x1301;
/// Largest plaintext per record.
const MAX_PLAINTEXT: usize = 16_384;
/// A DER SubjectPublicKeyInfo of an X25519 key, without the 32 key bytes (RFC 8410).
const X25519_SPKI_PREFIX: [u8; 12] = [0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x6e, 0x03, 0x21, 0x00];

/// A record from the server that does not decrypt under the keys derived for it.
const UNAUTHENTIC: LeanError = LeanError::Protocol("a record from the server does not authenticate");

/// Why a lean connection failed.
#[derive(Debug, thiserror::Error)]
pub enum LeanError {
    /// Reading or writing the socket failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The server sent an alert (its description code).
    #[error("the server sent alert {0}")]
    Alert(u8),
    /// The ServerHello cannot continue a TLS 1.3 handshake.
    #[error("{0}")]
    ServerHello(#[from] ServerHelloError),
    /// The server broke the protocol.
    #[error("{0}")]
    Protocol(&'static str),
    /// A cryptographic operation failed (a record that does not authenticate among them).
    #[error("BoringSSL: {0}")]
    Crypto(#[from] ErrorStack),
    /// The server closed the connection before its handshake was done.
    #[error("the server closed the connection during the handshake")]
    Closed,
    /// The response could not be read as HTTP/1.1.
    #[error("{0}")]
    Http(String),
}

/// What one bench thread keeps for all its connections.
pub struct Lean {
    record: Vec<u8>,
    key: PKey<Private>,
    /// The transcript hash after the ClientHello.
    transcript: Sha256,
    schedule: KeySchedule,
}

impl Lean {
    /// A fresh key share and ClientHello for `sni` offering `alpn_wire` (and, with `delegated`,
    /// delegated credentials).
    pub fn new(sni: Option<&str>, alpn_wire: &[u8], delegated: bool) -> Result<Self, ErrorStack> {
        let key = PKey::generate(Id::X25519)?;
        let mut share = [0; 32];
        key.raw_public_key(&mut share)?;
        let mut random = [0; 32];
        boring::rand::rand_bytes(&mut random)?;
        let record = hello::client_hello(sni, alpn_wire, delegated, &share, &random);
        let mut transcript = Sha256::new();
        transcript.update(&record[RECORD_HEADER_LEN..]);
        Ok(Self {
            record,
            key,
            transcript,
            schedule: KeySchedule::new(&[])?,
        })
    }

    /// X25519 of the thread's key with the server's share.
    fn x25519(&self, peer: &[u8]) -> Result<[u8; 32], LeanError> {
        if peer.len() != 32 {
            return Err(LeanError::Protocol("the server's X25519 share is not 32 bytes"));
        }
        let mut der = [0; 44];
        der[..12].copy_from_slice(&X25519_SPKI_PREFIX);
        der[12..].copy_from_slice(peer);
        let peer = PKey::public_key_from_der(&der)?;
        let mut deriver = Deriver::new(&self.key)?;
        deriver.set_peer(&peer)?;
        let mut out = [0; 32];
        deriver.derive(&mut out)?;
        Ok(out)
    }
}

/// The records read from one connection.
#[derive(Default)]
pub struct Records {
    buf: Vec<u8>,
    consumed: usize,
}

/// One record: its header and its body, in the reader's buffer.
struct Record<'a> {
    header: [u8; RECORD_HEADER_LEN],
    body: &'a mut [u8],
}

impl Records {
    /// Empties the buffer for a new connection (its allocation is kept).
    pub fn clear(&mut self) {
        self.buf.clear();
        self.consumed = 0;
    }

    /// Reads and drops everything up to the end of the stream (a reset ends it too), in the
    /// buffer this reader already has.
    async fn discard_to_end(&mut self, tcp: &mut TcpStream) {
        self.clear();
        if self.buf.capacity() < 4096 {
            self.buf.reserve(16 * 1024);
        }
        while matches!(tcp.read_buf(&mut self.buf).await, Ok(n) if n > 0) {
            self.buf.clear();
        }
    }

    /// The next whole record; `None` at the end of the stream.
    async fn next(&mut self, tcp: &mut TcpStream) -> std::io::Result<Option<Record<'_>>> {
        self.buf.drain(..self.consumed);
        self.consumed = 0;
        loop {
            if let Some(header) = self.buf.first_chunk::<RECORD_HEADER_LEN>() {
                let header = *header;
                let Some(h) = record_header(&header) else {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        "a record longer than TLS allows",
                    ));
                };
                if self.buf.len() >= RECORD_HEADER_LEN + h.len {
                    self.consumed = RECORD_HEADER_LEN + h.len;
                    return Ok(Some(Record {
                        header,
                        body: &mut self.buf[RECORD_HEADER_LEN..self.consumed],
                    }));
                }
            }
            if self.buf.capacity() - self.buf.len() < 4096 {
                self.buf.reserve(16 * 1024);
            }
            if tcp.read_buf(&mut self.buf).await? == 0 {
                return Ok(None);
            }
        }
    }
}

/// A handshake done on the client's side: what the client still has to send, and the keys.
pub struct Established {
    client_handshake: Protection,
    client_finished: [u8; 32],
    client: Protection,
    server: Protection,
    /// The signature scheme of the server's CertificateVerify.
    pub signature_scheme: Option<u16>,
    /// The server's Certificate carried a delegated credential (its CertificateVerify was made
    /// with the credential's key).
    pub delegated_credential: bool,
}

/// Sends the ClientHello and reads the server's flight through its Finished, which is checked.
pub async fn handshake(lean: &Lean, tcp: &mut TcpStream, records: &mut Records) -> Result<Established, LeanError> {
    tcp.write_all(&lean.record).await?;
    let mut transcript = lean.transcript.clone();
    let mut pending = Vec::new();
    let mut keys: Option<(HandshakeSecrets, Protection)> = None;
    let mut signature_scheme = None;
    let mut delegated_credential = false;
    loop {
        let Some(rec) = records.next(tcp).await? else {
            return Err(LeanError::Closed);
        };
        let kind = rec.header[0];
        match (kind, &mut keys) {
            (ALERT, _) => return Err(LeanError::Alert(rec.body.get(1).copied().unwrap_or(0))),
            (CHANGE_CIPHER_SPEC, _) => {}
            (HANDSHAKE, None) => {
                pending.extend_from_slice(rec.body);
                let Some((_, len)) = first_message(&pending) else {
                    continue;
                };
                let sh = server_hello(&pending[..len])?;
                if sh.cipher_suite != TLS_AES_128_GCM_SHA256 || sh.group != X25519 {
                    return Err(LeanError::Protocol(
                        "the server chose a suite or group that was not offered",
                    ));
                }
                let dhe = lean.x25519(sh.key_share)?;
                transcript.update(&pending[..len]);
                if pending.len() != len {
                    return Err(LeanError::Protocol("handshake data in the clear after the ServerHello"));
                }
                pending.clear();
                let secrets = lean.schedule.handshake(&dhe, &transcript.clone().finish())?;
                let server = Protection::new(&secrets.server)?;
                keys = Some((secrets, server));
            }
            (APPLICATION_DATA, Some((secrets, server))) => {
                let plain = server.open(&rec.header, rec.body).ok_or(UNAUTHENTIC)?;
                match inner_plaintext(plain) {
                    Some((HANDSHAKE, content)) => pending.extend_from_slice(content),
                    Some((ALERT, content)) => return Err(LeanError::Alert(content.get(1).copied().unwrap_or(0))),
                    _ => return Err(LeanError::Protocol("an unexpected record in the server's flight")),
                }
                while let Some((kind, len)) = first_message(&pending) {
                    let msg = &pending[..len];
                    if kind == FINISHED {
                        if msg[4..] != finished(&secrets.server, &transcript.clone().finish())? {
                            return Err(LeanError::Protocol("the server's Finished does not verify"));
                        }
                        transcript.update(msg);
                        let flight = transcript.finish();
                        let (client, server) = secrets.application(&flight)?;
                        return Ok(Established {
                            client_handshake: Protection::new(&secrets.client)?,
                            client_finished: finished(&secrets.client, &flight)?,
                            client: Protection::new(&client)?,
                            server: Protection::new(&server)?,
                            signature_scheme,
                            delegated_credential,
                        });
                    }
                    if kind == CERTIFICATE_VERIFY {
                        signature_scheme = certificate_verify_scheme(msg);
                    }
                    if kind == CERTIFICATE {
                        delegated_credential = certificate_has_delegated_credential(msg)
                            .ok_or(LeanError::Protocol("the server's Certificate does not parse"))?;
                    }
                    transcript.update(msg);
                    pending.drain(..len);
                }
            }
            _ => return Err(LeanError::Protocol("an unexpected record before the server's Finished")),
        }
    }
}

/// A response read to the server's close.
pub struct Response {
    /// When its first byte arrived.
    pub first_byte: Instant,
    /// Its status.
    pub status: u16,
    /// Its length (head and body).
    pub len: usize,
}

/// Sends the client Finished and `request` in one write and reads the response; then reads to
/// the end of the stream so the server closes first.
pub async fn exchange(
    mut est: Established,
    tcp: &mut TcpStream,
    records: &mut Records,
    request: &[u8],
) -> Result<Response, LeanError> {
    let mut out = Vec::with_capacity(request.len() + 128);
    let mut finished_msg = [0; 36];
    finished_msg[..4].copy_from_slice(&[FINISHED, 0, 0, 32]);
    finished_msg[4..].copy_from_slice(&est.client_finished);
    est.client_handshake.seal(&finished_msg, HANDSHAKE, &mut out)?;
    for chunk in request.chunks(MAX_PLAINTEXT) {
        est.client.seal(chunk, APPLICATION_DATA, &mut out)?;
    }
    tcp.write_all(&out).await?;
    let mut body = Vec::new();
    let mut first_byte = None;
    let (status, len) = loop {
        let Some(rec) = records.next(tcp).await? else {
            break closed(&body)?;
        };
        if rec.header[0] != APPLICATION_DATA {
            return Err(LeanError::Protocol("a record in the clear after the handshake"));
        }
        let plain = est.server.open(&rec.header, rec.body).ok_or(UNAUTHENTIC)?;
        match inner_plaintext(plain) {
            Some((APPLICATION_DATA, content)) => {
                first_byte.get_or_insert_with(Instant::now);
                body.extend_from_slice(content);
                if let Some(done) = parse_final(&mut body)? {
                    break done;
                }
            }
            // A ticket or a key update (neither asked for): not part of the response.
            Some((HANDSHAKE, _)) => {}
            Some((ALERT, [_, 0])) => break closed(&body)?,
            Some((ALERT, content)) => return Err(LeanError::Alert(content.get(1).copied().unwrap_or(0))),
            _ => return Err(LeanError::Protocol("an unexpected record after the handshake")),
        }
    };
    // The server closes after a `Connection: close` response: wait for it (a reset is fine).
    records.discard_to_end(tcp).await;
    Ok(Response {
        first_byte: first_byte.unwrap_or_else(Instant::now),
        status,
        len,
    })
}

/// The final response's status and length once `body` holds it whole (interim responses dropped).
fn parse_final(body: &mut Vec<u8>) -> Result<Option<(u16, usize)>, LeanError> {
    loop {
        match parse_response(body, false) {
            Ok(Parsed::Done { len, status, .. }) => return Ok(Some((status, len))),
            Ok(Parsed::Interim { len }) => {
                body.drain(..len);
            }
            Ok(Parsed::Incomplete) => return Ok(None),
            Err(e) => return Err(LeanError::Http(e.to_string())),
        }
    }
}

/// The response when the server closed (a close-delimited body ends there).
fn closed(body: &[u8]) -> Result<(u16, usize), LeanError> {
    match parse_response(body, true) {
        Ok(Parsed::Done { len, status, .. }) => Ok((status, len)),
        _ => Err(LeanError::Http("connection closed before a complete response".into())),
    }
}
