//! Issue 2: bad input on the TLS port. Plain HTTP gets a plain-text 400; malformed ClientHellos
//! get an alert or a close; stalled handshakes are dropped after the handshake timeout; oversized
//! request headers get 431; past `max_connections` new connections are shed. None of it disturbs
//! the other connections: a request in flight through an upstream finishes, and new requests are
//! served.

mod common;

use common::{config_text, wait_until, Fixture};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use tlsgate_testkit::{free_port, GatewayProcess, Origin, TestPki};

/// A gateway with `server` lines added to `[server]`, and a `/slow` route to an origin.
struct Bed {
    f: Fixture,
    origin: Origin,
}

fn start(server: &str) -> Bed {
    let origin = Origin::start("slow-origin");
    let routes = format!(
        "[[site.route]]\npath_prefix = \"/slow\"\nupstream = \"origin\"\n\n[[upstream]]\nname = \"origin\"\nservers = [\"{}\"]\n",
        origin.addr()
    );
    let pki = TestPki::new();
    let (https, admin) = (free_port(), free_port());
    let text = config_text(&pki, https, admin, "", &routes).replacen(
        "[server]\nworkers = 2\n",
        &format!("[server]\nworkers = 2\n{server}\n"),
        1,
    );
    assert!(text.contains(server), "the [server] table moved in config_text");
    let gw = GatewayProcess::start(common::binary(), &text, admin, &[https]);
    Bed {
        f: Fixture { pki, https, admin, gw },
        origin,
    }
}

impl Bed {
    fn failures(&self, reason: &str) -> f64 {
        self.f
            .gw
            .metric("tlsgate_handshake_failures_total", &[&format!("reason=\"{reason}\"")])
    }

    /// Runs `bad` while a request through the upstream is in flight (`ms` long), then checks that
    /// the in-flight request finished normally and that a new request is served.
    fn alongside<T>(&self, ms: u64, bad: impl FnOnce() -> T) -> T {
        let before = self.origin.count();
        std::thread::scope(|s| {
            let slow = s.spawn(|| self.f.curl(&[], &format!("/slow?ms={ms}")));
            assert!(
                wait_until(Duration::from_secs(5), || self.origin.count() > before),
                "the slow request never reached the origin"
            );
            let result = bad();
            let slow = slow.join().expect("curl thread");
            assert_eq!(slow.stdout, "slow done\n", "in-flight request: {}", slow.all());
            let hello = self.f.curl(&[], "/hello");
            assert_eq!(hello.stdout, "Hello, world!", "new request: {}", hello.all());
            result
        })
    }

    fn tcp(&self) -> TcpStream {
        let s = TcpStream::connect(self.f.connect()).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s
    }
}

/// Reads until the server closes the connection; returns what arrived and how long it took.
/// Panics if the server keeps the connection open for `limit`.
fn until_closed(mut s: TcpStream, limit: Duration) -> (Vec<u8>, Duration) {
    let started = Instant::now();
    s.set_read_timeout(Some(limit)).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return (got, started.elapsed()),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return (got, started.elapsed()),
            Err(e) => panic!(
                "connection still open after {:?} ({e}); received {:02x?}",
                started.elapsed(),
                &got[..got.len().min(64)]
            ),
        }
    }
}

#[test]
fn plaintext_http_gets_a_plain_400_and_is_closed() {
    let bed = start("");
    let f = &bed.f;
    bed.alongside(1000, || {
        for request in [
            "GET /hello HTTP/1.1\r\nHost: localhost\r\n\r\n",
            "POST /hello HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\n\r\nabc",
            "HEAD / HTTP/1.0\r\n\r\n",
            "CONNECT localhost:443 HTTP/1.1\r\nHost: localhost:443\r\n\r\n",
        ] {
            let mut s = bed.tcp();
            s.write_all(request.as_bytes()).unwrap();
            let (reply, _) = until_closed(s, Duration::from_secs(5));
            let reply = String::from_utf8_lossy(&reply).into_owned();
            let (head, body) = reply
                .split_once("\r\n\r\n")
                .unwrap_or_else(|| panic!("{request:?}: {reply:?}"));
            assert!(head.starts_with("HTTP/1.1 400 "), "{request:?}: {reply:?}");
            assert!(body.contains("https://"), "{request:?}: {reply:?}");
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or_else(|| panic!("no Content-Length: {reply:?}"));
            assert_eq!(body.len(), length, "{request:?}: {reply:?}");
        }
        // A real client speaking http:// to the TLS port reads the 400 too.
        let url = format!("http://127.0.0.1:{}/hello", f.https);
        let out = tlsgate_testkit::run(
            "curl",
            &["-sS", "--max-time", "5", "-w", "\n%{http_code}", &url],
            b"",
            Duration::ZERO,
            Duration::from_secs(10),
        );
        assert!(out.stdout.ends_with("\n400"), "{}", out.all());
        assert!(out.stdout.contains("use https://"), "{}", out.all());
    });
    assert_eq!(bed.failures("plaintext_http"), 5.0, "{}", f.gw.metrics());
}

