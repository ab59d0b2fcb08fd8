//! The request body of an HTTP/3 request as the proxy layer reads it: frames the connection's
//! task reads from the QUIC stream only while this body has room for them (a few chunks), so a
//! client uploads no faster than the origin takes it and a body is never held whole. Each chunk
//! taken tells the connection to read on. A body whose stream ends without its FIN (a reset, the
//! connection gone) fails as abandoned; one whose length differs from its `content-length` fails
//! as malformed.

use crate::body::{BoxError, ClientBodyError};
use bytes::Bytes;
use http_body::Frame;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::sync::mpsc;

/// Chunks that may wait in a body before the connection stops reading its stream.
pub const QUEUED_CHUNKS: usize = 4;

/// What the connection's task keeps of a body it feeds.
pub struct BodySender {
    /// Frames for the body.
    pub tx: mpsc::Sender<Frame<Bytes>>,
    /// Set when the client's FIN was read: the body is complete.
    pub complete: Arc<AtomicBool>,
}

/// Tells the connection that a body's chunk was taken (the stream may be read on).
pub type Taken = Box<dyn Fn() + Send + Sync>;

/// An HTTP/3 request body.
pub struct H3Body {
    rx: Option<mpsc::Receiver<Frame<Bytes>>>,
    complete: Arc<AtomicBool>,
    taken: Taken,
    expected: Option<u64>,
    seen: u64,
}

impl H3Body {
    /// A body fed by the connection (`expected`: the request's `content-length`), and its sender.
    pub fn channel(expected: Option<u64>, taken: Taken) -> (Self, BodySender) {
        let (tx, rx) = mpsc::channel(QUEUED_CHUNKS);
        let complete = Arc::new(AtomicBool::new(false));
        let body = Self {
            rx: Some(rx),
            complete: complete.clone(),
            taken,
            expected,
            seen: 0,
        };
        (body, BodySender { tx, complete })
    }

    /// The body of a request whose HEADERS ended the stream.
    pub fn empty() -> Self {
        Self {
            rx: None,
            complete: Arc::new(AtomicBool::new(true)),
            taken: Box::new(|| {}),
            expected: None,
            seen: 0,
        }
    }
}

fn error(text: &'static str) -> BoxError {
    text.into()
}

impl http_body::Body for H3Body {
    type Data = Bytes;
    type Error = ClientBodyError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        let Some(rx) = this.rx.as_mut() else {
            return Poll::Ready(None);
        };
        match rx.poll_recv(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(frame)) => {
                (this.taken)();
                if let Some(data) = frame.data_ref() {
                    this.seen += data.len() as u64;
                    if this.expected.is_some_and(|n| this.seen > n) {
                        this.rx = None;
                        return Poll::Ready(Some(Err(ClientBodyError::Malformed(error(
                            "HTTP/3 request body longer than its content-length",
                        )))));
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(None) => {
                this.rx = None;
                if !this.complete.load(Ordering::Acquire) {
                    return Poll::Ready(Some(Err(ClientBodyError::Abandoned(error(
                        "HTTP/3 request stream reset or connection closed",
                    )))));
                }
                if this.expected.is_some_and(|n| n != this.seen) {
                    return Poll::Ready(Some(Err(ClientBodyError::Malformed(error(
                        "HTTP/3 request body shorter than its content-length",
                    )))));
                }
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.rx.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Body as _;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn a_complete_body_ends_and_a_cut_one_fails() {
        let (mut body, tx) = H3Body::channel(Some(5), Box::new(|| {}));
        tx.tx.send(Frame::data(Bytes::from_static(b"hello"))).await.unwrap();
        tx.complete.store(true, Ordering::Release);
        drop(tx);
        let collected = (&mut body).collect().await.unwrap().to_bytes();
        assert_eq!(collected, "hello");
        assert!(body.is_end_stream());

        let (mut body, tx) = H3Body::channel(None, Box::new(|| {}));
        tx.tx.send(Frame::data(Bytes::from_static(b"part"))).await.unwrap();
        drop(tx);
        let err = (&mut body).collect().await.unwrap_err();
        assert_eq!(err.fault(), crate::body::ClientFault::Abandoned);

        let (mut body, tx) = H3Body::channel(Some(3), Box::new(|| {}));
        tx.tx.send(Frame::data(Bytes::from_static(b"toolong"))).await.unwrap();
        let err = (&mut body).collect().await.unwrap_err();
        assert_eq!(err.fault(), crate::body::ClientFault::Malformed);
        assert!(H3Body::empty().is_end_stream());
    }
}
