//! Issue 17 item 5 and issue 15's `client_cert`: client certificates from downstream
//! (`[site.client_auth]`), with real gateways, an echo origin, `openssl s_client` and curl.
//!
//! - `required`: no certificate fails the handshake (TLS 1.3 `certificate_required`, TLS 1.2
//!   `handshake_failure`), so does one from another CA; both are counted by reason.
//! - A verified certificate reaches the origin as the subject and fingerprint headers (HTTP/1.1
//!   and HTTP/2), equal to what `openssl x509` prints; headers of those names sent by the client
//!   are always removed, with or without a certificate; the access log's `client_cert` shows the
//!   subject, `-` without one.
//! - `optional`: no certificate is served without an identity; a bad one still fails.
//! - Resumption (TLS 1.3 ticket, TLS 1.2 ticket and session ID) keeps the identity, with the
//!   client presenting no certificate on the resumed connection; across two gateways sharing
//!   redis and the cluster secret too.
//! - A session made without client certificates (another site, or this site before a reload that
//!   requires them) never resumes where one is required.
//! - `tlsgate check` names `site[i].client_auth.ca` when it is missing, absent or not PEM.

mod common;

use common::{
    binary, config_with_certs, existing_site_certs, extra_site, s_client_at, session_lines, site_certs, start_with,
    upstream, upstream_route, wait_until, Fixture,
};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tlsgate_testkit::{free_port, require, toml_path, GatewayProcess, Origin, Output, StoreProcess, TestPki};
use tlsgate_tls::pki::KeyKind;

const REQUIRED: &str = "mode = \"required\"\n";
const OPTIONAL: &str = "mode = \"optional\"\n";
const JSON_LOG: &str = "[log]\nformat = \"json\"\n";
const GET_ECHO: &str =
    "GET /echo HTTP/1.1\r\nHost: localhost\r\nX-Client-Cert-Subject: CN=forged\r\nConnection: close\r\n\r\n";

/// A client CA with a client `alice`; a rogue CA with a client of the same name; an impostor CA
/// with the client CA's very name (but its own key), and an `alice` of its own.
struct Clients {
    pki: TestPki,
    alice: (PathBuf, PathBuf),
    rogue: (PathBuf, PathBuf),
    impostor: (PathBuf, PathBuf),
    _others: [TestPki; 2],
}

impl Clients {
    fn new() -> Self {
        let pki = TestPki::with_ca_name("client CA");
        let alice = pki.client("alice", "alice");
        let rogue_pki = TestPki::with_ca_name("rogue CA");
        let rogue = rogue_pki.client("mallory", "alice");
        let impostor_pki = TestPki::with_ca_name("client CA");
        let impostor = impostor_pki.client("impostor", "alice");
        Self {
            pki,
            alice,
            rogue,
            impostor,
            _others: [rogue_pki, impostor_pki],
        }
    }

    /// The `[site.client_auth]` table with `mode` lines, trusting this client CA.
    fn table(&self, mode: &str) -> String {
        format!("[site.client_auth]\n{mode}ca = {}\n", toml_path(&self.pki.ca_file()))
    }

    /// `openssl x509 -noout -subject -nameopt RFC2253` of alice's certificate.
    fn alice_subject(&self) -> String {
        let out = openssl_x509(&self.alice.0, &["-subject", "-nameopt", "RFC2253"]);
        out.trim().strip_prefix("subject=").expect("subject line").to_string()
    }

    /// `openssl x509 -fingerprint -sha256` of alice's certificate, as lowercase hex.
    fn alice_sha256(&self) -> String {
        let out = openssl_x509(&self.alice.0, &["-fingerprint", "-sha256"]);
        let hex = out.trim().split_once('=').expect("fingerprint line").1;
        hex.replace(':', "").to_ascii_lowercase()
    }
}

