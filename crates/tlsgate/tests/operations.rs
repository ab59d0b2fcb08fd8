//! Behaviour 4: operating the gateway: reload (SIGHUP and `tlsgate reload`) without dropping
//! connections, bad configurations refused, SIGTERM drain, logs, metrics, the admin listener's
//! loopback rule, the plain-HTTP redirect listener, the demo mode and per-worker sockets.

mod common;

use common::{upstream, upstream_route};
use std::time::Duration;
use tlsgate_testkit::process::metric_sum;
use tlsgate_testkit::{free_port, GatewayProcess, Origin, TestPki};

fn reloads(f: &common::Fixture, result: &str) -> f64 {
    f.gw.metric("tlsgate_config_reloads_total", &[&format!("result=\"{result}\"")])
}

#[test]
fn sighup_reload_applies_a_new_config_and_keeps_open_connections() {
    let f = common::start("", "");
    let mut session = f.tls_session();
    let first = session.get("/hello", "Hello, world!");
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    assert!(first.ends_with("Hello, world!"), "{first}");
    let accepted = f.gw.metric("tlsgate_connections_accepted_total", &[]);

    f.write_config(&f.config_again("", "").replace("Hello, world!", "Hello, reloaded!"));
    f.gw.signal("HUP");
    assert!(
        common::wait_until(Duration::from_secs(10), || reloads(&f, "ok") >= 1.0),
        "{}",
        f.gw.log()
    );
    assert!(f.gw.log().contains("configuration reloaded"), "{}", f.gw.log());

    // The connection opened before the reload answers with the new configuration.
    let second = session.get("/hello", "Hello, reloaded!");
    assert!(second.starts_with("HTTP/1.1 200"), "{second}");
    assert!(second.ends_with("Hello, reloaded!"), "{second}");
    assert_eq!(
        f.gw.metric("tlsgate_connections_accepted_total", &[]),
        accepted,
        "both requests went over the one connection"
    );
    assert_eq!(f.curl(&[], "/hello").stdout, "Hello, reloaded!");
    assert!(f.gw.metric("tlsgate_state", &["name=\"config_generation\""]) >= 2.0);
}

#[test]
fn reload_command_applies_a_changed_config() {
    let f = common::start("", "");
    let config = f.gw.config.to_str().unwrap().to_string();
    f.write_config(&f.config_again("", "").replace("Hello, world!", "Hello, v2!"));
    let out = common::tlsgate(&["reload", "--config", &config]);
    assert_eq!(out.status, Some(0), "{}\n{}", out.all(), f.gw.log());
    assert!(out.stdout.contains("generation 2"), "{}", out.all());
    assert_eq!(f.curl(&[], "/hello").stdout, "Hello, v2!");
    assert_eq!(reloads(&f, "ok"), 1.0);
}

#[test]
fn a_bad_new_config_is_refused_and_the_old_one_keeps_serving() {
    let f = common::start("", "");
    let config = f.gw.config.to_str().unwrap().to_string();
    let mut session = f.tls_session();
    assert!(session.get("/hello", "Hello, world!").ends_with("Hello, world!"));

    // A certificate file that does not exist.
    let missing = f.pki.path("missing.pem");
    let bad = f
        .config_again("", "")
        .replace(f.pki.path("ecdsa.pem").to_str().unwrap(), missing.to_str().unwrap())
        .replace("Hello, world!", "Hello, bad!");
    assert!(bad.contains("missing.pem"));
    f.write_config(&bad);
    let out = common::tlsgate(&["reload", "--config", &config]);
    assert_ne!(out.status, Some(0), "{}", out.all());
    assert!(out.stderr.contains("reload refused"), "{}", out.all());
    assert!(out.stderr.contains("missing.pem"), "{}", out.all());
    assert!(out.stderr.contains("site[0].certificate[0].chain"), "{}", out.all());
    assert!(f.gw.log().contains("reload refused"), "{}", f.gw.log());
    assert_eq!(reloads(&f, "error"), 1.0);
    assert_eq!(f.curl(&[], "/hello").stdout, "Hello, world!");

    // Invalid TOML, through the admin address (the file cannot give it) and through SIGHUP.
    f.write_config("[server\nworkers = 2\n");
    let admin = format!("127.0.0.1:{}", f.admin);
    let out = common::tlsgate(&["reload", "--admin", &admin]);
    assert_ne!(out.status, Some(0), "{}", out.all());
    assert!(out.stderr.contains("reload refused"), "{}", out.all());
    assert!(out.stderr.contains(&config), "names the file: {}", out.all());
    f.gw.signal("HUP");
    assert!(
        common::wait_until(Duration::from_secs(10), || reloads(&f, "error") >= 3.0),
        "{}",
        f.gw.metrics()
    );
    assert_eq!(reloads(&f, "ok"), 0.0);
    let refusals = f.gw.log().matches("reload refused").count();
    assert!(refusals >= 3, "{}", f.gw.log());

    // Still the first configuration, on old and new connections alike.
    assert_eq!(f.curl(&[], "/hello").stdout, "Hello, world!");
    assert!(session.get("/hello", "Hello, world!").ends_with("Hello, world!"));
    assert_eq!(f.gw.metric("tlsgate_state", &["name=\"config_generation\""]), 1.0);
}

