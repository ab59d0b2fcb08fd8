//! Plain facts about a connection and a request's trip upstream, gathered where they happen
//! (the handshake in `conn`, forwarding in `upstream`) and read by the access log. A leaf: it
//! depends on no other module of the data path.

use crate::upstream::request_body::SendState;
use std::sync::Arc;
use std::time::Duration;

/// What a connection's TLS handshake established, for the access log (read once per connection).
#[derive(Debug, Clone)]
pub struct TlsFacts {
    /// Server name the client sent (SNI), if any.
    pub sni: Option<Arc<str>>,
    /// `TLSv1.2` / `TLSv1.3`.
    pub version: &'static str,
    /// Cipher suite (IANA name).
    pub cipher: &'static str,
    /// `full`, `session_id`, `ticket` or `tls13_psk`.
    pub resumption: &'static str,
    /// Handshake time in milliseconds (accept to finished).
    pub handshake_ms: f64,
    /// Subject (RFC 4514) of the verified client certificate, when the site asks for one
    /// (`[site.client_auth]`) and the client presented it.
    pub client_subject: Option<Arc<str>>,
    /// The client's JA4 TLS fingerprint, when a configured feature uses it (tlsgate-tls
    /// `fingerprint`): the access log's `ja4`, the origin header, routing, a rate-limit key.
    pub ja4: Option<Arc<str>>,
    /// The client's Encrypted ClientHello was accepted (`sni` is then the inner, encrypted name).
    pub ech: bool,
    /// The connection resumed while its source was over its full-handshake budget under
    /// `over_budget = "resume_then_429"`: every request is answered 429 with this `Retry-After`.
    pub answer_429: Option<u32>,
}

/// What forwarding to an origin reports for the log (filled in by `UpstreamGroup::forward`).
#[derive(Debug, Default)]
pub struct UpstreamFacts {
    /// The upstream group (metric label).
    pub group: Option<&'static str>,
    /// The origin server last tried.
    pub server: Option<http::uri::Authority>,
    /// Time from sending to the origin's response header (or to the failure).
    pub header_time: Option<Duration>,
    /// The request body's progress (bytes read from the client and forwarded).
    pub upload: Option<Arc<SendState>>,
    /// The connection's origin-request slot this request holds until it is finished
    /// (`server.max_upstream_requests_per_connection`).
    pub slot: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// Milliseconds with microsecond precision, as logged.
pub fn millis(d: Duration) -> f64 {
    (d.as_secs_f64() * 1_000_000.0).round() / 1000.0
}
