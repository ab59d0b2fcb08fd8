//! Per-server connection limits with a queue (`max_connections_per_server`,
//! `max_queue_per_server`, `queue_timeout`), end to end against a slow recording origin: six
//! concurrent requests to a server limited to two connections all succeed while the origin never
//! has more than two open; with a short queue timeout the requests that cannot get a connection
//! get 503 (`queue_timeout`) while the slow one is still under way, and a full queue refuses at
//! once (`queue_full`); the metrics count both; a gRPC request gets UNAVAILABLE; round robin
//! sends new requests to the server that has room.

mod common;
mod recording_origin;

use common::{curl_url, upstream, upstream_route, wait_until, Fixture};
use recording_origin::RecordingOrigin;
use std::time::Duration;
use tlsgate_testkit::require;

/// Runs curl against `path` on its own thread: (status, body) once done.
fn spawn_get(f: &Fixture, path: &str, args: &[&str]) -> std::thread::JoinHandle<(String, String)> {
    let (url, ca) = (f.url(path), f.pki.ca_file());
    let resolve = format!("localhost:{}:127.0.0.1", f.https);
    let mut all: Vec<String> = vec!["--resolve".into(), resolve, "-w".into(), "\n%{http_code}".into()];
    all.extend(args.iter().map(|a| a.to_string()));
    std::thread::spawn(move || {
        let args: Vec<&str> = all.iter().map(String::as_str).collect();
        let out = curl_url(&ca, &args, &url);
        let (body, status) = out.stdout.rsplit_once('\n').unwrap_or(("", ""));
        (status.to_string(), body.to_string())
    })
}

fn limited(origin: &RecordingOrigin, extra: &str) -> Fixture {
    let routes = [
        upstream_route(None, "/app/", "app"),
        upstream("app", &[origin.addr()], extra),
    ]
    .concat();
    common::start("", &routes)
}

#[test]
fn six_requests_share_two_connections_and_all_succeed() {
    require("curl");
    let origin = RecordingOrigin::start(Duration::from_secs(1), false);
    let f = limited(&origin, "max_connections_per_server = 2\nqueue_timeout = \"20s\"");
    let requests: Vec<_> = (0..6).map(|i| spawn_get(&f, &format!("/app/{i}"), &[])).collect();
    for r in requests {
        let (status, body) = r.join().unwrap();
        assert_eq!(status, "200", "{body}");
    }
    assert!(
        origin.most_open() <= 2,
        "the origin had {} connections open",
        origin.most_open()
    );
    let served: usize = origin.conns().iter().map(|c| c.requests.len()).sum();
    assert_eq!(served, 6);
    // At least four waited for a connection, and every one that waited got one.
    let dequeued = f.gw.metric(
        "tlsgate_upstream_queue_total",
        &["upstream=\"app\"", "result=\"dequeued\""],
    );
    assert!(dequeued >= 4.0, "{dequeued} dequeued:\n{}", f.gw.metrics());
    let text = f.gw.metrics();
    assert!(!text.contains("result=\"timeout\""), "{text}");
    let open = f.gw.metric("tlsgate_upstream_connections", &["upstream=\"app\""]);
    assert!((1.0..=2.0).contains(&open), "{open} connections open:\n{text}");
    assert_eq!(
        f.gw.metric("tlsgate_upstream_queued", &["upstream=\"app\""]),
        0.0,
        "{text}"
    );
}

