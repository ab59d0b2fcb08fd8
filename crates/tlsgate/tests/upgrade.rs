//! Binary upgrades without refusing a connection (issue #26 part 1), with real processes:
//! `tlsgate serve --upgrade` takes over a running gateway's listening sockets, ticket keys and
//! session cache through `[server] upgrade_socket`, and the old process drains and exits.
//!
//! - wrk (keep-alive, 32 connections) runs through two upgrades (2 → 3 → 1 workers): no socket
//!   error, no non-2xx answer, both old processes exit after draining;
//! - a TLS 1.3 ticket and a TLS 1.2 session ID made before an upgrade resume after it;
//! - a successor that cannot start (certificate file missing) exits non-zero saying why, and the
//!   running gateway keeps serving and logs the failure;
//! - a second successor while one is taking over is refused, and can upgrade once it is over;
//! - SIGUSR2 starts the successor itself, which becomes systemd's main process (`MAINPID=`,
//!   then a barrier) while the old one says nothing more to systemd;
//! - HTTP/3: the successor takes the QUIC sockets over; a response streaming over QUIC across
//!   the upgrade finishes (the client's datagrams the successor reads reach the old process over
//!   their link), and new QUIC connections reach the successor; the same across 2 → 3 → 1 → 2
//!   workers without a cluster secret (the surplus sockets relay new connections to a worker
//!   while the old process drains and are closed once it has exited, the group then grows again
//!   in order, and the reset secret is handed over: each process resets with the first one's
//!   tokens).

mod common;
mod h3_env;

use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tlsgate_testkit::{free_port, require, toml_path, Origin, TestPki};

/// How long a process may take to start, take over, or drain and exit.
const WAIT: Duration = Duration::from_secs(20);

/// One site and its files, ports and upgrade socket, shared by every process of a test.
struct Setup {
    pki: TestPki,
    https: u16,
    admin: u16,
    dir: tempfile::TempDir,
    socket: PathBuf,
}

impl Setup {
    fn new() -> Self {
        let pki = TestPki::new();
        // Writes the certificates once; configurations reuse them.
        common::site_certs(&pki);
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("upgrade.sock");
        Setup {
            pki,
            https: free_port(),
            admin: free_port(),
            dir,
            socket,
        }
    }

    /// A configuration with `workers` worker threads and this setup's upgrade socket.
    fn config(&self, workers: usize) -> String {
        let certs = common::existing_site_certs(&self.pki);
        common::config_with_certs(&certs, self.https, self.admin, "", "").replace(
            "[server]\nworkers = 2\n",
            &format!(
                "[server]\nworkers = {workers}\nupgrade_socket = {}\n",
                toml_path(&self.socket)
            ),
        )
    }

    /// [`Self::config`] with HTTP/3 on and everything but `/hello` routed to `origin`.
    fn h3_config(&self, workers: usize, origin: &Origin) -> String {
        self.h3_config_with(workers, origin, true)
    }

    /// [`Self::h3_config`], with a cluster secret or without one.
    fn h3_config_with(&self, workers: usize, origin: &Origin, cluster: bool) -> String {
        let certs = common::existing_site_certs(&self.pki);
        let routes = h3_env::to_origin(origin);
        // A cluster secret gives both processes the same stateless-reset key: a reset from the
        // successor for the old process's connection would end it at the client at once.
        let secret = self.dir.path().join("cluster.key");
        tlsgate_testkit::write_private(&secret, &format!("{}\n", "5a".repeat(32)));
        let top = if cluster {
            format!(
                "[http3]\nenabled = true\n[cluster]\nsecret_files = [{}]\nstore = \"local\"\n",
                toml_path(&secret)
            )
        } else {
            "[http3]\nenabled = true\n".to_string()
        };
        common::config_with_certs(&certs, self.https, self.admin, &top, &routes).replace(
            "[server]\nworkers = 2\n",
            &format!(
                "[server]\nworkers = {workers}\nupgrade_socket = {}\n",
                toml_path(&self.socket)
            ),
        )
    }

    /// The sum of the samples of `name` with `labels` at whichever process answers the admin
    /// address.
    fn metric(&self, name: &str, labels: &[&str]) -> f64 {
        let url = format!("http://127.0.0.1:{}/metrics", self.admin);
        let out = tlsgate_testkit::run("curl", &["-sS", "--max-time", "10", &url], b"", Duration::ZERO, WAIT);
        tlsgate_testkit::process::metric_sum(&out.stdout, name, labels)
    }

