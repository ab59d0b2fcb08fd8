//! Issue 15: the access log. One line per request written when its last byte is sent, with the
//! connection's TLS facts, the origin and its time, bytes in and out and the total time; requests
//! the client abandons (HTTP/1.1 and HTTP/2) are logged and counted as 499, an origin that breaks
//! off its body as `upstream_aborted`; `least_conn`'s in-flight count is released by abandoned
//! requests; the log goes to its own file, reopened on SIGUSR1 or `tlsgate reopen-logs`.

mod common;

use common::{upstream, upstream_route, wait_until, Fixture};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;
use tlsgate_testkit::{toml_path, Origin};

const JSON: &str = "[log]\nformat = \"json\"\n";

/// The gateway's JSON access lines so far.
fn access_lines(f: &Fixture) -> Vec<Value> {
    f.gw.log()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["target"] == "access")
        .collect()
}

/// Waits (10 s at most) for the access line whose `path` is `path`.
fn line_for(f: &Fixture, path: &str) -> Value {
    let mut found = None;
    wait_until(Duration::from_secs(10), || {
        found = access_lines(f).into_iter().find(|v| v["path"] == path);
        found.is_some()
    });
    found.unwrap_or_else(|| panic!("no access line for {path}:\n{}", f.gw.log()))
}

/// A TLS connection to the gateway from BoringSSL itself (no ALPN: HTTP/1.1).
fn tls_connect(f: &Fixture) -> boring::ssl::SslStream<TcpStream> {
    let mut b = boring::ssl::SslConnector::builder(boring::ssl::SslMethod::tls()).unwrap();
    b.set_ca_file(f.pki.ca_file()).unwrap();
    let tcp = TcpStream::connect(f.connect()).unwrap();
    b.build().connect("localhost", tcp).unwrap()
}

/// Starts `curl --http2` uploading from its stdin to `path`; the test writes the body.
fn curl_h2_upload(f: &Fixture, path: &str) -> std::process::Child {
    Command::new("curl")
        .args(["-sS", "--http2", "-T", "-", "-H", "Expect:", "--cacert"])
        .arg(f.pki.ca_file())
        .arg(f.url(path))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start curl")
}

fn metric(f: &Fixture, name: &str, labels: &[&str]) -> f64 {
    f.gw.metric(name, labels)
}

#[test]
fn http1_upload_abandoned_by_the_client_is_499_not_an_upstream_failure() {
    let origin = Origin::start("app");
    let routes = [
        upstream_route(None, "/upload", "app"),
        upstream("app", &[origin.addr()], ""),
    ]
    .concat();
    let f = common::start(JSON, &routes);
    let mut tls = tls_connect(&f);
    tls.write_all(b"POST /upload?h1 HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000000\r\n\r\n")
        .unwrap();
    tls.write_all(&[b'x'; 64 * 1024]).unwrap();
    tls.flush().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    drop(tls);

    let line = line_for(&f, "/upload?h1");
    assert_eq!(line["status"], 499, "{line}");
    assert_eq!(line["outcome"], "client_abandoned", "{line}");
    assert_eq!(line["proto"], "h1", "{line}");
    assert_eq!(line["method"], "POST", "{line}");
    let bytes_in = line["bytes_in"].as_u64().unwrap_or_else(|| panic!("bytes_in: {line}"));
    assert!(bytes_in > 0 && bytes_in <= 64 * 1024, "{line}");
    assert_eq!(line["upstream_addr"], origin.addr().as_str(), "{line}");
    assert!(metric(&f, "tlsgate_requests_total", &["status=\"499\"", "protocol=\"h1\""]) >= 1.0);
    assert_eq!(
        metric(
            &f,
            "tlsgate_requests_incomplete_total",
            &["reason=\"client_abandoned\""]
        ),
        1.0
    );
    // Not blamed on the origin.
    assert_eq!(
        metric(&f, "tlsgate_upstream_errors_total", &[]),
        0.0,
        "{}",
        f.gw.metrics()
    );
    assert!(!f.gw.log().contains("upstream request failed"), "{}", f.gw.log());
}

