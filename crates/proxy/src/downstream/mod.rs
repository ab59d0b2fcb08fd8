//! The client side: sockets and admission ([`listener`], [`source_limit`]), the PROXY protocol
//! header of listeners behind a load balancer ([`proxy_header`]), one connection
//! ([`conn`]: its TLS [`handshake`], then [`http1`] or [`http2`] by ALPN, each [`drive`]n to its
//! end; [`frames`] watches HTTP/2 header blocks for the header timeout), byte metering ([`io`]) and dynamic TLS record
//! sizing ([`records`]), the plain-HTTP redirect listener ([`redirect`]), and the OCSP staple
//! and delegated-credential upkeep that the handshakes serve from ([`stapling`],
//! [`delegation`]).

pub mod conn;
pub mod delegation;
pub mod drive;
pub mod frames;
pub mod handshake;
pub mod http1;
pub mod http2;
pub mod io;
pub mod listener;
pub mod park;
pub mod proxy_header;
pub mod quic;
pub mod records;
pub mod redirect;
pub mod slot_tasks;
pub mod source_limit;
pub mod stapling;
