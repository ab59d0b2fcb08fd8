//! tlsgate's data path.
//!
//! A connection flows: [`listener`] (per-worker SO_REUSEPORT socket, admission against the
//! connection limit) → [`conn`] (TLS handshake through tlsgate-tls, metrics, ALPN) → hyper's
//! HTTP/1.1 or HTTP/2 server → [`service`] ([`request_check`]: authority, framing, normalised
//! path; route by Host and path prefix with [`router`]) → fixed response or [`upstream`] (pooled
//! keep-alive HTTP/1.1 to origin servers, streaming; headers by [`forwarding`], the request body
//! watched by [`request_body`]; failures typed by [`error`]) → [`access_log`].
//! [`gateway`] holds the configuration generation that reloads swap atomically.
//! [`stapling`] keeps each certificate's OCSP staple fresh.
#![forbid(unsafe_code)]

pub mod access_log;
pub mod body;
pub mod conn;
pub mod context;
pub mod error;
pub mod facts;
pub mod forwarding;
pub mod gateway;
pub mod io;
pub mod listener;
pub mod records;
pub mod redirect;
pub mod request_body;
pub mod request_check;
pub mod router;
pub mod service;
pub mod source_limit;
pub mod stapling;
pub mod upstream;

pub use gateway::{Gateway, Generation};
