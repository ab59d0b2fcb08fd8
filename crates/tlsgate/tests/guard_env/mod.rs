//! Helpers for the request-guard tests of the admin listener (admin_security.rs) and the console
//! (console.rs): curl with exactly the headers given, and the header-timeout / connection-cap
//! check with raw sockets.
#![allow(dead_code)]

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// The headers of a cross-site attack from a page on `https://evil.example`.
pub const EVIL_ORIGIN: &str = "Origin: https://evil.example";

/// curl `url` with `args` (`-sS`, no proxy, 10 s limit): (HTTP status, body); status 0 when
/// nothing came back.
pub fn curl(args: &[&str], url: &str) -> (u16, String) {
    let mut all = vec!["-sS", "--noproxy", "*", "--max-time", "10", "-w", "\n%{http_code}"];
    all.extend_from_slice(args);
    all.push(url);
    let out = tlsgate_testkit::run("curl", &all, b"", Duration::ZERO, Duration::from_secs(15));
    let (body, code) = out.stdout.rsplit_once('\n').unwrap_or(("", &out.stdout));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

/// curl arguments that make `evil.example` resolve to 127.0.0.1 for `port`, as a DNS-rebinding
/// attacker's name does: requests to `http://evil.example:PORT/` then carry that Host.
pub fn rebind(port: u16) -> String {
    format!("evil.example:{port}:127.0.0.1")
}

/// Whether the peer closed `s` (end of stream or reset) within `within`; whatever it sent
/// first (a 408, say) is ignored.
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => return false,
            Err(_) => return true,
        }
    }
}

/// The slow-client defences of a listener on 127.0.0.1:`port` with a `cap` of connections and
/// a `header_timeout`: `cap` connections that each send half a request head hold every slot;
/// one more is closed at once and `request_ok` (a whole request) fails meanwhile; the server
/// closes the half-sent ones once the header timeout has passed (not earlier); then
/// `request_ok` succeeds again.
pub fn half_sent_requests_are_closed_and_the_cap_holds(
    port: u16,
    cap: usize,
    header_timeout: Duration,
    request_ok: impl Fn() -> bool,
) {
    let opened = Instant::now();
    let mut held: Vec<TcpStream> = (0..cap)
        .map(|i| {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|e| panic!("connection {i}: {e}"));
            s.write_all(format!("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: */*\r\n").as_bytes())
                .unwrap();
            s
        })
        .collect();
    let mut extra = TcpStream::connect(("127.0.0.1", port)).expect("the kernel still accepts");
    assert!(
        closed_within(&mut extra, Duration::from_secs(3)),
        "connection {} (over the cap of {cap}) was kept open",
        cap + 1
    );
    assert!(!request_ok(), "a request was served while {cap} connections were open");
    assert!(
        opened.elapsed() < header_timeout,
        "the test itself took the header timeout"
    );
    for (i, s) in held.iter_mut().enumerate() {
        let left = (header_timeout + Duration::from_secs(5)).saturating_sub(opened.elapsed());
        assert!(
            closed_within(s, left.max(Duration::from_millis(100))),
            "half-sent request {i} still open {:?} after it was opened",
            opened.elapsed()
        );
    }
    let closed_after = opened.elapsed();
    assert!(
        closed_after + Duration::from_secs(1) >= header_timeout,
        "half-sent requests closed after {closed_after:?}, before the header timeout"
    );
    let deadline = Instant::now() + Duration::from_secs(3);
    while !request_ok() {
        assert!(
            Instant::now() < deadline,
            "no request served after the connections closed"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