#[test]
fn a_short_queue_timeout_answers_503_while_the_connection_is_busy() {
    require("curl");
    let origin = RecordingOrigin::start(Duration::from_secs(4), false);
    let f = limited(
        &origin,
        "max_connections_per_server = 1\nqueue_timeout = \"300ms\"\nmax_queue_per_server = 10",
    );
    let slow = spawn_get(&f, "/app/slow", &[]);
    assert!(
        wait_until(Duration::from_secs(5), || origin.open() == 1),
        "the slow request never arrived"
    );
    let waiting: Vec<_> = (0..3).map(|i| spawn_get(&f, &format!("/app/w{i}"), &[])).collect();
    for w in waiting {
        let (status, body) = w.join().unwrap();
        assert_eq!(status, "503", "{body}");
        assert!(body.contains("queue timeout"), "{body}");
    }
    assert!(
        !slow.is_finished(),
        "the 503s came while the one connection was still busy"
    );
    let (status, _) = slow.join().unwrap();
    assert_eq!(status, "200");
    assert_eq!(origin.conns().len(), 1, "{:?}", origin.conns());
    let text = f.gw.metrics();
    let timeouts = f.gw.metric(
        "tlsgate_upstream_queue_total",
        &["upstream=\"app\"", "result=\"timeout\""],
    );
    assert_eq!(timeouts, 3.0, "{text}");
    let errors = f.gw.metric(
        "tlsgate_upstream_errors_total",
        &["upstream=\"app\"", "kind=\"queue_timeout\""],
    );
    assert_eq!(errors, 3.0, "{text}");
}

#[test]
fn a_full_queue_refuses_at_once_and_grpc_gets_unavailable() {
    require("curl");
    let origin = RecordingOrigin::start(Duration::from_secs(4), false);
    let f = limited(
        &origin,
        "max_connections_per_server = 1\nqueue_timeout = \"20s\"\nmax_queue_per_server = 1",
    );
    let slow = spawn_get(&f, "/app/slow", &[]);
    assert!(
        wait_until(Duration::from_secs(5), || origin.open() == 1),
        "the slow request never arrived"
    );
    let queued = spawn_get(&f, "/app/queued", &[]);
    let in_queue = || f.gw.metric("tlsgate_upstream_queued", &["upstream=\"app\""]) == 1.0;
    assert!(wait_until(Duration::from_secs(5), in_queue), "{}", f.gw.metrics());
    let (status, body) = spawn_get(&f, "/app/refused", &[]).join().unwrap();
    assert_eq!(status, "503", "{body}");
    assert!(body.contains("queue full"), "{body}");
    // A gRPC call is told UNAVAILABLE (14) in a trailers-only response.
    let grpc = [
        "--http2",
        "-X",
        "POST",
        "-H",
        "content-type: application/grpc",
        "-H",
        "te: trailers",
        "--data-binary",
        "",
        "-D-",
    ];
    let (status, head) = spawn_get(&f, "/app/grpc.Svc/Call", &grpc).join().unwrap();
    assert_eq!(status, "200", "{head}");
    let head = head.to_ascii_lowercase();
    assert!(head.contains("grpc-status: 14"), "{head}");
    assert!(head.contains("grpc-message: upstream queue full"), "{head}");
    assert!(
        !slow.is_finished() && !queued.is_finished(),
        "refused while the queue was full"
    );
    for r in [slow, queued] {
        assert_eq!(r.join().unwrap().0, "200");
    }
    let full =
        f.gw.metric("tlsgate_upstream_queue_total", &["upstream=\"app\"", "result=\"full\""]);
    assert_eq!(full, 2.0, "{}", f.gw.metrics());
    assert!(origin.most_open() <= 1);
}

#[test]
fn round_robin_sends_requests_to_the_server_with_room() {
    require("curl");
    let busy = RecordingOrigin::start(Duration::from_secs(3), false);
    let free = RecordingOrigin::start(Duration::ZERO, false);
    let routes = [
        upstream_route(None, "/app/", "app"),
        upstream(
            "app",
            &[busy.addr(), free.addr()],
            "max_connections_per_server = 1\nqueue_timeout = \"20s\"",
        ),
    ]
    .concat();
    let f = common::start("", &routes);
    // The first request goes to the first server in turn and holds its one connection.
    let slow = spawn_get(&f, "/app/first", &[]);
    assert!(
        wait_until(Duration::from_secs(5), || busy.open() == 1),
        "the first request never arrived"
    );
    // Every further request goes to the server with room, none waits behind the busy one.
    for i in 0..4 {
        let (status, _) = spawn_get(&f, &format!("/app/{i}"), &[]).join().unwrap();
        assert_eq!(status, "200");
    }
    assert!(!slow.is_finished());
    let served_by_free: usize = free.conns().iter().map(|c| c.requests.len()).sum();
    assert_eq!(served_by_free, 4, "{:?}", free.conns());
    assert_eq!(slow.join().unwrap().0, "200");
}
