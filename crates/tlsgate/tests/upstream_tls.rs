//! Issue 17, TLS and HTTP/2 to origins, end to end against nginx (and `openssl s_server` where a
//! TLS-level client-certificate demand is needed). Each nginx response says what the origin saw
//! (TLS version, group, SNI, resumption, HTTP version, Host, client certificate subject), so:
//! - an `https://` origin verified against `[upstream.tls] ca` is reached over TLS 1.3, with the
//!   configured groups, and counted in `tlsgate_upstream_tls_handshakes_total`;
//! - a wrong CA, a name the certificate does not cover (`server_name` or the server's IP) are a
//!   502 counted as `kind="tls"`, and the request never reaches the origin; `server_name` naming a
//!   covered name works for a server given by IP; `verify = false` accepts any certificate;
//! - mutual TLS presents `client_certificate`; a server demanding one at the TLS level without
//!   one configured is a 502 (`kind="tls"`), TLS 1.3 and TLS 1.2;
//! - with `max_idle_per_server = 0` every request opens a new origin connection, resumed after
//!   the first (nginx's `$ssl_session_reused`, and `resumed="true"` in the metric);
//! - `protocol = "http2"` speaks h2 (ALPN over TLS, prior knowledge over plaintext) with the
//!   client's host as `:authority`, `"auto"` follows ALPN, the default stays HTTP/1.1;
//! - HTTP/1.1 and HTTP/2 clients both get through an h2 origin, a 100 KiB POST body echoed intact;
//! - a burst of first requests to an h2 origin opens one shared connection, not one per request.

mod common;
mod keyless_env;

use common::{upstream, upstream_route, Fixture};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tlsgate_testkit::nginx::Nginx;
use tlsgate_testkit::{free_port, toml_path, TestPki};
use tlsgate_tls::pki::KeyKind;

const HANDSHAKES: &str = "tlsgate_upstream_tls_handshakes_total";
const ERRORS: &str = "tlsgate_upstream_errors_total";

/// nginx locations: `/…echo` reads the body and sends it back after one line naming the HTTP
/// version; every other path answers one line of `key=value` words saying what nginx saw.
const LOCATIONS: &str = r#"
        location ~ echo$ {
            client_max_body_size 10m;
            client_body_buffer_size 1m;
            client_body_in_single_buffer on;
            echo_read_request_body;
            echo "server=$server_protocol clen=$content_length";
            echo_request_body;
        }
        location / {
            return 200 "proto=$ssl_protocol curve=$ssl_curve sni=$ssl_server_name reused=$ssl_session_reused conn=$connection server=$server_protocol host=$host http_host=$http_host dn=$ssl_client_s_dn\n";
        }
"#;

/// The origin's PKI: its own CA and a certificate for `names`.
struct OriginPki {
    pki: TestPki,
    cert: PathBuf,
    key: PathBuf,
}

impl OriginPki {
    fn new(names: &[&str]) -> Self {
        let pki = TestPki::new();
        let (cert, key) = pki.leaf("origin", names, KeyKind::EcdsaP256);
        Self { pki, cert, key }
    }

    /// An nginx `server {}` on 127.0.0.1 with `listen` flags (`ssl`, `ssl http2`, `http2`, ``),
    /// this PKI's certificate when `ssl` is among them, and `extra` directives.
    fn server(&self, port: u16, flags: &str, extra: &str) -> String {
        let tls = if flags.contains("ssl") {
            format!(
                "ssl_certificate {};\n        ssl_certificate_key {};\n        ssl_session_cache shared:S{port}:1m;\n",
                self.cert.display(),
                self.key.display()
            )
        } else {
            String::new()
        };
        format!(
            "    server {{\n        listen 127.0.0.1:{port} {flags};\n        {tls}        {extra}\n{LOCATIONS}    }}\n"
        )
    }

    /// `[upstream.tls]` trusting this PKI's CA, plus `extra` lines.
    fn tls(&self, extra: &str) -> String {
        format!("[upstream.tls]\nca = {}\n{extra}", toml_path(&self.pki.ca_file()))
    }
}

