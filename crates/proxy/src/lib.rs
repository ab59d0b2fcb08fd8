//! tlsgate's data path, laid out by side.
//!
//! ```text
//!  client ──▶ downstream ──────────────▶ request ─────────────▶ upstream ──▶ origin
//!             listener (accept, admit)   service (one request)  group: pick a server
//!             conn (TLS handshake,       check (authority,      pool + connector (TCP)
//!               HTTP/1.1 or HTTP/2)        framing, path)       forwarding (headers)
//!             io, records (metering,     router (Host, prefix)  request_body (send
//!               record sizing)           access_log               watch, timeouts)
//!             redirect, stapling
//! ```
//!
//! * [`downstream`]: everything that faces clients — sockets, admission, the TLS handshake,
//!   the HTTP server per version, metering and dynamic record sizing, the HTTP→HTTPS redirect
//!   listener, OCSP staple upkeep.
//! * [`request`]: one request, independent of the HTTP version it came in on: validation,
//!   routing, the fixed responses the gateway makes itself, the access log.
//! * [`upstream`]: everything that faces origins — server choice, the connection pool,
//!   header forwarding, the request body's send watch.
//! * Shared leaf types: [`error`] (typed failures with their side and retry safety), [`body`],
//!   [`facts`] (what the access log records), [`context`] (one client connection's facts),
//!   [`identity`] (a client certificate's identity headers), [`fingerprint`] (the connection's
//!   JA4 as an origin header and a routing key), [`h2_stream`] (an HTTP/2 stream's halves as a
//!   request body and as a tunnel's byte stream), [`send_more`] (TCP sends that let a
//!   partial segment wait for what follows), [`read_ahead`] (one socket read for several
//!   small TLS records, below BoringSSL on either side);
//!   [`gateway`] holds the configuration generation that reloads swap atomically.
#![forbid(unsafe_code)]

pub mod body;
pub mod boxed;
pub mod context;
pub mod downstream;
pub mod error;
pub mod facts;
pub mod fingerprint;
pub mod gateway;
pub mod h2_keepalive;
pub mod h2_stream;
pub mod identity;
pub mod interim;
pub mod local_signal;
pub mod read_ahead;
pub mod request;
pub mod send_more;
pub mod upstream;
pub mod worker_slot;

pub use gateway::{Gateway, Generation};
