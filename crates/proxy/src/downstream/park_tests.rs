//! Unit tests of `downstream::park`: when the stream below hyper ends a header wait, and what it
//! never ends (the end-to-end behaviour is in crates/tlsgate/tests/idle_release.rs).

use super::*;
use hyper::rt::Timer;
use std::future::poll_fn;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Polls `f` once.
async fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
    poll_fn(|cx| Poll::Ready(Pin::new(&mut *f).poll(cx))).await
}

/// One read of at most 64 bytes from `io`, polled once: `None` while it would wait.
async fn read_once<S: AsyncRead + Unpin>(io: &mut S) -> Option<Vec<u8>> {
    let mut buf = [0u8; 64];
    poll_fn(|cx| {
        let mut read = ReadBuf::new(&mut buf);
        Poll::Ready(match Pin::new(&mut *io).poll_read(cx, &mut read) {
            Poll::Ready(r) => {
                r.unwrap();
                Some(read.filled().to_vec())
            }
            Poll::Pending => None,
        })
    })
    .await
}

const RELEASE: Duration = Duration::from_millis(20);
/// hyper's header-read timeout in these tests (the waits below ask for deadlines this far).
const HEADER: Duration = Duration::from_secs(30);

/// A header wait (as hyper arms one) whose release moment has passed: the sleep, polled once
/// after it, marks the wait due and goes on to the header deadline.
async fn due_wait(timer: &HeadTimer) -> Pin<Box<dyn hyper::rt::Sleep>> {
    let mut sleep = timer.sleep_until(timer.now() + HEADER);
    assert!(poll_once(&mut sleep).await.is_pending());
    tokio::time::sleep(RELEASE * 2).await;
    assert!(
        poll_once(&mut sleep).await.is_pending(),
        "the release moment is not the header deadline"
    );
    sleep
}

#[tokio::test]
async fn a_due_wait_with_nothing_to_read_ends_the_stream_for_hyper() {
    let state = ParkState::new();
    let timer = HeadTimer::new(state.clone(), RELEASE, HEADER);
    let (client, server) = tokio::io::duplex(1024);
    let mut io = ParkIo::new(server, state.clone(), Bytes::new());
    let waiting = timer.sleep_until(timer.now() + HEADER);
    // Not yet due: an empty socket is waited on, as ever.
    assert_eq!(read_once(&mut io).await, None);
    assert!(!state.parked());
    drop(waiting);
    let due = due_wait(&timer).await;
    assert_eq!(read_once(&mut io).await, Some(Vec::new()), "an end of stream for hyper");
    drop(due);
    assert!(state.take_parked());
    assert!(!state.parked(), "take_parked clears the mark");
    drop(client);
}

#[tokio::test]
async fn bytes_during_the_wait_keep_it_from_being_parked() {
    let state = ParkState::new();
    let timer = HeadTimer::new(state.clone(), RELEASE, HEADER);
    let (mut client, server) = tokio::io::duplex(1024);
    let mut io = ParkIo::new(server, state.clone(), Bytes::new());
    let mut sleep = timer.sleep_until(timer.now() + HEADER);
    assert!(poll_once(&mut sleep).await.is_pending());
    // Half a request head arrives before the release moment...
    client.write_all(b"GET / HT").await.unwrap();
    assert_eq!(read_once(&mut io).await.as_deref(), Some(&b"GET / HT"[..]));
    tokio::time::sleep(RELEASE * 2).await;
    assert!(poll_once(&mut sleep).await.is_pending());
    // ... so the wait is never parked: the rest of the head is waited for.
    assert_eq!(read_once(&mut io).await, None);
    assert!(!state.parked());
    client.write_all(b"TP/1.1\r\n").await.unwrap();
    assert_eq!(read_once(&mut io).await.as_deref(), Some(&b"TP/1.1\r\n"[..]));
}

#[tokio::test]
async fn no_wait_no_park() {
    // A due mark without a header wait alive (hyper reads a body, or writes): never parked.
    let state = ParkState::new();
    let timer = HeadTimer::new(state.clone(), RELEASE, HEADER);
    let (_client, server) = tokio::io::duplex(1024);
    let mut io = ParkIo::new(server, state.clone(), Bytes::new());
    let sleep = due_wait(&timer).await;
    drop(sleep);
    assert_eq!(read_once(&mut io).await, None);
    assert!(!state.parked());
}

#[tokio::test]
async fn rewound_bytes_come_first_and_count_as_arrived() {
    let state = ParkState::new();
    let timer = HeadTimer::new(state.clone(), RELEASE, HEADER);
    let (mut client, server) = tokio::io::duplex(1024);
    let mut io = ParkIo::new(server, state.clone(), Bytes::from_static(b"GET /a"));
    client.write_all(b" HTTP/1.1\r\n").await.unwrap();
    let mut sleep = timer.sleep_until(timer.now() + HEADER);
    assert_eq!(read_once(&mut io).await.as_deref(), Some(&b"GET /a"[..]));
    assert_eq!(read_once(&mut io).await.as_deref(), Some(&b" HTTP/1.1\r\n"[..]));
    tokio::time::sleep(RELEASE * 2).await;
    assert!(poll_once(&mut sleep).await.is_pending());
    assert_eq!(read_once(&mut io).await, None, "a head under way is not parked");
}

