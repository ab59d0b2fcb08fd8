//! Key-server pools changed at runtime through the gateway's admin API (`GET/PUT
//! /keyless/pools`), with real key servers, gateways and curl: drain and add move new
//! signatures within a moment, in-flight handshakes never fail, bad requests are refused with a
//! reason, and the gateway's own keyless metrics tell what happened.

mod common;
mod keyless_env;

use keyless_env::*;
use std::time::Duration;
use tlsgate_testkit::require;

/// Runs `n` curl handshakes on each of 3 threads; returns the failures' output.
fn burst(gw: &Gateway, n: usize) -> Vec<std::thread::JoinHandle<Vec<String>>> {
    let url = format!("https://localhost:{}/hello", gw.https);
    (0..3)
        .map(|_| {
            let (ca, url) = (gw.ca.clone(), url.clone());
            std::thread::spawn(move || {
                (0..n)
                    .map(|_| common::curl_url(&ca, &[], &url))
                    .filter(|o| o.stdout != "Hello, world!")
                    .map(|o| o.all())
                    .collect()
            })
        })
        .collect()
}

fn members(gw: &Gateway) -> serde_json::Value {
    let (_, body) = gw.gw.http_get("/keyless/pools").expect("admin reachable");
    let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    v["pools"][0]["members"].clone()
}

#[test]
fn drain_and_add_key_servers_through_the_admin_api_without_failing_a_handshake() {
    require("curl");
    let env = KeylessSetup::new();
    let (a, b) = (env.keyserver(), env.keyserver());
    let gw = env.gateway(&[a.addr()], "");
    assert!(
        common::wait_until(Duration::from_secs(10), || gw.curl(&[]).stdout == "Hello, world!"),
        "{}",
        gw.gw.log()
    );
    assert_eq!(pool_members(&gw, "main"), vec![(a.addr(), 1, false)]);

    // Drain a, add b, while handshakes run.
    let load = burst(&gw, 15);
    std::thread::sleep(Duration::from_millis(200));
    let body = format!(
        r#"{{"members":[{{"address":"{}","drain":true}},{{"address":"{}","weight":3}}]}}"#,
        a.addr(),
        b.addr()
    );
    let (status, answer) = gw.gw.admin_call("PUT", "/keyless/pools/main", &body).expect("admin");
    assert_eq!(status, 200, "{answer}");
    assert!(answer.contains(&b.addr()), "{answer}");
    let failures: Vec<String> = load.into_iter().flat_map(|t| t.join().unwrap()).collect();
    assert!(
        failures.is_empty(),
        "handshakes failed during the change: {failures:?}\n{}",
        gw.gw.log()
    );

    // Once b is connected, new signatures go to b only.
    assert!(
        common::wait_until(Duration::from_secs(2), || members(&gw)[1]["connections"].as_u64()
            > Some(0)),
        "b connected within 2 s: {}",
        members(&gw)
    );
    let (a_before, b_before) = (a.ops(), b.ops());
    for _ in 0..6 {
        assert_eq!(gw.curl(&[]).stdout, "Hello, world!");
    }
    assert_eq!(a.ops(), a_before, "the drained key server signed again");
    assert!(b.ops() >= b_before + 6.0, "b signed {} of 6", b.ops() - b_before);
    assert_eq!(
        pool_members(&gw, "main"),
        vec![(a.addr(), 1, true), (b.addr(), 3, false)]
    );

    // The gateway's own metrics: attempts by server and result, weights, drain, operations.
    let text = gw.gw.metrics();
    let ok_on = |addr: &str| {
        tlsgate_testkit::process::metric_sum(
            &text,
            "tlsgate_keyless_attempts_total",
            &["pool=\"main\"", &format!("server=\"{addr}\""), "result=\"ok\""],
        )
    };
    assert!(ok_on(&a.addr()) >= 1.0 && ok_on(&b.addr()) >= 6.0, "{text}");
    assert_eq!(
        tlsgate_testkit::process::metric_sum(&text, "tlsgate_keyless_drained", &[&format!("server=\"{}\"", a.addr())]),
        1.0
    );
    assert_eq!(
        tlsgate_testkit::process::metric_sum(&text, "tlsgate_keyless_weight", &[&format!("server=\"{}\"", b.addr())]),
        3.0
    );
    assert!(tlsgate_testkit::process::metric_sum(&text, "tlsgate_keyless_operations_total", &[]) >= 7.0);
    assert!(tlsgate_testkit::process::metric_sum(&text, "tlsgate_keyless_sign_duration_seconds_count", &[]) >= 7.0);

    // Remove a altogether: it disappears from the pool and its metrics; b keeps serving.
    let body = format!(r#"{{"members":[{{"address":"{}"}}]}}"#, b.addr());
    let (status, answer) = gw.gw.admin_call("PUT", "/keyless/pools/main", &body).expect("admin");
    assert_eq!(status, 200, "{answer}");
    assert_eq!(pool_members(&gw, "main"), vec![(b.addr(), 1, false)]);
    assert_eq!(gw.curl(&[]).stdout, "Hello, world!");
    assert!(
        common::wait_until(Duration::from_secs(5), || !gw
            .gw
            .metrics()
            .contains(&format!("server=\"{}\"", a.addr()))),
        "a's series are dropped once it has left the pool"
    );
}

#[test]
fn bad_pool_changes_are_refused_with_a_reason_and_change_nothing() {
    require("curl");
    let env = KeylessSetup::new();
    let a = env.keyserver();
    let gw = env.gateway(&[a.addr()], "");
    let cases = [
        ("PUT", "/keyless/pools/main", "{not json", 400, "invalid body"),
        (
            "PUT",
            "/keyless/pools/main",
            r#"{"members":[]}"#,
            400,
            "at least one member",
        ),
        (
            "PUT",
            "/keyless/pools/main",
            r#"{"members":[{"address":"nope"}]}"#,
            400,
            "not host:port",
        ),
        (
            "PUT",
            "/keyless/pools/main",
            r#"{"members":[{"address":"a:1","weight":0}]}"#,
            400,
            "weight",
        ),
        (
            "PUT",
            "/keyless/pools/main",
            r#"{"members":[{"address":"a:1","drain":true}]}"#,
            400,
            "drained",
        ),
        (
            "PUT",
            "/keyless/pools/other",
            r#"{"members":[{"address":"a:1"}]}"#,
            404,
            "no key-server pool",
        ),
        ("DELETE", "/keyless/pools/main", "", 405, "use GET"),
    ];
    for (method, path, body, want, reason) in cases {
        let (status, answer) = gw.gw.admin_call(method, path, body).expect("admin");
        assert_eq!(status, want, "{method} {path} {body}: {answer}");
        assert!(answer.contains(reason), "{method} {path} {body}: {answer}");
    }
    assert_eq!(pool_members(&gw, "main"), vec![(a.addr(), 1, false)]);
    assert!(
        common::wait_until(Duration::from_secs(10), || gw.curl(&[]).stdout == "Hello, world!"),
        "{}",
        gw.gw.log()
    );
}
