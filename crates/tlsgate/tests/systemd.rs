//! systemd integration (issue #26 part 2): the sd_notify readiness protocol against a real
//! `$NOTIFY_SOCKET` datagram socket each test creates (READY after the listeners accept,
//! RELOADING/READY around SIGHUP, a refused reload still ending in READY, STOPPING on SIGTERM,
//! abstract sockets, no socket at all, an unreachable socket), and `systemd-analyze verify` on the
//! shipped unit dist/systemd/tlsgate.service.

mod common;

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tlsgate_testkit::{free_port, require, TestPki};

/// How long a notification may take to arrive (a gateway start includes building certificates).
const WAIT: Duration = Duration::from_secs(30);

/// A `tlsgate serve` started with a chosen `$NOTIFY_SOCKET`; killed on drop.
struct Served {
    child: Child,
    pki: TestPki,
    dir: tempfile::TempDir,
    config: PathBuf,
    https: u16,
    admin: u16,
}

impl Served {
    /// Starts the gateway with `notify` as `$NOTIFY_SOCKET` (`None`: the variable removed).
    fn start(notify: Option<&str>) -> Self {
        let pki = TestPki::new();
        let (https, admin) = (free_port(), free_port());
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("tlsgate.toml");
        std::fs::write(&config, common::config_text(&pki, https, admin, "", "")).unwrap();
        let log = std::fs::File::create(dir.path().join("tlsgate.log")).unwrap();
        let mut cmd = Command::new(common::binary());
        cmd.args(["serve", "--config", config.to_str().unwrap()])
            .env("RUST_LOG", "debug")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        match notify {
            Some(n) => cmd.env("NOTIFY_SOCKET", n),
            None => cmd.env_remove("NOTIFY_SOCKET"),
        };
        let child = cmd.spawn().expect("start tlsgate serve");
        Self {
            child,
            pki,
            dir,
            config,
            https,
            admin,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("tlsgate.log")).unwrap_or_default()
    }

    fn signal(&self, name: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.child.id().to_string())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -{name} failed");
    }

    /// One HTTPS GET of `path` (one attempt, no retry): (curl exit status, body).
    fn get(&self, path: &str) -> (Option<i32>, String) {
        require("curl");
        let url = format!("https://localhost:{}{path}", self.https);
        let ca = self.pki.ca_file();
        let out = tlsgate_testkit::run(
            "curl",
            &["-sS", "--max-time", "10", "--cacert", ca.to_str().unwrap(), &url],
            b"",
            Duration::ZERO,
            Duration::from_secs(15),
        );
        (out.status, out.stdout)
    }

    fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status.code().unwrap_or(-1));
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// A bound notification socket in a temporary directory.
fn path_socket() -> (tempfile::TempDir, UnixDatagram, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify.sock");
    let sock = UnixDatagram::bind(&path).unwrap();
    (dir, sock, path.to_str().unwrap().to_string())
}

/// The next datagram, or a panic with the gateway's log.
fn next(sock: &UnixDatagram, gw: &Served) -> String {
    sock.set_read_timeout(Some(WAIT)).unwrap();
    let mut buf = [0u8; 4096];
    match sock.recv(&mut buf) {
        Ok(n) => String::from_utf8(buf[..n].to_vec()).expect("utf-8 notification"),
        Err(e) => panic!("no notification within {WAIT:?}: {e}\n{}", gw.log()),
    }
}

/// The value of `KEY=` in a notification.
fn field<'a>(message: &'a str, key: &str) -> Option<&'a str> {
    message.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
}

/// Waits for the first notification; asserts it is READY=1 naming the gateway as MAINPID.
fn expect_ready(sock: &UnixDatagram, gw: &Served) -> String {
    let ready = next(sock, gw);
    assert_eq!(field(&ready, "READY"), Some("1"), "{ready}");
    assert_eq!(
        field(&ready, "MAINPID"),
        Some(gw.child.id().to_string().as_str()),
        "{ready}"
    );
    ready
}

#[test]
fn ready_arrives_once_the_listener_serves_tls() {
    let (_dir, sock, path) = path_socket();
    let gw = Served::start(Some(&path));
    let ready = expect_ready(&sock, &gw);
    // The first and only attempt, right after READY: no retry loop hides a listener not yet up.
    let (code, body) = gw.get("/hello");
    assert_eq!((code, body.as_str()), (Some(0), "Hello, world!"), "{}", gw.log());
    let status = field(&ready, "STATUS").expect("STATUS=");
    assert!(
        status.contains("1 listener(s)") && status.contains("2 worker(s)") && status.contains("generation 1"),
        "{status}"
    );
    // The admin listener is up too.
    assert!(std::net::TcpStream::connect(("127.0.0.1", gw.admin)).is_ok());
}

