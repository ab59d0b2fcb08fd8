//! A request body kept for a retry after a connect failure: it waits in a slot shared with the
//! forwarder until an origin connection first reads it, so when an attempt fails before that
//! (no connection could be opened: nothing was sent) the forwarder takes it back whole and hands
//! it to the next attempt. Once read, it belongs to that attempt alone and cannot go again.
//!
//! The attempt's [`ReplayBody`] may outlive the attempt (an unsent request's body is read and
//! dropped in the background, `body::discard`); after the body was taken back it is empty.

use http_body::{Body, Frame, SizeHint};
use parking_lot::Mutex;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

type Slot<B> = Arc<Mutex<Option<B>>>;

/// The forwarder's hold on an attempt's body (the client's `TrackedBody`).
pub struct Replay<B> {
    slot: Slot<B>,
}

/// The body an attempt sends: the client's, taken from the slot at its first read.
pub struct ReplayBody<B> {
    slot: Slot<B>,
    inner: Option<B>,
}

impl<B: Body> Replay<B> {
    /// Puts `body` in a new slot: the hold on it, and the body for the attempt.
    pub fn new(body: B) -> (Self, ReplayBody<B>) {
        let slot = Arc::new(Mutex::new(Some(body)));
        (Self { slot: slot.clone() }, ReplayBody { slot, inner: None })
    }

    /// True while no byte of the body has been read for the attempt.
    pub fn is_unsent(&self) -> bool {
        self.slot.lock().is_some()
    }

    /// The body, whole, if the attempt never read it; the attempt's body is empty from then on.
    pub fn take_back(self) -> Option<B> {
        self.slot.lock().take()
    }
}

impl<B: Body + Unpin> Body for ReplayBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = &mut *self;
        if this.inner.is_none() {
            this.inner = this.slot.lock().take();
        }
        match this.inner.as_mut() {
            Some(inner) => Pin::new(inner).poll_frame(cx),
            // Taken back by the forwarder for another attempt.
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            Some(inner) => inner.is_end_stream(),
            None => self.slot.lock().as_ref().is_none_or(Body::is_end_stream),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Some(inner) => inner.size_hint(),
            None => self
                .slot
                .lock()
                .as_ref()
                .map_or_else(|| SizeHint::with_exact(0), Body::size_hint),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};

    #[tokio::test]
    async fn an_unread_body_comes_back_whole_and_the_old_attempt_sends_nothing() {
        let (hold, first) = Replay::new(Full::new(Bytes::from_static(b"upload")));
        assert!(hold.is_unsent());
        assert_eq!(first.size_hint().exact(), Some(6));
        assert!(!first.is_end_stream());
        let body = hold.take_back().expect("never read");
        // The first attempt's body (say, in a background discard) is now empty.
        assert!(first.is_end_stream());
        assert_eq!(first.collect().await.unwrap().to_bytes(), Bytes::new());
        let (hold, second) = Replay::new(body);
        assert_eq!(second.collect().await.unwrap().to_bytes(), "upload");
        assert!(!hold.is_unsent());
        assert!(hold.take_back().is_none(), "read once: it cannot go again");
    }

    #[tokio::test]
    async fn a_body_read_for_an_attempt_stays_with_it() {
        let (hold, mut body) = Replay::new(Full::new(Bytes::from_static(b"x")));
        let frame = body.frame().await.unwrap().unwrap();
        assert_eq!(frame.into_data().unwrap(), "x");
        assert!(!hold.is_unsent());
        assert!(hold.take_back().is_none());
        assert!(body.frame().await.is_none());
    }
}
