//! Unit tests of `downstream::io`: what the stream holds back, and the moments that send it, over
//! a real loopback TCP connection (the end-to-end behaviour: crates/tlsgate/tests/resumption.rs
//! for tickets without a request, and every test whose client asks to close).

use super::*;
use crate::read_ahead::{READ_AHEAD, RECORD_HEADER};
use std::future::poll_fn;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A metered server side and the plain client side of one loopback connection.
async fn pair() -> (MeteredStream<TcpStream>, Arc<Activity>, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
    let (server, _) = listener.accept().await.unwrap();
    let activity = Activity::new();
    let metered = MeteredStream::new(server, activity.clone(), Arc::new(tlsgate_admin::Metrics::new()));
    (metered, activity, client)
}

/// What has arrived at `client` within a moment (empty: nothing).
async fn arrived(client: &mut TcpStream) -> Vec<u8> {
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut got = vec![0u8; 64 * 1024];
    match client.try_read(&mut got) {
        Ok(n) => got.truncate(n),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => got.clear(),
        Err(e) => panic!("{e}"),
    }
    got
}

#[tokio::test]
async fn the_end_of_a_last_response_waits_through_flushes_for_the_shutdown() {
    let (mut server, activity, mut client) = pair().await;
    server.write_all(b"first response;").await.unwrap();
    server.flush().await.unwrap();
    assert_eq!(arrived(&mut client).await, b"first response;");
    activity.last_response_ended();
    server.write_all(b"last bytes;").await.unwrap();
    server.flush().await.unwrap();
    server.write_all(b"close_notify").await.unwrap();
    server.flush().await.unwrap();
    assert_eq!(
        arrived(&mut client).await,
        b"",
        "held bytes went out before the shutdown"
    );
    server.shutdown().await.unwrap();
    drop(server);
    let mut rest = Vec::new();
    client.read_to_end(&mut rest).await.unwrap();
    assert_eq!(rest, b"last bytes;close_notify");
}

#[tokio::test]
async fn a_last_write_larger_than_the_hold_goes_out_at_once() {
    let (mut server, activity, mut client) = pair().await;
    activity.last_response_ended();
    server.write_all(b"small;").await.unwrap();
    let big = vec![b'x'; HOLD_MAX];
    server.write_all(&big).await.unwrap();
    server.flush().await.unwrap();
    let mut got = vec![0u8; 6 + HOLD_MAX];
    tokio::time::timeout(Duration::from_secs(5), client.read_exact(&mut got))
        .await
        .expect("the bytes past the hold were sent")
        .unwrap();
    assert_eq!(&got[..6], b"small;");
    assert!(got[6..].iter().all(|&b| b == b'x'));
}

#[tokio::test]
async fn a_connection_that_reads_again_sends_what_it_held() {
    let (mut server, activity, mut client) = pair().await;
    activity.last_response_ended();
    server.write_all(b"response").await.unwrap();
    server.flush().await.unwrap();
    assert_eq!(arrived(&mut client).await, b"");
    // The connection did not close after all: waiting for the next request sends the rest first.
    let mut buf = [0u8; 16];
    let read = poll_fn(|cx| {
        let mut rb = ReadBuf::new(&mut buf);
        Poll::Ready(Pin::new(&mut server).poll_read(cx, &mut rb).is_pending())
    })
    .await;
    assert!(read, "nothing to read yet");
    assert_eq!(arrived(&mut client).await, b"response");
    server.write_all(b"next").await.unwrap();
    server.flush().await.unwrap();
    assert_eq!(arrived(&mut client).await, b"next", "writes are no longer held");
}

#[tokio::test]
async fn tickets_go_with_the_first_write_and_not_at_a_flush() {
    let (mut server, _activity, mut client) = pair().await;
    server.hold(b"tickets;");
    server.flush().await.unwrap();
    assert_eq!(arrived(&mut client).await, b"", "a flush sent the tickets alone");
    server.write_all(b"response").await.unwrap();
    server.flush().await.unwrap();
    assert_eq!(arrived(&mut client).await, b"tickets;response");
}

#[tokio::test]
async fn tickets_go_before_the_connection_waits_for_the_client() {
    let (mut server, _activity, mut client) = pair().await;
    server.hold(b"tickets");
    let mut buf = [0u8; 16];
    let pending = poll_fn(|cx| {
        let mut rb = ReadBuf::new(&mut buf);
        Poll::Ready(Pin::new(&mut server).poll_read(cx, &mut rb).is_pending())
    })
    .await;
    assert!(pending);
    assert_eq!(arrived(&mut client).await, b"tickets");
    // The request, when it comes, is read as usual.
    client.write_all(b"GET").await.unwrap();
    let mut got = [0u8; 3];
    server.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"GET");
}

#[tokio::test]
async fn a_write_held_for_the_next_one_leaves_with_it() {
    let (mut server, _activity, mut client) = pair().await;
    server.hold_next(true);
    server.write_all(b"frame head;").await.unwrap();
    server.hold_next(false);
    assert_eq!(arrived(&mut client).await, b"", "the held write went out alone");
    // Larger than the hold: sent at once, behind the held bytes, in one vectored write.
    let payload = vec![b'x'; HOLD_MAX + 1];
    let n = poll_fn(|cx| Pin::new(&mut server).poll_write(cx, &payload))
        .await
        .unwrap();
    assert!(n > 0, "the write behind the held bytes was not taken");
    server.write_all(&payload[n..]).await.unwrap();
    let mut got = vec![0u8; 11 + payload.len()];
    tokio::time::timeout(Duration::from_secs(5), client.read_exact(&mut got))
        .await
        .expect("the held bytes and the write arrived")
        .unwrap();
    assert_eq!(&got[..11], b"frame head;");
    assert!(got[11..].iter().all(|&b| b == b'x'));
}

