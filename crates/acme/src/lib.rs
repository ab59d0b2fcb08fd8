//! A small ACME (RFC 8555) client on BoringSSL, for tlsgate's own certificates.
//!
//! Why not a crate: instant-acme (the well-kept Rust client) signs with ring or aws-lc-rs and
//! cannot be built without one of them, and tlsgate's cryptography is BoringSSL's only. The
//! protocol part tlsgate needs is small: an ES256 account key ([`jws`]), a nonce-keeping HTTPS
//! client ([`http`], [`client`]), the order flow with a pluggable challenge [`order::Solver`],
//! keys and CSRs ([`csr`]), the TLS-ALPN-01 certificate ([`alpn`], RFC 8737) and renewal
//! information ([`ari`], RFC 9773).

#![forbid(unsafe_code)]

pub mod alpn;
pub mod ari;
pub mod b64;
pub mod client;
pub mod csr;
pub mod error;
pub mod http;
pub mod jws;
pub mod order;
pub mod time;
pub mod types;

pub use client::{Account, AccountOptions};
pub use error::AcmeError;
pub use order::{ChallengeKind, Issued, OrderRequest, Solver};
