//! The gateway's admin listener against a browser on the same host (issue 16, docs/SECURITY.md
//! "Admin listener and console"), with real processes, curl and raw sockets: cross-site changes
//! (`POST /reload`, `PUT /keyless/pools/NAME`) are refused and change nothing; a foreign `Host`
//! (DNS rebinding: curl `--resolve evil.example:PORT:127.0.0.1`) is refused for reads and
//! writes; same-origin JSON, `X-Tlsgate-Request: 1`, `tlsgate reload` and `tlsgate
//! reopen-logs` still work; half-sent requests are closed after the header timeout and the
//! connection cap holds.

mod common;
mod guard_env;
mod keyless_env;

use guard_env::{curl, rebind, EVIL_ORIGIN};
use keyless_env::{pool_members, KeylessSetup};
use tlsgate_testkit::require;

/// A gateway whose admin listener also answers to `gw.internal` (`[admin] allowed_hosts`).
fn gateway_allowing_gw_internal() -> common::Fixture {
    common::start_edited("", "", |text| {
        assert!(text.contains("[admin]\n"));
        text.replacen("[admin]\n", "[admin]\nallowed_hosts = [\"gw.internal\"]\n", 1)
    })
}

fn reloads(f: &common::Fixture) -> f64 {
    f.gw.metric("tlsgate_config_reloads_total", &[])
}

#[test]
fn admin_changes_need_json_or_the_request_header_and_cross_site_ones_are_refused() {
    require("curl");
    let f = gateway_allowing_gw_internal();
    let url = format!("http://127.0.0.1:{}/reload", f.admin);
    let own_origin = format!("Origin: http://127.0.0.1:{}", f.admin);
    let post = |args: &[&str]| {
        let mut all = vec!["-X", "POST"];
        all.extend_from_slice(args);
        curl(&all, &url)
    };
    // What a page on another site can send: simple requests (text/plain, form-encoded, no
    // body) with or without its Origin, and preflighted ones the browser marks as cross-site.
    for (what, args) in [
        (
            "text/plain",
            vec!["-H", "Content-Type: text/plain", "--data-binary", "x"],
        ),
        ("form-encoded", vec!["--data-binary", "a=1"]),
        ("no body, no type", vec![]),
        (
            "text/plain from evil.example",
            vec!["-H", EVIL_ORIGIN, "-H", "Content-Type: text/plain", "-d", "x"],
        ),
        (
            "JSON from evil.example",
            vec!["-H", EVIL_ORIGIN, "-H", "Content-Type: application/json", "-d", "{}"],
        ),
        (
            "marked, from evil.example",
            vec!["-H", EVIL_ORIGIN, "-H", "X-Tlsgate-Request: 1"],
        ),
        (
            "JSON, Sec-Fetch-Site: cross-site",
            vec![
                "-H",
                "Sec-Fetch-Site: cross-site",
                "-H",
                "Content-Type: application/json",
            ],
        ),
        (
            "marked, Sec-Fetch-Site: same-site",
            vec!["-H", "Sec-Fetch-Site: same-site", "-H", "X-Tlsgate-Request: 1"],
        ),
        (
            "marked, Origin: null",
            vec!["-H", "Origin: null", "-H", "X-Tlsgate-Request: 1"],
        ),
        (
            "marked, another local port's page",
            vec!["-H", "Origin: http://127.0.0.1:1", "-H", "X-Tlsgate-Request: 1"],
        ),
    ] {
        let (status, body) = post(&args);
        assert_eq!(status, 403, "POST /reload, {what}: {body}");
    }
    assert_eq!(reloads(&f), 0.0, "a refused request reloaded:\n{}", f.gw.log());
    assert!(f.gw.log().contains("admin request refused"), "{}", f.gw.log());

    // Same-origin JSON, the request header, and our own commands.
    let (status, body) = post(&[
        "-H",
        &own_origin,
        "-H",
        "Sec-Fetch-Site: same-origin",
        "-H",
        "Content-Type: application/json",
    ]);
    assert_eq!(status, 200, "{body}");
    let (status, body) = post(&["-H", "X-Tlsgate-Request: 1"]);
    assert_eq!(status, 200, "{body}");
    let (status, body) = post(&["-H", "X-Tlsgate-Request: 1", "-H", "Origin: https://gw.internal"]);
    assert_eq!(status, 200, "an allowed host's origin: {body}");
    let config = f.gw.config.to_str().unwrap().to_string();
    let out = common::tlsgate(&["reload", "--config", &config]);
    assert_eq!(out.status, Some(0), "tlsgate reload: {}", out.all());
    let admin = format!("127.0.0.1:{}", f.admin);
    let out = common::tlsgate(&["reopen-logs", "--admin", &admin]);
    assert_eq!(out.status, Some(0), "tlsgate reopen-logs: {}", out.all());
    assert_eq!(reloads(&f), 4.0);
}

