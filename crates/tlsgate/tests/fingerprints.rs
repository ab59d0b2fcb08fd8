//! Issue 28 parts 3 and 4: JA4 TLS client fingerprints and `[[access_rule]]`s, end to end with
//! real clients (curl, openssl s_client) against a real gateway process.
//!
//! The expected fingerprints are not taken from the gateway: each client's ClientHello is first
//! captured on a plain TCP socket of the test (the same command line, so the same hello but for
//! its random values), and its JA4 is computed by `fingerprints_env/ja4_ref.py`, an independent
//! implementation of FoxIO's specification in Python (hashlib), which shares no code with the
//! gateway's (tlsgate-wire `ja4`, BoringSSL's SHA-256).

mod common;

use common::{upstream, upstream_route, wait_until, Fixture};
use serde_json::Value;
use socket2::{Domain, Socket, Type};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;
use tlsgate_testkit::python::PYTHON;
use tlsgate_testkit::{require, Origin};

const REF: &str = include_str!("fingerprints_env/ja4_ref.py");
const REFUSED: &str = "tlsgate_access_refused_total";
const FAILURES: &str = "tlsgate_handshake_failures_total";
/// `handshake_failure`, the alert BoringSSL sends when certificate selection refuses a hello.
const HANDSHAKE_FAILURE: u8 = 40;

/// Reads one ClientHello (its TLS records, which may be several) from an accepted connection.
fn read_hello(conn: &mut TcpStream) -> Vec<u8> {
    conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let (mut records, mut handshake) = (Vec::new(), Vec::new());
    loop {
        let mut head = [0u8; 5];
        conn.read_exact(&mut head).expect("record header");
        let mut body = vec![0u8; usize::from(u16::from_be_bytes([head[3], head[4]]))];
        conn.read_exact(&mut body).expect("record body");
        assert_eq!(head[0], 22, "not a handshake record");
        records.extend_from_slice(&head);
        records.extend_from_slice(&body);
        handshake.extend_from_slice(&body);
        if handshake.len() >= 4 {
            let len = u32::from_be_bytes([0, handshake[1], handshake[2], handshake[3]]) as usize;
            if handshake.len() >= 4 + len {
                return records;
            }
        }
    }
}

/// Runs `client` against a listener of the test on `port` and returns the ClientHello it sent.
fn capture(port: u16, client: impl FnOnce() + Send + 'static) -> Vec<u8> {
    let listener = TcpListener::bind(("127.0.0.1", port)).expect("capture port");
    let run = std::thread::spawn(client);
    let (mut conn, _) = listener.accept().expect("client connects");
    let hello = read_hello(&mut conn);
    drop(conn);
    run.join().expect("client thread");
    hello
}

/// The JA4 of captured records, computed by the independent Python implementation.
fn reference_ja4(records: &[u8]) -> String {
    let hex: String = records.iter().map(|b| format!("{b:02x}")).collect();
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("ja4_ref.py");
    std::fs::write(&script, REF).unwrap();
    let out = tlsgate_testkit::run(
        PYTHON,
        &[script.to_str().unwrap()],
        hex.as_bytes(),
        Duration::ZERO,
        Duration::from_secs(20),
    );
    let ja4 = out.stdout.trim().to_string();
    assert_eq!(ja4.len(), 36, "ja4_ref.py: {}", out.all());
    ja4
}

/// curl's arguments for `path` on localhost:`port` (the same for the capture and the gateway).
fn curl_args(f: &Fixture, port: u16, path: &str, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = ["-sS", "--max-time", "10", "--cacert"].map(String::from).to_vec();
    args.push(f.pki.ca_file().display().to_string());
    args.extend(extra.iter().map(|s| s.to_string()));
    args.push(format!("https://localhost:{port}{path}"));
    args
}

fn curl(args: &[String]) -> tlsgate_testkit::Output {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    tlsgate_testkit::run("curl", &args, b"", Duration::ZERO, Duration::from_secs(15))
}

/// `openssl s_client` to localhost:`port` (SNI localhost) sending `request`.
fn s_client(f: &Fixture, port: u16, request: &str) -> tlsgate_testkit::Output {
    let connect = format!("127.0.0.1:{port}");
    let ca = f.pki.ca_file();
    let args = [
        "s_client",
        "-connect",
        &connect,
        "-servername",
        "localhost",
        "-CAfile",
        ca.to_str().unwrap(),
    ];
    tlsgate_testkit::run(
        "openssl",
        &args,
        request.as_bytes(),
        Duration::from_millis(700),
        Duration::from_secs(15),
    )
}

