//! Active health checks (`[upstream.health_check]`, issue 17): a real gateway probes two origins
//! whose health endpoint can be switched to failing, slow or gone. A server whose probes fail
//! `fall` times in a row gets no client request (each origin names itself in its bodies), the
//! gauge and the counter say so and the log says why; after `rise` passed probes it is served
//! again. With every server unhealthy requests get a 503 at once; a reload keeps what the checks
//! found; without checks nothing is probed. Against nginx, probes speak TLS (verified with the
//! group's `[upstream.tls]`) and HTTP/2 where the group does, and read the status over each.

mod common;

use common::{upstream, upstream_route, wait_until, Fixture};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tlsgate_testkit::nginx::Nginx;
use tlsgate_testkit::{free_port, toml_path, TestPki};
use tlsgate_tls::pki::KeyKind;

/// What a test origin answers on `/healthz`, and what it has seen.
#[derive(Default)]
struct State {
    /// Status of `/healthz` (200 until changed).
    health_status: AtomicU16,
    /// Delay before answering `/healthz`, in milliseconds.
    health_delay_ms: AtomicU64,
    /// `/healthz` requests received.
    probes: AtomicUsize,
    /// Other requests received.
    served: AtomicUsize,
    /// The last `/healthz` request head.
    last_probe: std::sync::Mutex<String>,
}

