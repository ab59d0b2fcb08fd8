//! What a finished handshake did: version, cipher, group, certificate type and, when resumed,
//! by which mechanism. The mechanism is recorded by the session callbacks themselves (ticket
//! decrypted, session ID found), never guessed.

use crate::keys::KeyType;
use boring::ex_data::Index;
use boring::ssl::{Ssl, SslRef, SslVersion};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::LazyLock;

/// How a handshake went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Resumption {
    /// Full handshake.
    Full,
    /// TLS 1.2 resumed from the session-ID cache.
    SessionId,
    /// TLS 1.2 resumed from a session ticket.
    Ticket,
    /// TLS 1.3 resumed with a PSK from a ticket.
    Tls13Psk,
}

impl Resumption {
    /// Label for metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Resumption::Full => "full",
            Resumption::SessionId => "session_id",
            Resumption::Ticket => "ticket",
            Resumption::Tls13Psk => "tls13_psk",
        }
    }
}

const MARK_TICKET: u8 = 1;
const MARK_SESSION_ID: u8 = 2;
const MARK_SNI_REJECTED: u8 = 4;

struct Trace(AtomicU8);

static TRACE_INDEX: LazyLock<Index<Ssl, Trace>> =
    LazyLock::new(|| Ssl::new_ex_index().expect("BoringSSL ex_data index"));

/// Prepares a new connection so the session callbacks can record what they did.
pub fn attach(ssl: &mut SslRef) {
    ssl.set_ex_data(*TRACE_INDEX, Trace(AtomicU8::new(0)));
}

fn mark(ssl: &SslRef, what: u8) {
    if let Some(t) = ssl.ex_data(*TRACE_INDEX) {
        t.0.fetch_or(what, Ordering::Relaxed);
    }
}

pub(crate) fn mark_ticket(ssl: &SslRef) {
    mark(ssl, MARK_TICKET);
}

pub(crate) fn mark_session_id(ssl: &SslRef) {
    mark(ssl, MARK_SESSION_ID);
}

pub(crate) fn mark_sni_rejected(ssl: &SslRef) {
    mark(ssl, MARK_SNI_REJECTED);
}

/// Whether the handshake was refused because its SNI matched no site (`unknown_sni = "reject"`).
pub fn sni_rejected(ssl: &SslRef) -> bool {
    ssl.ex_data(*TRACE_INDEX)
        .is_some_and(|t| t.0.load(Ordering::Relaxed) & MARK_SNI_REJECTED != 0)
}

/// A summary of a completed handshake.
#[derive(Debug, Clone)]
pub struct HandshakeInfo {
    /// `TLSv1.2` or `TLSv1.3`.
    pub version: &'static str,
    /// IANA-style cipher name, e.g. `TLS_AES_128_GCM_SHA256`.
    pub cipher: &'static str,
    /// Key-exchange group, e.g. `X25519MLKEM768`.
    pub group: &'static str,
    /// Full or resumed, and how.
    pub resumption: Resumption,
    /// Type of the certificate's key served.
    pub cert_type: KeyType,
    /// Negotiated ALPN protocol, if any.
    pub alpn: Option<Vec<u8>>,
    /// An OCSP staple was sent (counted per certificate by the first `read`).
    pub stapled: bool,
    /// 0-RTT early data was accepted (the handshake is confirmed only after it).
    pub early_data: bool,
}

impl HandshakeInfo {
    /// Reads the summary off a connection whose handshake has completed.
    pub fn read(ssl: &SslRef) -> Self {
        let tls13 = ssl.version2() == Some(SslVersion::TLS1_3);
        let resumption = if !ssl.session_reused() {
            Resumption::Full
        } else if tls13 {
            Resumption::Tls13Psk
        } else {
            let marks = ssl.ex_data(*TRACE_INDEX).map_or(0, |t| t.0.load(Ordering::Relaxed));
            if marks & MARK_SESSION_ID != 0 {
                Resumption::SessionId
            } else {
                Resumption::Ticket
            }
        };
        let cipher = ssl
            .current_cipher()
            .and_then(|c| c.standard_name())
            .unwrap_or("unknown");
        Self {
            version: ssl.version_str(),
            cipher,
            group: ssl.curve_name().unwrap_or("none"),
            resumption,
            cert_type: crate::context::served_key_type(ssl),
            alpn: ssl.selected_alpn_protocol().map(<[u8]>::to_vec),
            stapled: crate::ocsp::handshake_stapled(ssl),
            early_data: crate::ffi::early_data_accepted(ssl),
        }
    }
}
