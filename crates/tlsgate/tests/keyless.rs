//! Keyless TLS end to end, with real processes: key servers (`tlsgate keyserver`), gateways whose
//! certificates have no key file, and `openssl`/`curl` clients.

mod common;
mod keyless_env;

use keyless_env::*;
use std::io::{Read, Write};
use std::time::Duration;
use tlsgate_keyless::codec::{decode_response, encode_request, ErrorCode, Request, Response};
use tlsgate_testkit::{free_port, require, TestPki};

fn ok_handshake(out: &tlsgate_testkit::Output) -> bool {
    out.stdout.contains("Verify return code: 0 (ok)") && out.stdout.contains("Hello, world!")
}

#[test]
fn gateway_without_key_files_serves_ecdsa_and_rsa_over_tls12_and_tls13() {
    require("openssl");
    require("curl");
    let pki = TestPki::new();
    let keys = site_keys(&pki);
    let ks = start_keyserver(&pki, &keyserver_files(&pki), free_port(), &[&keys], "");
    let client = client_cert(&pki, "gateway", "gateway-1");
    let gw = start_gateway(&pki, &client, &[ks.addr()], "");
    let cases: &[(&[&str], &str)] = &[
        (&["-tls1_3", "-sigalgs", "ECDSA+SHA256"], "ECDSA"),
        (&["-tls1_3", "-sigalgs", "rsa_pss_rsae_sha256"], "RSA-PSS"),
        (&["-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-GCM-SHA256"], "ECDSA"),
        (
            &[
                "-tls1_2",
                "-cipher",
                "ECDHE-RSA-AES128-GCM-SHA256",
                "-sigalgs",
                "RSA+SHA256",
            ],
            "RSA",
        ),
        (
            &[
                "-tls1_2",
                "-cipher",
                "ECDHE-RSA-AES256-GCM-SHA384",
                "-sigalgs",
                "rsa_pss_rsae_sha384",
            ],
            "RSA-PSS",
        ),
    ];
    for (args, sig) in cases {
        let out = gw.s_client("localhost", args);
        assert!(ok_handshake(&out), "{args:?}:\n{}", out.all());
        let want = format!("Peer signature type: {sig}");
        assert!(
            out.stdout.lines().any(|l| l.trim() == want),
            "{args:?}: expected {want}:\n{}",
            out.all()
        );
    }
    for args in [
        &["--tlsv1.3"][..],
        &["--tls-max", "1.2"],
        &["--tls-max", "1.2", "--ciphers", "ECDHE-RSA-AES128-GCM-SHA256"],
    ] {
        let out = gw.curl(args);
        assert_eq!(out.stdout, "Hello, world!", "curl {args:?}: {}", out.all());
    }
    assert!(
        ks.ops() >= 8.0,
        "every handshake signed by the key server:\n{}",
        ks.proc.metrics()
    );
    let m = ks.proc.metrics();
    assert!(
        m.contains("algorithm=\"rsa_pss_rsae_sha256\"") && m.contains("algorithm=\"ecdsa_secp256r1_sha256\""),
        "{m}"
    );
}

