//! The patched `h2` (third_party/README.md) over a stream without vectored writes — TLS, where
//! each write becomes a record and a `sendmsg` — copies a DATA payload of up to 8 KiB into its
//! write buffer instead of writing it separately: a 1 KiB response leaves in one write with its
//! HEADERS frame (h2 0.4.20 chained payloads of 1 KiB and more: two writes). A large payload is
//! still written from where it is, after a frame head and its first KiB, which are offered as a
//! vectored write with the rest of the payload behind them (the stream below, not writing
//! vectors, takes the first part).

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf};

/// The server's end of the pipe, counting its writes (none vectored) and the calls that offered
/// more than one part (of which, like any writer that does not write vectors, it takes the
/// first).
struct Counted {
    inner: DuplexStream,
    writes: Arc<AtomicUsize>,
    gathered: Arc<AtomicUsize>,
}

impl AsyncRead for Counted {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let res = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(res, Poll::Ready(Ok(n)) if n > 0) {
            self.writes.fetch_add(1, Ordering::Relaxed);
        }
        res
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        if bufs.iter().filter(|b| !b.is_empty()).count() > 1 {
            self.gathered.fetch_add(1, Ordering::Relaxed);
        }
        let first = bufs.iter().find(|b| !b.is_empty()).map_or(&[][..], |b| &**b);
        self.poll_write(cx, first)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The server's writes for one response of `body` bytes, counted from the moment its request
/// was accepted until the client has read the whole body.
async fn writes_for_a_response_of(body: usize) -> usize {
    writes_and_gathered_for_a_response_of(body).await.0
}

/// The same, and the writes offered with more parts behind them (all of the connection's).
async fn writes_and_gathered_for_a_response_of(body: usize) -> (usize, usize) {
    let writes = Arc::new(AtomicUsize::new(0));
    let gathered = Arc::new(AtomicUsize::new(0));
    let (client, server) = tokio::io::duplex(1024 * 1024);
    let server = Counted {
        inner: server,
        writes: writes.clone(),
        gathered: gathered.clone(),
    };
    let counted_from = Arc::new(AtomicUsize::new(usize::MAX));
    let mark = counted_from.clone();
    let counter = writes.clone();
    tokio::spawn(async move {
        let mut conn = h2::server::handshake(server).await.expect("server handshake");
        while let Some(next) = conn.accept().await {
            let (_req, mut respond) = next.expect("request");
            mark.store(counter.load(Ordering::SeqCst), Ordering::SeqCst);
            let resp = http::Response::builder().status(200).body(()).unwrap();
            let mut send = respond.send_response(resp, false).expect("head");
            send.send_data(Bytes::from(vec![b'x'; body]), true).expect("body");
        }
    });
    let (send, conn) = h2::client::handshake(client).await.expect("client handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut ready = send.ready().await.expect("ready");
    let req = http::Request::builder().uri("http://localhost/").body(()).unwrap();
    let (resp, _) = ready.send_request(req, true).expect("send");
    let mut got = resp.await.expect("response").into_body();
    let mut n = 0;
    while let Some(chunk) = got.data().await {
        let chunk = chunk.expect("body");
        n += chunk.len();
        let _ = got.flow_control().release_capacity(chunk.len());
    }
    assert_eq!(n, body);
    (
        writes.load(Ordering::SeqCst) - counted_from.load(Ordering::SeqCst),
        gathered.load(Ordering::SeqCst),
    )
}

#[tokio::test(flavor = "current_thread")]
async fn a_response_of_up_to_8_kib_leaves_in_one_write_with_its_head() {
    for body in [13, 1024, 4096, 8000] {
        assert_eq!(writes_for_a_response_of(body).await, 1, "{body}-byte response");
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_large_payload_is_written_after_its_frame_head_and_first_kib() {
    // 16 KiB: HEADERS, the DATA frame's head and its first KiB in one write, the rest in a
    // second (the client's 64 KiB window lets it all out at once).
    assert_eq!(writes_for_a_response_of(16 * 1024).await, 2);
}

#[tokio::test(flavor = "current_thread")]
async fn a_chained_payload_is_offered_behind_its_frame_head() {
    // The first of the two writes is offered as a vectored write with the rest of the payload
    // behind it, so that a TLS stream can hold its record for the next one (one `sendmsg`
    // for both; `downstream::records`). Small payloads are copied: nothing is offered so.
    assert_eq!(writes_and_gathered_for_a_response_of(16 * 1024).await, (2, 1));
    assert_eq!(writes_and_gathered_for_a_response_of(4096).await, (1, 0));
}
