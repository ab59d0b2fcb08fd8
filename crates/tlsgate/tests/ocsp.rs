//! Issue 3, item 4: OCSP stapling. The gateway fetches each certificate's OCSP response from a
//! real `openssl ocsp` responder started by the test (named in the certificate's Authority
//! Information Access, or configured), checks it and staples it; `openssl s_client -status`
//! reads the staple back. Responses that real responders do not produce on demand (expiring in
//! seconds, long expired) come from the test PKI and are served by a minimal HTTP responder or
//! a file.

mod common;

use common::{cert_block, wait_until, Fixture};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tlsgate_testkit::{free_port, require, toml_path, GatewayProcess, TestPki};
use tlsgate_tls::pki::{ocsp_response, CertSpec, Certified, KeyKind, OcspStatus};

const WAIT: Duration = Duration::from_secs(20);

/// The fixture's root CA, an intermediate under it (the issuer of every leaf, and the CA the
/// responder answers for), and its files `inter.pem` / `inter.key`.
fn ocsp_pki() -> (TestPki, Certified) {
    require("openssl");
    let pki = TestPki::new();
    let inter = Certified::issue(
        &CertSpec::ca("tlsgate test intermediate", KeyKind::EcdsaP256, 30),
        Some(&pki.ca),
    )
    .expect("intermediate");
    pki.write("inter.pem", &inter.cert_pem);
    pki.write("inter.key", &inter.key_pem);
    pki.write("root.key", &pki.ca.key_pem);
    (pki, inter)
}

struct Leaf {
    cert: Certified,
    chain: PathBuf,
    key: PathBuf,
    /// Serial in openssl's notation (upper-case hex), as in the index and in `s_client -status`.
    serial: String,
}

/// A leaf for localhost issued by the intermediate; the chain file holds leaf + intermediate.
/// `ocsp_url` goes into Authority Information Access.
fn leaf(pki: &TestPki, inter: &Certified, stem: &str, kind: KeyKind, ocsp_url: Option<String>) -> Leaf {
    let mut spec = CertSpec::leaf(&["localhost", "127.0.0.1"], kind, 30);
    spec.ocsp_url = ocsp_url;
    let cert = Certified::issue(&spec, Some(inter)).expect("leaf");
    let (chain, key) = pki.write_pair(stem, &format!("{}{}", cert.cert_pem, inter.cert_pem), &cert.key_pem);
    let out = tlsgate_testkit::run(
        "openssl",
        &["x509", "-noout", "-serial", "-in", chain.to_str().unwrap()],
        b"",
        Duration::ZERO,
        Duration::from_secs(10),
    );
    let serial = out
        .stdout
        .trim()
        .strip_prefix("serial=")
        .unwrap_or_else(|| panic!("no serial: {}", out.all()))
        .to_string();
    Leaf {
        cert,
        chain,
        key,
        serial,
    }
}

/// openssl's responder database: one `V` (valid) or `R` (revoked) line per leaf.
fn index(pki: &TestPki, name: &str, entries: &[(&Leaf, bool)]) -> PathBuf {
    let mut text = String::new();
    for (leaf, revoked) in entries {
        let (flag, revoked_at) = if *revoked { ("R", "240101000000Z") } else { ("V", "") };
        text.push_str(&format!(
            "{flag}\t351231235959Z\t{revoked_at}\t{serial}\tunknown\t/CN=leaf-{serial}\n",
            serial = leaf.serial
        ));
    }
    pki.write(name, &text)
}

/// A real `openssl ocsp` responder on a loopback port; killed on drop.
struct Responder {
    child: Option<Child>,
    port: u16,
    args: Vec<String>,
    log: PathBuf,
}

