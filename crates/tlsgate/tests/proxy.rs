//! Behaviour 2: reverse proxying to upstream groups: routing by host and path prefix, load
//! balancing (round robin, least connections), failing servers skipped, 502/504, streaming
//! request and response bodies, forwarding headers, HTTP/1.1 and HTTP/2 clients.

mod common;

use common::{upstream, upstream_route};
use std::time::Duration;
use tlsgate_testkit::{free_port, Origin};

/// The `origin=NAME` lines of echoed bodies, in order.
fn origins(body: &str) -> Vec<String> {
    body.lines()
        .filter_map(|l| l.strip_prefix("origin="))
        .map(str::to_string)
        .collect()
}

/// The value of a response header in `curl -i` output (case-insensitive name), first one.
fn header(out: &str, name: &str) -> Option<String> {
    out.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_string())
    })
}

/// One curl run (keep-alive, or as `extra` says) for `n` paths `{prefix}0`.. `{prefix}{n-1}`
/// and then `{prefix}{last}`.
fn curl_many(f: &common::Fixture, prefix: &str, n: usize, last: &str, extra: &[&str]) -> tlsgate_testkit::Output {
    let urls: Vec<String> = (0..n).map(|i| f.url(&format!("{prefix}{i}"))).collect();
    let mut args: Vec<&str> = urls.iter().map(String::as_str).collect();
    args.extend_from_slice(extra);
    f.curl(&args, &format!("{prefix}{last}"))
}

/// Statuses written by `-w "status=%{http_code}\n"`, one per transfer.
fn statuses(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|l| l.strip_prefix("status="))
        .map(str::to_string)
        .collect()
}

#[test]
fn routes_by_host_and_path_prefix_to_upstream_groups() {
    let (alpha, beta) = (Origin::start("alpha"), Origin::start("beta"));
    let routes = [
        upstream_route(None, "/app/", "a"),
        upstream_route(None, "/api/", "b"),
        upstream_route(Some("other.test"), "/", "b"),
        upstream("a", &[alpha.addr()], ""),
        upstream("b", &[beta.addr()], ""),
    ]
    .concat();
    let f = common::start("", &routes);

    let out = f.curl(&["-i"], "/app/page?x=1");
    assert_eq!(
        header(&out.stdout, "x-origin").as_deref(),
        Some("alpha"),
        "{}",
        out.all()
    );
    assert_eq!(origins(&out.stdout), ["alpha"], "{}", out.all());
    assert!(out.stdout.contains("path=/app/page?x=1\n"), "{}", out.all());

    let out = f.curl(&["-i"], "/api/v1/items");
    assert_eq!(
        header(&out.stdout, "x-origin").as_deref(),
        Some("beta"),
        "{}",
        out.all()
    );
    assert_eq!(origins(&out.stdout), ["beta"], "{}", out.all());

    // A route for a Host wins over the path routes, for any path.
    let out = f.curl(&["-i", "-H", "Host: other.test"], "/app/page");
    assert_eq!(
        header(&out.stdout, "x-origin").as_deref(),
        Some("beta"),
        "{}",
        out.all()
    );
    let out = f.curl(&["-i", "-H", "Host: other.test"], "/anything");
    assert_eq!(origins(&out.stdout), ["beta"], "{}", out.all());

    // The fixed route still answers, and a path no route matches is a 404 from the gateway.
    assert_eq!(f.curl(&[], "/hello").stdout, "Hello, world!");
    let out = f.curl(&["-w", "\nstatus=%{http_code}\n"], "/nothing/here");
    assert_eq!(statuses(&out.stdout), ["404"], "{}", out.all());
    assert!(out.stdout.contains("no route"), "{}", out.all());
    assert!(origins(&out.stdout).is_empty(), "{}", out.all());

    assert_eq!(alpha.count(), 1, "alpha got only /app/page");
    assert_eq!(beta.count(), 3, "beta got /api/ and both other.test requests");
    assert!(f.gw.metric("tlsgate_requests_total", &["status=\"404\""]) >= 1.0);
}