#[test]
fn http2_upload_abandoned_by_the_client_is_logged_and_counted_as_499() {
    let origin = Origin::start("app");
    let routes = [
        upstream_route(None, "/upload", "app"),
        upstream("app", &[origin.addr()], ""),
    ]
    .concat();
    let f = common::start(JSON, &routes);
    for i in 0..3 {
        let mut curl = curl_h2_upload(&f, &format!("/upload?h2={i}"));
        let mut stdin = curl.stdin.take().unwrap();
        stdin.write_all(&[b'x'; 32 * 1024]).unwrap();
        stdin.flush().unwrap();
        std::thread::sleep(Duration::from_millis(400));
        curl.kill().unwrap();
        curl.wait().unwrap();
    }
    for i in 0..3 {
        let line = line_for(&f, &format!("/upload?h2={i}"));
        assert_eq!(line["status"], 499, "{line}");
        assert_eq!(line["outcome"], "client_abandoned", "{line}");
        assert_eq!(line["proto"], "h2", "{line}");
        assert!(line["ms"].as_f64().unwrap() >= 300.0, "{line}");
    }
    assert_eq!(
        metric(&f, "tlsgate_requests_total", &["status=\"499\"", "protocol=\"h2\""]),
        3.0
    );
    assert_eq!(
        metric(
            &f,
            "tlsgate_requests_incomplete_total",
            &["reason=\"client_abandoned\""]
        ),
        3.0
    );
}

/// An origin that answers one request per connection with a 200 declaring `Content-Length:
/// 100000`, sends 1000 bytes of it and resets the connection.
fn resetting_origin(connections: usize) -> (String, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let thread = std::thread::spawn(move || {
        for stream in listener.incoming().take(connections) {
            let mut s = stream.unwrap();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && s.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n");
            let _ = s.write_all(&[b'x'; 1000]);
            std::thread::sleep(Duration::from_millis(200));
            socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO)).unwrap();
        }
    });
    (addr, thread)
}

#[test]
fn origin_that_resets_mid_body_is_logged_as_upstream_aborted() {
    let (addr, origin) = resetting_origin(2);
    let routes = [
        upstream_route(None, "/reset", "app"),
        upstream("app", std::slice::from_ref(&addr), ""),
    ]
    .concat();
    let f = common::start(JSON, &routes);
    for proto in ["--http1.1", "--http2"] {
        let path = format!("/reset?{proto}");
        let out = f.curl(&[proto, "-o", "/dev/null", "-w", "status=%{http_code}\n"], &path);
        assert!(out.stdout.contains("status=200"), "{}", out.all());
        assert_ne!(out.status, Some(0), "curl noticed the truncated body: {}", out.all());
        let line = line_for(&f, &path);
        assert_eq!(line["status"], 200, "{line}");
        assert_eq!(line["outcome"], "upstream_aborted", "{line}");
        assert_eq!(line["bytes_out"], 1000, "{line}");
        assert_eq!(line["upstream_addr"], addr.as_str(), "{line}");
    }
    origin.join().unwrap();
    assert_eq!(
        metric(
            &f,
            "tlsgate_requests_incomplete_total",
            &["reason=\"upstream_aborted\""]
        ),
        2.0
    );
    assert_eq!(
        metric(
            &f,
            "tlsgate_requests_incomplete_total",
            &["reason=\"client_abandoned\""]
        ),
        0.0
    );
}

