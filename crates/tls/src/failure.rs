//! Why a server-side TLS handshake failed, for the `reason` label of
//! `tlsgate_handshake_failures_total` and the decision to answer plain HTTP in plain HTTP.
//!
//! The failure is read from BoringSSL's error stack by library and reason code (`ERR_LIB_SSL`
//! and its `SSL_R_*` values; a reason at or above `SSL_AD_REASON_OFFSET` is an alert the peer
//! sent), and from the I/O error kind when the transport failed: never from message text, which
//! BoringSSL may reword. Where the stack holds several errors, the most specific wins, in the
//! order of [`HandshakeFailure`]'s variants.

use crate::handshake_info;
use boring::error::ErrorStack;
use boring::ssl::{ErrorCode, SslRef};
use std::io;
use std::os::raw::c_int;
use tlsgate_error::{Classify, Side};

/// Why a handshake failed. The variants are ordered from most to least specific.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, thiserror::Error)]
pub enum HandshakeFailure {
    /// Plain HTTP (or an HTTPS proxy's CONNECT) sent to a TLS port.
    #[error("plain HTTP sent to a TLS port")]
    PlaintextHttp,
    /// No protocol version, cipher suite, group or signature algorithm in common.
    #[error("no protocol version, cipher, group or signature algorithm in common")]
    NoSharedParameters,
    /// The server name matched no site (`unknown_sni = "reject"`) or certificate selection refused.
    #[error("the server name matches no site")]
    UnknownSni,
    /// The client's source was over its handshake budget (`[server.handshake_budget]`).
    #[error("the client's source is over its handshake budget")]
    HandshakeBudget,
    /// An `[[access_rule]]` denied the client's JA4 fingerprint (after the ClientHello).
    #[error("an access rule denied the client's fingerprint")]
    AccessDenied,
    /// The site requires a client certificate (`[site.client_auth] mode = "required"`) and the
    /// client sent none.
    #[error("the client sent no certificate where one is required")]
    ClientCertMissing,
    /// The client's certificate did not verify against the site's client CAs (unknown issuer,
    /// expired, not for client authentication, chain too long).
    #[error("the client certificate did not verify")]
    ClientCertInvalid,
    /// Records or handshake messages that do not parse, or arrive out of order.
    #[error("malformed TLS records or handshake messages")]
    Malformed,
    /// The client sent an alert (it refused something of ours, or gave up).
    #[error("the client sent an alert")]
    ClientAlert,
    /// The client closed or reset the connection mid-handshake.
    #[error("the client closed the connection")]
    ClientClosed,
    /// The client sent nothing before the silent-connection timeout.
    #[error("the client sent nothing")]
    Silent,
    /// The handshake did not finish within the handshake timeout.
    #[error("the handshake timed out")]
    Timeout,
    /// Anything else.
    #[error("the handshake failed")]
    Other,
}

/// `ERR_LIB_SSL`, as `Error::library_code` reports it.
const LIB_SSL: c_int = boring_sys::ERR_LIB_SSL.0 as c_int;