#[test]
fn round_robin_spreads_requests_over_every_server() {
    let servers: Vec<Origin> = ["one", "two", "three"].iter().map(|n| Origin::start(n)).collect();
    let addrs: Vec<String> = servers.iter().map(Origin::addr).collect();
    let routes = [
        upstream_route(None, "/", "pool"),
        upstream("pool", &addrs, "balance = \"round_robin\""),
    ]
    .concat();
    let f = common::start("", &routes);
    let urls: Vec<String> = (0..8).map(|i| f.url(&format!("/rr/{i}"))).collect();
    let mut args: Vec<&str> = urls.iter().map(String::as_str).collect();
    args.push("--http1.1");
    let out = f.curl(&args, "/rr/8");
    let seen = origins(&out.stdout);
    assert_eq!(seen.len(), 9, "{}", out.all());
    for (i, o) in seen.iter().enumerate().skip(3) {
        assert_eq!(o, &seen[i - 3], "round robin repeats every 3 requests: {seen:?}");
    }
    for s in &servers {
        assert_eq!(s.count(), 3, "every server gets a third of the requests: {seen:?}");
    }
}

#[test]
fn least_conn_avoids_the_server_with_a_slow_request_in_flight() {
    let (a, b) = (Origin::start("a"), Origin::start("b"));
    let routes = [
        upstream_route(None, "/", "pool"),
        upstream("pool", &[a.addr(), b.addr()], "balance = \"least_conn\""),
    ]
    .concat();
    let f = common::start("", &routes);
    let (ca, url) = (f.pki.ca_file(), f.url("/slow?ms=1500"));
    let slow = std::thread::spawn(move || common::curl_url(&ca, &[], &url));
    assert!(
        common::wait_until(Duration::from_secs(5), || a.count() + b.count() == 1),
        "the slow request never reached an origin"
    );
    let (busy, idle) = if a.count() == 1 { (&a, "b") } else { (&b, "a") };

    let urls: Vec<String> = (0..3).map(|i| f.url(&format!("/quick/{i}"))).collect();
    let mut args: Vec<&str> = urls.iter().map(String::as_str).collect();
    args.push("--http1.1");
    let out = f.curl(&args, "/quick/3");
    assert_eq!(
        origins(&out.stdout),
        [idle; 4],
        "every request made while the other server is busy goes to the idle one:\n{}",
        out.all()
    );
    assert_eq!(busy.count(), 1);
    let slow = slow.join().expect("slow curl thread");
    assert_eq!(slow.stdout, "slow done\n", "{}", slow.all());
}

#[test]
fn a_dead_server_is_skipped_for_fail_timeout_after_its_first_failure() {
    let live = Origin::start("live");
    let dead = format!("127.0.0.1:{}", free_port());
    let routes = [
        upstream_route(None, "/", "pool"),
        upstream_route(None, "/brief/", "brief"),
        // The dead server comes first, so round robin tries it on the very first request.
        upstream("pool", &[dead.clone(), live.addr()], "fail_timeout = \"60s\""),
        upstream("brief", &[dead.clone(), live.addr()], "fail_timeout = \"1s\""),
    ]
    .concat();
    let f = common::start("", &routes);
    let get = |prefix: &str, n: usize| {
        let out = curl_many(
            &f,
            prefix,
            n,
            &n.to_string(),
            &["--http1.1", "-w", "status=%{http_code}\n"],
        );
        // A bodiless request that could not connect is retried once on the other server: no 502.
        assert_eq!(statuses(&out.stdout), vec!["200"; n + 1], "{}", out.all());
        assert_eq!(origins(&out.stdout), vec!["live"; n + 1], "{}", out.all());
    };
    let connect_errors = |group: &str| {
        f.gw.metric(
            "tlsgate_upstream_errors_total",
            &[&format!("upstream=\"{group}\""), "kind=\"connect\""],
        )
    };
    let up = |group: &str, server: &str| {
        f.gw.metric(
            "tlsgate_upstream_server_up",
            &[&format!("upstream=\"{group}\""), &format!("server=\"{server}\"")],
        )
    };
    assert_eq!(up("pool", &dead), 1.0, "in rotation until it fails: {}", f.gw.metrics());
    get("/item/", 5);
    assert_eq!(live.count(), 6);
    // One connect failure, then the dead server is not tried again within fail_timeout.
    assert_eq!(connect_errors("pool"), 1.0, "{}", f.gw.metrics());
    assert_eq!(up("pool", &dead), 0.0, "{}", f.gw.metrics());
    assert_eq!(up("pool", &live.addr()), 1.0, "{}", f.gw.metrics());

    // Once fail_timeout has passed the server gets another chance (and fails again).
    get("/brief/", 1);
    assert_eq!(connect_errors("brief"), 1.0, "{}", f.gw.metrics());
    std::thread::sleep(Duration::from_millis(1300));
    get("/brief/", 1);
    assert_eq!(connect_errors("brief"), 2.0, "{}", f.gw.metrics());
    assert_eq!(connect_errors("pool"), 1.0, "{}", f.gw.metrics());
}

