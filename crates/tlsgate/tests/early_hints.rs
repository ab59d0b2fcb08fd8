//! 103 Early Hints (RFC 8297) from an HTTP/1.1 origin reach HTTP/1.1 clients before the final
//! response, hop-by-hop fields removed, on every request of a keep-alive connection and never in
//! the middle of another response (pipelined requests); HTTP/2 clients get them on each
//! request's own stream (curl, and nghttp with concurrent streams); HTTP/1.0 clients, and groups
//! with `forward_early_hints = false`, get the final response only, and each case is counted.
//! An HTTP/2 origin's 103s (on the request's stream) reach HTTP/1.1 and HTTP/2 clients the same way.

mod common;

use std::time::Duration;

fn start(extra: &str) -> common::Fixture {
    let origin = tlsgate_testkit::hints::hinting_origin();
    let routes = format!(
        "{}{}",
        common::upstream_route(None, "/", "hints"),
        common::upstream("hints", &[origin], extra)
    );
    common::start("", &routes)
}

fn counted(f: &common::Fixture, result: &str) -> f64 {
    f.gw.metric("tlsgate_early_hints_total", &[&format!("result=\"{result}\"")])
}

/// The start of each status line in `text`, in order.
fn heads(text: &str) -> Vec<&str> {
    text.match_indices("HTTP/1.").map(|(i, _)| &text[i..i + 12]).collect()
}

#[test]
fn http11_clients_get_the_hints_before_the_response_on_every_request() {
    let f = start("");
    let mut tls = f.tls_session();
    for i in 0..3 {
        let text = tls.get(&format!("/page{i}"), &format!("hello /page{i}"));
        assert_eq!(heads(&text), ["HTTP/1.1 103", "HTTP/1.1 200"], "request {i}: {text}");
        let (hints, rest) = text.split_once("\r\n\r\n").unwrap();
        assert!(hints.starts_with("HTTP/1.1 103 Early Hints\r\n"), "request {i}: {text}");
        assert!(
            hints.contains("link: </style.css>; rel=preload; as=style"),
            "request {i}: {text}"
        );
        assert!(
            !hints.to_ascii_lowercase().contains("secret"),
            "hop-by-hop fields travelled: {text}"
        );
        assert!(rest.starts_with("HTTP/1.1 200 OK\r\n"), "request {i}: {text}");
    }
    assert_eq!(counted(&f, "forwarded"), 3.0, "{}", f.gw.metrics());
    // curl shows it too (an independent HTTP/1.1 client).
    let out = f.curl(&["--http1.1", "-sS", "-D", "-", "-o", "/dev/null"], "/curl");
    assert!(out.stdout.starts_with("HTTP/1.1 103 Early Hints"), "{}", out.all());
    assert!(out.stdout.contains("HTTP/1.1 200 OK"), "{}", out.all());
}

