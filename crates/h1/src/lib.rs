//! HTTP/1.1 towards origins, without I/O.
//!
//! The proxy's HTTP/1.1 exchange with an origin runs in the request's own task (no connection
//! task, no channel between them, as Cloudflare's pingora does): it writes the request head that
//! [`request::encode_head`] put into a buffer, reads into a buffer that [`response::parse`] turns
//! into a response head without copying the header bytes, and frames the bodies with
//! [`request::chunk_header`]/[`request::last_chunk`] (uploads) and [`chunked::Decoder`]
//! (responses). Everything here works on byte buffers only, so it is unit-tested and fuzzed
//! (`fuzz/fuzz_targets/h1_response.rs`) without sockets.
//!
//! Origins are trusted more than clients but not blindly: a response head larger than
//! [`response::MAX_HEAD`], more than [`response::MAX_HEADERS`] fields, conflicting
//! `Content-Length` values, or a malformed chunk is an [`Error`], never a panic or a guess.

#![forbid(unsafe_code)]

pub mod chunked;
pub mod error;
pub mod fields;
pub mod request;
pub mod response;

pub use error::Error;
pub use response::connection_persists;