/// Sends each case on its own connection; each must get an alert record or a bare close.
fn send_malformed(bed: &Bed, cases: &[(&str, &[u8])]) {
    for (name, bytes) in cases {
        let mut s = bed.tcp();
        s.write_all(bytes).unwrap();
        let (reply, _) = until_closed(s, Duration::from_secs(5));
        assert!(
            reply.is_empty() || reply[0] == 0x15,
            "{name}: expected an alert record or nothing, got {:02x?}",
            &reply[..reply.len().min(32)]
        );
    }
}

#[test]
fn malformed_records_get_an_alert_or_a_close() {
    let bed = start("");
    let cases: &[(&str, &[u8])] = &[
        // A handshake record header with an impossible version.
        ("bad record version", b"\x16\xfe\xfe\x00\x05hello"),
        // Application data before any handshake.
        ("application data first", b"\x17\x03\x03\x00\x05hello"),
        // A record longer than TLS allows.
        ("oversized record", b"\x16\x03\x01\xff\xff\x01\x00\x00\x04"),
        // Not TLS at all (and not HTTP).
        (
            "binary garbage",
            b"\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f",
        ),
    ];
    bed.alongside(1000, || send_malformed(&bed, cases));
    assert_eq!(bed.failures("malformed"), cases.len() as f64, "{}", bed.f.gw.metrics());
    assert_eq!(bed.failures("timeout"), 0.0);
}

#[test]
fn malformed_client_hello_bodies_count_as_malformed() {
    let bed = start("");
    let cases: &[(&str, &[u8])] = &[
        // A well-framed record whose ClientHello is cut short inside the message.
        (
            "truncated ClientHello",
            b"\x16\x03\x01\x00\x08\x01\x00\x00\x04\x03\x03\xff\xff",
        ),
        // A ClientHello of the announced length holding garbage.
        (
            "garbage ClientHello",
            b"\x16\x03\x01\x00\x2f\x01\x00\x00\x2b\x03\x03garbage-garbage-garbage-garbage-garbage!!",
        ),
    ];
    bed.alongside(1000, || send_malformed(&bed, cases));
    assert_eq!(bed.failures("malformed"), cases.len() as f64, "{}", bed.f.gw.metrics());
}

#[test]
fn stalled_handshakes_are_dropped_after_the_handshake_timeout() {
    let bed = start("handshake_timeout = \"1s\"");
    // Nothing at all, and half a ClientHello (a record announcing 200 bytes, 20 sent).
    let silent = bed.tcp();
    let mut half = bed.tcp();
    half.write_all(b"\x16\x03\x01\x00\xc8\x01\x00\x00\xc4\x03\x03\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a")
        .unwrap();
    let (a, b) = bed.alongside(1500, || {
        std::thread::scope(|s| {
            let a = s.spawn(|| until_closed(silent, Duration::from_secs(4)));
            let b = s.spawn(|| until_closed(half, Duration::from_secs(4)));
            (a.join().unwrap(), b.join().unwrap())
        })
    });
    for (name, (reply, after)) in [("silent", a), ("half ClientHello", b)] {
        assert!(
            reply.is_empty() || reply[0] == 0x15,
            "{name}: {:02x?}",
            &reply[..reply.len().min(32)]
        );
        // Dropped by the timeout, not at once.
        assert!(after >= Duration::from_millis(700), "{name}: closed after {after:?}");
    }
    // The connection that sent nothing hits silent_timeout (capped by the handshake timeout).
    assert_eq!(bed.failures("timeout"), 1.0, "{}", bed.f.gw.metrics());
    assert_eq!(bed.failures("silent"), 1.0, "{}", bed.f.gw.metrics());
}

#[test]
fn oversized_request_headers_get_431() {
    let bed = start("");
    let f = &bed.f;
    // Just over the default 32 KiB limit (h2 clients do not even send more than the advertised
    // SETTINGS_MAX_HEADER_LIST_SIZE).
    let big = format!("X-Big: {}", "a".repeat(33 * 1024));
    let fits = format!("X-Fits: {}", "a".repeat(16 * 1024));
    bed.alongside(1000, || {
        for proto in ["--http1.1", "--http2"] {
            let out = f.curl(&[proto, "-o", "/dev/null", "-w", "%{http_code}", "-H", &big], "/hello");
            assert_eq!(out.stdout, "431", "{proto}: {}", out.all());
            // A large header under the limit is fine.
            let out = f.curl(&[proto, "-H", &fits], "/hello");
            assert_eq!(out.stdout, "Hello, world!", "{proto}: {}", out.all());
        }
    });
}

