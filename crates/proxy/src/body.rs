//! The one response/request body type of the data path: a boxed stream of `Bytes`.

use bytes::Bytes;
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, Full};

/// Boxed error of a body.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A streaming body (upstream bodies are forwarded chunk by chunk, never buffered whole).
pub type Body = UnsyncBoxBody<Bytes, BoxError>;

/// A body holding `bytes`.
pub fn full(bytes: Bytes) -> Body {
    Full::new(bytes).map_err(|never| match never {}).boxed_unsync()
}
