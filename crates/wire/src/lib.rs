//! Wire formats tlsgate parses from untrusted peers, with no I/O and no dependencies, so they can
//! be unit-tested in memory and fuzzed quickly (`fuzz/`).
//!
//! - [`client_hello`]: what a ClientHello says the client can verify and negotiate.
//! - [`delegated_credential`]: RFC 9345 credentials and the message a key server signs for one.
//! - [`ech`]: the encrypted_client_hello extension's clear fields (which ECHConfig was used).
//! - [`handoff`]: the binary-upgrade channel between a running gateway and its successor.
//! - [`ja4`]: the JA4 TLS client fingerprint of a ClientHello (hashing left to the caller).
//! - [`path`]: request-path normalisation before routing (percent-escapes, slashes, dot segments).
//! - [`percent`]: the one percent-decoder (`%XX`, and `+` in form values).
//! - [`proxy_protocol`]: the PROXY protocol header (v1 text, v2 binary) a load balancer sends first.
//! - [`quic_link`]: a datagram passed between the two processes of a binary upgrade.
//! - [`resumption`]: what a ClientHello offers to resume with (PSK, ticket, session ID).
//! - [`request_keys`]: what a rate limit reads from headers (the client behind trusted proxies, a cookie).
//! - [`tls13_flight`]: a TLS 1.3 server's first flight as a client reads it (`bench --lean`).
#![forbid(unsafe_code)]

pub mod client_hello;
pub mod delegated_credential;
pub mod ech;
pub mod handoff;
pub mod ja4;
pub mod path;
pub mod percent;
pub mod proxy_protocol;
pub mod quic_link;
pub mod quic_token;
mod reader;
pub mod request_keys;
pub mod resumption;
pub mod tls13_flight;
