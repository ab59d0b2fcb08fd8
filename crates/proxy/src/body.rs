//! The body types of the data path: [`Body`], a boxed stream of `Bytes` (responses, and
//! requests on their way to an origin), and [`ClientBody`], a request body as it comes from a
//! client, whatever protocol brought it (hyper's for HTTP/1.1, the `h2` crate's stream for
//! HTTP/2, a boxed stream for HTTP/3).

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

pin_project_lite::pin_project! {
    /// A body that holds `guard` until it ends (its last frame or an error) or is dropped,
    /// whichever comes first: an origin request stays counted as in flight while its response
    /// body streams.
    pub struct Guarded<B, G> {
        #[pin]
        inner: B,
        guard: Option<G>,
    }
}

impl<B, G> Guarded<B, G> {
    /// Wraps `inner`, holding `guard`.
    pub fn new(inner: B, guard: G) -> Self {
        Self {
            inner,
            guard: Some(guard),
        }
    }
}

impl<B: http_body::Body, G> http_body::Body for Guarded<B, G> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<B::Data>, B::Error>>> {
        use std::task::Poll;
        let mut this = self.project();
        let polled = this.inner.as_mut().poll_frame(cx);
        let ended = match &polled {
            Poll::Ready(Some(Ok(_))) => this.inner.is_end_stream(),
            Poll::Ready(_) => true,
            Poll::Pending => false,
        };
        if ended {
            this.guard.take();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Reads and drops a request body the gateway will not forward (nginx's discard), so the client
/// finishes its upload and reads the response instead of a reset in the middle of it. Bounded:
/// after 1 MiB or 5 seconds it stops (HTTP/1.1 then closes the connection after the response;
/// HTTP/2 resets the rest of the stream with NO_ERROR).
pub async fn discard<B>(mut body: B)
where
    B: http_body::Body + Unpin,
{
    if body.is_end_stream() {
        return;
    }
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        let mut seen = 0usize;
        while let Some(Ok(frame)) = body.frame().await {
            seen += frame.data_ref().map_or(0, bytes::Buf::remaining);
            if seen > 1 << 20 {
                return;
            }
        }
    })
    .await;
}

/// How a client broke its request body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientFault {
    /// The client's bytes were wrong (a malformed chunked body, DATA beyond its content-length):
    /// answered 400.
    Malformed,
    /// The client went away or reset the stream: logged as 499.
    Abandoned,
}

/// A request body that failed on the client's side.
#[derive(Debug, thiserror::Error)]
pub enum ClientBodyError {
    /// From hyper's HTTP/1.1 server.
    #[error("request body: {0}")]
    Hyper(#[from] hyper::Error),
    /// From the HTTP/2 server's stream.
    #[error("request body: {0}")]
    H2(#[from] h2::Error),
    /// The client's bytes were wrong (a server that is not hyper's says so).
    #[error("malformed request body: {0}")]
    Malformed(BoxError),
    /// The client went away or reset the stream (a server that is not hyper's says so).
    #[error("request body abandoned: {0}")]
    Abandoned(BoxError),
}

impl ClientBodyError {
    /// Whether the client's bytes were wrong or the client went away.
    pub fn fault(&self) -> ClientFault {
        match self {
            Self::Hyper(e) => hyper_fault(e),
            Self::H2(e) => h2_fault(e),
            Self::Malformed(_) => ClientFault::Malformed,
            Self::Abandoned(_) => ClientFault::Abandoned,
        }
    }
}

impl tlsgate_error::Classify for ClientBodyError {
    fn side(&self) -> tlsgate_error::Side {
        tlsgate_error::Side::Downstream
    }

    fn kind(&self) -> &'static str {
        match self.fault() {
            ClientFault::Malformed => "bad_request_body",
            ClientFault::Abandoned => "client_abandoned",
        }
    }

    fn retry_safe(&self) -> bool {
        false
    }
}

/// Tells a malformed body (the client's bytes were wrong) from one the client abandoned.
fn hyper_fault(e: &hyper::Error) -> ClientFault {
    use std::error::Error as _;
    if e.is_incomplete_message() {
        return ClientFault::Abandoned;
    }
    let mut source = e.source();
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return match io.kind() {
                std::io::ErrorKind::InvalidData | std::io::ErrorKind::InvalidInput => ClientFault::Malformed,
                _ => ClientFault::Abandoned,
            };
        }
        source = s.source();
    }
    ClientFault::Abandoned
}

/// The client reset the stream or the connection died: abandoned. A reset the gateway's HTTP/2
/// layer sent itself means the client broke the protocol (e.g. DATA beyond its content-length).
fn h2_fault(h2: &h2::Error) -> ClientFault {
    if h2.is_remote() || h2.is_io() || h2.is_go_away() {
        ClientFault::Abandoned
    } else {
        ClientFault::Malformed
    }
}

/// A boxed client body stream of a server that is not hyper's.
pub type ClientStream = std::pin::Pin<Box<dyn http_body::Body<Data = Bytes, Error = ClientBodyError> + Send>>;

/// A request body from a client, whatever protocol brought it: the request path
/// ([`crate::request::service::handle`]) takes this, so every server feeds the same proxy layer.
pub enum ClientBody {
    /// hyper's HTTP/1.1 server (no box: the common case).
    Hyper(hyper::body::Incoming),
    /// The HTTP/2 server's stream (no box either).
    H2(crate::h2_stream::RecvBody),
    /// Another server's body (HTTP/3).
    Stream(ClientStream),
}

impl ClientBody {
    /// A body of another server than hyper's.
    pub fn stream<B>(body: B) -> Self
    where
        B: http_body::Body<Data = Bytes, Error = ClientBodyError> + Send + 'static,
    {
        Self::Stream(Box::pin(body))
    }
}

impl From<hyper::body::Incoming> for ClientBody {
    fn from(b: hyper::body::Incoming) -> Self {
        Self::Hyper(b)
    }
}

impl std::fmt::Debug for ClientBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Hyper(b) => b.fmt(f),
            Self::H2(b) => b.fmt(f),
            Self::Stream(_) => f.write_str("ClientBody::Stream"),
        }
    }
}

impl http_body::Body for ClientBody {
    type Data = Bytes;
    type Error = ClientBodyError;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, ClientBodyError>>> {
        use std::task::Poll;
        match self.get_mut() {
            Self::Hyper(b) => match std::pin::Pin::new(b).poll_frame(cx) {
                Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
                Poll::Ready(Some(Ok(f))) => Poll::Ready(Some(Ok(f))),
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            },
            Self::H2(b) => match std::pin::Pin::new(b).poll_frame(cx) {
                Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
                Poll::Ready(Some(Ok(f))) => Poll::Ready(Some(Ok(f))),
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            },
            Self::Stream(b) => b.as_mut().poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Hyper(b) => b.is_end_stream(),
            Self::H2(b) => b.is_end_stream(),
            Self::Stream(b) => b.is_end_stream(),
        }
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match self {
            Self::Hyper(b) => b.size_hint(),
            Self::H2(b) => b.size_hint(),
            Self::Stream(b) => b.size_hint(),
        }
    }
}