/// A gateway whose every path goes to the group `gone` of two servers nobody listens on.
fn dead_group() -> (Vec<String>, common::Fixture) {
    let servers = vec![
        format!("127.0.0.1:{}", free_port()),
        format!("127.0.0.1:{}", free_port()),
    ];
    let routes = [upstream_route(None, "/", "gone"), upstream("gone", &servers, "")].concat();
    (servers, common::start("", &routes))
}

#[test]
fn all_servers_dead_is_a_short_502() {
    let (_, f) = dead_group();
    let out = f.curl(&["-w", "\nstatus=%{http_code}\n"], "/x");
    assert_eq!(statuses(&out.stdout), ["502"], "{}", out.all());
    let body = out.stdout.split("\nstatus=").next().unwrap_or("");
    assert!(body.starts_with("502"), "{body:?}");
    assert!(body.len() < 200, "a short body, not a page: {body:?}");
    assert!(
        f.gw.metric(
            "tlsgate_upstream_errors_total",
            &["upstream=\"gone\"", "kind=\"connect\""]
        ) >= 1.0
    );
    assert!(f.gw.metric("tlsgate_requests_total", &["status=\"502\""]) >= 1.0);
}

/// Every request to a dead origin fails; the log says so once a second per server (each
/// server's first failure, which marks it down, always), with the count of the lines left out,
/// while the metrics count every failure.
#[test]
fn a_dead_origin_costs_a_log_line_a_second_not_one_per_request() {
    let (servers, f) = dead_group();
    let burst = |n: usize| {
        let out = curl_many(&f, "/dead/", n, "last", &["--http1.1", "-w", "status=%{http_code}\n"]);
        assert_eq!(statuses(&out.stdout), vec!["502"; n + 1], "{}", out.all());
    };
    let lines = |log: &str| {
        log.lines()
            .filter(|l| l.contains("upstream connect failed"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let started = std::time::Instant::now();
    burst(300);
    let secs = started.elapsed().as_secs() as usize;
    let errors = f.gw.metric(
        "tlsgate_upstream_errors_total",
        &["upstream=\"gone\"", "kind=\"connect\""],
    );
    assert!(errors >= 301.0, "every failure counted: {}", f.gw.metrics());
    let log = f.gw.log();
    let first = lines(&log);
    // Each server's first failure marks it down and is written; after that at most one line a
    // second per server.
    for server in &servers {
        assert!(
            first
                .iter()
                .any(|l| l.contains(&format!("server={server}")) && l.contains("server skipped for")),
            "{server}: {first:#?}"
        );
    }
    assert!(
        first.len() <= 2 * (secs + 2),
        "{} lines in {secs} s: {first:#?}",
        first.len()
    );

    // A second later the next failure's line says how many were left out.
    std::thread::sleep(Duration::from_millis(1100));
    burst(0);
    let log = f.gw.log();
    let left_out: u64 = lines(&log)[first.len()..]
        .iter()
        .filter_map(|l| {
            l.split("suppressed=")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum();
    let written = lines(&log).len() as u64;
    assert!(
        written + left_out >= 300,
        "{written} written + {left_out} left out, for {errors} failures: {log}"
    );
}

/// A TCP port whose listen queue is full and never accepted from: the kernel drops the SYNs
/// of new connections, so a connect hangs until its timeout (a blackholed origin).
struct Blackhole {
    addr: std::net::SocketAddr,
    _listener: socket2::Socket,
    _queued: Vec<socket2::Socket>,
}

impl Blackhole {
    fn new() -> Self {
        use socket2::{Domain, Socket, Type};
        let listener = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        let any: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
        listener.bind(&any.into()).unwrap();
        listener.listen(0).unwrap();
        let addr = listener.local_addr().unwrap().as_socket().unwrap();
        let queued = (0..3)
            .map(|_| {
                let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
                s.set_nonblocking(true).unwrap();
                let _ = s.connect(&addr.into());
                s
            })
            .collect();
        std::thread::sleep(Duration::from_millis(200));
        let probe = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(300));
        assert!(probe.is_err(), "the blackhole accepted a connection");
        Self {
            addr,
            _listener: listener,
            _queued: queued,
        }
    }
}

/// Every server down and slow to fail (a blackholed origin): once it is marked down, one
/// request at a time tries it again and the others get a fast 503, instead of each waiting out
/// its own connect timeout (a pile-up of connects, descriptors and waiting clients).
#[test]
fn requests_do_not_pile_up_on_a_blackholed_origin() {
    let hole = Blackhole::new();
    let routes = [
        upstream_route(None, "/", "hole"),
        upstream("hole", &[hole.addr.to_string()], "connect_timeout = \"1500ms\""),
    ]
    .concat();
    let f = common::start("", &routes);
    // The first request waits out the connect timeout (twice: the retry goes to the same
    // server) and marks the server down.
    let out = f.curl(&["-w", "\nstatus=%{http_code}\n"], "/first");
    assert_eq!(statuses(&out.stdout), ["502"], "{}", out.all());
    // 20 requests at once: one tries the server again, the rest are answered at once.
    let out = curl_many(
        &f,
        "/x/",
        19,
        "last",
        &[
            "--parallel",
            "--parallel-immediate",
            "--parallel-max",
            "20",
            "--http1.1",
            "-o",
            "/dev/null",
            "-w",
            "status=%{http_code} time=%{time_total}\n",
        ],
    );
    let answers: Vec<(String, f64)> = out
        .stdout
        .lines()
        .filter_map(|l| {
            let (status, time) = l.strip_prefix("status=")?.split_once(" time=")?;
            Some((status.to_string(), time.parse().ok()?))
        })
        .collect();
    assert_eq!(answers.len(), 20, "{}", out.all());
    let fast = answers.iter().filter(|(s, t)| s == "503" && *t < 1.0).count();
    let tried = answers.iter().filter(|(s, t)| s == "502" && *t >= 1.4).count();
    assert!(fast >= 19 && tried <= 1, "{answers:?}");
    assert!(
        f.gw.metric(
            "tlsgate_upstream_errors_total",
            &["upstream=\"hole\"", "kind=\"no_live_server\""]
        ) >= 19.0,
        "{}",
        f.gw.metrics()
    );
}

#[test]
fn upstream_header_timeout_is_a_504() {
    let origin = Origin::start("sleepy");
    let routes = [
        upstream_route(None, "/", "sleepy"),
        upstream("sleepy", &[origin.addr()], "header_timeout = \"500ms\""),
    ]
    .concat();
    let f = common::start("", &routes);
    let out = f.curl(&["-w", "\nstatus=%{http_code}\n"], "/slow?ms=2000");
    assert_eq!(statuses(&out.stdout), ["504"], "{}", out.all());
    assert!(out.stdout.starts_with("504"), "{}", out.all());
    assert!(
        f.gw.metric(
            "tlsgate_upstream_errors_total",
            &["upstream=\"sleepy\"", "kind=\"timeout\""]
        ) >= 1.0,
        "{}",
        f.gw.metrics()
    );
    // A fast request through the same group is fine.
    let out = f.curl(&[], "/slow?ms=10");
    assert_eq!(out.stdout, "slow done\n", "{}", out.all());
}

#[test]
fn request_bodies_stream_to_the_origin() {
    let origin = Origin::start("sink");
    let routes = [
        upstream_route(None, "/", "sink"),
        upstream("sink", &[origin.addr()], ""),
    ]
    .concat();
    let f = common::start("", &routes);
    let size = 6 * 1024 * 1024 + 123;
    let file = f.pki.path("upload.bin");
    std::fs::write(&file, vec![b'u'; size]).expect("write upload");
    let data = format!("@{}", file.display());
    for proto in ["--http1.1", "--http2"] {
        let out = f.curl(
            &[
                proto,
                "--data-binary",
                &data,
                "-H",
                "Content-Type: application/octet-stream",
            ],
            "/upload",
        );
        assert_eq!(out.stdout, format!("received={size}\n"), "{proto}: {}", out.all());
    }
}

/// Large HTTP/2 responses over TLS: each DATA frame's head is sealed as a record of its own and
/// held below TLS to leave with the payload's first record in one system call
/// (`downstream::records`, the vendored `h2`'s chained write). A held record lost, sent twice or
/// out of order breaks the TLS stream (curl fails), a byte lost shortens the body: three at once
/// on one connection, and one to a client reading slowly (writes that find the socket full with
/// a record held).
#[test]
fn large_http2_responses_arrive_whole_with_their_frame_heads_held() {
    let origin = Origin::start("bytes");
    let routes = [
        upstream_route(None, "/", "bytes"),
        upstream("bytes", &[origin.addr()], ""),
    ]
    .concat();
    let f = common::start("", &routes);
    let sizes = [3_000_000, 100_000, 1_234_567];
    let urls: Vec<String> = sizes[..2]
        .iter()
        .map(|n| format!("https://localhost:{}/bytes?n={n}", f.https))
        .collect();
    let mut args = vec![
        "--http2",
        "--parallel",
        "--parallel-immediate",
        "-w",
        "%{http_version} %{size_download}\n",
    ];
    args.extend(["-o", "/dev/null"].repeat(3));
    args.extend(urls.iter().map(String::as_str));
    let out = f.curl(&args, &format!("/bytes?n={}", sizes[2]));
    assert_eq!(out.status, Some(0), "{}", out.all());
    let mut got: Vec<&str> = out.stdout.lines().collect();
    got.sort_unstable();
    let mut want: Vec<String> = sizes.iter().map(|n| format!("2 {n}")).collect();
    want.sort_unstable();
    assert_eq!(got, want, "{}", out.all());
    let slow = f.curl(
        &[
            "--http2",
            "--limit-rate",
            "2M",
            "-o",
            "/dev/null",
            "-w",
            "%{http_version} %{size_download}",
        ],
        "/bytes?n=3000000",
    );
    assert_eq!(slow.stdout, "2 3000000", "{}", slow.all());
}

#[test]
fn response_bodies_stream_to_the_client() {
    let origin = Origin::start("streamer");
    let routes = [
        upstream_route(None, "/", "streamer"),
        upstream("streamer", &[origin.addr()], ""),
    ]
    .concat();
    let f = common::start("", &routes);
    for proto in ["--http1.1", "--http2"] {
        let out = f.curl(
            &[proto, "-N", "-w", "\ntimes=%{time_starttransfer} %{time_total}\n"],
            "/stream?chunks=5&ms=300",
        );
        for i in 0..5 {
            assert!(out.stdout.contains(&format!("chunk {i}\n")), "{proto}: {}", out.all());
        }
        let times = out
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("times="))
            .unwrap_or_else(|| panic!("{proto}: no times: {}", out.all()));
        let (first, total) = times.split_once(' ').expect("two times");
        let (first, total): (f64, f64) = (first.parse().unwrap(), total.parse().unwrap());
        // The origin takes about 1.5 s to send its five chunks; a proxy that buffered the body
        // would deliver the first byte only at the end.
        assert!(
            first < total - 0.5,
            "{proto}: first byte at {first}s, last at {total}s: the body was not streamed"
        );
    }
}

#[test]
fn forwarded_headers_carry_the_client_address_and_https() {
    let origin = Origin::start("echo");
    let routes = [
        upstream_route(None, "/", "echo"),
        upstream("echo", &[origin.addr()], ""),
    ]
    .concat();
    let f = common::start("", &routes);
    let out = f.curl(&[], "/echo");
    assert!(out.stdout.contains("\nx-forwarded-for: 127.0.0.1\n"), "{}", out.all());
    assert!(out.stdout.contains("\nx-forwarded-proto: https\n"), "{}", out.all());

    // Client-supplied forwarding headers are replaced (the client is no trusted proxy; see
    // tests/proxy_requests.rs for `trusted_proxies`, where they are extended).
    let out = f.curl(
        &["-H", "X-Forwarded-For: 203.0.113.7", "-H", "X-Forwarded-Proto: http"],
        "/echo",
    );
    assert!(out.stdout.contains("\nx-forwarded-for: 127.0.0.1\n"), "{}", out.all());
    assert!(!out.stdout.contains("203.0.113.7"), "{}", out.all());
    assert!(out.stdout.contains("\nx-forwarded-proto: https\n"), "{}", out.all());
    assert!(!out.stdout.contains("x-forwarded-proto: http\n"), "{}", out.all());
}

#[test]
fn http11_and_http2_clients_are_both_proxied() {
    let origin = Origin::start("echo");
    let routes = [
        upstream_route(None, "/", "echo"),
        upstream("echo", &[origin.addr()], ""),
    ]
    .concat();
    let f = common::start("", &routes);
    for (proto, version, label) in [("--http1.1", "1.1", "h1"), ("--http2", "2", "h2")] {
        let out = f.curl(&[proto, "-i", "-w", "\nversion=%{http_version}\n"], "/via?proto=x");
        assert!(
            out.stdout.contains(&format!("\nversion={version}\n")),
            "{proto}: {}",
            out.all()
        );
        assert_eq!(
            header(&out.stdout, "x-origin").as_deref(),
            Some("echo"),
            "{}",
            out.all()
        );
        assert!(
            out.stdout.contains("method=GET\npath=/via?proto=x\n"),
            "{proto}: {}",
            out.all()
        );
        // The origin sees a Host header even when the client sent only :authority (h2).
        assert!(
            out.stdout.contains(&format!("\nhost: localhost:{}\n", f.https)),
            "{proto}: {}",
            out.all()
        );
        assert!(
            f.gw.metric(
                "tlsgate_requests_total",
                &[&format!("protocol=\"{label}\""), "status=\"200\""]
            ) >= 1.0
        );
    }
    assert_eq!(origin.count(), 2);
}

/// A client that asks to close gets the whole answer and then the TLS close_notify: the end of
/// the last response is held with the close_notify for the close (`downstream::io`), for a body
/// held whole at the end, one larger than what is held, and one streamed in chunks; TLS 1.3,
/// whose tickets are held too, and TLS 1.2. A `read_to_end` that ends without a close_notify
/// (or a held byte lost) fails.
#[test]
fn a_client_that_asks_to_close_gets_the_whole_answer_and_then_close_notify() {
    use std::io::{Read, Write};
    let origin = Origin::start("bytes");
    let routes = [
        upstream_route(None, "/", "bytes"),
        upstream("bytes", &[origin.addr()], ""),
    ]
    .concat();
    let f = common::start("", &routes);
    for version in [boring::ssl::SslVersion::TLS1_3, boring::ssl::SslVersion::TLS1_2] {
        for (path, body) in [
            ("/bytes?n=13", "x".repeat(13)),
            ("/bytes?n=100000", "x".repeat(100_000)),
            (
                "/stream?chunks=3&ms=50",
                (0..3).map(|i| format!("chunk {i}\n")).collect(),
            ),
        ] {
            let tcp = std::net::TcpStream::connect(("127.0.0.1", f.https)).unwrap();
            tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut b = boring::ssl::SslConnector::builder(boring::ssl::SslMethod::tls()).unwrap();
            b.set_ca_file(f.pki.ca_file()).unwrap();
            b.set_min_proto_version(Some(version)).unwrap();
            b.set_max_proto_version(Some(version)).unwrap();
            let mut tls = b.build().connect("localhost", tcp).unwrap();
            tls.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes())
                .unwrap();
            let mut out = Vec::new();
            let read = tls.read_to_end(&mut out);
            let text = String::from_utf8_lossy(&out);
            assert!(
                read.is_ok(),
                "{version:?} {path}: no clean close_notify: {read:?}\n{text}"
            );
            assert!(text.starts_with("HTTP/1.1 200"), "{version:?} {path}: {text}");
            let (_, got) = text.split_once("\r\n\r\n").expect("a head");
            let got = if text.to_ascii_lowercase().contains("transfer-encoding: chunked") {
                dechunk(got)
            } else {
                got.to_string()
            };
            assert_eq!(got.len(), body.len(), "{version:?} {path}");
            assert_eq!(got, body, "{version:?} {path}");
        }
    }
}

/// The data of a chunked body (well-formed, from the gateway).
fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    loop {
        let (size, rest) = s.split_once("\r\n").expect("a chunk size");
        let n = usize::from_str_radix(size.trim(), 16).expect("hex size");
        if n == 0 {
            return out;
        }
        out.push_str(&rest[..n]);
        s = &rest[n + 2..];
    }
}
