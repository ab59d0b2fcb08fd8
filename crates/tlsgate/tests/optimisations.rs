//! Issue 3's remaining techniques, each checked with a real client: TCP Fast Open (curl sending
//! its ClientHello in the SYN), RFC 8879 certificate compression (a BoringSSL client that offers
//! brotli or zlib), the HTTP/2 SETTINGS the gateway announces (nghttp), and the strict server
//! cipher-order switch (openssl s_client preferring ChaCha20).

mod common;

use boring::ssl::{SslConnector, SslMethod, SslVersion};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use tlsgate_testkit::require;
use tlsgate_tls::cert_compression::{Brotli, Zlib, STATS};

const TFO_SYSCTL: &str = "/proc/sys/net/ipv4/tcp_fastopen";

/// Serialises the tests that need TCP Fast Open: each sets the sysctl and puts it back.
static TFO_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn read_tfo() -> u32 {
    let text = std::fs::read_to_string(TFO_SYSCTL).unwrap_or_else(|e| panic!("{TFO_SYSCTL}: {e}"));
    text.trim()
        .parse()
        .unwrap_or_else(|e| panic!("{TFO_SYSCTL} = {text:?}: {e}"))
}

/// Lets clients send and servers accept SYN data in this network namespace (bits 1 and 2, i.e.
/// 3) for as long as it lives, then restores the value it found (also when the test panics), so
/// no later test or run depends on what this one did. Needs root; without it the test fails.
struct TfoEnabled {
    before: u32,
    _lock: std::sync::MutexGuard<'static, ()>,
}

impl TfoEnabled {
    fn new() -> Self {
        let lock = TFO_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let before = read_tfo();
        std::fs::write(TFO_SYSCTL, (before | 3).to_string())
            .unwrap_or_else(|e| panic!("cannot set {TFO_SYSCTL} to 3 (needs root in this network namespace): {e}"));
        Self { before, _lock: lock }
    }
}

impl Drop for TfoEnabled {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(TFO_SYSCTL, self.before.to_string()) {
            eprintln!("cannot restore {TFO_SYSCTL} to {}: {e}", self.before);
        }
    }
}

#[test]
fn tfo_sysctl_is_restored_after_use() {
    let before = read_tfo();
    {
        let _tfo = TfoEnabled::new();
        assert_eq!(read_tfo() & 3, 3);
    }
    assert_eq!(read_tfo(), before);
}

#[test]
fn tcp_fast_open_connections_are_counted() {
    require("curl");
    let _tfo = TfoEnabled::new();
    let f = common::start("", "");
    let listener = format!("listener=\"127.0.0.1:{}\"", f.https);
    assert!(
        !f.gw.log().contains("does not enable server TFO"),
        "no sysctl warning expected:\n{}",
        f.gw.log()
    );
    // The first connection only fetches a cookie (SYN without data); the following ones carry the
    // ClientHello in the SYN. Each curl run is a new connection.
    for _ in 0..4 {
        let out = f.curl(&["--tcp-fastopen"], "/hello");
        assert_eq!(out.stdout, "Hello, world!", "{}", out.all());
    }
    let tfo = f.gw.metric("tlsgate_tfo_accepted_total", &[&listener, "site=\"main\""]);
    assert!(
        tfo >= 2.0,
        "expected TFO connections counted, got {tfo}:\n{}",
        f.gw.metrics()
    );
    // A client that does not use TFO is not counted.
    let before = f.gw.metric("tlsgate_tfo_accepted_total", &[]);
    let out = f.curl(&[], "/hello");
    assert_eq!(out.stdout, "Hello, world!", "{}", out.all());
    assert_eq!(f.gw.metric("tlsgate_tfo_accepted_total", &[]), before);
}

#[test]
fn tcp_fast_open_can_be_switched_off() {
    require("curl");
    let _tfo = TfoEnabled::new();
    let f = common::start_edited("", "", |t| {
        t.replace("[[listener]]\n", "[[listener]]\ntcp_fastopen = 0\n")
    });
    for _ in 0..3 {
        let out = f.curl(&["--tcp-fastopen"], "/hello");
        assert_eq!(out.stdout, "Hello, world!", "{}", out.all());
    }
    assert_eq!(
        f.gw.metric("tlsgate_tfo_accepted_total", &[]),
        0.0,
        "{}",
        f.gw.metrics()
    );
}

/// One full TLS 1.3 handshake with a BoringSSL client that offers `C` for certificate
/// compression; returns the cipher name to show the handshake completed.
fn handshake_offering<C: boring::ssl::CertificateCompressor + Default>(f: &common::Fixture) -> String {
    let mut b = SslConnector::builder(SslMethod::tls()).unwrap();
    b.set_ca_file(f.pki.ca_file()).unwrap();
    b.set_min_proto_version(Some(SslVersion::TLS1_3)).unwrap();
    b.add_certificate_compression_algorithm(C::default()).unwrap();
    let connector = b.build();
    let tcp = std::net::TcpStream::connect(f.connect()).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let tls = connector
        .connect("localhost", tcp)
        .expect("handshake with a compressed certificate");
    tls.ssl()
        .current_cipher()
        .map(|c| c.name().to_string())
        .unwrap_or_default()
}

