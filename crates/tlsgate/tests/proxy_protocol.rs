//! Issue 17 (6): PROXY protocol v1 and v2 on listeners (`proxy_protocol`,
//! `proxy_protocol_from`). A trusted balancer's header names the client: the origin's
//! X-Forwarded-For and the access log show it, and the per-source limit counts it. Connections
//! from other sources, or without a valid header, are closed and counted
//! (`tlsgate_proxy_protocol_total{result}`); a listener without `proxy_protocol` never reads one;
//! `tlsgate check` refuses `proxy_protocol` without `proxy_protocol_from`.

mod common;

use common::{upstream, upstream_route, wait_until, Fixture};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{Ipv6Addr, SocketAddr, TcpStream};
use std::time::Duration;
use tlsgate_testkit::{free_port, require, GatewayProcess, Origin, TestPki};

const METRIC: &str = "tlsgate_proxy_protocol_total";
const V2_SIGNATURE: &[u8] = b"\r\n\r\n\0\r\nQUIT\n";

/// `[[listener]]` TOML for a TLS listener on `port` taking headers from `from`.
fn proxied_listener(port: u16, kind: &str, from: &str) -> String {
    format!(
        "[[listener]]\nlisten = \"127.0.0.1:{port}\"\nkind = \"{kind}\"\nproxy_protocol = true\n\
         proxy_protocol_from = [{from}]\n"
    )
}

/// A gateway with the fixture's plain listener plus a `proxy_protocol` one on `pp` (from
/// 127.0.0.1), `/app` forwarded to `origin` (when given), `top` TOML first and `server` lines
/// added to `[server]`. Every listener is bound before the gateway reports ready.
fn start(pp: u16, origin: Option<&Origin>, top: &str, server: &str) -> Fixture {
    let pki = TestPki::new();
    let (https, admin) = (free_port(), free_port());
    let top = format!("{top}\n{}", proxied_listener(pp, "https", "\"127.0.0.1/32\""));
    let routes = origin.map_or(String::new(), |o| {
        [upstream_route(None, "/app", "app"), upstream("app", &[o.addr()], "")].concat()
    });
    let text =
        common::config_text(&pki, https, admin, &top, &routes).replace("[server]\n", &format!("[server]\n{server}"));
    let gw = GatewayProcess::start(common::binary(), &text, admin, &[https]);
    Fixture { pki, https, admin, gw }
}

/// A v1 header naming `source` (TCP4 or TCP6 by its family) as the client.
fn v1(source: SocketAddr) -> Vec<u8> {
    let (proto, dst) = if source.is_ipv4() {
        ("TCP4", "127.0.0.1")
    } else {
        ("TCP6", "::1")
    };
    format!("PROXY {proto} {} {dst} {} 443\r\n", source.ip(), source.port()).into_bytes()
}

/// A v2 PROXY header naming `source` (IPv6) as the client, with one TLV.
fn v2_inet6(source: Ipv6Addr, port: u16) -> Vec<u8> {
    let mut body = source.octets().to_vec();
    body.extend_from_slice(&Ipv6Addr::LOCALHOST.octets());
    body.extend_from_slice(&port.to_be_bytes());
    body.extend_from_slice(&443u16.to_be_bytes());
    body.extend_from_slice(&[0x05, 0x00, 0x04, b'i', b'd', b'-', b'1']); // PP2_TYPE_UNIQUE_ID
    v2(0x21, 0x21, &body)
}

/// A v2 header: version/command, family/transport, body (its length filled in).
fn v2(ver_cmd: u8, fam: u8, body: &[u8]) -> Vec<u8> {
    let mut h = V2_SIGNATURE.to_vec();
    h.extend_from_slice(&[ver_cmd, fam]);
    h.extend_from_slice(&u16::try_from(body.len()).unwrap().to_be_bytes());
    h.extend_from_slice(body);
    h
}

/// Connects to `port`, writes `header`, then does a TLS handshake (BoringSSL, HTTP/1.1).
fn tls_after(pki: &TestPki, port: u16, header: &[u8]) -> Result<boring::ssl::SslStream<TcpStream>, String> {
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    tcp.write_all(header).unwrap();
    let mut b = boring::ssl::SslConnector::builder(boring::ssl::SslMethod::tls()).unwrap();
    b.set_ca_file(pki.ca_file()).unwrap();
    b.build().connect("localhost", tcp).map_err(|e| e.to_string())
}

