//! What can be wrong with the bytes an origin sent.

use tlsgate_error::{Classify, Side};

/// A response the gateway cannot read as HTTP/1.1. Every one is the origin's fault (side
/// upstream); none is safe to retry, since the request reached the origin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The response head is not HTTP/1.x (httparse's reason).
    #[error("malformed response head: {0}")]
    Head(&'static str),
    /// The response head grew past the limit without ending.
    #[error("response head larger than {0} bytes")]
    HeadTooLarge(usize),
    /// More header fields than the limit.
    #[error("more than {0} response header fields")]
    TooManyHeaders(usize),
    /// A field name or value `http` refuses.
    #[error("invalid response header field")]
    Field,
    /// `Content-Length` missing a number, or several that disagree (RFC 9112 §6.3, item 5).
    #[error("invalid or conflicting Content-Length")]
    ContentLength,
    /// A chunk-size line that is not hexadecimal, too long, or overflows.
    #[error("malformed chunk size line")]
    ChunkSize,
    /// Chunk data not followed by CRLF.
    #[error("chunk data not followed by CRLF")]
    ChunkEnd,
    /// The trailer section is malformed or larger than the limit.
    #[error("malformed or oversized trailer section")]
    Trailers,
}

impl Classify for Error {
    fn side(&self) -> Side {
        Side::Upstream
    }

    fn kind(&self) -> &'static str {
        match self {
            Self::Head(_) | Self::Field => "malformed_head",
            Self::HeadTooLarge(_) | Self::TooManyHeaders(_) => "head_too_large",
            Self::ContentLength => "content_length",
            Self::ChunkSize | Self::ChunkEnd | Self::Trailers => "chunked",
        }
    }

    fn retry_safe(&self) -> bool {
        false
    }
}