impl HandshakeFailure {
    /// The metric label (`tlsgate_handshake_failures_total{reason}`).
    pub fn label(self) -> &'static str {
        match self {
            HandshakeFailure::PlaintextHttp => "plaintext_http",
            HandshakeFailure::NoSharedParameters => "no_shared_parameters",
            HandshakeFailure::UnknownSni => "unknown_sni",
            HandshakeFailure::HandshakeBudget => "handshake_budget",
            HandshakeFailure::AccessDenied => "access_denied",
            HandshakeFailure::ClientCertMissing => "client_cert_missing",
            HandshakeFailure::ClientCertInvalid => "client_cert_invalid",
            HandshakeFailure::Malformed => "malformed",
            HandshakeFailure::ClientAlert => "client_alert",
            HandshakeFailure::ClientClosed => "client_closed",
            HandshakeFailure::Silent => "silent",
            HandshakeFailure::Timeout => "timeout",
            HandshakeFailure::Other => "other",
        }
    }

    /// Classifies one library/reason pair of BoringSSL's error queue; None when it says nothing
    /// this enum distinguishes.
    pub fn from_reason(library: c_int, reason: c_int) -> Option<Self> {
        use boring_sys as b;
        if library != LIB_SSL {
            return None;
        }
        if reason >= b::SSL_AD_REASON_OFFSET {
            return Some(HandshakeFailure::ClientAlert);
        }
        Some(match reason {
            b::SSL_R_HTTP_REQUEST | b::SSL_R_HTTPS_PROXY_REQUEST => HandshakeFailure::PlaintextHttp,
            b::SSL_R_NO_SHARED_CIPHER
            | b::SSL_R_NO_SHARED_GROUP
            | b::SSL_R_UNSUPPORTED_PROTOCOL
            | b::SSL_R_NO_COMMON_SIGNATURE_ALGORITHMS => HandshakeFailure::NoSharedParameters,
            b::SSL_R_CERT_CB_ERROR | b::SSL_R_CONNECTION_REJECTED => HandshakeFailure::UnknownSni,
            b::SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE => HandshakeFailure::ClientCertMissing,
            b::SSL_R_CERTIFICATE_VERIFY_FAILED => HandshakeFailure::ClientCertInvalid,
            b::SSL_R_WRONG_VERSION_NUMBER
            | b::SSL_R_DECODE_ERROR
            | b::SSL_R_CLIENTHELLO_PARSE_FAILED
            | b::SSL_R_PARSE_TLSEXT
            | b::SSL_R_UNEXPECTED_RECORD
            | b::SSL_R_UNEXPECTED_MESSAGE
            | b::SSL_R_BAD_PACKET_LENGTH
            | b::SSL_R_EXCESSIVE_MESSAGE_SIZE
            | b::SSL_R_DATA_LENGTH_TOO_LONG
            | b::SSL_R_ENCRYPTED_LENGTH_TOO_LONG
            | b::SSL_R_RECORD_LENGTH_MISMATCH => HandshakeFailure::Malformed,
            _ => return None,
        })
    }

    /// The most specific failure on an error stack, if any.
    pub fn from_error_stack(stack: &ErrorStack) -> Option<Self> {
        stack
            .errors()
            .iter()
            .filter_map(|e| Self::from_reason(e.library_code(), e.reason_code()))
            .min()
    }

    /// A transport error: the client closing or resetting the connection, or something else.
    pub fn from_io(e: &io::Error) -> Self {
        match e.kind() {
            io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe => {
                HandshakeFailure::ClientClosed
            }
            _ => HandshakeFailure::Other,
        }
    }

    /// A failed handshake step: its error stack first, then its I/O error; `SSL_ERROR_SYSCALL`
    /// with neither is the peer's EOF.
    pub fn from_ssl_error(e: &boring::ssl::Error) -> Self {
        if let Some(failure) = e.ssl_error().and_then(Self::from_error_stack) {
            return failure;
        }
        if let Some(io) = e.io_error() {
            return Self::from_io(io);
        }
        if e.code() == ErrorCode::SYSCALL && e.ssl_error().is_none() {
            return HandshakeFailure::ClientClosed;
        }
        HandshakeFailure::Other
    }

    /// A failed handshake on connection `ssl` (when there is one): refused for its SNI (recorded
    /// by certificate selection), else what the error says.
    pub fn classify(ssl: Option<&SslRef>, e: &boring::ssl::Error) -> Self {
        if ssl.is_some_and(crate::handshake_budget::refused) {
            return HandshakeFailure::HandshakeBudget;
        }
        if ssl.is_some_and(crate::fingerprint::denied) {
            return HandshakeFailure::AccessDenied;
        }
        if ssl.is_some_and(handshake_info::sni_rejected) {
            return HandshakeFailure::UnknownSni;
        }
        Self::from_ssl_error(e)
    }

    /// What `tokio_boring::accept` failed with.
    pub fn of<S: std::fmt::Debug>(e: &tokio_boring::HandshakeError<S>) -> Self {
        match handshake_error(e) {
            (Some(ssl_error), _) => Self::classify(e.ssl(), ssl_error),
            (None, _) if e.ssl().is_some_and(crate::handshake_budget::refused) => HandshakeFailure::HandshakeBudget,
            (None, _) if e.ssl().is_some_and(crate::fingerprint::denied) => HandshakeFailure::AccessDenied,
            (None, _) if e.ssl().is_some_and(handshake_info::sni_rejected) => HandshakeFailure::UnknownSni,
            (None, stack) => stack
                .and_then(Self::from_error_stack)
                .unwrap_or(HandshakeFailure::Other),
        }
    }
}

/// The error inside a tokio-boring handshake error: a failed handshake step, or (setup failed)
/// a bare error stack.
fn handshake_error<S: std::fmt::Debug>(
    e: &tokio_boring::HandshakeError<S>,
) -> (Option<&boring::ssl::Error>, Option<&ErrorStack>) {
    use std::error::Error as _;
    let source = e.source();
    match source.and_then(|s| s.downcast_ref::<boring::ssl::Error>()) {
        Some(ssl_error) => (Some(ssl_error), ssl_error.ssl_error()),
        None => (None, source.and_then(|s| s.downcast_ref::<ErrorStack>())),
    }
}