fn state(f: &common::Fixture, name: &str) -> f64 {
    f.gw.metric("tlsgate_state", &[&format!("name=\"{name}\"")])
}

#[test]
fn certificates_are_sent_compressed_and_compressed_once() {
    let f = common::start("", "");
    let decompressed = STATS.decompressed.load(Relaxed);
    for _ in 0..3 {
        assert!(!handshake_offering::<Brotli>(&f).is_empty());
    }
    // The client really received a CompressedCertificate: its decompressor ran once per handshake.
    assert_eq!(STATS.decompressed.load(Relaxed) - decompressed, 3);
    assert_eq!(
        state(&f, "cert_compression_brotli_handshakes_total"),
        3.0,
        "{}",
        f.gw.metrics()
    );
    // One compression for the ECDSA certificate, reused by the other two handshakes.
    assert_eq!(state(&f, "cert_compressions_computed_total"), 1.0, "{}", f.gw.metrics());
    let saved = state(&f, "cert_compression_bytes_saved_total");
    assert!(saved > 0.0, "bytes saved: {saved}");

    assert!(!handshake_offering::<Zlib>(&f).is_empty());
    assert_eq!(STATS.decompressed.load(Relaxed) - decompressed, 4);
    assert_eq!(state(&f, "cert_compression_zlib_handshakes_total"), 1.0);
    assert_eq!(state(&f, "cert_compressions_computed_total"), 2.0, "zlib once");

    // A client that does not offer compression (OpenSSL 3.0) gets the plain Certificate.
    let out = f.s_client(&["-tls1_3", "-servername", "localhost"], "");
    assert!(out.stdout.contains("Verify return code: 0"), "{}", out.all());
    assert_eq!(state(&f, "cert_compression_brotli_handshakes_total"), 3.0);
    assert_eq!(state(&f, "cert_compression_zlib_handshakes_total"), 1.0);
}

#[test]
fn certificate_compression_can_be_switched_off() {
    let f = common::start("[tls]\ncert_compression = false\n", "");
    let decompressed = STATS.decompressed.load(Relaxed);
    assert!(!handshake_offering::<Brotli>(&f).is_empty());
    // Other tests in this process may decompress concurrently, so only the gateway's count is exact.
    assert_eq!(state(&f, "cert_compression_brotli_handshakes_total"), 0.0);
    let _ = decompressed;
}

/// nghttp's verbose trace of one request: the frames the gateway sent.
fn nghttp(f: &common::Fixture) -> String {
    require("nghttp");
    let url = f.url("/hello");
    let out = tlsgate_testkit::run("nghttp", &["-nv", &url], b"", Duration::ZERO, Duration::from_secs(15));
    assert_eq!(out.status, Some(0), "{}", out.all());
    out.stdout
}

#[test]
fn http2_settings_default_and_configured() {
    let f = common::start("", "");
    let trace = nghttp(&f);
    for want in [
        "[SETTINGS_MAX_CONCURRENT_STREAMS(0x03):128]",
        "[SETTINGS_INITIAL_WINDOW_SIZE(0x04):262144]",
    ] {
        assert!(trace.contains(want), "{want} missing:\n{trace}");
    }
    // Connection window 1 MiB: a WINDOW_UPDATE on stream 0 of 1048576 - 65535.
    assert!(trace.contains("window_size_increment=983041"), "{trace}");
    drop(f);

    let top = "[http2]\nmax_concurrent_streams = 37\ninitial_stream_window = 100000\n\
               initial_connection_window = 2097152\nmax_frame_size = 32768\nheader_table_size = 8192\n\
               keep_alive_interval = \"30s\"\n";
    let f = common::start(top, "");
    let trace = nghttp(&f);
    for want in [
        "[SETTINGS_MAX_CONCURRENT_STREAMS(0x03):37]",
        "[SETTINGS_INITIAL_WINDOW_SIZE(0x04):100000]",
        "[SETTINGS_MAX_FRAME_SIZE(0x05):32768]",
        "[SETTINGS_HEADER_TABLE_SIZE(0x01):8192]",
        "window_size_increment=2031617",
    ] {
        assert!(trace.contains(want), "{want} missing:\n{trace}");
    }
    assert!(
        trace.contains("Hello, world!") || trace.contains("recv DATA"),
        "{trace}"
    );
}

/// The cipher `openssl s_client` negotiated (`New, TLSv1.x, Cipher is NAME`).
fn cipher(out: &tlsgate_testkit::Output) -> String {
    common::session_lines(&out.stdout)
        .first()
        .and_then(|l| l.rsplit_once("Cipher is ").map(|(_, c)| c.trim().to_string()))
        .unwrap_or_else(|| panic!("no session line:\n{}", out.all()))
}

