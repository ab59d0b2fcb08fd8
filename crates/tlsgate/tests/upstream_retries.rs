//! Retries of failed upstream requests (`[upstream.retry]`) and passive ejection (`max_fails`),
//! end to end with curl and grpcio clients: an origin that hangs up after reading the request
//! head (a FIN, or a reset) sits before a healthy one in each group, so each group's first
//! request goes to it. Proves that an idempotent bodiless request (GET, PUT, HEAD) reset before
//! the response goes to the other server and succeeds, that a POST with a body is not sent again
//! (502), that `attempts = 1` and a spent budget retry nothing (the budget counter goes up), that a
//! connect failure is retried for a POST with its body (nothing was sent: the body arrives
//! whole) and for a gRPC call, that a header timeout is retried only where `on` names it and
//! only for idempotent bodiless requests, that `max_fails` resets in a row take a server out,
//! and that the counters are on /metrics.

mod common;
mod grpc_env;

use common::{upstream, upstream_route, Fixture};
use grpc_env::{call, GrpcOrigin, Step};
use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tlsgate_testkit::{free_port, require, Origin};

/// How the bad origin hangs up once it has read a request head.
#[derive(Clone, Copy)]
enum Hangup {
    /// A plain close (FIN): the gateway reads EOF where the response should be.
    Close,
    /// A reset (RST: `SO_LINGER` 0).
    Reset,
    /// Nothing for 3 s, then a close: the gateway's `header_timeout` fires first.
    Silent,
}

/// An origin that reads each request head, records its request line and hangs up without a
/// byte of response; stopped on drop.
struct BadOrigin {
    port: u16,
    lines: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl BadOrigin {
    fn start(hangup: Hangup) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind bad origin");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("addr").port();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (l, st) = (lines.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((tcp, _)) => {
                        let l = l.clone();
                        std::thread::spawn(move || hang_up_after_head(tcp, hangup, &l));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Self {
            port,
            lines,
            stop,
            thread: Some(thread),
        }
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The request lines received, e.g. `GET /get/1 HTTP/1.1`, whose path starts with `prefix`.
    fn seen(&self, prefix: &str) -> Vec<String> {
        let lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        lines
            .iter()
            .filter(|l| l.split(' ').nth(1).is_some_and(|p| p.starts_with(prefix)))
            .cloned()
            .collect()
    }
}

impl Drop for BadOrigin {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn hang_up_after_head(mut tcp: TcpStream, hangup: Hangup, lines: &Mutex<Vec<String>>) {
    let _ = tcp.set_nonblocking(false);
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match tcp.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&head);
    let line = text.lines().next().unwrap_or("").to_string();
    // Recorded before hanging up: when the client has its answer, the record exists.
    lines.lock().unwrap_or_else(|e| e.into_inner()).push(line);
    match hangup {
        Hangup::Close => {}
        Hangup::Reset => {
            let _ = socket2::SockRef::from(&tcp).set_linger(Some(Duration::ZERO));
        }
        Hangup::Silent => std::thread::sleep(Duration::from_secs(3)),
    }
    drop(tcp);
}

/// Statuses written by `-w "status=%{http_code}\n"`, one per transfer.
fn statuses(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|l| l.strip_prefix("status="))
        .map(str::to_string)
        .collect()
}

/// The `origin=NAME` lines of echoed bodies.
fn origins(body: &str) -> Vec<String> {
    body.lines()
        .filter_map(|l| l.strip_prefix("origin="))
        .map(str::to_string)
        .collect()
}

fn retries(f: &Fixture, group: &str, reason: &str) -> f64 {
    f.gw.metric(
        "tlsgate_upstream_retries_total",
        &[&format!("upstream=\"{group}\""), &format!("reason=\"{reason}\"")],
    )
}

fn all_retries(f: &Fixture, group: &str) -> f64 {
    f.gw.metric("tlsgate_upstream_retries_total", &[&format!("upstream=\"{group}\"")])
}

fn exhausted(f: &Fixture, group: &str) -> f64 {
    f.gw.metric(
        "tlsgate_upstream_retries_budget_exhausted_total",
        &[&format!("upstream=\"{group}\"")],
    )
}

