//! `tlsgate console` end to end, with real processes: redis-server, two key servers, two
//! gateways following the cluster document, and the console. Member edits through
//! `POST /api/pools/main/members` reach both gateways within 2 s (new signatures go to the new
//! key server, the drained one's counter stays flat), rollback through the API reverses them,
//! a malformed document written straight into Redis is flagged by `/api/overview`, a console on
//! a non-loopback address refuses unauthenticated requests, and the same flow runs in headless
//! Chromium through the UI (DevTools protocol; screenshots to `$TLSGATE_SCREENSHOTS`).
//! With and without a token, cross-site writes and DNS-rebinding reads and writes are refused and
//! publish nothing; half-sent requests are closed after the header timeout and the connection
//! cap holds (docs/SECURITY.md).

mod common;
mod console_cdp;
mod guard_env;
mod keyless_env;

use guard_env::{curl, rebind, EVIL_ORIGIN};
use keyless_env::*;
use serde_json::Value;
use std::time::{Duration, Instant};
use tlsgate_testkit::{require, StoreProcess};

const TOKEN: &str = "console-test-token-0123456789";

/// Members of pool `main` as `(address, drain)`, from a gateway's admin API.
fn members(gw: &Gateway) -> Vec<(String, bool)> {
    pool_members(gw, "main").into_iter().map(|(a, _, d)| (a, d)).collect()
}

/// Waits until every gateway shows `want`; returns how long it took.
fn converge(gws: &[&Gateway], want: &[(String, bool)]) -> Duration {
    let start = Instant::now();
    assert!(
        common::wait_until(Duration::from_secs(5), || gws.iter().all(|g| members(g) == want)),
        "gateways did not converge on {want:?}: {:?}",
        gws.iter().map(|g| members(g)).collect::<Vec<_>>()
    );
    start.elapsed()
}

/// `n` fresh handshakes through each gateway, all of which must succeed.
fn handshakes(gws: &[&Gateway], n: usize) {
    for g in gws {
        for _ in 0..n {
            let out = g.curl(&[]);
            assert_eq!(out.stdout, "Hello, world!", "{}\n{}", out.all(), g.gw.log());
        }
    }
}

/// Waits until every gateway has a proven connection to key server `addr`.
fn connected(gws: &[&Gateway], addr: &str) {
    assert!(
        common::wait_until(Duration::from_secs(3), || gws.iter().all(|g| g
            .gw
            .metric("tlsgate_keyless_connections", &[&format!("server=\"{addr}\"")])
            >= 1.0)),
        "not connected to {addr}"
    );
}

/// Two key servers and two gateways following cluster `it` (pool `main` starts with `a`).
struct Cluster {
    redis: StoreProcess,
    url: String,
    _env: KeylessSetup,
    a: KeyServer,
    b: KeyServer,
    g1: Gateway,
    g2: Gateway,
}

fn cluster() -> Cluster {
    require("curl");
    require("redis-server");
    let redis = StoreProcess::redis();
    let url = redis.redis_url();
    let env = KeylessSetup::new();
    let (a, b) = (env.keyserver(), env.keyserver());
    let control = |id: &str| {
        format!("[control]\nredis_url = \"{url}\"\ncluster_name = \"it\"\nnode_id = \"{id}\"\npoll_interval = \"500ms\"\nheartbeat_interval = \"300ms\"\n")
    };
    let g1 = env.gateway(&[a.addr()], &control("gw1"));
    let g2 = env.gateway(&[a.addr()], &control("gw2"));
    Cluster {
        redis,
        url,
        _env: env,
        a,
        b,
        g1,
        g2,
    }
}

/// Writes a version straight into Redis that no node can accept; returns its number.
fn write_malformed(redis: &StoreProcess, version: u64) {
    let prefix = "tlsgate:control:{it}:";
    redis.redis_cli(&[
        "SET",
        &format!("{prefix}version:{version}"),
        &format!("{{\"version\":{version},\"document\":{{\"key_server_pools\":{{\"main\":{{\"members\":[{{\"address\":\"nope\"}}]}}}}}}}}"),
    ]);
    redis.redis_cli(&["SET", &format!("{prefix}current"), &version.to_string()]);
}

