//! `Alt-Svc` on responses to TCP clients (RFC 7838): tells a browser that the origin it reached
//! over TCP also speaks HTTP/3 on a UDP port, so its next connections can use QUIC. Added when
//! `[http3] enabled` and `alt_svc` are set and the connection came in on a listener that serves
//! QUIC; a response that already has one (from the origin) keeps it.

use crate::gateway::Generation;
use http::{HeaderValue, Response};
use std::net::SocketAddr;

/// Adds `Alt-Svc: h3=":PORT"; ma=SECONDS` to a response for a TCP client that connected to
/// `local`, by the configuration of `generation`.
pub fn advertise<B>(generation: &Generation, local: SocketAddr, response: &mut Response<B>) {
    let h3 = &generation.config.http3;
    if !(h3.enabled && h3.alt_svc) || response.headers().contains_key(http::header::ALT_SVC) {
        return;
    }
    let Some(listener) = generation.config.listeners.iter().find(|l| {
        l.kind == tlsgate_config::ListenerKind::Https
            && l.listen.port() == local.port()
            && (l.listen.ip().is_unspecified() || l.listen.ip() == local.ip())
            && h3.serves(l.listen)
    }) else {
        return;
    };
    let port = h3.udp_addr(listener.listen).port();
    let value = format!("h3=\":{port}\"; ma={}", h3.alt_svc_max_age.get().as_secs());
    if let Ok(v) = HeaderValue::from_str(&value) {
        response.headers_mut().insert(http::header::ALT_SVC, v);
    }
}
