//! The request body on its way to the origin, watched: when it has been sent completely (the
//! origin's `header_timeout` starts only then, like nginx's `proxy_read_timeout`), whether it is
//! still moving (a stall longer than the timeout is the client's fault when the gateway is
//! waiting for the client, the origin's when the origin stopped reading), and how it failed if
//! the client broke it (a malformed chunked body is a 400; a client that went away, a 499).

use crate::body::{BoxError, ClientBody, ClientFault};
use crate::error::ProxyError;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::Notify;

// 0: no error (the default).
const MALFORMED: u8 = 1;
const ABANDONED: u8 = 2;

/// Progress of one request body, shared between the body (polled by the origin connection) and
/// the deadline that watches it.
#[derive(Debug, Default)]
pub struct SendState {
    done: AtomicBool,
    waiting_on_client: AtomicBool,
    frames: AtomicU64,
    /// Body bytes read from the client (for the access log's `bytes_in`).
    bytes: AtomicU64,
    client_error: AtomicU8,
    notify: Notify,
}

impl SendState {
    fn finish(&self) {
        self.done.store(true, Ordering::Release);
        self.notify.notify_one();
    }

    /// The whole body has been handed to the origin connection (or there was none).
    pub fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// Body bytes read from the client so far.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// How the client broke the body, if it did.
    pub fn client_error(&self) -> Option<ProxyError> {
        match self.client_error.load(Ordering::Acquire) {
            MALFORMED => Some(ProxyError::BadRequestBody),
            ABANDONED => Some(ProxyError::ClientAbandoned),
            _ => None,
        }
    }

    /// Resolves with the error to answer when the exchange takes too long: the body stalls for
    /// `timeout` (blamed on whoever the gateway is waiting for), or no response header arrives
    /// within `timeout` after the body was sent completely.
    pub async fn deadline(&self, timeout: Duration) -> ProxyError {
        while !self.done.load(Ordering::Acquire) {
            let before = self.frames.load(Ordering::Acquire);
            tokio::select! {
                _ = self.notify.notified() => continue,
                _ = tokio::time::sleep(timeout) => {}
            }
            if !self.done.load(Ordering::Acquire) && self.frames.load(Ordering::Acquire) == before {
                return if self.waiting_on_client.load(Ordering::Acquire) {
                    ProxyError::ClientBodyTimeout
                } else {
                    ProxyError::UpstreamSendTimeout
                };
            }
        }
        tokio::time::sleep(timeout).await;
        ProxyError::UpstreamHeaderTimeout
    }
}

pin_project_lite::pin_project! {
    /// A client's request body, reporting its progress to a [`SendState`].
    pub struct TrackedBody {
        #[pin]
        inner: ClientBody,
        state: Arc<SendState>,
    }
}

impl TrackedBody {
    /// Wraps `inner`; the state is complete at once for a body that is already at its end.
    pub fn new(inner: ClientBody) -> (Self, Arc<SendState>) {
        let state = Arc::new(SendState::default());
        if inner.is_end_stream() {
            state.finish();
        }
        (
            Self {
                inner,
                state: state.clone(),
            },
            state,
        )
    }
}

impl Body for TrackedBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let mut this = self.project();
        let state = &**this.state;
        match this.inner.as_mut().poll_frame(cx) {
            Poll::Pending => {
                state.waiting_on_client.store(true, Ordering::Release);
                Poll::Pending
            }
            Poll::Ready(Some(Ok(frame))) => {
                state.waiting_on_client.store(false, Ordering::Release);
                state.frames.fetch_add(1, Ordering::AcqRel);
                if let Some(data) = frame.data_ref() {
                    state.bytes.fetch_add(data.len() as u64, Ordering::Relaxed);
                }
                // hyper stops polling a body that says it is complete (Content-Length reached).
                if this.inner.is_end_stream() {
                    state.finish();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                let kind = match e.fault() {
                    ClientFault::Malformed => MALFORMED,
                    ClientFault::Abandoned => ABANDONED,
                };
                state.client_error.store(kind, Ordering::Release);
                state.finish();
                Poll::Ready(Some(Err(Box::new(e))))
            }
            Poll::Ready(None) => {
                state.finish();
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
