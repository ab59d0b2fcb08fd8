//! Issue 15: what the proxy does to a request between the client and the origin, checked with
//! real origins (python's http.server, a raw origin recording the exact bytes it receives, the
//! testkit origin) and real clients (curl, nghttp, a raw TLS client for bytes curl will not send):
//! path normalisation before routing, forwarding headers, cookies, Expect and TE, the upload vs
//! header timeout, HEAD on the gateway's own responses, 421 for a Host of another site,
//! absolute-form targets, and the framing the gateway refuses.

mod common;

use common::{extra_site, upstream, upstream_route};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use tlsgate_testkit::{require, Origin, RawOrigin};
use tlsgate_tls::pki::KeyKind;

/// Sends `bytes` over TLS (verifying the test CA) and returns everything read until the gateway
/// closes or goes quiet for `quiet`.
fn raw_tls(f: &common::Fixture, bytes: &[u8], quiet: Duration) -> String {
    let mut b = boring::ssl::SslConnector::builder(boring::ssl::SslMethod::tls()).unwrap();
    b.set_ca_file(f.pki.ca_file()).unwrap();
    b.set_alpn_protos(b"\x08http/1.1").unwrap();
    let tcp = TcpStream::connect(f.connect()).unwrap();
    tcp.set_read_timeout(Some(quiet)).unwrap();
    let mut tls = b.build().connect("localhost", tcp).expect("handshake");
    tls.write_all(bytes).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 16384];
    loop {
        match tls.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn status_of(response: &str) -> &str {
    response.split(' ').nth(1).unwrap_or("")
}

/// A python `http.server` serving a directory with `admin/secret.txt` and `public/index.html`.
struct PythonOrigin {
    child: std::process::Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl PythonOrigin {
    fn start() -> Self {
        require("python3");
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in [
            ("admin/secret.txt", "TOP SECRET\n"),
            ("public/index.html", "public page\n"),
        ] {
            let p = dir.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let port = tlsgate_testkit::free_port();
        let child = std::process::Command::new("python3")
            .args([
                "-m",
                "http.server",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--directory",
            ])
            .arg(dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("python3 -m http.server");
        assert!(
            common::wait_until(Duration::from_secs(10), || tlsgate_testkit::listening(port)),
            "python http.server did not start"
        );
        Self { child, port, _dir: dir }
    }
}

impl Drop for PythonOrigin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn every_spelling_of_a_blocked_path_is_refused_like_nginx() {
    let py = PythonOrigin::start();
    let routes = [
        "\n[[site.route]]\npath_prefix = \"/admin\"\nfixed_response = { status = 403, body = \"forbidden\" }\n"
            .to_string(),
        upstream_route(None, "/", "py"),
        upstream("py", &[format!("127.0.0.1:{}", py.port)], ""),
    ]
    .concat();
    let f = common::start("", &routes);
    // The origin really serves the file to whoever reaches it.
    let direct = tlsgate_testkit::run(
        "curl",
        &["-sS", &format!("http://127.0.0.1:{}/admin/secret.txt", py.port)],
        b"",
        Duration::ZERO,
        Duration::from_secs(10),
    );
    assert_eq!(direct.stdout, "TOP SECRET\n", "{}", direct.all());
    for path in [
        "/admin/secret.txt",
        "/%61dmin/secret.txt",
        "/x/../admin/secret.txt",
        "/./admin/secret.txt",
        "//admin/secret.txt",
        "/public/%2e%2e/admin/secret.txt",
        "/ADMIN/../admin/secret.txt",
    ] {
        let out = f.curl(&["--path-as-is", "-w", "\nstatus=%{http_code}"], path);
        assert!(out.stdout.ends_with("status=403"), "{path}: {}", out.all());
        assert!(!out.stdout.contains("SECRET"), "{path}: {}", out.all());
    }
    // Climbing above the root and malformed escapes are refused outright.
    for path in ["/../admin/secret.txt", "/%zz", "/a%00b"] {
        let out = f.curl(&["--path-as-is", "-w", "\nstatus=%{http_code}"], path);
        assert!(out.stdout.ends_with("status=400"), "{path}: {}", out.all());
    }
    // Normal requests still pass, with the normalised path.
    let out = f.curl(&["--path-as-is"], "/public/./index.html");
    assert_eq!(out.stdout, "public page\n", "{}", out.all());
}

#[test]
fn the_origin_gets_the_normalised_path_and_fresh_forwarding_headers() {
    let raw = RawOrigin::start();
    let routes = [upstream_route(None, "/", "raw"), upstream("raw", &[raw.addr()], "")].concat();
    let f = common::start("", &routes);
    let forged = [
        "-H",
        "X-Forwarded-For: 6.6.6.6",
        "-H",
        "X-Forwarded-Host: evil.test",
        "-H",
        "X-Forwarded-Proto: http",
        "-H",
        "Forwarded: for=6.6.6.6",
        "-H",
        "X-Real-IP: 6.6.6.6",
    ];
    let out = f.curl(&[&["--path-as-is"], &forged[..]].concat(), "/a/./b//c/%7euser?x=1");
    assert_eq!(out.stdout, "ok", "{}", out.all());
    let got = raw.texts().pop().unwrap().to_ascii_lowercase();
    let authority = format!("localhost:{}", f.https);
    assert!(got.starts_with("get /a/b/c/~user?x=1 http/1.1\r\n"), "{got}");
    assert!(got.contains("\r\nx-forwarded-for: 127.0.0.1\r\n"), "{got}");
    assert!(got.contains(&format!("\r\nx-forwarded-host: {authority}\r\n")), "{got}");
    assert!(got.contains("\r\nx-forwarded-proto: https\r\n"), "{got}");
    assert!(
        got.contains(&format!(
            "\r\nforwarded: for=127.0.0.1;proto=https;host=\"{authority}\"\r\n"
        )),
        "{got}"
    );
    assert!(
        !got.contains("6.6.6.6") && !got.contains("evil.test") && !got.contains("x-real-ip"),
        "{got}"
    );
    assert_eq!(got.matches("\r\nhost: ").count(), 1, "{got}");
}

#[test]
fn an_upstream_adds_only_the_forwarding_fields_it_names() {
    let raw = RawOrigin::start();
    let routes = [
        upstream_route(None, "/", "raw"),
        upstream(
            "raw",
            &[raw.addr()],
            "forwarded_headers = [\"X-Forwarded-For\", \"x-real-ip\"]\n",
        ),
    ]
    .concat();
    let f = common::start("", &routes);
    let forged = [
        "-H",
        "X-Forwarded-Host: evil.test",
        "-H",
        "Forwarded: for=6.6.6.6",
        "-H",
        "X-Real-IP: 6.6.6.6",
    ];
    let out = f.curl(&forged, "/x");
    assert_eq!(out.stdout, "ok", "{}", out.all());
    let got = raw.texts().pop().unwrap().to_ascii_lowercase();
    assert!(got.contains("\r\nx-forwarded-for: 127.0.0.1\r\n"), "{got}");
    assert!(got.contains("\r\nx-real-ip: 127.0.0.1\r\n"), "{got}");
    assert!(
        !got.contains("x-forwarded-proto") && !got.contains("x-forwarded-host") && !got.contains("forwarded:"),
        "{got}"
    );
    assert!(!got.contains("6.6.6.6") && !got.contains("evil.test"), "{got}");
    assert_eq!(got.matches("\r\nhost: ").count(), 1, "{got}");
}

#[test]
fn a_trusted_proxy_forwarding_headers_are_extended() {
    let raw = RawOrigin::start();
    let routes = [upstream_route(None, "/", "raw"), upstream("raw", &[raw.addr()], "")].concat();
    let f = common::start_edited("", &routes, |t| {
        t.replace("[server]\n", "[server]\ntrusted_proxies = [\"127.0.0.0/8\"]\n")
    });
    let out = f.curl(
        &[
            "-H",
            "X-Forwarded-For: 203.0.113.5",
            "-H",
            "X-Forwarded-Proto: http",
            "-H",
            "Forwarded: for=203.0.113.5",
        ],
        "/t",
    );
    assert_eq!(out.stdout, "ok", "{}", out.all());
    let got = raw.texts().pop().unwrap().to_ascii_lowercase();
    assert!(got.contains("\r\nx-forwarded-for: 203.0.113.5, 127.0.0.1\r\n"), "{got}");
    assert!(got.contains("\r\nx-forwarded-proto: http\r\n"), "{got}");
    assert!(
        got.contains("\r\nforwarded: for=203.0.113.5, for=127.0.0.1;proto=https;"),
        "{got}"
    );
}

#[test]
fn http2_cookie_fields_reach_an_http11_origin_as_one() {
    require("nghttp");
    let raw = RawOrigin::start();
    let routes = [upstream_route(None, "/", "raw"), upstream("raw", &[raw.addr()], "")].concat();
    let f = common::start("", &routes);
    let url = format!("https://localhost:{}/c", f.https);
    let out = tlsgate_testkit::run(
        "nghttp",
        &["-H", "cookie: a=1", "-H", "cookie: b=2", &url],
        b"",
        Duration::ZERO,
        Duration::from_secs(15),
    );
    assert_eq!(out.stdout, "ok", "{}", out.all());
    let got = raw.texts().pop().unwrap().to_ascii_lowercase();
    assert_eq!(got.matches("\r\ncookie: ").count(), 1, "{got}");
    assert!(got.contains("\r\ncookie: a=1; b=2\r\n"), "{got}");
}

#[test]
fn expect_is_answered_by_the_gateway_and_te_trailers_and_trailers_travel() {
    let raw = RawOrigin::start();
    let routes = [upstream_route(None, "/", "raw"), upstream("raw", &[raw.addr()], "")].concat();
    let f = common::start("", &routes);
    let out = f.curl(&["-H", "Expect: 100-continue", "--data-binary", "hello"], "/e");
    assert_eq!(out.stdout, "ok", "{}", out.all());
    let got = raw.texts().pop().unwrap().to_ascii_lowercase();
    assert!(!got.contains("expect:"), "{got}");
    assert!(got.ends_with("\r\n\r\nhello"), "{got}");

    let req = format!(
        "POST /t HTTP/1.1\r\nHost: localhost:{}\r\nTE: trailers\r\nTrailer: x-sum\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n0\r\nx-sum: 42\r\n\r\n",
        f.https
    );
    let resp = raw_tls(&f, req.as_bytes(), Duration::from_secs(5));
    assert_eq!(status_of(&resp), "200", "{resp}");
    let got = raw.texts().pop().unwrap().to_ascii_lowercase();
    assert!(got.contains("\r\nte: trailers\r\n"), "{got}");
    assert!(got.contains("\r\ntrailer: x-sum\r\n"), "{got}");
    assert!(got.ends_with("0\r\nx-sum: 42\r\n\r\n"), "{got}");
}

#[test]
fn an_upload_longer_than_the_header_timeout_is_not_a_504() {
    let origin = Origin::start("up");
    let routes = [
        upstream_route(None, "/", "up"),
        upstream("up", &[origin.addr()], "header_timeout = \"2s\""),
    ]
    .concat();
    let f = common::start("", &routes);
    let file = f.pki.write("upload.bin", &"x".repeat(40_000));
    // 40 KB at 10 KB/s: about 4 s of upload, twice the header timeout.
    let started = std::time::Instant::now();
    let out = f.curl(
        &[
            "--limit-rate",
            "10K",
            "--data-binary",
            &format!("@{}", file.display()),
            "-w",
            "\nstatus=%{http_code}",
        ],
        "/upload",
    );
    assert!(started.elapsed() >= Duration::from_secs(3), "the upload was not slow");
    assert!(out.stdout.contains("received=40000"), "{}", out.all());
    assert!(out.stdout.ends_with("status=200"), "{}", out.all());
    // The timeout still applies once the request is sent.
    let out = f.curl(&["-w", "\nstatus=%{http_code}"], "/slow?ms=5000");
    assert!(out.stdout.ends_with("status=504"), "{}", out.all());
}

#[test]
fn head_on_the_gateways_own_responses_works_over_http2() {
    let f = common::start("", "");
    for (path, code, len) in [("/hello", "200", "13"), ("/nothing-here", "404", "24")] {
        let get = f.curl(&["--http2", "-o", "/dev/null", "-w", "%{size_download}"], path);
        assert_eq!(get.stdout, len, "{}", get.all());
        for proto in ["--http2", "--http1.1"] {
            let out = f.curl(&[proto, "-I"], path);
            assert_eq!(out.status, Some(0), "{proto} {path}: {}", out.all());
            let head = out.stdout.to_ascii_lowercase();
            assert!(head.contains(&format!(" {code}")), "{proto} {path}: {head}");
            assert!(
                head.contains(&format!("content-length: {len}")),
                "{proto} {path}: {head}"
            );
        }
    }
}

#[test]
fn a_host_of_another_site_gets_421_and_absolute_form_routes_by_its_uri() {
    let f = common::start_with("", |pki| {
        [
            "\n[[site.route]]\nhost = \"a.test\"\npath_prefix = \"/\"\nfixed_response = { body = \"route a\" }\n"
                .to_string(),
            extra_site(pki, "other", &["other.test"], &[KeyKind::EcdsaP256]),
        ]
        .concat()
    });
    // curl connects with SNI localhost (site main) and asks for other.test: misdirected.
    let out = f.curl(&["-H", "Host: other.test", "-w", "\nstatus=%{http_code}"], "/x");
    assert!(out.stdout.ends_with("status=421"), "{}", out.all());
    let out = f.curl(
        &["--http2", "-H", "Host: other.test", "-w", "\nstatus=%{http_code}"],
        "/x",
    );
    assert!(out.stdout.ends_with("status=421"), "{}", out.all());
    // A name no site claims is served by the connection's site, as before.
    let out = f.curl(&["-H", "Host: a.test"], "/x");
    assert_eq!(out.stdout, "route a", "{}", out.all());
    // Absolute-form: the URI's authority routes, the Host header is ignored (RFC 9112 §3.2.2).
    let resp = raw_tls(
        &f,
        b"GET https://a.test/x HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        Duration::from_secs(5),
    );
    assert!(resp.ends_with("route a"), "{resp}");
}

#[test]
fn requests_without_host_or_with_unforwardable_framing_are_refused() {
    let raw = RawOrigin::start();
    let routes = [upstream_route(None, "/", "raw"), upstream("raw", &[raw.addr()], "")].concat();
    let f = common::start("", &routes);
    let q = Duration::from_secs(3);
    let cases: [(&str, &[u8], &str); 7] = [
        ("no Host", b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n", "400"),
        ("two Hosts", b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "400"),
        (
            "gzip, chunked",
            b"POST / HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
            "501",
        ),
        (
            "two lengths",
            b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\nContent-Length: 40\r\n\r\nabc",
            "400",
        ),
        (
            "obs-fold",
            b"GET / HTTP/1.1\r\nHost: localhost\r\nX-A: 1\r\n 2\r\n\r\n",
            "400",
        ),
        (
            "space in name",
            b"GET / HTTP/1.1\r\nHost: localhost\r\nX A: 1\r\n\r\n",
            "400",
        ),
        (
            "bad chunk size",
            b"POST / HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
            "400",
        ),
    ];
    for (what, bytes, want) in cases {
        let before = raw.requests().len();
        let resp = raw_tls(&f, bytes, q);
        assert_eq!(status_of(&resp), want, "{what}: {resp:?}");
        for seen in &raw.texts()[before..] {
            // Nothing complete reached the origin, and never the smuggled request.
            assert!(!seen.contains("smuggled"), "{what}: {seen:?}");
            assert!(
                !seen.ends_with("\r\n\r\n") || seen.is_empty() || what == "bad chunk size",
                "{what}: {seen:?}"
            );
        }
    }
    // Content-Length with Transfer-Encoding: hyper reads the body as chunked, drops the length and
    // closes the connection after the response (RFC 9112 §6.3), so the origin gets one chunked
    // request without a length and the bytes after the chunked body are never read as a request.
    let before = raw.requests().len();
    let resp = raw_tls(
        &f,
        b"POST /cl-te HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: localhost\r\n\r\n",
        q,
    );
    assert_eq!(
        resp.matches("HTTP/1.1 ").count(),
        1,
        "one response, then close: {resp:?}"
    );
    // (Empty entries are pooled connections the gateway closed unused.)
    let seen: Vec<String> = raw.texts()[before..]
        .iter()
        .filter(|t| !t.is_empty())
        .cloned()
        .collect();
    assert_eq!(seen.len(), 1, "{seen:?}");
    let got = seen[0].to_ascii_lowercase();
    assert!(got.starts_with("post /cl-te "), "{got}");
    assert!(
        got.contains("transfer-encoding: chunked") && !got.contains("content-length"),
        "{got}"
    );
    assert!(!got.contains("smuggled"), "{got}");
    // A bare-LF request reaches the origin only re-framed with CRLF, as the origin reads it.
    let before = raw.requests().len();
    let resp = raw_tls(&f, b"GET /lf HTTP/1.1\nHost: localhost\nConnection: close\n\n", q);
    assert_eq!(status_of(&resp), "200", "{resp:?}");
    for seen in &raw.requests()[before..] {
        let bare = seen.windows(2).any(|w| w[1] == b'\n' && w[0] != b'\r');
        assert!(!bare, "{:?}", String::from_utf8_lossy(seen));
    }
}

/// Runs h2spec (github.com/summerwind/h2spec, installed by scripts/deps.sh with `go install`)
/// against the gateway and asserts all of its 145 HTTP/2 and HPACK cases pass.
fn h2spec_all_pass(f: &common::Fixture) {
    let h2spec = [
        "h2spec".into(),
        format!("{}/go/bin/h2spec", std::env::var("HOME").unwrap_or_default()),
    ]
    .into_iter()
    .find(|p: &String| std::process::Command::new(p).arg("--version").output().is_ok())
    .expect("h2spec is not installed (scripts/deps.sh installs it with go install)");
    let out = tlsgate_testkit::run(
        &h2spec,
        &["-t", "-k", "-h", "localhost", "-p", &f.https.to_string(), "-o", "5"],
        b"",
        Duration::ZERO,
        Duration::from_secs(120),
    );
    assert!(
        out.stdout.contains("145 tests, 145 passed, 0 skipped, 0 failed"),
        "{}",
        out.stdout.rsplit("Failures:").next().unwrap_or(&out.stdout)
    );
}

/// Every h2spec case against a route the gateway answers itself (the cases that used to fail: a
/// complete response sent before the request's END_STREAM, §5.1 #8 and §8.1 #1).
#[test]
fn h2spec_passes_every_case_on_the_gateways_own_responses() {
    // A body of a few KB: some cases need a response larger than their tiny windows.
    let body = "x".repeat(4096);
    let f = common::start(
        "",
        &format!("\n[[site.route]]\npath_prefix = \"/\"\nfixed_response = {{ body = \"{body}\" }}\n"),
    );
    h2spec_all_pass(&f);
}

/// The same against a proxied route, with the raw origin behind it: whatever h2spec's malformed
/// requests do (content-length that disagrees with DATA, connection-specific fields, trailers
/// without END_STREAM), what reaches the HTTP/1.1 origin is well-formed: no hop-by-hop field,
/// and a body that matches its Content-Length exactly.
#[test]
fn h2spec_passes_on_a_proxied_route_and_the_origin_sees_only_well_formed_requests() {
    let raw = RawOrigin::answering(vec![b'o'; 4096]);
    let routes = [upstream_route(None, "/", "raw"), upstream("raw", &[raw.addr()], "")].concat();
    let f = common::start("", &routes);
    h2spec_all_pass(&f);
    let seen: Vec<String> = raw.texts().into_iter().filter(|t| !t.is_empty()).collect();
    assert!(!seen.is_empty());
    for req in &seen {
        let lower = req.to_ascii_lowercase();
        let Some((head, body)) = lower.split_once("\r\n\r\n") else {
            continue; // cut off by a stream reset before the header block was complete
        };
        for hop in [
            "\r\nconnection:",
            "\r\nkeep-alive:",
            "\r\nupgrade:",
            "\r\nproxy-connection:",
        ] {
            assert!(!head.contains(hop), "{req:?}");
        }
        if let Some(len) = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
        {
            assert!(
                body.len() <= len,
                "a body longer than its length reached the origin: {req:?}"
            );
        }
    }
}

#[test]
fn routes_rewrite_the_prefix_and_edit_headers_both_ways() {
    let raw = RawOrigin::start();
    let routes = [
        "\n[[site.route]]\npath_prefix = \"/api/\"\nupstream = \"raw\"\nrewrite_prefix = \"/v2/\"\n".to_string(),
        "[site.route.request_headers]\nset = { \"x-env\" = \"prod\" }\nremove = [\"x-debug\"]\n".to_string(),
        "[site.route.response_headers]\nset = { \"x-frame-options\" = \"DENY\" }\nremove = [\"x-origin-secret\"]\n"
            .to_string(),
        "\n[[site.route]]\npath_prefix = \"/strip/\"\nupstream = \"raw\"\nrewrite_prefix = \"/\"\n".to_string(),
        upstream("raw", &[raw.addr()], ""),
    ]
    .concat();
    let f = common::start("", &routes);
    let out = f.curl(&["-i", "-H", "X-Debug: 1", "-H", "X-Env: dev"], "/api/items/7?full=1");
    assert!(out.stdout.ends_with("ok"), "{}", out.all());
    let head = out.stdout.to_ascii_lowercase();
    assert!(head.contains("x-frame-options: deny"), "{head}");
    let got = raw.texts().pop().unwrap().to_ascii_lowercase();
    assert!(got.starts_with("get /v2/items/7?full=1 http/1.1\r\n"), "{got}");
    assert!(
        got.contains("\r\nx-env: prod\r\n") && !got.contains("x-env: dev"),
        "{got}"
    );
    assert!(!got.contains("x-debug"), "{got}");
    let out = f.curl(&[], "/strip/a/b");
    assert_eq!(out.stdout, "ok", "{}", out.all());
    let got = raw.texts().pop().unwrap().to_ascii_lowercase();
    assert!(got.starts_with("get /a/b http/1.1\r\n"), "{got}");
    // `check` refuses edits of headers the gateway owns.
    let bad = common::config_text(
        &f.pki,
        tlsgate_testkit::free_port(),
        tlsgate_testkit::free_port(),
        "",
        "\n[[site.route]]\npath_prefix = \"/x/\"\nfixed_response = { body = \"x\" }\n[site.route.request_headers]\nremove = [\"Transfer-Encoding\"]\n",
    );
    let path = f.pki.write("bad.toml", &bad);
    let out = tlsgate_testkit::run(
        common::binary().to_str().unwrap(),
        &["check", "--config", path.to_str().unwrap()],
        b"",
        Duration::ZERO,
        Duration::from_secs(20),
    );
    assert_eq!(out.status, Some(1), "{}", out.all());
    assert!(
        out.all().contains("site[0].route[1].request_headers.remove"),
        "{}",
        out.all()
    );
}
