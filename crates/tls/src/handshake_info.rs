//! What a finished handshake did: version, cipher, group, certificate type and, when resumed,
//! by which mechanism. The mechanism is recorded by the session callbacks themselves (ticket
//! decrypted, session ID found), never guessed.
//!
//! Facts flow down into this module: the modules above it (`context`, `ocsp`, `tickets`,
//! `session_cache`) record what they did on the connection's trace while the handshake runs,
//! and [`HandshakeInfo::read`] reads the trace afterwards; this module imports none of them.

use crate::ffi;
use crate::keys::KeyType;
use boring::ex_data::Index;
use boring::ssl::{Ssl, SslRef, SslVersion};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, LazyLock};

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
const MARK_TICKET_ISSUED: u8 = 8;

/// Counts the handshakes that sent a staple (implemented by the OCSP staple slot).
pub(crate) trait StapleCounter: Send + Sync {
    /// One more completed full handshake carried this certificate's staple.
    fn count_stapled(&self);
}

/// What the callbacks of one connection recorded. The session callbacks see the connection only
/// by shared reference, hence the atomics; certificate selection sees it by `&mut`.
struct Trace {
    marks: AtomicU8,
    /// Key type of the certificate selected (set by `context` at certificate selection).
    cert: Option<KeyType>,
    /// The staple sent, and whether it was counted yet (set by `ocsp` at certificate selection).
    staple: Option<(Arc<dyn StapleCounter>, AtomicBool)>,
}

static TRACE_INDEX: LazyLock<Index<Ssl, Trace>> =
    LazyLock::new(|| Ssl::new_ex_index().expect("BoringSSL ex_data index"));

/// Prepares a new connection so the callbacks can record what they did.
pub fn attach(ssl: &mut SslRef) {
    ssl.set_ex_data(
        *TRACE_INDEX,
        Trace {
            marks: AtomicU8::new(0),
            cert: None,
            staple: None,
        },
    );
}

fn mark(ssl: &SslRef, what: u8) {
    if let Some(t) = ssl.ex_data(*TRACE_INDEX) {
        t.marks.fetch_or(what, Ordering::Relaxed);
    }
}

fn marks(ssl: &SslRef) -> u8 {
    ssl.ex_data(*TRACE_INDEX).map_or(0, |t| t.marks.load(Ordering::Relaxed))
}

pub(crate) fn mark_ticket(ssl: &SslRef) {
    mark(ssl, MARK_TICKET);
}

/// Notes that a new ticket is being issued on `ssl`; true for the connection's first (and for a
/// connection with no trace, which is then never limited).
pub(crate) fn first_ticket_issued(ssl: &SslRef) -> bool {
    ssl.ex_data(*TRACE_INDEX)
        .is_none_or(|t| t.marks.fetch_or(MARK_TICKET_ISSUED, Ordering::Relaxed) & MARK_TICKET_ISSUED == 0)
}

pub(crate) fn mark_session_id(ssl: &SslRef) {
    mark(ssl, MARK_SESSION_ID);
}

pub(crate) fn mark_sni_rejected(ssl: &SslRef) {
    mark(ssl, MARK_SNI_REJECTED);
}

/// Records the key type of the certificate selected for this connection.
pub(crate) fn record_certificate(ssl: &mut SslRef, key_type: KeyType) {
    if let Some(t) = ssl.ex_data_mut(*TRACE_INDEX) {
        t.cert = Some(key_type);
    }
}

/// Records that this connection was given a staple, counted by `counter` once its (full)
/// handshake completes.
pub(crate) fn record_staple(ssl: &mut SslRef, counter: Arc<dyn StapleCounter>) {
    if let Some(t) = ssl.ex_data_mut(*TRACE_INDEX) {
        t.staple = Some((counter, AtomicBool::new(false)));
    }
}

/// Whether the handshake was refused because its SNI matched no site (`unknown_sni = "reject"`).
pub fn sni_rejected(ssl: &SslRef) -> bool {
    marks(ssl) & MARK_SNI_REJECTED != 0
}

/// Whether a completed handshake sent a staple (resumed handshakes send no certificate, so no
/// staple). The first call per connection counts it for the certificate's metric.
pub(crate) fn stapled(ssl: &SslRef) -> bool {
    if ssl.session_reused() {
        return false;
    }
    let Some((counter, counted)) = ssl.ex_data(*TRACE_INDEX).and_then(|t| t.staple.as_ref()) else {
        return false;
    };
    if !counted.swap(true, Ordering::Relaxed) {
        counter.count_stapled();
    }
    true
}

/// Key type of the certificate a connection was served (`Other` before selection).
pub(crate) fn served_key_type(ssl: &SslRef) -> KeyType {
    ssl.ex_data(*TRACE_INDEX).and_then(|t| t.cert).unwrap_or(KeyType::Other)
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
            if marks(ssl) & MARK_SESSION_ID != 0 {
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
            cert_type: served_key_type(ssl),
            alpn: ssl.selected_alpn_protocol().map(<[u8]>::to_vec),
            stapled: stapled(ssl),
            early_data: ffi::early_data_accepted(ssl),
        }
    }
}
