//! PROXY protocol headers sent to origins (`[[upstream]] send_proxy_protocol`), end to end: the
//! header a new origin connection starts with names the curl client's address and the gateway
//! listener's (read back with tlsgate-wire's own parser by a recording origin, and by nginx's
//! `listen ... proxy_protocol` over plaintext, TLS and HTTP/2); a connection that announced one
//! client never carries another client's requests (curl bound to 127.0.0.1 and to 127.0.0.2);
//! health-check probes announce no client (v2 `LOCAL`).

mod common;
mod recording_origin;

use common::{upstream, upstream_route, wait_until, Fixture};
use recording_origin::{named, RecordingOrigin};
use std::net::SocketAddr;
use std::time::Duration;
use tlsgate_testkit::nginx::Nginx;
use tlsgate_testkit::{free_port, require, toml_path, TestPki};
use tlsgate_tls::pki::KeyKind;
use tlsgate_wire::proxy_protocol::{Addresses, Version};

/// A GET through the gateway: (status, body, the client address curl used).
fn get(f: &Fixture, args: &[&str], path: &str) -> (String, String, SocketAddr) {
    let mut all = vec!["-w", "\n%{http_code} %{local_ip} %{local_port}"];
    all.extend_from_slice(args);
    let out = f.curl_host("localhost", &all, path);
    let (body, tail) = out
        .stdout
        .rsplit_once('\n')
        .unwrap_or_else(|| panic!("no status from curl: {}", out.all()));
    let mut words = tail.split(' ');
    let (status, ip, port) = (words.next(), words.next(), words.next());
    let client = format!("{}:{}", ip.unwrap_or_default(), port.unwrap_or_default());
    let client = client
        .parse()
        .unwrap_or_else(|_| panic!("no client address from curl: {}", out.all()));
    (status.unwrap_or_default().to_string(), body.to_string(), client)
}

fn gateway_addr(f: &Fixture) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], f.https))
}

#[test]
fn each_version_names_the_curl_client_and_the_listener_it_reached() {
    require("curl");
    let v2 = RecordingOrigin::start(Duration::ZERO, true);
    let v1 = RecordingOrigin::start(Duration::ZERO, true);
    let routes = [
        upstream_route(None, "/v2/", "v2"),
        upstream_route(None, "/v1/", "v1"),
        upstream("v2", &[v2.addr()], "send_proxy_protocol = \"v2\""),
        upstream("v1", &[v1.addr()], "send_proxy_protocol = \"v1\""),
    ]
    .concat();
    let f = common::start("", &routes);
    for (origin, version, path) in [(&v2, Version::V2, "/v2/x"), (&v1, Version::V1, "/v1/x")] {
        let (status, body, client) = get(&f, &[], path);
        assert_eq!(status, "200", "{body}");
        assert_eq!(named(&body), Some(client), "the origin read the curl client's address");
        let conns = origin.conns();
        assert_eq!(conns.len(), 1, "{conns:?}");
        let header = conns[0].header.unwrap_or_else(|| panic!("no PROXY header: {conns:?}"));
        assert_eq!(header.version, version);
        assert_eq!(
            header.addresses,
            Some(Addresses {
                source: client,
                destination: gateway_addr(&f),
            })
        );
        assert_eq!(conns[0].requests, [format!("GET {path} HTTP/1.1")]);
    }
}

#[test]
fn a_connection_that_named_one_client_never_carries_another_clients_requests() {
    require("curl");
    let origin = RecordingOrigin::start(Duration::ZERO, true);
    let routes = [
        upstream_route(None, "/pp/", "pp"),
        upstream("pp", &[origin.addr()], "send_proxy_protocol = \"v2\""),
    ]
    .concat();
    let f = common::start("", &routes);
    // Client A: two requests on one connection of its own (the origin connection is reused for
    // them); then client B from another address, while A's origin connection idles.
    let a = f.curl_host("localhost", &["-w", "|"], "/pp/a1");
    let both = f.curl_host("localhost", &["-w", "|", &f.url("/pp/a3")], "/pp/a2");
    let (status, body, b) = get(&f, &["--interface", "127.0.0.2"], "/pp/b1");
    assert_eq!(status, "200", "{body}");
    assert_eq!(b.ip().to_string(), "127.0.0.2", "curl bound to 127.0.0.2");
    assert_eq!(named(&body), Some(b), "B's response names B: {body}");
    let answers: Vec<&str> = [a.stdout.as_str(), both.stdout.as_str()]
        .into_iter()
        .flat_map(|o| o.split('|'))
        .filter(|s| !s.is_empty())
        .collect();
    assert_eq!(answers.len(), 3, "{answers:?}");
    assert!(answers.iter().all(|s| s.starts_with("127.0.0.1:")), "{answers:?}");
    assert_eq!(answers[1], answers[2], "a2 and a3 came on one client connection");

    let conns = origin.conns();
    for conn in &conns {
        let source = conn.header.and_then(|h| h.addresses).map(|a| a.source);
        let source = source.unwrap_or_else(|| panic!("a connection without a client: {conns:?}"));
        for request in &conn.requests {
            let want = if request.contains("/pp/b") {
                "127.0.0.2"
            } else {
                "127.0.0.1"
            };
            assert_eq!(
                source.ip().to_string(),
                want,
                "{request} on a connection for {source}: {conns:?}"
            );
        }
    }
    assert_eq!(conns.len(), 3, "one origin connection per client connection: {conns:?}");
    assert!(
        conns.iter().any(|c| c.requests.len() == 2),
        "the same client connection's requests share its origin connection: {conns:?}"
    );
}