const CHACHA_FIRST_13: &str = "TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384";
const CHACHA_FIRST_12: &str = "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-GCM-SHA256";

#[test]
fn a_client_preferring_chacha20_gets_it_unless_the_order_is_strict_and_everyone_else_aes_128_gcm() {
    require("openssl");
    let f = common::start("", "");
    let tls13 = f.s_client(&["-tls1_3", "-ciphersuites", CHACHA_FIRST_13], "");
    assert_eq!(cipher(&tls13), "TLS_CHACHA20_POLY1305_SHA256", "{}", tls13.all());
    let tls12 = f.s_client(&["-tls1_2", "-cipher", CHACHA_FIRST_12], "");
    assert_eq!(cipher(&tls12), "ECDHE-ECDSA-CHACHA20-POLY1305", "{}", tls12.all());
    // OpenSSL's own order (AES-256-GCM, ChaCha20, AES-128-GCM): AES-128-GCM, the cheaper key
    // schedule, over either version; AES-256-GCM still for a client that offers nothing else.
    let aes = f.s_client(&["-tls1_2"], "");
    assert_eq!(cipher(&aes), "ECDHE-ECDSA-AES128-GCM-SHA256", "{}", aes.all());
    let aes = f.s_client(&["-tls1_3"], "");
    assert_eq!(cipher(&aes), "TLS_AES_128_GCM_SHA256", "{}", aes.all());
    let only = f.s_client(&["-tls1_3", "-ciphersuites", "TLS_AES_256_GCM_SHA384"], "");
    assert_eq!(cipher(&only), "TLS_AES_256_GCM_SHA384", "{}", only.all());
    drop(f);

    let f = common::start("[tls]\nstrict_cipher_order = true\n", "");
    let tls13 = f.s_client(&["-tls1_3", "-ciphersuites", CHACHA_FIRST_13], "");
    assert_eq!(cipher(&tls13), "TLS_AES_128_GCM_SHA256", "{}", tls13.all());
    let tls12 = f.s_client(&["-tls1_2", "-cipher", CHACHA_FIRST_12], "");
    assert_eq!(cipher(&tls12), "ECDHE-ECDSA-AES128-GCM-SHA256", "{}", tls12.all());
    // ChaCha20 still works for a client that offers nothing else.
    let only = f.s_client(&["-tls1_3", "-ciphersuites", "TLS_CHACHA20_POLY1305_SHA256"], "");
    assert_eq!(cipher(&only), "TLS_CHACHA20_POLY1305_SHA256", "{}", only.all());
    assert!(f.gw.metric("tlsgate_handshakes_total", &["cipher=\"TLS_AES_128_GCM_SHA256\""]) >= 1.0);
}

/// Starts the gateway with `edit`ed test configuration in a fresh network namespace, which has
/// the kernel's default `net.ipv4.tcp_fastopen = 1` (client only) whatever this one has; returns
/// its output after three seconds.
fn serve_in_fresh_netns(edit: impl FnOnce(String) -> String) -> String {
    require("unshare");
    let pki = tlsgate_testkit::TestPki::new();
    let text = edit(common::config_text(&pki, 8443, 9090, "", ""));
    let config = pki.write("tlsgate.toml", &text);
    let script = format!(
        "ip link set lo up && cat {TFO_SYSCTL} && exec timeout 3 {} serve --config {}",
        common::binary().display(),
        config.display()
    );
    let out = tlsgate_testkit::run(
        "unshare",
        &["-n", "sh", "-c", &script],
        b"",
        Duration::ZERO,
        Duration::from_secs(20),
    );
    assert!(
        out.stdout.starts_with('1'),
        "a fresh network namespace should start with the kernel default tcp_fastopen = 1 (needs root):\n{}",
        out.all()
    );
    let all = out.all();
    assert!(all.contains("tlsgate serving"), "{all}");
    all
}

#[test]
fn default_tcp_fast_open_on_a_stock_kernel_is_one_info_line() {
    let all = serve_in_fresh_netns(|t| t);
    assert!(
        !all.contains("WARN"),
        "a default must not warn on a stock kernel:\n{all}"
    );
    let info: Vec<&str> = all
        .lines()
        .filter(|l| l.contains("TCP Fast Open is on when available"))
        .collect();
    assert_eq!(info.len(), 1, "{all}");
    assert!(info[0].contains("INFO"), "{all}");
}

#[test]
fn tcp_fast_open_asked_for_without_the_server_sysctl_warns_at_startup() {
    let all = serve_in_fresh_netns(|t| t.replace("[[listener]]\n", "[[listener]]\ntcp_fastopen = 256\n"));
    assert!(
        all.contains("tcp_fastopen is configured but sysctl net.ipv4.tcp_fastopen = 1 does not enable server TFO"),
        "{all}"
    );
    assert!(!all.contains("TCP Fast Open is on when available"), "{all}");
}