/// The refusal of `version` as `/api/overview` reports it: the nodes named.
fn refused_by(console: &ConsoleProcess, version: u64) -> Vec<String> {
    let (status, o) = console.api("GET", "/api/overview", "");
    assert_eq!(status, 200, "{o}");
    o["refused"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["version"] == version)
        .flat_map(|r| {
            r["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n.as_str().unwrap().to_string())
        })
        .collect()
}

#[test]
fn api_edits_reach_both_gateways_roll_back_and_flag_refusals() {
    let c = cluster();
    let gws = [&c.g1, &c.g2];
    let (aa, ba) = (c.a.addr(), c.b.addr());
    let console = try_start_console(&c.url, "it", "127.0.0.1", None).unwrap_or_else(|l| panic!("{l}"));

    // v1: a alone (the pool is created by the add).
    let (s, v) = console.api(
        "POST",
        "/api/pools/main/members",
        &format!(r#"[{{"op":"add","address":"{aa}"}}]"#),
    );
    assert_eq!((s, v["version"].as_u64()), (200, Some(1)), "{v}");
    converge(&gws, &[(aa.clone(), false)]);

    // v2: drain a and add b, one version.
    let body = format!(
        r#"{{"edits":[{{"op":"drain","address":"{aa}"}},{{"op":"add","address":"{ba}","weight":2}}],"comment":"move to b"}}"#
    );
    let (s, v) = console.api("POST", "/api/pools/main/members", &body);
    assert_eq!((s, v["version"].as_u64()), (200, Some(2)), "{v}");
    assert_eq!(v["changes"].as_array().unwrap().len(), 2, "{v}");
    let took = converge(&gws, &[(aa.clone(), true), (ba.clone(), false)]);
    assert!(took <= Duration::from_secs(2), "applied after {took:?}");
    connected(&gws, &ba);
    let (a0, b0) = (c.a.ops(), c.b.ops());
    handshakes(&gws, 4);
    assert_eq!(c.a.ops(), a0, "the drained key server signed");
    assert!(c.b.ops() >= b0 + 8.0, "b signed {} of 8", c.b.ops() - b0);

    // The history names the console identity and the comment; the key-server view sees b work.
    let (_, h) = console.api("GET", "/api/history?limit=5", "");
    let e = &h["entries"][0];
    assert_eq!(
        (e["version"].as_u64(), e["author"].as_str()),
        (Some(2), Some("console:loopback"))
    );
    assert_eq!(e["comment"], "move to b");
    assert!(common::wait_until(Duration::from_secs(5), || {
        let (_, k) = console.api("GET", "/api/keyservers", "");
        let m = &k["pools"][0]["members"];
        let find = |addr: &str| m.as_array().unwrap().iter().find(|x| x["address"] == addr).cloned();
        find(&ba).is_some_and(|b| b["ops_total"].as_f64() >= Some(8.0) && b["health"] == "healthy")
            && find(&aa).is_some_and(|a| a["drain"] == true && a["nodes_seen"] == 2.0)
    }));
    // An invalid edit is refused with the reason and publishes nothing.
    let (s, v) = console.api(
        "POST",
        "/api/pools/main/members",
        r#"[{"op":"weight","address":"x:1","weight":3}]"#,
    );
    assert_eq!(s, 400, "{v}");
    assert!(v["error"].as_str().unwrap().contains("no member x:1"), "{v}");

    // Rollback to v1 through the API: a alone again, b flat.
    let (s, v) = console.api("POST", "/api/rollback/1", "");
    assert_eq!(
        (s, v["version"].as_u64(), v["rollback_of"].as_u64()),
        (200, Some(3), Some(1)),
        "{v}"
    );
    let took = converge(&gws, &[(aa.clone(), false)]);
    assert!(took <= Duration::from_secs(2), "rollback applied after {took:?}");
    let (a0, b0) = (c.a.ops(), c.b.ops());
    handshakes(&gws, 3);
    assert!(c.a.ops() >= a0 + 6.0, "a signed {} of 6", c.a.ops() - a0);
    assert_eq!(c.b.ops(), b0, "the removed key server signed");
    let (s, _) = console.api("POST", "/api/rollback/99", "");
    assert_eq!(s, 404);

    // Overview: both nodes on v3 with figures from their metrics.
    assert!(common::wait_until(Duration::from_secs(5), || {
        let (_, o) = console.api("GET", "/api/overview", "");
        let nodes = o["nodes"].as_array().unwrap().clone();
        o["current_version"] == 3
            && nodes.len() == 2
            && nodes
                .iter()
                .all(|n| n["applied_version"] == 3 && n["figures"]["handshakes_total"].as_f64().unwrap_or(0.0) >= 7.0)
    }));
    // The certificates view: both of each node's certificates with expiry and chain size.
    let (_, o) = console.api("GET", "/api/overview", "");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    for n in o["nodes"].as_array().unwrap() {
        let certs = n["figures"]["certificates"].as_array().cloned().unwrap_or_default();
        let mut kinds: Vec<&str> = certs.iter().filter_map(|c| c["cert"].as_str()).collect();
        kinds.sort_unstable();
        assert_eq!(kinds, ["ecdsa_p256", "rsa"], "{n}");
        for c in &certs {
            let days = (c["not_after"].as_f64().unwrap_or(0.0) - now) / 86_400.0;
            assert!(days > 1.0 && days < 400.0, "{c}");
            assert!(c["chain_bytes"].as_f64().unwrap_or(0.0) > 300.0, "{c}");
        }
    }

    // A malformed document written straight into Redis is flagged, naming both nodes.
    write_malformed(&c.redis, 4);
    assert!(
        common::wait_until(Duration::from_secs(5), || refused_by(&console, 4) == ["gw1", "gw2"]),
        "{}",
        console.api("GET", "/api/overview", "").1
    );
    assert_eq!(members(&c.g1), vec![(aa.clone(), false)]);
    let (_, o) = console.api("GET", "/api/overview", "");
    assert_eq!(o["current_version"], 4, "{o}");
    assert!(o["current_error"].as_str().unwrap().contains("unreadable"), "{o}");
    assert!(o["store_error"].is_null(), "a bad record is not a store outage: {o}");
}

#[test]
fn a_console_on_a_non_loopback_address_requires_the_token() {
    require("redis-server");
    let redis = StoreProcess::redis();
    let url = redis.redis_url();
    // No token file: refuses to start.
    let err = try_start_console(&url, "it", "0.0.0.0", None)
        .err()
        .expect("must refuse");
    assert!(err.contains("without --token-file"), "{err}");

    let console = try_start_console(&url, "it", "0.0.0.0", Some(TOKEN)).unwrap_or_else(|l| panic!("{l}"));
    let edit = r#"[{"op":"add","address":"127.0.0.1:9"}]"#;
    for (method, path, body) in [
        ("GET", "/api/overview", ""),
        ("GET", "/api/document", ""),
        ("GET", "/api/history", ""),
        ("GET", "/api/keyservers", ""),
        ("POST", "/api/pools/main/members", edit),
        ("POST", "/api/rollback/1", ""),
    ] {
        let (s, _, b) = console.request(method, path, &["Content-Type: application/json"], body);
        assert_eq!(s, 401, "{method} {path}: {b}");
        let (s, _, _) = console.request(
            method,
            path,
            &[
                "Authorization: Bearer wrong-token-wrong-token",
                "Content-Type: application/json",
            ],
            body,
        );
        assert_eq!(s, 401, "{method} {path} with a wrong token");
    }
    // The UI answers with the login page; a wrong token does not log in.
    let (s, _, page) = console.request("GET", "/", &[], "");
    assert_eq!(s, 401);
    assert!(page.contains("id=\"login-form\""), "{page}");
    let (s, head, _) = console.request("POST", "/login", &[], "token=nope");
    assert_eq!(s, 401);
    assert!(!head.contains("Set-Cookie"), "{head}");
    assert_eq!(
        redis.redis_cli(&["EXISTS", "tlsgate:control:{it}:current"]).trim(),
        "0",
        "nothing was published"
    );

    // With the token: the API works and records the identity.
    let (s, v) = console.api("POST", "/api/pools/main/members", edit);
    assert_eq!((s, v["version"].as_u64()), (200, Some(1)), "{v}");
    let (_, d) = console.api("GET", "/api/document", "");
    assert_eq!(d["author"], "console:token");
    // The login form sets a session cookie that works for the API; form posts are refused (403,
    // by the request guard, whatever the identity).
    let (s, head, _) = console.request("POST", "/login", &[], &format!("token={TOKEN}"));
    assert_eq!(s, 303, "{head}");
    let cookie = head
        .lines()
        .find_map(|l| {
            l.strip_prefix("set-cookie: ")
                .or_else(|| l.strip_prefix("Set-Cookie: "))
        })
        .and_then(|c| c.split(';').next())
        .expect("a session cookie")
        .to_string();
    let cookie_header = format!("Cookie: {cookie}");
    let (s, _, body) = console.request("GET", "/api/overview", &[&cookie_header], "");
    assert_eq!(s, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["identity"], "console:token");
    let (s, _, _) = console.request(
        "POST",
        "/api/rollback/1",
        &[&cookie_header, "Content-Type: application/x-www-form-urlencoded"],
        "",
    );
    assert_eq!(s, 403, "a cookie-authenticated change must be JSON");
    let (s, _, _) = console.request("GET", "/healthz", &[], "");
    assert_eq!(s, 200);
}

#[test]
fn browser_login_drain_add_and_roll_back_through_the_ui() {
    require("chromium");
    let c = cluster();
    let gws = [&c.g1, &c.g2];
    let (aa, ba) = (c.a.addr(), c.b.addr());
    let console = try_start_console(&c.url, "it", "0.0.0.0", Some(TOKEN)).unwrap_or_else(|l| panic!("{l}"));
    let (s, v) = console.api(
        "POST",
        "/api/pools/main/members",
        &format!(r#"[{{"op":"add","address":"{aa}"}}]"#),
    );
    assert_eq!(s, 200, "{v}");
    converge(&gws, &[(aa.clone(), false)]);
    handshakes(&gws, 2);

    let mut b = console_cdp::Browser::start();
    let base = format!("http://127.0.0.1:{}", console.port);
    // Not logged in: the login page. Log in with the token.
    b.navigate(&format!("{base}/"));
    b.wait_js("!!document.querySelector('#login-form')", "the login page");
    b.screenshot("login");
    b.eval(&format!(
        "document.querySelector('#token').value = '{TOKEN}'; document.querySelector('#login-form').submit(); true"
    ));
    b.wait_js("document.querySelector('#cluster') && document.querySelector('#cluster').textContent === 'it' && document.querySelectorAll('#nodes-table tbody tr').length === 2", "the overview with two nodes");
    std::thread::sleep(Duration::from_secs(2));
    b.screenshot("overview");

    // Key servers: add b (the form), then drain a (its button); draining the only member
    // first would be refused (a pool needs one serving member).
    b.eval("location.hash = '#keyservers'; true");
    let row = |addr: &str| format!("document.querySelector('#pools tr[data-address=\"{addr}\"]')");
    b.wait_js(&format!("!!{}", row(&aa)), "a's row");
    b.eval(&format!(
        "document.querySelector('#add-address').value = '{ba}'; document.querySelector('#add-submit').click(); true"
    ));
    b.wait_js(&format!("!!{}", row(&ba)), "b's row");
    b.eval(&format!(
        "{}.querySelector('button[data-op=\"drain\"]').click(); true",
        row(&aa)
    ));
    let clicked = Instant::now();
    converge(&gws, &[(aa.clone(), true), (ba.clone(), false)]);
    b.wait_js(
        &format!("{}.classList.contains('drained')", row(&aa)),
        "a shown drained",
    );
    let took = clicked.elapsed();
    assert!(took <= Duration::from_secs(2), "the UI's edits applied after {took:?}");
    connected(&gws, &ba);
    let (a0, b0) = (c.a.ops(), c.b.ops());
    handshakes(&gws, 4);
    assert_eq!(c.a.ops(), a0, "the drained key server signed");
    assert!(c.b.ops() >= b0 + 8.0, "b signed {} of 8", c.b.ops() - b0);
    b.wait_js(
        &format!(
            "!!{r} && parseFloat({r}.querySelector('.ops-total').textContent) >= 8",
            r = row(&ba)
        ),
        "b's signatures in the UI",
    );
    b.screenshot("keyservers");

    // History: roll back to version 1 with its button.
    b.eval("location.hash = '#history'; true");
    b.wait_js(
        "!!document.querySelector('button.rollback[data-version=\"1\"]')",
        "the rollback button",
    );
    b.screenshot("history");
    b.eval("document.querySelector('button.rollback[data-version=\"1\"]').click(); true");
    let clicked = Instant::now();
    converge(&gws, &[(aa.clone(), false)]);
    let took = clicked.elapsed();
    assert!(
        took <= Duration::from_secs(2),
        "the UI's rollback applied after {took:?}"
    );
    let (a0, b0) = (c.a.ops(), c.b.ops());
    handshakes(&gws, 3);
    assert!(c.a.ops() >= a0 + 6.0, "a signed {} of 6", c.a.ops() - a0);
    assert_eq!(c.b.ops(), b0, "the removed key server signed");
    b.wait_js(
        "document.querySelector('#history-table tbody tr').dataset.version === '4'",
        "version 4 listed",
    );
    let (_, h) = console.api("GET", "/api/history?limit=1", "");
    assert_eq!(
        (
            h["entries"][0]["author"].as_str(),
            h["entries"][0]["rollback_of"].as_u64()
        ),
        (Some("console:token"), Some(1))
    );

    // Certificates and session cache views.
    for view in ["certificates", "sessions"] {
        b.eval(&format!("location.hash = '#{view}'; true"));
        b.wait_js(&format!("!document.querySelector('#view-{view}').hidden"), view);
        if view == "certificates" {
            // Both nodes' two certificates, each row with its ACME and delegated-credential
            // columns ("–": neither applies here).
            b.wait_js(
                "(() => { const rows = [...document.querySelectorAll('#certs-table tbody tr')]; \
                 return rows.length === 4 && rows.every((r) => r.cells.length === 9 && r.cells[7].textContent === '–'); })()",
                "the certificates table with its ACME and delegated-credential columns",
            );
        }
        std::thread::sleep(Duration::from_millis(300));
        b.screenshot(view);
    }
    // A malformed document: the red banner names the version and the reasons.
    write_malformed(&c.redis, 5);
    b.eval("location.hash = '#overview'; true");
    b.wait_js(
        "!document.querySelector('#refused-banner').hidden && document.querySelector('#refused-banner').textContent.includes('Version 5 refused by gw1, gw2')",
        "the refusal banner",
    );
    b.screenshot("refused");
}

/// [`try_start_console`] with more arguments (`--allowed-host ...`).
fn start_console_with(redis_url: &str, bind_ip: &str, token: Option<&str>, extra: &[&str]) -> ConsoleProcess {
    let port = tlsgate_testkit::free_port();
    let dir = tempfile::tempdir().expect("temp dir");
    let token_file = dir.path().join("token");
    let listen = format!("{bind_ip}:{port}");
    let file_arg = token_file.to_str().unwrap().to_string();
    let mut args = vec!["console", "--redis", redis_url, "--cluster", "it", "--listen", &listen];
    if let Some(t) = token {
        std::fs::write(&token_file, format!("{t}\n")).expect("write token");
        args.extend_from_slice(&["--token-file", &file_arg]);
    }
    args.extend_from_slice(extra);
    let proc = tlsgate_testkit::GatewayProcess::spawn(common::binary(), &args, dir, token_file.clone(), port, &[])
        .unwrap_or_else(|log| panic!("console did not start:\n{log}"));
    ConsoleProcess {
        port,
        token: token.map(str::to_string),
        proc,
    }
}

/// What a page on another site (or a rebound name) can do to a console of cluster `it`, with the
/// console's token when it has one: every cross-site write (simple content types, its Origin,
/// `Sec-Fetch-Site`) is 403 and every request under a foreign Host is 421, and no version is
/// published; same-origin JSON and the `X-Tlsgate-Request` header still publish.
fn cross_site_and_rebinding_requests_are_refused(console: &ConsoleProcess, redis: &StoreProcess) {
    let port = console.port;
    let auth = console.token.as_ref().map(|t| format!("Authorization: Bearer {t}"));
    let current = || {
        redis
            .redis_cli(&["GET", "tlsgate:control:{it}:current"])
            .trim()
            .to_string()
    };
    let call = |method: &str, host: &str, path: &str, args: &[&str]| {
        let mut all = vec!["-X", method];
        if let Some(a) = &auth {
            all.extend_from_slice(&["-H", a.as_str()]);
        }
        all.extend_from_slice(args);
        curl(&all, &format!("http://{host}:{port}{path}"))
    };
    let json = "Content-Type: application/json";
    let own = format!("Origin: http://127.0.0.1:{port}");
    // Version 1, sent the way the console's own page sends it.
    let first = r#"[{"op":"add","address":"127.0.0.1:9"}]"#;
    let (s, b) = call(
        "POST",
        "127.0.0.1",
        "/api/pools/main/members",
        &[
            "-H",
            &own,
            "-H",
            "Sec-Fetch-Site: same-origin",
            "-H",
            json,
            "-H",
            "X-Tlsgate-Request: 1",
            "--data-binary",
            first,
        ],
    );
    assert_eq!(s, 200, "{b}");
    assert_eq!(current(), "1");

    // Bodies that would publish a version if accepted.
    let writes = [
        ("/api/pools/main/members", r#"[{"op":"add","address":"127.0.0.1:10"}]"#),
        ("/api/rollback/1", r#"{"comment":"from evil.example"}"#),
    ];
    let attacks: [(&str, Vec<&str>); 7] = [
        ("text/plain", vec!["-H", "Content-Type: text/plain"]),
        ("form-encoded", vec![]),
        (
            "text/plain from evil.example",
            vec!["-H", EVIL_ORIGIN, "-H", "Content-Type: text/plain"],
        ),
        ("form-encoded from evil.example", vec!["-H", EVIL_ORIGIN]),
        ("JSON from evil.example", vec!["-H", EVIL_ORIGIN, "-H", json]),
        (
            "JSON, Sec-Fetch-Site: cross-site",
            vec!["-H", "Sec-Fetch-Site: cross-site", "-H", json],
        ),
        (
            "marked, Sec-Fetch-Site: same-site",
            vec!["-H", "Sec-Fetch-Site: same-site", "-H", "X-Tlsgate-Request: 1"],
        ),
    ];
    for (path, body) in writes {
        for (what, args) in &attacks {
            let mut args = args.clone();
            args.extend_from_slice(&["--data-binary", body]);
            let (s, b) = call("POST", "127.0.0.1", path, &args);
            assert_eq!(s, 403, "POST {path}, {what}: {b}");
        }
    }
    // DNS rebinding: under a foreign name nothing is read and nothing is written.
    let evil = rebind(port);
    for path in [
        "/",
        "/app.js",
        "/api/overview",
        "/api/document",
        "/api/history",
        "/api/whoami",
        "/healthz",
    ] {
        let (s, b) = call("GET", "evil.example", path, &["--resolve", &evil]);
        assert_eq!(s, 421, "GET {path} as evil.example: {b}");
        assert!(!b.contains("127.0.0.1:9"), "{b}");
    }
    for (path, body) in writes {
        let (s, b) = call(
            "POST",
            "evil.example",
            path,
            &["--resolve", &evil, "-H", json, "--data-binary", body],
        );
        assert_eq!(s, 421, "POST {path} as evil.example: {b}");
    }
    let (s, _) = call("GET", "127.0.0.1", "/api/document", &["-H", "Host: evil.example"]);
    assert_eq!(s, 421);
    assert_eq!(current(), "1", "a refused request published a version");

    // Same-origin JSON, and the request header with any body type, still publish.
    let (s, b) = call(
        "POST",
        "127.0.0.1",
        writes[0].0,
        &["-H", json, "--data-binary", writes[0].1],
    );
    assert_eq!((s, current().as_str()), (200, "2"), "{b}");
    let localhost = format!("localhost:{port}:127.0.0.1");
    let (s, b) = call(
        "POST",
        "localhost",
        "/api/rollback/1",
        &[
            "--resolve",
            &localhost,
            "-H",
            "X-Tlsgate-Request: 1",
            "-H",
            "Content-Type: text/plain",
        ],
    );
    assert_eq!((s, current().as_str()), (200, "3"), "{b}");
}

#[test]
fn a_loopback_console_without_a_token_refuses_cross_site_writes_and_foreign_hosts() {
    require("curl");
    require("redis-server");
    let redis = StoreProcess::redis();
    let console = start_console_with(&redis.redis_url(), "127.0.0.1", None, &[]);
    cross_site_and_rebinding_requests_are_refused(&console, &redis);
    let (_, h) = console.api("GET", "/api/history?limit=1", "");
    assert_eq!(h["entries"][0]["author"], "console:loopback", "{h}");
}

#[test]
fn a_console_with_a_token_refuses_cross_site_writes_and_foreign_hosts() {
    require("curl");
    require("redis-server");
    let redis = StoreProcess::redis();
    let console = start_console_with(
        &redis.redis_url(),
        "0.0.0.0",
        Some(TOKEN),
        &["--allowed-host", "console.internal"],
    );
    cross_site_and_rebinding_requests_are_refused(&console, &redis);
    let port = console.port;
    let base = format!("http://127.0.0.1:{port}");

    // The login form: refused from another site (no cookie), accepted from the console's page.
    let form = format!("token={TOKEN}");
    let (s, b) = curl(
        &["-i", "-H", EVIL_ORIGIN, "--data-binary", &form],
        &format!("{base}/login"),
    );
    assert_eq!(s, 403, "{b}");
    assert!(!b.to_ascii_lowercase().contains("set-cookie"), "{b}");
    let own = format!("Origin: http://127.0.0.1:{port}");
    let (s, b) = curl(&["-i", "-H", &own, "--data-binary", &form], &format!("{base}/login"));
    assert_eq!(s, 303, "{b}");
    let cookie = b
        .lines()
        .find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("set-cookie")))
        .and_then(|(_, v)| v.trim().split(';').next())
        .expect("a session cookie")
        .to_string();
    // The cookie does not make a cross-site or a form-encoded change pass.
    let cookie = format!("Cookie: {cookie}");
    let edit = r#"[{"op":"add","address":"127.0.0.1:11"}]"#;
    let url = format!("{base}/api/pools/main/members");
    for args in [
        vec![
            "-H",
            cookie.as_str(),
            "-H",
            EVIL_ORIGIN,
            "-H",
            "Content-Type: application/json",
        ],
        vec![
            "-H",
            cookie.as_str(),
            "-H",
            "Content-Type: application/x-www-form-urlencoded",
        ],
    ] {
        let mut args = args.clone();
        args.extend_from_slice(&["--data-binary", edit]);
        let (s, b) = curl(&args, &url);
        assert_eq!(s, 403, "{args:?}: {b}");
    }
    let current = redis.redis_cli(&["GET", "tlsgate:control:{it}:current"]);
    assert_eq!(current.trim(), "3");
    // An allowed name works for reads and writes; the author is the token's.
    let internal = format!("console.internal:{port}:127.0.0.1");
    let at = format!("http://console.internal:{port}");
    let (s, b) = curl(&["--resolve", &internal, "-H", &cookie], &format!("{at}/api/whoami"));
    assert_eq!(s, 200, "{b}");
    let (s, b) = curl(
        &[
            "--resolve",
            &internal,
            "-H",
            &cookie,
            "-H",
            &format!("Origin: http://console.internal:{port}"),
            "-H",
            "Content-Type: application/json",
            "--data-binary",
            edit,
        ],
        &format!("{at}/api/pools/main/members"),
    );
    assert_eq!(s, 200, "{b}");
    let (_, h) = console.api("GET", "/api/history?limit=1", "");
    assert_eq!(
        (h["entries"][0]["version"].as_u64(), h["entries"][0]["author"].as_str()),
        (Some(4), Some("console:token")),
        "{h}"
    );
}

#[test]
fn a_console_closes_half_sent_requests_and_caps_connections() {
    require("curl");
    require("redis-server");
    let redis = StoreProcess::redis();
    let console = start_console_with(&redis.redis_url(), "127.0.0.1", None, &[]);
    let url = format!("http://127.0.0.1:{}/healthz", console.port);
    guard_env::half_sent_requests_are_closed_and_the_cap_holds(
        console.port,
        tlsgate_admin::guard::MAX_CONNECTIONS,
        tlsgate_admin::guard::HEADER_TIMEOUT,
        || curl(&[], &url).0 == 200,
    );
}
