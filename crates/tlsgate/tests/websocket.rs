//! WebSocket through the gateway, against a real origin (Python `websockets`, plain HTTP/1.1):
//!
//! - HTTP/1.1 clients (`Connection: upgrade`, `Upgrade: websocket`) get the origin's `101`, and
//!   the tunnel carries text and binary messages (one of 1 MiB) exactly, both ways, including
//!   messages the server sends first; a close from either side ends it promptly.
//! - The group's `tunnel_idle_timeout` closes a silent tunnel, and leaves a busy one open.
//! - HTTP/2 clients: RFC 8441 extended CONNECT (`:protocol websocket`, advertised with
//!   SETTINGS_ENABLE_CONNECT_PROTOCOL) becomes `200` on the stream and a WebSocket to the origin
//!   (which sees `Upgrade: websocket` and a `Sec-WebSocket-Key`), frames by hand.
//! - Plain requests on the same route are plain: `Upgrade` without `Connection: upgrade` is not
//!   forwarded.
//! - An origin refusing the handshake (403, 400) gives the client that status, not `101`.
//! - A `protocol = "http2"` group answers upgrades with 502 without connecting to its server.

mod common;
mod websocket_env;

use serde_json::Value;
use std::time::Duration;
use websocket_env::*;

/// A gateway forwarding `/ws` and `/plain` to the origin, with `extra` lines in its group.
fn gateway(origin: &WsOrigin, extra: &str) -> common::Fixture {
    let routes = format!(
        "{}{}{}",
        common::upstream_route(None, "/ws", "ws"),
        common::upstream_route(None, "/plain", "ws"),
        common::upstream("ws", &[origin.addr()], extra)
    );
    common::start("", &routes)
}

fn op(e: &Value) -> &str {
    e["op"].as_str().unwrap_or_default()
}

