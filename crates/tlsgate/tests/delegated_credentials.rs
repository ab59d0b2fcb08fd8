//! Delegated credentials (RFC 9345) for keyless certificates, end to end with real processes:
//! a key server (`tlsgate keyserver`) that issues the credential, a gateway that holds no key
//! file, and NSS's `tstclnt` (Firefox's TLS library; `-B` offers delegated credentials) as the
//! independent client. Whether a handshake used the credential is read from the key server's
//! own count of signatures: a credential handshake makes none.

mod common;
mod keyless_env;

use keyless_env::*;
use std::path::PathBuf;
use std::time::Duration;
use tlsgate_testkit::{free_port, require, TestPki};
use tlsgate_tls::pki::{CertSpec, KeyKind, RawExtension};

/// A site certificate with the DelegationUsage extension (`dc.pem`), its key moved to `keys/`.
fn delegation_site(pki: &TestPki) -> PathBuf {
    let dir = pki.path("keys");
    std::fs::create_dir_all(&dir).unwrap();
    let mut spec = CertSpec::leaf(&["localhost", "127.0.0.1"], KeyKind::EcdsaP256, 30);
    spec.extra.push(RawExtension {
        oid: tlsgate_wire::delegated_credential::DELEGATION_USAGE_OID.into(),
        der: vec![0x05, 0x00],
    });
    let (_, key) = pki.leaf_with("dc", &spec);
    std::fs::rename(&key, dir.join("dc.key")).unwrap();
    dir
}

/// An NSS database trusting the test CA.
fn nss_db(pki: &TestPki) -> String {
    let dir = pki.path("nssdb");
    std::fs::create_dir_all(&dir).unwrap();
    let db = format!("sql:{}", dir.display());
    let run = |args: &[&str]| {
        let out = tlsgate_testkit::run("certutil", args, b"", Duration::ZERO, Duration::from_secs(30));
        assert_eq!(out.status, Some(0), "certutil {args:?}: {}", out.all());
    };
    run(&["-N", "-d", &db, "--empty-password"]);
    let ca = pki.ca_file();
    run(&[
        "-A",
        "-d",
        &db,
        "-n",
        "tlsgate-test-ca",
        "-t",
        "C,,",
        "-i",
        ca.to_str().unwrap(),
    ]);
    db
}

