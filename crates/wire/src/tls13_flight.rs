//! A TLS 1.3 server's first flight as a client reads it (RFC 8446): record headers, the
//! ServerHello's cipher suite and key share, the inner content type of a decrypted record, and
//! handshake messages split from the decrypted bytes. Used by `tlsgate bench --lean`, which
//! completes full handshakes with the least client work; every function takes untrusted bytes
//! and returns `None` or an error for anything malformed (fuzz target `server_hello`).

use crate::reader::Reader;

/// Bytes in a TLS record header.
pub const RECORD_HEADER_LEN: usize = 5;
/// Largest TLS 1.3 ciphertext record body (2^14 + 256).
pub const MAX_CIPHERTEXT_LEN: usize = 16_384 + 256;

/// Record content types.
pub const CHANGE_CIPHER_SPEC: u8 = 20;
/// Record content type of alerts.
pub const ALERT: u8 = 21;
/// Record content type of handshake messages.
pub const HANDSHAKE: u8 = 22;
/// Record content type of application data (every encrypted TLS 1.3 record on the wire).
pub const APPLICATION_DATA: u8 = 23;

/// Handshake message types a client meets in a server's first flight.
pub const SERVER_HELLO: u8 = 2;
/// CertificateVerify: its first two bytes name the signature scheme the server used.
pub const CERTIFICATE_VERIFY: u8 = 15;
/// The server's Finished, the last message of its first flight.
pub const FINISHED: u8 = 20;

/// The named group X25519.
pub const X25519: u16 = 0x001d;

/// ServerHello.random of a HelloRetryRequest (RFC 8446 section 4.1.3).
const HELLO_RETRY_RANDOM: [u8; 32] = [
    0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91, 0xc2, 0xa2, 0x11,
    0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
];

/// A record header: content type and body length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    /// Content type (22 handshake, 23 application data, 21 alert, 20 ChangeCipherSpec).
    pub kind: u8,
    /// Length of the body that follows.
    pub len: usize,
}

/// Reads a record header; `None` if the body would be longer than a TLS 1.3 record may be.
pub fn record_header(h: &[u8; RECORD_HEADER_LEN]) -> Option<RecordHeader> {
    let len = usize::from(u16::from_be_bytes([h[3], h[4]]));
    (len <= MAX_CIPHERTEXT_LEN).then_some(RecordHeader { kind: h[0], len })
}

/// What a ServerHello selected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerHello<'a> {
    /// The TLS 1.3 cipher suite.
    pub cipher_suite: u16,
    /// The key share's named group.
    pub group: u16,
    /// The server's key share.
    pub key_share: &'a [u8],
}

/// Why a ServerHello cannot continue a TLS 1.3 full handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerHelloError {
    /// Shorter than its fields or its stated length.
    Truncated,
    /// Not a ServerHello message.
    NotServerHello,
    /// A HelloRetryRequest: the server wants another key share.
    HelloRetryRequest,
    /// No supported_versions extension selecting TLS 1.3.
    NotTls13,
    /// No key_share extension.
    NoKeyShare,
}

impl std::fmt::Display for ServerHelloError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Truncated => "truncated ServerHello",
            Self::NotServerHello => "expected a ServerHello",
            Self::HelloRetryRequest => "the server sent a HelloRetryRequest",
            Self::NotTls13 => "the server did not select TLS 1.3",
            Self::NoKeyShare => "the ServerHello has no key share",
        })
    }
}

impl std::error::Error for ServerHelloError {}

/// Reads a ServerHello handshake message (with its 4-byte header).
pub fn server_hello(msg: &[u8]) -> Result<ServerHello<'_>, ServerHelloError> {
    use ServerHelloError::*;
    let (&kind, rest) = msg.split_first().ok_or(Truncated)?;
    if kind != SERVER_HELLO {
        return Err(NotServerHello);
    }
    let mut r = Reader(rest);
    let body = r.vec24().ok_or(Truncated)?;
    let mut r = Reader(body);
    let _legacy_version = r.take(2).ok_or(Truncated)?;
    if r.take(32).ok_or(Truncated)? == HELLO_RETRY_RANDOM {
        return Err(HelloRetryRequest);
    }
    let _session_id = r.vec8().ok_or(Truncated)?;
    let cipher_suite = r.u16().ok_or(Truncated)?;
    let _compression = r.take(1).ok_or(Truncated)?;
    let mut exts = Reader(r.vec16().ok_or(Truncated)?);
    let (mut tls13, mut share) = (false, None);
    while !exts.0.is_empty() {
        let kind = exts.u16().ok_or(Truncated)?;
        let mut body = Reader(exts.vec16().ok_or(Truncated)?);
        match kind {
            0x002b => tls13 = body.u16() == Some(0x0304),
            0x0033 => {
                let group = body.u16().ok_or(Truncated)?;
                share = Some((group, body.vec16().ok_or(Truncated)?));
            }
            _ => {}
        }
    }
    if !tls13 {
        return Err(NotTls13);
    }
    let (group, key_share) = share.ok_or(NoKeyShare)?;
    Ok(ServerHello {
        cipher_suite,
        group,
        key_share,
    })
}

