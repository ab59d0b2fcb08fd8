//! Why one side of a connection failed, as BoringSSL's reason codes.

/// A received alert shows up on the error stack as reason `SSL_AD_REASON_OFFSET + alert`.
const ALERT_REASON_OFFSET: i32 = boring_sys::SSL_AD_REASON_OFFSET;

/// Why one side failed: the reason codes on BoringSSL's error stack, and the whole message.
#[derive(Debug, Clone)]
pub struct Failure {
    pub reasons: Vec<i32>,
    pub text: String,
}

impl Failure {
    pub(super) fn from_ssl_error(e: &boring::ssl::Error, context: &str) -> Self {
        let reasons = e
            .ssl_error()
            .map(|stack| stack.errors().iter().map(|err| err.reason_code()).collect())
            .unwrap_or_default();
        Self {
            reasons,
            text: format!("{context}: {e}"),
        }
    }

    pub(super) fn from_io(e: &std::io::Error, context: &str) -> Self {
        match e.get_ref().and_then(|inner| inner.downcast_ref::<boring::ssl::Error>()) {
            Some(ssl) => Self::from_ssl_error(ssl, context),
            None => Self {
                reasons: Vec::new(),
                text: format!("{context}: {e}"),
            },
        }
    }

    pub(super) fn from_handshake<S: std::fmt::Debug>(e: &tokio_boring::HandshakeError<S>, context: &str) -> Self {
        use std::error::Error as _;
        match e.source().and_then(|s| s.downcast_ref::<boring::ssl::Error>()) {
            Some(ssl) => Self::from_ssl_error(ssl, context),
            None => Self {
                reasons: Vec::new(),
                text: format!("{context}: {e}"),
            },
        }
    }

    pub(super) fn other(text: impl Into<String>) -> Self {
        Self {
            reasons: Vec::new(),
            text: text.into(),
        }
    }

    /// Whether the peer's alert `alert` (`SSL_AD_*`) is on the stack.
    pub fn received_alert(&self, alert: i32) -> bool {
        self.reasons.contains(&(ALERT_REASON_OFFSET + alert))
    }

    /// Whether BoringSSL's reason `reason` (an `SSL_R_*` value) is on the stack.
    pub fn has_reason(&self, reason: i32) -> bool {
        self.reasons.contains(&reason)
    }
}
