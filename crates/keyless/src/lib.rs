//! Keyless TLS: private keys live on key servers; gateways send them what to sign.
//!
//! - [`codec`]: the wire format (docs/KEYLESS-PROTOCOL.md), [`signing_input`]: the only
//!   messages a key server signs, and [`new_key`]: what a new-key request may ask; no I/O, fuzzed. Always built; the rest needs the `net` feature
//!   (default), which brings tokio and BoringSSL.
//! - Key server (`tlsgate keyserver`): [`server_config`], [`keystore`], [`permissions`],
//!   [`signer_pool`], [`server`], [`server_metrics`], [`delegation`] (what it checks before
//!   issuing a delegated credential), [`created_keys`] (keys made for gateways' ACME orders).
//! - Gateway side, from the top down: [`remote`] ([`remote::RemoteKey`], a `KeyBackend`),
//!   [`pools`] (runtime membership and its admin API), [`client`] (key-server pool: weighted
//!   choice, drain, retry), [`client_server`] (one key server: connection slots, circuit
//!   breaker), [`client_conn`] (one pipelined connection), [`members`] (member lists and their
//!   checks), [`client_error`], [`client_metrics`].
//! - Shared: [`tls_setup`] (mutual TLS 1.3), [`frame_writer`] (coalescing writer task),
//!   [`algorithms`] (signature scheme code points).
#![forbid(unsafe_code)]

pub mod codec;
pub mod new_key;
pub mod signing_input;

#[cfg(feature = "net")]
pub mod algorithms;
#[cfg(feature = "net")]
pub mod client;
#[cfg(feature = "net")]
pub mod client_conn;
#[cfg(feature = "net")]
pub mod client_error;
#[cfg(feature = "net")]
pub mod client_metrics;
#[cfg(feature = "net")]
pub mod client_server;
#[cfg(feature = "net")]
pub mod created_keys;
#[cfg(feature = "net")]
pub mod delegation;
#[cfg(feature = "net")]
pub mod frame_writer;
#[cfg(feature = "net")]
pub mod keystore;
#[cfg(feature = "net")]
pub mod members;
#[cfg(feature = "net")]
pub mod permissions;
#[cfg(feature = "net")]
pub mod pools;
#[cfg(feature = "net")]
pub mod remote;
#[cfg(feature = "net")]
pub mod server;
#[cfg(feature = "net")]
pub mod server_config;
#[cfg(feature = "net")]
pub mod server_metrics;
#[cfg(feature = "net")]
pub mod signer_pool;
#[cfg(feature = "net")]
pub mod tls_setup;