impl Responder {
    /// Answers on `port` for the intermediate from `index`, signing with `signer` (`inter`, or
    /// another certificate file stem in the PKI directory), responses valid for a day.
    fn start(pki: &TestPki, index: &Path, signer: &str, port: u16) -> Self {
        let p = |name: &str| pki.path(name).to_str().unwrap().to_string();
        let args = vec![
            "ocsp".into(),
            "-index".into(),
            index.to_str().unwrap().into(),
            "-CA".into(),
            p("inter.pem"),
            "-rsigner".into(),
            p(&format!("{signer}.pem")),
            "-rkey".into(),
            p(&format!("{signer}.key")),
            "-port".into(),
            port.to_string(),
            "-ndays".into(),
            "1".into(),
        ];
        let mut r = Self {
            child: None,
            port,
            args,
            log: pki.path(&format!("responder-{port}.log")),
        };
        r.restart();
        r
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    fn restart(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("responder log");
        let ready = self.log_text().matches("waiting for OCSP client connections").count() + 1;
        let child = Command::new("openssl")
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("dup"))
            .stderr(log)
            .spawn()
            .expect("start openssl ocsp");
        self.child = Some(child);
        // Not a connect probe: a connection closed without a request wedges `openssl ocsp`.
        let up = wait_until(Duration::from_secs(10), || {
            self.log_text().matches("waiting for OCSP client connections").count() >= ready
        });
        assert!(up, "openssl ocsp did not listen: {}", self.log_text());
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A minimal HTTP responder answering every POST with the current `body` (a DER response made
/// by the test PKI); stopped (port closed) on drop.
struct FakeResponder {
    port: u16,
    body: Arc<Mutex<Vec<u8>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeResponder {
    fn start(port: u16, body: Vec<u8>) -> Self {
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind fake responder");
        listener.set_nonblocking(true).expect("nonblocking");
        let body = Arc::new(Mutex::new(body));
        let stop = Arc::new(AtomicBool::new(false));
        let (b, s) = (body.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => answer(conn, &b.lock().unwrap()),
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Self {
            port,
            body,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/ocsp", self.port)
    }

    fn set(&self, body: Vec<u8>) {
        *self.body.lock().unwrap() = body;
    }
}

fn answer(mut conn: TcpStream, body: &[u8]) {
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let mut request = Vec::new();
    let mut chunk = [0u8; 4096];
    // Read the header, then Content-Length bytes of body.
    loop {
        let Ok(n) = conn.read(&mut chunk) else { return };
        if n == 0 {
            return;
        }
        request.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&request).to_ascii_lowercase();
        if let Some(end) = text.find("\r\n\r\n") {
            let length: usize = text
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if request.len() >= end + 4 + length {
                break;
            }
        }
    }
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/ocsp-response\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = conn.write_all(head.as_bytes());
    let _ = conn.write_all(body);
}

impl Drop for FakeResponder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A gateway serving site `main` (localhost) with the given `[[site.certificate]]` blocks.
fn serve(pki: TestPki, certs: &str) -> Fixture {
    let (https, admin) = (free_port(), free_port());
    let text = common::config_with_certs(certs, https, admin, "", "");
    let gw = GatewayProcess::start(common::binary(), &text, admin, &[https]);
    Fixture { pki, https, admin, gw }
}

/// A `[[site.certificate]]` block for `leaf` with extra `ocsp*` lines.
fn cert(leaf: &Leaf, extra: &str) -> String {
    format!("{}{extra}\n", cert_block(&leaf.chain, &leaf.key))
}

fn fetches(f: &Fixture, outcome: &str) -> f64 {
    f.gw.metric("tlsgate_ocsp_fetches_total", &[&format!("outcome=\"{outcome}\"")])
}

/// `openssl s_client -status` (SNI localhost, chain verified against the root) plus `args`;
/// returns stdout after checking the handshake verified.
fn status(f: &Fixture, args: &[&str]) -> String {
    let mut all = vec!["-servername", "localhost", "-status", "-verify_return_error"];
    all.extend_from_slice(args);
    let out = f.s_client(&all, "");
    assert!(
        out.stdout.contains("Verify return code: 0 (ok)"),
        "{}\n--- gateway log ---\n{}",
        out.all(),
        f.gw.log()
    );
    out.stdout
}

/// Whether `s_client -status` output shows a stapled `good` response for `serial`.
fn stapled_good(out: &str, serial: &str) -> bool {
    out.contains("OCSP Response Status: successful")
        && out.contains("Cert Status: good")
        && out.contains(&format!("Serial Number: {serial}"))
}

fn no_staple(out: &str) -> bool {
    out.contains("OCSP response: no response sent")
}

fn warnings(log: &str, needle: &str) -> usize {
    log.lines()
        .filter(|l| l.contains(" WARN ") && l.contains(needle))
        .count()
}

#[test]
fn responder_staple_is_served_per_certificate_to_clients_that_ask() {
    let (pki, inter) = ocsp_pki();
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/");
    let ec = leaf(&pki, &inter, "ec", KeyKind::EcdsaP256, Some(url.clone()));
    let rsa = leaf(&pki, &inter, "rsa", KeyKind::Rsa(2048), Some(url));
    let idx = index(&pki, "index.txt", &[(&ec, false), (&rsa, false)]);
    let _responder = Responder::start(&pki, &idx, "inter", port);
    let f = serve(pki, &format!("{}{}", cert(&ec, ""), cert(&rsa, "")));
    assert!(
        wait_until(WAIT, || fetches(&f, "ok") >= 2.0),
        "{}\n{}",
        f.gw.metrics(),
        f.gw.log()
    );

    let out = status(&f, &["-tls1_3"]);
    assert!(stapled_good(&out, &ec.serial), "TLS 1.3, ECDSA:\n{out}");
    let out = status(&f, &["-tls1_2"]);
    assert!(stapled_good(&out, &ec.serial), "TLS 1.2, ECDSA:\n{out}");
    let out = status(&f, &["-tls1_3", "-sigalgs", "RSA-PSS+SHA256"]);
    assert!(
        stapled_good(&out, &rsa.serial),
        "TLS 1.3, RSA gets the RSA leaf's staple:\n{out}"
    );
    let out = status(&f, &["-tls1_2", "-cipher", "ECDHE-RSA-AES128-GCM-SHA256"]);
    assert!(stapled_good(&out, &rsa.serial), "TLS 1.2, RSA:\n{out}");

    // A client that does not ask gets no staple (and is not counted).
    let plain = f.s_client(&["-servername", "localhost", "-tls1_3"], "");
    assert!(plain.stdout.contains("Verify return code: 0 (ok)"), "{}", plain.all());
    assert!(!plain.stdout.contains("OCSP"), "{}", plain.stdout);

    let m = f.gw.metrics();
    let metric = |name: &str, labels: &[&str]| tlsgate_testkit::process::metric_sum(&m, name, labels);
    for cert in ["ecdsa_p256", "rsa"] {
        let labels = ["site=\"main\"", &format!("cert=\"{cert}\"")];
        assert_eq!(metric("tlsgate_ocsp_staple_present", &labels), 1.0, "{cert}\n{m}");
        assert!(
            m.contains(&format!(
                "tlsgate_ocsp_staple_age_seconds{{site=\"main\",cert=\"{cert}\"}}"
            )),
            "{m}"
        );
        assert_eq!(
            metric("tlsgate_ocsp_stapled_handshakes_total", &labels),
            2.0,
            "{cert}\n{m}"
        );
        // The handshake counter carries the same fact per site and certificate type.
        assert_eq!(
            metric(
                "tlsgate_handshakes_total",
                &["site=\"main\"", &format!("cert=\"{cert}\""), "stapled=\"yes\""]
            ),
            2.0,
            "{cert}\n{m}"
        );
    }
    assert_eq!(
        metric("tlsgate_ocsp_fetches_total", &["outcome=\"unreachable\""]),
        0.0,
        "{m}"
    );
    assert!(f.gw.log().contains("OCSP response fetched"), "{}", f.gw.log());
    assert_eq!(warnings(&f.gw.log(), ""), 0, "{}", f.gw.log());
}

#[test]
fn last_good_staple_is_served_while_the_responder_is_down() {
    let (pki, inter) = ocsp_pki();
    let ec = leaf(&pki, &inter, "ec", KeyKind::EcdsaP256, None);
    let idx = index(&pki, "index.txt", &[(&ec, false)]);
    let mut responder = Responder::start(&pki, &idx, "inter", free_port());
    let f = serve(
        pki,
        &cert(
            &ec,
            &format!("ocsp_url = \"{}\"\nocsp_refresh = \"1s\"", responder.url()),
        ),
    );
    assert!(wait_until(WAIT, || fetches(&f, "ok") >= 1.0), "{}", f.gw.log());
    assert!(stapled_good(&status(&f, &[]), &ec.serial));

    responder.stop();
    // Several failed refreshes (every second at most, ocsp_refresh = 1s).
    assert!(
        wait_until(WAIT, || fetches(&f, "unreachable") >= 3.0),
        "{}\n{}",
        f.gw.metrics(),
        f.gw.log()
    );
    let out = status(&f, &["-tls1_3"]);
    assert!(stapled_good(&out, &ec.serial), "the last good staple stays:\n{out}");
    assert!(stapled_good(&status(&f, &["-tls1_2"]), &ec.serial));
    assert_eq!(
        f.gw.metric("tlsgate_ocsp_staple_present", &["cert=\"ecdsa_p256\""]),
        1.0
    );
    // One warning for the whole outage, not one per retry.
    let log = f.gw.log();
    assert_eq!(warnings(&log, "OCSP fetch failed"), 1, "{log}");
    assert!(log.contains("keeping the last good response until"), "{log}");

    responder.restart();
    assert!(
        wait_until(WAIT, || f.gw.log().contains("OCSP responder answers again")),
        "{}",
        f.gw.log()
    );
    assert_eq!(warnings(&f.gw.log(), "OCSP"), 1, "{}", f.gw.log());
    assert!(stapled_good(&status(&f, &[]), &ec.serial));
}

#[test]
fn revoked_certificate_is_never_stapled() {
    let (pki, inter) = ocsp_pki();
    let good = leaf(&pki, &inter, "good", KeyKind::EcdsaP256, None);
    let revoked = leaf(&pki, &inter, "revoked", KeyKind::EcdsaP256, None);
    let idx = index(&pki, "index.txt", &[(&good, false), (&revoked, true)]);
    let responder = Responder::start(&pki, &idx, "inter", free_port());
    let f = serve(pki, &cert(&revoked, &format!("ocsp_url = \"{}\"", responder.url())));
    assert!(
        wait_until(WAIT, || fetches(&f, "revoked") >= 1.0),
        "{}\n{}",
        f.gw.metrics(),
        f.gw.log()
    );
    for version in ["-tls1_3", "-tls1_2"] {
        let out = status(&f, &[version]);
        assert!(no_staple(&out), "{version}:\n{out}");
    }
    assert_eq!(fetches(&f, "ok"), 0.0);
    assert_eq!(f.gw.metric("tlsgate_ocsp_staple_present", &[]), 0.0);
    assert_eq!(f.gw.metric("tlsgate_ocsp_stapled_handshakes_total", &[]), 0.0);
    assert_eq!(warnings(&f.gw.log(), "REVOKED"), 1, "{}", f.gw.log());
}

#[test]
fn staple_is_dropped_when_it_expires_and_at_once_when_revoked() {
    // Responses made by the test PKI: real responders do not issue ones valid for seconds.
    let (pki, inter) = ocsp_pki();
    let ec = leaf(&pki, &inter, "ec", KeyKind::EcdsaP256, None);
    let now = SystemTime::now();
    let short = ocsp_response(
        &ec.cert.cert_pem,
        &inter,
        OcspStatus::Good,
        now - Duration::from_secs(10),
        Some(now + Duration::from_secs(15)),
    )
    .unwrap();
    let port = free_port();
    let fake = FakeResponder::start(port, short);
    let f = serve(
        pki,
        &cert(&ec, &format!("ocsp_url = \"{}\"\nocsp_refresh = \"1s\"", fake.url())),
    );
    assert!(wait_until(WAIT, || fetches(&f, "ok") >= 1.0), "{}", f.gw.log());
    let out = status(&f, &[]);
    assert!(stapled_good(&out, &ec.serial), "{out}");

    // The responder goes away; the staple is served until its nextUpdate, then never again.
    drop(fake);
    assert!(
        wait_until(WAIT, || f.gw.metric("tlsgate_ocsp_staple_present", &[]) == 0.0),
        "{}",
        f.gw.log()
    );
    assert!(
        SystemTime::now() >= now + Duration::from_secs(14),
        "dropped before nextUpdate"
    );
    let out = status(&f, &[]);
    assert!(no_staple(&out), "expired staple sent:\n{out}");
    assert!(
        wait_until(WAIT, || f.gw.log().contains("has expired; no longer stapling")),
        "{}",
        f.gw.log()
    );

    // Back with a day-long response: stapled again; then a revocation drops it at once.
    let now = SystemTime::now();
    let day = Duration::from_secs(86_400);
    let good = ocsp_response(&ec.cert.cert_pem, &inter, OcspStatus::Good, now, Some(now + day)).unwrap();
    let fake = FakeResponder::start(port, good);
    assert!(
        wait_until(WAIT, || stapled_good(&status(&f, &[]), &ec.serial)),
        "{}",
        f.gw.log()
    );
    fake.set(ocsp_response(&ec.cert.cert_pem, &inter, OcspStatus::Revoked, now, Some(now + day)).unwrap());
    assert!(wait_until(WAIT, || fetches(&f, "revoked") >= 1.0), "{}", f.gw.log());
    assert!(no_staple(&status(&f, &[])));
}

#[test]
fn stale_or_unknown_responses_are_not_stapled() {
    let (pki, inter) = ocsp_pki();
    let from_file = leaf(&pki, &inter, "file", KeyKind::EcdsaP256, None);
    let now = SystemTime::now();
    let day = Duration::from_secs(86_400);
    let old = ocsp_response(
        &from_file.cert.cert_pem,
        &inter,
        OcspStatus::Good,
        now - 3 * day,
        Some(now - day),
    )
    .unwrap();
    let old_file = pki.path("old.der");
    std::fs::write(&old_file, old).unwrap();
    let f = serve(pki, &cert(&from_file, &format!("ocsp_file = {}", toml_path(&old_file))));
    let out = status(&f, &[]);
    assert!(no_staple(&out), "an expired file is not stapled:\n{out}");
    assert!(
        f.gw.log().contains("ocsp_file: not stapling: stale OCSP response"),
        "{}",
        f.gw.log()
    );
    assert_eq!(f.gw.metric("tlsgate_ocsp_staple_present", &[]), 0.0);
    drop(f);

    // Fetched: already expired, or `unknown`.
    let (pki, inter) = ocsp_pki();
    let ec = leaf(&pki, &inter, "ec", KeyKind::EcdsaP256, None);
    let expired = ocsp_response(
        &ec.cert.cert_pem,
        &inter,
        OcspStatus::Good,
        now - 3 * day,
        Some(now - day),
    )
    .unwrap();
    let fake = FakeResponder::start(free_port(), expired);
    let f = serve(
        pki,
        &cert(&ec, &format!("ocsp_url = \"{}\"\nocsp_refresh = \"1s\"", fake.url())),
    );
    assert!(wait_until(WAIT, || fetches(&f, "invalid") >= 1.0), "{}", f.gw.log());
    assert!(no_staple(&status(&f, &[])));
    fake.set(ocsp_response(&ec.cert.cert_pem, &inter, OcspStatus::Unknown, now, Some(now + day)).unwrap());
    let before = fetches(&f, "invalid");
    assert!(wait_until(WAIT, || fetches(&f, "invalid") > before), "{}", f.gw.log());
    assert!(no_staple(&status(&f, &[])));
    assert_eq!(fetches(&f, "ok"), 0.0);
    assert_eq!(warnings(&f.gw.log(), "OCSP fetch failed"), 1, "{}", f.gw.log());
}

#[test]
fn file_staple_is_served_and_reread_on_reload() {
    let (pki, inter) = ocsp_pki();
    let ec = leaf(&pki, &inter, "ec", KeyKind::EcdsaP256, None);
    let p = |name: &str| pki.path(name).to_str().unwrap().to_string();
    // openssl makes the request and answers it offline (no server).
    let openssl = |args: &[&str]| {
        let out = tlsgate_testkit::run("openssl", args, b"", Duration::ZERO, Duration::from_secs(20));
        assert_eq!(out.status, Some(0), "openssl {args:?}: {}", out.all());
    };
    openssl(&[
        "ocsp",
        "-issuer",
        &p("inter.pem"),
        "-cert",
        &p("ec.pem"),
        "-no_nonce",
        "-reqout",
        &p("req.der"),
    ]);
    let respond = |index: &Path, out: &str| {
        openssl(&[
            "ocsp",
            "-index",
            index.to_str().unwrap(),
            "-CA",
            &p("inter.pem"),
            "-rsigner",
            &p("inter.pem"),
            "-rkey",
            &p("inter.key"),
            "-reqin",
            &p("req.der"),
            "-respout",
            &p(out),
            "-ndays",
            "1",
        ]);
    };
    respond(&index(&pki, "good.txt", &[(&ec, false)]), "good.der");
    respond(&index(&pki, "revoked.txt", &[(&ec, true)]), "revoked.der");
    let staple = pki.path("staple.der");
    std::fs::copy(pki.path("good.der"), &staple).unwrap();
    let _ = inter;
    let f = serve(pki, &cert(&ec, &format!("ocsp_file = {}", toml_path(&staple))));
    for version in ["-tls1_3", "-tls1_2"] {
        let out = status(&f, &[version]);
        assert!(stapled_good(&out, &ec.serial), "{version}:\n{out}");
    }
    assert_eq!(
        f.gw.metric("tlsgate_ocsp_fetches_total", &[]),
        0.0,
        "a file is never fetched"
    );
    assert_eq!(f.gw.metric("tlsgate_ocsp_staple_present", &[]), 1.0);

    // The file now says revoked: a reload re-reads it and the staple goes.
    std::fs::copy(f.pki.path("revoked.der"), &staple).unwrap();
    let (code, body) = f.gw.reload();
    assert_eq!(code, 200, "{body}");
    assert!(no_staple(&status(&f, &[])), "{}", f.gw.log());
    // And back.
    std::fs::copy(f.pki.path("good.der"), &staple).unwrap();
    assert_eq!(f.gw.reload().0, 200);
    assert!(stapled_good(&status(&f, &[]), &ec.serial));
}

#[test]
fn delegated_responder_is_accepted_and_a_foreign_signer_is_not() {
    let (pki, inter) = ocsp_pki();
    let ec = leaf(&pki, &inter, "ec", KeyKind::EcdsaP256, None);
    let rsa = leaf(&pki, &inter, "rsa", KeyKind::Rsa(2048), None);
    let idx = index(&pki, "index.txt", &[(&ec, false), (&rsa, false)]);
    // A delegated responder certificate (OCSPSigning), issued by the intermediate.
    let mut spec = CertSpec::leaf(&["ocsp.localhost"], KeyKind::EcdsaP256, 30);
    spec.ocsp_signing = true;
    let delegate = Certified::issue(&spec, Some(&inter)).unwrap();
    pki.write_pair("delegate", &delegate.cert_pem, &delegate.key_pem);
    let delegated = Responder::start(&pki, &idx, "delegate", free_port());
    // The root answering for the intermediate's certificates: neither their issuer nor delegated
    // by it, however valid its own certificate.
    pki.write("root.pem", &pki.ca.cert_pem);
    let foreign = Responder::start(&pki, &idx, "root", free_port());
    let f = serve(
        pki,
        &format!(
            "{}{}",
            cert(&ec, &format!("ocsp_url = \"{}\"", delegated.url())),
            cert(
                &rsa,
                &format!("ocsp_url = \"{}\"\nocsp_refresh = \"1s\"", foreign.url())
            )
        ),
    );
    assert!(wait_until(WAIT, || fetches(&f, "ok") >= 1.0), "{}", f.gw.log());
    assert!(wait_until(WAIT, || fetches(&f, "invalid") >= 1.0), "{}", f.gw.log());
    assert!(
        stapled_good(&status(&f, &[]), &ec.serial),
        "delegated responder's staple"
    );
    let out = status(&f, &["-sigalgs", "RSA-PSS+SHA256"]);
    assert!(
        out.contains("Server public key is 2048 bit"),
        "the RSA leaf is served:\n{out}"
    );
    assert!(no_staple(&out), "foreign signer's response stapled:\n{out}");
    assert!(
        f.gw.log().contains("not issued by the certificate's issuer"),
        "{}",
        f.gw.log()
    );
    let m = f.gw.metrics();
    let present = |cert: &str| tlsgate_testkit::process::metric_sum(&m, "tlsgate_ocsp_staple_present", &[cert]);
    assert_eq!(present("cert=\"ecdsa_p256\""), 1.0, "{m}");
    assert_eq!(present("cert=\"rsa\""), 0.0, "{m}");
}

#[test]
fn certificates_without_a_responder_get_no_staple_and_no_warning() {
    // The usual fixture: leaves without Authority Information Access (like today's public CAs),
    // plus a certificate naming a responder but with `ocsp = "off"`.
    let (pki, inter) = ocsp_pki();
    let dead = format!("http://127.0.0.1:{}/", free_port());
    let off = leaf(&pki, &inter, "off", KeyKind::Rsa(2048), Some(dead));
    let plain = common::site_certs(&pki);
    let f = serve(pki, &format!("{plain}{}", cert(&off, "ocsp = \"off\"")));
    for args in [&["-tls1_3"][..], &["-tls1_2"], &["-sigalgs", "RSA-PSS+SHA256"]] {
        let out = status(&f, args);
        assert!(no_staple(&out), "{args:?}:\n{out}");
    }
    std::thread::sleep(Duration::from_secs(2));
    let m = f.gw.metrics();
    assert!(
        !m.lines().any(|l| l.starts_with("tlsgate_ocsp_") && !l.starts_with('#')),
        "{m}"
    );
    let log = f.gw.log();
    assert_eq!(warnings(&log, ""), 0, "{log}");
    assert!(!log.contains("OCSP fetch"), "{log}");
}