/// The JA4 of curl's and of openssl's ClientHellos to localhost (computed independently).
fn client_fingerprints(f: &Fixture) -> (String, String) {
    require("curl");
    require("openssl");
    let port = tlsgate_testkit::free_port();
    let args = curl_args(f, port, "/", &[]);
    let curl_hello = capture(port, move || {
        curl(&args);
    });
    let port = tlsgate_testkit::free_port();
    let ca = f.pki.ca_file();
    let openssl_hello = capture(port, move || {
        let connect = format!("127.0.0.1:{port}");
        let args = [
            "s_client",
            "-connect",
            &connect,
            "-servername",
            "localhost",
            "-CAfile",
            ca.to_str().unwrap(),
        ];
        tlsgate_testkit::run("openssl", &args, b"", Duration::ZERO, Duration::from_secs(15));
    });
    let (c, o) = (reference_ja4(&curl_hello), reference_ja4(&openssl_hello));
    assert_ne!(c, o, "curl and openssl must differ for these tests to mean anything");
    (c, o)
}

/// A gateway whose `[server]` table also has `server_extra` lines.
fn start(top: &str, server_extra: &str, routes: &str) -> Fixture {
    common::start_edited(top, routes, |text| {
        text.replacen("[server]\n", &format!("[server]\n{server_extra}\n"), 1)
    })
}

/// The gateway's JSON access line for `path` (waits for it).
fn access_line(f: &Fixture, path: &str) -> Value {
    let mut found = None;
    wait_until(Duration::from_secs(10), || {
        found =
            f.gw.log()
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .find(|v| v["target"] == "access" && v["path"] == path);
        found.is_some()
    });
    found.unwrap_or_else(|| panic!("no access line for {path}:\n{}", f.gw.log()))
}

/// A TCP connection to the gateway from the loopback address `from`.
fn tcp_from(from: &str, port: u16) -> TcpStream {
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    let local: SocketAddr = format!("{from}:0").parse().unwrap();
    socket.bind(&local.into()).unwrap();
    let remote: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    socket.connect(&remote.into()).unwrap();
    let tcp: TcpStream = socket.into();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    tcp
}

/// Sends `hello` (TLS records) on a new connection and returns what the gateway answered
/// before closing.
fn replay(port: u16, hello: &[u8]) -> Vec<u8> {
    let mut tcp = tcp_from("127.0.0.1", port);
    tcp.write_all(hello).unwrap();
    let mut answer = Vec::new();
    let _ = tcp.read_to_end(&mut answer);
    answer
}

/// A curl from `from` to `/hello`: its output (`Hello, world!` when served).
fn curl_from(f: &Fixture, from: &str) -> tlsgate_testkit::Output {
    f.curl(&["--interface", from], "/hello")
}

#[test]
fn fingerprints_reach_the_access_log_and_the_origin_and_forged_copies_do_not() {
    let origin = Origin::start("o");
    let routes = format!(
        "{}{}",
        upstream_route(None, "/", "o"),
        upstream("o", &[origin.addr()], "")
    );
    let f = start(
        "[log]\nformat = \"json\"\naccess_log_ja4 = true\n",
        "ja4_header = \"X-JA4\"",
        &routes,
    );
    let (curl_ja4, openssl_ja4) = client_fingerprints(&f);
    // curl, with two forged copies of the header.
    let args = curl_args(
        &f,
        f.https,
        "/from-curl",
        &["-H", "X-JA4: forged", "-H", "x-ja4: forged-too"],
    );
    let out = curl(&args);
    assert!(out.stdout.contains("origin=o"), "{}", out.all());
    assert!(out.stdout.contains(&format!("x-ja4: {curl_ja4}")), "{}", out.all());
    assert!(
        !out.stdout.contains("forged"),
        "a client's copy reached the origin:\n{}",
        out.stdout
    );
    assert_eq!(out.stdout.matches("x-ja4:").count(), 1, "{}", out.stdout);
    assert_eq!(access_line(&f, "/from-curl")["ja4"], curl_ja4.as_str());
    // openssl s_client, forging too.
    let request = "GET /from-openssl HTTP/1.1\r\nHost: localhost\r\nX-JA4: forged\r\nConnection: close\r\n\r\n";
    let out = s_client(&f, f.https, request);
    assert!(out.stdout.contains(&format!("x-ja4: {openssl_ja4}")), "{}", out.all());
    assert!(!out.stdout.contains("forged"), "{}", out.stdout);
    assert_eq!(access_line(&f, "/from-openssl")["ja4"], openssl_ja4.as_str());
}