/// One group per case, each `[bad, good]` (round robin: its first request goes to `bad`),
/// routed by path prefix `/<name>/`, with `extra` lines.
fn groups(bad: &str, good: &str, cases: &[(&str, &str)]) -> String {
    let servers = [bad.to_string(), good.to_string()];
    cases
        .iter()
        .flat_map(|(name, extra)| {
            [
                upstream_route(None, &format!("/{name}/"), name),
                upstream(name, &servers, extra),
            ]
        })
        .collect()
}

/// [`groups`] whose routes strip `/<name>` from the path (so `/<name>/upload` reaches the
/// origin as `/upload`).
fn stripped_groups(bad: &str, good: &str, cases: &[(&str, &str)]) -> String {
    groups(bad, good, cases).replace("upstream = ", "rewrite_prefix = \"/\"\nupstream = ")
}

#[test]
fn idempotent_requests_reset_before_the_response_go_to_the_other_server() {
    require("curl");
    let good = Origin::start("good");
    let (closes, resets) = (BadOrigin::start(Hangup::Close), BadOrigin::start(Hangup::Reset));
    let mut routes = groups(
        &closes.addr(),
        &good.addr(),
        &[
            ("get", ""),
            ("put", ""),
            ("post", ""),
            ("once", "[upstream.retry]\nattempts = 1"),
            (
                "broke",
                "[upstream.retry]\nbudget_percent = 0\nmin_retry_concurrency = 0",
            ),
        ],
    );
    routes.push_str(&groups(&resets.addr(), &good.addr(), &[("rst", ""), ("head", "")]));
    let f = common::start("", &routes);
    let w = ["-w", "\nstatus=%{http_code}\n"];

    // GET: the closing origin saw it, the good one answered it.
    for version in ["--http1.1", "--http2"] {
        let path = format!("/get/{}", &version[2..]);
        let out = f.curl(&[&w[..], &[version]].concat(), &path);
        assert_eq!(statuses(&out.stdout), ["200"], "{}", out.all());
        assert_eq!(origins(&out.stdout), ["good"], "{}", out.all());
        assert!(
            out.stdout.contains(&format!("method=GET\npath={path}\n")),
            "{}",
            out.all()
        );
    }
    // Only the first GET met the closing origin: one failure (max_fails = 1) took it out.
    assert_eq!(closes.seen("/get/"), ["GET /get/http1.1 HTTP/1.1"]);
    assert_eq!(retries(&f, "get", "reset"), 1.0, "{}", f.gw.metrics());
    assert_eq!(
        f.gw.metric(
            "tlsgate_upstream_errors_total",
            &["upstream=\"get\"", "kind=\"protocol\""]
        ),
        1.0
    );

    // A reset (RST) rather than a close, for GET and HEAD.
    let out = f.curl(&w, "/rst/a");
    assert_eq!(statuses(&out.stdout), ["200"], "{}", out.all());
    assert_eq!(origins(&out.stdout), ["good"], "{}", out.all());
    assert_eq!(resets.seen("/rst/"), ["GET /rst/a HTTP/1.1"]);
    let out = f.curl(&["-I", "-w", "status=%{http_code}\n"], "/head/a");
    assert_eq!(statuses(&out.stdout), ["200"], "{}", out.all());
    assert!(
        out.stdout.to_ascii_lowercase().contains("x-origin: good"),
        "{}",
        out.all()
    );
    assert_eq!(resets.seen("/head/"), ["HEAD /head/a HTTP/1.1"]);
    assert_eq!(retries(&f, "rst", "reset") + retries(&f, "head", "reset"), 2.0);

    // PUT without a body is idempotent: retried.
    let out = f.curl(&[&w[..], &["-X", "PUT"]].concat(), "/put/a");
    assert_eq!(statuses(&out.stdout), ["200"], "{}", out.all());
    assert!(out.stdout.contains("origin=good\nmethod=PUT\n"), "{}", out.all());
    assert_eq!(closes.seen("/put/"), ["PUT /put/a HTTP/1.1"]);
    assert_eq!(retries(&f, "put", "reset"), 1.0);

    // POST with a body reached the origin: it may have acted on it, so it is not sent again.
    let before = good.count();
    let out = f.curl(&[&w[..], &["-d", "order=1"]].concat(), "/post/a");
    assert_eq!(statuses(&out.stdout), ["502"], "{}", out.all());
    assert_eq!(closes.seen("/post/"), ["POST /post/a HTTP/1.1"]);
    assert_eq!(good.count(), before, "the good origin never saw the POST");
    assert_eq!(all_retries(&f, "post"), 0.0);

    // attempts = 1: nothing is retried.
    let out = f.curl(&w, "/once/a");
    assert_eq!(statuses(&out.stdout), ["502"], "{}", out.all());
    assert_eq!(closes.seen("/once/"), ["GET /once/a HTTP/1.1"]);
    assert_eq!(all_retries(&f, "once"), 0.0);
    assert_eq!(exhausted(&f, "once"), 0.0, "no retry was wanted, so none was refused");

    // A budget of 0 % with no floor: the retry is refused and counted.
    let out = f.curl(&w, "/broke/a");
    assert_eq!(statuses(&out.stdout), ["502"], "{}", out.all());
    assert_eq!(closes.seen("/broke/"), ["GET /broke/a HTTP/1.1"]);
    assert_eq!(all_retries(&f, "broke"), 0.0);
    assert_eq!(exhausted(&f, "broke"), 1.0, "{}", f.gw.metrics());
    assert_eq!(exhausted(&f, "get"), 0.0);

    let text = f.gw.metrics();
    for help in [
        "# TYPE tlsgate_upstream_retries counter",
        "# TYPE tlsgate_upstream_retries_budget_exhausted counter",
    ] {
        assert!(text.contains(help), "{help} missing from:\n{text}");
    }
}