/// A gateway's first handshakes, while its key-server connections are still coming up (here
/// they take 600 ms, through a slow path), wait for them instead of failing with "no key server
/// is reachable"; a pool whose only server refuses connections still fails at once.
#[test]
fn first_handshakes_wait_for_key_server_connections_that_are_still_coming_up() {
    require("openssl");
    require("curl");
    let pki = TestPki::new();
    let keys = site_keys(&pki);
    let ks = start_keyserver(&pki, &keyserver_files(&pki), free_port(), &[&keys], "");
    let slow = tlsgate_testkit::RoundRobin::start_slow(vec![ks.addr().parse().unwrap()], Duration::from_millis(600));
    let client = client_cert(&pki, "gateway", "gateway-1");
    let gw = start_gateway(&pki, &client, &[format!("127.0.0.1:{}", slow.port)], "");
    let started = std::time::Instant::now();
    let out = gw.curl(&["--tlsv1.3"]);
    assert_eq!(
        out.stdout,
        "Hello, world!",
        "the first request failed:\n{}\n{}",
        out.all(),
        gw.gw.log()
    );
    assert!(
        gw.gw.metric("tlsgate_keyless_startup_waits_total", &[]) >= 1.0,
        "it did not wait ({:?}):\n{}",
        started.elapsed(),
        gw.gw.metrics()
    );

    // Nothing listens on `dead`: its first attempt fails at once, and so do handshakes.
    let dead = format!("127.0.0.1:{}", free_port());
    let gw = start_gateway(&pki, &client, &[dead], "");
    let started = std::time::Instant::now();
    let out = gw.s_client("localhost", &["-tls1_3"]);
    assert!(!ok_handshake(&out), "{}", out.all());
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "a dead pool must not hold handshakes for the connect timeout: {:?}",
        started.elapsed()
    );
}

#[test]
fn killing_one_of_two_key_servers_during_a_burst_fails_no_handshake() {
    require("curl");
    let pki = TestPki::new();
    let keys = site_keys(&pki);
    let files = keyserver_files(&pki);
    let (port_a, port_b) = (free_port(), free_port());
    let a = start_keyserver(&pki, &files, port_a, &[&keys], "");
    let b = start_keyserver(&pki, &files, port_b, &[&keys], "");
    let client = client_cert(&pki, "gateway", "gateway-1");
    let gw = start_gateway(&pki, &client, &[a.addr(), b.addr()], "");
    assert!(
        common::wait_until(Duration::from_secs(10), || {
            let _ = gw.curl(&[]);
            a.ops() > 0.0 && b.ops() > 0.0
        }),
        "both key servers take traffic"
    );

    let url = format!("https://localhost:{}/hello", gw.https);
    let burst = |n: usize| {
        (0..3)
            .map(|_| {
                let (ca, url) = (gw.ca.clone(), url.clone());
                std::thread::spawn(move || {
                    (0..n)
                        .map(|_| common::curl_url(&ca, &[], &url))
                        .filter(|o| o.stdout != "Hello, world!")
                        .map(|o| o.all())
                        .collect::<Vec<_>>()
                })
            })
            .collect::<Vec<_>>()
    };
    let load = burst(25);
    std::thread::sleep(Duration::from_millis(300));
    a.proc.signal("KILL");
    assert!(
        load.iter().any(|t| !t.is_finished()),
        "the burst was still running when the key server died"
    );
    let failures: Vec<String> = load.into_iter().flat_map(|t| t.join().unwrap()).collect();
    assert!(
        failures.is_empty(),
        "handshakes failed while a key server died: {failures:?}\n{}",
        gw.gw.log()
    );

    // Back on the same port: it gets traffic again.
    let a2 = start_keyserver(&pki, &files, port_a, &[&keys], "");
    assert!(
        common::wait_until(Duration::from_secs(15), || {
            let _ = gw.curl(&[]);
            a2.ops() > 0.0
        }),
        "the restarted key server never got traffic\n{}",
        gw.gw.log()
    );
    drop(a);
}

