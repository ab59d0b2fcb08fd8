//! `tlsgate bench` against a real `tlsgate serve`: every mode, and the resumption figures the
//! client reports checked against the handshake outcomes the server counted.

mod common;

use common::bench;

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn n(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("{key} missing in {v:#}"))
}

/// Server-side handshakes with `outcome`, optionally for one version.
fn server_handshakes(f: &common::Fixture, outcome: &str, version: Option<&str>) -> u64 {
    let o = format!("outcome=\"{outcome}\"");
    let v = version.map(|v| format!("version=\"{v}\""));
    let mut labels = vec![o.as_str()];
    labels.extend(v.as_deref());
    f.gw.metric("tlsgate_handshakes_total", &labels) as u64
}

/// Waits until the server has counted `total` handshakes (it counts when its side completes).
fn wait_for_server_handshakes(f: &common::Fixture, total: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while (f.gw.metric("tlsgate_handshakes_total", &[]) as u64) < total && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn keep_alive_counts_every_request_on_few_connections() {
    let f = common::start("", "");
    let (code, stdout, s) = bench(&f, &["-c", "4", "-t", "2", "-n", "300"]);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(s["mode"], "keep-alive");
    assert_eq!(n(&s, "errors_total"), 0, "{stdout}");
    assert_eq!(n(&s, "requests"), 300, "{stdout}");
    assert_eq!(n(&s, "handshakes"), 4, "one handshake per connection: {stdout}");
    assert_eq!(s["status"]["200"], 300);
    assert_eq!(n(&s, "bytes_received") % 300, 0, "identical responses");
    assert_eq!(s["latency_us"]["request"]["count"], 300);
    assert_eq!(s["latency_us"]["handshake"]["count"], 4);
    assert!(stdout.contains("Requests/sec:"), "{stdout}");
    assert_eq!(
        f.gw.metric("tlsgate_requests_total", &["status=\"200\"", "protocol=\"h1\""]),
        300.0
    );
    wait_for_server_handshakes(&f, 4);
    assert_eq!(server_handshakes(&f, "full", None), 4);
}

#[test]
fn new_conn_without_session_id_or_ticket_never_resumes() {
    let f = common::start("", "");
    let (code, stdout, s) = bench(
        &f,
        &["--new-conn", "--no-session-id", "--no-ticket", "-c", "3", "-n", "60"],
    );
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(n(&s, "errors_total"), 0, "{stdout}");
    assert_eq!((n(&s, "requests"), n(&s, "handshakes")), (60, 60), "{stdout}");
    assert_eq!(n(&s, "resumption_offered"), 0, "{stdout}");
    assert_eq!(n(&s, "resumed"), 0, "{stdout}");
    assert_eq!(n(&s, "full"), 60);
    wait_for_server_handshakes(&f, 60);
    assert_eq!(server_handshakes(&f, "full", None), 60, "{}", f.gw.metrics());
    for resumed in ["session_id", "ticket", "tls13_psk"] {
        assert_eq!(server_handshakes(&f, resumed, None), 0, "{resumed}: {}", f.gw.metrics());
    }
    assert_eq!(
        f.gw.metric("tlsgate_requests_total", &["status=\"200\""]),
        60.0,
        "one request per connection"
    );
}

#[test]
fn new_conn_tls12_resumes_and_agrees_with_the_server() {
    let f = common::start("", "");
    let (code, stdout, s) = bench(&f, &["--new-conn", "--tls", "1.2", "-c", "2", "-n", "100"]);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(n(&s, "errors_total"), 0, "{stdout}");
    assert_eq!(n(&s, "handshakes"), 100);
    assert!(s["resumed_fraction"].as_f64().unwrap() > 0.9, "{stdout}");
    assert!(
        s["negotiated"]
            .as_object()
            .unwrap()
            .keys()
            .all(|k| k.starts_with("TLSv1.2 ")),
        "{stdout}"
    );
    wait_for_server_handshakes(&f, 100);
    // Tickets are on on both sides, so the server resumes by ticket.
    assert_eq!(
        server_handshakes(&f, "full", Some("TLSv1.2")),
        n(&s, "full"),
        "{}",
        f.gw.metrics()
    );
    assert_eq!(
        server_handshakes(&f, "ticket", Some("TLSv1.2")),
        n(&s, "resumed"),
        "{}",
        f.gw.metrics()
    );
    assert_eq!(server_handshakes(&f, "session_id", None), 0);
    assert_eq!(server_handshakes(&f, "tls13_psk", None), 0);
}

#[test]
fn no_ticket_resumes_tls12_by_session_id_and_no_session_id_by_ticket() {
    let f = common::start("", "");
    let (_, stdout, s) = bench(
        &f,
        &["--new-conn", "--tls", "1.2", "--no-ticket", "-c", "2", "-n", "50"],
    );
    assert_eq!(n(&s, "errors_total"), 0, "{stdout}");
    assert!(s["resumed_fraction"].as_f64().unwrap() > 0.9, "{stdout}");
    wait_for_server_handshakes(&f, 50);
    assert_eq!(
        server_handshakes(&f, "session_id", None),
        n(&s, "resumed"),
        "{}",
        f.gw.metrics()
    );
    assert_eq!(server_handshakes(&f, "ticket", None), 0);
    assert_eq!(server_handshakes(&f, "full", None), n(&s, "full"));

    let (_, stdout, s2) = bench(
        &f,
        &[
            "--handshake-only",
            "--tls",
            "1.2",
            "--no-session-id",
            "-c",
            "2",
            "-n",
            "50",
        ],
    );
    assert_eq!(n(&s2, "errors_total"), 0, "{stdout}");
    assert!(s2["resumed_fraction"].as_f64().unwrap() > 0.9, "{stdout}");
    wait_for_server_handshakes(&f, 100);
    assert_eq!(
        server_handshakes(&f, "ticket", None),
        n(&s2, "resumed"),
        "{}",
        f.gw.metrics()
    );
    assert_eq!(
        server_handshakes(&f, "session_id", None),
        n(&s, "resumed"),
        "no new session-ID hits"
    );
}

#[test]
fn tls13_tickets_resume_with_new_conn_and_handshake_only() {
    let f = common::start("", "");
    let (_, stdout, s) = bench(&f, &["--new-conn", "--tls", "1.3", "-c", "2", "-n", "50"]);
    assert_eq!(n(&s, "errors_total"), 0, "{stdout}");
    assert!(s["resumed_fraction"].as_f64().unwrap() > 0.9, "{stdout}");
    wait_for_server_handshakes(&f, 50);
    assert_eq!(
        server_handshakes(&f, "tls13_psk", None),
        n(&s, "resumed"),
        "{}",
        f.gw.metrics()
    );

    // Handshake-only: a thread reads one response to receive a ticket, then only handshakes.
    let (_, stdout, s2) = bench(&f, &["--handshake-only", "--tls", "1.3", "-c", "1", "-n", "40"]);
    assert_eq!(n(&s2, "errors_total"), 0, "{stdout}");
    assert_eq!(n(&s2, "handshakes"), 40);
    assert_eq!(n(&s2, "requests"), 1, "one priming request: {stdout}");
    assert_eq!(n(&s2, "resumed"), 39, "{stdout}");
    wait_for_server_handshakes(&f, 90);
    assert_eq!(
        server_handshakes(&f, "tls13_psk", None),
        n(&s, "resumed") + 39,
        "{}",
        f.gw.metrics()
    );
}

#[test]
fn handshake_only_without_resumption_sends_no_request_and_applies_groups() {
    let f = common::start("", "");
    let (code, stdout, s) = bench(
        &f,
        &[
            "--handshake-only",
            "--no-ticket",
            "--no-session-id",
            "--tls",
            "1.3",
            "--groups",
            "X25519",
            "-c",
            "2",
            "-n",
            "40",
        ],
    );
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(n(&s, "errors_total"), 0, "{stdout}");
    assert_eq!((n(&s, "handshakes"), n(&s, "requests"), n(&s, "resumed")), (40, 0, 0));
    assert_eq!(s["negotiated"]["TLSv1.3 TLS_AES_128_GCM_SHA256 X25519"], 40, "{stdout}");
    wait_for_server_handshakes(&f, 40);
    assert_eq!(
        f.gw.metric(
            "tlsgate_handshakes_total",
            &["outcome=\"full\"", "version=\"TLSv1.3\"", "group=\"X25519\""]
        ),
        40.0,
        "{}",
        f.gw.metrics()
    );
    assert_eq!(f.gw.metric("tlsgate_requests_total", &[]), 0.0);
}

#[test]
fn cacert_verifies_and_a_wrong_ca_fails_every_handshake() {
    let f = common::start("", "");
    let ca = f.pki.ca_file();
    let (code, stdout, s) = bench(
        &f,
        &[
            "--cacert",
            ca.to_str().unwrap(),
            "--sni",
            "localhost",
            "-c",
            "1",
            "-n",
            "3",
        ],
    );
    assert_eq!(code, 0, "{stdout}");
    assert_eq!((n(&s, "requests"), n(&s, "errors_total")), (3, 0), "{stdout}");

    // Another CA: every handshake fails verification, nothing completes, exit status 1.
    let other = tlsgate_testkit::TestPki::new();
    let (code, stdout, s) = bench(
        &f,
        &[
            "--cacert",
            other.ca_file().to_str().unwrap(),
            "--sni",
            "localhost",
            "-c",
            "1",
            "-n",
            "3",
        ],
    );
    assert_eq!(code, 1, "{stdout}");
    assert_eq!(n(&s, "handshakes"), 0);
    assert_eq!(s["errors"]["handshake"], 3, "{stdout}");
}

#[test]
fn hold_keeps_idle_connections_open_then_reuses_them() {
    let f = common::start("", "");
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("hold.json");
    let url = format!("https://127.0.0.1:{}/hello", f.https);
    let mut child = Command::new(common::binary())
        .args(["bench", "--hold", "2s", "-c", "20", "-t", "2", "--json"])
        .arg(&json)
        .arg(&url)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tlsgate bench --hold");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    assert!(line.starts_with("bench: holding 20 connections (0 failed)"), "{line}");
    // While held, the gateway has all 20 open.
    assert_eq!(f.gw.metric("tlsgate_open_connections", &[]), 20.0, "{}", f.gw.metrics());
    assert!(child.wait().unwrap().success());
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(s["mode"], "hold");
    assert_eq!((n(&s, "held"), n(&s, "handshakes")), (20, 20));
    assert_eq!(
        n(&s, "requests"),
        40,
        "one request before and one after the idle period"
    );
    assert_eq!(n(&s, "errors_total"), 0);
}

/// Runs `tlsgate bench ARGS URL` expecting it to stop before running (no JSON summary);
/// returns (exit code, stderr).
fn bench_refused(f: &common::Fixture, args: &[&str]) -> (i32, String) {
    let out = Command::new(common::binary())
        .arg("bench")
        .args(args)
        .arg(format!("https://127.0.0.1:{}/hello", f.https))
        .output()
        .expect("run tlsgate bench");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn sigalgs_select_the_certificate_and_an_impossible_list_fails_cleanly() {
    let f = common::start("", "");
    // The site has an ECDSA P-256 and an RSA certificate: offering only RSA-PSS (or only ECDSA)
    // selects the matching one, in TLS 1.3 and TLS 1.2; the server's metrics agree.
    let full = [
        "--handshake-only",
        "--no-ticket",
        "--no-session-id",
        "-c",
        "2",
        "-n",
        "20",
    ];
    let mut total = 0;
    for (tls, sigalgs, cert) in [
        ("1.3", "rsa_pss_rsae_sha256", "rsa"),
        ("1.2", "rsa_pss_rsae_sha256", "rsa"),
        ("1.3", "ecdsa_secp256r1_sha256", "ecdsa_p256"),
        ("1.2", "rsa_pkcs1_sha256:rsa_pss_rsae_sha384", "rsa"),
    ] {
        let (code, stdout, s) = bench(&f, &[&full[..], &["--tls", tls, "--sigalgs", sigalgs]].concat());
        assert_eq!(code, 0, "{stdout}");
        assert_eq!((n(&s, "handshakes"), n(&s, "errors_total")), (20, 0), "{stdout}");
        let signed: Vec<(&String, &Value)> = s["sigalgs"].as_object().unwrap().iter().collect();
        assert_eq!(signed.len(), 1, "{tls} {sigalgs}: {stdout}");
        assert!(
            sigalgs.split(':').any(|a| a == signed[0].0),
            "{tls} {sigalgs}: {stdout}"
        );
        assert_eq!(signed[0].1, 20);
        assert!(
            stdout.contains(&format!("server signatures: {} 20", signed[0].0)),
            "{stdout}"
        );
        total += 20;
        wait_for_server_handshakes(&f, total);
        let labels = [format!("version=\"TLSv{tls}\""), format!("cert=\"{cert}\"")];
        let served = f.gw.metric(
            "tlsgate_handshakes_total",
            &labels.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        assert!(served >= 20.0, "{tls} {sigalgs}: {}", f.gw.metrics());
    }
    assert_eq!(f.gw.metric("tlsgate_handshakes_total", &["cert=\"rsa\""]), 60.0);
    assert_eq!(f.gw.metric("tlsgate_handshakes_total", &["cert=\"ecdsa_p256\""]), 20.0);

    // No certificate can sign with Ed25519: every handshake fails, the summary says why, exit 1.
    let (code, stdout, s) = bench(&f, &["--sigalgs", "ed25519", "-c", "1", "-n", "3"]);
    assert_eq!(code, 1, "{stdout}");
    assert_eq!((n(&s, "handshakes"), n(&s, "requests")), (0, 0), "{stdout}");
    assert_eq!(s["errors"]["handshake"], 3, "{stdout}");
    let first = s["first_error"]["handshake"].as_str().unwrap().to_ascii_lowercase();
    assert!(first.contains("handshake_failure"), "{first}");
    assert!(
        first.contains("the server accepted none of what was offered with --sigalgs ed25519"),
        "{first}"
    );

    // A name BoringSSL does not know stops the bench before it connects, naming the flag.
    let (code, stderr) = bench_refused(&f, &["--sigalgs", "ecdsa_secp256r1_sha256:rsa_pss_nope", "-n", "1"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("--sigalgs ecdsa_secp256r1_sha256:rsa_pss_nope: not a valid signature algorithm list"),
        "{stderr}"
    );
    wait_for_server_handshakes(&f, 80);
    assert_eq!(
        f.gw.metric("tlsgate_handshakes_total", &[]),
        80.0,
        "no handshake from the refused runs"
    );
}

#[test]
fn alpn_lists_are_offered_and_checked() {
    let f = common::start("", "");
    // --h2 with a browser-like list: the server picks h2 and every request is HTTP/2.
    let (code, stdout, s) = bench(&f, &["--h2", "--alpn", "h2,http/1.1", "-c", "2", "-n", "50"]);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(
        (s["protocol"].as_str(), n(&s, "requests")),
        (Some("h2"), 50),
        "{stdout}"
    );
    assert_eq!(
        f.gw.metric("tlsgate_requests_total", &["status=\"200\"", "protocol=\"h2\""]),
        50.0
    );
    // No ALPN extension at all: the server falls back to HTTP/1.1.
    let (code, stdout, s) = bench(&f, &["--alpn", "", "-c", "1", "-n", "10"]);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!((n(&s, "requests"), n(&s, "errors_total")), (10, 0), "{stdout}");
    assert_eq!(
        f.gw.metric("tlsgate_requests_total", &["status=\"200\"", "protocol=\"h1\""]),
        10.0
    );
    // Lists the bench could not speak are refused before connecting.
    let (code, stderr) = bench_refused(&f, &["--alpn", "h2,http/1.1", "-n", "1"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("add --h2"), "{stderr}");
    let (code, stderr) = bench_refused(&f, &["--h2", "--alpn", "http/1.1", "-n", "1"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("--alpn must offer h2"), "{stderr}");
}

#[test]
fn lean_completes_full_tls13_handshakes_that_the_server_counts() {
    let f = common::start("", "");
    let (code, stdout, s) = bench(&f, &["--lean", "-c", "3", "-t", "2", "-n", "90"]);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(s["mode"], "new-conn");
    assert!(stdout.contains("lean: full TLS 1.3 handshakes only"), "{stdout}");
    assert_eq!(n(&s, "errors_total"), 0, "{stdout}");
    assert_eq!(
        (n(&s, "requests"), n(&s, "handshakes"), n(&s, "full")),
        (90, 90, 90),
        "{stdout}"
    );
    assert_eq!(s["status"]["200"], 90, "{stdout}");
    assert_eq!(s["negotiated"]["TLSv1.3 TLS_AES_128_GCM_SHA256 X25519"], 90, "{stdout}");
    assert_eq!(
        s["sigalgs"]["ecdsa_secp256r1_sha256"], 90,
        "the server signed with its ECDSA certificate: {stdout}"
    );
    // The server completed each handshake (it counts after the client's Finished verified) and
    // answered each request.
    wait_for_server_handshakes(&f, 90);
    assert_eq!(
        f.gw.metric(
            "tlsgate_handshakes_total",
            &["outcome=\"full\"", "version=\"TLSv1.3\"", "group=\"X25519\""]
        ),
        90.0,
        "{}",
        f.gw.metrics()
    );
    assert_eq!(f.gw.metric("tlsgate_handshakes_total", &[]), 90.0, "{}", f.gw.metrics());
    assert_eq!(
        f.gw.metric("tlsgate_requests_total", &["status=\"200\"", "protocol=\"h1\""]),
        90.0
    );
}

#[test]
fn lean_fails_cleanly_against_a_server_that_does_not_speak_tls_and_refuses_other_options() {
    let f = common::start("", "");
    // The admin port answers the ClientHello with a plain HTTP error: every handshake fails,
    // counted, and the bench ends.
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("summary.json");
    let out = Command::new(common::binary())
        .args(["bench", "--lean", "-c", "2", "-n", "6", "--timeout", "5s", "--json"])
        .arg(&json)
        .arg(format!("https://127.0.0.1:{}/", f.admin))
        .output()
        .expect("run tlsgate bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(n(&s, "requests"), 0, "{stdout}");
    assert_eq!(n(&s, "errors_total"), 6, "{stdout}");
    assert_eq!(s["errors"]["handshake"], 6, "{stdout}");
    // The gateway still serves.
    let (code, stdout, s) = bench(&f, &["--lean", "-c", "1", "-n", "3"]);
    assert_eq!((code, n(&s, "requests"), n(&s, "errors_total")), (0, 3, 0), "{stdout}");
    for args in [
        &["--lean", "--tls", "1.2"][..],
        &["--lean", "--groups", "X25519MLKEM768"],
        &["--lean", "--h2"],
        &["--lean", "--handshake-only"],
        &["--lean", "--cacert", "/dev/null"],
        &["--delegated-credentials"],
    ] {
        let (code, stderr) = bench_refused(&f, args);
        assert_ne!(code, 0, "{args:?} must be refused");
        assert!(stderr.contains("--"), "{args:?}: {stderr}");
    }
}