#[test]
fn without_a_feature_no_fingerprint_is_logged_or_sent() {
    let origin = Origin::start("o");
    let routes = format!(
        "{}{}",
        upstream_route(None, "/", "o"),
        upstream("o", &[origin.addr()], "")
    );
    let f = start("[log]\nformat = \"json\"\n", "", &routes);
    let out = f.curl(&["-H", "X-JA4: forged"], "/plain");
    assert!(out.stdout.contains("origin=o"), "{}", out.all());
    // No ja4_header: the gateway owns no such name, so it passes untouched; nothing computed.
    assert!(out.stdout.contains("x-ja4: forged"), "{}", out.stdout);
    assert!(access_line(&f, "/plain").get("ja4").is_none());
}

#[test]
fn a_route_matching_one_fingerprint_answers_only_that_client() {
    // The fingerprints first (the test's own sockets), then the gateway that routes by curl's.
    let probe = common::start("", "");
    let (curl_ja4, _) = client_fingerprints(&probe);
    drop(probe);
    let routes = format!(
        "\n[[site.route]]\npath_prefix = \"/who\"\nfixed_response = {{ body = \"everyone\" }}\n\
         \n[[site.route]]\npath_prefix = \"/who\"\nmatch_ja4 = [\"{curl_ja4}\"]\nfixed_response = {{ body = \"curl only\" }}\n"
    );
    let f = common::start("", &routes);
    let out = f.curl(&[], "/who");
    assert_eq!(out.stdout, "curl only", "{}", out.all());
    let out = s_client(
        &f,
        f.https,
        "GET /who HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    );
    assert!(
        out.stdout.contains("everyone") && !out.stdout.contains("curl only"),
        "{}",
        out.all()
    );
}

#[test]
fn a_fingerprint_deny_rule_refuses_that_client_with_an_alert_and_serves_others() {
    let probe = common::start("", "");
    let (_, openssl_ja4) = client_fingerprints(&probe);
    drop(probe);
    let rule = format!("[[access_rule]]\naction = \"deny\"\nja4 = [\"{openssl_ja4}\"]\nname = \"no-openssl\"\n");
    let f = common::start(&rule, "");
    // openssl's hello, replayed raw: answered with one fatal handshake_failure alert, no more.
    let port = tlsgate_testkit::free_port();
    let ca = f.pki.ca_file();
    let hello = capture(port, move || {
        let connect = format!("127.0.0.1:{port}");
        let args = [
            "s_client",
            "-connect",
            &connect,
            "-servername",
            "localhost",
            "-CAfile",
            ca.to_str().unwrap(),
        ];
        tlsgate_testkit::run("openssl", &args, b"", Duration::ZERO, Duration::from_secs(15));
    });
    let answer = replay(f.https, &hello);
    assert_eq!(answer.len(), 7, "one alert record, no ServerHello: {answer:02x?}");
    assert_eq!(
        (answer[0], answer[5], answer[6]),
        (21, 2, HANDSHAKE_FAILURE),
        "{answer:02x?}"
    );
    // openssl s_client itself: refused; curl: served.
    let out = s_client(
        &f,
        f.https,
        "GET /hello HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    );
    assert!(!out.stdout.contains("Hello, world!"), "{}", out.all());
    assert!(out.all().contains("alert handshake failure"), "{}", out.all());
    let served = f.curl(&[], "/hello");
    assert_eq!(served.stdout, "Hello, world!", "{}", served.all());
    assert_eq!(f.gw.metric(REFUSED, &["rule=\"no-openssl\"", "stage=\"hello\""]), 2.0);
    assert_eq!(f.gw.metric(FAILURES, &["reason=\"access_denied\""]), 2.0);
}

#[test]
fn source_rules_refuse_at_accept_before_any_tls() {
    // nginx's "allow 127.0.0.1; deny 127.0.0.0/8;" (Linux routes all of 127/8 to lo).
    let rules = "[[access_rule]]\naction = \"allow\"\ncidrs = [\"127.0.0.1/32\"]\n\
                 [[access_rule]]\naction = \"deny\"\ncidrs = [\"127.0.0.0/8\"]\nname = \"loopback\"\n";
    let f = common::start(rules, "");
    let served = curl_from(&f, "127.0.0.1");
    assert_eq!(served.stdout, "Hello, world!", "{}", served.all());
    // (The readiness probe's bare connection may count as one client_closed handshake.)
    let failures_before = f.gw.metric(FAILURES, &[]);
    let refused = curl_from(&f, "127.0.0.2");
    assert!(!refused.stdout.contains("Hello"), "{}", refused.all());
    // Closed at accept: a connection that sends nothing is closed at once (a TLS server would
    // wait for the ClientHello until silent_timeout).
    let mut tcp = tcp_from("127.0.0.2", f.https);
    let started = std::time::Instant::now();
    let mut buf = [0u8; 16];
    let n = tcp.read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0, "no byte from the gateway");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "closed at accept, not by a timeout"
    );
    assert_eq!(f.gw.metric(REFUSED, &["rule=\"loopback\"", "stage=\"accept\""]), 2.0);
    assert_eq!(
        f.gw.metric(FAILURES, &[]),
        failures_before,
        "no handshake was attempted"
    );
}