#[test]
fn json_lines_have_numbers_tls_facts_origin_and_bytes() {
    let origin = Origin::start("app");
    let routes = [
        upstream_route(None, "/bytes", "app"),
        upstream_route(None, "/upload", "app"),
        upstream("app", &[origin.addr()], ""),
    ]
    .concat();
    let f = common::start(JSON, &routes);
    let out = f.curl(
        &["--http1.1", "--tlsv1.3", "-A", "access-test/1.0 (x; y)"],
        "/bytes?n=5000",
    );
    assert_eq!(out.stdout.len(), 5000, "{}", out.all());
    let line = line_for(&f, "/bytes?n=5000");
    for field in ["ms", "bytes_out", "bytes_in", "upstream_ms", "handshake_ms", "status"] {
        assert!(line[field].is_number(), "{field} is not a JSON number: {line}");
    }
    assert_eq!(line["bytes_out"], 5000, "{line}");
    assert_eq!(line["bytes_in"], 0, "{line}");
    let (ms, upstream_ms) = (line["ms"].as_f64().unwrap(), line["upstream_ms"].as_f64().unwrap());
    assert!(ms > 0.0 && upstream_ms > 0.0 && upstream_ms <= ms, "{line}");
    assert_eq!(line["status"], 200, "{line}");
    assert_eq!(line["outcome"], "ok", "{line}");
    assert_eq!(line["method"], "GET", "{line}");
    assert!(line["host"].as_str().unwrap().starts_with("localhost"), "{line}");
    assert_eq!(line["user_agent"], "access-test/1.0 (x; y)", "{line}");
    assert_eq!(line["upstream"], "app", "{line}");
    assert_eq!(line["upstream_addr"], origin.addr().as_str(), "{line}");
    assert!(line["client"].as_str().unwrap().starts_with("127.0.0.1:"), "{line}");
    assert_eq!(line["site"], "main", "{line}");
    assert_eq!(line["sni"], "localhost", "{line}");
    assert_eq!(line["tls_version"], "TLSv1.3", "{line}");
    assert!(line["cipher"].as_str().unwrap().starts_with("TLS_"), "{line}");
    assert_eq!(line["resumption"], "full", "{line}");
    assert_eq!(line["client_cert"], "-", "{line}");

    // Bytes in: the request body read from the client.
    let out = f.curl(&["--http2", "--data-binary", "hello"], "/upload?post");
    assert_eq!(out.stdout, "received=5\n", "{}", out.all());
    let line = line_for(&f, "/upload?post");
    assert_eq!(line["bytes_in"], 5, "{line}");
    assert_eq!(line["proto"], "h2", "{line}");

    // A fixed response has no origin: no upstream time.
    assert_eq!(f.curl(&[], "/hello?fixed").stdout, "Hello, world!");
    let line = line_for(&f, "/hello?fixed");
    assert_eq!(line["upstream"], "-", "{line}");
    assert_eq!(line["upstream_addr"], "-", "{line}");
    assert!(line.get("upstream_ms").is_none(), "{line}");
    assert_eq!(line["bytes_out"], 13, "{line}");

    // A TLS 1.2 session resumed from the session-ID cache says so.
    let session = f.pki.path("access-session.pem");
    let get = "GET /hello?resumed HTTP/1.1\r\nHost: localhost\r\n\r\n";
    let sess = session.to_str().unwrap();
    let first = f.s_client(&["-tls1_2", "-no_ticket", "-sess_out", sess], get);
    assert!(first.stdout.contains("Hello, world!"), "{}", first.all());
    let second = f.s_client(&["-tls1_2", "-no_ticket", "-sess_in", sess], get);
    assert!(second.stdout.contains("Reused, TLSv1.2"), "{}", second.all());
    wait_until(Duration::from_secs(10), || {
        access_lines(&f)
            .iter()
            .filter(|v| v["path"] == "/hello?resumed")
            .count()
            == 2
    });
    let lines: Vec<Value> = access_lines(&f)
        .into_iter()
        .filter(|v| v["path"] == "/hello?resumed")
        .collect();
    assert_eq!(lines.len(), 2, "{}", f.gw.log());
    assert_eq!(lines[0]["resumption"], "full", "{}", lines[0]);
    assert_eq!(lines[1]["resumption"], "session_id", "{}", lines[1]);
    assert_eq!(lines[1]["tls_version"], "TLSv1.2", "{}", lines[1]);
}