#[test]
fn admin_reads_and_writes_need_this_listeners_host() {
    require("curl");
    let f = gateway_allowing_gw_internal();
    let port = f.admin;
    let at = |host: &str, path: &str| format!("http://{host}:{port}{path}");
    // What Prometheus and an operator's curl send.
    let (status, body) = curl(&[], &at("127.0.0.1", "/metrics"));
    assert_eq!(status, 200);
    assert!(body.contains("tlsgate_connections_accepted_total"), "{body}");
    let localhost = format!("localhost:{port}:127.0.0.1");
    assert_eq!(curl(&["--resolve", &localhost], &at("localhost", "/metrics")).0, 200);
    let internal = format!("gw.internal:{port}:127.0.0.1");
    assert_eq!(
        curl(&["--resolve", &internal], &at("gw.internal", "/metrics")).0,
        200,
        "a name in allowed_hosts"
    );

    // A rebound name reads nothing: metrics, health, pools.
    let evil = rebind(port);
    for path in ["/metrics", "/healthz", "/keyless/pools"] {
        let (status, body) = curl(&["--resolve", &evil], &at("evil.example", path));
        assert_eq!(status, 421, "GET {path} as evil.example: {body}");
        assert!(!body.contains("tlsgate_"), "{body}");
    }
    for host in [
        "Host: evil.example",
        "Host: 127.0.0.1:1",
        "Host: localhost.evil.example",
    ] {
        assert_eq!(curl(&["-H", host], &at("127.0.0.1", "/metrics")).0, 421, "{host}");
    }
    // ... and changes nothing, however well-formed.
    let (status, body) = curl(
        &["--resolve", &evil, "-X", "POST", "-H", "X-Tlsgate-Request: 1"],
        &at("evil.example", "/reload"),
    );
    assert_eq!(status, 421, "{body}");
    let (status, body) = curl(
        &[
            "-X",
            "PUT",
            "-H",
            "Host: evil.example",
            "-H",
            "Content-Type: application/json",
            "-d",
            "{\"members\":[]}",
        ],
        &at("127.0.0.1", "/keyless/pools/main"),
    );
    assert_eq!(status, 421, "{body}");
    assert_eq!(reloads(&f), 0.0);
}

#[test]
fn admin_pool_changes_refuse_foreign_hosts_and_cross_site_requests() {
    require("curl");
    let env = KeylessSetup::new();
    let a = env.keyserver();
    let gw = env.gateway(&[a.addr()], "");
    let port = gw.gw.admin_port;
    let before = pool_members(&gw, "main");
    assert_eq!(before, vec![(a.addr(), 1, false)]);
    let body = format!(r#"{{"members":[{{"address":"{}","weight":3}}]}}"#, a.addr());
    let url = format!("http://127.0.0.1:{port}/keyless/pools/main");
    let put = |args: &[&str], url: &str| {
        let mut all = vec!["-X", "PUT", "--data-binary", body.as_str()];
        all.extend_from_slice(args);
        curl(&all, url)
    };
    let json = "Content-Type: application/json";
    let evil = rebind(port);
    let evil_url = format!("http://evil.example:{port}/keyless/pools/main");
    for (what, args, url, want) in [
        (
            "rebound name",
            vec!["--resolve", evil.as_str(), "-H", json],
            evil_url.as_str(),
            421,
        ),
        ("text/plain", vec!["-H", "Content-Type: text/plain"], url.as_str(), 403),
        ("form-encoded", vec![], url.as_str(), 403),
        (
            "JSON from evil.example",
            vec!["-H", EVIL_ORIGIN, "-H", json],
            url.as_str(),
            403,
        ),
        (
            "JSON, cross-site",
            vec!["-H", "Sec-Fetch-Site: cross-site", "-H", json],
            url.as_str(),
            403,
        ),
    ] {
        let (status, answer) = put(&args, url);
        assert_eq!(status, want, "PUT, {what}: {answer}");
        assert_eq!(pool_members(&gw, "main"), before, "changed by a refused PUT ({what})");
    }
    let (status, answer) = put(&["-H", json], &url);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(pool_members(&gw, "main"), vec![(a.addr(), 3, false)]);
    assert_eq!(gw.curl(&[]).stdout, "Hello, world!");
}

#[test]
fn admin_closes_half_sent_requests_and_caps_connections() {
    require("curl");
    let f = common::start("", "");
    let url = format!("http://127.0.0.1:{}/metrics", f.admin);
    guard_env::half_sent_requests_are_closed_and_the_cap_holds(
        f.admin,
        tlsgate_admin::guard::MAX_CONNECTIONS,
        tlsgate_admin::guard::HEADER_TIMEOUT,
        || curl(&[], &url).0 == 200,
    );
    assert_eq!(f.curl(&[], "/hello").stdout, "Hello, world!");
}
