//! Issue 18: an idle HTTP/1.1 keep-alive connection gives back hyper's per-connection state
//! after 250 ms without a request (`downstream::park`), and everything a client can do with such a
//! connection still works: the next request, a request head split across the pause, the start of
//! a pipelined request that was already buffered, the idle timeout, the drain. One test reads the
//! gateway's resident memory with a few hundred idle connections held (docs/BENCHMARKS.md has
//! the full measurement, `scripts/idle-memory.sh`). An idle HTTP/2 connection holds no codec
//! buffers either (the patched `h2`, third_party/README.md): another test reads the memory with
//! a few hundred of them held.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Longer than the release delay (250 ms), with a margin.
const PAST_RELEASE: Duration = Duration::from_millis(900);
const GET: &str = "GET /hello HTTP/1.1\r\nHost: localhost\r\n\r\n";

#[test]
fn an_idle_connection_serves_its_next_requests_after_the_release() {
    let f = common::start("", "");
    let mut s = f.tls_session();
    let first = s.get("/hello", "Hello, world!");
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    for round in 0..2 {
        std::thread::sleep(PAST_RELEASE);
        let next = s.get("/hello", "Hello, world!");
        assert!(
            next.starts_with("HTTP/1.1 200") && next.ends_with("Hello, world!"),
            "request {} after an idle pause, same connection: {next:?}",
            round + 2
        );
    }
}

#[test]
fn a_request_head_split_across_a_pause_is_served() {
    let f = common::start("", "");
    let mut s = f.tls_session();
    s.get("/hello", "Hello, world!");
    std::thread::sleep(PAST_RELEASE);
    s.send("GET /hello HTTP/1.1\r\nHo");
    std::thread::sleep(PAST_RELEASE);
    s.send("st: localhost\r\n\r\n");
    let got = s.read_until("Hello, world!", Duration::from_secs(10));
    assert!(got.starts_with("HTTP/1.1 200"), "{got:?}");
}

#[test]
fn the_buffered_start_of_a_pipelined_request_survives_the_release() {
    let f = common::start("", "");
    let mut s = f.tls_session();
    // One whole request and the first bytes of the next in one write: the gateway answers the
    // first and keeps the rest while the connection waits (and is released).
    s.send(&format!("{GET}GET /hel"));
    let first = s.read_until("Hello, world!", Duration::from_secs(10));
    assert!(first.starts_with("HTTP/1.1 200"), "{first:?}");
    std::thread::sleep(PAST_RELEASE);
    s.send("lo HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let second = s.read_until("Hello, world!", Duration::from_secs(10));
    assert!(
        second.starts_with("HTTP/1.1 200") && second.ends_with("Hello, world!"),
        "the pipelined request's start was lost: {second:?}"
    );
}

#[test]
fn a_released_connection_still_times_out_when_idle() {
    let f = common::start_edited("", "", |t| {
        t.replace("[server]\n", "[server]\nclient_idle_timeout = \"2s\"\n")
    });
    let mut s = f.tls_session();
    s.get("/hello", "Hello, world!");
    let started = Instant::now();
    // The gateway closes the connection (s_client exits): the read ends without the needle.
    let rest = s.read_until("never sent", Duration::from_secs(8));
    let waited = started.elapsed();
    assert!(rest.is_empty(), "{rest:?}");
    assert!(
        waited >= Duration::from_millis(1500) && waited < Duration::from_secs(7),
        "closed after {waited:?} (idle timeout 2 s)"
    );
    assert_eq!(f.gw.metric("tlsgate_client_timeouts_total", &["reason=\"idle\""]), 1.0);
}

#[test]
fn a_released_connection_does_not_hold_up_the_drain() {
    let mut f = common::start_edited("", "", |t| {
        t.replace("[server]\n", "[server]\ndrain_timeout = \"20s\"\n")
    });
    let mut s = f.tls_session();
    s.get("/hello", "Hello, world!");
    std::thread::sleep(PAST_RELEASE);
    let started = Instant::now();
    f.gw.signal("TERM");
    let code = f.gw.wait_exit(Duration::from_secs(15));
    assert_eq!(code, Some(0), "the gateway did not drain: {}", f.gw.log());
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "an idle connection held the drain for {:?}",
        started.elapsed()
    );
    // The client saw its connection end.
    let rest = s.read_until("never sent", Duration::from_secs(3));
    assert!(rest.is_empty(), "{rest:?}");
}

