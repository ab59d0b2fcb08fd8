//! tlsgate's TLS layer on BoringSSL.
//!
//! - [`context`]: builds the front and per-site contexts; SNI and ECDSA/RSA selection happen in
//!   BoringSSL's asynchronous certificate-selection hook.
//! - [`client_auth`]: client certificates per site (trust store, verify mode, session-ID
//!   context) and the verified identity of a connection.
//! - [`keys`]: the [`keys::KeyBackend`] trait behind the asynchronous private-key hook;
//!   [`remote_keys`]: the hook through which key servers provide backends (keyless TLS);
//!   [`delegation`]: delegated credentials (RFC 9345) that spare keyless handshakes the key server.
//! - [`session_cache`], [`tickets`]: TLS 1.2 session IDs and rotating ticket keys; both outlive
//!   configuration reloads.
//! - [`secret`]: the cluster secret and HKDF derivation (shared ticket keys, sealed sessions).
//! - [`ech`], [`ech_ring`]: Encrypted ClientHello keys derived per epoch from the cluster secret,
//!   swapped on the live context at each epoch; ECH metrics.
//! - [`early_data`]: 0-RTT admission (each ticket's early data accepted at most once).
//! - [`handshake_budget`]: full TLS handshakes per client source (token buckets, refused before
//!   signing).
//! - [`fingerprint`]: JA4 fingerprints of ClientHellos (when a feature uses them) and the
//!   access rules' fingerprint stage; [`access_rules`]: `[[access_rule]]` by source and JA4.
//! - [`handshake_info`]: what a handshake did (version, cipher, group, resumption mechanism).
//! - ClientHello inspection lives in `tlsgate-wire` (no I/O, fuzzed).
//! - [`mldsa`]: ML-DSA certificates (parameter sets, key generation, the ClientHello offer);
//!   [`mldsa_check`]: what `tlsgate check` says about them.
//! - [`lint`]: certificate-chain lint for `tlsgate check` (and the first-flight size).
//! - [`cert_compression`]: RFC 8879 brotli/zlib certificate compression, computed once per certificate.
//! - [`ocsp`]: OCSP stapling: requests, response checks, the per-certificate staple slots.
//! - [`origin`]: TLS from the gateway to origin servers (verification, SNI, client certificate,
//!   resumption, post-quantum groups).
//! - [`pki`]: throwaway certificates for the demo and the tests.
//! - [`failure`]: why a handshake failed, from BoringSSL's reason codes (metric labels).
//! - [`error`]: the configuration-build errors the modules above share.
//! - `ffi`: the only module with `unsafe` code (the crate denies it everywhere else). It imports
//!   nothing from this crate: the callbacks it installs ask traits it defines, which `tickets`
//!   and `session_cache` implement.

#![deny(unsafe_code)]

pub mod access_rules;
pub mod acme_challenges;
pub mod cert_compression;
pub mod client_auth;
// At the crate root: they build whole services (`context`), which imports `client_auth`.
#[cfg(test)]
mod client_auth_tests;
pub mod context;
pub mod delegation;
pub mod early_data;
pub mod ech;
pub mod ech_ring;
pub mod error;
pub mod failure;
#[allow(unsafe_code)]
mod ffi;
pub mod fingerprint;
pub mod handshake_budget;
#[cfg(test)]
mod handshake_budget_tests;
pub mod handshake_info;
pub mod keys;
pub mod lint;
pub mod mldsa;
pub mod mldsa_check;
pub mod ocsp;
pub mod origin;
pub mod pki;
pub mod remote_keys;
pub mod secret;
pub mod session_cache;
#[cfg(test)]
mod test_tls;
pub mod tickets;

pub use client_auth::ClientIdentity;
pub use context::{SessionState, TlsService};
pub use error::TlsBuildError;
pub use failure::HandshakeFailure;
/// The workers' allocator housekeeping (`server.memory_release_interval`).
pub use ffi::release_free_memory;
/// The process's global allocator (mimalloc), named by the binary.
pub use ffi::Allocator;
pub use ffi::{
    set_client_session, set_max_send_fragment, take_pending_flight, tcp_data_segs_in, tcp_window, TcpWindow,
};
/// Listener-side TCP Fast Open: enable it on a socket, and tell whether a connection used it.
pub use ffi::{set_tcp_fastopen, tcp_syn_data_accepted};
/// Client-side 0-RTT, session and TCP Fast Open helpers (`tlsgate probe`, `tlsgate bench`).
pub mod client_ffi {
    pub use crate::ffi::{
        early_data_accepted, early_data_reason, handshake_config_kept, in_early_data, reset_early_data_reject,
        session_early_data_capable, session_has_ticket, set_early_data_enabled, set_tcp_fastopen_connect,
        ERROR_EARLY_DATA_REJECTED,
    };
}
pub use handshake_info::{HandshakeInfo, Resumption};
pub use keys::KeyType;