fn openssl_x509(cert: &Path, args: &[&str]) -> String {
    let mut all = vec!["x509", "-noout", "-in", cert.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = tlsgate_testkit::run("openssl", &all, b"", Duration::ZERO, Duration::from_secs(10));
    assert_eq!(out.status, Some(0), "{}", out.all());
    out.stdout
}

/// A gateway whose site `main` (localhost) has `table` and forwards `/echo` to an echo origin,
/// beside a site `open` (open.test) without client certificates. `top` goes first.
fn gateway(top: &str, table: &str) -> (Fixture, Origin) {
    require("openssl");
    require("curl");
    let origin = Origin::start("echo");
    let addr = origin.addr();
    let f = start_with(top, |pki| {
        format!(
            "{table}{}{}{}",
            upstream_route(None, "/echo", "echo"),
            extra_site(pki, "open", &["open.test"], &[KeyKind::EcdsaP256]),
            upstream("echo", &[addr], "")
        )
    });
    (f, origin)
}

fn s_client(f: &Fixture, args: &[&str], stdin: &str) -> Output {
    s_client_at(&f.connect(), &f.pki.ca_file(), args, stdin)
}

fn with_cert<'a>(pair: &'a (PathBuf, PathBuf), args: &[&'a str]) -> Vec<&'a str> {
    let mut all = vec!["-cert", pair.0.to_str().unwrap(), "-key", pair.1.to_str().unwrap()];
    all.extend_from_slice(args);
    all
}

fn curl_cert<'a>(pair: &'a (PathBuf, PathBuf), args: &[&'a str]) -> Vec<&'a str> {
    let mut all = vec!["--cert", pair.0.to_str().unwrap(), "--key", pair.1.to_str().unwrap()];
    all.extend_from_slice(args);
    all
}

/// The values of header `name` in the echo origin's reply.
fn echoed<'a>(body: &'a str, name: &str) -> Vec<&'a str> {
    let prefix = format!("{name}: ");
    body.lines().filter_map(|l| l.strip_prefix(prefix.as_str())).collect()
}

/// Sessions the gateway found for what clients offered (tickets it decrypted, session IDs its
/// cache held), whether it then resumed them or not: proof that a session was offered at all.
fn sessions_found(gw: &GatewayProcess) -> f64 {
    let state = |name: &str| gw.metric("tlsgate_state", &[&format!("name=\"{name}\"")]);
    state("tickets_accepted_total") + state("session_cache_hits_total")
}

fn failures(f: &Fixture, reason: &str) -> f64 {
    f.gw.metric("tlsgate_handshake_failures_total", &[&format!("reason=\"{reason}\"")])
}

/// The JSON access line of the `n`-th request (0-based) so far, waiting for it.
fn access_line(f: &Fixture, n: usize) -> Value {
    let lines = || -> Vec<Value> {
        f.gw.log()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["target"] == "access")
            .collect()
    };
    assert!(
        wait_until(Duration::from_secs(10), || lines().len() > n),
        "no access line {n}:\n{}",
        f.gw.log()
    );
    lines()[n].clone()
}

fn client_cert_field(line: &Value) -> String {
    let field = line.get("client_cert").or_else(|| line["fields"].get("client_cert"));
    field.and_then(Value::as_str).expect("client_cert field").to_string()
}