#[tokio::test]
async fn a_write_held_for_the_next_one_goes_at_a_flush() {
    let (mut server, _activity, mut client) = pair().await;
    server.hold_next(true);
    server.write_all(b"frame head;").await.unwrap();
    server.hold_next(false);
    server.flush().await.unwrap();
    assert_eq!(arrived(&mut client).await, b"frame head;");
}

/// A TLS-like record: a 5-byte header announcing `len` bytes, then `len` bytes of `fill`.
fn record(len: usize, fill: u8) -> Vec<u8> {
    let mut r = vec![23, 3, 3];
    r.extend_from_slice(&u16::try_from(len).unwrap().to_be_bytes());
    r.resize(RECORD_HEADER + len, fill);
    r
}

/// Reads exactly `n` bytes as BoringSSL does (asking for what is still missing each time).
async fn read_exact_like_boringssl(server: &mut MeteredStream<TcpStream>, n: usize) -> Vec<u8> {
    let mut got = vec![0u8; n];
    let mut filled = 0;
    while filled < n {
        let k = server.read(&mut got[filled..]).await.unwrap();
        assert!(k > 0, "end of stream");
        filled += k;
    }
    got
}

#[tokio::test]
async fn after_a_large_record_the_next_header_is_read_alone_and_small_ones_read_ahead() {
    let (mut server, _activity, mut client) = pair().await;
    // Two uploads as a client streams them (large records, a small one at the end of each),
    // then small requests.
    let records = [
        (16_000, b'a'),
        (16_000, b'b'),
        (12_000, b'c'),
        (40, b'd'),
        (16_000, b'e'),
        (40, b'f'),
        (40, b'g'),
        (40, b'h'),
    ];
    let mut sent = Vec::new();
    for (len, fill) in records {
        sent.extend(record(len, fill));
    }
    client.write_all(&sent).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut kept = Vec::new();
    for (expected, fill) in records {
        let header = read_exact_like_boringssl(&mut server, RECORD_HEADER).await;
        kept.push(server.ahead.buffered());
        let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
        assert_eq!(len, expected);
        let body = read_exact_like_boringssl(&mut server, len).await;
        assert!(body.iter().all(|&b| b == fill));
    }
    // Bytes left read ahead after each header: the first header of the connection brought part
    // of its body (8 KiB read for 5 bytes: nothing says yet that records are large); after
    // that, a large record's rest and the header after it came alone (no copy of the next body
    // through the buffer), and so did the small record that ended each upload and the header
    // after it (the next upload's first record: no 8 KiB of it through the buffer either); the
    // second small record in a row read ahead again and brought the last one with it.
    assert_eq!(kept[0], READ_AHEAD - RECORD_HEADER, "{kept:?}");
    assert_eq!(kept[1..7], [0; 6], "{kept:?}");
    assert_eq!(kept[7], 40, "{kept:?}");
    assert_eq!(server.read, sent.len() as u64);
}

/// Polls `read_would_wait` until it says a read would not wait (the runtime woke the task when
/// the socket became readable), within `limit`.
async fn readable_within(server: &MeteredStream<TcpStream>, limit: Duration) -> bool {
    tokio::time::timeout(
        limit,
        poll_fn(|cx| {
            if server.read_would_wait(cx) {
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        }),
    )
    .await
    .is_ok()
}

/// Whether a read now would wait, as `read_would_wait` says.
async fn would_wait(server: &MeteredStream<TcpStream>) -> bool {
    poll_fn(|cx| Poll::Ready(server.read_would_wait(cx))).await
}

/// Whether a read of the stream itself is pending now (it asks the socket).
async fn read_pending(server: &mut MeteredStream<TcpStream>) -> bool {
    let mut buf = [0u8; 16];
    poll_fn(|cx| {
        Poll::Ready(
            Pin::new(&mut *server)
                .poll_read(cx, &mut ReadBuf::new(&mut buf))
                .is_pending(),
        )
    })
    .await
}

#[tokio::test]
async fn a_read_would_wait_only_while_nothing_is_there_and_the_wait_is_woken() {
    let (mut server, _activity, mut client) = pair().await;
    // Nothing sent: a read would wait (and a pending read leaves the socket's readiness cleared).
    assert!(read_pending(&mut server).await);
    assert!(would_wait(&server).await);
    // Bytes arrive later: the task that asked is woken (a lost wake-up would hang here).
    let send = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        client.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
        client
    });
    assert!(
        readable_within(&server, Duration::from_secs(5)).await,
        "no wake-up when bytes arrived"
    );
    let mut client = send.await.unwrap();
    // Read ahead: the socket is drained, but the bytes are in the stream's own buffer.
    let mut four = [0u8; 4];
    server.read_exact(&mut four).await.unwrap();
    assert_eq!(&four, b"GET ");
    assert!(!would_wait(&server).await, "read-ahead bytes ignored");
    let mut rest = [0u8; 12];
    server.read_exact(&mut rest).await.unwrap();
    assert!(read_pending(&mut server).await);
    assert!(would_wait(&server).await);
    // Held bytes must go out before the connection waits: a read may not be skipped then.
    server.hold(b"tickets");
    assert!(!would_wait(&server).await, "held bytes ignored");
    assert!(read_pending(&mut server).await);
    assert_eq!(arrived(&mut client).await, b"tickets");
    assert!(would_wait(&server).await);
}
