//! Typed proxy errors: which side a failure came from (the client, the origin, or the gateway
//! itself), the status the client gets, and whether retrying the request elsewhere is safe.
//!
//! A gateway-made error response carries its [`ProxyError`] in the response's extensions, so
//! the access log and metrics see what happened without parsing text.

use crate::body::{full, Body};
use http::{header, Response, StatusCode};

pub use tlsgate_error::Side;

/// What went wrong with a request the gateway could not complete normally.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProxyError {
    /// The request line or headers are invalid (no Host, a malformed path, conflicting hosts).
    #[error("bad request: {0}")]
    BadRequest(&'static str),
    /// The request body was malformed (e.g. an invalid chunk size) while it was being forwarded.
    #[error("malformed request body")]
    BadRequestBody,
    /// A transfer coding other than `chunked` (RFC 9112 §6.1: 501).
    #[error("unsupported transfer coding")]
    UnsupportedTransferCoding,
    /// The Host names a site the connection's certificate does not cover (RFC 9110 §15.5.20).
    #[error("misdirected request: host belongs to another site")]
    Misdirected,
    /// The client stopped sending its request body for longer than the timeout.
    #[error("client stopped sending the request body")]
    ClientBodyTimeout,
    /// The client went away before the response was complete (nginx's 499).
    #[error("client closed the request")]
    ClientAbandoned,
    /// No origin server could be reached.
    #[error("upstream unreachable")]
    UpstreamConnect,
    /// The TLS handshake with the origin failed (certificate not accepted, an alert, a close).
    #[error("TLS to the upstream failed")]
    UpstreamTls,
    /// Every server of the group fails its active health check (HAProxy's and Envoy's 503).
    #[error("no healthy upstream server")]
    NoHealthyServer,
    /// Every server of the group is marked down after failures (`max_fails`) and another
    /// request is already trying one again: answered at once instead of waiting on one more
    /// connect (nginx's "no live upstreams", HAProxy's 503).
    #[error("every upstream server is down")]
    NoLiveServer,
    /// The upstream group has no server to send to.
    #[error("upstream group has no servers")]
    NoUpstreamServer,
    /// The origin broke the exchange (reset, malformed response).
    #[error("upstream failed")]
    UpstreamProtocol,
    /// The origin did not answer within `header_timeout` after the request was sent.
    #[error("upstream response header timed out")]
    UpstreamHeaderTimeout,
    /// The origin stopped reading the request body for longer than `header_timeout`.
    #[error("upstream stopped reading the request body")]
    UpstreamSendTimeout,
    /// The server had `max_connections_per_server` open for all of `queue_timeout` (HAProxy's
    /// 503 after `timeout queue`).
    #[error("no upstream connection free within the queue timeout")]
    QueueTimeout,
    /// The server had `max_connections_per_server` open and `max_queue_per_server` waiting.
    #[error("upstream queue full")]
    QueueFull,
}

impl ProxyError {
    /// Which side is at fault.
    pub fn side(&self) -> Side {
        match self {
            Self::BadRequest(_)
            | Self::BadRequestBody
            | Self::UnsupportedTransferCoding
            | Self::Misdirected
            | Self::ClientBodyTimeout
            | Self::ClientAbandoned => Side::Downstream,
            Self::UpstreamConnect
            | Self::UpstreamTls
            | Self::UpstreamProtocol
            | Self::UpstreamHeaderTimeout
            | Self::UpstreamSendTimeout
            | Self::QueueTimeout
            | Self::QueueFull => Side::Upstream,
            Self::NoUpstreamServer => Side::Internal,
            Self::NoHealthyServer | Self::NoLiveServer => Side::Upstream,
        }
    }

    /// True when nothing of the request can have reached an origin, so sending it to another
    /// server cannot apply it twice.
    pub fn retry_safe(&self) -> bool {
        matches!(
            self,
            Self::UpstreamConnect | Self::UpstreamTls | Self::QueueTimeout | Self::QueueFull
        )
    }