#[test]
fn untrusted_or_unlisted_gateways_are_refused_before_any_request() {
    require("openssl");
    let pki = TestPki::new();
    let keys = site_keys(&pki);
    let files = keyserver_files(&pki);
    let ks = start_keyserver(&pki, &files, free_port(), &[&keys], "");
    let stranger_ca = TestPki::new();
    let stranger = client_cert(&stranger_ca, "stranger", "gateway-1");
    let gw = start_gateway(&pki, &stranger, &[ks.addr()], "");
    let out = gw.s_client("localhost", &[]);
    assert!(
        !ok_handshake(&out),
        "a handshake succeeded without a trusted key server:\n{}",
        out.all()
    );
    assert!(
        common::wait_until(Duration::from_secs(10), || ks
            .proc
            .log()
            .contains("gateway refused: TLS handshake failed")),
        "{}",
        ks.proc.log()
    );
    assert!(
        ks.proc
            .metric("tlsgate_keyserver_errors_total", &["kind=\"handshake\""])
            >= 1.0
    );
    assert_eq!(
        ks.proc.metric("tlsgate_keyserver_pings_total", &[]),
        0.0,
        "no request was read"
    );
    assert_eq!(ks.ops(), 0.0);

    // Trusted CA but not on the allow-list.
    let listed = start_keyserver(
        &pki,
        &files,
        free_port(),
        &[&keys],
        "allowed_clients = [\"cn:gateway-2\"]",
    );
    let client = client_cert(&pki, "gateway", "gateway-1");
    let gw = start_gateway(&pki, &client, &[listed.addr()], "");
    let out = gw.s_client("localhost", &[]);
    assert!(!ok_handshake(&out), "{}", out.all());
    assert!(
        listed.proc.log().contains("not in allowed_clients"),
        "{}",
        listed.proc.log()
    );
    assert_eq!(
        listed.proc.metric("tlsgate_keyserver_pings_total", &[]),
        0.0,
        "no request was read"
    );
}

#[test]
fn unknown_key_fails_that_handshake_cleanly_and_nothing_else() {
    require("openssl");
    let pki = TestPki::new();
    let keys = site_keys(&pki);
    let ks = start_keyserver(&pki, &keyserver_files(&pki), free_port(), &[&keys], "");
    let client = client_cert(&pki, "gateway", "gateway-1");
    // A second site whose key is on no key server.
    let (other, _key_not_deployed) = pki.leaf("other", &["other.test"], tlsgate_tls::pki::KeyKind::EcdsaP256);
    let routes = format!(
        "\n[[site]]\nname = \"other\"\nserver_names = [\"other.test\"]\n{}\n[[site.route]]\nfixed_response = {{ body = \"other\" }}\n",
        keyless_cert_block(&other, &[ks.addr()])
    );
    let gw = start_gateway(&pki, &client, &[ks.addr()], &routes);
    let bad = gw.s_client("other.test", &[]);
    assert!(
        !bad.stdout.contains("\r\n\r\nother"),
        "no answer without a signature:\n{}",
        bad.all()
    );
    assert!(
        bad.stdout.contains("Cipher is (NONE)"),
        "that handshake fails:\n{}",
        bad.all()
    );
    let good = gw.s_client("localhost", &[]);
    assert!(ok_handshake(&good), "{}", good.all());
    let log = gw.gw.log();
    assert!(
        log.contains("keyless signature failed") && log.contains("unknown_key"),
        "{log}"
    );
    assert!(
        ks.proc
            .metric("tlsgate_keyserver_errors_total", &["kind=\"unknown_key\""])
            >= 1.0
    );
    assert!(ks.proc.log().contains("unknown key id"), "{}", ks.proc.log());
}

/// A raw mutual-TLS connection to a key server.
fn raw(pki: &TestPki, client: &(std::path::PathBuf, std::path::PathBuf), port: u16) -> impl Read + Write {
    let connector = tlsgate_keyless::tls_setup::connector(&client.0, &client.1, &pki.ca_file()).unwrap();
    let tcp = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    connector.connect("127.0.0.1", tcp).expect("mTLS connect")
}