#[test]
fn a_client_closing_a_released_connection_gets_close_notify_back() {
    let f = common::start("", "");
    let mut tls = open_answered(&f, 1).pop().unwrap();
    std::thread::sleep(PAST_RELEASE);
    assert_eq!(
        f.gw.metric("tlsgate_idle_released_connections", &["protocol=\"http1\""]),
        1.0
    );
    tls.shutdown().expect("close_notify sent");
    // BoringSSL's read ends quietly either way; the shutdown state tells whether the gateway's
    // close_notify arrived (as it does for an idle connection that was never released).
    let mut buf = [0u8; 16];
    let n = tls.read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0);
    assert!(
        tls.get_shutdown().contains(boring::ssl::ShutdownState::RECEIVED),
        "the gateway closed without close_notify"
    );
    // The connection is no longer counted as waiting released once it ended.
    let deadline = Instant::now() + Duration::from_secs(5);
    while f.gw.metric("tlsgate_idle_released_connections", &[]) != 0.0 {
        assert!(Instant::now() < deadline, "still counted as released after the close");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// VmRSS of a process, KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// `n` TLS connections to the fixture offering `alpn` (wire format), each handed to `first`.
fn open_each(
    f: &common::Fixture,
    n: usize,
    alpn: &[u8],
    first: impl Fn(&mut boring::ssl::SslStream<TcpStream>),
) -> Vec<boring::ssl::SslStream<TcpStream>> {
    let mut b = boring::ssl::SslConnector::builder(boring::ssl::SslMethod::tls()).unwrap();
    b.set_ca_file(f.pki.ca_file()).unwrap();
    b.set_alpn_protos(alpn).unwrap();
    let connector = b.build();
    (0..n)
        .map(|_| {
            let tcp = TcpStream::connect(f.connect()).unwrap();
            let mut tls = connector.connect("localhost", tcp).expect("handshake");
            first(&mut tls);
            tls
        })
        .collect()
}

/// `n` TLS connections (HTTP/1.1), each answered once.
fn open_answered(f: &common::Fixture, n: usize) -> Vec<boring::ssl::SslStream<TcpStream>> {
    open_each(f, n, b"\x08http/1.1", ask)
}

/// One GET /hello on `tls`, read to the end of its 13-byte body.
fn ask(tls: &mut boring::ssl::SslStream<TcpStream>) {
    tls.write_all(GET.as_bytes()).unwrap();
    tls.get_ref().set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(b"Hello, world!") {
        let n = tls.read(&mut buf).expect("response");
        assert!(n > 0, "closed before the response: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
}

#[test]
fn idle_http11_connections_cost_the_gateway_a_few_kib_each() {
    let f = common::start_edited("", "", |t| t.replace("workers = 2\n", "workers = 1\n"));
    let pid = f.gw.pid();
    // Warm up (lazily built state, allocator pages), then the baseline.
    drop(open_answered(&f, 20));
    std::thread::sleep(Duration::from_millis(500));
    let before = rss_kib(pid);
    let n = 400;
    let mut held = open_answered(&f, n);
    std::thread::sleep(PAST_RELEASE * 2);
    let per = (rss_kib(pid).saturating_sub(before)) as f64 / n as f64;
    // Every held connection waits released (the gateway's own count), and the memory shows it.
    let released =
        f.gw.metric("tlsgate_idle_released_connections", &["protocol=\"http1\""]);
    assert_eq!(released, n as f64, "connections waiting released, of {n} idle");
    // Before the release it was 27 KiB (hyper's two 8 KiB buffers, its dispatcher and timer, a
    // task sized for HTTP/2); now 9-10 KiB with 2000 held (docs/BENCHMARKS.md), 13-16 KiB at
    // this small count (the allocator's pages and what the handshakes left cached). 20 KiB
    // fails if the release stops giving the buffers back.
    assert!(per < 20.0, "{per:.1} KiB per idle HTTP/1.1 connection");
    // Every connection was kept: each answers again.
    for tls in &mut held {
        ask(tls);
    }
}

/// `n` TLS connections speaking HTTP/2 (frames written by hand), each answered once.
fn open_answered_h2(f: &common::Fixture, n: usize) -> Vec<boring::ssl::SslStream<TcpStream>> {
    open_each(f, n, b"\x02h2", |tls| {
        assert_eq!(tls.ssl().selected_alpn_protocol(), Some(&b"h2"[..]));
        tls.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
            .unwrap();
        ask_h2(tls, 1);
    })
}

/// GET /hello on stream `id`, read to the end of its 13-byte body; the server's SETTINGS are
/// acknowledged on the way.
fn ask_h2(tls: &mut boring::ssl::SslStream<TcpStream>, id: u32) {
    // :method GET, :scheme https, :path /hello, :authority localhost (no indexing).
    let block = [&[0x82, 0x87, 0x04, 6][..], b"/hello", &[0x01, 9], b"localhost"].concat();
    let mut frame = vec![0, 0, block.len() as u8, 1, 0x05];
    frame.extend_from_slice(&id.to_be_bytes());
    frame.extend_from_slice(&block);
    tls.write_all(&frame).unwrap();
    tls.get_ref().set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut body = Vec::new();
    loop {
        let mut head = [0u8; 9];
        tls.read_exact(&mut head).expect("a frame");
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let mut payload = vec![0u8; len];
        tls.read_exact(&mut payload).expect("a frame's payload");
        let (kind, flags) = (head[3], head[4]);
        if kind == 4 && flags & 1 == 0 {
            tls.write_all(&[0, 0, 0, 4, 1, 0, 0, 0, 0]).unwrap();
        }
        if head[5..9] != id.to_be_bytes() {
            continue;
        }
        assert!(kind == 0 || kind == 1, "frame type {kind} on the request's stream");
        if kind == 0 {
            body.extend_from_slice(&payload);
        }
        if flags & 1 == 1 {
            break;
        }
    }
    assert_eq!(body, b"Hello, world!");
}

#[test]
fn idle_http2_connections_give_back_their_codec_buffers() {
    let f = common::start_edited("", "", |t| t.replace("workers = 2\n", "workers = 1\n"));
    let pid = f.gw.pid();
    drop(open_answered_h2(&f, 20));
    std::thread::sleep(Duration::from_millis(500));
    let before = rss_kib(pid);
    let n = 400;
    let mut held = open_answered_h2(&f, n);
    // Released once the connection's watchdog has seen it idle at two checks 1 s apart.
    std::thread::sleep(Duration::from_secs(3));
    let per = (rss_kib(pid).saturating_sub(before)) as f64 / n as f64;
    let released =
        f.gw.metric("tlsgate_idle_released_connections", &["protocol=\"http2\""]);
    assert_eq!(released, n as f64, "HTTP/2 connections waiting released, of {n} idle");
    eprintln!("{per:.1} KiB per idle HTTP/2 connection");
    // At this count: 31.4 KiB with the h2 codec's 16 KiB write and 8 KiB read buffers kept
    // (unpatched h2, quiet machine), 17.3 KiB without them then, 11-13 KiB since session 17 alone
    // on the machine; once 24.2 KiB in a CI run with another gateway test beside it (more
    // handshakes overlap on a loaded machine, and the allocator keeps more of that peak). The
    // bound sits between the loaded patched reading and the quiet unpatched one;
    // docs/BENCHMARKS.md has the 2,000-connection run.
    assert!(
        per < 28.0,
        "{per:.1} KiB per idle HTTP/2 connection: codec buffers kept?"
    );
    for tls in &mut held {
        ask_h2(tls, 3);
    }
}

/// An idle HTTP/2 connection's release also forgets the HPACK encoder's dynamic table
/// (third_party/h2), and the next response tells the client's decoder so with size updates to 0
/// and back: curl (nghttp2's HPACK decoder, independent of `h2`) keeps one connection across
/// two releases, and every response decodes to the same fields, indexed ones included.
#[test]
fn curl_keeps_its_http2_connection_and_headers_across_idle_releases() {
    let routes = r#"
[[site.route]]
path_prefix = "/indexed"
fixed_response = { body = "indexed" }
response_headers = { set = { "x-origin-etag" = "\"5f2b-1a9c\"", "x-served-by" = "edge-7" } }
"#;
    let f = common::start_edited("", routes, |t| t.replace("workers = 2\n", "workers = 1\n"));
    let url = format!("https://localhost:{}/indexed", f.https);
    let gw = &f.gw;
    let (out, released_seen) = std::thread::scope(|s| {
        // Three transfers 3 s apart (one per 3 s), serially on one connection.
        let curl = s.spawn(|| {
            f.curl(
                &[
                    "--http2",
                    "--rate",
                    "20/m",
                    "-o",
                    "/dev/null",
                    "-o",
                    "/dev/null",
                    "-o",
                    "/dev/null",
                    "-w",
                    "%{http_code} %{num_connects} %header{x-origin-etag} %header{x-served-by} %header{content-type}\n",
                    &url,
                    &url,
                ],
                "/indexed",
            )
        });
        // The connection is released in the pauses (1-2 s after each response).
        let mut seen = false;
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until && !curl.is_finished() {
            if gw.metric("tlsgate_idle_released_connections", &["protocol=\"http2\""]) == 1.0 {
                seen = true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        (curl.join().unwrap(), seen)
    });
    assert_eq!(out.status, Some(0), "curl failed: {}", out.all());
    let lines: Vec<&str> = out.stdout.lines().collect();
    let fields = "\"5f2b-1a9c\" edge-7 text/plain";
    assert_eq!(
        lines,
        [
            format!("200 1 {fields}"),
            format!("200 0 {fields}"),
            format!("200 0 {fields}")
        ],
        "one connection, the same fields each time"
    );
    assert!(released_seen, "the connection was never released between the requests");
}

/// RSS of a one-worker gateway (`memory_release_interval` set to `interval`) before, at the peak
/// of and 3 s after a burst of `n` answered connections that all closed again: (before, peak,
/// after), KiB.
fn rss_around_a_burst(interval: &str, n: usize) -> (u64, u64, u64) {
    let f = common::start_edited("", "", |t| {
        t.replace(
            "workers = 2\n",
            &format!("workers = 1\nmemory_release_interval = \"{interval}\"\n"),
        )
    });
    let pid = f.gw.pid();
    drop(open_answered(&f, 20));
    std::thread::sleep(Duration::from_millis(500));
    let before = rss_kib(pid);
    let held = open_answered(&f, n);
    let peak = rss_kib(pid);
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(10);
    while f.gw.metric("tlsgate_open_connections", &[]) != 0.0 {
        assert!(
            Instant::now() < deadline,
            "connections still open after the client closed them"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // mimalloc's purge delay (1 s), one release interval (1 s), and a margin.
    std::thread::sleep(Duration::from_secs(3));
    (before, peak, rss_kib(pid))
}

/// Issue 18: a worker that went quiet hands back what its connections freed. mimalloc returns
/// freed pages to the OS only when the thread allocates again, so after a burst (or once idle
/// connections released their buffers) the memory stayed resident while nothing happened; the
/// workers' `memory_release_interval` runs the allocator's collection on their own threads.
/// The same burst against `memory_release_interval = "0s"` shows what stays without it.
#[test]
fn a_quiet_worker_hands_freed_memory_back_to_the_os() {
    let n = 300;
    let kept = |(before, peak, after): (u64, u64, u64)| {
        assert!(peak > before + 1024, "the burst grew RSS by {} KiB only", peak - before);
        after.saturating_sub(before) as f64 / (peak - before) as f64
    };
    let with = rss_around_a_burst("1s", n);
    let without = rss_around_a_burst("0s", n);
    let (kept_with, kept_without) = (kept(with), kept(without));
    eprintln!(
        "kept after the burst: {kept_with:.2} released ({with:?}), {kept_without:.2} never released ({without:?})"
    );
    assert!(
        kept_without > 0.6,
        "without the release the allocator should keep most of the burst's memory: {kept_without:.2} ({without:?})"
    );
    assert!(
        kept_with < 0.35,
        "a quiet worker kept {kept_with:.2} of the burst's memory ({with:?}; without the release: {kept_without:.2})"
    );
}

/// Go's HTTP/2 client (tests/go/h2client), built once per test binary.
fn h2client() -> &'static std::path::Path {
    static BUILT: std::sync::OnceLock<tlsgate_testkit::go::GoProgram> = std::sync::OnceLock::new();
    &BUILT
        .get_or_init(|| {
            let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/go/h2client");
            tlsgate_testkit::go::build(&src, "h2client")
        })
        .path
}

/// An idle HTTP/2 connection also asks the client to empty the HPACK table the client's
/// requests filled on the gateway (SETTINGS_HEADER_TABLE_SIZE 0; the table is dropped at the
/// ACK), and announces 4,096 again with the next request. Go's client (its own HPACK encoder,
/// which indexes a browser's fields) keeps its connection through that: the request after the
/// pause goes out after the ACK, the table comes back after it, and the next requests index and
/// then refer to their fields again (a header block of a few bytes), all answered 200.
#[test]
fn go_s_http2_client_empties_and_refills_the_gateway_s_decoder_table() {
    let f = common::start_edited("", "", |t| t.replace("workers = 2\n", "workers = 1\n"));
    let url = format!("https://localhost:{}/hello", f.https);
    let out = std::process::Command::new(h2client())
        .args([
            "-ca",
            f.pki.ca_file().to_str().unwrap(),
            "-url",
            &url,
            "-n",
            "4",
            // The release comes 1-2 s after a response at the second of two idle checks 1 s
            // apart: after the first, surely; between the others (0.2 s apart), never.
            "-pauses",
            "4s,200ms,200ms",
        ])
        .env("GODEBUG", "http2debug=2")
        .output()
        .expect("run h2client");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "h2client failed: {stdout}\n{stderr}");
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        vec!["200 HTTP/2.0 13"; 4],
        "{stderr}"
    );
    // The frames Go read and wrote, in order: the settings changes and its request blocks.
    let events: Vec<String> = stderr
        .lines()
        .filter_map(|l| {
            if l.contains("read SETTINGS len=6, settings: HEADER_TABLE_SIZE=") {
                Some(format!("table {}", l.rsplit('=').next()?))
            } else if l.contains("wrote HEADERS") {
                let stream = l.split("stream=").nth(1)?.split(' ').next()?;
                let len: usize = l.rsplit("len=").next()?.trim().parse().ok()?;
                Some(format!(
                    "request {stream} {}",
                    if len < 40 { "indexed" } else { "literal" }
                ))
            } else {
                None
            }
        })
        .collect();
    assert_eq!(
        events,
        [
            "request 1 literal",
            "table 0",
            "request 3 literal",
            "table 4096",
            "request 5 literal",
            "request 7 indexed",
        ],
        "{stderr}"
    );
}