#[test]
fn a_64k_request_header_gets_431_over_http11() {
    let bed = start("");
    let big = format!("X-Big: {}", "a".repeat(64 * 1024));
    bed.alongside(1000, || {
        for attempt in 0..5 {
            let out = bed.f.curl(
                &["--http1.1", "-o", "/dev/null", "-w", "%{http_code}", "-H", &big],
                "/hello",
            );
            assert_eq!(out.stdout, "431", "attempt {attempt}: {}", out.all());
        }
    });
}

#[test]
fn connections_over_the_limit_are_shed_until_some_close() {
    let bed = start("max_connections = 3");
    let f = &bed.f;
    let open = || f.gw.metric("tlsgate_open_connections", &[]);
    let shed = || f.gw.metric("tlsgate_connections_shed_total", &[]);
    assert_eq!(shed(), 0.0);
    // Hold two idle connections; the in-flight request is the third.
    let held: Vec<TcpStream> = (0..2).map(|_| bed.tcp()).collect();
    bed.alongside(3000, || {
        assert!(
            wait_until(Duration::from_secs(2), || open() == 3.0),
            "{}",
            f.gw.metrics()
        );
        // A fourth connection is closed at once, before any byte is read.
        let (reply, _) = until_closed(bed.tcp(), Duration::from_secs(2));
        assert!(reply.is_empty(), "{reply:02x?}");
        assert_eq!(shed(), 1.0, "{}", f.gw.metrics());
        let out = f.curl(&[], "/hello");
        assert!(out.status != Some(0) && out.stdout.is_empty(), "{}", out.all());
        assert_eq!(shed(), 2.0, "{}", f.gw.metrics());
        // The held connections are still open.
        assert_eq!(open(), 3.0, "{}", f.gw.metrics());
    });
    // `alongside` served a new request after the in-flight one ended: room again.
    drop(held);
    assert!(
        wait_until(Duration::from_secs(3), || open() == 0.0),
        "{}",
        f.gw.metrics()
    );
    let conns: Vec<TcpStream> = (0..3).map(|_| bed.tcp()).collect();
    assert!(
        wait_until(Duration::from_secs(2), || open() == 3.0),
        "{}",
        f.gw.metrics()
    );
    drop(conns);
    assert!(wait_until(Duration::from_secs(3), || open() == 0.0));
    let out = f.curl(&[], "/hello");
    assert_eq!(out.stdout, "Hello, world!", "{}", out.all());
    assert_eq!(shed(), 2.0, "{}", f.gw.metrics());
}

/// A TLS 1.2 ClientHello without the signature_algorithms extension (RFC 5246 §7.4.1.4.1: the
/// client then accepts only SHA-1 signatures, which tlsgate does not make), for `localhost`,
/// offering ECDHE-ECDSA/RSA-AES128-GCM-SHA256 with X25519 and P-256.
fn tls12_hello_without_sigalgs() -> Vec<u8> {
    let name = b"localhost";
    let mut ext = Vec::new();
    // server_name
    let sni_len = name.len() + 3;
    ext.extend_from_slice(&[0x00, 0x00]);
    ext.extend_from_slice(&((sni_len + 2) as u16).to_be_bytes());
    ext.extend_from_slice(&(sni_len as u16).to_be_bytes());
    ext.push(0);
    ext.extend_from_slice(&(name.len() as u16).to_be_bytes());
    ext.extend_from_slice(name);
    // supported_groups: x25519, secp256r1
    ext.extend_from_slice(&[0x00, 0x0a, 0x00, 0x06, 0x00, 0x04, 0x00, 0x1d, 0x00, 0x17]);
    // ec_point_formats: uncompressed
    ext.extend_from_slice(&[0x00, 0x0b, 0x00, 0x02, 0x01, 0x00]);
    let mut body = vec![0x03, 0x03];
    body.extend_from_slice(&[0x42; 32]); // random
    body.push(0); // no session id
    body.extend_from_slice(&[0x00, 0x04, 0xc0, 0x2b, 0xc0, 0x2f]);
    body.extend_from_slice(&[0x01, 0x00]); // null compression
    body.extend_from_slice(&(ext.len() as u16).to_be_bytes());
    body.extend_from_slice(&ext);
    let mut hs = vec![0x01];
    hs.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    hs.extend_from_slice(&body);
    let mut rec = vec![0x16, 0x03, 0x01];
    rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
    rec.extend_from_slice(&hs);
    rec
}

