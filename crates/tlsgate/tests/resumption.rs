//! Issue 2: session resumption. TLS 1.2 by session ID (node-local cache) and by ticket, TLS 1.3
//! by PSK ticket; each switch works; ticket keys rotate and expire; the session-ID cache expires;
//! sessions survive a configuration reload and stay within their site.

mod common;

use common::{extra_site, session_lines, wait_until, Fixture};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tlsgate_tls::pki::KeyKind;

const GET: &str = "GET /hello HTTP/1.1\r\nHost: localhost\r\n\r\n";

fn state(f: &Fixture, name: &str) -> f64 {
    f.gw.metric("tlsgate_state", &[&format!("name=\"{name}\"")])
}

fn handshakes(f: &Fixture, outcome: &str) -> f64 {
    f.gw.metric("tlsgate_handshakes_total", &[&format!("outcome=\"{outcome}\"")])
}

fn session_file(f: &Fixture, name: &str) -> PathBuf {
    f.pki.path(name)
}

/// A handshake with `args` that sends one request (so TLS 1.3 tickets arrive) and saves the
/// session to `file`; asserts a full handshake and the response.
fn save(f: &Fixture, args: &[&str], file: &Path) -> tlsgate_testkit::Output {
    let mut all = args.to_vec();
    all.extend_from_slice(&["-sess_out", file.to_str().unwrap()]);
    let out = f.s_client(&all, GET);
    let lines = session_lines(&out.stdout);
    assert_eq!(lines.len(), 1, "{}", out.all());
    assert!(lines[0].starts_with("New, "), "{}", out.all());
    assert!(out.stdout.contains("Hello, world!"), "{}", out.all());
    out
}

/// A handshake offering the session in `file`; returns its session line (`New, ...`/`Reused, ...`).
fn resume(f: &Fixture, args: &[&str], file: &Path) -> String {
    assert!(file.is_file(), "no session was saved to {}", file.display());
    let mut all = args.to_vec();
    all.extend_from_slice(&["-sess_in", file.to_str().unwrap()]);
    let out = f.s_client(&all, GET);
    let lines = session_lines(&out.stdout);
    assert_eq!(lines.len(), 1, "{}", out.all());
    assert!(out.stdout.contains("Hello, world!"), "{}", out.all());
    lines[0].clone()
}

/// `-reconnect`: the session lines of the first connection and of every reconnect.
fn reconnect(f: &Fixture, args: &[&str]) -> (Vec<String>, String) {
    let mut all = args.to_vec();
    all.push("-reconnect");
    let out = f.s_client(&all, "");
    let lines = session_lines(&out.stdout);
    assert!(
        lines.len() >= 3,
        "expected a first connection and reconnects:\n{}",
        out.all()
    );
    assert!(lines[0].starts_with("New, TLSv1.2"), "{}", out.all());
    (lines, out.all())
}

fn reused(lines: &[String]) -> usize {
    lines.iter().filter(|l| l.starts_with("Reused, ")).count()
}

#[test]
fn tls12_resumes_by_session_id_from_the_cache() {
    let f = common::start("", "");
    let (lines, all) = reconnect(&f, &["-tls1_2", "-no_ticket"]);
    assert_eq!(reused(&lines), lines.len() - 1, "every reconnect resumes:\n{all}");
    assert!(lines[1..].iter().all(|l| l.starts_with("Reused, TLSv1.2")), "{all}");
    let n = reused(&lines) as f64;
    assert_eq!(handshakes(&f, "session_id"), n, "{}", f.gw.metrics());
    assert_eq!(handshakes(&f, "ticket"), 0.0);
    assert_eq!(handshakes(&f, "full"), 1.0);
    assert_eq!(state(&f, "session_cache_hits_total"), n, "{}", f.gw.metrics());
    assert!(state(&f, "session_cache_entries") >= 1.0, "{}", f.gw.metrics());
    assert_eq!(
        state(&f, "tickets_issued_total"),
        0.0,
        "-no_ticket: no ticket is issued"
    );
}

