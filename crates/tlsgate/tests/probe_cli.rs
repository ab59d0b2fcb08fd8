//! `tlsgate probe` against a real `tlsgate serve`: how each connection resumed (TLS 1.3 PSK,
//! TLS 1.2 ticket, TLS 1.2 session ID) checked against the server's own handshake counters, a
//! session carried between two probe processes, expectation failures, JSON, HSTS, timings.

mod common;

use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Runs `tlsgate probe --json ARGS 127.0.0.1:PORT` with the fixture's CA and SNI `localhost`;
/// returns (exit code, stderr, report).
fn probe(f: &common::Fixture, args: &[&str]) -> (i32, String, Value) {
    let ca = f.pki.ca_file();
    let fixed = [
        "--cacert",
        ca.to_str().unwrap(),
        "--sni",
        "localhost",
        "--path",
        "/hello",
    ];
    probe_json(&[&fixed[..], args, &["--timeout", "10s", &f.connect()]].concat())
}

/// Runs `tlsgate probe --json ARGS`; returns (exit code, stderr, report).
fn probe_json(args: &[&str]) -> (i32, String, Value) {
    let out = Command::new(common::binary())
        .args(["probe", "--json"])
        .args(args)
        .output()
        .expect("run tlsgate probe");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let report = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}\n{stderr}"));
    (out.status.code().unwrap_or(-1), stderr, report)
}

