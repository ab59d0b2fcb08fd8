//! `[server.handshake_budget]` end to end: a real gateway, real sockets from several loopback
//! sources (127.0.0.2 floods, 127.0.0.1 is the canary), BoringSSL clients doing real full and
//! resumed handshakes, `/metrics` and the log read back.

mod common;

use boring::ssl::{HandshakeError, SslConnector, SslMethod, SslSession, SslSessionCacheMode, SslVersion};
use common::{wait_until, Fixture};
use socket2::{Domain, Socket, Type};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tlsgate_testkit::{free_port, GatewayProcess, TestPki};

const REFUSED: &str = "tlsgate_handshakes_refused_total";
/// BoringSSL's alert when certificate selection refuses a hello.
const HANDSHAKE_FAILURE: u8 = 40;

/// A `[server.handshake_budget]` table.
fn budget(lines: &str) -> String {
    format!("[server.handshake_budget]\n{lines}\n")
}

/// A TCP connection to 127.0.0.1:`port` from the loopback address `from`.
fn tcp_from(from: &str, port: u16) -> TcpStream {
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    let local: SocketAddr = format!("{from}:0").parse().unwrap();
    socket.bind(&local.into()).unwrap();
    let remote: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    socket.connect(&remote.into()).unwrap();
    let tcp: TcpStream = socket.into();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    tcp.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    tcp
}

/// How one handshake ended.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// Completed; true when it resumed a session. `GET /hello` was answered on it.
    Done { resumed: bool },
    /// Failed; the alert the client received, if any.
    Refused { alert: Option<u8> },
}

/// A BoringSSL client of one TLS version that keeps the sessions it is given.
struct Client {
    connector: SslConnector,
    sessions: Arc<Mutex<Vec<SslSession>>>,
}

impl Client {
    fn new(pki: &TestPki, version: SslVersion) -> Self {
        let mut b = SslConnector::builder(SslMethod::tls()).unwrap();
        b.set_ca_file(pki.ca_file()).unwrap();
        b.set_min_proto_version(Some(version)).unwrap();
        b.set_max_proto_version(Some(version)).unwrap();
        let sessions: Arc<Mutex<Vec<SslSession>>> = Arc::default();
        let store = sessions.clone();
        b.set_session_cache_mode(SslSessionCacheMode::CLIENT);
        b.set_new_session_callback(move |_, s| store.lock().unwrap().push(s));
        Self {
            connector: b.build(),
            sessions,
        }
    }

    fn last_session(&self) -> SslSession {
        self.sessions.lock().unwrap().last().cloned().expect("a session")
    }

    /// One handshake from `from` (offering `session`), then `GET /hello` on it, answered
    /// `Hello, world!`.
    fn connect(&self, from: &str, port: u16, session: Option<&SslSession>) -> Outcome {
        self.fetch(from, port, session, |text| {
            assert!(text.ends_with("Hello, world!"), "{text}");
        })
    }