#[test]
fn tls12_resumes_by_ticket() {
    let f = common::start("", "");
    let (lines, all) = reconnect(&f, &["-tls1_2"]);
    assert_eq!(reused(&lines), lines.len() - 1, "every reconnect resumes:\n{all}");
    assert!(all.contains("TLS session ticket lifetime hint"), "{all}");
    let n = reused(&lines) as f64;
    assert_eq!(handshakes(&f, "ticket"), n, "{}", f.gw.metrics());
    assert_eq!(handshakes(&f, "session_id"), 0.0, "{}", f.gw.metrics());
    assert!(state(&f, "tickets_issued_total") >= 1.0, "{}", f.gw.metrics());
    assert_eq!(state(&f, "tickets_accepted_total"), n, "{}", f.gw.metrics());
}

#[test]
fn tls13_resumes_with_a_psk_ticket() {
    let f = common::start("", "");
    let file = session_file(&f, "tls13.sess");
    let out = save(&f, &["-tls1_3"], &file);
    assert!(out.stdout.contains("New Session Ticket arrived"), "{}", out.all());
    assert!(resume(&f, &["-tls1_3"], &file).starts_with("Reused, TLSv1.3"));
    // The session resumes again (tickets are not single-use here).
    assert!(resume(&f, &["-tls1_3"], &file).starts_with("Reused, TLSv1.3"));
    assert_eq!(handshakes(&f, "tls13_psk"), 2.0, "{}", f.gw.metrics());
    assert_eq!(handshakes(&f, "full"), 1.0, "{}", f.gw.metrics());
    assert_eq!(state(&f, "tickets_accepted_total"), 2.0, "{}", f.gw.metrics());
}

/// A client that is not OpenSSL and reuses one ClientHello: scripts/handshake-flood's `-resume`
/// (Go; the saturating client of scripts/peer-compare.sh's resumption cells) resumes a session
/// s_client saved, by session ID, TLS 1.2 ticket and TLS 1.3 PSK, on every connection, each with
/// a `GET /` answered 200; the gateway counts exactly those resumptions and no full handshake.
#[test]
fn one_saved_session_resumes_every_connection_of_a_fixed_hello() {
    let root = r#"
[[site.route]]
path_prefix = "/"
fixed_response = { body = "root" }
"#;
    let f = common::start("", root);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/handshake-flood");
    let flood = tlsgate_testkit::go::build(&src, "flood");
    let ecdsa12 = ["-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-GCM-SHA256"];
    let cases: [(&str, Vec<&str>, &str); 3] = [
        ("id12", [&ecdsa12[..], &["-no_ticket"]].concat(), "session_id"),
        ("ticket12", ecdsa12.to_vec(), "ticket"),
        (
            "psk13",
            vec!["-tls1_3", "-ciphersuites", "TLS_AES_128_GCM_SHA256"],
            "tls13_psk",
        ),
    ];
    for (name, args, outcome) in cases {
        let pem = session_file(&f, &format!("{name}.pem"));
        save(&f, &args, &pem);
        let text = tlsgate_testkit::run(
            "openssl",
            &["sess_id", "-in", pem.to_str().unwrap(), "-text", "-noout"],
            b"",
            Duration::ZERO,
            Duration::from_secs(10),
        );
        let sess = session_file(&f, &format!("{name}.txt"));
        std::fs::write(&sess, &text.stdout).unwrap();
        let (full, before) = (handshakes(&f, "full"), handshakes(&f, outcome));
        let out = tlsgate_testkit::run(
            flood.path.to_str().unwrap(),
            &[
                "-target",
                &f.connect(),
                "-sources",
                "127.0.0.1",
                "-conns",
                "2",
                "-duration",
                "300ms",
                "-resume",
                sess.to_str().unwrap(),
            ],
            b"",
            Duration::ZERO,
            Duration::from_secs(20),
        );
        let summary: serde_json::Value = serde_json::from_str(out.stdout.trim())
            .unwrap_or_else(|e| panic!("{name}: the flood's summary ({e}):\n{}\n{}", out.all(), text.all()));
        let done = summary["done"].as_f64().unwrap();
        assert!(done >= 10.0, "{name}: {summary} ({})", text.all());
        assert_eq!(summary["refused"], 0, "{name}: {summary}");
        assert_eq!(summary["other"], 0, "{name}: {summary}");
        assert_eq!(handshakes(&f, outcome) - before, done, "{name}: {}", f.gw.metrics());
        assert_eq!(
            handshakes(&f, "full"),
            full,
            "{name}: no full handshake: {}",
            f.gw.metrics()
        );
    }
}