#[tokio::test]
async fn the_header_deadline_still_fires_after_the_release_moment() {
    let state = ParkState::new();
    let header = Duration::from_millis(120);
    let timer = HeadTimer::new(state.clone(), RELEASE, header);
    let started = tokio::time::Instant::now();
    let mut sleep = timer.sleep_until(timer.now() + header);
    assert!(poll_once(&mut sleep).await.is_pending());
    tokio::time::sleep(RELEASE * 2).await;
    assert!(poll_once(&mut sleep).await.is_pending(), "not at the release moment");
    assert!(state.parkable(), "the release moment passed: the wait is due");
    sleep.await;
    assert!(started.elapsed() >= header, "fired at {:?}", started.elapsed());
    // A header timeout shorter than the release: the sleep is just the header timeout.
    let started = tokio::time::Instant::now();
    let slow = HeadTimer::new(state.clone(), Duration::from_secs(30), header);
    slow.sleep_until(slow.now() + header).await;
    assert!(started.elapsed() >= header && started.elapsed() < Duration::from_secs(30));
    assert_eq!(state.waits.load(Ordering::Relaxed), 0, "dropped sleeps end their waits");
}

#[tokio::test]
async fn reset_rearms_the_same_wait() {
    let state = ParkState::new();
    let timer = HeadTimer::new(state.clone(), RELEASE, HEADER);
    let mut sleep = due_wait(&timer).await;
    assert!(state.parkable());
    timer.reset(&mut sleep, timer.now() + HEADER);
    assert_eq!(state.waits.load(Ordering::Relaxed), 1);
    assert!(!state.parkable(), "a re-armed wait starts over");
    drop(sleep);
    assert_eq!(state.waits.load(Ordering::Relaxed), 0);
}

#[tokio::test]
async fn writes_pass_through() {
    let state = ParkState::new();
    let (mut client, server) = tokio::io::duplex(1024);
    let mut io = ParkIo::new(server, state, Bytes::new());
    io.write_all(b"HTTP/1.1 200 OK\r\n").await.unwrap();
    io.flush().await.unwrap();
    let mut got = [0u8; 17];
    client.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"HTTP/1.1 200 OK\r\n");
}

#[tokio::test]
async fn a_parked_wait_ends_on_bytes_or_when_asked_to_finish() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut client = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (server, _) = listener.accept().await.unwrap();
    // A parked connection's last read found nothing (which clears tokio's readiness).
    let e = server.try_read(&mut [0u8; 1]).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    let mut wait = ParkedWait::new(&server);
    assert!(poll_once(&mut wait).await.is_pending());
    client.write_all(b"G").await.unwrap();
    (&mut wait).await.unwrap();
    assert!(wait.readable && !wait.finishing);

    let (quiet, _) = {
        let _other = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        listener.accept().await.unwrap()
    };
    let mut wait = ParkedWait::new(&quiet);
    let mut pinned = &mut wait;
    Graceful::graceful(Pin::new(&mut pinned));
    (&mut wait).await.unwrap();
    assert!(wait.finishing && !wait.readable);
}

#[tokio::test]
async fn the_header_waits_of_a_connection_share_one_sleep_at_each_wait_s_own_deadline() {
    let state = ParkState::new();
    let timer = HeadTimer::new(state.clone(), RELEASE, HEADER);
    assert_eq!(state.spare_at(), None);
    let mut first = timer.sleep_until(timer.now() + HEADER);
    assert!(poll_once(&mut first).await.is_pending());
    drop(first);
    let kept = state.spare_at().expect("the ended wait's sleep is kept");
    // The kept sleep's release moment passes while no wait holds it.
    tokio::time::sleep(RELEASE * 2).await;
    let mut second = timer.sleep_until(timer.now() + HEADER);
    assert_eq!(state.spare_at(), None, "the next wait took it");
    assert!(
        poll_once(&mut second).await.is_pending(),
        "moved to the new wait's release moment, not the old one's"
    );
    assert!(!state.parkable(), "a fresh wait is not due");
    drop(second);
    assert_eq!(state.spare_at(), Some(kept), "the same sleep, not a new one per wait");
    // It still wakes a wait at that wait's release moment.
    let mut third = timer.sleep_until(timer.now() + HEADER);
    tokio::time::sleep(RELEASE * 2).await;
    assert!(poll_once(&mut third).await.is_pending());
    assert!(
        state.due.load(Ordering::Relaxed),
        "due at the third wait's release moment"
    );
    drop(third);
    // A parked connection holds no timer.
    state.parked.store(true, Ordering::Relaxed);
    assert!(state.take_parked());
    assert_eq!(state.spare_at(), None);
}