#[test]
fn a_tls12_hello_without_signature_algorithms_gets_an_alert_and_no_log_flood() {
    let bed = start("");
    let attempts = 50;
    bed.alongside(1000, || {
        for _ in 0..attempts {
            let mut s = bed.tcp();
            s.write_all(&tls12_hello_without_sigalgs()).unwrap();
            let (reply, _) = until_closed(s, Duration::from_secs(5));
            // A fatal handshake_failure alert (40) in a TLS 1.2 alert record.
            assert!(
                reply.windows(2).any(|w| w == [0x02, 40]) && reply.first() == Some(&0x15),
                "expected a handshake_failure alert, got {:02x?}",
                &reply[..reply.len().min(32)]
            );
        }
    });
    assert_eq!(
        bed.failures("no_shared_parameters"),
        attempts as f64,
        "{}",
        bed.f.gw.metrics()
    );
    let warns = bed.f.gw.log().lines().filter(|l| l.contains("WARN")).count();
    assert!(
        warns <= 1,
        "{warns} WARN lines for {attempts} refused handshakes:\n{}",
        bed.f.gw.log()
    );
}

#[test]
fn one_source_cannot_hold_every_connection_and_silent_ones_are_closed_early() {
    let bed = start(
        "max_connections = 60\nmax_connections_per_source = 20\nsilent_timeout = \"1s\"\nhandshake_timeout = \"30s\"",
    );
    // One source (127.0.0.1) opens 100 bare TCP connections and sends nothing.
    let flood: Vec<TcpStream> = (0..100).map(|_| bed.tcp()).collect();
    assert!(
        wait_until(Duration::from_secs(5), || bed
            .f
            .gw
            .metric("tlsgate_connections_shed_per_source_total", &[])
            >= 80.0),
        "{}",
        bed.f.gw.metrics()
    );
    // Another source (127.0.0.2, same host) is served while the flood is held.
    let canary = bed.f.curl(&["--interface", "127.0.0.2"], "/hello");
    assert_eq!(canary.stdout, "Hello, world!", "{}", canary.all());
    // The held ones sent nothing: closed after silent_timeout, long before handshake_timeout.
    let started = Instant::now();
    for s in flood {
        let (_, _) = until_closed(s, Duration::from_secs(5));
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(bed.failures("silent") >= 20.0, "{}", bed.f.gw.metrics());
    let again = bed.f.curl(&[], "/hello");
    assert_eq!(again.stdout, "Hello, world!", "{}", again.all());
}

/// Out of file descriptors (connections held past the process's `ulimit -n`): every accept fails
/// while it lasts. The gateway backs off instead of spinning, says so at most once a second (not
/// a line per attempt and worker), and serves again as soon as descriptors free up.
#[test]
fn running_out_of_file_descriptors_is_logged_once_a_second_and_served_through() {
    tlsgate_testkit::require("prlimit");
    let bed = start("silent_timeout = \"60s\"\nhandshake_timeout = \"60s\"");
    let pid = bed.f.gw.pid();
    let open = std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count();
    let limit = format!("--nofile={0}:{0}", open + 16);
    let out = tlsgate_testkit::run(
        "prlimit",
        &["--pid", &pid.to_string(), &limit],
        b"",
        Duration::ZERO,
        Duration::from_secs(10),
    );
    assert_eq!(out.status, Some(0), "{}", out.all());
    // 200 bare connections: the first few take the free descriptors, the rest wait in the
    // listen queue while every accept fails with EMFILE.
    let flood: Vec<TcpStream> = (0..200).map(|_| bed.tcp()).collect();
    let started = Instant::now();
    std::thread::sleep(Duration::from_millis(2500));
    let failed = |log: &str| log.lines().filter(|l| l.contains("accept failed")).count();
    let log = bed.f.gw.log();
    let lines = failed(&log);
    assert!(
        log.contains("Too many open files"),
        "the descriptors did not run out:\n{log}"
    );
    let secs = started.elapsed().as_secs() as usize;
    assert!(
        (1..=secs + 2).contains(&lines),
        "{lines} 'accept failed' lines in {secs} s:\n{log}"
    );
    // Freed: the flood leaves, its queued connections are accepted and closed, and a client is
    // served again.
    drop(flood);
    assert!(
        wait_until(Duration::from_secs(15), || bed
            .f
            .curl(&["--max-time", "3"], "/hello")
            .stdout
            == "Hello, world!"),
        "{}",
        bed.f.gw.log()
    );
}