/// Issue 15: the TLS 1.3 tickets are written when the handshake completes, not with the first
/// response, so a client that sends no request still leaves with a session. Exactly the
/// operators' recipe `(echo; sleep 0.3) | openssl s_client -connect H:P -tls1_3 -sess_out s.pem`,
/// then `openssl s_client -connect H:P -sess_in s.pem`, which resumes against nginx.
#[test]
fn tls13_tickets_arrive_without_a_request() {
    let f = common::start("", "");
    let file = session_file(&f, "no-request.pem");
    let (connect, sess) = (f.connect(), file.to_str().unwrap().to_string());
    let s_client = |args: &[&str]| {
        let mut all = vec!["s_client", "-connect", &connect];
        all.extend_from_slice(args);
        tlsgate_testkit::run(
            "openssl",
            &all,
            b"\n",
            Duration::from_millis(300),
            Duration::from_secs(15),
        )
    };
    let first = s_client(&["-tls1_3", "-sess_out", &sess]);
    assert!(
        first.stdout.contains("New Session Ticket arrived"),
        "the tickets came with the handshake:\n{}",
        first.all()
    );
    assert!(file.is_file(), "no session was saved:\n{}", first.all());
    let second = s_client(&["-sess_in", &sess]);
    let lines = session_lines(&second.stdout);
    assert!(
        lines.first().is_some_and(|l| l.starts_with("Reused, TLSv1.3")),
        "{}",
        second.all()
    );
    assert_eq!(handshakes(&f, "tls13_psk"), 1.0, "{}", f.gw.metrics());
    assert_eq!(handshakes(&f, "full"), 1.0, "{}", f.gw.metrics());
}

#[test]
fn session_cache_switched_off_resumes_nothing_by_session_id() {
    let f = common::start("[tls.session_cache]\nenabled = false\n", "");
    let (lines, all) = reconnect(&f, &["-tls1_2", "-no_ticket"]);
    assert_eq!(reused(&lines), 0, "{all}");
    assert_eq!(handshakes(&f, "full"), lines.len() as f64, "{}", f.gw.metrics());
    assert_eq!(handshakes(&f, "session_id"), 0.0);
    assert_eq!(state(&f, "session_cache_entries"), 0.0, "{}", f.gw.metrics());
    // Tickets still work.
    let (lines, all) = reconnect(&f, &["-tls1_2"]);
    assert_eq!(reused(&lines), lines.len() - 1, "{all}");
    assert_eq!(handshakes(&f, "ticket"), (lines.len() - 1) as f64, "{}", f.gw.metrics());
}