/// Asserts that the client's connection was upgraded (its first event is `open`).
fn assert_open(events: &[Value], f: &common::Fixture) {
    assert!(
        events.first().is_some_and(|e| op(e) == "open"),
        "no WebSocket through the gateway:\n{}\n--- gateway log (tail):\n{}",
        brief(events),
        tail(&f.gw.log(), 40)
    );
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn assert_text(e: &Value, want: &str, all: &[Value]) {
    assert!(
        e["kind"] == "text" && e["text"] == want,
        "wanted text {want:?}, got {e}\n{}",
        brief(all)
    );
}

fn assert_binary(e: &Value, want: &[u8], all: &[Value]) {
    let got = (e["kind"] == "binary").then(|| unhex(e["hex"].as_str().unwrap_or_default()));
    assert!(
        got.as_deref() == Some(want),
        "wanted {} binary bytes back, got {}\n{}",
        want.len(),
        brief(std::slice::from_ref(e)),
        brief(all)
    );
}

fn wait_no_connections(f: &common::Fixture) {
    let open = || f.gw.metric("tlsgate_open_connections", &[]);
    assert!(
        common::wait_until(Duration::from_secs(5), || open() == 0.0),
        "connections still open: {}",
        open()
    );
}

fn quick_echo(f: &common::Fixture) {
    let e = ws_client(
        f.https,
        &f.pki.ca_file(),
        "/ws/echo",
        &[send_text("again"), recv(), close()],
    );
    assert_open(&e, f);
    assert_text(&e[2], "again", &e);
}

#[test]
fn http1_websocket_carries_messages_exactly_and_closes_from_either_side() {
    let origin = WsOrigin::start();
    let f = gateway(&origin, "");
    let ca = f.pki.ca_file();
    // The 101 as it comes back, byte for byte (RFC 6455 §4.2.2: Upgrade, Connection and the
    // accept value of the key; this one is the RFC's own example).
    let mut raw = f.tls_session();
    raw.send(
        "GET /ws/echo HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    );
    let head = raw.read_until("\r\n\r\n", Duration::from_secs(10));
    let lower = head.to_ascii_lowercase();
    for want in [
        "http/1.1 101 ",
        "\r\nupgrade: websocket\r\n",
        "\r\nconnection: upgrade\r\n",
        "\r\nsec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo=\r\n",
    ] {
        assert!(lower.contains(want), "no {want:?} in the 101:\n{head}");
    }
    drop(raw);
    let small = noise(300, 7);
    let big = noise(1 << 20, 11);
    let plan = [
        recv(),
        recv(),
        recv(),
        send_text("héllo, wörld ✓"),
        recv(),
        send_bytes(&small),
        recv(),
        send_bytes(&big),
        recv(),
        send_text(""),
        recv(),
        close(),
    ];
    let e = ws_client(f.https, &ca, "/ws/greet", &plan);
    assert_open(&e, &f);
    assert_eq!(header(&e[0]["headers"], "upgrade"), Some("websocket"), "{}", brief(&e));
    assert_eq!(e.len(), 1 + plan.len(), "{}", brief(&e));
    for i in 0..3 {
        assert_text(&e[1 + i], &format!("greeting {i}"), &e);
    }
    assert_text(&e[5], "héllo, wörld ✓", &e);
    assert_binary(&e[7], &small, &e);
    assert_binary(&e[9], &big, &e);
    assert_text(&e[11], "", &e);
    // The client's close: the origin's close frame comes back, then the connection ends (the
    // client would wait 5 s for the TCP close if the gateway did not pass the origin's on).
    let closed = &e[12];
    assert_eq!(closed["code"], 1000, "{}", brief(&e));
    assert!(closed["seconds"].as_f64().unwrap() < 2.0, "slow close: {closed}");
    assert!(
        origin.wait_line("closed /ws/greet 1000", Duration::from_secs(3)),
        "{}",
        origin.log()
    );

    // The server's close (code 4001) reaches the client, and the connection ends promptly.
    let plan = [send_text("close-me"), recv(), wait_closed(5.0)];
    let e = ws_client(f.https, &ca, "/ws/echo", &plan);
    assert_open(&e, &f);
    assert_eq!(e[2]["kind"], "closed", "{}", brief(&e));
    assert_eq!(e[2]["code"], 4001, "{}", brief(&e));
    assert_eq!(e[2]["reason"], "server says bye", "{}", brief(&e));
    assert_eq!(e[3]["closed"], true, "{}", brief(&e));
    assert!(e[3]["seconds"].as_f64().unwrap() < 2.0, "slow close: {}", e[3]);
    assert!(
        origin.wait_line("closed /ws/echo 4001", Duration::from_secs(3)),
        "{}",
        origin.log()
    );

    // Both tunnels are gone, and the gateway goes on serving.
    wait_no_connections(&f);
    let hello = f.curl(&[], "/hello");
    assert_eq!(hello.stdout, "Hello, world!", "{}", hello.all());
    quick_echo(&f);
}

#[test]
fn tunnel_idle_timeout_closes_a_silent_tunnel_and_spares_a_busy_one() {
    let origin = WsOrigin::start();
    let f = gateway(&origin, "tunnel_idle_timeout = \"500ms\"");
    let ca = f.pki.ca_file();

    // Nothing moves after the first echo (no pings either): the gateway closes within 0.5-1 s.
    let e = ws_client(f.https, &ca, "/ws/echo", &[send_text("x"), recv(), wait_closed(5.0)]);
    assert_open(&e, &f);
    assert_text(&e[2], "x", &e);
    let idle = &e[3];
    assert_eq!(
        idle["closed"],
        true,
        "a silent tunnel outlived its idle timeout: {}",
        brief(&e)
    );
    let after = idle["seconds"].as_f64().unwrap();
    assert!(
        (0.3..2.5).contains(&after),
        "closed {after} s after the last message: {}",
        brief(&e)
    );
    assert!(
        origin.wait_line("closed /ws/echo", Duration::from_secs(3)),
        "origin side not closed:\n{}",
        origin.log()
    );

    // A message every 200 ms keeps it open well past the idle timeout.
    let plan = [chatter(0.2, 2.5), send_text("still here"), recv(), close()];
    let e = ws_client(f.https, &ca, "/ws/echo", &plan);
    assert_open(&e, &f);
    let c = &e[1];
    assert!(c["sent"].as_u64().unwrap() >= 10, "{c}");
    assert_eq!(c["sent"], c["echoed"], "{c}");
    assert_eq!(c["open"], true, "{c}");
    assert!(c["seconds"].as_f64().unwrap() >= 2.0, "{c}");
    assert_text(&e[3], "still here", &e);
    assert_eq!(e[4]["code"], 1000, "{}", brief(&e));
    wait_no_connections(&f);
}

#[test]
fn rfc8441_extended_connect_over_http2_becomes_a_websocket_to_the_origin() {
    let origin = WsOrigin::start();
    let f = gateway(&origin, "");
    let (port, ca) = (f.https, f.pki.ca_file());
    runtime().block_on(async {
        let mut client = h2_connect(port, &ca).await;
        // The gateway's SETTINGS (read by the connection task) enable extended CONNECT.
        let enabled = async {
            while !client.is_extended_connect_protocol_enabled() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        assert!(
            tokio::time::timeout(Duration::from_secs(5), enabled).await.is_ok(),
            "SETTINGS_ENABLE_CONNECT_PROTOCOL not received"
        );

        let mut ws = h2_websocket(&mut client, port, "/ws/headers").await;
        assert_eq!(ws.status, 200, "{:?}\n{}", ws.headers, tail(&f.gw.log(), 40));
        assert!(!ws.headers.contains_key("sec-websocket-accept"), "{:?}", ws.headers);

        // What the origin saw: an HTTP/1.1 upgrade with a fresh key.
        let first = ws.next_frame().await.expect("the origin's headers message");
        assert_eq!((first.fin, first.opcode, first.masked), (true, 1, false), "{first:?}");
        let seen: Value = serde_json::from_slice(&first.payload).unwrap();
        assert_eq!(header(&seen, "upgrade"), Some("websocket"), "{seen}");
        let connection = header(&seen, "connection").unwrap_or_default().to_ascii_lowercase();
        assert!(connection.contains("upgrade"), "{seen}");
        assert_eq!(header(&seen, "sec-websocket-version"), Some("13"), "{seen}");
        let key = header(&seen, "sec-websocket-key").expect("Sec-WebSocket-Key");
        assert_eq!(
            boring::base64::decode_block(key).map(|k| k.len()).ok(),
            Some(16),
            "{key}"
        );

        // A masked text frame and a 200 KB binary one are echoed as unmasked server frames.
        ws.send_frame(1, b"hello over h2");
        let echo = ws.next_frame().await.expect("echo");
        let want = Frame {
            fin: true,
            opcode: 1,
            masked: false,
            payload: b"hello over h2".to_vec(),
        };
        assert_eq!(echo, want);
        let big = noise(200_000, 3);
        ws.send_frame(2, &big);
        let echo = ws.next_frame().await.expect("binary echo");
        assert_eq!((echo.opcode, echo.masked, echo.payload.len()), (2, false, big.len()));
        assert!(echo.payload == big, "binary echo differs");

        // A second WebSocket on the same connection, with the server speaking first.
        let mut greet = h2_websocket(&mut client, port, "/ws/greet").await;
        assert_eq!(greet.status, 200);
        for i in 0..3 {
            let g = greet.next_frame().await.expect("greeting");
            assert_eq!(g.payload, format!("greeting {i}").as_bytes());
        }

        // Close handshake: the origin's close frame comes back and the stream ends.
        ws.send_frame(8, &1000u16.to_be_bytes());
        let bye = ws.next_frame().await.expect("close frame");
        assert_eq!(
            (bye.opcode, &bye.payload[..2]),
            (8, &1000u16.to_be_bytes()[..]),
            "{bye:?}"
        );
        let ending = ws.ending(Duration::from_secs(3)).await;
        assert_eq!(ending, "end", "the stream after the close handshake");
        let _ = ws.send.send_data(bytes::Bytes::new(), true);
        greet.send_frame(1, b"still fine");
        assert_eq!(greet.next_frame().await.expect("echo").payload, b"still fine");
    });
    assert!(
        origin.wait_line("closed /ws/headers 1000", Duration::from_secs(3)),
        "{}",
        origin.log()
    );
}

#[test]
fn plain_requests_on_the_websocket_route_stay_plain() {
    let origin = WsOrigin::start();
    let f = gateway(&origin, "");
    let seen = |args: &[&str]| -> Value {
        let out = f.curl(args, "/plain/x?y=1");
        serde_json::from_str(&out.stdout).unwrap_or_else(|_| panic!("origin JSON: {}", out.all()))
    };
    for args in [&[][..], &["--http1.1"][..]] {
        let v = seen(args);
        assert_eq!(v["path"], "/plain/x?y=1", "{v}");
        assert_eq!(header(&v["headers"], "upgrade"), None, "{v}");
    }
    // `Upgrade` without `Connection: upgrade` is a hop-by-hop header like any other: dropped.
    let v = seen(&[
        "--http1.1",
        "-H",
        "Upgrade: websocket",
        "-H",
        "Sec-WebSocket-Version: 13",
    ]);
    assert_eq!(header(&v["headers"], "upgrade"), None, "{v}");
    assert_eq!(header(&v["headers"], "connection"), None, "{v}");
    assert_eq!(header(&v["headers"], "sec-websocket-version"), Some("13"), "{v}");
    // A plain GET of the WebSocket path reaches the origin as one: it asks for an upgrade (426).
    let out = f.curl(&["--http1.1", "-o", "/dev/null", "-w", "%{http_code}"], "/ws/echo");
    assert_eq!(out.stdout, "426", "{}", out.all());
    // And upgrades still work beside them.
    quick_echo(&f);
}

#[test]
fn an_origin_refusing_the_handshake_gives_its_status_not_101() {
    let origin = WsOrigin::start();
    let f = gateway(&origin, "");
    let ca = f.pki.ca_file();
    for (path, status) in [("/ws/refuse", 403), ("/ws/bad", 400)] {
        let e = ws_client(f.https, &ca, path, &[]);
        assert_eq!(e.len(), 1, "{}", brief(&e));
        assert_eq!(op(&e[0]), "refused", "{}", brief(&e));
        assert_eq!(e[0]["status"], status, "{}", brief(&e));
    }
    // The refusal's headers and body come through as they are.
    let args = [
        "--http1.1",
        "-i",
        "-H",
        "Connection: Upgrade",
        "-H",
        "Upgrade: websocket",
        "-H",
        "Sec-WebSocket-Version: 13",
        "-H",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
    ];
    let out = f.curl(&args, "/ws/refuse");
    assert!(out.stdout.starts_with("HTTP/1.1 403"), "{}", out.all());
    assert!(
        out.stdout.to_ascii_lowercase().contains("x-origin: refused"),
        "{}",
        out.all()
    );
    assert!(out.stdout.ends_with("origin refuses this upgrade\n"), "{}", out.all());
    // Over HTTP/2 too.
    let (port, ca2) = (f.https, ca.clone());
    let status = runtime().block_on(async move {
        let mut client = h2_connect(port, &ca2).await;
        let ws = h2_websocket(&mut client, port, "/ws/refuse").await;
        ws.status
    });
    assert_eq!(status, 403);
    // The gateway keeps working.
    let hello = f.curl(&[], "/hello");
    assert_eq!(hello.stdout, "Hello, world!", "{}", hello.all());
    quick_echo(&f);
}

#[test]
fn an_http2_only_group_answers_upgrades_with_502_without_connecting() {
    // The group's only server: a listener that must never see a connection.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let server = listener.local_addr().unwrap().to_string();
    let routes = format!(
        "{}{}",
        common::upstream_route(None, "/ws", "h2only"),
        common::upstream("h2only", &[server], "protocol = \"http2\"")
    );
    let f = common::start("", &routes);
    let e = ws_client(f.https, &f.pki.ca_file(), "/ws/echo", &[]);
    assert_eq!(op(&e[0]), "refused", "{}", brief(&e));
    assert_eq!(e[0]["status"], 502, "{}", brief(&e));
    let (port, ca) = (f.https, f.pki.ca_file());
    let status = runtime().block_on(async move {
        let mut client = h2_connect(port, &ca).await;
        h2_websocket(&mut client, port, "/ws/echo").await.status
    });
    assert_eq!(status, 502);
    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the gateway connected to the HTTP/2 server: {other:?}"),
    }
    // Counted as an upstream protocol error (ProxyError::UpstreamProtocol), and logged.
    let errors = f.gw.metric(
        "tlsgate_upstream_errors_total",
        &["upstream=\"h2only\"", "kind=\"protocol\""],
    );
    assert_eq!(errors, 2.0, "{}", f.gw.metrics());
    assert!(
        f.gw.log().contains("upgrades need HTTP/1.1"),
        "{}",
        tail(&f.gw.log(), 30)
    );
}