/// `GET path` over `tls` with `Connection: close`; the whole response.
fn get(mut tls: boring::ssl::SslStream<TcpStream>, path: &str) -> String {
    tls.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes())
        .unwrap();
    let mut out = Vec::new();
    let _ = tls.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// The JSON access line whose `path` is `path` (waits 10 s at most).
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

fn count(f: &Fixture, result: &str) -> f64 {
    f.gw.metric(METRIC, &[&format!("result=\"{result}\"")])
}

/// Waits (10 s at most) until the counter of `result` reaches `want`.
#[track_caller]
fn wait_count(f: &Fixture, result: &str, want: f64) {
    let reached = wait_until(Duration::from_secs(10), || count(f, result) >= want);
    assert!(
        reached,
        "{METRIC}{{result={result}}} = {}, want {want}:\n{}",
        count(f, result),
        f.gw.metrics()
    );
}

/// True when the gateway closed `tcp` (EOF or reset) within 10 s instead of answering.
fn closed_by_gateway(tcp: &mut TcpStream) -> bool {
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 64];
    match tcp.read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => matches!(
            e.kind(),
            std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted
        ),
    }
}

#[test]
fn v1_and_v2_headers_name_the_client_to_the_origin_and_the_access_log() {
    let origin = Origin::start("app");
    let pp = free_port();
    let f = start(pp, Some(&origin), "[log]\nformat = \"json\"\n", "");
    let before_ok = count(&f, "ok");

    // v1, TCP4.
    let tls = tls_after(&f.pki, pp, &v1("192.0.2.7:56324".parse().unwrap())).unwrap();
    let out = get(tls, "/app/v1");
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(out.contains("\nx-forwarded-for: 192.0.2.7\n"), "{out}");
    assert_eq!(access_line(&f, "/app/v1")["client"], "192.0.2.7:56324");

    // v1, TCP6.
    let tls = tls_after(&f.pki, pp, &v1("[2001:db8::9]:1234".parse().unwrap())).unwrap();
    let out = get(tls, "/app/v1-6");
    assert!(out.contains("\nx-forwarded-for: 2001:db8::9\n"), "{out}");
    assert_eq!(access_line(&f, "/app/v1-6")["client"], "[2001:db8::9]:1234");

    // v2, AF_INET6 with a TLV.
    let header = v2_inet6("2001:db8::7".parse().unwrap(), 4242);
    let tls = tls_after(&f.pki, pp, &header).unwrap();
    let out = get(tls, "/app/v2");
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(out.contains("\nx-forwarded-for: 2001:db8::7\n"), "{out}");
    assert_eq!(access_line(&f, "/app/v2")["client"], "[2001:db8::7]:4242");

    // v2 LOCAL (a balancer's health check) and v1 UNKNOWN: the socket's address stands.
    for (path, header) in [
        ("/app/local", v2(0x20, 0x00, &[])),
        ("/app/unknown", b"PROXY UNKNOWN\r\n".to_vec()),
    ] {
        let out = get(tls_after(&f.pki, pp, &header).unwrap(), path);
        assert!(out.contains("\nx-forwarded-for: 127.0.0.1\n"), "{path}: {out}");
        let client = access_line(&f, path)["client"].as_str().unwrap().to_string();
        assert!(client.starts_with("127.0.0.1:"), "{path}: {client}");
    }

    // curl's own v1 header (an independent client): its header names its real address.
    require("curl");
    let url = format!("https://localhost:{pp}/app/curl");
    let out = common::curl_url(&f.pki.ca_file(), &["--haproxy-protocol"], &url);
    assert_eq!(out.status, Some(0), "{}", out.all());
    assert!(out.stdout.contains("\nx-forwarded-for: 127.0.0.1\n"), "{}", out.all());
    // And over HTTP/2.
    let url = format!("https://localhost:{pp}/app/curl-h2");
    let out = common::curl_url(
        &f.pki.ca_file(),
        &["--haproxy-protocol", "--http2", "-w", "%{http_version}"],
        &url,
    );
    assert!(out.stdout.ends_with("\n2"), "{}", out.all());
    assert_eq!(access_line(&f, "/app/curl-h2")["proto"], "h2");
    assert_eq!(count(&f, "ok") - before_ok, 7.0, "{}", f.gw.metrics());

    // The plain listener is unaffected: no header is expected, and one sent is not believed
    // (it is not TLS, so the connection fails instead of naming a client).
    let out = f.curl(&[], "/app/plain");
    assert!(out.stdout.contains("\nx-forwarded-for: 127.0.0.1\n"), "{}", out.all());
    let out = f.curl(&["--haproxy-protocol"], "/app/spoofed");
    assert_ne!(out.status, Some(0), "{}", out.all());
    assert!(tls_after(&f.pki, f.https, &v1("192.0.2.7:1".parse().unwrap())).is_err());
    assert_eq!(count(&f, "ok") - before_ok, 7.0, "the plain listener read no header");
    assert_eq!(origin.count(), 8);
}