#[test]
fn required_refuses_handshakes_without_a_valid_certificate() {
    let clients = Clients::new();
    let (f, origin) = gateway("", &clients.table(REQUIRED));
    let tls13 = s_client(&f, &["-servername", "localhost", "-tls1_3"], GET_ECHO);
    assert!(
        tls13.all().contains("certificate required"),
        "TLS 1.3 without a certificate: alert certificate_required expected:\n{}",
        tls13.all()
    );
    let tls12 = s_client(&f, &["-servername", "localhost", "-tls1_2"], GET_ECHO);
    assert!(
        tls12.all().contains("handshake failure"),
        "TLS 1.2 without a certificate: alert handshake_failure expected:\n{}",
        tls12.all()
    );
    assert_eq!(failures(&f, "client_cert_missing"), 2.0);
    let rogue = f.curl(&curl_cert(&clients.rogue, &[]), "/echo");
    assert_ne!(
        rogue.status,
        Some(0),
        "a certificate of another CA was accepted:\n{}",
        rogue.all()
    );
    // The alert names the reason, in both versions (TLS 1.3 clients see it after their Finished).
    for version in ["-tls1_3", "-tls1_2"] {
        let args = with_cert(&clients.rogue, &["-servername", "localhost", version]);
        let out = s_client(&f, &args, GET_ECHO);
        assert!(out.all().contains("alert unknown ca"), "{version}:\n{}", out.all());
        assert!(!out.stdout.contains("origin=echo"), "{}", out.all());
    }
    // A CA named like the trusted one does not pass for it (its signature does not verify).
    let impostor = f.curl(&curl_cert(&clients.impostor, &[]), "/echo");
    assert_ne!(
        impostor.status,
        Some(0),
        "an impostor CA's client was accepted:\n{}",
        impostor.all()
    );
    assert_eq!(failures(&f, "client_cert_invalid"), 4.0);
    assert_eq!(origin.count(), 0, "nothing reached the origin");
    // The site without client certificates on the same listener is unaffected.
    let open = f.curl_host("open.test", &[], "/");
    assert_eq!(open.stdout, "site open", "{}", open.all());
}

#[test]
fn the_verified_identity_reaches_the_origin_and_forged_headers_never_do() {
    let clients = Clients::new();
    let (f, _origin) = gateway(JSON_LOG, &clients.table(REQUIRED));
    let (subject, sha256) = (clients.alice_subject(), clients.alice_sha256());
    assert_eq!(subject, "O=tlsgate,CN=alice");
    let forged = [
        "-H",
        "X-Client-Cert-Subject: CN=admin",
        "-H",
        "x-client-cert-subject: CN=root",
        "-H",
        "X-Client-Cert-Sha256: 00",
    ];
    for (i, version) in ["--http1.1", "--http2"].into_iter().enumerate() {
        let mut args = vec![version];
        args.extend_from_slice(&forged);
        let out = f.curl(&curl_cert(&clients.alice, &args), "/echo");
        assert_eq!(out.status, Some(0), "{}", out.all());
        assert_eq!(
            echoed(&out.stdout, "x-client-cert-subject"),
            [subject.as_str()],
            "{version}:\n{}",
            out.stdout
        );
        assert_eq!(
            echoed(&out.stdout, "x-client-cert-sha256"),
            [sha256.as_str()],
            "{version}:\n{}",
            out.stdout
        );
        assert_eq!(client_cert_field(&access_line(&f, i)), subject);
    }
    // openssl s_client over HTTP/1.1 with the forged header in the request.
    let out = s_client(&f, &with_cert(&clients.alice, &["-servername", "localhost"]), GET_ECHO);
    assert_eq!(
        echoed(&out.stdout, "x-client-cert-subject"),
        [subject.as_str()],
        "{}",
        out.all()
    );
}

#[test]
fn optional_serves_clients_without_a_certificate_without_an_identity() {
    let clients = Clients::new();
    let (f, origin) = gateway(JSON_LOG, &clients.table(OPTIONAL));
    let out = f.curl(
        &[
            "-H",
            "X-Client-Cert-Subject: CN=admin",
            "-H",
            "X-Client-Cert-Sha256: 00",
        ],
        "/echo",
    );
    assert_eq!(out.status, Some(0), "{}", out.all());
    assert!(out.stdout.contains("origin=echo"), "{}", out.all());
    assert!(
        echoed(&out.stdout, "x-client-cert-subject").is_empty(),
        "forged subject forwarded:\n{}",
        out.stdout
    );
    assert!(
        echoed(&out.stdout, "x-client-cert-sha256").is_empty(),
        "forged fingerprint forwarded:\n{}",
        out.stdout
    );
    assert_eq!(client_cert_field(&access_line(&f, 0)), "-");
    let out = f.curl(&curl_cert(&clients.alice, &[]), "/echo");
    assert_eq!(
        echoed(&out.stdout, "x-client-cert-subject"),
        [clients.alice_subject().as_str()],
        "{}",
        out.all()
    );
    assert_eq!(client_cert_field(&access_line(&f, 1)), clients.alice_subject());
    // An invalid certificate fails the handshake in optional mode too (as nginx and HAProxy do).
    let rogue = f.curl(&curl_cert(&clients.rogue, &[]), "/echo");
    assert_ne!(rogue.status, Some(0), "{}", rogue.all());
    assert_eq!(failures(&f, "client_cert_invalid"), 1.0);
    assert_eq!(origin.count(), 2);
}

