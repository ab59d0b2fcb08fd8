//! gRPC end to end through the gateway: a Python grpcio client speaks TLS (h2) to the gateway,
//! which forwards to a Python grpcio origin over plaintext HTTP/2 (`protocol = "http2"`, h2c).
//! Proves that unary and streaming calls in both directions arrive byte for byte; that the
//! origin's status, details and trailing metadata reach the client (trailers pass through); that
//! a client deadline reaches the origin and does not hurt the next call; that what the gateway
//! itself answers to gRPC requests (dead origin, header_timeout) is a trailers-only gRPC status
//! (HTTP 200, `grpc-status` 14 or 4, `grpc-message`), while other requests still get a 502 page.

mod common;
mod grpc_env;

use common::{upstream, upstream_route, Fixture};
use grpc_env::{call, frame, pattern, GrpcOrigin, Outcome, Step};
use std::time::Duration;
use tlsgate_testkit::{free_port, require};

const UNARY: &str = "/test.Echo/Unary";
const SERVER_STREAM: &str = "/test.Echo/ServerStream";
const CLIENT_STREAM: &str = "/test.Echo/ClientStream";
const BIDI: &str = "/test.Echo/Bidi";
const FAIL: &str = "/test.Echo/Fail";
const SLOW: &str = "/test.Echo/Slow";
const SLOW_LOG: &str = "/test.Echo/SlowLog";

/// A gateway routing `/test.Echo/` to `servers` over HTTP/2 (plus `extra` upstream lines) and
/// `/dead.Echo/` to a port nobody listens on.
fn gateway(servers: &[String], extra: &str) -> Fixture {
    let void = vec![format!("127.0.0.1:{}", free_port())];
    let routes = [
        upstream_route(None, "/test.Echo/", "grpc"),
        upstream_route(None, "/dead.Echo/", "void"),
        upstream("grpc", servers, &format!("protocol = \"http2\"\n{extra}")),
        upstream("void", &void, "protocol = \"http2\""),
    ]
    .concat();
    common::start("", &routes)
}

fn calls(f: &Fixture, steps: &[Step]) -> Vec<Outcome> {
    call(f.https, &f.pki.ca_file(), steps)
}

fn assert_ok(o: &Outcome, want: &[Vec<u8>]) {
    assert_eq!((o.code.as_str(), o.code_num), ("OK", 0), "{}", o.brief());
    let got: Vec<usize> = o.msgs.iter().map(Vec::len).collect();
    let lens: Vec<usize> = want.iter().map(Vec::len).collect();
    assert_eq!(got, lens, "message sizes of {}", o.brief());
    for (i, (g, w)) in o.msgs.iter().zip(want).enumerate() {
        let first_diff = g.iter().zip(w).position(|(a, b)| a != b);
        assert!(g == w, "{}: message {i} differs at byte {first_diff:?}", o.method);
    }
}

/// A response as `curl -D-` dumps it: the status line, the header block, the trailer block.
struct Raw {
    status: String,
    headers: Vec<(String, String)>,
    trailers: Vec<(String, String)>,
    body_size: String,
    text: String,
}