#[test]
fn tickets_switched_off_issues_none() {
    let f = common::start("[tls.tickets]\nenabled = false\n", "");
    // TLS 1.2: no ticket; the session-ID cache still resumes.
    let (lines, all) = reconnect(&f, &["-tls1_2"]);
    assert!(!all.contains("TLS session ticket lifetime hint"), "{all}");
    assert_eq!(reused(&lines), lines.len() - 1, "{all}");
    assert_eq!(handshakes(&f, "ticket"), 0.0, "{}", f.gw.metrics());
    assert_eq!(
        handshakes(&f, "session_id"),
        (lines.len() - 1) as f64,
        "{}",
        f.gw.metrics()
    );
    // TLS 1.3: no NewSessionTicket, so nothing to resume with.
    let file = session_file(&f, "tls13.sess");
    let out = save(&f, &["-tls1_3"], &file);
    assert!(!out.stdout.contains("New Session Ticket arrived"), "{}", out.all());
    if file.is_file() {
        assert!(resume(&f, &["-tls1_3"], &file).starts_with("New, TLSv1.3"));
    }
    assert_eq!(handshakes(&f, "tls13_psk"), 0.0, "{}", f.gw.metrics());
    assert_eq!(state(&f, "tickets_issued_total"), 0.0, "{}", f.gw.metrics());
}

#[test]
fn tickets_and_session_cache_both_off_resume_nothing() {
    let f = common::start(
        "[tls.tickets]\nenabled = false\n\n[tls.session_cache]\nenabled = false\n",
        "",
    );
    let (lines, all) = reconnect(&f, &["-tls1_2"]);
    assert_eq!(reused(&lines), 0, "{all}");
    assert_eq!(handshakes(&f, "full"), lines.len() as f64, "{}", f.gw.metrics());
}

#[test]
fn ticket_keys_rotate_then_old_tickets_expire() {
    let f = common::start("[tls.tickets]\nrotation = \"2s\"\nlifetime = \"3s\"\n", "");
    let rotations = || state(&f, "ticket_key_rotations_total");
    let file = session_file(&f, "tls13.sess");
    save(&f, &["-tls1_3"], &file);
    // The ticket's key was current at some rotation count <= this one.
    let saved_at = rotations();
    assert!(
        wait_until(Duration::from_secs(5), || rotations() > saved_at),
        "no rotation within 5 s: {}",
        f.gw.metrics()
    );
    // One rotation later the key is retired but kept: the ticket is accepted and renewed.
    let renewed = state(&f, "tickets_accepted_renewed_total");
    assert!(
        resume(&f, &["-tls1_3"], &file).starts_with("Reused, TLSv1.3"),
        "{}",
        f.gw.log()
    );
    assert_eq!(
        state(&f, "tickets_accepted_renewed_total"),
        renewed + 1.0,
        "{}",
        f.gw.metrics()
    );
    assert!(state(&f, "ticket_keys") >= 2.0, "{}", f.gw.metrics());
    // Three rotations later the key was retired more than the lifetime ago: erased.
    assert!(
        wait_until(Duration::from_secs(10), || rotations() >= saved_at + 3.0),
        "{}",
        f.gw.metrics()
    );
    let unknown = state(&f, "tickets_unknown_key_total");
    assert!(resume(&f, &["-tls1_3"], &file).starts_with("New, TLSv1.3"));
    assert_eq!(
        state(&f, "tickets_unknown_key_total"),
        unknown + 1.0,
        "{}",
        f.gw.metrics()
    );
    assert_eq!(handshakes(&f, "tls13_psk"), 1.0, "{}", f.gw.metrics());
}

#[test]
fn session_id_cache_entries_expire() {
    let f = common::start("[tls.session_cache]\ntimeout = \"2s\"\n", "");
    let file = session_file(&f, "tls12.sess");
    let started = std::time::Instant::now();
    save(&f, &["-tls1_2", "-no_ticket"], &file);
    assert!(resume(&f, &["-tls1_2", "-no_ticket"], &file).starts_with("Reused, TLSv1.2"));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "too slow to check the control"
    );
    std::thread::sleep(Duration::from_secs(3).saturating_sub(started.elapsed()));
    let misses = state(&f, "session_cache_misses_total");
    assert!(resume(&f, &["-tls1_2", "-no_ticket"], &file).starts_with("New, TLSv1.2"));
    assert_eq!(
        state(&f, "session_cache_misses_total"),
        misses + 1.0,
        "{}",
        f.gw.metrics()
    );
    assert_eq!(handshakes(&f, "session_id"), 1.0, "{}", f.gw.metrics());
}