fn read_response(s: &mut impl Read) -> Option<(u32, Response)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Ok(Some((id, r, _))) = decode_response(&buf) {
            return Some((id, r));
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

fn frame(id: u32, req: &Request) -> Vec<u8> {
    let mut out = Vec::new();
    encode_request(&mut out, id, req).unwrap();
    out
}

#[test]
fn a_frame_that_stalls_half_way_is_closed_after_the_frame_timeout() {
    let pki = TestPki::new();
    let keys = site_keys(&pki);
    let ks = start_keyserver(
        &pki,
        &keyserver_files(&pki),
        free_port(),
        &[&keys],
        "frame_timeout = \"1s\"",
    );
    let client = client_cert(&pki, "gateway", "gateway-1");
    let mut idle = raw(&pki, &client, ks.port);
    let mut stalled = raw(&pki, &client, ks.port);
    let f = frame(4, &Request::Ping(vec![1; 50]));
    stalled.write_all(&f[..f.len() / 2]).unwrap();
    let started = std::time::Instant::now();
    assert_eq!(read_response(&mut stalled), None, "the stalled connection is closed");
    let waited = started.elapsed();
    assert!(
        waited >= std::time::Duration::from_millis(800) && waited < std::time::Duration::from_secs(8),
        "{waited:?}"
    );
    assert_eq!(
        ks.proc.metric("tlsgate_keyserver_errors_total", &["kind=\"stalled\""]),
        1.0
    );
    // An idle connection (no frame started) is not affected.
    idle.write_all(&frame(6, &Request::Ping(vec![]))).unwrap();
    assert_eq!(read_response(&mut idle), Some((6, Response::Pong(vec![]))));
}

#[test]
fn malformed_oversized_and_truncated_frames_get_an_error_or_a_close() {
    let pki = TestPki::new();
    let keys = site_keys(&pki);
    let ks = start_keyserver(&pki, &keyserver_files(&pki), free_port(), &[&keys], "");
    let client = client_cert(&pki, "gateway", "gateway-1");

    // Bad body: answered `malformed` with its id, and the connection goes on.
    let mut s = raw(&pki, &client, ks.port);
    s.write_all(&[1, 0, 0, 4, 0, 0, 0, 7, 0x01, 0, 1, 0x77]).unwrap();
    assert_eq!(read_response(&mut s), Some((7, Response::Error(ErrorCode::Malformed))));
    s.write_all(&frame(8, &Request::Ping(b"hi".to_vec()))).unwrap();
    assert_eq!(read_response(&mut s), Some((8, Response::Pong(b"hi".to_vec()))));
    // Typed errors for unknown keys and unsupported algorithms.
    let sign = |key_id, algorithm| Request::Sign {
        key_id,
        algorithm,
        payload: b"x".to_vec(),
    };
    s.write_all(&frame(9, &sign([0; 32], 0x0403))).unwrap();
    assert_eq!(read_response(&mut s), Some((9, Response::Error(ErrorCode::UnknownKey))));

    // Oversized: an error, then the connection is closed.
    let mut s = raw(&pki, &client, ks.port);
    s.write_all(&[1, 0, 0xFF, 0xFF, 0, 0, 0, 3]).unwrap();
    assert_eq!(read_response(&mut s), Some((3, Response::Error(ErrorCode::Malformed))));
    assert_eq!(read_response(&mut s), None, "closed after an oversized frame");

    // Garbage (bad version): error and close.
    let mut s = raw(&pki, &client, ks.port);
    s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    assert!(matches!(
        read_response(&mut s),
        Some((_, Response::Error(ErrorCode::Malformed)))
    ));
    assert_eq!(read_response(&mut s), None);

    // Truncated: half a frame, then the gateway goes away; nothing is answered.
    let mut s = raw(&pki, &client, ks.port);
    let f = frame(4, &Request::Ping(vec![1; 50]));
    s.write_all(&f[..f.len() / 2]).unwrap();
    drop(s);

    // The server still serves everyone.
    let mut s = raw(&pki, &client, ks.port);
    s.write_all(&frame(5, &Request::Ping(vec![]))).unwrap();
    assert_eq!(read_response(&mut s), Some((5, Response::Pong(vec![]))));
    assert_eq!(
        ks.proc.metric("tlsgate_keyserver_errors_total", &["kind=\"stalled\""]),
        0.0
    );
    assert!(
        ks.proc
            .metric("tlsgate_keyserver_errors_total", &["kind=\"oversized\""])
            >= 1.0
    );
    assert!(
        ks.proc
            .metric("tlsgate_keyserver_errors_total", &["kind=\"malformed\""])
            >= 1.0
    );
}
