//! The exchange against an in-memory origin: framing both ways, connection hand-back, and each
//! failure's class.

use super::*;
use crate::body::full;
use http::Request;
use http_body::Body as _;
use http_body_util::{BodyExt, StreamBody};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, DuplexStream};

type Conn = H1Conn<DuplexStream>;

impl MoreFollows for DuplexStream {}

#[derive(Clone, Default)]
struct Slot(Arc<Mutex<Option<Conn>>>);

impl GiveBack<DuplexStream> for Slot {
    fn give_back(self, conn: Conn) {
        *self.0.lock().unwrap() = Some(conn);
    }
}

impl Slot {
    fn back(&self) -> bool {
        self.0.lock().unwrap().is_some()
    }
}

fn get(path: &str) -> Request<Body> {
    Request::builder()
        .method("GET")
        .uri(path)
        .header("host", "o")
        .body(full(Bytes::new()))
        .unwrap()
}

/// Sends `req` on `conn` as the request path does: its head read in place, its body moved.
async fn send<G: GiveBack<DuplexStream>>(
    conn: Conn,
    req: Request<Body>,
    give_back: G,
) -> Result<Response<H1Body<DuplexStream, G>>, Failed> {
    let (parts, body) = req.into_parts();
    let target = parts.uri.path_and_query().map_or("/", |pq| pq.as_str()).to_owned();
    let head = RequestHead {
        method: &parts.method,
        target: &target,
        headers: &parts.headers,
        default_host: None,
    };
    conn.send(&head, body, give_back, None).await
}

/// Runs `req` against an origin that reads `expect_len` bytes, answers `answer`, then keeps the
/// connection open (or closes it when `close`); what the origin read, the response, the slot.
async fn exchange(
    req: Request<Body>,
    expect_len: usize,
    answer: &'static [u8],
    close: bool,
) -> (
    String,
    Result<Response<H1Body<DuplexStream, Slot>>, Failed>,
    Slot,
    DuplexStream,
) {
    let (ours, mut theirs) = tokio::io::duplex(1 << 20);
    let origin = tokio::spawn(async move {
        let mut got = vec![0u8; expect_len];
        theirs.read_exact(&mut got).await.unwrap();
        theirs.write_all(answer).await.unwrap();
        if close {
            theirs.shutdown().await.unwrap();
        }
        (String::from_utf8(got).unwrap(), theirs)
    });
    let slot = Slot::default();
    let result = send(H1Conn::new(ours), req, slot.clone()).await;
    let (got, theirs) = origin.await.unwrap();
    (got, result, slot, theirs)
}

fn ok<T>(r: Result<T, Failed>) -> T {
    match r {
        Ok(t) => t,
        Err(Failed::Unsent(_)) => panic!("unsent"),
        Err(Failed::Error(e)) => panic!("{e}"),
    }
}

#[tokio::test]
async fn a_small_response_gives_its_connection_back_before_it_is_returned() {
    let head = "GET /a HTTP/1.1\r\nhost: o\r\n\r\n";
    let (got, resp, slot, _o) = exchange(
        get("/a"),
        head.len(),
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX: y\r\n\r\nhello",
        false,
    )
    .await;
    assert_eq!(got, head);
    let resp = ok(resp);
    assert!(slot.back(), "given back with the head");
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x"], "y");
    assert_eq!(resp.body().size_hint().exact(), Some(5));
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"hello");
}

#[tokio::test]
async fn chunked_responses_stream_with_trailers_and_then_give_back() {
    let head = "GET /c HTTP/1.1\r\nhost: o\r\n\r\n";
    let answer = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\ngrpc-status: 0\r\n\r\n";
    let (_, resp, slot, _o) = exchange(get("/c"), head.len(), answer, false).await;
    let resp = ok(resp);
    assert!(!slot.back());
    let collected = resp.into_body().collect().await.unwrap();
    assert_eq!(collected.trailers().unwrap()["grpc-status"], "0");
    assert_eq!(&collected.to_bytes()[..], b"abcde");
    assert!(slot.back());
}

#[tokio::test]
async fn bodies_until_close_and_connection_close_are_not_given_back() {
    let head = "GET /u HTTP/1.1\r\nhost: o\r\n\r\n";
    let (_, resp, slot, o) = exchange(get("/u"), head.len(), b"HTTP/1.1 200 OK\r\n\r\nsome bytes", true).await;
    drop(o);
    let body = ok(resp).into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"some bytes");
    assert!(!slot.back());
    let (_, resp, slot, _o) = exchange(
        get("/u"),
        head.len(),
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
        false,
    )
    .await;
    let body = ok(resp).into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"ok");
    assert!(!slot.back());
}