#[test]
fn connect_failures_are_retried_for_any_method_with_the_body_whole() {
    require("curl");
    let good = Origin::start("good");
    let closed = format!("127.0.0.1:{}", free_port());
    let routes = stripped_groups(
        &closed,
        &good.addr(),
        &[
            ("h1", ""),
            ("h2", ""),
            ("big", ""),
            ("once", "[upstream.retry]\nattempts = 1"),
            ("resets_only", "[upstream.retry]\non = [\"reset\"]"),
        ],
    );
    let f = common::start("", &routes);
    let w = ["-w", "\nstatus=%{http_code}\n"];

    // POST with a body, over HTTP/1.1 and HTTP/2: nothing reached the closed port, so the body
    // goes whole to the other server.
    for (group, version) in [("h1", "--http1.1"), ("h2", "--http2")] {
        let out = f.curl(
            &[&w[..], &[version, "-d", "hello"]].concat(),
            &format!("/{group}/upload"),
        );
        assert_eq!(statuses(&out.stdout), ["200"], "{}", out.all());
        assert!(out.stdout.starts_with("received=5\n"), "{}", out.all());
        assert_eq!(retries(&f, group, "connect_failure"), 1.0, "{}", f.gw.metrics());
    }

    // A larger upload (streamed from stdin, chunked over HTTP/1.1): still whole.
    let body = vec![b'z'; 300 * 1024];
    let ca = f.pki.ca_file();
    let url = f.url("/big/upload");
    let out = tlsgate_testkit::run(
        "curl",
        &[
            "-sS",
            "--max-time",
            "10",
            "--cacert",
            ca.to_str().unwrap(),
            "--http1.1",
            "-H",
            "Transfer-Encoding: chunked",
            "--data-binary",
            "@-",
            "-w",
            "\nstatus=%{http_code}\n",
            &url,
        ],
        &body,
        Duration::ZERO,
        Duration::from_secs(15),
    );
    assert_eq!(statuses(&out.stdout), ["200"], "{}", out.all());
    assert!(
        out.stdout.starts_with(&format!("received={}\n", body.len())),
        "{}",
        out.all()
    );
    assert_eq!(retries(&f, "big", "connect_failure"), 1.0);

    // attempts = 1, or connect failures not named: the 502 of the closed port.
    for group in ["once", "resets_only"] {
        let out = f.curl(&w, &format!("/{group}/x"));
        assert_eq!(statuses(&out.stdout), ["502"], "{group}: {}", out.all());
        assert_eq!(all_retries(&f, group), 0.0);
    }
    assert_eq!(good.count(), 3, "only the retried requests reached the good origin");
    assert_eq!(
        f.gw.metric("tlsgate_upstream_errors_total", &["kind=\"connect\""]),
        5.0,
        "one connect failure per group: {}",
        f.gw.metrics()
    );
}

