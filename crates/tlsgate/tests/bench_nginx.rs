//! `tlsgate bench` and `tlsgate probe` against nginx from Debian, started here on a free loopback
//! port with a temporary configuration that logs `$ssl_session_reused`: the resumptions the
//! client reports agree with nginx's own view, and `--no-session-id --no-ticket` gives none;
//! `tlsgate probe --early-data` gets its 0-RTT request accepted.

mod common;

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tlsgate_testkit::{free_port, TestPki};
use tlsgate_tls::pki::KeyKind;

/// nginx in the foreground, one process (killed on drop), logging `$ssl_session_reused $ssl_protocol`.
struct Nginx {
    child: Child,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
    _pki: TestPki,
}

impl Nginx {
    fn start() -> Self {
        tlsgate_testkit::require("nginx");
        let pki = TestPki::new();
        let (cert, key) = pki.leaf("nginx", &["localhost"], KeyKind::EcdsaP256);
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        let port = free_port();
        let conf = format!(
            r#"worker_processes 1;
daemon off;
master_process off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    log_format reuse '$ssl_session_reused $ssl_protocol early=$ssl_early_data';
    access_log {d}/access.log reuse;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_ecdh_curve X25519:prime256v1;
    ssl_session_cache shared:SSL:1m;
    ssl_session_tickets on;
    ssl_early_data on;
    server {{
        listen 127.0.0.1:{port} ssl;
        server_name localhost;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        location / {{
            default_type text/plain;
            return 200 "Hello, world!";
        }}
    }}
}}
"#,
            cert = cert.display(),
            key = key.display()
        );
        let conf_path = dir.path().join("nginx.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let child = Command::new("nginx")
            .args(["-e", &format!("{d}/error.log"), "-p", &d.to_string(), "-c"])
            .arg(&conf_path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nginx");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !tlsgate_testkit::listening(port) {
            assert!(
                Instant::now() < deadline,
                "nginx did not listen: {}",
                std::fs::read_to_string(dir.path().join("error.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let log = dir.path().join("access.log");
        Nginx {
            child,
            port,
            log,
            _dir: dir,
            _pki: pki,
        }
    }

    /// The access log's lines, once it holds at least `at_least` (or after 5 s).
    fn lines(&self, at_least: usize) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let text = std::fs::read_to_string(&self.log).unwrap_or_default();
            if text.lines().count() >= at_least || Instant::now() > deadline {
                return text.lines().map(str::to_string).collect();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// (lines, reused) of the access log, once it holds at least `at_least` lines (or after 5 s).
    fn reused(&self, at_least: usize) -> (usize, usize) {
        let lines = self.lines(at_least);
        (lines.len(), lines.iter().filter(|l| l.starts_with("r ")).count())
    }

    fn clear_log(&self) {
        std::fs::write(&self.log, "").unwrap();
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn bench(port: u16, args: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("s.json");
    let out = Command::new(common::binary())
        .arg("bench")
        .args(args)
        .args(["--json", json.to_str().unwrap(), &format!("https://127.0.0.1:{port}/")])
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&json).unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    serde_json::from_str(&text).unwrap()
}

fn n(v: &Value, key: &str) -> usize {
    v[key].as_u64().unwrap_or_else(|| panic!("{key} missing in {v:#}")) as usize
}

#[test]
fn resumed_counts_agree_with_nginx_log() {
    let nginx = Nginx::start();
    // nginx truncates nothing itself: clearing the log between runs keeps each count separate
    // (nginx appends at the end of the file, O_APPEND).
    for (args, expect_resumed) in [
        (&["--new-conn", "-c", "2", "-n", "80"][..], true),
        (
            &["--new-conn", "-c", "2", "-n", "80", "--tls", "1.2", "--no-ticket"][..],
            true,
        ),
        (
            &["--new-conn", "-c", "2", "-n", "80", "--tls", "1.2", "--no-session-id"][..],
            true,
        ),
        (
            &["--new-conn", "-c", "2", "-n", "80", "--no-session-id", "--no-ticket"][..],
            false,
        ),
        (
            &[
                "--new-conn",
                "-c",
                "2",
                "-n",
                "80",
                "--tls",
                "1.2",
                "--no-session-id",
                "--no-ticket",
            ][..],
            false,
        ),
    ] {
        nginx.clear_log();
        let s = bench(nginx.port, args);
        assert_eq!(n(&s, "errors_total"), 0, "{args:?}: {s:#}");
        assert_eq!(n(&s, "handshakes"), 80, "{args:?}");
        let (lines, reused) = nginx.reused(80);
        assert_eq!(lines, 80, "{args:?}: one log line per connection");
        assert_eq!(n(&s, "resumed"), reused, "{args:?}: client and nginx agree");
        if expect_resumed {
            assert!(reused >= 70, "{args:?}: {reused} of 80 resumed");
            let by: Vec<&String> = s["resumed_by"].as_object().unwrap().keys().collect();
            let want = if !args.contains(&"1.2") {
                "tls13_psk"
            } else if args.contains(&"--no-ticket") {
                "session_id"
            } else {
                "ticket"
            };
            assert_eq!(by, [want], "{args:?}: mechanism");
        } else {
            assert_eq!(reused, 0, "{args:?}");
        }
    }
}

#[test]
fn probe_sees_nginx_resume_by_ticket_and_session_id() {
    let nginx = Nginx::start();
    let target = format!("127.0.0.1:{}", nginx.port);
    for (args, how) in [
        (&["--tls", "1.3"][..], "tls13_psk"),
        (&["--tls", "1.2"][..], "ticket"),
        (&["--tls", "1.2", "--no-ticket"][..], "session_id"),
    ] {
        nginx.clear_log();
        let out = Command::new(common::binary())
            .args(["probe", "--json", "-n", "3", "--expect-resume"])
            .args(args)
            .arg(&target)
            .output()
            .unwrap();
        let r: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {r:#}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got: Vec<&str> = r["connections"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["resumption"].as_str().unwrap())
            .collect();
        assert_eq!(got, ["full", how, how], "{args:?}");
        assert_eq!(nginx.reused(3), (3, 2), "{args:?}: nginx agrees");
    }
}

#[test]
fn probe_early_data_is_accepted_by_nginx() {
    let nginx = Nginx::start();
    let out = Command::new(common::binary())
        .args([
            "probe",
            "--json",
            "-n",
            "3",
            "--early-data",
            "--expect-early-data",
            "--expect-resume",
        ])
        .arg(format!("127.0.0.1:{}", nginx.port))
        .output()
        .unwrap();
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(out.status.success(), "{r:#}\n{}", String::from_utf8_lossy(&out.stderr));
    let early: Vec<(bool, bool)> = r["connections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["early_data"]["offered"] == true, c["early_data"]["accepted"] == true))
        .collect();
    assert_eq!(early, [(false, false), (true, true), (true, true)]);
    assert_eq!(r["connections"][0]["early_data"]["reason"], "no_session_offered");
    // nginx's `$ssl_early_data` is 1 only if it handled the request before the client's Finished
    // arrived (a race on loopback), so it may say `-` for an accepted 0-RTT request; it must never
    // say 1 for the first connection, and the handshakes it logged resumed as the client says.
    let lines = nginx.lines(3);
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(
        lines[0].starts_with(". ") && !lines[0].ends_with("early=1"),
        "{lines:?}"
    );
    assert!(lines[1..].iter().all(|l| l.starts_with("r ")), "{lines:?}");
}