    /// One handshake from `from` (offering `session`), then `GET /hello` on it; the whole
    /// answer goes to `check`.
    fn fetch(&self, from: &str, port: u16, session: Option<&SslSession>, check: impl FnOnce(&str)) -> Outcome {
        let tcp = tcp_from(from, port);
        let mut ssl = self.connector.configure().unwrap().into_ssl("localhost").unwrap();
        if let Some(s) = session {
            tlsgate_tls::set_client_session(&mut ssl, s).unwrap();
        }
        match ssl.connect(tcp) {
            Ok(mut tls) => {
                let resumed = tls.ssl().session_reused();
                tls.write_all(b"GET /hello HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                    .unwrap();
                let mut out = Vec::new();
                let _ = tls.read_to_end(&mut out);
                check(&String::from_utf8_lossy(&out));
                Outcome::Done { resumed }
            }
            Err(HandshakeError::Failure(mid)) => Outcome::Refused {
                alert: mid.error().ssl_error().and_then(tlsgate_tls::failure::received_alert),
            },
            Err(e) => panic!("handshake from {from}: {e}"),
        }
    }
}

const FULL: Outcome = Outcome::Done { resumed: false };
const RESUMED: Outcome = Outcome::Done { resumed: true };
const REFUSED_WITH_ALERT: Outcome = Outcome::Refused {
    alert: Some(HANDSHAKE_FAILURE),
};

fn refused(f: &Fixture, reason: &str, stage: &str) -> f64 {
    f.gw.metric(
        REFUSED,
        &[&format!("reason=\"{reason}\""), &format!("stage=\"{stage}\"")],
    )
}

#[test]
fn a_flooding_source_is_refused_after_its_burst_while_a_canary_is_served() {
    tlsgate_testkit::require("curl");
    // Every source has this budget, the canary too: it stays within it (five handshakes).
    let (rate, burst) = (1.0, 8u32);
    let f = common::start(&budget(&format!("full_per_second = {rate}\nfull_burst = {burst}")), "");
    let client = Client::new(&f.pki, SslVersion::TLS1_3);
    let (url, ca) = (f.url("/hello"), f.pki.ca_file());
    let started = Instant::now();
    let (mut done, mut refusals, mut attempts) = (0u32, 0u32, 0u32);
    let canary = std::thread::scope(|scope| {
        // The canary: full handshakes (a new curl each) from 127.0.0.1 during the flood.
        let canary = scope.spawn(|| {
            (0..4)
                .map(|_| common::curl_url(&ca, &[], &url).stdout)
                .collect::<Vec<_>>()
        });
        while refusals < 20 && attempts < 500 {
            attempts += 1;
            match client.connect("127.0.0.2", f.https, None) {
                FULL => done += 1,
                other => {
                    assert_eq!(other, REFUSED_WITH_ALERT, "refused with handshake_failure");
                    refusals += 1;
                }
            }
        }
        canary.join().unwrap()
    });
    let elapsed = started.elapsed().as_secs_f64();
    assert_eq!(refusals, 20, "{done} of {attempts} went through");
    let most = f64::from(burst) + (elapsed * rate).ceil();
    assert!(
        f64::from(done) >= f64::from(burst) && f64::from(done) <= most,
        "{done} full handshakes in {elapsed:.1} s: the burst, and one a second after it"
    );
    assert!(canary.iter().all(|body| body == "Hello, world!"), "{canary:?}");
    // Counted, and logged (at most once a second, with the source's network).
    assert!(
        wait_until(Duration::from_secs(5), || refused(
            &f,
            "full_handshake_budget",
            "client_hello"
        ) >= 20.0),
        "{}",
        f.gw.metrics()
    );
    let failures =
        f.gw.metric("tlsgate_handshake_failures_total", &["reason=\"handshake_budget\""]);
    assert!(failures >= 20.0, "{failures}");
    let log = f.gw.log();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("over its handshake budget"))
        .collect();
    assert!(!lines.is_empty() && lines[0].contains("127.0.0.2/32"), "{log}");
    assert!(
        lines.len() as f64 <= elapsed + 2.0,
        "{} lines in {elapsed:.1} s",
        lines.len()
    );
    // The canary is untouched after the flood too.
    let after = f.curl(&[], "/hello");
    assert_eq!(after.stdout, "Hello, world!", "{}", after.all());
}

#[test]
fn a_source_over_its_full_budget_still_resumes() {
    let f = common::start(&budget("full_per_second = 0.01\nfull_burst = 2"), "");
    let (c13, c12) = (
        Client::new(&f.pki, SslVersion::TLS1_3),
        Client::new(&f.pki, SslVersion::TLS1_2),
    );
    assert_eq!(c13.connect("127.0.0.2", f.https, None), FULL);
    assert_eq!(c12.connect("127.0.0.2", f.https, None), FULL);
    assert_eq!(c13.connect("127.0.0.2", f.https, None), REFUSED_WITH_ALERT);
    let (s13, s12) = (c13.last_session(), c12.last_session());
    for _ in 0..3 {
        assert_eq!(c13.connect("127.0.0.2", f.https, Some(&s13)), RESUMED, "TLS 1.3 PSK");
        assert_eq!(c12.connect("127.0.0.2", f.https, Some(&s12)), RESUMED, "TLS 1.2 ticket");
    }
    assert_eq!(c12.connect("127.0.0.2", f.https, None), REFUSED_WITH_ALERT);
    assert_eq!(refused(&f, "resumed_handshake_budget", "client_hello"), 0.0);
}

#[test]
fn resume_then_429_answers_a_resumption_over_budget_with_429_and_serves_others() {
    let f = common::start(
        &budget("full_per_second = 0.1\nfull_burst = 1\nover_budget = \"resume_then_429\""),
        "",
    );
    let (c13, c12) = (
        Client::new(&f.pki, SslVersion::TLS1_3),
        Client::new(&f.pki, SslVersion::TLS1_2),
    );
    assert_eq!(c13.connect("127.0.0.2", f.https, None), FULL);
    // Its one token spent: a full handshake is refused before any signature, ...
    assert_eq!(
        c12.connect("127.0.0.2", f.https, None),
        REFUSED_WITH_ALERT,
        "over budget: no signature"
    );
    let too_many = |text: &str| {
        assert!(text.starts_with("HTTP/1.1 429 "), "{text}");
        assert!(text.to_ascii_lowercase().contains("\r\nretry-after: 10\r\n"), "{text}");
        assert!(!text.contains("Hello, world!"), "{text}");
    };
    // ... and resumptions are served, every request answered 429.
    for _ in 0..3 {
        let s13 = c13.last_session();
        assert_eq!(
            c13.fetch("127.0.0.2", f.https, Some(&s13), too_many),
            RESUMED,
            "TLS 1.3 PSK"
        );
    }
    // Another source is not disturbed.
    assert_eq!(c13.connect("127.0.0.1", f.https, None), FULL);
    assert_eq!(refused(&f, "full_handshake_budget", "answered_429"), 3.0);
    assert_eq!(
        f.gw.metric("tlsgate_requests_total", &["status=\"429\""]),
        3.0,
        "{}",
        f.gw.metrics()
    );
}