/// One HTTPS request with `tstclnt` (TLS 1.3), asking for a delegated credential when `dc`.
/// The request comes from a file (`-A`): with stdin, tstclnt waits on it after the response.
fn tstclnt(db: &str, port: u16, dc: bool) -> tlsgate_testkit::Output {
    let dir = tempfile::tempdir().unwrap();
    let request = dir.path().join("request");
    std::fs::write(
        &request,
        "GET /hello HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let port = port.to_string();
    let request = request.to_str().unwrap().to_string();
    let mut args = vec![
        "-h",
        "127.0.0.1",
        "-p",
        &port,
        "-a",
        "localhost",
        "-d",
        db,
        "-V",
        "tls1.3:tls1.3",
        "-A",
        &request,
    ];
    if dc {
        args.push("-B");
    }
    tlsgate_testkit::run("tstclnt", &args, b"", Duration::ZERO, Duration::from_secs(20))
}

fn served(out: &tlsgate_testkit::Output) -> bool {
    out.stdout.contains("Hello, world!")
}

/// A gateway serving `dc.pem` through `servers`, delegation on with `validity`/`renew_before`.
fn gateway(pki: &TestPki, client: &(PathBuf, PathBuf), servers: &[String], validity: &str, renew: &str) -> Gateway {
    let certs = keyless_cert_block(&pki.path("dc.pem"), servers);
    let (https, admin) = (free_port(), free_port());
    let top = format!(
        "{}[keyless.delegated_credentials]\nenabled = true\nvalidity = {validity:?}\nrenew_before = {renew:?}\n",
        keyless_section(client, &pki.ca_file())
    );
    let text = common::config_with_certs(&certs, https, admin, &top, "");
    let gw = tlsgate_testkit::GatewayProcess::try_start(common::binary(), &text, admin, &[https])
        .unwrap_or_else(|log| panic!("gateway did not start:\n{log}"));
    Gateway {
        https,
        ca: pki.ca_file(),
        gw,
    }
}

const DELEGATION_ON: &str = "[delegation]\nenabled = true\nmax_validity = \"1h\"\n";

fn issued_ok(gw: &Gateway) -> f64 {
    gw.gw
        .metric("tlsgate_delegated_credential_issues_total", &["result=\"ok\""])
}

fn holds_credential(gw: &Gateway) -> bool {
    gw.gw.metric("tlsgate_delegated_credential_expiry_seconds", &[]) > 0.0
}

fn setup() -> (TestPki, PathBuf, KeyServerFiles, (PathBuf, PathBuf), String) {
    require("tstclnt");
    require("certutil");
    let pki = TestPki::new();
    let keys = delegation_site(&pki);
    let files = keyserver_files(&pki);
    let client = client_cert(&pki, "gateway", "gateway-1");
    let db = nss_db(&pki);
    (pki, keys, files, client, db)
}

/// A key server issuing credentials and a gateway (credentials valid 30 min) holding one.
fn serving_a_credential(
    pki: &TestPki,
    keys: &std::path::Path,
    files: &KeyServerFiles,
    client: &(PathBuf, PathBuf),
) -> (KeyServer, Gateway) {
    let ks = start_keyserver(pki, files, free_port(), &[keys], DELEGATION_ON);
    let gw = gateway(pki, client, &[ks.addr()], "30m", "10m");
    assert!(
        common::wait_until(Duration::from_secs(15), || holds_credential(&gw)),
        "no credential issued:\n{}",
        gw.gw.log()
    );
    (ks, gw)
}

#[test]
fn a_client_asking_for_a_credential_is_served_without_the_key_server_even_while_it_is_down() {
    let (pki, keys, files, client, db) = setup();
    let (ks, gw) = serving_a_credential(&pki, &keys, &files, &client);
    assert_eq!(issued_ok(&gw), 1.0);
    assert_eq!(
        ks.proc.metric("tlsgate_keyserver_delegated_credentials_total", &[]),
        1.0,
        "the key server counts the credential it issued"
    );

    // Clients that ask for a credential: no key-server signature.
    let before = ks.ops();
    for _ in 0..3 {
        let out = tstclnt(&db, gw.https, true);
        assert!(served(&out), "tstclnt -B:\n{}", out.all());
    }
    assert_eq!(ks.ops(), before, "credential handshakes made no key-server request");
    assert_eq!(gw.gw.metric("tlsgate_delegated_credential_handshakes_total", &[]), 3.0);

    // A client that does not ask (the same NSS client, and OpenSSL): signed by the key server.
    let out = tstclnt(&db, gw.https, false);
    assert!(served(&out), "tstclnt:\n{}", out.all());
    assert_eq!(
        ks.ops(),
        before + 1.0,
        "a client without -B is served through the key server"
    );
    let out = gw.s_client("localhost", &["-tls1_3"]);
    assert!(out.stdout.contains("Hello, world!"), "{}", out.all());
    assert_eq!(ks.ops(), before + 2.0);

    // Key server gone: the credential still serves the clients that ask for it; the others fail.
    drop(ks);
    let out = tstclnt(&db, gw.https, true);
    assert!(
        served(&out),
        "credential handshake with the key server down:\n{}",
        out.all()
    );
    let out = tstclnt(&db, gw.https, false);
    assert!(!served(&out), "without a credential nothing can sign:\n{}", out.all());
    assert_eq!(gw.gw.metric("tlsgate_delegated_credential_handshakes_total", &[]), 4.0);
}

/// `tlsgate bench --lean --delegated-credentials` offers delegated credentials (its own TLS 1.3
/// handshake: BoringSSL has no client side for them) and reports the handshakes signed with
/// one; the key server signs none of them. Without the option the same bench is served through
/// the key server, one signature per handshake.
#[test]
fn bench_lean_offers_delegated_credentials_and_reports_their_use() {
    let (pki, keys, files, client, _db) = setup();
    let (ks, gw) = serving_a_credential(&pki, &keys, &files, &client);
    let bench = |extra: &[&str]| {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("summary.json");
        let mut args = vec![
            "bench",
            "--lean",
            "-c",
            "2",
            "-n",
            "20",
            "--json",
            json.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let url = format!("https://localhost:{}/", gw.https);
        args.push(&url);
        let out = tlsgate_testkit::run(
            common::binary().to_str().unwrap(),
            &args,
            b"",
            Duration::ZERO,
            Duration::from_secs(60),
        );
        assert_eq!(out.status, Some(0), "{}", out.all());
        let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        (out.stdout, s)
    };
    let before = ks.ops();
    let (stdout, s) = bench(&["--delegated-credentials"]);
    assert_eq!(s["requests"], 20, "{stdout}");
    assert_eq!(
        s["sigalgs"]["ecdsa_secp256r1_sha256 (delegated credential)"], 20,
        "{stdout}"
    );
    assert!(
        stdout.contains("server signatures: ecdsa_secp256r1_sha256 (delegated credential) 20"),
        "{stdout}"
    );
    assert_eq!(ks.ops(), before, "credential handshakes made no key-server request");
    assert!(
        common::wait_until(Duration::from_secs(5), || gw
            .gw
            .metric("tlsgate_delegated_credential_handshakes_total", &[])
            == 20.0),
        "{}",
        gw.gw.metrics()
    );
    let (stdout, s) = bench(&[]);
    assert_eq!(s["sigalgs"]["ecdsa_secp256r1_sha256"], 20, "{stdout}");
    assert!(
        s["sigalgs"]["ecdsa_secp256r1_sha256 (delegated credential)"].is_null(),
        "{stdout}"
    );
    assert_eq!(
        ks.ops(),
        before + 20.0,
        "one key-server signature per handshake without a credential"
    );
}

#[test]
fn credentials_are_renewed_ahead_of_expiry_and_dropped_when_they_expire() {
    let (pki, keys, files, client, db) = setup();
    let port = free_port();
    let ks = start_keyserver(&pki, &files, port, &[&keys], DELEGATION_ON);
    // Valid 60 s, renewed when 45 s are left: a new credential every ~15 s; offered until 30 s
    // before its expiry.
    let gw = gateway(&pki, &client, &[ks.addr()], "60s", "45s");
    assert!(
        common::wait_until(Duration::from_secs(45), || issued_ok(&gw) >= 3.0),
        "credentials were not renewed: {} issued\n{}",
        issued_ok(&gw),
        gw.gw.log()
    );
    let before = ks.ops();
    let out = tstclnt(&db, gw.https, true);
    assert!(served(&out), "{}", out.all());
    assert_eq!(ks.ops(), before, "a renewed credential serves");

    // Key server down: renewals fail, the last credential ages out, and then nothing is offered.
    drop(ks);
    assert!(
        common::wait_until(Duration::from_secs(45), || !holds_credential(&gw)),
        "an expiring credential must stop being offered\n{}",
        gw.gw.log()
    );
    let failed = gw
        .gw
        .metric("tlsgate_delegated_credential_issues_total", &["result=\"unavailable\""]);
    assert!(failed >= 1.0, "failed renewals are counted: {failed}");
    let out = tstclnt(&db, gw.https, true);
    assert!(
        !served(&out),
        "no credential and no key server: no handshake\n{}",
        out.all()
    );

    // The key server back on its address: a new credential, served again without signatures.
    let ks = start_keyserver(&pki, &files, port, &[&keys], DELEGATION_ON);
    assert!(
        common::wait_until(Duration::from_secs(40), || holds_credential(&gw)),
        "a credential after the key server came back\n{}",
        gw.gw.log()
    );
    let before = ks.ops();
    let out = tstclnt(&db, gw.https, true);
    assert!(served(&out), "{}", out.all());
    assert_eq!(ks.ops(), before);
}

#[test]
fn a_key_server_with_delegation_off_refuses_and_the_gateway_serves_through_it() {
    let (pki, keys, files, client, db) = setup();
    let ks = start_keyserver(&pki, &files, free_port(), &[&keys], "");
    let gw = gateway(&pki, &client, &[ks.addr()], "30m", "10m");
    assert!(
        common::wait_until(Duration::from_secs(15), || {
            gw.gw
                .metric("tlsgate_delegated_credential_issues_total", &["result=\"refused\""])
                >= 1.0
        }),
        "the refusal is counted\n{}",
        gw.gw.log()
    );
    assert_eq!(
        ks.proc
            .metric("tlsgate_keyserver_refused_total", &["reason=\"delegation_disabled\""]),
        1.0
    );
    assert!(!holds_credential(&gw));
    let before = ks.ops();
    let out = tstclnt(&db, gw.https, true);
    assert!(served(&out), "{}", out.all());
    assert_eq!(ks.ops(), before + 1.0, "served through the key server");
}

#[test]
fn check_warns_about_keyless_certificates_without_delegation_usage() {
    let pki = TestPki::new();
    delegation_site(&pki);
    let (_, plain_key) = pki.leaf("plain", &["localhost"], KeyKind::EcdsaP256);
    std::fs::remove_file(plain_key).unwrap();
    let client = client_cert(&pki, "gateway", "gateway-1");
    let certs = format!(
        "{}{}",
        keyless_cert_block(&pki.path("dc.pem"), &["127.0.0.1:1".into()]),
        keyless_cert_block(&pki.path("plain.pem"), &["127.0.0.1:1".into()])
    );
    let top = format!(
        "{}[keyless.delegated_credentials]\nenabled = true\n",
        keyless_section(&client, &pki.ca_file())
    );
    let config = pki.write("tlsgate.toml", &common::config_with_certs(&certs, 8443, 9090, &top, ""));
    let out = common::tlsgate(&["check", "--config", config.to_str().unwrap()]);
    let all = out.all();
    assert!(
        all.contains("site[0].certificate[1].chain") && all.contains("DelegationUsage"),
        "the certificate without DelegationUsage is named:\n{all}"
    );
    assert!(
        all.lines()
            .filter(|l| l.contains("DelegationUsage"))
            .all(|l| l.contains("certificate[1]")),
        "only the certificate without DelegationUsage is warned about:\n{all}"
    );
}