/// An HTTP/1.1 origin on a loopback port: `/healthz` answers as [`State`] says, anything else
/// `origin=NAME`; one request per connection. Stopped (its port closed) on drop or [`stop`].
struct HealthOrigin {
    name: &'static str,
    port: u16,
    state: Arc<State>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HealthOrigin {
    fn start(name: &'static str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind origin");
        let state = Arc::new(State::default());
        state.health_status.store(200, Ordering::Relaxed);
        Self::serve(name, listener, state)
    }

    /// Listens again on the same port, with the same state (a restarted origin).
    fn restart(&mut self) {
        self.stop();
        let listener = TcpListener::bind(("127.0.0.1", self.port)).expect("bind the origin's port again");
        let again = Self::serve(self.name, listener, self.state.clone());
        *self = again;
    }

    fn serve(name: &'static str, listener: TcpListener, state: Arc<State>) -> Self {
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (st, stopped) = (state.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((tcp, _)) => {
                        let st = st.clone();
                        std::thread::spawn(move || answer(name, tcp, &st));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Self {
            name,
            port,
            state,
            stop,
            thread: Some(thread),
        }
    }

    /// Closes the listening socket (new connections are refused).
    fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The `server` label of its metrics.
    fn label(&self) -> String {
        format!("server=\"{}\"", self.addr())
    }

    fn set_health(&self, status: u16) {
        self.state.health_status.store(status, Ordering::Relaxed);
    }

    fn set_health_delay(&self, ms: u64) {
        self.state.health_delay_ms.store(ms, Ordering::Relaxed);
    }

    fn probes(&self) -> usize {
        self.state.probes.load(Ordering::Relaxed)
    }

    fn served(&self) -> usize {
        self.state.served.load(Ordering::Relaxed)
    }
}

impl Drop for HealthOrigin {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Reads one request head and answers it, then closes the connection.
fn answer(name: &str, mut tcp: TcpStream, state: &State) {
    let _ = tcp.set_nonblocking(false);
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(5)));
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match tcp.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let path = head.split_whitespace().nth(1).unwrap_or("");
    let (status, body) = if path == "/healthz" {
        state.probes.fetch_add(1, Ordering::Relaxed);
        *state.last_probe.lock().unwrap() = head.clone();
        std::thread::sleep(Duration::from_millis(state.health_delay_ms.load(Ordering::Relaxed)));
        (
            state.health_status.load(Ordering::Relaxed),
            format!("health of {name}\n"),
        )
    } else {
        state.served.fetch_add(1, Ordering::Relaxed);
        (200, format!("origin={name}\n"))
    };
    let _ = tcp.write_all(
        format!(
            "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    );
}

/// A gateway whose route `/` goes to upstream `app` = `origins`, with `[upstream.health_check]`
/// = `check` (nothing when empty).
fn gateway(origins: &[&HealthOrigin], check: &str) -> Fixture {
    let servers: Vec<String> = origins.iter().map(|o| o.addr()).collect();
    let table = if check.is_empty() {
        String::new()
    } else {
        format!("[upstream.health_check]\n{check}\n")
    };
    let routes = [upstream_route(None, "/", "app"), upstream("app", &servers, &table)].concat();
    common::start("", &routes)
}

/// Sends `n` requests on one connection; returns (statuses, the origins that answered).
fn requests(f: &Fixture, n: usize) -> (Vec<String>, Vec<String>) {
    let urls: Vec<String> = (1..n).map(|i| f.url(&format!("/item/{i}"))).collect();
    let mut args: Vec<&str> = urls.iter().map(String::as_str).collect();
    args.extend(["--http1.1", "-w", "status=%{http_code}\n"]);
    let out = f.curl(&args, "/item/0");
    let statuses = out
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("status="))
        .map(str::to_string)
        .collect::<Vec<_>>();
    let origins = out
        .stdout
        .lines()
        .filter_map(|l| l.split("origin=").nth(1))
        .map(|o| o.split_whitespace().next().unwrap_or("").to_string())
        .collect();
    assert_eq!(statuses.len(), n, "{}", out.all());
    (statuses, origins)
}

fn healthy(f: &Fixture, o: &HealthOrigin) -> Option<f64> {
    let text = f.gw.metrics();
    let label = o.label();
    text.lines()
        .any(|l| l.starts_with("tlsgate_upstream_server_healthy{") && l.contains(&label))
        .then(|| tlsgate_testkit::process::metric_sum(&text, "tlsgate_upstream_server_healthy", &[&label]))
}

fn checks(f: &Fixture, result: &str) -> f64 {
    f.gw.metric(
        "tlsgate_upstream_health_checks_total",
        &["upstream=\"app\"", &format!("result=\"{result}\"")],
    )
}

fn connect_errors(f: &Fixture) -> f64 {
    f.gw.metric("tlsgate_upstream_errors_total", &["kind=\"connect\""])
}

/// Waits (at most 10 s, i.e. dozens of 200 ms intervals) until `o`'s gauge reads `want`.
fn wait_health(f: &Fixture, o: &HealthOrigin, want: f64) {
    let held = wait_until(Duration::from_secs(10), || healthy(f, o) == Some(want));
    assert!(
        held,
        "{} never became {want}: {:?}\n{}\n{}",
        o.name,
        healthy(f, o),
        f.gw.metrics(),
        f.gw.log()
    );
}

const FAST: &str = "enabled = true\ninterval = \"200ms\"\ntimeout = \"200ms\"\nrise = 2\nfall = 2";

#[test]
fn a_failing_health_endpoint_takes_its_server_out_until_it_passes_again() {
    let a = HealthOrigin::start("a");
    let b = HealthOrigin::start("b");
    let f = gateway(&[&a, &b], &format!("{FAST}\nhost = \"status.internal\""));
    wait_health(&f, &a, 1.0);
    wait_health(&f, &b, 1.0);
    assert!(wait_until(Duration::from_secs(5), || a.probes() > 0 && b.probes() > 0));
    let (statuses, origins) = requests(&f, 10);
    assert_eq!(statuses, vec!["200"; 10]);
    assert!(
        origins.contains(&"a".into()) && origins.contains(&"b".into()),
        "{origins:?}"
    );
    // The probe is what the configuration says.
    let probe = a.state.last_probe.lock().unwrap().to_ascii_lowercase();
    assert!(probe.starts_with("get /healthz http/1.1\r\n"), "{probe}");
    assert!(probe.contains("host: status.internal\r\n"), "{probe}");

    // An unexpected status: out after `fall` probes, with the reason in the log.
    a.set_health(503);
    wait_health(&f, &a, 0.0);
    let served = a.served();
    let (statuses, origins) = requests(&f, 20);
    assert_eq!(statuses, vec!["200"; 20]);
    assert_eq!(origins, vec!["b"; 20], "no request goes to the unhealthy server");
    assert_eq!(a.served(), served);
    assert_eq!(healthy(&f, &b), Some(1.0));
    assert!(checks(&f, "status") >= 2.0, "{}", f.gw.metrics());
    assert!(checks(&f, "ok") >= 4.0, "{}", f.gw.metrics());
    let log = f.gw.log();
    let line = log
        .lines()
        .find(|l| l.contains("upstream server unhealthy") && l.contains(&a.addr()))
        .unwrap_or_else(|| panic!("no transition line for a:\n{log}"));
    assert!(line.contains("WARN"), "{line}");
    assert!(line.contains("status 503"), "{line}");
    assert!(line.contains("expected 200-399"), "{line}");
    assert!(
        !log.lines()
            .any(|l| l.contains("upstream server unhealthy") && l.contains(&b.addr())),
        "b never changed:\n{log}"
    );

    // Passing again: back after `rise` probes, and served.
    a.set_health(200);
    wait_health(&f, &a, 1.0);
    let log = f.gw.log();
    assert!(
        log.lines()
            .any(|l| l.contains("INFO") && l.contains("upstream server healthy again") && l.contains(&a.addr())),
        "{log}"
    );
    let (_, origins) = requests(&f, 10);
    assert!(origins.contains(&"a".into()), "{origins:?}");
}

#[test]
fn a_slow_or_gone_server_fails_its_checks_and_with_none_left_requests_get_a_quick_503() {
    let mut a = HealthOrigin::start("a");
    let b = HealthOrigin::start("b");
    let f = gateway(&[&a, &b], FAST);
    wait_health(&f, &a, 1.0);
    wait_health(&f, &b, 1.0);

    // The process is gone: connects are refused.
    a.stop();
    wait_health(&f, &a, 0.0);
    assert!(checks(&f, "connect") >= 2.0, "{}", f.gw.metrics());
    let log = f.gw.log();
    assert!(
        log.lines().any(|l| l.contains("upstream server unhealthy")
            && l.contains(&a.addr())
            && l.contains(&format!("connect to {} failed", a.addr()))),
        "{log}"
    );
    let (statuses, origins) = requests(&f, 6);
    assert_eq!((statuses, origins), (vec!["200".into(); 6], vec!["b".into(); 6]));
    // No connect attempt of a client request went to the unhealthy server.
    assert_eq!(connect_errors(&f), 0.0);

    // Slower than `timeout` counts as a failure too.
    b.set_health_delay(1000);
    wait_health(&f, &b, 0.0);
    assert!(checks(&f, "timeout") >= 2.0, "{}", f.gw.metrics());
    assert!(
        f.gw.log().lines().any(|l| l.contains("upstream server unhealthy")
            && l.contains(&b.addr())
            && l.contains("no response within 200ms")),
        "{}",
        f.gw.log()
    );
    // Nobody healthy: a 503 without trying either origin, counted as such.
    let served = b.served();
    let (statuses, origins) = requests(&f, 5);
    assert_eq!(statuses, vec!["503"; 5]);
    assert_eq!(
        f.gw.metric("tlsgate_upstream_errors_total", &["kind=\"no_healthy_server\""]),
        5.0,
        "{}",
        f.gw.metrics()
    );
    assert!(origins.is_empty());
    assert_eq!(b.served(), served);
    assert_eq!(connect_errors(&f), 0.0);

    // Back: the restarted process passes its probes and is served again.
    a.restart();
    wait_health(&f, &a, 1.0);
    let (statuses, origins) = requests(&f, 4);
    assert_eq!((statuses, origins), (vec!["200".into(); 4], vec!["a".into(); 4]));
}

#[test]
fn a_reload_keeps_an_unhealthy_server_out() {
    let a = HealthOrigin::start("a");
    let b = HealthOrigin::start("b");
    a.set_health(500);
    // Slow checks: a server the new generation believed healthy would get requests for seconds.
    let check = "enabled = true\ninterval = \"1s\"\ntimeout = \"500ms\"\nfall = 3\nrise = 2";
    let f = gateway(&[&a, &b], check);
    wait_health(&f, &a, 0.0);
    let (status, body) = f.gw.reload();
    assert_eq!(status, 200, "{body}");
    assert!(
        wait_until(Duration::from_secs(5), || f.gw.log().contains("(generation 2)")),
        "{}",
        f.gw.log()
    );
    assert_eq!(healthy(&f, &a), Some(0.0), "{}", f.gw.metrics());
    let (_, origins) = requests(&f, 10);
    assert_eq!(origins, vec!["b"; 10]);
    assert_eq!(a.served(), 0);
}

#[test]
fn without_health_checks_nothing_is_probed() {
    let a = HealthOrigin::start("a");
    let b = HealthOrigin::start("b");
    a.set_health(503);
    // Settings without `enabled = true` are not used (check warns about them).
    let f = gateway(&[&a, &b], "interval = \"100ms\"\ntimeout = \"50ms\"");
    let (statuses, origins) = requests(&f, 4);
    assert_eq!(statuses, vec!["200"; 4]);
    assert!(origins.contains(&"a".into()), "{origins:?}");
    // Ten intervals' worth of time: not one probe.
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!((a.probes(), b.probes()), (0, 0));
    let metrics = f.gw.metrics();
    assert!(!metrics.contains("tlsgate_upstream_server_healthy{"), "{metrics}");
    assert!(!metrics.contains("tlsgate_upstream_health_checks_total{"), "{metrics}");
    assert!(!f.gw.log().contains("health checks on"), "{}", f.gw.log());
}

#[test]
fn probes_speak_tls_and_http2_where_the_group_does() {
    let origin = TestPki::new();
    let (cert, key) = origin.leaf("origin", &["127.0.0.1"], KeyKind::EcdsaP256);
    let down = origin.path("down");
    let (h2, h2c, h1) = (free_port(), free_port(), free_port());
    let server = |port: u16, flags: &str| {
        let tls = if flags.contains("ssl") {
            format!(
                "ssl_certificate {};\n        ssl_certificate_key {};",
                cert.display(),
                key.display()
            )
        } else {
            String::new()
        };
        format!(
            "    server {{\n        listen 127.0.0.1:{port} {flags};\n        {tls}\n        access_log {dir}/{port}.log;\n        \
             location = /healthz {{ if (-f {down}) {{ return 503; }} return 200 \"ok\\n\"; }}\n    }}\n",
            dir = origin.dir.path().display(),
            down = down.display()
        )
    };
    let servers = [server(h2, "ssl http2"), server(h2c, "http2"), server(h1, "ssl")].concat();
    let nginx = Nginx::start(&servers, &[h2, h2c, h1]);
    let access = |port: u16| std::fs::read_to_string(origin.path(&format!("{port}.log"))).unwrap_or_default();
    let trust = format!("[upstream.tls]\nca = {}\n", toml_path(&origin.ca_file()));
    let groups = [
        (
            "h2",
            format!("https://127.0.0.1:{h2}"),
            format!("protocol = \"http2\"\n{trust}"),
        ),
        ("h2c", format!("127.0.0.1:{h2c}"), "protocol = \"http2\"\n".to_string()),
        ("h1", format!("https://127.0.0.1:{h1}"), trust.clone()),
        // The gateway's own CA did not issue the origin's certificate.
        ("untrusted", format!("https://127.0.0.1:{h1}"), String::new()),
    ];
    let mut routes = String::new();
    for (name, server, extra) in &groups {
        routes.push_str(&upstream_route(None, &format!("/{name}/"), name));
        let tls = if extra.contains("[upstream.tls]") || !server.starts_with("https") {
            extra.clone()
        } else {
            format!("{extra}[upstream.tls]\nca = \"CA\"\n")
        };
        routes.push_str(&upstream(
            name,
            std::slice::from_ref(server),
            &format!("{tls}[upstream.health_check]\n{FAST}\n"),
        ));
    }
    let f = common::start_with("", |pki| routes.replace("\"CA\"", &toml_path(&pki.ca_file())));
    let count = |group: &str, result: &str| {
        f.gw.metric(
            "tlsgate_upstream_health_checks_total",
            &[&format!("upstream=\"{group}\""), &format!("result=\"{result}\"")],
        )
    };
    let gauge = |group: &str| {
        f.gw.metric("tlsgate_upstream_server_healthy", &[&format!("upstream=\"{group}\"")])
    };
    let passing = wait_until(Duration::from_secs(10), || {
        ["h2", "h2c", "h1"].iter().all(|g| count(g, "ok") >= 2.0) && gauge("untrusted") == 0.0
    });
    assert!(passing, "{}\n{}\n{}", f.gw.metrics(), f.gw.log(), nginx.error_log());
    assert!(count("untrusted", "tls") >= 2.0, "{}", f.gw.metrics());
    assert_eq!(count("untrusted", "ok"), 0.0);
    for (port, version) in [(h2, "HTTP/2.0"), (h2c, "HTTP/2.0"), (h1, "HTTP/1.1")] {
        let log = access(port);
        assert!(
            log.lines()
                .any(|l| l.contains(&format!("\"GET /healthz {version}\" 200")) && l.contains("tlsgate-health-check")),
            "{port} {version}:\n{log}"
        );
    }
    // The status is read over each protocol.
    std::fs::write(&down, "").unwrap();
    let failing = wait_until(Duration::from_secs(10), || {
        ["h2", "h2c", "h1"].iter().all(|g| gauge(g) == 0.0)
    });
    assert!(failing, "{}\n{}", f.gw.metrics(), f.gw.log());
    let log = f.gw.log();
    for port in [h2, h2c, h1] {
        assert!(
            log.lines().any(|l| l.contains("upstream server unhealthy")
                && l.contains(&format!("127.0.0.1:{port}"))
                && l.contains("status 503")),
            "{port}:\n{log}"
        );
    }
    let untrusted = log
        .lines()
        .find(|l| l.contains("upstream server unhealthy") && l.contains("upstream=untrusted"))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(untrusted.contains("kind=\"tls\""), "{untrusted}");
    std::fs::remove_file(&down).unwrap();
    let back = wait_until(Duration::from_secs(10), || {
        ["h2", "h2c", "h1"].iter().all(|g| gauge(g) == 1.0)
    });
    assert!(back, "{}\n{}", f.gw.metrics(), f.gw.log());
}