#[test]
fn resets_in_a_row_up_to_max_fails_take_a_server_out() {
    require("curl");
    let good = Origin::start("good");
    let bad = BadOrigin::start(Hangup::Reset);
    let routes = groups(
        &bad.addr(),
        &good.addr(),
        &[
            ("two", "max_fails = 2\nfail_timeout = \"60s\""),
            ("never", "max_fails = 0"),
        ],
    );
    let f = common::start("", &routes);
    let get = |group: &str, n: usize| {
        for i in 0..n {
            let out = f.curl(&["-w", "\nstatus=%{http_code}\n"], &format!("/{group}/{i}"));
            assert_eq!(statuses(&out.stdout), ["200"], "{}", out.all());
            assert_eq!(origins(&out.stdout), ["good"], "{}", out.all());
        }
    };
    // Round robin over [bad, good] with one retry per failed request: every request starts at
    // `bad` while it is up. The second reset in a row takes it out for 60 s.
    get("two", 5);
    assert_eq!(bad.seen("/two/").len(), 2, "{:?}", bad.seen("/two/"));
    assert_eq!(retries(&f, "two", "reset"), 2.0);
    // max_fails = 0: never taken out; every request meets it and is retried.
    get("never", 3);
    assert_eq!(bad.seen("/never/").len(), 3, "{:?}", bad.seen("/never/"));
    assert_eq!(retries(&f, "never", "reset"), 3.0);
}

#[test]
fn a_grpc_call_is_retried_after_a_connect_failure() {
    require("curl");
    let origin = GrpcOrigin::start();
    let closed = format!("127.0.0.1:{}", free_port());
    let routes = [
        upstream_route(None, "/test.Echo/", "grpc"),
        upstream("grpc", &[closed, origin.addr()], "protocol = \"http2\""),
    ]
    .concat();
    let f = common::start("", &routes);
    let out = call(f.https, &f.pki.ca_file(), &[Step::unary("/test.Echo/Unary", b"again")]);
    assert_eq!((out[0].code.as_str(), out[0].code_num), ("OK", 0), "{}", out[0].brief());
    assert_eq!(out[0].msgs, [b"again".to_vec()], "{}", out[0].brief());
    assert_eq!(retries(&f, "grpc", "connect_failure"), 1.0, "{}", f.gw.metrics());
}

#[test]
fn header_timeouts_are_retried_only_when_named_and_only_for_idempotent_bodiless_requests() {
    require("curl");
    let good = Origin::start("good");
    let silent = BadOrigin::start(Hangup::Silent);
    let named =
        "header_timeout = \"300ms\"\n[upstream.retry]\non = [\"connect_failure\", \"reset\", \"header_timeout\"]";
    let routes = groups(
        &silent.addr(),
        &good.addr(),
        &[
            ("named", named),
            ("post", named),
            ("default", "header_timeout = \"300ms\""),
        ],
    );
    let f = common::start("", &routes);
    let w = ["-w", "\nstatus=%{http_code}\n"];
    let out = f.curl(&w, "/named/a");
    assert_eq!(statuses(&out.stdout), ["200"], "{}", out.all());
    assert_eq!(origins(&out.stdout), ["good"], "{}", out.all());
    assert_eq!(silent.seen("/named/"), ["GET /named/a HTTP/1.1"]);
    assert_eq!(retries(&f, "named", "header_timeout"), 1.0, "{}", f.gw.metrics());

    let out = f.curl(&[&w[..], &["-d", "x=1"]].concat(), "/post/a");
    assert_eq!(statuses(&out.stdout), ["504"], "{}", out.all());
    let out = f.curl(&w, "/default/a");
    assert_eq!(statuses(&out.stdout), ["504"], "off by default: {}", out.all());
    assert_eq!(all_retries(&f, "post") + all_retries(&f, "default"), 0.0);
    assert_eq!(good.count(), 1, "only the named GET reached the good origin");
}