impl Raw {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
    fn trailer(&self, name: &str) -> Option<&str> {
        self.trailers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// POSTs `body` with `content_type` over HTTP/2 to the gateway (what a gRPC client sends, minus
/// the gRPC library) and parses the dump.
fn raw_post(f: &Fixture, path: &str, content_type: &str, body: &[u8]) -> Raw {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("body");
    std::fs::write(&file, body).unwrap();
    let ct = format!("content-type: {content_type}");
    let data = format!("@{}", file.display());
    let args = [
        "--http2",
        "-D-",
        "-o",
        "/dev/null",
        "-X",
        "POST",
        "-H",
        &ct,
        "-H",
        "te: trailers",
        "--data-binary",
        &data,
        "-w",
        "\nsize=%{size_download}\n",
    ];
    let out = f.curl(&args, path);
    let mut raw = parse_dump(&out.stdout);
    raw.text = out.all();
    raw
}

fn parse_dump(text: &str) -> Raw {
    let mut lines = text.lines().map(|l| l.trim_end_matches('\r'));
    let status = lines.next().unwrap_or_default().trim().to_string();
    let (mut headers, mut trailers, mut body_size) = (Vec::new(), Vec::new(), String::new());
    let mut in_trailers = false;
    for line in lines {
        if let Some(size) = line.strip_prefix("size=") {
            body_size = size.to_string();
        } else if line.is_empty() {
            in_trailers = true;
        } else if let Some((k, v)) = line.split_once(':') {
            let pair = (k.trim().to_ascii_lowercase(), v.trim().to_string());
            if in_trailers {
                trailers.push(pair)
            } else {
                headers.push(pair)
            }
        }
    }
    Raw {
        status,
        headers,
        trailers,
        body_size,
        text: text.to_string(),
    }
}

/// A gateway-made gRPC error: HTTP/2 200, `application/grpc`, `grpc-status` `code` and a
/// `grpc-message` in the one header block (trailers-only), no body.
fn assert_trailers_only(r: &Raw, code: &str) {
    assert_eq!(r.status, "HTTP/2 200", "{}", r.text);
    assert!(
        r.header("content-type")
            .is_some_and(|c| c.starts_with("application/grpc")),
        "{}",
        r.text
    );
    assert_eq!(
        r.header("grpc-status"),
        Some(code),
        "grpc-status in the header block:\n{}",
        r.text
    );
    assert!(r.header("grpc-message").is_some_and(|m| !m.is_empty()), "{}", r.text);
    assert!(
        r.trailers.is_empty(),
        "trailers-only, nothing after the headers:\n{}",
        r.text
    );
    assert_eq!(r.body_size, "0", "{}", r.text);
}

/// A gateway-made UNAVAILABLE seen by grpcio: code 14 with the gateway's message, not grpcio's
/// translation of an HTTP error status ("Received http2 header with status: 502").
fn assert_unavailable(o: &Outcome) {
    assert_eq!((o.code.as_str(), o.code_num), ("UNAVAILABLE", 14), "{}", o.brief());
    assert!(!o.details.is_empty(), "{}", o.brief());
    assert!(
        !o.details.contains("http2 header with status") && !o.details.contains("502"),
        "a gRPC status from the gateway, not an HTTP error: {}",
        o.brief()
    );
    assert!(o.msgs.is_empty(), "{}", o.brief());
}

#[test]
fn unary_and_streaming_calls_pass_through_byte_for_byte() {
    let origin = GrpcOrigin::start();
    let f = gateway(&[origin.addr()], "");
    let big = pattern(7, 100 * 1024);
    let parts = vec![
        b"one".to_vec(),
        big.clone(),
        Vec::new(),
        b"four".to_vec(),
        pattern(3, 5000),
    ];
    let sizes = [1usize, 0, 100 * 1024, 17, 3];
    let spec = sizes.map(|s| s.to_string()).join(",");
    let out = calls(
        &f,
        &[
            Step::unary(UNARY, b"hello"),
            Step::unary(UNARY, &big),
            Step::unary(UNARY, b""),
            Step::server_stream(SERVER_STREAM, spec.as_bytes()),
            Step::client_stream(CLIENT_STREAM, &parts),
            Step::bidi(BIDI, &parts).timeout(30.0),
        ],
    );
    assert_ok(&out[0], &[b"hello".to_vec()]);
    assert_eq!(
        Outcome::meta(&out[0].trailing, "x-served-by"),
        Some("grpc-origin"),
        "{}",
        out[0].brief()
    );
    assert_ok(&out[1], std::slice::from_ref(&big));
    assert_ok(&out[2], &[Vec::new()]);
    let streamed: Vec<Vec<u8>> = sizes.iter().enumerate().map(|(i, s)| pattern(i, *s)).collect();
    assert_ok(&out[3], &streamed);
    assert_ok(&out[4], &[parts.concat()]);
    // Lock step: each message went out only after the previous echo came back.
    assert_ok(&out[5], &parts);
    assert!(
        f.gw.metric("tlsgate_requests_total", &["status=\"200\""]) >= 6.0,
        "{}",
        f.gw.metrics()
    );
}

#[test]
fn origin_status_details_and_trailing_metadata_reach_the_client() {
    let origin = GrpcOrigin::start();
    let f = gateway(&[origin.addr()], "");
    let out = calls(
        &f,
        &[Step::unary(FAIL, b"trailers-only"), Step::unary(FAIL, b"headers first")],
    );
    for o in &out {
        assert_eq!((o.code.as_str(), o.code_num), ("INVALID_ARGUMENT", 3), "{}", o.brief());
        assert_eq!(o.details, "bad thing", "{}", o.brief());
        assert_eq!(
            Outcome::meta(&o.trailing, "x-fail-reason"),
            Some("testing"),
            "{}",
            o.brief()
        );
        assert_eq!(
            Outcome::meta(&o.trailing, "x-fail-detail-bin"),
            Some("hex:0001feff"),
            "{}",
            o.brief()
        );
        assert!(o.msgs.is_empty(), "{}", o.brief());
    }
    assert_eq!(Outcome::meta(&out[0].initial, "x-initial"), None, "{}", out[0].brief());
    assert_eq!(
        Outcome::meta(&out[1].initial, "x-initial"),
        Some("sent"),
        "{}",
        out[1].brief()
    );

    // On the wire: headers first, then the status in HTTP/2 trailers.
    let r = raw_post(&f, FAIL, "application/grpc", &frame(b"headers first"));
    assert_eq!(r.status, "HTTP/2 200", "{}", r.text);
    assert_eq!(r.header("x-initial"), Some("sent"), "{}", r.text);
    assert_eq!(r.header("grpc-status"), None, "{}", r.text);
    assert_eq!(r.trailer("grpc-status"), Some("3"), "{}", r.text);
    assert_eq!(r.trailer("grpc-message"), Some("bad thing"), "{}", r.text);
    assert_eq!(r.trailer("x-fail-reason"), Some("testing"), "{}", r.text);
    assert!(
        r.trailer("x-fail-detail-bin").is_some_and(|v| v.starts_with("AAH+/w")),
        "{}",
        r.text
    );
}

#[test]
fn a_client_deadline_reaches_the_origin_and_the_next_call_is_served() {
    let origin = GrpcOrigin::start();
    let f = gateway(&[origin.addr()], "");
    let out = calls(
        &f,
        &[Step::unary(SLOW, b"3000").timeout(0.5), Step::unary(UNARY, b"after")],
    );
    assert_eq!(
        (out[0].code.as_str(), out[0].code_num),
        ("DEADLINE_EXCEEDED", 4),
        "{}",
        out[0].brief()
    );
    assert!(out[0].seconds < 2.5, "{}", out[0].brief());
    // The same connection to the gateway goes on serving.
    assert_ok(&out[1], &[b"after".to_vec()]);

    // The origin saw the deadline (grpc-timeout was forwarded) and was cancelled by it; a new
    // client connection is served too.
    let mut seen = serde_json::Value::Null;
    let found = common::wait_until(Duration::from_secs(5), || {
        let out = calls(&f, &[Step::unary(SLOW_LOG, b"")]);
        assert_eq!(out[0].code, "OK", "{}", out[0].brief());
        seen = serde_json::from_slice(&out[0].msgs[0]).unwrap();
        seen.as_array().is_some_and(|a| !a.is_empty())
    });
    assert!(found, "Slow never finished at the origin:\n{}", origin.log());
    let first = &seen[0];
    let remaining = first["remaining"].as_f64();
    assert!(
        remaining.is_some_and(|r| r > 0.0 && r <= 0.5),
        "the origin's deadline: {seen}"
    );
    assert_eq!(first["cancelled"], true, "{seen}");
}

#[test]
fn a_dead_origin_is_grpc_unavailable_not_an_http_error() {
    require("curl");
    let mut origin = GrpcOrigin::start();
    let f = gateway(&[origin.addr()], "");
    let out = calls(&f, &[Step::unary(UNARY, b"warm")]);
    assert_ok(&out[0], &[b"warm".to_vec()]);
    origin.kill();

    let parts = [b"a".to_vec(), b"b".to_vec()];
    let out = calls(
        &f,
        &[
            Step::unary(UNARY, b"x"),
            Step::server_stream(SERVER_STREAM, b"1,2"),
            Step::unary("/dead.Echo/Unary", b"x"),
            Step::client_stream("/dead.Echo/ClientStream", &parts),
            Step::bidi("/dead.Echo/Bidi", &parts).timeout(30.0),
        ],
    );
    for o in &out {
        assert_unavailable(o);
    }

    // On the wire. Empty request bodies: for a gRPC request the gateway answers a dead origin
    // before it has read the body and then resets the stream with NO_ERROR (RFC 9113 8.1, what
    // gRPC servers do: a streaming client learns at once that its call is over), which curl 7.88
    // reports as error 92 instead of the response. grpcio, above, sent bodies and read the
    // responses. (Non-gRPC uploads are drained instead: see the next test.)
    for (path, content_type) in [
        ("/dead.Echo/Unary", "application/grpc"),
        ("/dead.Echo/Unary", "application/grpc+proto"),
        (UNARY, "application/grpc"),
    ] {
        let r = raw_post(&f, path, content_type, b"");
        assert_trailers_only(&r, "14");
    }
    let errors = |group: &str| {
        f.gw.metric("tlsgate_upstream_errors_total", &[&format!("upstream=\"{group}\"")])
    };
    assert!(errors("grpc") >= 1.0, "{}", f.gw.metrics());
    assert!(
        f.gw.metric(
            "tlsgate_upstream_errors_total",
            &["upstream=\"void\"", "kind=\"connect\""]
        ) >= 1.0,
        "{}",
        f.gw.metrics()
    );
}

#[test]
fn the_gateway_header_timeout_is_grpc_deadline_exceeded() {
    require("curl");
    let origin = GrpcOrigin::start();
    let f = gateway(&[origin.addr()], "header_timeout = \"300ms\"");
    // No client deadline: DEADLINE_EXCEEDED can only come from the gateway.
    let out = calls(&f, &[Step::unary(SLOW, b"2000"), Step::unary(UNARY, b"next")]);
    let o = &out[0];
    assert_eq!((o.code.as_str(), o.code_num), ("DEADLINE_EXCEEDED", 4), "{}", o.brief());
    assert!(!o.details.is_empty() && !o.details.contains("504"), "{}", o.brief());
    assert!(
        o.seconds < 1.8,
        "answered at the gateway's timeout, not the origin's reply: {}",
        o.brief()
    );
    assert_ok(&out[1], &[b"next".to_vec()]);

    let r = raw_post(&f, SLOW, "application/grpc", &frame(b"1500"));
    assert_trailers_only(&r, "4");
    assert!(
        f.gw.metric(
            "tlsgate_upstream_errors_total",
            &["upstream=\"grpc\"", "kind=\"timeout\""]
        ) >= 2.0,
        "{}",
        f.gw.metrics()
    );
}

#[test]
fn a_non_grpc_request_to_a_dead_origin_still_gets_the_502_page() {
    require("curl");
    let f = gateway(&[format!("127.0.0.1:{}", free_port())], "");
    let body = format!("@{}", {
        let file = std::env::temp_dir().join(format!("tlsgate-grpc-body-{}", std::process::id()));
        std::fs::write(&file, vec![b'x'; 6000]).unwrap();
        file.display().to_string()
    });
    let cases: [&[&str]; 5] = [
        &["--http2"],
        &["--http1.1"],
        &[
            "--http2",
            "-X",
            "POST",
            "-H",
            "content-type: application/json",
            "--data-binary",
            "",
        ],
        // An upload the gateway answers before reading it: drained in the background, not
        // reset under the client (curl 7.88 loses the response after such a reset, about one
        // time in two; repeated below to catch it).
        &[
            "--http2",
            "-X",
            "POST",
            "-H",
            "content-type: application/json",
            "--data-binary",
            &body,
        ],
        &[
            "--http1.1",
            "-X",
            "POST",
            "-H",
            "content-type: text/plain",
            "--data-binary",
            "x",
        ],
    ];
    for path in ["/dead.Echo/page", "/test.Echo/Unary"].repeat(4) {
        for args in cases {
            let mut all = vec!["-D-", "-w", "\nsize=%{size_download}\n"];
            all.extend_from_slice(args);
            let out = f.curl(&all, path);
            let r = parse_dump(&out.stdout);
            let status = r.status.split_whitespace().nth(1);
            assert_eq!(status, Some("502"), "{args:?} {path}: {}", out.all());
            assert_eq!(r.header("grpc-status"), None, "{}", out.all());
            assert!(
                !r.header("content-type").unwrap_or_default().contains("grpc"),
                "{}",
                out.all()
            );
            let body = out.stdout.split_once("\r\n\r\n").map_or("", |(_, b)| b);
            assert!(body.starts_with("502"), "the text page:\n{}", out.all());
        }
        // The same route answers a gRPC request with a gRPC status.
        assert_trailers_only(&raw_post(&f, path, "application/grpc", b""), "14");
    }
}
