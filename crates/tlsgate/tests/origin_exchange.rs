//! The HTTP/1.1 exchange with origins (proxy upstream/exchange.rs on tlsgate-h1), end to end:
//! request trailers from an HTTP/2 client reach an HTTP/1.1 origin in a chunked body, and an
//! idle connection the origin closed is never used for the next request, even one that could
//! not be retried, and a streamed request body reaches the origin piece by piece; the fields of
//! an origin's response that belong to its connection never reach the client.

mod common;
mod websocket_env;

use bytes::Bytes;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tlsgate_testkit::RawOrigin;
use websocket_env::{h2_connect, runtime};

/// A gateway that sends every request to the upstream `name` of one server, `origin`.
fn gateway_to(name: &str, origin: String) -> common::Fixture {
    let routes = format!(
        "{}{}",
        common::upstream_route(None, "/", name),
        common::upstream(name, &[origin], "")
    );
    common::start("", &routes)
}

/// Starts a POST of `path` with `headers` over HTTP/2 to the gateway on `port`: the response to
/// come, and the body to send.
async fn h2_post(
    port: u16,
    ca: &std::path::Path,
    path: &str,
    headers: &[(&str, &str)],
) -> (h2::client::ResponseFuture, h2::SendStream<Bytes>) {
    let client = h2_connect(port, ca).await;
    let mut client = client.ready().await.unwrap();
    let mut req = http::Request::builder()
        .method("POST")
        .uri(format!("https://localhost:{port}{path}"));
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    client.send_request(req.body(()).unwrap(), false).unwrap()
}

/// The status of `resp`, within 10 s.
async fn status_of(resp: h2::client::ResponseFuture) -> http::StatusCode {
    tokio::time::timeout(Duration::from_secs(10), resp)
        .await
        .unwrap()
        .unwrap()
        .status()
}

#[test]
fn request_trailers_from_an_http2_client_reach_an_http1_origin() {
    let origin = RawOrigin::start();
    let f = gateway_to("raw", origin.addr());
    let (port, ca) = (f.https, f.pki.ca_file());
    let status = runtime().block_on(async {
        let (resp, mut body) = h2_post(port, &ca, "/upload", &[("te", "trailers")]).await;
        body.send_data(Bytes::from_static(b"part one, "), false).unwrap();
        body.send_data(Bytes::from_static(b"part two"), false).unwrap();
        let mut trailers = http::HeaderMap::new();
        trailers.insert("x-checksum", http::HeaderValue::from_static("42"));
        body.send_trailers(trailers).unwrap();
        status_of(resp).await
    });
    assert_eq!(status, 200);
    let seen = origin.texts();
    assert_eq!(seen.len(), 1, "{seen:?}");
    let text = seen[0].to_ascii_lowercase();
    assert!(text.contains("transfer-encoding: chunked\r\n"), "{text}");
    assert!(text.contains("\r\npart one, \r\n"), "{text}");
    assert!(
        text.ends_with("\r\n0\r\nx-checksum: 42\r\n\r\n"),
        "the trailer follows the last chunk: {text}"
    );
}

/// An origin that answers each request with a keep-alive response and then closes the
/// connection after `idle` (as an origin with a short keep-alive timeout does); counts the
/// connections it accepted and the requests it answered.
struct ClosingOrigin {
    port: u16,
    accepted: Arc<AtomicUsize>,
    answered: Arc<AtomicUsize>,
}

impl ClosingOrigin {
    fn start(idle: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let answered = Arc::new(AtomicUsize::new(0));
        let (a, n) = (accepted.clone(), answered.clone());
        std::thread::spawn(move || {
            for tcp in listener.incoming() {
                let Ok(mut tcp) = tcp else { return };
                a.fetch_add(1, Ordering::SeqCst);
                let n = n.clone();
                std::thread::spawn(move || {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    // One request (head and a Content-Length body), one answer, then close.
                    loop {
                        match tcp.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(k) => buf.extend_from_slice(&chunk[..k]),
                        }
                        let text = String::from_utf8_lossy(&buf).to_ascii_lowercase();
                        let Some(end) = text.find("\r\n\r\n") else { continue };
                        let len = text
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if buf.len() >= end + 4 + len {
                            break;
                        }
                    }
                    let _ = tcp.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok");
                    n.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(idle);
                });
            }
        });
        Self {
            port,
            accepted,
            answered,
        }
    }
}

#[test]
fn an_idle_connection_the_origin_closed_is_not_used_again() {
    let origin = ClosingOrigin::start(Duration::from_millis(100));
    let routes = format!(
        "{}{}",
        common::upstream_route(None, "/", "closing"),
        common::upstream("closing", &[format!("127.0.0.1:{}", origin.port)], "")
    );
    let f = common::start("", &routes);
    for i in 0..4 {
        // POST with a body: never retried after it was sent, so only a connection that is
        // really open may carry it.
        let out = f.curl(&["-sS", "-o", "-", "-w", "%{http_code}", "--data", "payload"], "/post");
        assert_eq!(out.stdout, "ok200", "request {i}: {}", out.stderr);
        std::thread::sleep(Duration::from_millis(400));
    }
    assert_eq!(origin.answered.load(Ordering::SeqCst), 4);
    assert_eq!(
        origin.accepted.load(Ordering::SeqCst),
        4,
        "each request on a new connection"
    );
    let metrics = f.gw.metrics();
    assert!(
        !metrics.contains("tlsgate_upstream_errors_total{upstream=\"closing\""),
        "no upstream error counted:\n{metrics}"
    );
}