/// `https://127.0.0.1:PORT`.
fn https(port: u16) -> String {
    format!("https://127.0.0.1:{port}")
}

/// A GET (or whatever `args` make it) through the gateway.
struct Reply {
    status: String,
    /// The HTTP version curl spoke to the gateway (`1.1`, `2`).
    version: String,
    body: String,
}

fn fetch(f: &Fixture, args: &[&str], path: &str) -> Reply {
    let mut all = vec!["-w", "\nversion=%{http_version}\nstatus=%{http_code}\n"];
    all.extend_from_slice(args);
    let out = f.curl(&all, path);
    let parsed = out.stdout.rsplit_once("\nversion=").and_then(|(body, rest)| {
        let (version, status) = rest.split_once("\nstatus=")?;
        Some(Reply {
            status: status.trim().to_string(),
            version: version.to_string(),
            body: body.to_string(),
        })
    });
    parsed.unwrap_or_else(|| panic!("no status from curl: {}", out.all()))
}

/// The `key=value` words of nginx's "what I saw" line.
fn saw(body: &str) -> HashMap<String, String> {
    let line = body
        .lines()
        .find(|l| l.starts_with("proto="))
        .unwrap_or_else(|| panic!("not an answer from the nginx origin: {body:?}"));
    line.split_whitespace()
        .filter_map(|w| w.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A GET that must succeed; what the origin saw.
fn saw_ok(f: &Fixture, args: &[&str], path: &str) -> HashMap<String, String> {
    let r = fetch(f, args, path);
    assert_eq!(r.status, "200", "{path}: {}\n{}", r.body, f.gw.log());
    saw(&r.body)
}

/// A GET that must be a 502 from the gateway.
fn assert_502(f: &Fixture, path: &str) {
    let r = fetch(f, &[], path);
    assert_eq!(r.status, "502", "{path} should fail: {}\n{}", r.body, f.gw.log());
    assert!(!r.body.contains("proto="), "{path}: the origin answered: {}", r.body);
}

fn metric(f: &Fixture, name: &str, labels: &[&str]) -> f64 {
    f.gw.metric(name, labels)
}

#[test]
fn https_origin_verified_with_the_configured_ca_is_reached_over_tls13() {
    let origin = OriginPki::new(&["localhost", "127.0.0.1"]);
    let port = free_port();
    let nginx = Nginx::start(&origin.server(port, "ssl", ""), &[port]);
    let routes = [
        upstream_route(None, "/p256/", "p256"),
        upstream_route(None, "/byname/", "byname"),
        upstream_route(None, "/", "app"),
        upstream("app", &[https(port)], &origin.tls("")),
        upstream("p256", &[https(port)], &origin.tls("groups = [\"P-256\"]\n")),
        upstream("byname", &[format!("https://localhost:{port}")], &origin.tls("")),
    ]
    .concat();
    let f = common::start("", &routes);

    let seen = saw_ok(&f, &[], "/first");
    assert_eq!(seen["proto"], "TLSv1.3", "{seen:?}");
    assert_eq!(seen["curve"], "X25519", "nginx has no ML-KEM: X25519 is next: {seen:?}");
    assert_eq!(seen["reused"], ".", "a first handshake is a full one: {seen:?}");
    assert_eq!(seen["sni"], "", "no SNI for a server given by IP address: {seen:?}");
    assert_eq!(seen["server"], "HTTP/1.1", "protocol defaults to http1: {seen:?}");
    assert_eq!(seen["http_host"], format!("localhost:{}", f.https), "{seen:?}");
    let app = |more: &[&str]| {
        let mut labels = vec!["upstream=\"app\""];
        labels.extend_from_slice(more);
        metric(&f, HANDSHAKES, &labels)
    };
    assert!(
        app(&["version=\"TLSv1.3\"", "group=\"X25519\"", "resumed=\"false\""]) >= 1.0,
        "{}",
        f.gw.metrics()
    );
    assert_eq!(app(&["resumed=\"true\""]), 0.0, "{}", f.gw.metrics());
    assert_eq!(metric(&f, ERRORS, &["upstream=\"app\""]), 0.0, "{}", f.gw.metrics());

    // `groups` is what the gateway offers: P-256 alone gets P-256.
    let seen = saw_ok(&f, &[], "/p256/x");
    assert_eq!(
        (seen["proto"].as_str(), seen["curve"].as_str()),
        ("TLSv1.3", "prime256v1")
    );
    assert!(
        metric(&f, HANDSHAKES, &["upstream=\"p256\"", "group=\"P-256\""]) >= 1.0,
        "{}",
        f.gw.metrics()
    );
    assert_eq!(metric(&f, HANDSHAKES, &["upstream=\"p256\"", "group=\"X25519\""]), 0.0);

    // A server given by name is sent that name in SNI and verified for it.
    let seen = saw_ok(&f, &[], "/byname/x");
    assert_eq!((seen["proto"].as_str(), seen["sni"].as_str()), ("TLSv1.3", "localhost"));
    assert!(nginx.access_log().lines().count() >= 3, "{}", nginx.access_log());
}

#[test]
fn certificate_failures_are_502_counted_as_tls_and_never_reach_the_origin() {
    // The origin's certificate names origin.test only: not 127.0.0.1, where it listens.
    let origin = OriginPki::new(&["origin.test"]);
    let stranger = TestPki::new();
    let port = free_port();
    let nginx = Nginx::start(&origin.server(port, "ssl", ""), &[port]);
    let other_ca = format!("[upstream.tls]\nca = {}\n", toml_path(&stranger.ca_file()));
    let groups = [
        ("wrongca", format!("{other_ca}server_name = \"origin.test\"\n")),
        ("wrongname", origin.tls("server_name = \"elsewhere.test\"\n")),
        ("ipname", origin.tls("")),
        ("named", origin.tls("server_name = \"origin.test\"\n")),
        ("unverified", format!("{other_ca}verify = false\n")),
    ];
    let mut routes = String::new();
    for (name, _) in &groups {
        routes.push_str(&upstream_route(None, &format!("/{name}/"), name));
    }
    for (name, tls) in &groups {
        routes.push_str(&upstream(name, &[https(port)], tls));
    }
    let f = common::start("", &routes);

    for name in ["wrongca", "wrongname", "ipname"] {
        assert_502(&f, &format!("/{name}/x"));
        let tls = metric(&f, ERRORS, &[&format!("upstream=\"{name}\""), "kind=\"tls\""]);
        assert!(tls >= 1.0, "{name}: no kind=\"tls\" error:\n{}", f.gw.metrics());
        let connect = metric(&f, ERRORS, &[&format!("upstream=\"{name}\""), "kind=\"connect\""]);
        assert_eq!(connect, 0.0, "{name}: a TLS failure is not a connect failure");
        assert_eq!(
            metric(&f, HANDSHAKES, &[&format!("upstream=\"{name}\"")]),
            0.0,
            "{name}: a failed verification is no handshake:\n{}",
            f.gw.metrics()
        );
        let log = f.gw.log();
        assert!(
            log.lines().any(|l| l.contains("WARN") && l.contains(name)),
            "{name}: no warning in the gateway's log:\n{log}"
        );
    }

    // server_name covers the certificate although the server is given by IP: SNI and check use it.
    let seen = saw_ok(&f, &[], "/named/x");
    assert_eq!(
        (seen["proto"].as_str(), seen["sni"].as_str()),
        ("TLSv1.3", "origin.test")
    );
    // verify = false accepts a certificate from an unknown CA for another name.
    let seen = saw_ok(&f, &[], "/unverified/x");
    assert_eq!(seen["proto"], "TLSv1.3", "{seen:?}");
    assert_eq!(metric(&f, ERRORS, &["upstream=\"named\""]), 0.0);
    assert_eq!(metric(&f, ERRORS, &["upstream=\"unverified\""]), 0.0);

    // No request was ever written on a connection that failed verification.
    let log = nginx.access_log();
    assert_eq!(log.lines().count(), 2, "{log}");
    for name in ["wrongca", "wrongname", "ipname"] {
        assert!(!log.contains(&format!("/{name}/")), "{name} reached the origin:\n{log}");
    }
}

/// `openssl s_server -www` requiring a client certificate at the TLS level (it fails the
/// handshake without one, unlike nginx, which answers HTTP 400); killed on drop.
struct DemandingServer {
    child: Child,
    port: u16,
}

impl DemandingServer {
    fn start(origin: &OriginPki, version: &str) -> Self {
        Self::start_with(origin, version, &[])
    }

    /// [`Self::start`] with more `s_server` options (e.g. `-alpn h2`).
    fn start_with(origin: &OriginPki, version: &str, extra: &[&str]) -> Self {
        tlsgate_testkit::require("openssl");
        let port = free_port();
        let child = Command::new("openssl")
            .args(["s_server", "-accept", &format!("127.0.0.1:{port}"), "-www", version])
            .args(extra)
            .args(["-Verify", "1", "-verify_return_error"])
            .arg("-cert")
            .arg(&origin.cert)
            .arg("-key")
            .arg(&origin.key)
            .arg("-CAfile")
            .arg(origin.pki.ca_file())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start openssl s_server");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !tlsgate_testkit::listening(port) {
            assert!(Instant::now() < deadline, "openssl s_server did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        Self { child, port }
    }
}

impl Drop for DemandingServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn mutual_tls_presents_the_client_certificate_and_without_one_is_refused() {
    let origin = OriginPki::new(&["127.0.0.1"]);
    let (client, client_key) = keyless_env::client_cert(&origin.pki, "gateway-client", "gateway-client");
    let ca = origin.pki.ca_file();
    let port = free_port();
    let verify = format!(
        "ssl_verify_client on;\n        ssl_client_certificate {};",
        ca.display()
    );
    let nginx = Nginx::start(&origin.server(port, "ssl", &verify), &[port]);
    let (s13, s12) = (
        DemandingServer::start(&origin, "-tls1_3"),
        DemandingServer::start(&origin, "-tls1_2"),
    );
    let with_cert = origin.tls(&format!(
        "client_certificate = {}\nclient_key = {}\n",
        toml_path(&client),
        toml_path(&client_key)
    ));
    let groups = [
        ("mtls", https(port), with_cert.clone()),
        ("anon", https(port), origin.tls("")),
        ("anon13", https(s13.port), origin.tls("")),
        ("anon12", https(s12.port), origin.tls("")),
        ("mtls13", https(s13.port), with_cert),
    ];
    let mut routes = String::new();
    for (name, _, _) in &groups {
        routes.push_str(&upstream_route(None, &format!("/{name}/"), name));
    }
    for (name, server, tls) in &groups {
        routes.push_str(&upstream(name, std::slice::from_ref(server), tls));
    }
    let f = common::start("", &routes);

    let seen = saw_ok(&f, &[], "/mtls/x");
    assert_eq!(seen["dn"], "CN=gateway-client", "{seen:?}");
    assert_eq!(seen["proto"], "TLSv1.3", "{seen:?}");

    // nginx's `ssl_verify_client on` completes the handshake and answers 400 itself: the gateway
    // presented nothing, and passes the origin's answer on.
    let r = fetch(&f, &[], "/anon/x");
    assert_eq!(r.status, "400", "{}", r.body);
    assert!(r.body.contains("No required SSL certificate was sent"), "{}", r.body);

    // A server that demands the certificate in the handshake: a 502 counted as a TLS failure,
    // whether the refusal comes after the handshake (TLS 1.3) or inside it (TLS 1.2).
    for name in ["anon13", "anon12"] {
        assert_502(&f, &format!("/{name}/x"));
        assert!(
            metric(&f, ERRORS, &[&format!("upstream=\"{name}\""), "kind=\"tls\""]) >= 1.0,
            "{name}:\n{}\n{}",
            f.gw.metrics(),
            f.gw.log()
        );
    }
    // …and with the certificate configured the same server answers.
    let r = fetch(&f, &[], "/mtls13/x");
    assert_eq!(r.status, "200", "{}\n{}", r.body, f.gw.log());
    assert!(
        r.body.contains("Subject: CN=gateway-client"),
        "s_server saw no client certificate: {}",
        r.body
    );
    assert_eq!(metric(&f, ERRORS, &["upstream=\"mtls\""]), 0.0);
    assert_eq!(metric(&f, ERRORS, &["upstream=\"mtls13\""]), 0.0);
    drop(nginx);
}

#[test]
fn new_origin_connections_resume_the_previous_tls_session() {
    let origin = OriginPki::new(&["127.0.0.1"]);
    let port = free_port();
    let _nginx = Nginx::start(&origin.server(port, "ssl", ""), &[port]);
    let routes = [
        upstream_route(None, "/", "app"),
        upstream(
            "app",
            &[https(port)],
            &format!("max_idle_per_server = 0\n{}", origin.tls("")),
        ),
    ]
    .concat();
    let f = common::start("", &routes);

    let seen: Vec<HashMap<String, String>> = (0..3).map(|i| saw_ok(&f, &[], &format!("/r{i}"))).collect();
    let reused: Vec<&str> = seen.iter().map(|s| s["reused"].as_str()).collect();
    assert_eq!(reused, [".", "r", "r"], "{seen:?}");
    let conns: std::collections::HashSet<&str> = seen.iter().map(|s| s["conn"].as_str()).collect();
    assert_eq!(
        conns.len(),
        3,
        "max_idle_per_server = 0: a connection per request: {seen:?}"
    );
    assert!(seen.iter().all(|s| s["proto"] == "TLSv1.3"), "{seen:?}");

    let count = |resumed: &str| metric(&f, HANDSHAKES, &["upstream=\"app\"", "version=\"TLSv1.3\"", resumed]);
    assert_eq!(count("resumed=\"false\""), 1.0, "{}", f.gw.metrics());
    assert_eq!(count("resumed=\"true\""), 2.0, "{}", f.gw.metrics());
}

/// nginx with an h2+h1 TLS listener, an h1-only TLS listener and a plaintext h2 (h2c) listener;
/// a gateway with groups `h2`, `auto-h2`, `auto-h1`, `h1` (TLS) and `h2c` (plaintext).
fn h2_bed() -> (Nginx, Fixture, OriginPki) {
    let origin = OriginPki::new(&["127.0.0.1"]);
    let (both, h1_only, h2c) = (free_port(), free_port(), free_port());
    let servers = [
        origin.server(both, "ssl http2", ""),
        origin.server(h1_only, "ssl", ""),
        origin.server(h2c, "http2", ""),
    ]
    .concat();
    let nginx = Nginx::start(&servers, &[both, h1_only, h2c]);
    let groups = [
        ("h2", https(both), "protocol = \"http2\"\n"),
        ("auto-h2", https(both), "protocol = \"auto\"\n"),
        ("auto-h1", https(h1_only), "protocol = \"auto\"\n"),
        ("h1", https(both), ""),
        ("h2c", format!("127.0.0.1:{h2c}"), "protocol = \"http2\"\n"),
    ];
    let mut routes = String::new();
    for (name, _, _) in &groups {
        routes.push_str(&upstream_route(None, &format!("/{name}/"), name));
    }
    for (name, server, extra) in &groups {
        let tls = if server.starts_with("https://") {
            origin.tls("")
        } else {
            String::new()
        };
        routes.push_str(&upstream(name, std::slice::from_ref(server), &format!("{extra}{tls}")));
    }
    let f = common::start("", &routes);
    (nginx, f, origin)
}

#[test]
fn protocol_setting_picks_http2_or_http1_to_the_origin() {
    let (_nginx, f, _origin) = h2_bed();
    let expect = [
        ("h2", "HTTP/2.0", "TLSv1.3"),
        ("auto-h2", "HTTP/2.0", "TLSv1.3"),
        ("auto-h1", "HTTP/1.1", "TLSv1.3"),
        ("h1", "HTTP/1.1", "TLSv1.3"),
        ("h2c", "HTTP/2.0", ""),
    ];
    for (name, server, proto) in expect {
        let seen = saw_ok(&f, &[], &format!("/{name}/x"));
        assert_eq!(seen["server"], server, "{name}: {seen:?}");
        assert_eq!(seen["proto"], proto, "{name}: {seen:?}");
        // The client's host reaches the origin (`:authority` on h2).
        assert_eq!(seen["http_host"], format!("localhost:{}", f.https), "{name}: {seen:?}");
        assert_eq!(seen["host"], "localhost", "{name}: {seen:?}");
    }
    for name in ["h2", "auto-h2", "auto-h1", "h1", "h2c"] {
        assert_eq!(
            metric(&f, ERRORS, &[&format!("upstream=\"{name}\"")]),
            0.0,
            "{name}:\n{}",
            f.gw.metrics()
        );
    }
    // A handshake is counted for the TLS groups only.
    assert!(
        metric(&f, HANDSHAKES, &["upstream=\"h2\""]) >= 1.0,
        "{}",
        f.gw.metrics()
    );
    assert_eq!(metric(&f, HANDSHAKES, &["upstream=\"h2c\""]), 0.0, "{}", f.gw.metrics());
}

/// 100 KiB of numbered ASCII lines.
fn big_body() -> String {
    let mut body = String::new();
    let mut i = 0;
    while body.len() < 100 * 1024 {
        body.push_str(&format!("line {i:06} of the request body abcdefghijklmnopqrstuvwxyz\n"));
        i += 1;
    }
    body.truncate(100 * 1024);
    body
}

#[test]
fn http1_and_http2_clients_get_through_an_http2_origin_with_bodies() {
    let (nginx, f, _origin) = h2_bed();
    let body = big_body();
    let file = f.pki.write("body.txt", &body);
    let data = format!("@{}", file.display());
    for group in ["h2", "h2c"] {
        for client in ["--http1.1", "--http2"] {
            let what = format!("{group} with curl {client}");
            let want = if client == "--http2" { "2" } else { "1.1" };
            let r = fetch(&f, &[client], &format!("/{group}/get"));
            assert_eq!(
                (r.status.as_str(), r.version.as_str()),
                ("200", want),
                "{what}: {}",
                r.body
            );
            let seen = saw(&r.body);
            assert_eq!(seen["server"], "HTTP/2.0", "{what}: {seen:?}");
            assert_eq!(seen["http_host"], format!("localhost:{}", f.https), "{what}: {seen:?}");

            let r = fetch(&f, &[client, "--data-binary", &data], &format!("/{group}/echo"));
            let head = &r.body[..r.body.len().min(300)];
            assert_eq!(r.status, "200", "{what}: {head}\n{}", f.gw.log());
            assert_eq!(r.version, want, "{what}: the client spoke another version");
            let (first, echoed) = r.body.split_once('\n').expect("echo's first line");
            assert!(first.starts_with("server=HTTP/2.0 "), "{what}: {first}");
            assert_eq!(echoed.len(), body.len(), "{what}: {first}");
            assert!(echoed == body, "{what}: the origin got another body");
        }
    }
    assert_eq!(metric(&f, ERRORS, &[]), 0.0, "{}", f.gw.metrics());
    let posts = nginx.access_log().lines().filter(|l| l.contains("\"POST ")).count();
    assert_eq!(posts, 4, "{}", nginx.access_log());
}

#[test]
fn a_burst_of_first_requests_opens_one_http2_connection() {
    let (nginx, f, _origin) = h2_bed();
    // 16 requests at once over one HTTP/2 connection to the gateway, before any origin
    // connection exists: they all wait for the one being opened.
    let ca = f.pki.ca_file();
    let mut args = vec!["-sS", "--max-time", "10", "--cacert", ca.to_str().unwrap()];
    args.extend(["--http2", "--parallel", "--parallel-max", "16", "-w", "%{http_code}\n"]);
    let urls: Vec<String> = (0..16).map(|i| f.url(&format!("/h2/get?{i}"))).collect();
    for url in &urls {
        args.extend(["-o", "/dev/null", url.as_str()]);
    }
    let out = tlsgate_testkit::run("curl", &args, b"", Duration::ZERO, Duration::from_secs(15));
    assert_eq!(out.stdout.matches("200").count(), 16, "{}", out.all());
    let gets = nginx.access_log().lines().filter(|l| l.contains("/h2/get?")).count();
    assert_eq!(gets, 16, "{}", nginx.access_log());
    assert_eq!(
        metric(&f, HANDSHAKES, &["upstream=\"h2\""]),
        1.0,
        "one TLS connection to the origin:\n{}",
        f.gw.metrics()
    );
}

#[test]
fn an_http2_origin_closing_its_connections_every_few_requests_loses_none() {
    // nginx ends each HTTP/2 connection after 3 streams (GOAWAY, then close): later requests
    // find the shared connection going away and open the next one; streams the origin did not
    // take (above GOAWAY's last stream) go again.
    let origin = OriginPki::new(&["127.0.0.1"]);
    let h2c = free_port();
    let nginx = Nginx::start(&origin.server(h2c, "http2", "keepalive_requests 3;"), &[h2c]);
    let mut routes = upstream_route(None, "/h2c/", "h2c");
    routes.push_str(&upstream(
        "h2c",
        &[format!("127.0.0.1:{h2c}")],
        "protocol = \"http2\"\n",
    ));
    let f = common::start("", &routes);
    let ca = f.pki.ca_file();
    for parallel in ["1", "4"] {
        let mut args = vec!["-sS", "--max-time", "20", "--cacert", ca.to_str().unwrap()];
        args.extend([
            "--http2",
            "--parallel",
            "--parallel-max",
            parallel,
            "-w",
            "%{http_code}\n",
        ]);
        let urls: Vec<String> = (0..30).map(|i| f.url(&format!("/h2c/get?p{parallel}-{i}"))).collect();
        for url in &urls {
            args.extend(["-o", "/dev/null", url.as_str()]);
        }
        let out = tlsgate_testkit::run("curl", &args, b"", Duration::ZERO, Duration::from_secs(25));
        assert_eq!(
            out.stdout.matches("200").count(),
            30,
            "parallel {parallel}: {}\n{}",
            out.all(),
            f.gw.log()
        );
        let log = nginx.access_log();
        let gets = log
            .lines()
            .filter(|l| l.contains(&format!("/h2c/get?p{parallel}-")))
            .count();
        assert_eq!(gets, 30, "parallel {parallel}: {log}");
    }
    // A connection that closes in order is no failure of the server: nothing was skipped.
    assert!(!f.gw.log().contains("server skipped"), "{}", f.gw.log());
    assert_eq!(metric(&f, ERRORS, &["upstream=\"h2c\""]), 0.0, "{}", f.gw.metrics());
}

#[test]
fn an_http2_origin_refusing_the_client_certificate_is_a_tls_failure() {
    // TLS 1.3: the refusal (an alert) comes after the handshake, on the first read of the
    // HTTP/2 connection; it must still count as a TLS failure, not an HTTP/2 protocol error.
    let origin = OriginPki::new(&["127.0.0.1"]);
    let s13 = DemandingServer::start_with(&origin, "-tls1_3", &["-alpn", "h2"]);
    let mut routes = upstream_route(None, "/anon13h2/", "anon13h2");
    routes.push_str(&upstream(
        "anon13h2",
        &[https(s13.port)],
        &format!("protocol = \"http2\"\n{}", origin.tls("")),
    ));
    let f = common::start("", &routes);
    assert_502(&f, "/anon13h2/x");
    assert!(
        metric(&f, ERRORS, &["upstream=\"anon13h2\"", "kind=\"tls\""]) >= 1.0,
        "{}\n{}",
        f.gw.metrics(),
        f.gw.log()
    );
}