#[test]
fn pipelined_requests_never_get_hints_inside_another_response() {
    let f = start("");
    let mut tls = f.tls_session();
    tls.send(
        "GET /one HTTP/1.1\r\nHost: localhost\r\n\r\nGET /two HTTP/1.1\r\nHost: localhost\r\n\r\nGET /three HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    let text = tls.read_until("hello /three", Duration::from_secs(10));
    // Each final response is whole, in order, and any 103 comes right before one of them.
    let mut rest = text.as_str();
    for path in ["/one", "/two", "/three"] {
        while let Some(after) = rest.strip_prefix("HTTP/1.1 103 Early Hints\r\n") {
            let end = after.find("\r\n\r\n").expect("whole 103 head");
            rest = &after[end + 4..];
        }
        let body = format!("hello {path}");
        assert!(rest.starts_with("HTTP/1.1 200 OK\r\n"), "{path}: {text}");
        let end = rest.find("\r\n\r\n").expect("whole head") + 4;
        assert!(!rest[..end].contains("HTTP/1.1 103"), "{path}: {text}");
        assert!(rest[end..].starts_with(&body), "{path}: {text}");
        rest = &rest[end + body.len()..];
    }
    assert_eq!(rest, "", "{text}");
    let forwarded = counted(&f, "forwarded");
    let busy = counted(&f, "dropped_busy");
    assert_eq!(forwarded + busy, 3.0, "{}", f.gw.metrics());
    assert_eq!(text.matches("HTTP/1.1 103").count() as f64, forwarded, "{text}");
}

#[test]
fn an_http2_origins_hints_reach_http11_and_http2_clients() {
    let origin = tlsgate_testkit::hints::hinting_h2_origin();
    let routes = format!(
        "{}{}",
        common::upstream_route(None, "/", "hints"),
        common::upstream("hints", &[origin], "protocol = \"http2\"\n")
    );
    let f = common::start("", &routes);
    let out = f.curl(&["--http1.1", "-sS", "-D", "-"], "/one");
    let text = out.stdout.as_str();
    assert_eq!(heads(text), ["HTTP/1.1 103", "HTTP/1.1 200"], "{}", out.all());
    assert!(
        text.to_ascii_lowercase()
            .contains("link: </style.css>; rel=preload; as=style"),
        "{}",
        out.all()
    );
    assert!(text.ends_with("hello /one"), "{}", out.all());
    let out = f.curl(&["--http2", "-sS", "-D", "-"], "/two");
    let text = out.stdout.to_ascii_lowercase();
    let hints = text
        .find("http/2 103")
        .unwrap_or_else(|| panic!("no 103: {}", out.all()));
    let ok = text
        .find("http/2 200")
        .unwrap_or_else(|| panic!("no 200: {}", out.all()));
    assert!(hints < ok, "{}", out.all());
    assert!(out.stdout.ends_with("hello /two"), "{}", out.all());
    assert_eq!(counted(&f, "forwarded"), 2.0, "{}", f.gw.metrics());
}

#[test]
fn http2_clients_get_hints_on_each_streams_own_stream_before_its_response() {
    let f = start("");
    let out = f.curl(&["--http2", "-sS", "-D", "-"], "/h2");
    let text = out.stdout.to_ascii_lowercase();
    let hints = text
        .find("http/2 103")
        .unwrap_or_else(|| panic!("no 103: {}", out.all()));
    let ok = text
        .find("http/2 200")
        .unwrap_or_else(|| panic!("no 200: {}", out.all()));
    assert!(hints < ok, "{}", out.all());
    let hint_head = &text[hints..ok];
    assert!(
        hint_head.contains("link: </style.css>; rel=preload; as=style"),
        "{}",
        out.all()
    );
    assert!(
        !hint_head.contains("x-secret"),
        "hop-by-hop field forwarded: {}",
        out.all()
    );
    assert!(out.stdout.ends_with("hello /h2"), "{}", out.all());
    assert_eq!(counted(&f, "forwarded"), 1.0, "{}", f.gw.metrics());

    // nghttp (nghttp2's client, not curl's HTTP/2 stack), three streams at once on one
    // connection: each stream gets its own 103 before its own 200.
    let base = format!("https://localhost:{}", f.https);
    let urls: Vec<String> = ["/a", "/b", "/c"].iter().map(|p| format!("{base}{p}")).collect();
    let out = std::process::Command::new("nghttp")
        .args(["-nv", "--no-verify-peer"])
        .args(&urls)
        .output()
        .expect("nghttp (apt nghttp2-client) must be installed");
    let log = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{log}");
    let mut by_stream: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    // Lines like `[  0.153] recv (stream_id=13) :status: 103`, in the order the frames came.
    for line in log.lines() {
        let Some(at) = line.find("recv (stream_id=") else {
            continue;
        };
        let rest = &line[at + 16..];
        let Some((sid, field)) = rest.split_once(") ") else {
            continue;
        };
        if let Some(status) = field.strip_prefix(":status: ") {
            by_stream
                .entry(sid.to_string())
                .or_default()
                .push(status.trim().to_string());
        }
    }
    assert_eq!(by_stream.len(), 3, "{log}");
    for statuses in by_stream.values() {
        assert_eq!(statuses, &["103", "200"], "{log}");
    }
    assert_eq!(counted(&f, "forwarded"), 4.0, "{}", f.gw.metrics());
}

#[test]
fn http10_clients_and_groups_that_turn_them_off_get_no_hints() {
    let f = start("");
    let out = f.curl(&["--http1.0", "-sS", "-D", "-"], "/old");
    assert!(
        out.stdout.starts_with("HTTP/1.") && out.stdout.contains(" 200 OK\r\n"),
        "{}",
        out.all()
    );
    assert!(!out.stdout.contains("103"), "{}", out.all());
    assert!(out.stdout.ends_with("hello /old"), "{}", out.all());
    assert_eq!(counted(&f, "dropped_http10"), 1.0, "{}", f.gw.metrics());

    let off = start("forward_early_hints = false\n");
    let out = off.curl(&["--http1.1", "-sS", "-D", "-"], "/off");
    assert!(out.stdout.starts_with("HTTP/1.1 200 OK"), "{}", out.all());
    assert!(out.stdout.ends_with("hello /off"), "{}", out.all());
    let out = off.curl(&["--http2", "-sS", "-D", "-"], "/off2");
    assert!(out.stdout.starts_with("HTTP/2 200"), "{}", out.all());
    assert!(out.stdout.ends_with("hello /off2"), "{}", out.all());
    assert_eq!(counted(&off, "dropped_off"), 2.0, "{}", off.gw.metrics());
    assert_eq!(counted(&off, "forwarded"), 0.0);
}