#[test]
fn a_streamed_request_body_reaches_the_origin_piece_by_piece() {
    // The origin signals when the first piece has arrived; the client sends the second only
    // then (a client streaming events that each wait for the previous one's effect). A gateway
    // that held small pieces back for more would never pass the first one on.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let origin_addr = listener.local_addr().unwrap().to_string();
    let (first_arrived, first_seen) = std::sync::mpsc::channel::<()>();
    let origin = std::thread::spawn(move || {
        let (mut tcp, _) = listener.accept().unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut got = Vec::new();
        let mut chunk = [0u8; 4096];
        let mut signalled = false;
        while !got.ends_with(b"0\r\n\r\n") {
            let n = tcp.read(&mut chunk).expect("the origin reads the streamed body");
            assert!(n > 0, "the gateway closed the origin connection early");
            got.extend_from_slice(&chunk[..n]);
            if !signalled && got.windows(9).any(|w| w == b"event one") {
                signalled = true;
                first_arrived.send(()).unwrap();
            }
        }
        tcp.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            .unwrap();
        String::from_utf8_lossy(&got).into_owned()
    });
    let f = gateway_to("events", origin_addr);
    let (port, ca) = (f.https, f.pki.ca_file());
    let status = runtime().block_on(async {
        let (resp, mut body) = h2_post(port, &ca, "/events", &[]).await;
        body.send_data(Bytes::from_static(b"event one\n"), false).unwrap();
        let waited = tokio::task::spawn_blocking(move || first_seen.recv_timeout(Duration::from_secs(10)))
            .await
            .unwrap();
        assert!(waited.is_ok(), "the first piece did not reach the origin on its own");
        body.send_data(Bytes::from_static(b"event two\n"), true).unwrap();
        status_of(resp).await
    });
    assert_eq!(status, 200);
    let seen = origin.join().unwrap().to_ascii_lowercase();
    assert!(seen.contains("transfer-encoding: chunked\r\n"), "{seen}");
    assert!(seen.ends_with("event one\n\r\na\r\nevent two\n\r\n0\r\n\r\n"), "{seen}");
}

/// The HTTP/1.1 exchange's parser notes the connection-specific fields of a response head and
/// the gateway removes them (issue 25: without looking for each). Whatever the origin sends —
/// `Connection` alone, `Connection` naming one of its own fields, `Keep-Alive`, `Upgrade` on a
/// 200, `Proxy-Authenticate` — none of it reaches an HTTP/1.1 client or an HTTP/2 client (whose
/// stream would fail on a connection-specific field), and the other fields all do.
#[test]
fn the_connection_fields_of_an_origin_s_response_never_reach_the_client() {
    let origin = tlsgate_testkit::scripted_origin(|path, tcp| {
        let fields = match path {
            "/plain" => "Connection: keep-alive\r\n",
            "/lower" => "connection: Keep-Alive\r\n",
            "/named" => "Connection: keep-alive, X-Private\r\nX-Private: secret\r\n",
            "/others" => {
                "Keep-Alive: timeout=5\r\nUpgrade: h2c\r\nProxy-Authenticate: Basic\r\nProxy-Connection: keep-alive\r\n"
            }
            _ => "",
        };
        let response = format!("HTTP/1.1 200 OK\r\nX-Kept: 1\r\n{fields}Content-Length: 2\r\nX-Kept-Too: 2\r\n\r\nok");
        tlsgate_testkit::scripted::write_all(tcp, &response)
    });
    let f = gateway_to("scripted", origin);
    let paths = ["/none", "/plain", "/lower", "/named", "/others"];
    let dropped = [
        "connection",
        "x-private",
        "keep-alive",
        "upgrade",
        "proxy-authenticate",
        "proxy-connection",
    ];

    let mut session = f.tls_session();
    for path in paths {
        let text = session.get(path, "\r\n\r\nok").to_ascii_lowercase();
        assert!(text.starts_with("http/1.1 200"), "{path}: {text}");
        assert!(
            text.contains("\r\nx-kept: 1\r\n") && text.contains("\r\nx-kept-too: 2\r\n"),
            "{path}: {text}"
        );
        for name in dropped {
            assert!(
                !text.contains(&format!("\r\n{name}:")),
                "{path}: {name} forwarded: {text}"
            );
        }
    }

    let (port, ca) = (f.https, f.pki.ca_file());
    runtime().block_on(async {
        let mut client = h2_connect(port, &ca).await;
        for path in paths {
            client = client.ready().await.unwrap();
            let req = http::Request::get(format!("https://localhost:{port}{path}"))
                .body(())
                .unwrap();
            let (resp, _) = client.send_request(req, true).unwrap();
            let resp = tokio::time::timeout(Duration::from_secs(10), resp)
                .await
                .unwrap()
                .unwrap_or_else(|e| panic!("{path}: {e}"));
            assert_eq!(resp.status(), 200, "{path}");
            let headers = resp.headers();
            assert!(
                headers.contains_key("x-kept") && headers.contains_key("x-kept-too"),
                "{path}: {headers:?}"
            );
            for name in dropped {
                assert!(!headers.contains_key(name), "{path}: {name} forwarded: {headers:?}");
            }
        }
    });
}