#[test]
fn sighup_sends_reloading_with_monotonic_usec_then_ready_after_the_reload() {
    let (_dir, sock, path) = path_socket();
    let gw = Served::start(Some(&path));
    expect_ready(&sock, &gw);
    let text = std::fs::read_to_string(&gw.config).unwrap();
    std::fs::write(&gw.config, text.replace("Hello, world!", "Hello, reloaded!")).unwrap();

    let first_sent = Instant::now();
    gw.signal("HUP");
    let reloading = next(&sock, &gw);
    assert_eq!(field(&reloading, "RELOADING"), Some("1"), "{reloading}");
    let first: u64 = field(&reloading, "MONOTONIC_USEC")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no MONOTONIC_USEC: {reloading}"));
    let ready = next(&sock, &gw);
    assert_eq!(field(&ready, "READY"), Some("1"), "{ready}");
    assert_eq!(
        field(&ready, "STATUS"),
        Some("serving generation 2 (reloaded)"),
        "{ready}"
    );
    // READY=1 came after the new file was installed: the first request sees it.
    assert_eq!(
        gw.get("/hello"),
        (Some(0), "Hello, reloaded!".to_string()),
        "{}",
        gw.log()
    );

    // MONOTONIC_USEC is CLOCK_MONOTONIC in microseconds: two stamps differ by at least the pause
    // between them and at most the time from the first signal to the second notification.
    let pause = Duration::from_millis(300);
    std::thread::sleep(pause);
    gw.signal("HUP");
    let again = next(&sock, &gw);
    let window = first_sent.elapsed();
    let second: u64 = field(&again, "MONOTONIC_USEC")
        .and_then(|v| v.parse().ok())
        .expect("MONOTONIC_USEC");
    let delta = second.checked_sub(first).expect("MONOTONIC_USEC went backwards");
    assert!(
        delta >= pause.as_micros() as u64 && delta <= window.as_micros() as u64,
        "delta {delta} µs, pause {pause:?}, window {window:?}"
    );
    let ready = next(&sock, &gw);
    assert_eq!(
        field(&ready, "STATUS"),
        Some("serving generation 3 (reloaded)"),
        "{ready}"
    );
}

#[test]
fn a_refused_reload_still_ends_with_ready_and_says_why() {
    let (_dir, sock, path) = path_socket();
    let gw = Served::start(Some(&path));
    expect_ready(&sock, &gw);
    std::fs::write(&gw.config, "this is [[not toml").unwrap();
    gw.signal("HUP");
    let reloading = next(&sock, &gw);
    assert_eq!(field(&reloading, "RELOADING"), Some("1"), "{reloading}");
    let ready = next(&sock, &gw);
    assert_eq!(field(&ready, "READY"), Some("1"), "{ready}");
    let status = field(&ready, "STATUS").expect("STATUS=");
    assert!(
        status.starts_with("reload failed, still serving generation 1: "),
        "{status}"
    );
    assert!(status.contains("tlsgate.toml"), "the reason names the file: {status}");
    // The old configuration keeps serving.
    assert_eq!(gw.get("/hello"), (Some(0), "Hello, world!".to_string()), "{}", gw.log());
}

#[test]
fn sigterm_sends_stopping_then_exits() {
    let (_dir, sock, path) = path_socket();
    let mut gw = Served::start(Some(&path));
    expect_ready(&sock, &gw);
    gw.signal("TERM");
    let stopping = next(&sock, &gw);
    assert_eq!(field(&stopping, "STOPPING"), Some("1"), "{stopping}");
    assert!(
        field(&stopping, "STATUS").is_some_and(|s| s.starts_with("draining")),
        "{stopping}"
    );
    assert_eq!(gw.wait_exit(Duration::from_secs(20)), Some(0), "{}", gw.log());
}

#[test]
fn an_abstract_socket_works() {
    let name = format!("tlsgate-systemd-test-{}-{}", std::process::id(), free_port());
    let sock = UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap()).unwrap();
    let gw = Served::start(Some(&format!("@{name}")));
    expect_ready(&sock, &gw);
    gw.signal("INT");
    let stopping = next(&sock, &gw);
    assert_eq!(field(&stopping, "STOPPING"), Some("1"), "{stopping}");
}

#[test]
fn without_notify_socket_the_gateway_runs_normally() {
    let mut gw = Served::start(None);
    assert!(
        common::wait_until(Duration::from_secs(30), || gw.get("/hello").0 == Some(0)),
        "{}",
        gw.log()
    );
    gw.signal("HUP");
    assert!(
        common::wait_until(Duration::from_secs(10), || gw.log().contains("configuration reloaded")),
        "{}",
        gw.log()
    );
    gw.signal("TERM");
    assert_eq!(gw.wait_exit(Duration::from_secs(20)), Some(0), "{}", gw.log());
    assert!(!gw.log().contains("notified systemd"), "{}", gw.log());
}

#[test]
fn an_unreachable_notify_socket_is_a_warning_not_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nobody-listens.sock");
    let mut gw = Served::start(Some(missing.to_str().unwrap()));
    assert!(
        common::wait_until(Duration::from_secs(30), || gw.log().contains("cannot notify")),
        "{}",
        gw.log()
    );
    let warning = gw
        .log()
        .lines()
        .find(|l| l.contains("cannot notify"))
        .unwrap_or_default()
        .to_string();
    assert!(
        warning.contains("WARN") && warning.contains("nobody-listens.sock"),
        "{warning}"
    );
    assert_eq!(gw.get("/hello"), (Some(0), "Hello, world!".to_string()), "{}", gw.log());
    gw.signal("TERM");
    assert_eq!(gw.wait_exit(Duration::from_secs(20)), Some(0), "{}", gw.log());
}

#[test]
fn systemd_analyze_verify_accepts_the_shipped_unit() {
    require("systemd-analyze");
    let unit = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dist/systemd/tlsgate.service");
    let text = std::fs::read_to_string(&unit).expect("dist/systemd/tlsgate.service");
    let exec = "ExecStart=/usr/bin/tlsgate serve --config /etc/tlsgate/tlsgate.toml";
    assert!(text.lines().any(|l| l == exec), "{exec} missing");
    assert!(text.lines().any(|l| l == "Type=notify"), "Type=notify missing");
    // The binary is not installed here: point ExecStart at the one just built.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("tlsgate.service");
    let built = format!("ExecStart={} serve", common::binary().display());
    std::fs::write(&copy, text.replace("ExecStart=/usr/bin/tlsgate serve", &built)).unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", copy.to_str().unwrap()])
        .output()
        .expect("run systemd-analyze");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "systemd-analyze verify failed:\n{said}");
    assert!(said.trim().is_empty(), "systemd-analyze verify warned:\n{said}");
}
