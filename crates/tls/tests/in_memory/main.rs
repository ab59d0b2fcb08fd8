//! In-memory TLS tests: a BoringSSL client and the gateway's own server-side configuration
//! (a parsed `tlsgate.toml`, `TlsService::build`, `new_ssl`) joined by an in-process duplex, so
//! the handshake paths run in milliseconds, beside the process-level tests of the `tlsgate` crate.
//!
//! - [`resumption`]: full and resumed handshakes by session ID, TLS 1.2 ticket and TLS 1.3 PSK.
//! - [`tickets`]: ticket-key rotation (old tickets accepted until their key expires) and
//!   cluster-derived keys.
//! - [`early_data`]: 0-RTT accepted once, refused on replay, after a reload that turns it off,
//!   and on an ALPN change.
//! - [`selection`]: ECDSA or RSA by what the client offers.
//! - [`ocsp`]: stapled, not asked for, not configured, stale.
//! - [`tamper`]: altered handshake records refused with the right alert.

mod early_data;
mod harness;
mod ocsp;
mod resumption;
mod selection;
mod tamper;
mod tickets;