    /// The status the client gets (499 is only ever logged: the client is gone).
    pub fn status(&self) -> StatusCode {
        let code = match self {
            Self::BadRequest(_) | Self::BadRequestBody => 400,
            Self::ClientBodyTimeout => 408,
            Self::Misdirected => 421,
            Self::ClientAbandoned => 499,
            Self::UnsupportedTransferCoding => 501,
            Self::UpstreamConnect | Self::UpstreamTls | Self::UpstreamProtocol | Self::NoUpstreamServer => 502,
            Self::NoHealthyServer | Self::NoLiveServer | Self::QueueTimeout | Self::QueueFull => 503,
            Self::UpstreamHeaderTimeout | Self::UpstreamSendTimeout => 504,
        };
        StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_GATEWAY)
    }

    /// The plain-text response the client gets; the error rides along in its extensions.
    pub fn response(self) -> Response<Body> {
        let status = self.status();
        let text = format!(
            "{} {}: {self}\n",
            status.as_u16(),
            status.canonical_reason().unwrap_or("Client Closed Request")
        );
        let mut r = Response::new(full(bytes::Bytes::from(text)));
        *r.status_mut() = status;
        r.headers_mut()
            .insert(header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain"));
        r.extensions_mut().insert(self);
        r
    }

    /// The gRPC status of this error (gRPC's own mapping of HTTP statuses, except that a
    /// gateway timeout says DEADLINE_EXCEEDED).
    pub fn grpc_status(&self) -> u8 {
        match self {
            Self::UpstreamHeaderTimeout | Self::UpstreamSendTimeout | Self::ClientBodyTimeout => 4,
            Self::Misdirected => 7,
            Self::UnsupportedTransferCoding => 12,
            Self::BadRequest(_) | Self::BadRequestBody | Self::ClientAbandoned => 13,
            Self::UpstreamConnect
            | Self::UpstreamTls
            | Self::UpstreamProtocol
            | Self::NoUpstreamServer
            | Self::NoHealthyServer
            | Self::NoLiveServer
            | Self::QueueTimeout
            | Self::QueueFull => 14,
        }
    }

    /// The response a gRPC client gets: HTTP 200 and a trailers-only gRPC status
    /// (`grpc-status`, `grpc-message` in the header block), which every gRPC client reads as the
    /// call's status; the error rides along in its extensions.
    pub fn grpc_response(self) -> Response<Body> {
        let mut r = Response::new(full(bytes::Bytes::new()));
        let h = r.headers_mut();
        h.insert(header::CONTENT_TYPE, http::HeaderValue::from_static("application/grpc"));
        h.insert(
            http::HeaderName::from_static("grpc-status"),
            http::HeaderValue::from(u16::from(self.grpc_status())),
        );
        // Error texts are fixed ASCII without '%', so they need no percent-encoding.
        if let Ok(message) = http::HeaderValue::from_str(&self.to_string()) {
            h.insert(http::HeaderName::from_static("grpc-message"), message);
        }
        r.extensions_mut().insert(self);
        r
    }

    /// A short metric label.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::BadRequest(_) => "bad_request",
            Self::BadRequestBody => "bad_request_body",
            Self::UnsupportedTransferCoding => "unsupported_transfer_coding",
            Self::Misdirected => "misdirected",
            Self::ClientBodyTimeout => "client_body_timeout",
            Self::ClientAbandoned => "client_abandoned",
            Self::UpstreamConnect => "connect",
            Self::UpstreamTls => "tls",
            Self::NoUpstreamServer => "no_server",
            Self::NoHealthyServer => "no_healthy_server",
            Self::NoLiveServer => "no_live_server",
            Self::UpstreamProtocol => "protocol",
            Self::UpstreamHeaderTimeout => "timeout",
            Self::UpstreamSendTimeout => "send_timeout",
            Self::QueueTimeout => "queue_timeout",
            Self::QueueFull => "queue_full",
        }
    }
}

impl tlsgate_error::Classify for ProxyError {
    fn side(&self) -> Side {
        ProxyError::side(self)
    }
    fn kind(&self) -> &'static str {
        ProxyError::kind(self)
    }
    fn retry_safe(&self) -> bool {
        ProxyError::retry_safe(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sides_statuses_and_retry() {
        assert_eq!(ProxyError::BadRequestBody.status(), StatusCode::BAD_REQUEST);
        assert_eq!(ProxyError::BadRequestBody.side(), Side::Downstream);
        assert_eq!(ProxyError::UpstreamHeaderTimeout.status(), StatusCode::GATEWAY_TIMEOUT);
        assert_eq!(ProxyError::UpstreamHeaderTimeout.side(), Side::Upstream);
        assert_eq!(ProxyError::Misdirected.status().as_u16(), 421);
        assert!(ProxyError::UpstreamConnect.retry_safe());
        assert!(!ProxyError::UpstreamProtocol.retry_safe());
        assert!(!ProxyError::UpstreamSendTimeout.retry_safe());
        assert!(ProxyError::UpstreamTls.retry_safe());
        assert_eq!(ProxyError::NoHealthyServer.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(ProxyError::NoHealthyServer.grpc_status(), 14);
        assert_eq!(ProxyError::UpstreamTls.status(), StatusCode::BAD_GATEWAY);
        for queue in [ProxyError::QueueTimeout, ProxyError::QueueFull] {
            assert_eq!(queue.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!((queue.grpc_status(), queue.side()), (14, Side::Upstream));
            assert!(queue.retry_safe(), "nothing was sent");
        }
        assert_eq!(
            (ProxyError::QueueTimeout.kind(), ProxyError::QueueFull.kind()),
            ("queue_timeout", "queue_full")
        );
    }

    #[test]
    fn grpc_requests_get_a_trailers_only_status() {
        let r = ProxyError::UpstreamConnect.grpc_response();
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()["content-type"], "application/grpc");
        assert_eq!(r.headers()["grpc-status"], "14");
        assert_eq!(r.headers()["grpc-message"], "upstream unreachable");
        assert_eq!(ProxyError::UpstreamHeaderTimeout.grpc_status(), 4);
        assert_eq!(
            r.extensions().get::<ProxyError>(),
            Some(&ProxyError::UpstreamConnect),
            "the log still sees the error"
        );
    }
}