    /// Writes `text` to a new file; returns its path.
    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Starts `tlsgate serve --config FILE [--upgrade]` with `notify` as `$NOTIFY_SOCKET`.
    fn serve(&self, name: &str, text: &str, upgrade: bool, notify: Option<&Path>) -> Served {
        let config = self.write(&format!("{name}.toml"), text);
        let log = self.dir.path().join(format!("{name}.log"));
        let file = std::fs::File::create(&log).unwrap();
        let mut cmd = Command::new(common::binary());
        cmd.args(["serve", "--config", config.to_str().unwrap()])
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file);
        if upgrade {
            cmd.arg("--upgrade");
        }
        match notify {
            Some(path) => cmd.env("NOTIFY_SOCKET", path),
            None => cmd.env_remove("NOTIFY_SOCKET"),
        };
        Served {
            pid: Some(cmd.spawn().expect("start tlsgate serve")),
            log,
        }
    }

    /// Starts the first gateway and waits until it answers.
    fn first(&self, workers: usize) -> Served {
        self.start(&self.config(workers))
    }

    /// Starts the first gateway with configuration `text` and waits until it answers.
    fn start(&self, text: &str) -> Served {
        let served = self.serve("first", text, false, None);
        assert!(
            common::wait_until(WAIT, || self.get().is_some_and(|(s, _)| s == 200)),
            "the gateway did not start:\n{}",
            served.log()
        );
        served
    }

    /// Starts a successor with `text` and waits for `old` to hand over and exit.
    fn upgrade(&self, name: &str, text: &str, old: &mut Served) -> Served {
        let new = self.serve(name, text, true, None);
        let code = old.wait_exit(WAIT);
        assert_eq!(
            code,
            Some(0),
            "the old process did not exit after the upgrade\nold:\n{}\nnew:\n{}",
            old.log(),
            new.log()
        );
        assert!(old.log().contains("handed over to process"), "{}", old.log());
        assert!(
            common::wait_until(WAIT, || new.log().contains("upgrade complete")),
            "{}",
            new.log()
        );
        new
    }

    /// One GET /hello (a fresh connection): (status, body).
    fn get(&self) -> Option<(u16, String)> {
        let url = format!("https://localhost:{}/hello", self.https);
        let out = common::curl_url(&self.pki.ca_file(), &["-w", "\n%{http_code}"], &url);
        let (body, code) = out.stdout.rsplit_once('\n')?;
        Some((code.parse().ok()?, body.to_string()))
    }

    /// `tlsgate_state{name="NAME"}` of whichever process answers the admin address.
    fn state(&self, name: &str) -> f64 {
        let url = format!("http://127.0.0.1:{}/metrics", self.admin);
        let out = tlsgate_testkit::run("curl", &["-sS", "--max-time", "10", &url], b"", Duration::ZERO, WAIT);
        let series = format!("tlsgate_state{{name=\"{name}\"}} ");
        out.stdout
            .lines()
            .find_map(|l| l.strip_prefix(&series))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {series}in\n{}", out.all()))
    }

    fn s_client(&self, args: &[&str]) -> tlsgate_testkit::Output {
        let get = "GET /hello HTTP/1.1\r\nHost: localhost\r\n\r\n";
        common::s_client_at(&format!("127.0.0.1:{}", self.https), &self.pki.ca_file(), args, get)
    }
}

/// A `tlsgate serve` process this test started; stopped (TERM, then KILL) on drop.
struct Served {
    pid: Option<Child>,
    log: PathBuf,
}

impl Served {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn id(&self) -> u32 {
        self.pid.as_ref().expect("running").id()
    }

    fn signal(&self, name: &str) {
        signal(self.id(), name);
    }