#[tokio::test]
async fn uploads_are_framed_by_length_or_chunked_with_trailers() {
    let req = Request::builder()
        .method("POST")
        .uri("/p")
        .body(full(Bytes::from_static(b"12345")))
        .unwrap();
    let sent = "POST /p HTTP/1.1\r\ncontent-length: 5\r\n\r\n12345";
    let (got, resp, _, _o) = exchange(
        req,
        sent.len(),
        b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n",
        false,
    )
    .await;
    assert_eq!(got, sent);
    assert_eq!(ok(resp).status(), 201);

    let mut trailers = http::HeaderMap::new();
    trailers.insert("x-sum", http::HeaderValue::from_static("9"));
    let frames = vec![
        Ok::<_, BoxError>(Frame::data(Bytes::from_static(b"ab"))),
        Ok(Frame::data(Bytes::from_static(b"cde"))),
        Ok(Frame::trailers(trailers)),
    ];
    let body = StreamBody::new(futures_util::stream::iter(frames)).boxed_unsync();
    let req = Request::builder().method("PUT").uri("/q").body(body).unwrap();
    let sent = "PUT /q HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n2\r\nab\r\n3\r\ncde\r\n0\r\nx-sum: 9\r\n\r\n";
    let (got, resp, _, _o) = exchange(req, sent.len(), b"HTTP/1.1 204 No Content\r\n\r\n", false).await;
    assert_eq!(got, sent);
    assert_eq!(ok(resp).status(), 204);
}

#[tokio::test]
async fn failures_say_whether_a_response_head_had_arrived() {
    let head = "GET /x HTTP/1.1\r\nhost: o\r\n\r\n";
    let (_, resp, _, _o) = exchange(get("/x"), head.len(), b"HTTP/1.1 200 OK\r\nContent-", true).await;
    match resp {
        Err(Failed::Error(e)) => assert!(e.before_response() && e.kind() == "reset", "{e}"),
        _ => panic!("expected a failure"),
    }
    let (_, resp, _, _o) = exchange(
        get("/x"),
        head.len(),
        b"HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\n",
        false,
    )
    .await;
    match resp {
        Err(Failed::Error(e)) => assert!(!e.before_response() && e.kind() == "content_length", "{e}"),
        _ => panic!("expected a failure"),
    }
    let (_, resp, _, _o) = exchange(
        get("/x"),
        head.len(),
        b"HTTP/1.1 101 Switching Protocols\r\n\r\n",
        false,
    )
    .await;
    assert!(matches!(resp, Err(Failed::Error(ExchangeError::UnaskedSwitch))));
    // A body cut short is an error of the body, after the head.
    let (_, resp, _, o) = exchange(
        get("/x"),
        head.len(),
        b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc",
        true,
    )
    .await;
    drop(o);
    let err = ok(resp).into_body().collect().await.unwrap_err();
    assert!(matches!(err, BodyError::Truncated), "{err}");
}

#[tokio::test]
async fn a_reused_connection_that_closed_hands_the_request_back_unsent() {
    let head = "GET /a HTTP/1.1\r\nhost: o\r\n\r\n";
    let (_, resp, slot, theirs) = exchange(
        get("/a"),
        head.len(),
        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        false,
    )
    .await;
    drop(ok(resp));
    let mut conn = slot.0.lock().unwrap().take().unwrap();
    assert!(conn.idle_and_open());
    drop(theirs);
    tokio::task::yield_now().await;
    assert!(!conn.idle_and_open(), "the origin's close shows");
    let mut conn = H1Conn {
        read: BytesMut::new(),
        ..conn
    };
    conn.requests = 1;
    match send(conn, get("/b"), Slot::default()).await {
        Err(Failed::Unsent(body)) => assert!(body.is_end_stream()),
        _ => panic!("expected the request back"),
    }
}

/// A request body of `frames` whose length is known (an upload with `Content-Length`).
struct KnownLength(std::collections::VecDeque<Bytes>, u64);

impl http_body::Body for KnownLength {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let next = self.0.pop_front();
        if let Some(data) = &next {
            self.1 -= data.len() as u64;
        }
        Poll::Ready(next.map(|data| Ok(Frame::data(data))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.1)
    }
}

/// Keeps nothing: the connection is dropped after the exchange.
struct Discard;

impl GiveBack<crate::upstream::connect::Transport> for Discard {
    fn give_back(self, _: H1Conn<crate::upstream::connect::Transport>) {}
}

