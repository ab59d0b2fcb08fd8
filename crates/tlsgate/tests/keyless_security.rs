//! The key server is not a signing oracle (issue 16), with real processes: it signs only TLS
//! server signing inputs, only with the keys a gateway's identity is permitted, and one client
//! that never reads its answers cannot make it buffer without bound.

mod common;
mod keyless_env;

use boring::hash::MessageDigest;
use boring::ssl::SslStream;
use boring::x509::X509;
use keyless_env::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tlsgate_keyless::codec::{decode_response, encode_request, ErrorCode, KeyId, Request, Response};
use tlsgate_testkit::{free_port, require, toml_path, TestPki};

const ECDSA_P256_SHA256: u16 = 0x0403;
const RSA_PSS_SHA256: u16 = 0x0804;
const RSA_PKCS1_SHA256: u16 = 0x0401;

/// A mutual-TLS connection to a key server with `client`'s certificate.
fn connect(pki: &TestPki, client: &(PathBuf, PathBuf), port: u16) -> SslStream<TcpStream> {
    let connector = tlsgate_keyless::tls_setup::connector(&client.0, &client.1, &pki.ca_file()).unwrap();
    let tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    connector.connect("127.0.0.1", tcp).expect("mTLS connect")
}

/// Sends one request and reads its answer (None: closed or timed out).
fn call(s: &mut SslStream<TcpStream>, id: u32, req: &Request) -> Option<Response> {
    let mut out = Vec::new();
    encode_request(&mut out, id, req).unwrap();
    s.write_all(&out).ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Ok(Some((got, r, _))) = decode_response(&buf) {
            assert_eq!(got, id);
            return Some(r);
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

fn sign(s: &mut SslStream<TcpStream>, key_id: KeyId, algorithm: u16, payload: &[u8]) -> Option<Response> {
    let req = Request::Sign {
        key_id,
        algorithm,
        payload: payload.to_vec(),
    };
    call(s, 1, &req)
}

/// The site certificate `stem.pem` of the keyless fixtures: (key id, certificate).
fn site_key(pki: &TestPki, stem: &str) -> (KeyId, X509) {
    let cert = X509::from_pem(&std::fs::read(pki.path(&format!("{stem}.pem"))).unwrap()).unwrap();
    let id = tlsgate_keyless::keystore::key_id(&cert.public_key().unwrap()).unwrap();
    (id, cert)
}

/// A TLS 1.3 server CertificateVerify input with a transcript hash of `hash_len` bytes.
fn tls13_input(hash_len: usize) -> Vec<u8> {
    let mut v = vec![0x20; 64];
    v.extend_from_slice(b"TLS 1.3, server CertificateVerify\0");
    v.extend(std::iter::repeat_n(0x77, hash_len));
    v
}

/// A TLS 1.2 ServerKeyExchange input: randoms, then ECDHE params for `group` with `key`.
fn tls12_input(group: u16, key: &[u8]) -> Vec<u8> {
    let mut v = vec![0x11; 64];
    v.push(3);
    v.extend_from_slice(&group.to_be_bytes());
    v.push(u8::try_from(key.len()).unwrap());
    v.extend_from_slice(key);
    v
}

/// The TBSCertificate (first element of the outer SEQUENCE) of a DER certificate.
fn tbs_certificate(der: &[u8]) -> Vec<u8> {
    fn header(der: &[u8]) -> (usize, usize) {
        match der[1] {
            n if n < 0x80 => (2, usize::from(n)),
            n => {
                let k = usize::from(n & 0x7f);
                (2 + k, der[2..2 + k].iter().fold(0, |a, b| a << 8 | usize::from(*b)))
            }
        }
    }
    let (outer, _) = header(der);
    let inner = &der[outer..];
    let (h, len) = header(inner);
    assert_eq!(inner[0], 0x30, "TBSCertificate is a SEQUENCE");
    inner[..h + len].to_vec()
}

fn verify(cert: &X509, algorithm: u16, input: &[u8], sig: &[u8]) -> bool {
    let key = cert.public_key().unwrap();
    let mut v = boring::sign::Verifier::new(MessageDigest::sha256(), &key).unwrap();
    if algorithm == RSA_PSS_SHA256 {
        v.set_rsa_padding(boring::rsa::Padding::PKCS1_PSS).unwrap();
        v.set_rsa_pss_saltlen(boring::sign::RsaPssSaltlen::DIGEST_LENGTH)
            .unwrap();
    }
    v.update(input).unwrap();
    v.verify(sig).unwrap_or(false)
}

fn refused(ks: &KeyServer, reason: &str) -> f64 {
    let label = format!("reason=\"{reason}\"");
    ks.proc.metric("tlsgate_keyserver_refused_total", &[&label])
}

#[test]
fn arbitrary_text_and_certificates_are_refused_while_tls_inputs_are_signed() {
    let setup = KeylessSetup::new();
    let ks = setup.keyserver();
    let (ecdsa, ecdsa_cert) = site_key(&setup.pki, "ecdsa");
    let (rsa, rsa_cert) = site_key(&setup.pki, "rsa");
    let mut s = connect(&setup.pki, &setup.client, ks.port);
    let tbs = tbs_certificate(&ecdsa_cert.to_der().unwrap());
    let text = b"I, owner of every key here, hand them to the bearer.".repeat(3);
    let refusals: &[(&str, KeyId, u16, Vec<u8>, &str)] = &[
        ("text, ECDSA", ecdsa, ECDSA_P256_SHA256, text.clone(), "not_tls_input"),
        ("text, RSA-PSS", rsa, RSA_PSS_SHA256, text.clone(), "not_tls_input"),
        // A real certificate's TBSCertificate (its reason depends on what byte 64 happens to be).
        ("TBSCertificate, ECDSA", ecdsa, ECDSA_P256_SHA256, tbs.clone(), "?"),
        ("TBSCertificate, RSA", rsa, RSA_PKCS1_SHA256, tbs.clone(), "?"),
        ("bare digest", ecdsa, ECDSA_P256_SHA256, vec![0x42; 32], "not_tls_input"),
        (
            "SHA-1 sized transcript",
            ecdsa,
            ECDSA_P256_SHA256,
            tls13_input(20),
            "transcript_hash_length",
        ),
        (
            "SHA-512 sized transcript",
            rsa,
            RSA_PSS_SHA256,
            tls13_input(64),
            "transcript_hash_length",
        ),
        (
            "PKCS#1 in TLS 1.3",
            rsa,
            RSA_PKCS1_SHA256,
            tls13_input(32),
            "pkcs1_in_tls13",
        ),
        (
            "X25519MLKEM768 in TLS 1.2",
            ecdsa,
            ECDSA_P256_SHA256,
            tls12_input(0x11EC, &[1; 32]),
            "group",
        ),
        (
            "x25519 key of 33 bytes",
            rsa,
            RSA_PKCS1_SHA256,
            tls12_input(29, &[1; 33]),
            "public_key",
        ),
        (
            "P-256 point of 64 bytes",
            ecdsa,
            ECDSA_P256_SHA256,
            tls12_input(23, &[4; 64]),
            "public_key",
        ),
        (
            "truncated",
            ecdsa,
            ECDSA_P256_SHA256,
            tls12_input(29, &[1; 32])[..90].to_vec(),
            "length",
        ),
        (
            "trailing text",
            ecdsa,
            ECDSA_P256_SHA256,
            [tls12_input(29, &[1; 32]), text.clone()].concat(),
            "length",
        ),
    ];
    for (what, key, alg, payload, _) in refusals {
        assert_eq!(
            sign(&mut s, *key, *alg, payload),
            Some(Response::Error(ErrorCode::Refused)),
            "{what}"
        );
    }
    assert_eq!(ks.ops(), 0.0, "nothing was signed:\n{}", ks.proc.metrics());
    for reason in [
        "not_tls_input",
        "transcript_hash_length",
        "pkcs1_in_tls13",
        "group",
        "public_key",
        "length",
    ] {
        let want = refusals.iter().filter(|r| r.4 == reason).count() as f64;
        assert!(refused(&ks, reason) >= want, "{reason}:\n{}", ks.proc.metrics());
    }
    assert_eq!(
        ks.proc.metric("tlsgate_keyserver_refused_total", &[]),
        refusals.len() as f64,
        "every refusal counted once"
    );

    // The same connection still gets real TLS inputs signed, and the signatures verify.
    let mut p384 = vec![0x04; 97];
    p384[1] = 9;
    let accepted: &[(KeyId, &X509, u16, Vec<u8>)] = &[
        (ecdsa, &ecdsa_cert, ECDSA_P256_SHA256, tls13_input(32)),
        (ecdsa, &ecdsa_cert, ECDSA_P256_SHA256, tls13_input(48)),
        (rsa, &rsa_cert, RSA_PSS_SHA256, tls13_input(32)),
        (ecdsa, &ecdsa_cert, ECDSA_P256_SHA256, tls12_input(29, &[9; 32])),
        (rsa, &rsa_cert, RSA_PKCS1_SHA256, tls12_input(24, &p384)),
    ];
    for (i, (key, cert, alg, payload)) in accepted.iter().enumerate() {
        match sign(&mut s, *key, *alg, payload) {
            Some(Response::Signature(sig)) => assert!(verify(cert, *alg, payload, &sig), "case {i}: bad signature"),
            other => panic!("case {i}: {other:?}\n{}", ks.proc.log()),
        }
    }
    assert_eq!(ks.ops(), accepted.len() as f64);
    let log = ks.proc.log();
    assert!(log.contains("sign request refused"), "{log}");
    assert!(log.contains("no [[client]] permissions configured"), "{log}");
}

/// Waits until the gateway has a proven connection to `n` key servers: it starts serving before
/// they are connected, and a handshake in that first moment finds no key server reachable.
fn connected(gw: &Gateway, n: usize) {
    assert!(
        common::wait_until(Duration::from_secs(10), || gw
            .gw
            .metric("tlsgate_keyless_connections", &[])
            >= n as f64),
        "the gateway did not connect to {n} key server(s):\n{}",
        gw.gw.log()
    );
}

#[test]
fn gateway_handshakes_of_every_shape_still_go_through_the_key_server() {
    require("openssl");
    let setup = KeylessSetup::new();
    let ks = setup.keyserver();
    let gw = setup.gateway(
        &[ks.addr()],
        "[tls]\ngroups = [\"X25519MLKEM768\", \"X25519\", \"P-256\", \"P-384\", \"P-521\"]\n",
    );
    connected(&gw, 1);
    // (s_client arguments, what its report must say: cipher suite or ECDHE group)
    let cases: &[(&[&str], &str)] = &[
        // TLS 1.3: a SHA-256 transcript, and SHA-384 ones signed with SHA-256 schemes.
        (&["-tls1_3", "-sigalgs", "ecdsa_secp256r1_sha256"], "TLSv1.3"),
        (
            &[
                "-tls1_3",
                "-ciphersuites",
                "TLS_AES_256_GCM_SHA384",
                "-sigalgs",
                "ecdsa_secp256r1_sha256",
            ],
            "Cipher is TLS_AES_256_GCM_SHA384",
        ),
        (
            &[
                "-tls1_3",
                "-ciphersuites",
                "TLS_AES_256_GCM_SHA384",
                "-sigalgs",
                "rsa_pss_rsae_sha256",
            ],
            "Cipher is TLS_AES_256_GCM_SHA384",
        ),
        // TLS 1.2: every group the gateway can use, ECDSA and RSA (a TLS 1.2 client that offers
        // ECDSA must list the certificate's curve, P-256, among its groups).
        (
            &[
                "-tls1_2",
                "-cipher",
                "ECDHE-ECDSA-AES128-GCM-SHA256",
                "-curves",
                "X25519:P-256",
            ],
            "Server Temp Key: X25519",
        ),
        (
            &[
                "-tls1_2",
                "-cipher",
                "ECDHE-ECDSA-AES128-GCM-SHA256",
                "-curves",
                "P-256",
            ],
            "Server Temp Key: ECDH, prime256v1",
        ),
        (
            &[
                "-tls1_2",
                "-cipher",
                "ECDHE-RSA-AES256-GCM-SHA384",
                "-curves",
                "P-384",
                "-sigalgs",
                "RSA+SHA384",
            ],
            "Server Temp Key: ECDH, secp384r1",
        ),
        (
            &[
                "-tls1_2",
                "-cipher",
                "ECDHE-RSA-AES128-GCM-SHA256",
                "-curves",
                "P-521",
                "-sigalgs",
                "rsa_pss_rsae_sha256",
            ],
            "Server Temp Key: ECDH, secp521r1",
        ),
    ];
    for (args, expect) in cases {
        let out = gw.s_client("localhost", args);
        assert!(
            out.stdout.contains("Verify return code: 0 (ok)")
                && out.stdout.contains("Hello, world!")
                && out.stdout.contains(expect),
            "{args:?}: expected {expect}:\n{}\n{}",
            out.all(),
            ks.proc.log()
        );
    }
    assert!(ks.ops() >= cases.len() as f64, "{}", ks.proc.metrics());
    assert_eq!(
        ks.proc.metric("tlsgate_keyserver_refused_total", &[]),
        0.0,
        "{}",
        ks.proc.log()
    );
}

#[test]
fn each_gateway_identity_signs_only_with_its_permitted_keys() {
    require("openssl");
    let setup = KeylessSetup::new();
    let pki = &setup.pki;
    let (ecdsa, _) = site_key(pki, "ecdsa");
    let (rsa, _) = site_key(pki, "rsa");
    let both = client_cert(pki, "gateway-2", "gateway-2");
    let nobody = client_cert(pki, "gateway-3", "gateway-3");
    let tables = format!(
        "[[client]]\nidentity = \"cn:gateway-1\"\nkeys = [\"ecdsa\"]\n\n[[client]]\nidentity = \"cn:gateway-2\"\nkeys = [\"ecdsa\", \"{}\"]\n",
        tlsgate_keyless::keystore::hex(&rsa)
    );
    let ks = start_keyserver(pki, &setup.files, free_port(), &[&setup.keys], &tables);
    let ks2 = start_keyserver(pki, &setup.files, free_port(), &[&setup.keys], &tables);
    assert!(
        !ks.proc.log().contains("no [[client]] permissions"),
        "{}",
        ks.proc.log()
    );

    let cv = tls13_input(32);
    let signed = |r: Option<Response>| matches!(r, Some(Response::Signature(_)));
    let is_refused = |r: Option<Response>| r == Some(Response::Error(ErrorCode::Refused));
    let mut one = connect(pki, &setup.client, ks.port);
    assert!(signed(sign(&mut one, ecdsa, ECDSA_P256_SHA256, &cv)));
    assert!(is_refused(sign(&mut one, rsa, RSA_PSS_SHA256, &cv)));
    let mut two = connect(pki, &both, ks.port);
    assert!(signed(sign(&mut two, ecdsa, ECDSA_P256_SHA256, &cv)));
    assert!(signed(sign(&mut two, rsa, RSA_PSS_SHA256, &cv)));
    let mut three = connect(pki, &nobody, ks.port);
    assert!(is_refused(sign(&mut three, ecdsa, ECDSA_P256_SHA256, &cv)));
    assert!(is_refused(sign(&mut three, rsa, RSA_PSS_SHA256, &cv)));
    assert_eq!(
        call(&mut three, 9, &Request::Ping(b"up".to_vec())),
        Some(Response::Pong(b"up".to_vec())),
        "a client without permissions is still connected (pings)"
    );
    assert_eq!(refused(&ks, "not_permitted"), 3.0, "{}", ks.proc.metrics());
    assert_eq!(ks.ops(), 3.0);
    assert!(
        ks.proc.log().contains("this client may not use the key"),
        "{}",
        ks.proc.log()
    );

    // A real gateway as gateway-1 (two key servers): ECDSA handshakes work, RSA ones fail at
    // once, without being retried on the other key server.
    let gw = setup.gateway(&[ks.addr(), ks2.addr()], "");
    connected(&gw, 2);
    let ok = gw.s_client("localhost", &["-tls1_3", "-sigalgs", "ecdsa_secp256r1_sha256"]);
    assert!(
        ok.stdout.contains("Hello, world!"),
        "{}\ngateway log:\n{}\nkey server log:\n{}",
        ok.all(),
        gw.gw.log(),
        ks.proc.log()
    );
    let before = refused(&ks, "not_permitted") + refused(&ks2, "not_permitted");
    let bad = gw.s_client("localhost", &["-tls1_3", "-sigalgs", "rsa_pss_rsae_sha256"]);
    assert!(!bad.stdout.contains("Hello, world!"), "{}", bad.all());
    assert_eq!(
        refused(&ks, "not_permitted") + refused(&ks2, "not_permitted"),
        before + 1.0,
        "asked once, not retried"
    );
    assert!(gw.gw.metric("tlsgate_keyless_attempts_total", &["result=\"refused\""]) >= 1.0);
    assert_eq!(gw.gw.metric("tlsgate_keyless_retries_total", &[]), 0.0);
    let log = gw.gw.log();
    assert!(
        log.contains("keyless signature failed") && log.contains("refused"),
        "{log}"
    );
}

#[test]
fn a_key_name_in_client_tables_that_matches_no_key_stops_the_key_server() {
    let setup = KeylessSetup::new();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("keyserver.toml");
    let text = format!(
        "listen = \"127.0.0.1:{}\"\nkeys = [{}]\ncertificate = {}\nkey = {}\nclient_ca = {}\n\n[[client]]\nidentity = \"cn:gateway-1\"\nkeys = [\"ecdsa\", \"ecdsa-typo\"]\n",
        free_port(),
        toml_path(&setup.keys),
        toml_path(&setup.files.cert),
        toml_path(&setup.files.key),
        toml_path(&setup.pki.ca_file()),
    );
    std::fs::write(&config, text).unwrap();
    let out = tlsgate_testkit::run(
        common::binary().to_str().unwrap(),
        &["keyserver", "--config", config.to_str().unwrap()],
        b"",
        Duration::ZERO,
        Duration::from_secs(20),
    );
    assert_ne!(out.status, Some(0), "{}", out.all());
    assert!(out.status.is_some(), "exits instead of serving: {}", out.all());
    assert!(out.all().contains("client[0].keys: \"ecdsa-typo\""), "{}", out.all());
}

/// The key server's resident set size in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS")
}

#[test]
fn a_client_that_never_reads_cannot_grow_the_key_server_and_others_are_served() {
    let setup = KeylessSetup::new();
    let ks = start_keyserver(
        &setup.pki,
        &setup.files,
        free_port(),
        &[&setup.keys],
        "frame_timeout = \"3s\"",
    );
    let (ecdsa, _) = site_key(&setup.pki, "ecdsa");
    let mut good = connect(&setup.pki, &setup.client, ks.port);
    assert!(call(&mut good, 1, &Request::Ping(vec![])).is_some());
    let pid = ks.proc.pid();
    let base = rss_kib(pid);

    // 16 KB pings as fast as they go, never reading an answer, for at most 5 s.
    let mut flood = connect(&setup.pki, &setup.client, ks.port);
    flood.get_ref().set_write_timeout(Some(Duration::from_secs(1))).unwrap();
    let flooder = std::thread::spawn(move || {
        let mut frame = Vec::new();
        encode_request(&mut frame, 7, &Request::Ping(vec![0x55; 16_000])).unwrap();
        let started = Instant::now();
        let mut sent = 0_usize;
        while started.elapsed() < Duration::from_secs(5) && flood.write_all(&frame).is_ok() {
            sent += frame.len();
        }
        (flood, sent)
    });
    let mut peak = base;
    let started = Instant::now();
    while !flooder.is_finished() || started.elapsed() < Duration::from_secs(2) {
        peak = peak.max(rss_kib(pid));
        // Meanwhile another gateway's connection is served.
        assert_eq!(
            call(&mut good, 2, &Request::Ping(b"still here".to_vec())),
            Some(Response::Pong(b"still here".to_vec()))
        );
        assert!(matches!(
            sign(&mut good, ecdsa, ECDSA_P256_SHA256, &tls13_input(32)),
            Some(Response::Signature(_))
        ));
        std::thread::sleep(Duration::from_millis(100));
    }
    let (flood, sent) = flooder.join().unwrap();
    peak = peak.max(rss_kib(pid));
    let grown_mib = (peak.saturating_sub(base)) / 1024;
    assert!(
        grown_mib < 64,
        "RSS grew by {grown_mib} MiB ({base} KiB to {peak} KiB) after {sent} bytes of unread pings\n{}",
        ks.proc.metrics()
    );
    assert!(sent > 512_000, "the flood got going: {sent} bytes");
    assert!(ks.proc.metric("tlsgate_keyserver_read_pauses_total", &[]) >= 1.0);

    // Nothing more can be written to it for frame_timeout: the connection is closed.
    assert!(
        common::wait_until(Duration::from_secs(15), || ks
            .proc
            .metric("tlsgate_keyserver_errors_total", &["kind=\"not_reading\""])
            == 1.0),
        "{}",
        ks.proc.log()
    );
    assert!(
        common::wait_until(Duration::from_secs(5), || ks
            .proc
            .metric("tlsgate_keyserver_connections", &[])
            == 1.0),
        "{}",
        ks.proc.metrics()
    );
    drop(flood);
    assert_eq!(call(&mut good, 3, &Request::Ping(vec![])), Some(Response::Pong(vec![])));
}

/// One plain HTTP/1.1 request to the key server's admin listener; the whole answer.
fn admin_get(port: u16, host: &str, extra: &str) -> String {
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        tcp,
        "GET /metrics HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    let _ = tcp.read_to_string(&mut out);
    out
}

#[test]
fn the_key_server_admin_listener_refuses_foreign_hosts_and_cross_site_requests() {
    let setup = KeylessSetup::new();
    let ks = start_keyserver(&setup.pki, &setup.files, free_port(), &[&setup.keys], "");
    let own = admin_get(ks.admin, &format!("127.0.0.1:{}", ks.admin), "");
    assert!(own.starts_with("HTTP/1.1 200"), "{own}");
    assert!(own.contains("tlsgate_keyserver_"), "{own}");
    // DNS rebinding: a foreign name for the same address.
    let rebound = admin_get(ks.admin, &format!("evil.example:{}", ks.admin), "");
    assert!(rebound.starts_with("HTTP/1.1 421"), "{rebound}");
    assert!(!rebound.contains("tlsgate_keyserver_"), "{rebound}");
    // A page of another site making the browser ask.
    let cross = admin_get(ks.admin, "localhost", "Sec-Fetch-Site: cross-site\r\n");
    assert!(cross.starts_with("HTTP/1.1 403"), "{cross}");
}

/// The message a key server signs to issue a delegated credential for `cert` (whose validity
/// started at `not_before`), ending `lifetime` from now, for a fresh P-256 credential key.
fn credential_input(cert: &X509, not_before: u64, lifetime: u64) -> Vec<u8> {
    use tlsgate_wire::delegated_credential::{signing_input, Credential};
    let group = boring::ec::EcGroup::from_curve_name(boring::nid::Nid::X9_62_PRIME256V1).unwrap();
    let key = boring::pkey::PKey::from_ec_key(boring::ec::EcKey::generate(&group).unwrap()).unwrap();
    let spki = key.public_key_to_der().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let credential = Credential {
        valid_time: u32::try_from(now + lifetime - not_before).unwrap(),
        dc_cert_verify_algorithm: ECDSA_P256_SHA256,
        spki: &spki,
    };
    signing_input(&cert.to_der().unwrap(), &credential, ECDSA_P256_SHA256).unwrap()
}

#[test]
fn credentials_are_issued_only_for_delegation_certificates_and_short_validities() {
    let setup = KeylessSetup::new();
    // A third site key whose certificate carries DelegationUsage.
    let mut spec = tlsgate_tls::pki::CertSpec::leaf(&["localhost"], tlsgate_tls::pki::KeyKind::EcdsaP256, 30);
    spec.extra.push(tlsgate_tls::pki::RawExtension {
        oid: tlsgate_wire::delegated_credential::DELEGATION_USAGE_OID.into(),
        der: vec![0x05, 0x00],
    });
    let not_before = spec.not_before.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let (_, key) = setup.pki.leaf_with("dc", &spec);
    std::fs::rename(&key, setup.keys.join("dc.key")).unwrap();
    let ks = start_keyserver(
        &setup.pki,
        &setup.files,
        free_port(),
        &[&setup.keys],
        "[delegation]\nenabled = true\nmax_validity = \"1h\"\n",
    );
    let (dc, dc_cert) = site_key(&setup.pki, "dc");
    let (ecdsa, ecdsa_cert) = site_key(&setup.pki, "ecdsa");
    let mut s = connect(&setup.pki, &setup.client, ks.port);
    let delegate = |s: &mut SslStream<TcpStream>, key_id: KeyId, payload: &[u8]| {
        let req = Request::Delegate {
            key_id,
            algorithm: ECDSA_P256_SHA256,
            payload: payload.to_vec(),
        };
        call(s, 2, &req)
    };

    // Issued: a ten-minute credential for the delegation certificate, signed by its key.
    let good = credential_input(&dc_cert, not_before, 600);
    match delegate(&mut s, dc, &good) {
        Some(Response::Signature(sig)) => assert!(verify(&dc_cert, ECDSA_P256_SHA256, &good, &sig)),
        other => panic!("credential not issued: {other:?}"),
    }

    // Refused, each for its reason.
    let no_usage = credential_input(&ecdsa_cert, not_before, 600);
    let cases: &[(&str, KeyId, Vec<u8>, &str)] = &[
        ("no DelegationUsage", ecdsa, no_usage, "no_delegation_usage"),
        (
            "two hours (limit 1 h)",
            dc,
            credential_input(&dc_cert, not_before, 7200),
            "credential_validity_too_long",
        ),
        (
            "another key's certificate",
            ecdsa,
            good.clone(),
            "credential_certificate_other_key",
        ),
        ("a CertificateVerify input", dc, tls13_input(32), "not_credential_input"),
    ];
    for (what, key, payload, reason) in cases {
        assert_eq!(
            delegate(&mut s, *key, payload),
            Some(Response::Error(ErrorCode::Refused)),
            "{what}"
        );
        assert!(refused(&ks, reason) >= 1.0, "{what}: {reason}\n{}", ks.proc.metrics());
    }
    // The credential input is no handshake input: a plain sign request for it is refused.
    assert_eq!(
        sign(&mut s, dc, ECDSA_P256_SHA256, &good),
        Some(Response::Error(ErrorCode::Refused))
    );
    assert_eq!(refused(&ks, "not_tls_input"), 1.0);
    assert_eq!(ks.ops(), 0.0, "no handshake signature was made");
    assert_eq!(
        ks.proc.metric("tlsgate_keyserver_delegated_credentials_total", &[]),
        1.0
    );
}

fn new_key_request(names: &[&str]) -> Request {
    let req = tlsgate_keyless::new_key::NewKey {
        kind: tlsgate_keyless::new_key::NewKeyKind::EcdsaP256,
        names: names.iter().map(|n| n.to_string()).collect(),
    };
    Request::NewKey(tlsgate_keyless::new_key::encode(&req).unwrap())
}

/// The key id of a CSR's public key.
fn csr_key_id(csr: &[u8]) -> KeyId {
    let public = boring::x509::X509Req::from_der(csr).unwrap().public_key().unwrap();
    tlsgate_keyless::keystore::key_id(&public).unwrap()
}

#[test]
fn new_keys_are_made_only_where_enabled_for_their_creator_within_a_cap_and_found_across_a_shared_directory() {
    let setup = KeylessSetup::new();
    // No [new_keys]: refused.
    let plain = setup.keyserver();
    let mut s = connect(&setup.pki, &setup.client, plain.port);
    assert_eq!(
        call(&mut s, 1, &new_key_request(&["a.test"])),
        Some(Response::Error(ErrorCode::Refused))
    );
    assert_eq!(refused(&plain, "new_keys_disabled"), 1.0);

    let shared = setup.pki.path("created");
    let extra = format!("[new_keys]\ndir = {}\nmax_per_client = 2\n", toml_path(&shared));
    let ks = start_keyserver(&setup.pki, &setup.files, free_port(), &[&setup.keys], &extra);
    let mut s = connect(&setup.pki, &setup.client, ks.port);
    // A payload that is not lower-case DNS names: refused before any key is made.
    let bad = Request::NewKey(vec![1, 1, 5, b'A', b'.', b'T', b'S', b'T']);
    assert_eq!(call(&mut s, 2, &bad), Some(Response::Error(ErrorCode::Refused)));
    assert_eq!(refused(&ks, "new_key_name"), 1.0);
    // Two keys for this gateway, then the cap.
    let mut ids = Vec::new();
    for id in 3..5 {
        match call(&mut s, id, &new_key_request(&["a.test", "www.a.test"])) {
            Some(Response::Created(csr)) => ids.push(csr_key_id(&csr)),
            other => panic!("no key created: {other:?}"),
        }
    }
    assert_eq!(
        call(&mut s, 5, &new_key_request(&["a.test"])),
        Some(Response::Error(ErrorCode::Refused))
    );
    assert_eq!(refused(&ks, "new_key_limit"), 1.0);
    assert_eq!(ks.proc.metric("tlsgate_keyserver_keys_created_total", &[]), 2.0);
    // Its creator signs with it; another gateway identity may not.
    assert!(matches!(
        sign(&mut s, ids[0], ECDSA_P256_SHA256, &tls13_input(32)),
        Some(Response::Signature(_))
    ));
    let other = client_cert(&setup.pki, "other-gateway", "gateway-2");
    let mut o = connect(&setup.pki, &other, ks.port);
    assert_eq!(
        sign(&mut o, ids[0], ECDSA_P256_SHA256, &tls13_input(32)),
        Some(Response::Error(ErrorCode::Refused))
    );
    assert!(refused(&ks, "not_permitted") >= 1.0);
    // A second key server, started before the key existed and sharing the directory, finds it
    // when asked to sign with it.
    let empty = setup.pki.path("empty-keys");
    std::fs::create_dir_all(&empty).unwrap();
    let ks2 = start_keyserver(&setup.pki, &setup.files, free_port(), &[&empty], &extra);
    let third = client_cert(&setup.pki, "third-gateway", "gateway-3");
    let mut t = connect(&setup.pki, &third, ks.port);
    let late = match call(&mut t, 7, &new_key_request(&["b.test"])) {
        Some(Response::Created(csr)) => csr_key_id(&csr),
        other => panic!("no key created: {other:?}"),
    };
    let mut t2 = connect(&setup.pki, &third, ks2.port);
    let answer = sign(&mut t2, late, ECDSA_P256_SHA256, &tls13_input(32));
    assert!(
        matches!(answer, Some(Response::Signature(_))),
        "{answer:?}\n{}",
        ks2.proc.log()
    );
    assert!(ks2.proc.log().contains("key created by another key server loaded"));
}