/// The alert a peer sent, if one ended the handshake (e.g. 40, `handshake_failure`).
pub fn received_alert(stack: &ErrorStack) -> Option<u8> {
    let ssl_errors = stack.errors().iter().filter(|e| e.library_code() == LIB_SSL);
    ssl_errors
        .filter_map(|e| e.reason_code().checked_sub(boring_sys::SSL_AD_REASON_OFFSET))
        .find_map(|alert| u8::try_from(alert).ok())
}

/// The alert the peer sent, if one ended a tokio-boring handshake (client or server side).
pub fn peer_alert<S: std::fmt::Debug>(e: &tokio_boring::HandshakeError<S>) -> Option<u8> {
    handshake_error(e).1.and_then(received_alert)
}

/// Every handshake failure is the client's side of the gateway.
impl Classify for HandshakeFailure {
    fn side(&self) -> Side {
        Side::Downstream
    }

    fn kind(&self) -> &'static str {
        self.label()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_tls::{server_ctx, End, Handshake, Side as Ended};
    use boring::ssl::{MidHandshakeSslStream, SelectCertError, SslVerifyMode, SslVersion};

    fn failed(side: Ended) -> MidHandshakeSslStream<End> {
        match side {
            Ok(_) => panic!("the handshake must fail"),
            Err(mid) => mid,
        }
    }

    /// The server's verdict on `bytes` sent by a client that then closes.
    fn server_fed(bytes: &[u8]) -> HandshakeFailure {
        let ctx = server_ctx(|_| {});
        let failed = failed(Handshake::server_only(&ctx, bytes));
        HandshakeFailure::classify(Some(failed.ssl()), failed.error())
    }

    fn server_failure(hs: &Handshake) -> Option<HandshakeFailure> {
        let failed = hs.server.as_ref().err()?;
        Some(HandshakeFailure::classify(Some(failed.ssl()), failed.error()))
    }

    #[test]
    fn plain_http_and_proxy_requests() {
        assert_eq!(
            server_fed(b"GET / HTTP/1.1\r\nHost: example\r\n\r\n"),
            HandshakeFailure::PlaintextHttp
        );
        assert_eq!(server_fed(b"POST /x HTTP/1.1\r\n\r\n"), HandshakeFailure::PlaintextHttp);
        assert_eq!(
            server_fed(b"CONNECT example:443 HTTP/1.1\r\n\r\n"),
            HandshakeFailure::PlaintextHttp
        );
        assert_eq!(HandshakeFailure::PlaintextHttp.label(), "plaintext_http");
    }

    #[test]
    fn malformed_records_and_hellos() {
        for (name, bytes) in [
            ("bad record version", &b"\x16\xfe\xfe\x00\x05hello"[..]),
            ("application data first", b"\x17\x03\x03\x00\x05hello"),
            ("oversized record", b"\x16\x03\x01\xff\xff\x01\x00\x00\x04"),
            (
                "binary garbage",
                b"\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f",
            ),
            (
                "truncated ClientHello",
                b"\x16\x03\x01\x00\x08\x01\x00\x00\x04\x03\x03\xff\xff",
            ),
            (
                "garbage ClientHello",
                b"\x16\x03\x01\x00\x2f\x01\x00\x00\x2b\x03\x03garbage-garbage-garbage-garbage-garbage!!",
            ),
        ] {
            assert_eq!(server_fed(bytes), HandshakeFailure::Malformed, "{name}");
        }
        assert_eq!(HandshakeFailure::Malformed.label(), "malformed");
    }

    #[test]
    fn closed_and_reset_connections() {
        assert_eq!(server_fed(b""), HandshakeFailure::ClientClosed, "EOF before anything");
        assert_eq!(
            server_fed(b"\x16\x03\x01\x00\xc8\x01\x00"),
            HandshakeFailure::ClientClosed,
            "EOF mid-record"
        );
        let ctx = server_ctx(|_| {});
        for kind in [
            io::ErrorKind::ConnectionReset,
            io::ErrorKind::BrokenPipe,
            io::ErrorKind::UnexpectedEof,
        ] {
            let failed = failed(Handshake::server_read_error(&ctx, kind));
            assert!(
                failed.error().io_error().is_some(),
                "{kind:?}: the transport's error is kept"
            );
            assert_eq!(
                HandshakeFailure::from_ssl_error(failed.error()),
                HandshakeFailure::ClientClosed,
                "{kind:?}"
            );
        }
        let failed = failed(Handshake::server_read_error(&ctx, io::ErrorKind::PermissionDenied));
        assert_eq!(
            HandshakeFailure::from_ssl_error(failed.error()),
            HandshakeFailure::Other
        );
        assert_eq!(HandshakeFailure::ClientClosed.label(), "client_closed");
    }