#[test]
fn sessions_survive_a_configuration_reload() {
    let f = common::start("", "");
    let by_id = session_file(&f, "id.sess");
    let ticket12 = session_file(&f, "ticket12.sess");
    let ticket13 = session_file(&f, "ticket13.sess");
    save(&f, &["-tls1_2", "-no_ticket"], &by_id);
    save(&f, &["-tls1_2"], &ticket12);
    save(&f, &["-tls1_3"], &ticket13);

    let generation = state(&f, "config_generation");
    let text = std::fs::read_to_string(&f.gw.config).unwrap();
    std::fs::write(&f.gw.config, text.replace("Hello, world!", "Hello, reloaded!")).unwrap();
    let (code, body) = f.gw.reload();
    assert_eq!(code, 200, "{body}");
    assert!(state(&f, "config_generation") > generation, "{}", f.gw.metrics());
    let out = f.curl(&[], "/hello");
    assert_eq!(out.stdout, "Hello, reloaded!", "the reload took effect: {}", out.all());

    let resumed = |args: &[&str], file: &Path| {
        let mut all = args.to_vec();
        all.extend_from_slice(&["-sess_in", file.to_str().unwrap()]);
        let out = f.s_client(&all, GET);
        assert!(out.stdout.contains("Hello, reloaded!"), "{}", out.all());
        session_lines(&out.stdout).join("\n")
    };
    assert!(resumed(&["-tls1_2", "-no_ticket"], &by_id).starts_with("Reused, TLSv1.2"));
    assert!(resumed(&["-tls1_2"], &ticket12).starts_with("Reused, TLSv1.2"));
    assert!(resumed(&["-tls1_3"], &ticket13).starts_with("Reused, TLSv1.3"));
    assert_eq!(handshakes(&f, "session_id"), 1.0, "{}", f.gw.metrics());
    assert_eq!(handshakes(&f, "ticket"), 1.0, "{}", f.gw.metrics());
    assert_eq!(handshakes(&f, "tls13_psk"), 1.0, "{}", f.gw.metrics());
}

#[test]
fn a_session_of_one_site_does_not_resume_on_another() {
    let f = common::start_with("", |pki| extra_site(pki, "a", &["a.test"], &[KeyKind::EcdsaP256]));
    for (i, args) in [&["-tls1_2", "-no_ticket"][..], &["-tls1_2"][..], &["-tls1_3"][..]]
        .into_iter()
        .enumerate()
    {
        let file = session_file(&f, &format!("site-a-{i}.sess"));
        let mut with_sni = args.to_vec();
        with_sni.extend_from_slice(&["-servername", "a.test", "-sess_out", file.to_str().unwrap()]);
        let out = f.s_client(&with_sni, "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n");
        assert!(out.stdout.contains("site a"), "{}", out.all());
        // Same site: resumes (the control).
        let mut again = args.to_vec();
        again.extend_from_slice(&["-servername", "a.test", "-sess_in", file.to_str().unwrap()]);
        let out = f.s_client(&again, "");
        assert!(
            session_lines(&out.stdout).join("").starts_with("Reused, "),
            "{args:?}: {}",
            out.all()
        );
        // Another site: a full handshake with that site's certificate (the client did offer the
        // session: the server found it in its cache or decrypted its ticket).
        let offered = || state(&f, "session_cache_hits_total") + state(&f, "tickets_accepted_total");
        let before = offered();
        let mut other = args.to_vec();
        other.extend_from_slice(&["-servername", "localhost", "-sess_in", file.to_str().unwrap()]);
        let out = f.s_client(&other, "");
        assert_eq!(offered(), before + 1.0, "{args:?}: {}", f.gw.metrics());
        assert!(
            session_lines(&out.stdout).join("").starts_with("New, "),
            "{args:?}: a.test's session must not resume on localhost:\n{}",
            out.all()
        );
        assert!(out.stdout.contains("CN = localhost"), "{}", out.all());
    }
}
