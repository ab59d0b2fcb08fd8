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
    let out = Command::new(common::binary())
        .args([
            "probe",
            "--json",
            "--cacert",
            ca.to_str().unwrap(),
            "--sni",
            "localhost",
        ])
        .args(["--path", "/hello", "--timeout", "10s"])
        .args(args)
        .arg(f.connect())
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
    wait_for(&f, 3);
    assert_eq!(
        (server_handshakes(&f, "full"), server_handshakes(&f, "tls13_psk")),
        (1, 2)
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