    /// Waits for the process to exit: its exit code, or None on timeout.
    fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        let child = self.pid.as_mut()?;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                self.pid = None;
                return Some(status.code().unwrap_or(-1));
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn running(&mut self) -> bool {
        self.pid.as_mut().is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(pid) = self.pid.as_ref().map(Child::id) {
            stop(pid);
            if let Some(mut child) = self.pid.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

fn signal(pid: u32, name: &str) -> bool {
    Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// TERM, then KILL after 3 s, for a process that may not be this test's child.
fn stop(pid: u32) {
    if !signal(pid, "TERM") {
        return;
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline && alive(pid) {
        std::thread::sleep(Duration::from_millis(20));
    }
    signal(pid, "KILL");
}

/// Whether a process exists (and is not a zombie of this test).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')))
}

/// A process this test did not start (a successor started by SIGUSR2); stopped on drop.
struct Adopted(u32);

impl Drop for Adopted {
    fn drop(&mut self) {
        stop(self.0);
    }
}

#[test]
fn wrk_runs_through_two_upgrades_without_an_error() {
    require("wrk");
    require("curl");
    let s = Setup::new();
    let mut first = s.first(2);
    let url = format!("https://127.0.0.1:{}/hello", s.https);
    let wrk = std::thread::spawn(move || {
        tlsgate_testkit::run(
            "wrk",
            &["-t1", "-c32", "-d5s", "--timeout", "4s", &url],
            b"",
            Duration::ZERO,
            Duration::from_secs(30),
        )
    });
    std::thread::sleep(Duration::from_millis(1500));
    // More workers than the old process had sockets per listener, then fewer.
    let mut second = s.upgrade("second", &s.config(3), &mut first);
    std::thread::sleep(Duration::from_millis(1000));
    let mut third = s.upgrade("third", &s.config(1), &mut second);
    let out = wrk.join().expect("wrk thread");
    let report = out.all();
    assert_eq!(out.status, Some(0), "{report}");
    assert!(
        !report.contains("Socket errors"),
        "connect/read/write/timeout errors:\n{report}"
    );
    assert!(!report.contains("Non-2xx"), "{report}");
    let requests: u64 = report
        .lines()
        .find_map(|l| l.trim().split_once(" requests in ").and_then(|(n, _)| n.parse().ok()))
        .unwrap_or_else(|| panic!("no request count:\n{report}"));
    assert!(requests > 1000, "{report}");
    assert!(third.running(), "{}", third.log());
    assert_eq!(s.get(), Some((200, "Hello, world!".into())), "{}", third.log());
    // The third process inherited the upgrade socket from the second, which had it from the
    // first: the file was never removed or re-created in between.
    assert!(s.socket.exists());
    assert!(
        !third.log().contains("removing a stale upgrade socket"),
        "{}",
        third.log()
    );
}

#[test]
fn sessions_made_before_an_upgrade_resume_after_it() {
    require("openssl");
    require("curl");
    let s = Setup::new();
    let mut first = s.first(2);
    let (tls13, tls12) = (s.pki.path("tls13.pem"), s.pki.path("tls12.pem"));
    let saved = [(&tls13, vec!["-tls1_3"]), (&tls12, vec!["-tls1_2", "-no_ticket"])];
    for (file, args) in &saved {
        let mut all = args.clone();
        all.extend(["-sess_out", file.to_str().unwrap()]);
        let out = s.s_client(&all);
        let lines = common::session_lines(&out.stdout);
        assert!(lines.len() == 1 && lines[0].starts_with("New, "), "{}", out.all());
        assert!(out.stdout.contains("Hello, world!"), "{}", out.all());
    }
    let second = s.upgrade("second", &s.config(2), &mut first);
    for (file, args) in &saved {
        let mut all = args.clone();
        all.extend(["-sess_in", file.to_str().unwrap()]);
        let out = s.s_client(&all);
        assert!(out.stdout.contains("Hello, world!"), "{}", out.all());
        let lines = common::session_lines(&out.stdout);
        assert_eq!(lines.len(), 1, "{}", out.all());
        assert!(
            lines[0].starts_with("Reused, "),
            "{args:?} session not resumed by the new process:\n{}\n{}",
            out.all(),
            second.log()
        );
    }
    let log = second.log();
    let field = |name: &str| -> u64 {
        log.split(&format!(" {name}="))
            .nth(1)
            .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in:\n{log}"))
    };
    assert!(field("ticket_keys_installed") >= 1, "{log}");
    assert!(field("sessions_installed") >= 1, "{log}");
}

#[test]
fn a_successor_that_cannot_start_leaves_the_old_gateway_serving() {
    require("curl");
    let s = Setup::new();
    let mut first = s.first(2);
    let missing = s.dir.path().join("missing.pem");
    let bad = s
        .config(2)
        .replace(&toml_path(&s.pki.path("ecdsa.pem")), &toml_path(&missing));
    let config = s.write("bad.toml", &bad);
    let out = common::tlsgate(&["serve", "--config", config.to_str().unwrap(), "--upgrade"]);
    assert_ne!(out.status, Some(0), "{}", out.all());
    let old = first.id();
    assert!(
        out.stderr
            .contains(&format!("upgrade failed, process {old} keeps serving"))
            && out.stderr.contains("missing.pem"),
        "the upgrade command must say why, and that the old process serves on:\n{}",
        out.all()
    );
    assert!(first.running(), "{}", first.log());
    assert_eq!(s.get(), Some((200, "Hello, world!".into())));
    assert!(
        common::wait_until(Duration::from_secs(5), || first
            .log()
            .contains("still serving with this process")),
        "{}",
        first.log()
    );
    assert!(first.log().contains("missing.pem"), "{}", first.log());
    assert_eq!(s.state("upgrades_failed_total"), 1.0);
    // Nothing was taken: a good successor still takes over afterwards.
    let second = s.upgrade("second", &s.config(2), &mut first);
    assert_eq!(s.get(), Some((200, "Hello, world!".into())), "{}", second.log());
}

#[test]
fn a_second_upgrade_while_one_is_in_progress_is_refused() {
    require("curl");
    let s = Setup::new();
    let mut first = s.first(2);
    // A successor that connected and is still building (it has said nothing yet).
    let holder = UnixStream::connect(&s.socket).unwrap();
    let me = std::process::id();
    assert!(
        common::wait_until(Duration::from_secs(5), || first
            .log()
            .contains(&format!("process {me} connected to take over"))),
        "{}",
        first.log()
    );
    let config = s.write("second.toml", &s.config(2));
    let out = common::tlsgate(&["serve", "--config", config.to_str().unwrap(), "--upgrade"]);
    assert_ne!(out.status, Some(0), "{}", out.all());
    assert!(
        out.stderr
            .contains(&format!("another upgrade is in progress (by process {me})")),
        "{}",
        out.all()
    );
    assert!(
        first.log().contains(&format!("process {me} is taking over already")),
        "{}",
        first.log()
    );
    assert_eq!(s.state("upgrades_refused_total"), 1.0);
    assert_eq!(s.get(), Some((200, "Hello, world!".into())));
    // Once that one gives up, an upgrade goes through.
    drop(holder);
    assert!(
        common::wait_until(Duration::from_secs(5), || first
            .log()
            .contains("closed the connection without a word")),
        "{}",
        first.log()
    );
    let _second = s.upgrade("second", &s.config(2), &mut first);
}

#[test]
fn sigusr2_starts_a_successor_that_becomes_systemds_main_process() {
    require("curl");
    let s = Setup::new();
    let notify_path = s.dir.path().join("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    notify.set_read_timeout(Some(WAIT)).unwrap();
    let recv = || {
        let mut buf = [0u8; 4096];
        let n = notify.recv(&mut buf).expect("a notification");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    let mut first = s.serve("first", &s.config(2), false, Some(&notify_path));
    let ready = recv();
    assert!(ready.starts_with("READY=1\n"), "{ready}");
    assert!(ready.contains(&format!("MAINPID={}\n", first.id())), "{ready}");

    first.signal("USR2");
    let took_over = recv();
    let new_pid: u32 = took_over
        .lines()
        .find_map(|l| l.strip_prefix("MAINPID="))
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no MAINPID in {took_over:?}\n{}", first.log()));
    let _cleanup = Adopted(new_pid);
    assert_ne!(new_pid, first.id());
    assert!(took_over.starts_with("READY=1\n"), "{took_over}");
    assert!(
        took_over.contains(&format!("took over from process {}", first.id())),
        "{took_over}"
    );
    assert_eq!(recv(), "BARRIER=1\n");
    assert_eq!(first.wait_exit(WAIT), Some(0), "{}", first.log());
    assert!(first.log().contains("SIGUSR2: started process"), "{}", first.log());
    // The old process told systemd nothing more (a STOPPING=1 from it would stop the unit).
    notify.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 4096];
    assert!(notify.recv(&mut buf).is_err(), "{:?}", String::from_utf8_lossy(&buf));
    notify.set_nonblocking(false).unwrap();

    assert_eq!(s.get(), Some((200, "Hello, world!".into())));
    assert!(alive(new_pid));
    assert!(signal(new_pid, "TERM"));
    assert!(recv().starts_with("STOPPING=1\n"), "the new main process says it stops");
    assert!(
        common::wait_until(WAIT, || !alive(new_pid)),
        "process {new_pid} did not exit"
    );
    assert!(!s.socket.exists(), "a plain stop removes the upgrade socket");
}

/// HTTP/3 across an upgrade: the successor takes the QUIC sockets (the same sockets: both
/// processes read them until the old one has drained), a response streaming to a quic-go client
/// over the old process's connection finishes though the successor reads some of the client's
/// datagrams (they go over the link; without it the successor answers them with stateless
/// resets, which the client recognises — both processes derive the reset key from the cluster
/// secret — and the connection ends), and new connections are the successor's.
#[test]
fn http3_responses_in_flight_finish_across_an_upgrade_and_new_connections_reach_the_successor() {
    let origin = Origin::start("o1");
    let setup = Setup::new();
    let mut old = setup.start(&setup.h3_config(2, &origin));
    let ca = setup.pki.ca_file();
    let url = |p: &str| format!("https://localhost:{}{p}", setup.https);
    h3_env::h3client();
    // 40 chunks 100 ms apart: the client acknowledges them all through the upgrade.
    let new = stream_across_upgrade(&setup, &ca, 40, || {
        setup.upgrade("second", &setup.h3_config(2, &origin), &mut old)
    });
    assert!(
        setup.metric("tlsgate_quic_datagrams_total", &["what=\"to_predecessor\""]) > 0.0,
        "the successor passed none of the old connection's datagrams to it\n{}",
        new.log()
    );
    assert_eq!(
        setup.metric("tlsgate_quic_datagrams_total", &["what=\"stateless_reset\""]),
        0.0,
        "{}",
        new.log()
    );
    // The old process is gone: new connections, and their requests, are the successor's.
    let after = h3_env::client(&ca, &["-url", &url("/echo?x=1"), "-n", "2"]);
    assert!(after.iter().all(|r| r["status"] == 200), "{after:?}\n{}", new.log());
    assert!(setup.metric("tlsgate_quic_handshakes_total", &["protocol=\"h3\""]) >= 1.0);
    assert!(setup.metric("tlsgate_requests_total", &["protocol=\"h3\""]) >= 2.0);
}

/// Streams a response of `chunks` chunks 100 ms apart over HTTP/3 while `upgrade` runs (0.8 s
/// in), and checks that it finished whole and in time; the successor.
fn stream_across_upgrade(setup: &Setup, ca: &Path, chunks: u64, upgrade: impl FnOnce() -> Served) -> Served {
    let streaming = format!("https://localhost:{}/stream?chunks={chunks}&ms=100", setup.https);
    std::thread::scope(|s| {
        let inflight = s.spawn(|| h3_env::client(ca, &["-url", &streaming]));
        std::thread::sleep(Duration::from_millis(800));
        let new = upgrade();
        let got = inflight.join().unwrap();
        assert_eq!(got.len(), 1, "{got:?}\nnew:\n{}", new.log());
        assert_eq!(got[0]["status"], 200, "{got:?}\nnew:\n{}", new.log());
        assert!(got[0]["elapsed_ms"].as_u64().unwrap() >= (chunks - 5) * 100, "{got:?}");
        assert!(got[0]["error"].is_null(), "{got:?}\nnew:\n{}", new.log());
        new
    })
}

/// The stateless reset a QUIC endpoint on `port` answers a short-header packet for a connection
/// ID it does not know with: its token (the last 16 bytes), an HMAC of the ID under the
/// process's reset secret.
fn reset_token(port: u16) -> Vec<u8> {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    // Short header, then a 16-byte connection ID naming worker 0, then a payload.
    let mut packet = vec![0x40u8];
    packet.extend_from_slice(&[0u8; 16]);
    packet.extend_from_slice(&[0x5a; 40]);
    socket.send_to(&packet, ("127.0.0.1", port)).unwrap();
    let mut buf = [0u8; 128];
    let (n, _) = socket.recv_from(&mut buf).expect("a stateless reset");
    assert!(n >= 21, "{n} bytes");
    buf[n - 16..n].to_vec()
}

/// HTTP/3 across upgrades that change the number of workers (2 → 3 → 1 → 2): each successor
/// takes the old process's QUIC sockets over (with more workers, new sockets join the group
/// after them; with fewer, the surplus sockets stay and are read too while the old process
/// runs, since closing one would reorder the group under the steering program), and a response
/// streaming over the old process's connection finishes across each upgrade. With one worker and
/// three sockets, new connections made while the old process drains land mostly on a surplus
/// socket, which passes them to the worker (`what="relayed"`); once the old process has exited,
/// the successor closes the two surplus sockets (the kernel then holds one socket on the port),
/// new connections reach the worker's socket directly, and a further upgrade to two workers
/// grows the group again with each worker's datagrams steered to its own socket (nothing
/// forwarded between workers). Without a cluster secret, the reset secret is handed over too:
/// the successors' stateless resets carry the tokens the first process promised its clients.
#[test]
fn http3_follows_upgrades_that_change_the_number_of_workers() {
    let origin = Origin::start("o1");
    let setup = Setup::new();
    let config = |workers| setup.h3_config_with(workers, &origin, false);
    let mut old = setup.start(&config(2));
    let ca = setup.pki.ca_file();
    let url = |p: &str| format!("https://localhost:{}{p}", setup.https);
    let token = reset_token(setup.https);
    h3_env::h3client();
    // On failure, the log of every process named (during a drain: the successor's and the
    // draining process's, which passes new clients' Initials over the link).
    let new_connections = |n: usize, who: &[&Served]| {
        for _ in 0..n {
            let got = h3_env::client(&ca, &["-url", &url("/echo?x=1")]);
            let logs = || {
                who.iter()
                    .map(|w| w.log())
                    .collect::<Vec<_>>()
                    .join("\n---- the other process:\n")
            };
            assert!(got.len() == 1 && got[0]["status"] == 200, "{got:?}\n{}", logs());
        }
    };
    // 2 → 3: new sockets join the group.
    old = stream_across_upgrade(&setup, &ca, 20, || setup.upgrade("step0", &config(3), &mut old));
    assert!(!old.log().contains("HTTP/3 not served"), "{}", old.log());
    new_connections(12, &[&old]);
    assert_eq!(reset_token(setup.https), token, "{}", old.log());
    assert_eq!(udp_sockets_on(setup.https), 3);

    // 3 → 1 while the old process still streams a response.
    let streaming = format!("https://localhost:{}/stream?chunks=40&ms=100", setup.https);
    let one = std::thread::scope(|s| {
        let inflight = s.spawn(|| h3_env::client(&ca, &["-url", &streaming]));
        std::thread::sleep(Duration::from_millis(800));
        let one = setup.serve("step1", &config(1), true, None);
        assert!(
            common::wait_until(WAIT, || one.log().contains("upgrade complete")),
            "{}",
            one.log()
        );
        assert!(old.running(), "the old process drains its streaming response");
        assert_eq!(
            udp_sockets_on(setup.https),
            3,
            "the old process's sockets all stay while it runs"
        );
        new_connections(12, &[&one, &old]);
        let got = inflight.join().unwrap();
        assert!(
            got.len() == 1 && got[0]["status"] == 200 && got[0]["error"].is_null(),
            "{got:?}\n{}",
            one.log()
        );
        one
    });
    assert_eq!(old.wait_exit(WAIT), Some(0), "{}", old.log());
    assert!(
        common::wait_until(WAIT, || one.log().contains("closed 2 surplus QUIC socket(s)")),
        "the surplus sockets were not closed after the old process exited\n{}",
        one.log()
    );
    assert_eq!(udp_sockets_on(setup.https), 1, "{}", one.log());
    let relayed = setup.metric("tlsgate_quic_datagrams_total", &["what=\"relayed\""]);
    assert!(
        relayed > 0.0,
        "no new connection reached a surplus socket\n{}",
        one.log()
    );
    new_connections(12, &[&one]);
    assert_eq!(
        setup.metric("tlsgate_quic_datagrams_total", &["what=\"relayed\""]),
        relayed,
        "a datagram reached a closed surplus socket's place"
    );
    assert_eq!(reset_token(setup.https), token, "{}", one.log());
    old = one;

    // 1 → 2: the group grows from the one socket left.
    let two = stream_across_upgrade(&setup, &ca, 20, || setup.upgrade("step2", &config(2), &mut old));
    assert_eq!(udp_sockets_on(setup.https), 2, "{}", two.log());
    new_connections(16, &[&two]);
    assert_eq!(
        setup.metric("tlsgate_quic_datagrams_total", &["what=\"forwarded\""]),
        0.0,
        "datagrams reached another worker's socket: the group's order is off\n{}",
        two.log()
    );
    assert!(setup.metric("tlsgate_requests_total", &["protocol=\"h3\""]) >= 16.0);
    assert_eq!(reset_token(setup.https), token, "{}", two.log());
}

/// UDP sockets bound to local port `port` in this network namespace, of every process.
fn udp_sockets_on(port: u16) -> usize {
    let suffix = format!(":{port:04X}");
    ["/proc/net/udp", "/proc/net/udp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .map(|t| {
            t.lines()
                .skip(1)
                .filter(|l| {
                    l.split_whitespace()
                        .nth(1)
                        .is_some_and(|local| local.ends_with(&suffix))
                })
                .count()
        })
        .sum()
}