#[tokio::test]
async fn a_large_upload_to_a_tcp_origin_leaves_in_full_segments_not_one_per_frame() {
    use std::os::fd::AsFd as _;
    const FRAME: usize = 16 * 1024;
    const FRAMES: usize = 7;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let transport = crate::upstream::connect::plain_to(&listener).await;
    let (mut origin, _) = listener.accept().await.unwrap();
    let frames: std::collections::VecDeque<Bytes> =
        (0..FRAMES).map(|i| Bytes::from(vec![b'a' + i as u8; FRAME])).collect();
    let expected: Vec<u8> = frames.iter().flat_map(|f| f.iter().copied()).collect();
    let body = KnownLength(frames, (FRAME * FRAMES) as u64).boxed_unsync();
    let origin = tokio::spawn(async move {
        let mut got = Vec::new();
        let mut buf = vec![0u8; 1 << 16];
        let body_at = loop {
            let n = origin.read(&mut buf).await.unwrap();
            assert!(n > 0, "the origin read {} bytes, then the end", got.len());
            got.extend_from_slice(&buf[..n]);
            if let Some(at) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                if got.len() >= at + 4 + FRAME * FRAMES {
                    break at + 4;
                }
            }
        };
        let segments = tlsgate_tls::tcp_data_segs_in(origin.as_fd()).unwrap();
        origin
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            .await
            .unwrap();
        (got.split_off(body_at), segments, origin)
    });
    let (parts, body) = Request::builder()
        .method("POST")
        .uri("/up")
        .header("host", "o")
        .body(body)
        .unwrap()
        .into_parts();
    let head = RequestHead {
        method: &parts.method,
        target: "/up",
        headers: &parts.headers,
        default_host: None,
    };
    let resp = ok(H1Conn::new(transport).send(&head, body, Discard, None).await);
    assert_eq!(resp.status(), 200);
    let (got, segments, _origin) = origin.await.unwrap();
    assert!(got == expected, "the body arrived whole and in order");
    // Seven 16 KiB frames written one by one are seven segments; written with `MSG_MORE` while
    // the length says more follows, they fill loopback's 64 KiB segments — four here, as an
    // acknowledgement of the first pushes the held rest out early (one more under load).
    assert!(segments <= 5, "{segments} segments carried the upload");
}

#[tokio::test]
async fn a_streamed_upload_reaches_the_origin_piece_by_piece() {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, BoxError>>(1);
    let frames = futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|f| (f, rx)) });
    let (parts, body) = Request::builder()
        .method("POST")
        .uri("/events")
        .header("host", "o")
        .body(StreamBody::new(frames).boxed_unsync())
        .unwrap()
        .into_parts();
    let head = RequestHead {
        method: &parts.method,
        target: "/events",
        headers: &parts.headers,
        default_host: None,
    };
    let (ours, mut theirs) = tokio::io::duplex(1 << 20);
    let (first_seen, first_arrived) = tokio::sync::oneshot::channel();
    // The origin answers once it has the first piece and the end; the second piece is sent
    // only after the first reached the origin (a client streaming events, each waiting for
    // the previous one's effect): held back for more, the first would never arrive.
    let origin = tokio::spawn(async move {
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        let mut first_seen = Some(first_seen);
        while !got.ends_with(b"0\r\n\r\n") {
            let n = theirs.read(&mut buf).await.unwrap();
            assert!(n > 0);
            got.extend_from_slice(&buf[..n]);
            if got.ends_with(b"2\r\nab\r\n") {
                first_seen.take().unwrap().send(()).unwrap();
            }
        }
        theirs.write_all(b"HTTP/1.1 204 No Content\r\n\r\n").await.unwrap();
        (String::from_utf8(got).unwrap(), theirs)
    });
    let client = async move {
        tx.send(Ok(Frame::data(Bytes::from_static(b"ab")))).await.unwrap();
        first_arrived.await.unwrap();
        tx.send(Ok(Frame::data(Bytes::from_static(b"cde")))).await.unwrap();
    };
    let exchange = async {
        let (resp, ()) = tokio::join!(H1Conn::new(ours).send(&head, body, Slot::default(), None), client);
        resp
    };
    let resp = tokio::time::timeout(std::time::Duration::from_secs(5), exchange)
        .await
        .expect("the first piece reached the origin without waiting for more");
    assert_eq!(ok(resp).status(), 204);
    let (got, _theirs) = origin.await.unwrap();
    assert!(got.ends_with("\r\n\r\n2\r\nab\r\n3\r\ncde\r\n0\r\n\r\n"), "{got:?}");
}
