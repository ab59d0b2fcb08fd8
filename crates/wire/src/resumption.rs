//! What a ClientHello offers for resumption, read before the server decides: the TLS 1.3 PSK
//! identity, the TLS 1.2 session ticket, or the TLS 1.2 session ID. The handshake budget uses it
//! to tell a hello that may resume (cheap: no signature) from one that will be a full handshake.
//!
//! The answer is what the client *offers*, not whether the server will accept it; the caller
//! decides how far to trust it (tlsgate checks a ticket's key name, and charges a handshake that
//! signs anyway as full). Every function takes untrusted bytes and never panics (fuzz target
//! `resumption_offer`).

use crate::client_hello::{first_psk_identity, u16_items};

/// TLS 1.3's number in `supported_versions`.
const TLS13: u16 = 0x0304;
/// Longest legacy session ID (RFC 5246 §7.4.1.2).
const MAX_SESSION_ID: usize = 32;

/// What a ClientHello offers to resume with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResumptionOffer<'a> {
    /// Nothing that could resume: a full handshake.
    None,
    /// TLS 1.3 will be negotiated and the first PSK identity is this (for tlsgate's own tickets,
    /// the ticket itself).
    Tls13Psk(&'a [u8]),
    /// TLS 1.2 will be negotiated and the client sends this non-empty session ticket.
    Tls12Ticket(&'a [u8]),
    /// TLS 1.2 will be negotiated and the client sends this non-empty session ID.
    Tls12SessionId(&'a [u8]),
}

/// The parts of a ClientHello that [`offer`] reads, as BoringSSL's certificate-selection hook
/// hands them over (extension bodies without their type and length).
#[derive(Debug, Clone, Copy, Default)]
pub struct HelloParts<'a> {
    /// The ClientHello message body (from `legacy_version` on, no handshake header).
    pub body: &'a [u8],
    /// The `supported_versions` extension.
    pub supported_versions: Option<&'a [u8]>,
    /// The `pre_shared_key` extension.
    pub pre_shared_key: Option<&'a [u8]>,
    /// The `session_ticket` extension.
    pub session_ticket: Option<&'a [u8]>,
}

/// What `hello` offers for resumption on a server that negotiates TLS 1.3 when offered
/// (`server_tls13`) and otherwise TLS 1.2. A TLS 1.3 handshake ignores the legacy session ID (every
/// TLS 1.3 client sends one for middlebox compatibility) and the ticket extension; a TLS 1.2
/// handshake ignores the PSK extension and prefers a ticket to a session ID, as BoringSSL does.
pub fn offer(hello: HelloParts<'_>, server_tls13: bool) -> ResumptionOffer<'_> {
    let tls13 = server_tls13
        && hello
            .supported_versions
            .is_some_and(|v| u16_items(v, 1).any(|v| v == TLS13));
    if tls13 {
        return match hello.pre_shared_key.and_then(first_psk_identity) {
            Some(identity) => ResumptionOffer::Tls13Psk(identity),
            None => ResumptionOffer::None,
        };
    }
    if let Some(ticket) = hello.session_ticket.filter(|t| !t.is_empty()) {
        return ResumptionOffer::Tls12Ticket(ticket);
    }
    match session_id(hello.body) {
        Some(id) if !id.is_empty() => ResumptionOffer::Tls12SessionId(id),
        _ => ResumptionOffer::None,
    }
}

/// The legacy session ID of a ClientHello body (`legacy_version`, 32 random bytes, then the
/// ID with a one-byte length of at most 32); None when the body is too short or the length is
/// out of range.
pub fn session_id(body: &[u8]) -> Option<&[u8]> {
    let len = usize::from(*body.get(34)?);
    if len > MAX_SESSION_ID {
        return None;
    }
    body.get(35..35 + len)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ClientHello body with session ID `id` (cipher suites and the rest left out: unread).
    fn body(id: &[u8]) -> Vec<u8> {
        let mut b = vec![0x03, 0x03];
        b.extend_from_slice(&[7; 32]);
        b.push(id.len() as u8);
        b.extend_from_slice(id);
        b.extend_from_slice(&[0x00, 0x02, 0x13, 0x01]);
        b
    }

    /// A `pre_shared_key` extension with one identity.
    fn psk(identity: &[u8]) -> Vec<u8> {
        let mut ids = (identity.len() as u16).to_be_bytes().to_vec();
        ids.extend_from_slice(identity);
        ids.extend_from_slice(&[0, 0, 0, 1]);
        let mut ext = (ids.len() as u16).to_be_bytes().to_vec();
        ext.extend_from_slice(&ids);
        ext.extend_from_slice(&[0x00, 0x21, 0x20]);
        ext.extend_from_slice(&[9; 32]);
        ext
    }

    const V13_AND_12: &[u8] = &[4, 0x03, 0x04, 0x03, 0x03];
    const V12: &[u8] = &[2, 0x03, 0x03];

    #[test]
    fn tls13_reads_the_psk_only() {
        let id = body(&[1; 32]);
        let ext = psk(b"ticket-bytes");
        let parts = HelloParts {
            body: &id,
            supported_versions: Some(V13_AND_12),
            pre_shared_key: Some(&ext),
            session_ticket: Some(b"a 1.2 ticket"),
        };
        assert_eq!(offer(parts, true), ResumptionOffer::Tls13Psk(b"ticket-bytes"));
        // Without a PSK, the compatibility session ID and the ticket extension mean nothing.
        let no_psk = HelloParts {
            pre_shared_key: None,
            ..parts
        };
        assert_eq!(offer(no_psk, true), ResumptionOffer::None);
        // A malformed PSK extension offers nothing.
        let bad = HelloParts {
            pre_shared_key: Some(&[0x00, 0x09, 0x00]),
            ..parts
        };
        assert_eq!(offer(bad, true), ResumptionOffer::None);
    }

    #[test]
    fn tls12_prefers_a_ticket_to_a_session_id() {
        let id = body(&[1; 32]);
        let parts = HelloParts {
            body: &id,
            supported_versions: Some(V12),
            pre_shared_key: None,
            session_ticket: Some(b"ticket"),
        };
        assert_eq!(offer(parts, true), ResumptionOffer::Tls12Ticket(b"ticket"));
        let empty_ticket = HelloParts {
            session_ticket: Some(b""),
            ..parts
        };
        assert_eq!(offer(empty_ticket, true), ResumptionOffer::Tls12SessionId(&[1; 32]));
        let none = body(&[]);
        let fresh = HelloParts {
            body: &none,
            session_ticket: None,
            ..parts
        };
        assert_eq!(offer(fresh, true), ResumptionOffer::None);
    }

    #[test]
    fn a_server_without_tls13_reads_tls13_hellos_as_tls12() {
        let id = body(&[5; 16]);
        let ext = psk(b"ticket");
        let parts = HelloParts {
            body: &id,
            supported_versions: Some(V13_AND_12),
            pre_shared_key: Some(&ext),
            session_ticket: None,
        };
        assert_eq!(offer(parts, false), ResumptionOffer::Tls12SessionId(&[5; 16]));
        // No supported_versions at all: TLS 1.2.
        let old = HelloParts {
            supported_versions: None,
            ..parts
        };
        assert_eq!(offer(old, true), ResumptionOffer::Tls12SessionId(&[5; 16]));
    }

    #[test]
    fn session_ids_out_of_range_or_truncated_are_none() {
        assert_eq!(session_id(&body(&[3; 32])), Some(&[3; 32][..]));
        assert_eq!(session_id(&body(&[])), Some(&[][..]));
        let mut long = body(&[]);
        long[34] = 33;
        long.extend_from_slice(&[0; 40]);
        assert_eq!(session_id(&long), None, "length above 32");
        let short = body(&[3; 32]);
        assert_eq!(session_id(&short[..40]), None, "truncated");
        assert_eq!(session_id(&[]), None);
        assert_eq!(session_id(&short[..34]), None, "no length byte");
    }

    #[test]
    fn garbage_never_panics() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for len in 0..300 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect();
            let third = bytes.len() / 3;
            let parts = HelloParts {
                body: &bytes,
                supported_versions: Some(&bytes[..third]),
                pre_shared_key: Some(&bytes[third..]),
                session_ticket: Some(&bytes[2 * third..]),
            };
            let _ = offer(parts, true);
            let _ = offer(parts, false);
        }
    }
}