/// A gateway with a 20 s drain and a route `/slow` to a slow origin.
fn draining_gateway() -> (Origin, common::Fixture) {
    let origin = Origin::start("slow");
    let routes = [
        upstream_route(None, "/slow", "slow"),
        upstream("slow", &[origin.addr()], ""),
    ]
    .concat();
    let f = common::start_edited("", &routes, |text| {
        text.replace("[server]\n", "[server]\ndrain_timeout = \"20s\"\n")
    });
    (origin, f)
}

/// Starts a request of `ms` milliseconds at the slow origin (curl, in a thread), sends SIGTERM
/// once the origin has it, and waits until new connections are refused (the drain began).
fn drain_during_slow_request(
    origin: &Origin,
    f: &mut common::Fixture,
    ms: u32,
) -> std::thread::JoinHandle<tlsgate_testkit::Output> {
    let (ca, url) = (f.pki.ca_file(), f.url(&format!("/slow?ms={ms}")));
    let in_flight = std::thread::spawn(move || common::curl_url(&ca, &["-w", "\nstatus=%{http_code}\n"], &url));
    assert!(
        common::wait_until(Duration::from_secs(5), || origin.count() == 1),
        "the slow request never reached the origin"
    );
    f.gw.signal("TERM");
    let https = f.https;
    assert!(
        common::wait_until(Duration::from_secs(3), || { !tlsgate_testkit::listening(https) }),
        "the https port still accepts connections after SIGTERM"
    );
    in_flight
}

#[test]
fn sigterm_drains_in_flight_requests_then_exits() {
    let (origin, mut f) = draining_gateway();
    // New connections are refused once the drain starts.
    let in_flight = drain_during_slow_request(&origin, &mut f, 1500);
    let late = f.curl(&["-w", "\nstatus=%{http_code}\n"], "/hello");
    assert!(!late.stdout.contains("status=200"), "{}", late.all());

    let done = in_flight.join().expect("curl thread");
    assert_eq!(done.stdout, "slow done\n\nstatus=200\n", "{}", done.all());
    // The process exits as soon as the connection is done, well before drain_timeout.
    let code = f.gw.wait_exit(Duration::from_secs(10));
    assert_eq!(code, Some(0), "{}", f.gw.log());
    assert!(f.gw.log().contains("shutting down"), "{}", f.gw.log());
}

#[test]
fn a_keep_alive_request_during_the_drain_is_answered_with_connection_close() {
    let (origin, mut f) = draining_gateway();
    // A keep-alive connection that has been served once, before the drain: no `close`.
    let mut session = f.tls_session();
    let before = session.get("/hello", "Hello, world!");
    assert!(!before.to_ascii_lowercase().contains("connection: close"), "{before}");
    // A slow request elsewhere keeps the process draining meanwhile.
    let in_flight = drain_during_slow_request(&origin, &mut f, 3000);
    // The held connection's next request is still answered, and told that the connection ends.
    let during = session.get("/hello", "Hello, world!");
    assert!(during.ends_with("Hello, world!"), "{during}");
    assert!(during.to_ascii_lowercase().contains("connection: close"), "{during}");
    let done = in_flight.join().expect("curl thread");
    assert_eq!(done.stdout, "slow done\n\nstatus=200\n", "{}", done.all());
    assert_eq!(f.gw.wait_exit(Duration::from_secs(10)), Some(0), "{}", f.gw.log());
}