/// Saves alice's session from a full handshake on `connect` to `file` (with her certificate).
fn save_session(connect: &str, ca: &Path, clients: &Clients, args: &[&str], file: &Path) {
    let mut all = with_cert(
        &clients.alice,
        &["-servername", "localhost", "-sess_out", file.to_str().unwrap()],
    );
    all.extend_from_slice(args);
    let out = s_client_at(connect, ca, &all, GET_ECHO);
    let lines = session_lines(&out.stdout);
    assert!(lines.len() == 1 && lines[0].starts_with("New, "), "{}", out.all());
    assert_eq!(
        echoed(&out.stdout, "x-client-cert-subject"),
        [clients.alice_subject().as_str()],
        "{}",
        out.all()
    );
}

/// Offers the session in `file` to `connect` WITHOUT a certificate; returns whether it resumed and
/// the subject the origin received.
fn resume_without_cert(connect: &str, ca: &Path, args: &[&str], file: &Path) -> (bool, Vec<String>, Output) {
    let mut all = vec!["-servername", "localhost", "-sess_in", file.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = s_client_at(connect, ca, &all, GET_ECHO);
    let reused = session_lines(&out.stdout)
        .first()
        .is_some_and(|l| l.starts_with("Reused, "));
    let subjects = echoed(&out.stdout, "x-client-cert-subject")
        .into_iter()
        .map(str::to_string)
        .collect();
    (reused, subjects, out)
}

const RESUMPTIONS: [&[&str]; 3] = [&["-tls1_3"], &["-tls1_2"], &["-tls1_2", "-no_ticket"]];

#[test]
fn resumption_keeps_the_identity_without_the_certificate_being_sent_again() {
    let clients = Clients::new();
    let (f, _origin) = gateway(JSON_LOG, &clients.table(REQUIRED));
    for (i, args) in RESUMPTIONS.into_iter().enumerate() {
        let file = f.pki.path(&format!("s{i}.sess"));
        save_session(&f.connect(), &f.pki.ca_file(), &clients, args, &file);
        let (reused, subjects, out) = resume_without_cert(&f.connect(), &f.pki.ca_file(), args, &file);
        assert!(reused, "{args:?}: not resumed:\n{}", out.all());
        assert_eq!(subjects, [clients.alice_subject()], "{args:?}:\n{}", out.all());
        assert_eq!(client_cert_field(&access_line(&f, 2 * i + 1)), clients.alice_subject());
    }
    for outcome in ["tls13_psk", "ticket", "session_id"] {
        let n =
            f.gw.metric("tlsgate_handshakes_total", &[&format!("outcome=\"{outcome}\"")]);
        assert_eq!(n, 1.0, "{outcome}");
    }
}

#[test]
fn sessions_made_without_client_certificates_never_resume_where_one_is_required() {
    let clients = Clients::new();
    let (f, _origin) = gateway("", &clients.table(REQUIRED));
    for (i, args) in [&["-tls1_3"][..], &["-tls1_2", "-no_ticket"]].into_iter().enumerate() {
        // A session of the site without client certificates, offered to the one that requires them.
        let file = f.pki.path(&format!("open{i}.sess"));
        let mut save = vec!["-servername", "open.test", "-sess_out", file.to_str().unwrap()];
        save.extend_from_slice(args);
        let out = s_client(
            &f,
            &save,
            "GET / HTTP/1.1\r\nHost: open.test\r\nConnection: close\r\n\r\n",
        );
        assert!(out.stdout.contains("site open"), "{}", out.all());
        let found = sessions_found(&f.gw);
        let (reused, subjects, out) = resume_without_cert(&f.connect(), &f.pki.ca_file(), args, &file);
        assert!(
            !reused && subjects.is_empty(),
            "{args:?}: another site's session let a client in:\n{}",
            out.all()
        );
        assert_eq!(
            sessions_found(&f.gw),
            found + 1.0,
            "{args:?}: the session was not even offered"
        );
        // With a certificate the client is asked for it: a full handshake with the identity.
        let mut offer = with_cert(
            &clients.alice,
            &["-servername", "localhost", "-sess_in", file.to_str().unwrap()],
        );
        offer.extend_from_slice(args);
        let out = s_client(&f, &offer, GET_ECHO);
        let lines = session_lines(&out.stdout);
        assert!(
            lines.len() == 1 && lines[0].starts_with("New, "),
            "{args:?}:\n{}",
            out.all()
        );
        assert_eq!(
            echoed(&out.stdout, "x-client-cert-subject"),
            [clients.alice_subject().as_str()]
        );
    }
}

#[test]
fn a_reload_that_requires_certificates_does_not_honour_older_sessions() {
    let clients = Clients::new();
    let (f, _origin) = gateway("", &clients.table("mode = \"off\"\n"));
    let files: Vec<PathBuf> = (0..RESUMPTIONS.len())
        .map(|i| f.pki.path(&format!("before{i}.sess")))
        .collect();
    for (args, file) in RESUMPTIONS.iter().zip(&files) {
        let mut save = vec!["-servername", "localhost", "-sess_out", file.to_str().unwrap()];
        save.extend_from_slice(args);
        let out = s_client(&f, &save, GET_ECHO);
        assert!(out.stdout.contains("origin=echo"), "{}", out.all());
        // mode = "off" with the table present: forged identity headers are removed all the same.
        assert!(echoed(&out.stdout, "x-client-cert-subject").is_empty(), "{}", out.all());
        // Resumable while nothing changed.
        let (reused, _, out) = resume_without_cert(&f.connect(), &f.pki.ca_file(), args, file);
        assert!(reused, "{args:?}:\n{}", out.all());
    }
    let text = std::fs::read_to_string(&f.gw.config).unwrap();
    f.write_config(&text.replace("mode = \"off\"", "mode = \"required\""));
    let (status, body) = f.gw.reload();
    assert_eq!(status, 200, "{body}");
    for (args, file) in RESUMPTIONS.iter().zip(&files) {
        let found = sessions_found(&f.gw);
        let (reused, subjects, out) = resume_without_cert(&f.connect(), &f.pki.ca_file(), args, file);
        assert_eq!(
            sessions_found(&f.gw),
            found + 1.0,
            "{args:?}: the session was not even offered"
        );
        assert!(
            !reused && subjects.is_empty(),
            "{args:?}: a session from before the reload skipped the certificate:\n{}",
            out.all()
        );
    }
    assert_eq!(failures(&f, "client_cert_missing"), RESUMPTIONS.len() as f64);
}

/// Two gateways with the same certificates, client CA, redis and cluster secret.
#[test]
fn a_session_from_one_node_resumes_on_another_with_the_identity() {
    require("redis-server");
    let redis = StoreProcess::redis();
    let clients = Clients::new();
    let pki = TestPki::new();
    let _ = site_certs(&pki);
    let secret = pki.write("cluster.key", &format!("{}\n", "5a".repeat(32)));
    let origin = Origin::start("echo");
    let node = || {
        let (https, admin) = (free_port(), free_port());
        let top = format!(
            "{JSON_LOG}[cluster]\nsecret_files = [{}]\nstore = \"redis\"\nservers = [\"{}\"]\nlookup_timeout = \"200ms\"\n\
             breaker_retry = \"200ms\"\n",
            toml_path(&secret),
            redis.redis_url()
        );
        let routes = format!(
            "{}{}{}",
            clients.table(REQUIRED),
            upstream_route(None, "/echo", "echo"),
            upstream("echo", &[origin.addr()], "")
        );
        let text = config_with_certs(&existing_site_certs(&pki), https, admin, &top, &routes);
        let gw = GatewayProcess::start(binary(), &text, admin, &[https]);
        let state = |gw: &GatewayProcess, name: &str| gw.metric("tlsgate_state", &[&format!("name=\"{name}\"")]);
        assert!(
            wait_until(Duration::from_secs(10), || state(&gw, "session_store_breaker_open")
                == 0.0),
            "store never connected:\n{}",
            gw.log()
        );
        (format!("127.0.0.1:{https}"), gw)
    };
    let (a, gw_a) = node();
    let (b, gw_b) = node();
    let ca = pki.ca_file();
    for (i, args) in RESUMPTIONS.into_iter().enumerate() {
        let file = pki.path(&format!("cluster{i}.sess"));
        save_session(&a, &ca, &clients, args, &file);
        if args.contains(&"-no_ticket") {
            let written = || gw_a.metric("tlsgate_state", &["name=\"session_store_write_ok_total\""]);
            assert!(
                wait_until(Duration::from_secs(5), || written() >= 1.0),
                "{}",
                gw_a.log()
            );
        }
        let (reused, subjects, out) = resume_without_cert(&b, &ca, args, &file);
        assert!(
            reused,
            "{args:?}: B did not resume A's session:\n{}\n{}",
            out.all(),
            gw_b.log()
        );
        assert_eq!(subjects, [clients.alice_subject()], "{args:?}:\n{}", out.all());
    }
    let hit = gw_b.metric("tlsgate_state", &["name=\"session_store_lookup_hit_total\""]);
    assert_eq!(hit, 1.0, "the session-ID resumption came through redis");
}

fn check(text: &str, dir: &Path) -> Output {
    let path = dir.join("tlsgate.toml");
    std::fs::write(&path, text).unwrap();
    common::tlsgate(&["check", "--config", path.to_str().unwrap()])
}

#[test]
fn check_names_the_client_ca_field() {
    let clients = Clients::new();
    let pki = TestPki::new();
    let config = |table: &str| config_with_certs(&site_certs(&pki), free_port(), free_port(), "", table);
    let dir = pki.dir.path();
    let missing = check(&config("[site.client_auth]\nmode = \"required\"\n"), dir);
    assert_eq!(missing.status, Some(1), "{}", missing.all());
    assert!(
        missing.stdout.contains("error: site[0].client_auth.ca: a PEM file"),
        "{}",
        missing.all()
    );
    let absent = check(
        &config(&format!("[site.client_auth]\n{REQUIRED}ca = \"/nonexistent/ca.pem\"\n")),
        dir,
    );
    assert_eq!(absent.status, Some(1), "{}", absent.all());
    assert!(
        absent
            .stdout
            .contains("error: site[0].client_auth.ca: /nonexistent/ca.pem: no such file"),
        "{}",
        absent.all()
    );
    assert_eq!(
        absent.stdout.matches("client_auth.ca").count(),
        1,
        "reported once:\n{}",
        absent.all()
    );
    let garbage = pki.write("garbage.pem", "not a certificate\n");
    let unloadable = check(
        &config(&format!("[site.client_auth]\n{REQUIRED}ca = {}\n", toml_path(&garbage))),
        dir,
    );
    assert_eq!(unloadable.status, Some(1), "{}", unloadable.all());
    assert!(
        unloadable.stdout.contains("error: site[0].client_auth.ca: ") && unloadable.stdout.contains("garbage.pem"),
        "{}",
        unloadable.all()
    );
    let good = check(&config(&clients.table(REQUIRED)), dir);
    assert!(!good.stdout.contains("client_auth"), "{}", good.all());
}