/// The content type and content of a decrypted TLS 1.3 record (`TLSInnerPlaintext`: the content,
/// its type byte, then zero padding); `None` if it is all padding.
pub fn inner_plaintext(plain: &[u8]) -> Option<(u8, &[u8])> {
    let end = plain.iter().rposition(|&b| b != 0)?;
    Some((plain[end], &plain[..end]))
}

/// The type and the whole length (with its 4-byte header) of the first handshake message in
/// `buf`; `None` until it is complete.
pub fn first_message(buf: &[u8]) -> Option<(u8, usize)> {
    let header = buf.get(..4)?;
    let len = 4 + (usize::from(header[1]) << 16 | usize::from(header[2]) << 8 | usize::from(header[3]));
    (buf.len() >= len).then_some((header[0], len))
}

/// Handshake type of Certificate.
pub const CERTIFICATE: u8 = 11;
/// The `delegated_credential` extension (RFC 9345).
pub const DELEGATED_CREDENTIAL: u16 = 0x0022;

/// Whether a TLS 1.3 Certificate message (with its header) carries a delegated credential: the
/// `delegated_credential` extension in the end-entity's CertificateEntry (RFC 9345 §4.1.1).
/// `None` when the message does not parse.
pub fn certificate_has_delegated_credential(msg: &[u8]) -> Option<bool> {
    let mut r = Reader(msg);
    if r.u8()? != CERTIFICATE {
        return None;
    }
    let mut body = Reader(r.vec24()?);
    body.vec8()?; // certificate_request_context
    let mut list = Reader(body.vec24()?);
    list.vec24()?; // the end-entity's cert_data
    let mut exts = Reader(list.vec16()?);
    while !exts.0.is_empty() {
        let kind = exts.u16()?;
        exts.vec16()?;
        if kind == DELEGATED_CREDENTIAL {
            return Some(true);
        }
    }
    Some(false)
}

