//! Issue 16, item 3: what one client connection may hold. A real gateway process, real sockets,
//! HTTP/2 spoken frame by frame where a well-behaved client library would not misbehave:
//! PINGs do not keep an idle connection open, the gateway's keep-alive PINGs close a connection
//! whose client stopped answering them (and leave one that answers alone), a header block left open (HEADERS and CONTINUATION
//! without END_HEADERS) is closed at the header timeout, a client that takes none of its response is closed at the send timeout
//! (HTTP/1.1 socket full, also when only a `Connection: close` response's end and close_notify are left; HTTP/2 flow-control window closed), and one connection's streams get
//! at most `max_upstream_requests_per_connection` origin connections (nghttp against a slow
//! origin that counts how many it holds at once).

mod common;

use common::{upstream, upstream_route};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tlsgate_testkit::{require, RawOrigin};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let n = payload.len();
    let mut f = vec![(n >> 16) as u8, (n >> 8) as u8, n as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// SETTINGS with the given (id, value) pairs.
fn settings(pairs: &[(u16, u32)]) -> Vec<u8> {
    let payload: Vec<u8> = pairs
        .iter()
        .flat_map(|(id, v)| id.to_be_bytes().into_iter().chain(v.to_be_bytes()))
        .collect();
    frame(0x4, 0, 0, &payload)
}

/// A TLS connection to the gateway with ALPN `alpn`.
async fn connect(f: &common::Fixture, alpn: &[u8]) -> tokio_boring::SslStream<tokio::net::TcpStream> {
    let mut b = boring::ssl::SslConnector::builder(boring::ssl::SslMethod::tls()).unwrap();
    b.set_ca_file(f.pki.ca_file()).unwrap();
    b.set_alpn_protos(alpn).unwrap();
    let config = b.build().configure().unwrap();
    let tcp = tokio::net::TcpStream::connect(f.connect()).await.unwrap();
    tokio_boring::connect(config, "localhost", tcp)
        .await
        .expect("handshake")
}

/// A runtime for one raw client.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Writes `first`, then `each` every 200 ms, while reading; returns how long until the gateway
/// closed the connection (None: still open after `limit`).
fn close_time_while_sending(f: &common::Fixture, first: Vec<u8>, each: Vec<u8>, limit: Duration) -> Option<Duration> {
    runtime().block_on(async {
        let (mut rd, mut wr) = tokio::io::split(connect(f, b"\x02h2").await);
        let started = Instant::now();
        let writer = async move {
            wr.write_all(&first).await?;
            loop {
                tokio::time::sleep(Duration::from_millis(200)).await;
                wr.write_all(&each).await?;
            }
            #[allow(unreachable_code)]
            Ok::<(), std::io::Error>(())
        };
        let reader = async move {
            let mut buf = vec![0u8; 65536];
            while let Ok(n) = rd.read(&mut buf).await {
                if n == 0 {
                    break;
                }
            }
        };
        tokio::select! {
            _ = reader => Some(started.elapsed()),
            _ = writer => Some(started.elapsed()),
            _ = tokio::time::sleep(limit) => None,
        }
    })
}

#[test]
fn http2_pings_do_not_keep_an_idle_connection_open() {
    let f = common::start_edited("", "", |t| {
        t.replace("[server]\n", "[server]\nclient_idle_timeout = \"1s\"\n")
    });
    let mut first = PREFACE.to_vec();
    first.extend(settings(&[]));
    let ping = frame(0x6, 0, 0, b"12345678");
    let closed = close_time_while_sending(&f, first, ping, Duration::from_secs(8));
    let closed = closed.expect("a connection sending only PINGs was still open after 8 s (idle timeout 1 s)");
    assert!(closed >= Duration::from_millis(900), "closed too early: {closed:?}");
    assert_eq!(f.gw.metric("tlsgate_client_timeouts_total", &["reason=\"idle\""]), 1.0);
}

#[test]
fn an_http2_header_block_left_open_is_closed_at_the_header_timeout() {
    let f = common::start_edited("", "", |t| {
        t.replace(
            "[server]\n",
            "[server]\nclient_header_timeout = \"1s\"\nclient_idle_timeout = \"60s\"\n",
        )
    });
    let mut first = PREFACE.to_vec();
    first.extend(settings(&[]));
    // HEADERS on stream 1 without END_HEADERS (:method GET), one CONTINUATION (:scheme http),
    // then nothing: the block is never ended. (A steady trickle of CONTINUATION frames is cut by
    // the h2 crate itself after a few frames; a block left open and silent is not, and nothing
    // else may be sent on the connection meanwhile.)
    first.extend(frame(0x1, 0x1, 1, &[0x82]));
    first.extend(frame(0x9, 0, 1, &[0x86]));
    let continuation = Vec::new();
    let closed = close_time_while_sending(&f, first, continuation, Duration::from_secs(8));
    let closed = closed.expect("a header block left open for 8 s was not closed (header timeout 1 s)");
    assert!(closed >= Duration::from_millis(900), "closed too early: {closed:?}");
    assert_eq!(
        f.gw.metric("tlsgate_client_timeouts_total", &["reason=\"header\""]),
        1.0
    );
    // A well-behaved HTTP/2 client is served as before.
    let ok = f.curl_host("localhost", &["--http2"], "/hello");
    assert_eq!(ok.stdout, "Hello, world!", "{}", ok.all());
}

/// The header timeout of HTTP/1.1 request heads, on a connection whose earlier waits already
/// used (and handed on) the connection's one timer: two requests answered, then a head left
/// unfinished is closed at the timeout, not before and not never.
#[test]
fn an_http11_head_left_unfinished_after_two_requests_is_closed_at_the_header_timeout() {
    let f = common::start_edited("", "", |t| {
        t.replace(
            "[server]\n",
            "[server]\nclient_header_timeout = \"1s\"\nclient_idle_timeout = \"60s\"\n",
        )
    });
    let mut b = boring::ssl::SslConnector::builder(boring::ssl::SslMethod::tls()).unwrap();
    b.set_ca_file(f.pki.ca_file()).unwrap();
    let tcp = TcpStream::connect(f.connect()).unwrap();
    let mut tls = b.build().connect("localhost", tcp).expect("handshake");
    tls.get_ref().set_read_timeout(Some(Duration::from_secs(8))).unwrap();
    let mut buf = vec![0u8; 4096];
    for i in 0..2 {
        tls.write_all(b"GET /hello HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .unwrap();
        let mut got = Vec::new();
        while !got.ends_with(b"Hello, world!") {
            let n = tls.read(&mut buf).unwrap_or_else(|e| panic!("response {i}: {e}"));
            assert!(n > 0, "response {i}: the connection closed");
            got.extend_from_slice(&buf[..n]);
        }
        // Past the wait's release moment (250 ms): the next wait takes a timer that has run.
        std::thread::sleep(Duration::from_millis(300));
    }
    tls.write_all(b"GET /hello HTTP/1.1\r\nHost: loc").unwrap();
    let started = Instant::now();
    loop {
        match tls.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    let closed = started.elapsed();
    assert!(
        closed >= Duration::from_millis(900),
        "an unfinished head was closed after {closed:?}, before the 1 s header timeout"
    );
    assert!(
        closed < Duration::from_secs(7),
        "an unfinished head was still open after {closed:?} (header timeout 1 s)"
    );
}

#[test]
fn an_http11_client_that_reads_nothing_is_closed_at_the_send_timeout() {
    let origin = RawOrigin::answering(vec![b'x'; 16 << 20]);
    let routes = [upstream_route(None, "/big", "o"), upstream("o", &[origin.addr()], "")].concat();
    let f = common::start_edited("", &routes, |t| {
        t.replace("[server]\n", "[server]\nclient_send_timeout = \"1s\"\n")
    });
    let mut b = boring::ssl::SslConnector::builder(boring::ssl::SslMethod::tls()).unwrap();
    b.set_ca_file(f.pki.ca_file()).unwrap();
    let tcp = TcpStream::connect(f.connect()).unwrap();
    let mut tls = b.build().connect("localhost", tcp).expect("handshake");
    tls.write_all(b"GET /big HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    // Read nothing: the gateway's socket buffer fills and stays full.
    let timed_out = common::wait_until(Duration::from_secs(8), || {
        f.gw.metric("tlsgate_client_timeouts_total", &["reason=\"send\""]) >= 1.0
    });
    assert!(
        timed_out,
        "a client reading nothing was not closed within 8 s (send timeout 1 s)"
    );
    // The connection is gone: reading drains what was buffered, then ends.
    tls.get_ref().set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut total = 0usize;
    let mut buf = vec![0u8; 1 << 16];
    while let Ok(n) = tls.read(&mut buf) {
        if n == 0 {
            break;
        }
        total += n;
    }
    assert!(total < 16 << 20, "the whole body arrived: the connection was not cut");
}

/// A TLS client of the gateway `f` that has sent `request` (and set its receive buffer to
/// `rcvbuf` bytes first, when given).
fn tls_client(f: &common::Fixture, request: &[u8]) -> boring::ssl::SslStream<TcpStream> {
    let mut b = boring::ssl::SslConnector::builder(boring::ssl::SslMethod::tls()).unwrap();
    b.set_ca_file(f.pki.ca_file()).unwrap();
    let tcp = TcpStream::connect(f.connect()).unwrap();
    let mut tls = b.build().connect("localhost", tcp).expect("handshake");
    tls.write_all(request).unwrap();
    tls
}

/// What [`drain`] read from a connection.
struct Drained {
    /// Bytes of the response body (after the head's blank line; all bytes when no head ended).
    body: usize,
    /// Whether the connection ended (its end of stream, or an error other than the read timeout).
    ended: bool,
    /// Whether the gateway's close_notify arrived: every byte it meant to send was taken.
    clean: bool,
}

/// Reads `tls` until it ends or `limit` passes without a byte.
fn drain(tls: &mut boring::ssl::SslStream<TcpStream>, limit: Duration) -> Drained {
    tls.get_ref().set_read_timeout(Some(limit)).unwrap();
    let (mut total, mut head) = (0usize, Vec::new());
    let mut head_len = None;
    let mut buf = vec![0u8; 1 << 16];
    let ended = loop {
        match tls.read(&mut buf) {
            Ok(0) => break true,
            Ok(n) => {
                total += n;
                if head_len.is_none() {
                    head.extend_from_slice(&buf[..n.min(4096)]);
                    head_len = head.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
                }
            }
            Err(e) => {
                let timed_out = matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut);
                break !timed_out;
            }
        }
    };
    let clean = tls.get_shutdown().contains(boring::ssl::ShutdownState::RECEIVED);
    Drained {
        body: total - head_len.unwrap_or(0),
        ended,
        clean,
    }
}

#[test]
fn an_http11_client_that_takes_none_of_its_last_response_is_closed_at_the_send_timeout() {
    // `Connection: close`: the response's last bytes and the close_notify are held for one
    // segment with the FIN and sent at the final shutdown. A client that reads nothing may
    // leave room for the rest of the response but not for those: the final shutdown must end
    // at the send timeout too. How much a connection takes before it stops moving is measured
    // first (a keep-alive request for 16 MB); responses of sizes around it, each on its own
    // connection, end on either side of that edge, some of them in the final shutdown. The
    // kernel's buffers are sized per connection, so the edge of a sweep's connections can sit
    // away from the probe's: a sweep that lands none in the final shutdown is followed by
    // another, finer one centred where its answers changed from whole to cut short.
    let origin = tlsgate_testkit::Origin::start("o1");
    let routes = [upstream_route(None, "/bytes", "o"), upstream("o", &[origin.addr()], "")].concat();
    let f = common::start_edited("", &routes, |t| {
        t.replace("[server]\n", "[server]\nclient_send_timeout = \"1s\"\n")
    });
    let timeouts = || f.gw.metric("tlsgate_client_timeouts_total", &["reason=\"send\""]);
    let in_shutdown = || {
        f.gw.log()
            .matches("its last bytes were not taken within the send timeout")
            .count()
    };
    let mut probe = tls_client(&f, b"GET /bytes?n=16000000 HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert!(
        common::wait_until(Duration::from_secs(8), || timeouts() >= 1.0),
        "a client reading nothing was not closed within 8 s (send timeout 1 s)"
    );
    let Drained { body: room, ended, .. } = drain(&mut probe, Duration::from_secs(5));
    assert!(ended && room > 0 && room < 16_000_000, "{room} bytes, ended {ended}");
    let (mut centre, mut step) = (room, 2_000usize);
    let mut sweeps = Vec::new();
    for _ in 0..4 {
        let sizes: Vec<usize> = (0..48)
            .map(|i| (centre + i * step).saturating_sub(24 * step).max(1))
            .collect();
        let before = (timeouts(), in_shutdown());
        let mut clients: Vec<_> = sizes
            .iter()
            .map(|n| {
                let request = format!("GET /bytes?n={n} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
                tls_client(&f, request.as_bytes())
            })
            .collect();
        // The gateway ends every one of them, none read: whole responses with their close,
        // the others at the send timeout (1 s).
        let open = || f.gw.metric("tlsgate_open_connections", &[]);
        assert!(
            common::wait_until(Duration::from_secs(8), || open() == 0.0),
            "{} connections still open 8 s after their requests (send timeout 1 s); {} in the final shutdown",
            open(),
            in_shutdown() - before.1
        );
        let (mut cut, mut largest_whole, mut smallest_cut) = (0, None, None);
        for (c, &n) in clients.iter_mut().zip(&sizes) {
            let Drained { body, ended, clean } = drain(c, Duration::from_secs(5));
            assert!(
                ended,
                "the connection for {n} bytes was still open after the send timeout ({body} bytes of body read)"
            );
            assert!(body <= n, "{body} bytes of body for a response of {n}");
            // Cut short: in the body, or after it, where the close_notify never came (the
            // final shutdown's last bytes were not all taken).
            if body < n || !clean {
                cut += 1;
                smallest_cut = Some(smallest_cut.map_or(n, |m: usize| m.min(n)));
            } else {
                largest_whole = Some(largest_whole.map_or(n, |m: usize| m.max(n)));
            }
        }
        // Every connection cut short (in its response or in its final shutdown) is one send
        // timeout; whole responses are none.
        let shut = in_shutdown() - before.1;
        assert_eq!(
            timeouts() - before.0,
            cut as f64,
            "{cut} of {} cut short, {shut} in the final shutdown",
            sizes.len()
        );
        if shut >= 1 {
            return;
        }
        sweeps.push(format!("{}..={} by {step}: {cut} cut short", sizes[0], sizes[47]));
        centre = match (largest_whole, smallest_cut) {
            (Some(w), Some(c)) => (w + c) / 2,
            (None, _) => sizes[0].saturating_sub(12 * step),
            (_, None) => sizes[47] + 12 * step,
        };
        step = (step / 2).max(250);
    }
    panic!("no connection ran out in its final shutdown: the sizes missed the edge ({sweeps:?}, probe room {room})");
}

#[test]
fn an_http2_client_with_a_closed_window_is_closed_at_the_send_timeout() {
    let origin = RawOrigin::answering(vec![b'x'; 100_000]);
    let routes = [upstream_route(None, "/big", "o"), upstream("o", &[origin.addr()], "")].concat();
    let f = common::start_edited("", &routes, |t| {
        t.replace(
            "[server]\n",
            "[server]\nclient_send_timeout = \"1s\"\nclient_idle_timeout = \"60s\"\n",
        )
    });
    // SETTINGS_INITIAL_WINDOW_SIZE = 0: the gateway may send no DATA; PINGs keep bytes moving.
    let mut first = PREFACE.to_vec();
    first.extend(settings(&[(0x4, 0)]));
    // GET /big on stream 1: :method GET, :scheme https, :path /big (literal), :authority localhost.
    let mut block = vec![0x82, 0x87, 0x04, 0x04];
    block.extend_from_slice(b"/big");
    block.extend_from_slice(&[0x01, 0x09]);
    block.extend_from_slice(b"localhost");
    first.extend(frame(0x1, 0x5, 1, &block));
    let ping = frame(0x6, 0, 0, b"12345678");
    let closed = close_time_while_sending(&f, first, ping, Duration::from_secs(8));
    closed.expect("a client with a closed window was still connected after 8 s (send timeout 1 s)");
    assert_eq!(f.gw.metric("tlsgate_client_timeouts_total", &["reason=\"send\""]), 1.0);
    assert_eq!(origin.requests().len(), 1, "the request reached the origin");
}

/// An origin that holds every request for `hold` before answering, counting connections open
/// at once.
struct SlowOrigin {
    port: u16,
    most: Arc<AtomicUsize>,
    served: Arc<AtomicUsize>,
}

impl SlowOrigin {
    fn start(hold: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (open, most, served) = (
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicUsize::new(0)),
        );
        let (m, s) = (most.clone(), served.clone());
        std::thread::spawn(move || {
            for tcp in listener.incoming().flatten() {
                let (open, m, s) = (open.clone(), m.clone(), s.clone());
                std::thread::spawn(move || {
                    let now = open.fetch_add(1, Ordering::SeqCst) + 1;
                    m.fetch_max(now, Ordering::SeqCst);
                    let mut tcp = tcp;
                    let mut seen = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                        match tcp.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => seen.extend_from_slice(&buf[..n]),
                        }
                    }
                    std::thread::sleep(hold);
                    // Counted out before the answer leaves: the gateway can start its next
                    // origin request only after this one's answer arrived, so a thread that is
                    // slow to run after `write_all` is not counted as a third request at once.
                    s.fetch_add(1, Ordering::SeqCst);
                    open.fetch_sub(1, Ordering::SeqCst);
                    let _ = tcp.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
                });
            }
        });
        Self { port, most, served }
    }
}

#[test]
fn one_http2_connection_holds_at_most_its_share_of_origin_connections() {
    require("nghttp");
    let origin = SlowOrigin::start(Duration::from_millis(300));
    let routes = [
        upstream_route(None, "/slow", "o"),
        upstream("o", &[format!("127.0.0.1:{}", origin.port)], ""),
    ]
    .concat();
    let f = common::start_edited("", &routes, |t| {
        t.replace("[server]\n", "[server]\nmax_upstream_requests_per_connection = 2\n")
    });
    let url = format!("https://127.0.0.1:{}/slow", f.https);
    // Eight concurrent streams on one connection.
    let out = tlsgate_testkit::run(
        "nghttp",
        &["-n", "-s", "-m", "8", &url],
        b"",
        Duration::ZERO,
        Duration::from_secs(30),
    );
    assert_eq!(out.status, Some(0), "{}", out.all());
    assert_eq!(origin.served.load(Ordering::SeqCst), 8, "{}", out.all());
    let most = origin.most.load(Ordering::SeqCst);
    assert!(
        most <= 2,
        "one client connection held {most} origin connections at once (limit 2)"
    );
    assert_eq!(most, 2, "the two slots were used in parallel");
}

/// Opens an HTTP/2 connection with a request in flight to a slow origin (so the idle timeout
/// cannot be what closes it), reads frames and answers the gateway's PINGs when `answer`;
/// returns the PINGs seen and how long until the gateway closed the connection (None: open
/// after `limit`).
fn keepalive_run(f: &common::Fixture, answer: bool, limit: Duration) -> (usize, Option<Duration>) {
    runtime().block_on(async {
        let (mut rd, mut wr) = tokio::io::split(connect(f, b"\x02h2").await);
        let mut first = PREFACE.to_vec();
        first.extend(settings(&[]));
        // HEADERS (END_STREAM | END_HEADERS) for GET https://localhost/slow, literal fields.
        let mut block = vec![0x82, 0x87]; // :method GET, :scheme https
        block.extend([0x44, 5]); // :path, 5 bytes
        block.extend(b"/slow");
        block.extend([0x41, 9]); // :authority, 9 bytes
        block.extend(b"localhost");
        first.extend(frame(0x1, 0x5, 1, &block));
        wr.write_all(&first).await.unwrap();
        let started = Instant::now();
        let (acks_tx, mut acks_rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
        let writer = async move {
            while let Some(ack) = acks_rx.recv().await {
                if wr.write_all(&ack).await.is_err() {
                    break;
                }
            }
            std::future::pending::<()>().await;
        };
        let pings = Arc::new(AtomicUsize::new(0));
        let seen = pings.clone();
        let reader = async move {
            let mut buf = Vec::new();
            let mut chunk = vec![0u8; 65536];
            loop {
                match rd.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
                while buf.len() >= 9 {
                    let len = (usize::from(buf[0]) << 16) | (usize::from(buf[1]) << 8) | usize::from(buf[2]);
                    if buf.len() < 9 + len {
                        break;
                    }
                    let (kind, flags) = (buf[3], buf[4]);
                    if kind == 0x6 && flags & 0x1 == 0 {
                        seen.fetch_add(1, Ordering::Relaxed);
                        if answer {
                            let _ = acks_tx.send(frame(0x6, 0x1, 0, &buf[9..9 + len]));
                        }
                    }
                    buf.drain(..9 + len);
                }
            }
        };
        let closed = tokio::select! {
            () = reader => Some(started.elapsed()),
            () = writer => None,
            () = tokio::time::sleep(limit) => None,
        };
        (pings.load(Ordering::Relaxed), closed)
    })
}

#[test]
fn http2_keepalive_pings_close_a_connection_whose_client_stopped_answering() {
    // An origin that takes 30 s to answer: the request stays in flight, so only the keep-alive
    // can close the connection.
    let origin = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = origin.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for tcp in origin.incoming().flatten() {
            held.push(tcp);
        }
    });
    let routes = format!(
        "{}{}",
        upstream_route(None, "/slow", "slow"),
        upstream("slow", &[addr], "header_timeout = \"60s\"\n")
    );
    let top = "[http2]\nkeep_alive_interval = \"300ms\"\nkeep_alive_timeout = \"500ms\"\n";
    let f = common::start(top, &routes);

    let (pings, closed) = keepalive_run(&f, false, Duration::from_secs(8));
    let closed = closed.expect("a client that answers no PING was still connected after 8 s");
    assert!(pings >= 1, "no PING before the close");
    assert!(
        closed >= Duration::from_millis(700) && closed < Duration::from_secs(4),
        "closed after {closed:?} (interval 300 ms + timeout 500 ms)"
    );
    assert_eq!(
        f.gw.metric("tlsgate_client_timeouts_total", &["reason=\"keepalive\""]),
        1.0
    );

    let (pings, closed) = keepalive_run(&f, true, Duration::from_secs(3));
    assert_eq!(closed, None, "a client answering every PING was closed ({pings} PINGs)");
    assert!(pings >= 4, "PINGs every 300 ms for 3 s: saw {pings}");
    assert_eq!(
        f.gw.metric("tlsgate_client_timeouts_total", &["reason=\"keepalive\""]),
        1.0
    );
}
