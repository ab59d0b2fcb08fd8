//! tlsgate's TLS layer on BoringSSL.
//!
//! - [`context`]: builds the front and per-site contexts; SNI and ECDSA/RSA selection happen in
//!   BoringSSL's asynchronous certificate-selection hook.
//! - [`keys`]: the [`keys::KeyBackend`] trait behind the asynchronous private-key hook;
//!   [`remote_keys`]: the hook through which key servers provide backends (keyless TLS).
//! - [`session_cache`], [`tickets`]: TLS 1.2 session IDs and rotating ticket keys; both outlive
//!   configuration reloads.
//! - [`handshake_info`]: what a handshake did (version, cipher, group, resumption mechanism).
//! - ClientHello inspection lives in `tlsgate-wire` (no I/O, fuzzed).
//! - [`lint`]: certificate-chain lint for `tlsgate check`.
//! - [`ocsp`]: OCSP stapling: requests, response checks, the per-certificate staple slots.
//! - [`pki`]: throwaway certificates for the demo and the tests.
//! - `ffi`: the only module with `unsafe` code.

pub mod context;
mod ffi;
pub mod handshake_info;
pub mod keys;
pub mod lint;
pub mod ocsp;
pub mod pki;
pub mod remote_keys;
pub mod session_cache;
pub mod tickets;

pub use context::{SessionState, TlsBuildError, TlsService};
pub use ffi::{set_client_session, set_max_send_fragment, tcp_window, TcpWindow};
pub use handshake_info::{HandshakeInfo, Resumption};
pub use keys::KeyType;