/// The signature scheme a CertificateVerify message (with its header) names.
pub fn certificate_verify_scheme(msg: &[u8]) -> Option<u16> {
    match msg {
        [CERTIFICATE_VERIFY, _, _, _, a, b, ..] => Some(u16::from_be_bytes([*a, *b])),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ServerHello with `random`, the given suite and these extensions.
    fn hello(random: [u8; 32], suite: u16, exts: &[(u16, Vec<u8>)]) -> Vec<u8> {
        let mut body = vec![0x03, 0x03];
        body.extend_from_slice(&random);
        body.push(32);
        body.extend_from_slice(&[7; 32]);
        body.extend_from_slice(&suite.to_be_bytes());
        body.push(0);
        let mut ext = Vec::new();
        for (kind, b) in exts {
            ext.extend_from_slice(&kind.to_be_bytes());
            ext.extend_from_slice(&(b.len() as u16).to_be_bytes());
            ext.extend_from_slice(b);
        }
        body.extend_from_slice(&(ext.len() as u16).to_be_bytes());
        body.extend_from_slice(&ext);
        let mut msg = vec![SERVER_HELLO, 0, (body.len() >> 8) as u8, body.len() as u8];
        msg.extend_from_slice(&body);
        msg
    }

    fn share(group: u16, key: &[u8]) -> Vec<u8> {
        let mut b = group.to_be_bytes().to_vec();
        b.extend_from_slice(&(key.len() as u16).to_be_bytes());
        b.extend_from_slice(key);
        b
    }

    #[test]
    fn a_tls13_server_hello_gives_its_suite_and_key_share() {
        let msg = hello(
            [1; 32],
            0x1301,
            &[(0x0033, share(X25519, &[9; 32])), (0x002b, vec![0x03, 0x04])],
        );
        let sh = server_hello(&msg).unwrap();
        assert_eq!(
            (sh.cipher_suite, sh.group, sh.key_share),
            (0x1301, X25519, &[9u8; 32][..])
        );
        // Every shorter prefix is truncated, never a panic or a wrong answer.
        for n in 0..msg.len() {
            assert!(server_hello(&msg[..n]).is_err(), "prefix {n}");
        }
    }

    #[test]
    fn hello_retry_requests_tls12_and_missing_shares_are_refused() {
        let hrr = hello(
            HELLO_RETRY_RANDOM,
            0x1301,
            &[(0x0033, X25519.to_be_bytes().to_vec()), (0x002b, vec![0x03, 0x04])],
        );
        assert_eq!(server_hello(&hrr), Err(ServerHelloError::HelloRetryRequest));
        let tls12 = hello([1; 32], 0xc02b, &[(0x0033, share(X25519, &[9; 32]))]);
        assert_eq!(server_hello(&tls12), Err(ServerHelloError::NotTls13));
        let no_share = hello([1; 32], 0x1301, &[(0x002b, vec![0x03, 0x04])]);
        assert_eq!(server_hello(&no_share), Err(ServerHelloError::NoKeyShare));
        assert_eq!(server_hello(&[1, 0, 0, 0]), Err(ServerHelloError::NotServerHello));
    }

    fn certificate(leaf_exts: &[(u16, &[u8])]) -> Vec<u8> {
        let mut exts = Vec::new();
        for (kind, body) in leaf_exts {
            exts.extend_from_slice(&kind.to_be_bytes());
            exts.extend_from_slice(&(body.len() as u16).to_be_bytes());
            exts.extend_from_slice(body);
        }
        let mut entry = vec![0, 0, 3, 0xaa, 0xbb, 0xcc];
        entry.extend_from_slice(&(exts.len() as u16).to_be_bytes());
        entry.extend_from_slice(&exts);
        // A second entry (an intermediate) without extensions.
        entry.extend_from_slice(&[0, 0, 1, 0xdd, 0, 0]);
        let mut body = vec![0];
        body.extend_from_slice(&(entry.len() as u32).to_be_bytes()[1..]);
        body.extend_from_slice(&entry);
        let mut msg = vec![CERTIFICATE];
        msg.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
        msg.extend_from_slice(&body);
        msg
    }

    #[test]
    fn a_delegated_credential_is_found_in_the_leaf_s_extensions() {
        assert_eq!(certificate_has_delegated_credential(&certificate(&[])), Some(false));
        assert_eq!(
            certificate_has_delegated_credential(&certificate(&[(5, b"ocsp"), (DELEGATED_CREDENTIAL, b"dc")])),
            Some(true)
        );
        assert_eq!(
            certificate_has_delegated_credential(&certificate(&[(5, b"ocsp")])),
            Some(false)
        );
        let whole = certificate(&[(DELEGATED_CREDENTIAL, b"dc")]);
        for cut in 0..whole.len() {
            assert_eq!(
                certificate_has_delegated_credential(&whole[..cut]),
                None,
                "cut at {cut}"
            );
        }
        let mut wrong = whole.clone();
        wrong[0] = 15;
        assert_eq!(certificate_has_delegated_credential(&wrong), None);
    }

    #[test]
    fn records_messages_and_padding() {
        assert_eq!(
            record_header(&[23, 3, 3, 0x01, 0x00]),
            Some(RecordHeader { kind: 23, len: 256 })
        );
        assert_eq!(
            record_header(&[23, 3, 3, 0xff, 0xff]),
            None,
            "longer than a record may be"
        );
        assert_eq!(inner_plaintext(b"abc\x16\0\0"), Some((22, &b"abc"[..])));
        assert_eq!(inner_plaintext(b"\x17"), Some((23, &b""[..])));
        assert_eq!(inner_plaintext(b"\0\0"), None);
        let two = [8, 0, 0, 2, 0, 0, 15, 0, 0, 4, 4, 3, 0, 0];
        assert_eq!(first_message(&two), Some((8, 6)));
        assert_eq!(first_message(&two[6..]), Some((15, 8)));
        assert_eq!(first_message(&two[6..13]), None, "incomplete");
        assert_eq!(certificate_verify_scheme(&two[6..]), Some(0x0403));
        assert_eq!(certificate_verify_scheme(&two), None);
    }
}