    #[test]
    fn nothing_in_common() {
        // Versions: a TLS 1.2-only client, a TLS 1.3-only server.
        let server = server_ctx(|b| b.set_min_proto_version(Some(SslVersion::TLS1_3)).unwrap());
        let hs = Handshake::run(&server, |b| b.set_max_proto_version(Some(SslVersion::TLS1_2)).unwrap());
        assert_eq!(server_failure(&hs), Some(HandshakeFailure::NoSharedParameters));
        // TLS 1.2 cipher suites.
        let server = server_ctx(|b| {
            b.set_max_proto_version(Some(SslVersion::TLS1_2)).unwrap();
            b.set_cipher_list("ECDHE-ECDSA-AES128-GCM-SHA256").unwrap();
        });
        let hs = Handshake::run(&server, |b| b.set_cipher_list("ECDHE-ECDSA-CHACHA20-POLY1305").unwrap());
        assert_eq!(server_failure(&hs), Some(HandshakeFailure::NoSharedParameters));
        // TLS 1.3 key-exchange groups.
        let server = server_ctx(|b| b.set_curves_list("X25519").unwrap());
        let hs = Handshake::run(&server, |b| b.set_curves_list("P-384").unwrap());
        assert_eq!(server_failure(&hs), Some(HandshakeFailure::NoSharedParameters));
        // The client's peer sees the server's handshake_failure alert.
        let stack = hs.client_error().and_then(|e| e.ssl_error()).expect("an error stack");
        assert_eq!(received_alert(stack), Some(boring_sys::SSL_AD_HANDSHAKE_FAILURE as u8));
        assert_eq!(HandshakeFailure::NoSharedParameters.label(), "no_shared_parameters");
    }

    #[test]
    fn alerts_from_the_client() {
        // The client trusts nothing, so it refuses the server's certificate with an alert.
        let server = server_ctx(|_| {});
        let hs = Handshake::run(&server, |b| b.set_verify(SslVerifyMode::PEER));
        assert_eq!(server_failure(&hs), Some(HandshakeFailure::ClientAlert));
        let stack = hs.server_error().and_then(|e| e.ssl_error()).expect("an error stack");
        assert!(received_alert(stack).is_some(), "{stack}");
        assert_eq!(HandshakeFailure::ClientAlert.label(), "client_alert");
    }

    #[test]
    fn refused_certificate_selection_is_unknown_sni() {
        let server = server_ctx(|b| b.set_select_certificate_callback(|_| Err(SelectCertError::ERROR)));
        let hs = Handshake::run(&server, |_| {});
        assert_eq!(server_failure(&hs), Some(HandshakeFailure::UnknownSni));
        // A connection marked by certificate selection is unknown_sni whatever the error says.
        let ctx = server_ctx(|_| {});
        let failed = failed(Handshake::server_only_with(&ctx, b"GET / HTTP/1.0\r\n\r\n", |ssl| {
            handshake_info::attach(ssl);
            handshake_info::mark_sni_rejected(ssl);
        }));
        assert_eq!(
            HandshakeFailure::classify(Some(failed.ssl()), failed.error()),
            HandshakeFailure::UnknownSni
        );
        assert_eq!(HandshakeFailure::UnknownSni.label(), "unknown_sni");
    }

    #[test]
    fn a_successful_handshake_is_not_a_failure_and_other_libraries_say_nothing() {
        let server = server_ctx(|_| {});
        let hs = Handshake::run(&server, |_| {});
        assert!(hs.server.is_ok() && hs.client.is_ok());
        assert_eq!(
            HandshakeFailure::from_reason(LIB_SSL + 1, boring_sys::SSL_R_HTTP_REQUEST),
            None
        );
        assert_eq!(HandshakeFailure::from_reason(LIB_SSL, 1), None);
        let labels: Vec<&str> = [
            HandshakeFailure::Silent,
            HandshakeFailure::Timeout,
            HandshakeFailure::Other,
        ]
        .iter()
        .map(|f| f.label())
        .collect();
        assert_eq!(labels, ["silent", "timeout", "other"]);
        assert_eq!(HandshakeFailure::Timeout.side(), Side::Downstream);
        assert_eq!(HandshakeFailure::Timeout.kind(), "timeout");
    }
}
