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