#[test]
fn health_check_probes_announce_no_client() {
    let origin = RecordingOrigin::start(Duration::ZERO, true);
    let routes = [
        upstream_route(None, "/pp/", "pp"),
        upstream(
            "pp",
            &[origin.addr()],
            "send_proxy_protocol = \"v2\"\n[upstream.health_check]\nenabled = true\ninterval = \"200ms\"\ntimeout = \"150ms\"",
        ),
    ]
    .concat();
    let _f = common::start("", &routes);
    let probed = wait_until(Duration::from_secs(10), || {
        origin.conns().iter().any(|c| !c.requests.is_empty())
    });
    assert!(probed, "no probe arrived: {:?}", origin.conns());
    for conn in origin.conns().iter().filter(|c| !c.requests.is_empty()) {
        let header = conn
            .header
            .unwrap_or_else(|| panic!("a probe without a header: {conn:?}"));
        assert_eq!(
            (header.version, header.addresses),
            (Version::V2, None),
            "LOCAL: {conn:?}"
        );
        assert_eq!(conn.requests, ["GET /healthz HTTP/1.1"]);
    }
}

/// nginx `return` text naming what its PROXY header said.
const SAW: &str = "$proxy_protocol_addr:$proxy_protocol_port $proxy_protocol_server_addr:$proxy_protocol_server_port";

#[test]
fn nginx_reads_the_header_over_plaintext_tls_and_http2() {
    require("curl");
    let pki = TestPki::new();
    let (cert, key) = pki.leaf("origin", &["localhost", "127.0.0.1"], KeyKind::EcdsaP256);
    let (plain, tls, h2) = (free_port(), free_port(), free_port());
    let certs = format!(
        "ssl_certificate {};\n        ssl_certificate_key {};",
        cert.display(),
        key.display()
    );
    let server = |port: u16, flags: &str, tls: &str, tag: &str| {
        format!(
            "    server {{\n        listen 127.0.0.1:{port} {flags} proxy_protocol;\n        {tls}\n        \
             location / {{ return 200 \"{tag} {SAW}\"; }}\n    }}\n"
        )
    };
    let http = [
        server(plain, "", "", "plain"),
        server(tls, "ssl", &certs, "tls"),
        server(h2, "ssl http2", &certs, "h2"),
    ]
    .concat();
    let _nginx = Nginx::start(&http, &[plain, tls, h2]);
    let ca = format!("[upstream.tls]\nca = {}", toml_path(&pki.ca_file()));
    let routes = [
        upstream_route(None, "/plain/", "plain"),
        upstream_route(None, "/tls/", "tls"),
        upstream_route(None, "/h2/", "h2"),
        upstream_route(None, "/none/", "none"),
        upstream("plain", &[format!("127.0.0.1:{plain}")], "send_proxy_protocol = \"v2\""),
        upstream(
            "tls",
            &[format!("https://127.0.0.1:{tls}")],
            &format!("send_proxy_protocol = \"v1\"\n{ca}"),
        ),
        upstream(
            "h2",
            &[format!("https://127.0.0.1:{h2}")],
            &format!("send_proxy_protocol = \"v2\"\nprotocol = \"http2\"\n{ca}"),
        ),
        upstream("none", &[format!("127.0.0.1:{plain}")], ""),
    ]
    .concat();
    let f = common::start("", &routes);
    let listener = gateway_addr(&f);
    for (tag, path) in [("plain", "/plain/x"), ("tls", "/tls/x"), ("h2", "/h2/x")] {
        for interface in ["127.0.0.1", "127.0.0.2"] {
            let (status, body, client) = get(&f, &["--interface", interface], path);
            assert_eq!(status, "200", "{tag}: {body}");
            assert_eq!(body, format!("{tag} {client} {listener}"), "{tag} from {interface}");
        }
    }
    // Without the header nginx refuses the connection: the header above was what it read.
    let (status, body, _) = get(&f, &[], "/none/x");
    assert_eq!(status, "502", "{body}");
}