#[test]
fn json_log_format_writes_one_json_object_per_line() {
    let f = common::start("[log]\nformat = \"json\"\n", "");
    assert_eq!(f.curl(&[], "/hello").stdout, "Hello, world!");
    let log = f.gw.log();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(lines.len() >= 2, "{log}");
    assert!(lines.iter().all(|v| v.is_object() && v["level"].is_string()), "{log}");
    let access = lines
        .iter()
        .find(|v| v["target"] == "access")
        .unwrap_or_else(|| panic!("no access line: {log}"));
    assert_eq!(access["path"], "/hello", "{access}");
    assert_eq!(access["status"], 200, "{access}");
    assert_eq!(access["site"], "main", "{access}");
}

#[test]
fn access_log_can_be_switched_off() {
    let on = common::start("[log]\nformat = \"json\"\naccess_log = true\n", "");
    let off = common::start("[log]\nformat = \"json\"\naccess_log = false\n", "");
    for f in [&on, &off] {
        assert_eq!(f.curl(&[], "/hello").stdout, "Hello, world!");
        // The request is answered (and counted) only after its access line is written.
        assert!(f.gw.metric("tlsgate_requests_total", &["status=\"200\""]) >= 1.0);
    }
    let access_lines = |f: &common::Fixture| {
        f.gw.log()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["target"] == "access")
            .count()
    };
    assert_eq!(access_lines(&on), 1, "{}", on.gw.log());
    assert_eq!(access_lines(&off), 0, "{}", off.gw.log());
    // Plain-text logs name the target too.
    let text = common::start("", "");
    assert_eq!(text.curl(&[], "/hello").stdout, "Hello, world!");
    let log = text.gw.log();
    assert!(
        log.lines()
            .any(|l| l.contains("access:") && l.contains("path=/hello") && l.contains("status=200")),
        "{log}"
    );
}

#[test]
fn metrics_expose_handshakes_requests_upstreams_and_bytes() {
    let origin = Origin::start("app");
    let routes = [
        upstream_route(None, "/app", "app"),
        upstream("app", &[origin.addr()], ""),
    ]
    .concat();
    let f = common::start("", &routes);
    assert_eq!(f.curl(&["--http2"], "/hello").stdout, "Hello, world!");
    assert_eq!(f.curl(&["--http1.1"], "/hello").stdout, "Hello, world!");
    assert!(f.curl(&[], "/app/x").stdout.contains("origin=app"));
    let _ = f.s_client(&["-tls1_2"], "");
    // One connection stays open while we scrape.
    let mut session = f.tls_session();
    assert!(session.get("/hello", "Hello, world!").ends_with("Hello, world!"));

    // Bytes are counted when a connection closes: wait for the closed ones to be counted.
    assert!(common::wait_until(Duration::from_secs(5), || {
        f.gw.metric("tlsgate_client_bytes_received_total", &[]) > 0.0
            && f.gw.metric("tlsgate_client_bytes_sent_total", &[]) > 0.0
    }));
    let m = f.gw.metrics();
    let handshake = m
        .lines()
        .find(|l| l.starts_with("tlsgate_handshakes_total{"))
        .unwrap_or_else(|| panic!("no handshakes: {m}"));
    for label in [
        "outcome=\"full\"",
        "version=\"TLSv1.",
        "cipher=\"",
        "group=\"",
        "cert=\"",
    ] {
        assert!(handshake.contains(label), "{label} missing: {handshake}");
    }
    let checks: &[(&str, &[&str])] = &[
        ("tlsgate_handshakes_total", &["outcome=\"full\"", "version=\"TLSv1.3\""]),
        ("tlsgate_handshakes_total", &["outcome=\"full\"", "version=\"TLSv1.2\""]),
        ("tlsgate_handshake_duration_seconds_count", &["outcome=\"full\""]),
        ("tlsgate_handshake_duration_seconds_sum", &[]),
        ("tlsgate_open_connections", &[]),
        ("tlsgate_connections_accepted_total", &[]),
        (
            "tlsgate_requests_total",
            &["site=\"main\"", "status=\"200\"", "protocol=\"h2\""],
        ),
        (
            "tlsgate_requests_total",
            &["site=\"main\"", "status=\"200\"", "protocol=\"h1\""],
        ),
        ("tlsgate_upstream_response_seconds_count", &["upstream=\"app\""]),
        ("tlsgate_upstream_response_seconds_sum", &["upstream=\"app\""]),
        ("tlsgate_client_bytes_received_total", &[]),
        ("tlsgate_client_bytes_sent_total", &[]),
    ];
    for (name, labels) in checks {
        let v = metric_sum(&m, name, labels);
        assert!(v > 0.0, "{name}{labels:?} = {v}\n{m}");
    }
    assert!(m.contains("tlsgate_handshake_duration_seconds_bucket{"), "{m}");
    assert!(m.contains("tlsgate_upstream_response_seconds_bucket{"), "{m}");
    drop(session);
    assert!(common::wait_until(Duration::from_secs(5), || {
        f.gw.metric("tlsgate_open_connections", &[]) == 0.0
    }));
}