fn resumptions(r: &Value) -> Vec<String> {
    r["connections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["resumption"].as_str().unwrap().to_string())
        .collect()
}

fn server_handshakes(f: &common::Fixture, outcome: &str) -> u64 {
    f.gw.metric("tlsgate_handshakes_total", &[&format!("outcome=\"{outcome}\"")]) as u64
}

/// Waits until the server has counted `total` handshakes.
fn wait_for(f: &common::Fixture, total: u64) {
    common::wait_until(std::time::Duration::from_secs(10), || {
        f.gw.metric("tlsgate_handshakes_total", &[]) as u64 >= total
    });
}

#[test]
fn tls13_psk_resumption_json_and_timings() {
    let f = common::start("", "[site.hsts]\nmax_age = \"1h\"\n");
    let (code, stderr, r) = probe(&f, &["-n", "3", "--expect-resume", "--expect-version", "1.3"]);
    assert_eq!(code, 0, "{stderr}\n{r:#}");
    assert_eq!(r["ok"], true);
    assert_eq!(resumptions(&r), ["full", "tls13_psk", "tls13_psk"]);
    for c in r["connections"].as_array().unwrap() {
        assert_eq!(c["version"], "TLSv1.3", "{c:#}");
        assert_eq!(c["cert_type"], "ECDSA", "{c:#}");
        assert!(c["chain_bytes"].as_u64().unwrap() > 200, "{c:#}");
        assert_eq!(c["alpn"], "http/1.1");
        assert_eq!(c["http_status"], 200);
        assert_eq!(c["hsts"], "max-age=3600");
        assert_eq!(c["ocsp"]["present"], false);
        assert!(c["sessions_received"].as_u64().unwrap() >= 1, "{c:#}");
        let t = &c["timings_us"];
        let (connect, hs, ttfb, ttlb) = (
            t["connect"].as_u64().unwrap(),
            t["handshake"].as_u64().unwrap(),
            t["ttfb"].as_u64().unwrap(),
            t["ttlb"].as_u64().unwrap(),
        );
        assert!(hs > 0 && connect + hs <= ttfb && ttfb <= ttlb, "phases add up: {t}");
    }
    assert_eq!(r["connections"][0]["session_offered"], Value::Null);
    assert_eq!(r["connections"][1]["session_offered"], "previous");
    assert_eq!(r["expectations"].as_array().unwrap().len(), 2);
    // Two tickets after the full handshake, one after each resumption (the client replaces the
    // ticket it used, as OpenSSL servers do it).
    let received: Vec<u64> = r["connections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["sessions_received"].as_u64().unwrap())
        .collect();
    assert_eq!(received, [2, 1, 1], "{r:#}");
    wait_for(&f, 3);
    assert_eq!(
        (server_handshakes(&f, "full"), server_handshakes(&f, "tls13_psk")),
        (1, 2)
    );
    assert_eq!(
        f.gw.metric("tlsgate_state", &["name=\"tickets_issued_total\""]),
        4.0,
        "{}",
        f.gw.metrics()
    );
}

#[test]
fn tls12_ticket_and_session_id_resumption() {
    let f = common::start("", "");
    let tls12 = ["--tls", "1.2", "--groups", "X25519:P-256", "--expect-group", "X25519"];
    let (code, stderr, r) = probe(&f, &[&tls12[..], &["-n", "2", "--expect-resume"]].concat());
    assert_eq!(code, 0, "{stderr}\n{r:#}");
    assert_eq!(resumptions(&r), ["full", "ticket"]);
    assert_eq!(r["connections"][1]["offered_ticket"], true);
    assert_eq!(r["connections"][1]["cert_from_session"], true);
    let (code, stderr, r) = probe(
        &f,
        &[&tls12[..], &["-n", "2", "--no-ticket", "--expect-resume"]].concat(),
    );
    assert_eq!(code, 0, "{stderr}\n{r:#}");
    assert_eq!(resumptions(&r), ["full", "session_id"]);
    wait_for(&f, 4);
    assert_eq!(server_handshakes(&f, "full"), 2);
    assert_eq!(server_handshakes(&f, "ticket"), 1);
    assert_eq!(server_handshakes(&f, "session_id"), 1);
}

#[test]
fn session_carried_between_two_processes() {
    let f = common::start("", "");
    let dir = tempfile::tempdir().unwrap();
    for (tls, outcome) in [("1.3", "tls13_psk"), ("1.2", "ticket")] {
        let file = dir.path().join(format!("session-{tls}.der"));
        let file = file.to_str().unwrap();
        let (code, stderr, r) = probe(&f, &["-n", "1", "--tls", tls, "--sess-out", file]);
        assert_eq!(code, 0, "{stderr}\n{r:#}");
        assert_eq!(r["session_saved"], file);
        assert!(Path::new(file).metadata().unwrap().len() > 50);
        let (code, stderr, r) = probe(&f, &["-n", "1", "--tls", tls, "--sess-in", file, "--expect-resume"]);
        assert_eq!(code, 0, "{stderr}\n{r:#}");
        assert_eq!(resumptions(&r), [outcome]);
        assert_eq!(r["connections"][0]["session_offered"], "file");
    }
    wait_for(&f, 4);
    assert_eq!(server_handshakes(&f, "tls13_psk"), 1);
    assert_eq!(server_handshakes(&f, "ticket"), 1);
}

#[test]
fn failed_expectations_exit_non_zero_with_a_message() {
    let f = common::start("", "");
    let (code, stderr, r) = probe(
        &f,
        &[
            "-n",
            "2",
            "--expect-no-resume",
            "--expect-group",
            "P-384",
            "--expect-staple",
            "--expect-alpn",
            "h2",
        ],
    );
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(r["ok"], false);
    assert!(
        stderr.contains("expectation --expect-no-resume failed: connection 2 was resumed (tls13_psk)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("--expect-group P-384 failed: connection 1 negotiated"),
        "{stderr}"
    );
    assert!(
        stderr.contains("--expect-staple failed: connection 1: no OCSP staple"),
        "{stderr}"
    );
    assert!(
        stderr.contains("--expect-alpn h2 failed: connection 1 selected http/1.1"),
        "{stderr}"
    );
    // --no-ticket on TLS 1.3: nothing to resume, so --expect-resume fails and says why.
    let (code, stderr, _) = probe(&f, &["-n", "2", "--tls", "1.3", "--no-ticket", "--expect-resume"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("connection 2 was not resumed (no session to offer)"),
        "{stderr}"
    );
    // HTTP/2 by ALPN, and a closed port is a failed connection, not a crash.
    let (code, stderr, r) = probe(&f, &["-n", "1", "--alpn", "h2,http/1.1", "--expect-alpn", "h2"]);
    assert_eq!(code, 0, "{stderr}\n{r:#}");
    assert_eq!(r["connections"][0]["http_status"], 200);
    let port = tlsgate_testkit::free_port();
    let out = Command::new(common::binary())
        .args(["probe", "-n", "1", &format!("127.0.0.1:{port}")])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("connection 1 failed: cannot connect"));
}

#[test]
fn ocsp_staple_status_and_age() {
    use std::time::{Duration, SystemTime};
    use tlsgate_tls::pki::{ocsp_response, CertSpec, Certified, KeyKind, OcspStatus};
    let pki = tlsgate_testkit::TestPki::new();
    let inter = Certified::issue(
        &CertSpec::ca("probe test intermediate", KeyKind::EcdsaP256, 30),
        Some(&pki.ca),
    )
    .expect("intermediate");
    let leaf = Certified::issue(&CertSpec::leaf(&["localhost"], KeyKind::EcdsaP256, 30), Some(&inter)).expect("leaf");
    let (chain, key) = pki.write_pair("leaf", &format!("{}{}", leaf.cert_pem, inter.cert_pem), &leaf.key_pem);
    let now = SystemTime::now();
    let der = ocsp_response(
        &leaf.cert_pem,
        &inter,
        OcspStatus::Good,
        now - Duration::from_secs(120),
        Some(now + Duration::from_secs(3600)),
    )
    .unwrap();
    let staple = pki.path("staple.der");
    std::fs::write(&staple, der).unwrap();
    let certs = format!(
        "{}ocsp_file = {}\n",
        common::cert_block(&chain, &key),
        tlsgate_testkit::toml_path(&staple)
    );
    let (https, admin) = (tlsgate_testkit::free_port(), tlsgate_testkit::free_port());
    let gw = tlsgate_testkit::GatewayProcess::start(
        common::binary(),
        &common::config_with_certs(&certs, https, admin, "", ""),
        admin,
        &[https],
    );
    let f = common::Fixture { pki, https, admin, gw };
    let (code, stderr, r) = probe(&f, &["-n", "1", "--expect-staple"]);
    assert_eq!(code, 0, "{stderr}\n{r:#}");
    let ocsp = &r["connections"][0]["ocsp"];
    assert_eq!(
        (ocsp["present"].as_bool(), ocsp["status"].as_str()),
        (Some(true), Some("good")),
        "{ocsp}"
    );
    let age = ocsp["age_s"].as_u64().unwrap();
    assert!((119..200).contains(&age), "age from thisUpdate: {age}");
    assert_eq!(r["connections"][0]["chain_certs"], 2);
}

#[test]
fn sigalgs_select_the_certificate_and_impossible_ones_fail_cleanly() {
    let f = common::start("", "");
    for (tls, sigalgs, cert, signed) in [
        ("1.3", "rsa_pss_rsae_sha256", "RSA", "rsa_pss_rsae_sha256"),
        ("1.2", "rsa_pss_rsae_sha256", "RSA", "rsa_pss_rsae_sha256"),
        ("1.3", "ecdsa_secp256r1_sha256", "ECDSA", "ecdsa_secp256r1_sha256"),
        ("1.2", "RSA+SHA256", "RSA", "rsa_pkcs1_sha256"),
    ] {
        let (code, stderr, r) = probe(
            &f,
            &["-n", "2", "--tls", tls, "--sigalgs", sigalgs, "--expect-sigalg", signed],
        );
        assert_eq!(code, 0, "{tls} {sigalgs}: {stderr}\n{r:#}");
        let c = &r["connections"];
        assert_eq!(
            (c[0]["cert_type"].as_str(), c[0]["sigalg"].as_str()),
            (Some(cert), Some(signed))
        );
        // The resumption signs nothing; its certificate is the one from the session.
        assert_eq!(
            (c[1]["resumed"].as_bool(), c[1]["sigalg"].as_str()),
            (Some(true), None),
            "{c:#}"
        );
        assert_eq!(c[1]["cert_type"], cert);
    }
    wait_for(&f, 8);
    assert_eq!(
        f.gw.metric("tlsgate_handshakes_total", &["outcome=\"full\"", "cert=\"rsa\""]),
        3.0
    );
    assert_eq!(
        f.gw.metric("tlsgate_handshakes_total", &["outcome=\"full\"", "cert=\"ecdsa_p256\""]),
        1.0
    );

    // The expectation fails when the server signs otherwise.
    let (code, stderr, _) = probe(&f, &["-n", "1", "--expect-sigalg", "rsa_pss_rsae_sha256"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains(
            "--expect-sigalg rsa_pss_rsae_sha256 failed: connection 1 was signed with ecdsa_secp256r1_sha256"
        ),
        "{stderr}"
    );
    // No certificate of the site can sign with Ed25519: a failed connection whose message says
    // what was offered.
    let (code, stderr, r) = probe(&f, &["-n", "1", "--sigalgs", "ed25519"]);
    assert_eq!(code, 1, "{r:#}");
    let error = r["connections"][0]["error"].as_str().unwrap();
    assert!(error.starts_with("TLS handshake failed ["), "{error}");
    assert!(
        error.contains("the server accepted none of what was offered with --sigalgs ed25519"),
        "{error}"
    );
    assert!(stderr.contains("connection 1 failed: TLS handshake failed"), "{stderr}");
    // An unknown name is refused before connecting, naming the flag.
    let out = Command::new(common::binary())
        .args(["probe", "--sigalgs", "ecdsa_secp256r1_sha256:bogus", &f.connect()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--sigalgs ecdsa_secp256r1_sha256:bogus: not a valid signature algorithm list"),
        "{stderr}"
    );
}

#[test]
fn connect_to_keeps_the_target_name_for_sni_and_host() {
    let f = common::start("", "");
    let ca = f.pki.ca_file();
    let (code, stderr, r) = probe_json(&[
        "-n",
        "1",
        "--path",
        "/hello",
        "--cacert",
        ca.to_str().unwrap(),
        "--connect-to",
        &f.connect(),
        "--tfo",
        "--expect-version",
        "1.3",
        "localhost:1",
    ]);
    assert_eq!(code, 0, "{stderr}\n{r:#}");
    assert_eq!(r["addr"], f.connect());
    assert_eq!(
        r["sni"], "localhost",
        "the certificate was verified for the target's name"
    );
    assert_eq!(r["connections"][0]["http_status"], 200);
}

/// One TLS 1.3 connection offering the session saved in `session`.
fn from_session(session: &str) -> [&str; 6] {
    ["-n", "1", "--tls", "1.3", "--sess-in", session]
}

/// A probe with a session saved by an earlier probe, expecting 0-RTT to be accepted.
fn probe_early(f: &common::Fixture, session: &str) -> (i32, String, Value) {
    let expect = ["--expect-early-data", "--expect-resume"];
    probe(f, &[&from_session(session)[..], &expect[..]].concat())
}

#[test]
fn rejected_zero_rtt_is_reported_and_fails_expect_early_data() {
    // 0-RTT on: the first use of a ticket's early data is accepted, a replay of it is refused.
    let f = common::start("[tls.tickets]\nearly_data = true\n", "");
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("ed.der");
    let session = session.to_str().unwrap();
    let (code, stderr, r) = probe(&f, &["-n", "1", "--tls", "1.3", "--sess-out", session]);
    assert_eq!(code, 0, "{stderr}\n{r:#}");
    assert_eq!(r["connections"][0]["new_session_early_data"], true, "{r:#}");

    let (code, stderr, r) = probe_early(&f, session);
    assert_eq!(code, 0, "{stderr}\n{r:#}");
    let ed = &r["connections"][0]["early_data"];
    assert_eq!(
        (ed["offered"].as_bool(), ed["accepted"].as_bool()),
        (Some(true), Some(true)),
        "{ed}"
    );

    // The same session again: offered, refused as a replay; the request is sent again after
    // the handshake (and answered), the PSK still resumes, and --expect-early-data fails.
    let (code, stderr, r) = probe_early(&f, session);
    assert_eq!(code, 1, "{stderr}\n{r:#}");
    let c = &r["connections"][0];
    let ed = &c["early_data"];
    assert_eq!(
        (
            ed["session_capable"].as_bool(),
            ed["offered"].as_bool(),
            ed["accepted"].as_bool(),
            ed["rejected"].as_bool()
        ),
        (Some(true), Some(true), Some(false), Some(true)),
        "{ed}"
    );
    assert_eq!(ed["reason"], "peer_declined", "{ed}");
    assert_eq!(
        (c["http_status"].as_u64(), c["resumption"].as_str()),
        (Some(200), Some("tls13_psk"))
    );
    assert_eq!(r["ok"], false);
    assert!(
        stderr.contains("expectation --expect-early-data failed: connection 1: 0-RTT rejected (peer_declined)"),
        "{stderr}"
    );
    assert!(!stderr.contains("--expect-resume failed"), "{stderr}");
    assert_eq!(
        f.gw.metric("tlsgate_state", &["name=\"early_data_accepted_total\""]),
        1.0
    );
    assert_eq!(
        f.gw.metric("tlsgate_state", &["name=\"early_data_refused_replay_total\""]),
        1.0
    );
    // The text report says it too.
    let out = Command::new(common::binary())
        .arg("probe")
        .args(from_session(session))
        .args(["--early-data", &f.connect()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("0-RTT sent, rejected (peer_declined)"), "{text}");
}

#[test]
fn zero_rtt_is_never_accepted_when_the_gateway_has_it_off() {
    let f = common::start("", "");
    let (code, stderr, r) = probe(
        &f,
        &["-n", "2", "--tls", "1.3", "--expect-early-data", "--expect-resume"],
    );
    assert_eq!(code, 1, "{stderr}\n{r:#}");
    let c = &r["connections"][1];
    assert_eq!(c["resumption"], "tls13_psk", "{c:#}");
    assert_eq!(c["early_data"]["accepted"], false, "{c:#}");
    // The ticket does not allow early data, so nothing is sent.
    assert_eq!(c["new_session_early_data"], false, "{c:#}");
    assert!(
        stderr
            .contains("expectation --expect-early-data failed: connection 2: 0-RTT not sent (unsupported_for_session)"),
        "{stderr}"
    );
    assert!(!stderr.contains("--expect-resume failed"), "{stderr}");
    assert_eq!(
        f.gw.metric("tlsgate_state", &["name=\"early_data_accepted_total\""]),
        0.0
    );
}