#[test]
fn the_budget_refills_over_time() {
    let f = common::start(&budget("full_per_second = 2\nfull_burst = 2"), "");
    let client = Client::new(&f.pki, SslVersion::TLS1_3);
    let mut attempts = 0;
    while client.connect("127.0.0.2", f.https, None) == FULL {
        attempts += 1;
        assert!(attempts < 50, "never refused");
    }
    // Two tokens a second: after a second and a bit, the bucket has refilled.
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(client.connect("127.0.0.2", f.https, None), FULL);
}

#[test]
fn a_reload_changes_the_budget() {
    let top = |lines: &str| budget(&format!("full_per_second = 0.01\n{lines}"));
    let f = common::start(&top("full_burst = 1"), "");
    let client = Client::new(&f.pki, SslVersion::TLS1_3);
    assert_eq!(client.connect("127.0.0.2", f.https, None), FULL);
    assert_eq!(client.connect("127.0.0.2", f.https, None), REFUSED_WITH_ALERT);
    let session = client.last_session();
    assert_eq!(client.connect("127.0.0.2", f.https, Some(&session)), RESUMED);
    let reload = |lines: &str| {
        f.write_config(&f.config_again(&top(lines), ""));
        let (code, body) = f.gw.reload();
        assert_eq!(code, 200, "{body}");
    };
    // `close`: the source is in debt, so not even a resumption goes through.
    reload("full_burst = 1\nover_budget = \"close\"");
    assert_eq!(client.connect("127.0.0.2", f.https, Some(&session)), REFUSED_WITH_ALERT);
    // A bigger bucket: the spent token stays spent, the new ones are there.
    reload("full_burst = 4");
    for _ in 0..3 {
        assert_eq!(client.connect("127.0.0.2", f.https, None), FULL);
    }
    assert_eq!(client.connect("127.0.0.2", f.https, None), REFUSED_WITH_ALERT);
    // The section removed: no budget.
    f.write_config(&f.config_again("", ""));
    assert_eq!(f.gw.reload().0, 200);
    for _ in 0..5 {
        assert_eq!(client.connect("127.0.0.2", f.https, None), FULL);
    }
}

/// A TLS 1.3 ClientHello record (SNI localhost) whose `pre_shared_key` extension body is `psk`.
fn tls13_hello(psk: &[u8]) -> Vec<u8> {
    fn ext(out: &mut Vec<u8>, kind: u16, body: &[u8]) {
        out.extend_from_slice(&kind.to_be_bytes());
        out.extend_from_slice(&(body.len() as u16).to_be_bytes());
        out.extend_from_slice(body);
    }
    let mut exts = Vec::new();
    ext(&mut exts, 0x0000, b"\x00\x0c\x00\x00\x09localhost");
    ext(&mut exts, 0x002b, &[0x02, 0x03, 0x04]);
    ext(&mut exts, 0x000a, &[0x00, 0x02, 0x00, 0x1d]);
    let mut share = vec![0x00, 0x24, 0x00, 0x1d, 0x00, 0x20];
    share.extend_from_slice(&[0x5a; 32]);
    ext(&mut exts, 0x0033, &share);
    ext(&mut exts, 0x000d, &[0x00, 0x02, 0x04, 0x03]);
    ext(&mut exts, 0x002d, &[0x01, 0x01]);
    ext(&mut exts, 0x0029, psk);
    let mut body = vec![0x03, 0x03];
    body.extend_from_slice(&[0x42; 32]);
    body.push(0);
    body.extend_from_slice(&[0x00, 0x02, 0x13, 0x01, 0x01, 0x00]);
    body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
    body.extend_from_slice(&exts);
    let mut msg = vec![0x01, 0x00];
    msg.extend_from_slice(&(body.len() as u16).to_be_bytes());
    msg.extend_from_slice(&body);
    let mut record = vec![0x16, 0x03, 0x01];
    record.extend_from_slice(&(msg.len() as u16).to_be_bytes());
    record.extend_from_slice(&msg);
    record
}