#[test]
fn admin_listener_refuses_non_loopback_addresses_unless_allowed() {
    let pki = TestPki::new();
    let (https, admin) = (free_port(), free_port());
    let base = common::config_text(&pki, https, admin, "", "");
    let loopback = format!("listen = \"127.0.0.1:{admin}\"");
    let exposed = base.replace(&loopback, &format!("listen = \"0.0.0.0:{admin}\""));
    assert_ne!(exposed, base);
    let file = pki.write("exposed.toml", &exposed);
    let ca = pki.ca_file();
    let out = common::tlsgate(&[
        "check",
        "--config",
        file.to_str().unwrap(),
        "--ca",
        ca.to_str().unwrap(),
    ]);
    assert_eq!(out.status, Some(1), "{}", out.all());
    assert!(
        out.stdout
            .lines()
            .any(|l| l.contains("error: admin.listen") && l.contains("allow_non_loopback")),
        "{}",
        out.all()
    );
    let err = GatewayProcess::try_start(common::binary(), &exposed, admin, &[https])
        .err()
        .expect("serve must refuse a non-loopback admin listener")
        .to_string();
    assert!(err.contains("admin.listen"), "{err}");
    assert!(err.contains("not a loopback address"), "{err}");

    let allowed = base.replace(
        &loopback,
        &format!("listen = \"0.0.0.0:{admin}\"\nallow_non_loopback = true"),
    );
    let file = pki.write("allowed.toml", &allowed);
    let out = common::tlsgate(&[
        "check",
        "--config",
        file.to_str().unwrap(),
        "--ca",
        ca.to_str().unwrap(),
    ]);
    assert_eq!(out.status, Some(0), "{}", out.all());
    assert!(!out.stdout.contains("admin.listen"), "{}", out.all());
}

#[test]
fn redirect_listener_answers_301_or_308_to_https() {
    let (http301, http308) = (free_port(), free_port());
    let pki = TestPki::new();
    let (https, admin) = (free_port(), free_port());
    let listeners = format!(
        "\n[[listener]]\nlisten = \"127.0.0.1:{http301}\"\nkind = \"redirect\"\nhttps_port = {https}\n\
         \n[[listener]]\nlisten = \"127.0.0.1:{http308}\"\nkind = \"redirect\"\nhttps_port = 443\nredirect_status = 308\n"
    );
    let text = common::config_text(&pki, https, admin, "", &listeners);
    let gw = GatewayProcess::start(common::binary(), &text, admin, &[https, http301, http308]);
    let f = common::Fixture { pki, https, admin, gw };
    let redirect = |port: u16, path: &str| {
        tlsgate_testkit::run(
            "curl",
            &[
                "-sS",
                "--max-time",
                "10",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code} %{redirect_url}",
                &format!("http://localhost:{port}{path}"),
            ],
            b"",
            Duration::ZERO,
            Duration::from_secs(15),
        )
    };
    let out = redirect(http301, "/a/b?c=d");
    assert_eq!(
        out.stdout,
        format!("301 https://localhost:{}/a/b?c=d", f.https),
        "{}",
        out.all()
    );
    let out = redirect(http308, "/upload?x=1");
    assert_eq!(out.stdout, "308 https://localhost/upload?x=1", "{}", out.all());
    // Following the redirect reaches the gateway's https listener.
    let ca = f.pki.ca_file();
    let out = common::curl_url(&ca, &["-L"], &format!("http://localhost:{http301}/hello"));
    assert_eq!(out.stdout, "Hello, world!", "{}", out.all());
    assert!(f.gw.metric("tlsgate_requests_total", &["site=\"-\"", "status=\"301\""]) >= 2.0);
    assert!(f.gw.metric("tlsgate_requests_total", &["site=\"-\"", "status=\"308\""]) >= 1.0);
}