#[test]
fn connections_without_a_valid_header_are_closed_and_counted() {
    let origin = Origin::start("app");
    let pp = free_port();
    let f = start(pp, Some(&origin), "", "handshake_timeout = \"1s\"\n");
    let base = |r| count(&f, r);
    let (malformed, timeout, closed) = (base("malformed"), base("timeout"), base("closed"));

    // TLS straight away, no header: the ClientHello is not a header.
    assert!(tls_after(&f.pki, pp, b"").is_err());
    wait_count(&f, "malformed", malformed + 1.0);

    // Garbage of every kind, each closed before any TLS.
    for garbage in [
        &b"PROXY TCP4 nonsense\r\n"[..],
        b"PROXY TCP4 192.0.2.7 127.0.0.1 70000 443\r\n",
        b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
        &v2(0x21, 0x11, &[0; 4]),    // shorter than its addresses
        &v2(0x21, 0x11, &[0; 4000]), // too long
    ] {
        let mut tcp = TcpStream::connect(("127.0.0.1", pp)).unwrap();
        tcp.write_all(garbage).unwrap();
        assert!(closed_by_gateway(&mut tcp), "{:?}", String::from_utf8_lossy(garbage));
    }
    wait_count(&f, "malformed", malformed + 6.0);
    assert!(f.gw.log().contains("bad PROXY protocol header"), "{}", f.gw.log());

    // A v1 line that never ends within 107 bytes.
    let mut tcp = TcpStream::connect(("127.0.0.1", pp)).unwrap();
    tcp.write_all(&[b"PROXY UNKNOWN ".as_slice(), &[b'x'; 200]].concat())
        .unwrap();
    assert!(closed_by_gateway(&mut tcp));
    wait_count(&f, "malformed", malformed + 7.0);

    // Silent, or half a header and silent: closed at the handshake timeout.
    let mut silent = TcpStream::connect(("127.0.0.1", pp)).unwrap();
    let mut half = TcpStream::connect(("127.0.0.1", pp)).unwrap();
    half.write_all(b"PROXY TCP4 192.0.2.7 ").unwrap();
    assert!(closed_by_gateway(&mut silent));
    assert!(closed_by_gateway(&mut half));
    wait_count(&f, "timeout", timeout + 2.0);

    // A header in two halves 600 ms apart, then no TLS: the header and the handshake share the
    // one handshake_timeout (1 s) from the accept, not 1 s each (which would close at 1.6 s).
    let started = std::time::Instant::now();
    let mut slow = TcpStream::connect(("127.0.0.1", pp)).unwrap();
    let header = v1("192.0.2.9:1000".parse().unwrap());
    slow.write_all(&header[..10]).unwrap();
    std::thread::sleep(Duration::from_millis(600));
    slow.write_all(&header[10..]).unwrap();
    assert!(closed_by_gateway(&mut slow));
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(950) && took < Duration::from_millis(1450),
        "closed after {took:?}"
    );

    // Half a header, then the client leaves.
    let mut gone = TcpStream::connect(("127.0.0.1", pp)).unwrap();
    gone.write_all(&V2_SIGNATURE[..8]).unwrap();
    drop(gone);
    wait_count(&f, "closed", closed + 1.0);

    // Everyone else is still served.
    let out = get(
        tls_after(&f.pki, pp, &v1("192.0.2.8:1000".parse().unwrap())).unwrap(),
        "/app/after",
    );
    assert!(out.contains("\nx-forwarded-for: 192.0.2.8\n"), "{out}");
    assert_eq!(origin.count(), 1);
}