/// A well-formed `pre_shared_key` body with one identity and a made-up binder.
fn psk_with(identity: &[u8]) -> Vec<u8> {
    let mut ids = (identity.len() as u16).to_be_bytes().to_vec();
    ids.extend_from_slice(identity);
    ids.extend_from_slice(&[0, 0, 0, 0]);
    let mut psk = (ids.len() as u16).to_be_bytes().to_vec();
    psk.extend_from_slice(&ids);
    psk.extend_from_slice(&[0x00, 0x21, 0x20]);
    psk.extend_from_slice(&[0x11; 32]);
    psk
}

/// Sends `bytes` from `from` and reads until the gateway closes (10 s at most).
fn send_raw(from: &str, port: u16, bytes: &[u8]) {
    let mut tcp = tcp_from(from, port);
    let _ = tcp.write_all(bytes);
    let _ = tcp.shutdown(std::net::Shutdown::Write);
    let mut sink = Vec::new();
    let _ = tcp.read_to_end(&mut sink);
}

#[test]
fn malformed_hellos_disturb_nobody_and_fake_resumptions_are_charged_as_full() {
    let f = common::start(&budget("full_per_second = 0.01\nfull_burst = 3"), "");
    let client = Client::new(&f.pki, SslVersion::TLS1_3);
    let mut truncated = tls13_hello(&psk_with(&[0xee; 64]));
    truncated.truncate(60);
    let garbage: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
    // Broken before certificate selection: never charged (127.0.0.3 keeps its whole budget).
    for _ in 0..5 {
        for bytes in [
            &garbage[..],
            &truncated[..],
            &b"\x16\x03\x01\x00\x05\x01\x00\x00\x01\x03"[..],
        ] {
            send_raw("127.0.0.3", f.https, bytes);
        }
    }
    // Reaches certificate selection: a malformed PSK extension, a PSK nobody issued. Neither
    // can resume, so each is charged as a full handshake (then fails on its PSK).
    send_raw("127.0.0.2", f.https, &tls13_hello(&[0x00, 0x09, 0xff]));
    send_raw("127.0.0.2", f.https, &tls13_hello(&psk_with(&[0xee; 120])));
    send_raw("127.0.0.2", f.https, &tls13_hello(&psk_with(&[0x01; 16])));
    assert_eq!(client.connect("127.0.0.2", f.https, None), REFUSED_WITH_ALERT);
    // Everyone else is served: the canary, and the source whose hellos never parsed.
    let canary = f.curl(&[], "/hello");
    assert_eq!(canary.stdout, "Hello, world!", "{}", canary.all());
    for _ in 0..3 {
        assert_eq!(client.connect("127.0.0.3", f.https, None), FULL);
    }
    assert!(
        wait_until(Duration::from_secs(5), || f
            .gw
            .metric("tlsgate_handshake_failures_total", &["reason=\"malformed\""])
            >= 10.0),
        "{}",
        f.gw.metrics()
    );
    assert!(wait_until(Duration::from_secs(5), || refused(
        &f,
        "full_handshake_budget",
        "client_hello"
    ) >= 1.0));
}

#[test]
fn the_budget_counts_the_client_a_proxy_header_names() {
    let pki = TestPki::new();
    let (https, admin) = (free_port(), free_port());
    let top = budget("full_per_second = 0.01\nfull_burst = 2");
    let text = common::config_text(&pki, https, admin, &top, "").replace(
        &format!("listen = \"127.0.0.1:{https}\"\n"),
        &format!("listen = \"127.0.0.1:{https}\"\nproxy_protocol = true\nproxy_protocol_from = [\"127.0.0.1/32\"]\n"),
    );
    let gw = GatewayProcess::start(common::binary(), &text, admin, &[https]);
    let client = Client::new(&pki, SslVersion::TLS1_3);
    let via_balancer = |named: &str| {
        let mut tcp = tcp_from("127.0.0.1", https);
        tcp.write_all(format!("PROXY TCP4 {named} 127.0.0.1 40000 443\r\n").as_bytes())
            .unwrap();
        let ssl = client.connector.configure().unwrap().into_ssl("localhost").unwrap();
        match ssl.connect(tcp) {
            Ok(_) => FULL,
            Err(HandshakeError::Failure(mid)) => Outcome::Refused {
                alert: mid.error().ssl_error().and_then(tlsgate_tls::failure::received_alert),
            },
            Err(e) => panic!("{e}"),
        }
    };
    // Every connection comes from the balancer's address; the budget is the named client's.
    assert_eq!(via_balancer("198.51.100.7"), FULL);
    assert_eq!(via_balancer("198.51.100.7"), FULL);
    assert_eq!(via_balancer("198.51.100.7"), REFUSED_WITH_ALERT);
    assert_eq!(via_balancer("198.51.100.8"), FULL);
    assert!(
        wait_until(Duration::from_secs(5), || gw.log().contains("198.51.100.7/32")),
        "{}",
        gw.log()
    );
}