#[test]
fn a_reload_changes_the_rules() {
    let f = common::start("", "");
    assert_eq!(curl_from(&f, "127.0.0.2").stdout, "Hello, world!");
    let deny = "[[access_rule]]\naction = \"deny\"\ncidrs = [\"127.0.0.2\"]\n";
    f.write_config(&f.config_again(deny, ""));
    let (status, body) = f.gw.reload();
    assert_eq!(status, 200, "{body}");
    let refused = curl_from(&f, "127.0.0.2");
    assert!(!refused.stdout.contains("Hello"), "{}", refused.all());
    assert_eq!(curl_from(&f, "127.0.0.1").stdout, "Hello, world!");
    assert_eq!(
        f.gw.metric(REFUSED, &["rule=\"access_rule[0]\"", "stage=\"accept\""]),
        1.0
    );
    // And back (SIGHUP this time).
    f.write_config(&f.config_again("", ""));
    f.gw.signal("HUP");
    assert!(
        wait_until(Duration::from_secs(10), || curl_from(&f, "127.0.0.2").stdout
            == "Hello, world!"),
        "{}",
        f.gw.log()
    );
}

/// A ClientHello record around `body`, with a handshake length of `declared`.
fn hello_record(body: &[u8], declared: usize) -> Vec<u8> {
    let mut hs = vec![1u8];
    hs.extend_from_slice(&(declared as u32).to_be_bytes()[1..]);
    hs.extend_from_slice(body);
    let mut rec = vec![22u8, 3, 1];
    rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
    rec.extend_from_slice(&hs);
    rec
}

#[test]
fn malformed_client_hellos_with_rules_on_disturb_no_one() {
    let rules = "[[access_rule]]\naction = \"deny\"\nja4 = [\"t13d0000h2_000000000000_000000000000\"]\n\
                 [[access_rule]]\naction = \"deny\"\ncidrs = [\"192.0.2.0/24\"]\n";
    let f = start("[log]\naccess_log_ja4 = true\n", "ja4_header = \"X-JA4\"", rules);
    let mut junk = vec![3u8, 3];
    junk.extend_from_slice(&[0xAB; 32]);
    let cases: Vec<Vec<u8>> = vec![
        hello_record(&junk, junk.len()),                      // cut after the random
        hello_record(&[3, 3, 0, 0, 0xff, 0xff], 6),           // suites longer than the message
        hello_record(&[], 0),                                 // empty
        hello_record(&junk, 0x00ff_ffff),                     // a length it never sends
        vec![22, 3, 1, 0xff, 0xff, 1, 0, 0, 0],               // a record it never completes
        b"\x16\x03\x01\x00\x05\x01\x00\x00\x01\xff".to_vec(), // 1-byte body
    ];
    for case in &cases {
        let mut tcp = tcp_from("127.0.0.1", f.https);
        let _ = tcp.write_all(case);
        tcp.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
        let mut buf = [0u8; 64];
        let _ = tcp.read(&mut buf);
        // Held open meanwhile: others are served while malformed hellos are pending.
        let served = f.curl(&[], "/hello");
        assert_eq!(served.stdout, "Hello, world!", "{case:02x?}: {}", served.all());
    }
    assert!(
        f.gw.http_get("/healthz").is_some(),
        "the gateway is alive:\n{}",
        f.gw.log()
    );
}