#[test]
fn sources_outside_proxy_protocol_from_are_closed_and_redirect_listeners_read_headers_too() {
    let pki = TestPki::new();
    let (https, admin, untrusted, redirect) = (free_port(), free_port(), free_port(), free_port());
    let top = [
        proxied_listener(untrusted, "https", "\"10.0.0.0/8\", \"::1/128\""),
        proxied_listener(redirect, "redirect", "\"127.0.0.0/8\""),
        "https_port = 8443\n".into(),
    ]
    .concat();
    let gw = GatewayProcess::start(
        common::binary(),
        &common::config_text(&pki, https, admin, &top, ""),
        admin,
        &[https],
    );
    let f = Fixture { pki, https, admin, gw };
    assert_eq!(count(&f, "untrusted_source"), 0.0);

    // 127.0.0.1 is not in 10.0.0.0/8: a valid header and TLS get nowhere.
    let err = tls_after(&f.pki, untrusted, &v1("192.0.2.7:1".parse().unwrap())).unwrap_err();
    assert!(!err.is_empty());
    let mut tcp = TcpStream::connect(("127.0.0.1", untrusted)).unwrap();
    assert!(closed_by_gateway(&mut tcp), "closed at once, before any byte");
    wait_count(&f, "untrusted_source", 2.0);
    assert!(
        f.gw.log().contains("which is not in proxy_protocol_from"),
        "{}",
        f.gw.log()
    );

    // A redirect listener takes the header, then answers the request behind it.
    let mut tcp = TcpStream::connect(("127.0.0.1", redirect)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut request = v1("192.0.2.7:5555".parse().unwrap());
    request.extend_from_slice(b"GET /x?y HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n");
    tcp.write_all(&request).unwrap();
    let mut out = String::new();
    let _ = tcp.read_to_string(&mut out);
    assert!(out.starts_with("HTTP/1.1 301"), "{out}");
    assert!(out.contains("location: https://example.com:8443/x?y\r\n"), "{out}");
    // ... and without a header it is closed like an https one.
    let mut tcp = TcpStream::connect(("127.0.0.1", redirect)).unwrap();
    tcp.write_all(b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n").unwrap();
    assert!(closed_by_gateway(&mut tcp));
}

#[test]
fn the_per_source_limit_counts_the_client_the_header_names() {
    let pp = free_port();
    let f = start(pp, None, "", "max_connections_per_source = 2\n");
    let shed = f.gw.metric("tlsgate_connections_shed_per_source_total", &[]);

    // Four connections from one balancer address (127.0.0.1), two clients behind it.
    let a1 = tls_after(&f.pki, pp, &v1("192.0.2.1:1".parse().unwrap())).unwrap();
    let a2 = tls_after(&f.pki, pp, &v1("192.0.2.1:2".parse().unwrap())).unwrap();
    let b1 = tls_after(&f.pki, pp, &v1("192.0.2.2:1".parse().unwrap())).unwrap();
    let b2 = tls_after(&f.pki, pp, &v1("192.0.2.2:2".parse().unwrap())).unwrap();
    // A third from the first client is over its limit; the balancer's address is not.
    assert!(tls_after(&f.pki, pp, &v1("192.0.2.1:3".parse().unwrap())).is_err());
    let after = f.gw.metric("tlsgate_connections_shed_per_source_total", &[]);
    assert_eq!(after - shed, 1.0, "{}", f.gw.metrics());
    // The four open connections were counted for their clients, not for 127.0.0.1: a direct
    // connection from 127.0.0.1 to the plain listener still has room.
    let out = f.curl(&[], "/hello");
    assert_eq!(out.stdout, "Hello, world!", "{}", out.all());
    drop((a1, a2, b1, b2));
}

#[test]
fn check_refuses_proxy_protocol_without_sources() {
    let pki = TestPki::new();
    let listener = "[[listener]]\nlisten = \"127.0.0.1:9443\"\nproxy_protocol = true\n";
    let text = common::config_text(&pki, 8443, 9090, listener, "");
    let config = pki.write("tlsgate.toml", &text);
    let out = common::tlsgate(&[
        "check",
        "--config",
        config.to_str().unwrap(),
        "--ca",
        pki.ca_file().to_str().unwrap(),
    ]);
    assert_ne!(out.status, Some(0), "{}", out.all());
    let line = out
        .stdout
        .lines()
        .chain(out.stderr.lines())
        .find(|l| l.contains("listener[0].proxy_protocol_from"))
        .unwrap_or_else(|| panic!("no finding for proxy_protocol_from:\n{}", out.all()));
    assert!(line.contains("error") && line.contains("required"), "{line}");

    let fixed = text.replace(
        "proxy_protocol = true\n",
        "proxy_protocol = true\nproxy_protocol_from = [\"10.0.0.0/8\"]\n",
    );
    let config = pki.write("tlsgate.toml", &fixed);
    let out = common::tlsgate(&[
        "check",
        "--config",
        config.to_str().unwrap(),
        "--ca",
        pki.ca_file().to_str().unwrap(),
    ]);
    assert_eq!(out.status, Some(0), "{}", out.all());
}