#[test]
fn access_log_goes_to_its_own_file_and_is_reopened_for_logrotate() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("access.log");
    let top = format!("[log]\naccess_log_file = {}\n", toml_path(&file));
    let f = common::start(&top, "");
    let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();
    let request = |n: u32| {
        let path = format!("/hello?n={n}");
        assert_eq!(f.curl(&[], &path).stdout, "Hello, world!");
        assert!(
            wait_until(Duration::from_secs(10), || read(&file)
                .contains(&format!("path={path} "))),
            "{path} not in {}:\n{}",
            file.display(),
            read(&file)
        );
    };
    request(1);
    let text = read(&file);
    assert!(text.contains(" access: ") && text.contains("status=200"), "{text}");
    assert!(!text.contains('\u{1b}'), "no colour codes in a file: {text:?}");
    assert!(!f.gw.log().contains("path=/hello?n=1"), "{}", f.gw.log());

    // logrotate: rename, then SIGUSR1.
    std::fs::rename(&file, dir.path().join("access.log.1")).unwrap();
    f.gw.signal("USR1");
    assert!(wait_until(Duration::from_secs(10), || file.exists()), "{}", f.gw.log());
    request(2);
    assert!(!read(&dir.path().join("access.log.1")).contains("n=2"));

    // ... or `tlsgate reopen-logs`, with the configuration or the admin address.
    std::fs::rename(&file, dir.path().join("access.log.2")).unwrap();
    let out = common::tlsgate(&["reopen-logs", "--config", f.gw.config.to_str().unwrap()]);
    assert_eq!(out.status, Some(0), "{}", out.all());
    assert!(out.stdout.contains("reopened"), "{}", out.all());
    request(3);
    assert!(!read(&dir.path().join("access.log.2")).contains("n=3"));
    std::fs::rename(&file, dir.path().join("access.log.3")).unwrap();
    let admin = format!("127.0.0.1:{}", f.admin);
    let out = common::tlsgate(&["reopen-logs", "--admin", &admin]);
    assert_eq!(out.status, Some(0), "{}", out.all());
    request(4);
    assert_eq!(read(&dir.path().join("access.log.1")).lines().count(), 1);
    assert_eq!(
        metric(&f, "tlsgate_state", &["name=\"access_log_dropped_lines_total\""]),
        0.0
    );
}

#[test]
fn least_conn_in_flight_lasts_until_the_body_ends_and_is_released_by_abandoned_requests() {
    let (a, b) = (Origin::start("a"), Origin::start("b"));
    let routes = [
        upstream_route(None, "/", "pool"),
        upstream("pool", &[a.addr(), b.addr()], "balance = \"least_conn\""),
    ]
    .concat();
    let f = common::start(JSON, &routes);
    let in_flight = |f: &Fixture| metric(f, "tlsgate_upstream_in_flight", &["upstream=\"pool\""]);

    // A response whose body takes 2 s: in flight until its last byte, not just its header.
    let url = f.url("/stream?chunks=20&ms=100");
    let ca = f.pki.ca_file();
    let slow = std::thread::spawn(move || common::curl_url(&ca, &[], &url));
    assert!(
        wait_until(Duration::from_secs(5), || access_lines(&f).is_empty()
            && in_flight(&f) == 1.0),
        "{}",
        f.gw.metrics()
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(in_flight(&f), 1.0, "still streaming: {}", f.gw.metrics());
    assert!(slow.join().unwrap().stdout.contains("chunk 19"));
    assert!(wait_until(Duration::from_secs(5), || in_flight(&f) == 0.0));

    // An HTTP/2 upload the client abandons while the origin reads it.
    let mut curl = curl_h2_upload(&f, "/upload");
    let mut stdin = curl.stdin.take().unwrap();
    stdin.write_all(&[b'x'; 32 * 1024]).unwrap();
    stdin.flush().unwrap();
    assert!(wait_until(Duration::from_secs(5), || in_flight(&f) == 1.0));
    curl.kill().unwrap();
    curl.wait().unwrap();
    assert_eq!(line_for(&f, "/upload")["status"], 499);
    assert!(
        wait_until(Duration::from_secs(5), || in_flight(&f) == 0.0),
        "released: {}",
        f.gw.metrics()
    );
    // So both servers are idle again and share the next requests.
    let (a0, b0) = (a.count(), b.count());
    for i in 0..4 {
        assert!(f.curl(&[], &format!("/after?{i}")).stdout.contains("origin="));
    }
    assert!(
        a.count() > a0 && b.count() > b0,
        "a {a0}->{}, b {b0}->{}",
        a.count(),
        b.count()
    );
}