#[test]
fn demo_mode_works_on_an_empty_state_dir() {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("state");
    let (https, http, admin) = (free_port(), free_port(), free_port());
    let state_arg = state.to_str().unwrap().to_string();
    let ports = [https.to_string(), http.to_string(), admin.to_string()];
    let gw = GatewayProcess::spawn(
        common::binary(),
        &[
            "serve",
            "--demo",
            "--state-dir",
            &state_arg,
            "--https-port",
            &ports[0],
            "--http-port",
            &ports[1],
            "--admin-port",
            &ports[2],
        ],
        dir,
        state.join("tlsgate.toml"),
        admin,
        &[https, http],
    )
    .unwrap_or_else(|log| panic!("demo did not start:\n{log}"));
    let ca = state.join("ca.pem");
    assert!(ca.is_file(), "no ca.pem in {}", state.display());
    assert!(state.join("tlsgate.toml").is_file());
    // Private keys, the CA's too, are readable by their owner only; certificates by all.
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |f: &str| std::fs::metadata(state.join(f)).unwrap().permissions().mode() & 0o777;
        for key in ["ca.key", "ecdsa.key", "rsa.key"] {
            assert_eq!(mode(key), 0o600, "{key}");
        }
        assert_eq!(mode("ca.pem"), 0o644);
    }
    // `check` is clean on the demo's configuration and warns once a key is opened up.
    let toml = state.join("tlsgate.toml");
    let out = common::tlsgate(&["check", "--config", toml.to_str().unwrap()]);
    assert!(!out.stdout.contains("accessible to every user"), "{}", out.all());
    {
        use std::os::unix::fs::PermissionsExt;
        let key = state.join("rsa.key");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let out = common::tlsgate(&["check", "--config", toml.to_str().unwrap()]);
        assert!(
            out.stdout.contains("warning") && out.stdout.contains("accessible to every user (mode 644); chmod 600 it"),
            "{}",
            out.all()
        );
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    }

    let out = common::curl_url(&ca, &[], &format!("https://localhost:{https}/hello"));
    assert_eq!(out.stdout, "Hello, world!", "{}", out.all());
    let out = common::curl_url(&ca, &["--http2"], &format!("https://localhost:{https}/"));
    assert!(out.stdout.contains("tlsgate is serving"), "{}", out.all());
    let out = common::curl_url(
        &ca,
        &["-o", "/dev/null", "-w", "%{http_code} %{redirect_url}"],
        &format!("http://localhost:{http}/x?y=1"),
    );
    assert_eq!(
        out.stdout,
        format!("301 https://localhost:{https}/x?y=1"),
        "{}",
        out.all()
    );
    assert!(gw.metric("tlsgate_handshakes_total", &["outcome=\"full\""]) >= 2.0);

    let log = gw.log();
    assert!(log.contains("tlsgate demo is up"), "{log}");
    assert!(log.contains("Try:"), "{log}");
    assert!(
        log.contains(&format!(
            "curl --cacert {} https://localhost:{https}/hello",
            ca.display()
        )),
        "{log}"
    );
    assert!(log.contains(&format!("http://127.0.0.1:{admin}/metrics")), "{log}");
}

#[test]
fn each_worker_has_its_own_reuseport_listening_socket() {
    // The fixture runs two workers.
    let f = common::start("", "");
    let out = tlsgate_testkit::run("ss", &["-Hltnp"], b"", Duration::ZERO, Duration::from_secs(10));
    assert_eq!(out.status, Some(0), "{}", out.all());
    let local = format!("127.0.0.1:{} ", f.https);
    let sockets: Vec<&str> = out.stdout.lines().filter(|l| l.contains(&local)).collect();
    assert_eq!(sockets.len(), 2, "one listening socket per worker:\n{}", out.stdout);
    let pid = format!("pid={},", f.gw.pid());
    for s in &sockets {
        assert!(s.contains(&pid), "owned by the gateway: {s}");
    }
    // The admin listener is a single socket.
    let admin = format!("127.0.0.1:{} ", f.admin);
    assert_eq!(
        out.stdout.lines().filter(|l| l.contains(&admin)).count(),
        1,
        "{}",
        out.stdout
    );
}
