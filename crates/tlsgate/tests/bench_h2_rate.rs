//! `tlsgate bench --h2 -m`, `--rate`, `--method/--body` and the per-phase latencies against a
//! real `tlsgate serve`, checked against the server's own counters.

mod common;

use common::bench;

use serde_json::Value;
use std::time::{Duration, Instant};

fn n(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("{key} missing in {v:#}"))
}

fn mean(s: &Value, phase: &str) -> f64 {
    s["latency_us"][phase]["mean"].as_f64().unwrap()
}

#[test]
fn h2_streams_agree_with_the_server_metrics() {
    let f = common::start("", "");
    let (code, stdout, s) = bench(&f, &["--h2", "-m", "4", "-c", "3", "-n", "600"]);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!((s["protocol"].as_str(), n(&s, "streams")), (Some("h2"), 4));
    assert_eq!(n(&s, "errors_total"), 0, "{stdout}");
    assert_eq!(n(&s, "requests"), 600, "{stdout}");
    assert_eq!(n(&s, "handshakes"), 3, "{stdout}");
    assert_eq!(n(&s, "bytes_received"), 600 * 13, "body bytes");
    assert!(stdout.contains("h2 x4 streams"), "{stdout}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while f.gw.metric("tlsgate_handshakes_total", &[]) < 3.0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        f.gw.metric("tlsgate_requests_total", &["status=\"200\"", "protocol=\"h2\""]),
        600.0
    );
    assert_eq!(f.gw.metric("tlsgate_handshakes_total", &[]), 3.0);
}

#[test]
fn h2_new_conn_makes_one_connection_per_request() {
    let f = common::start("", "");
    // The harness's readiness check connected once: wait until the gateway has counted it.
    let accepted = || f.gw.metric("tlsgate_connections_accepted_total", &[]);
    common::wait_until(Duration::from_secs(10), || accepted() >= 1.0);
    let accepted_before = accepted();
    let (code, stdout, s) = bench(&f, &["--h2", "--new-conn", "--tls", "1.3", "-c", "2", "-n", "40"]);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(
        (s["protocol"].as_str(), s["mode"].as_str()),
        (Some("h2"), Some("new-conn"))
    );
    assert_eq!(n(&s, "errors_total"), 0, "{stdout}");
    assert_eq!((n(&s, "requests"), n(&s, "handshakes")), (40, 40), "{stdout}");
    assert_eq!(n(&s, "bytes_received"), 40 * 13, "body bytes");
    // Each thread offers the TLS 1.3 ticket of its previous connection.
    assert!(n(&s, "resumed") >= 38, "{stdout}");
    // Every request's latency counts from before its connect, as in HTTP/1.1 --new-conn.
    assert!(
        mean(&s, "connect") + mean(&s, "handshake") <= mean(&s, "ttfb") * 1.01,
        "{stdout}"
    );
    // The server saw 40 connections, 40 handshakes and one HTTP/2 request on each, and the
    // bench closed every connection it opened.
    let deadline = Instant::now() + Duration::from_secs(10);
    while (f.gw.metric("tlsgate_handshakes_total", &[]) < 40.0 || f.gw.metric("tlsgate_open_connections", &[]) > 0.0)
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(f.gw.metric("tlsgate_handshakes_total", &[]), 40.0, "{}", f.gw.metrics());
    assert_eq!(accepted() - accepted_before, 40.0);
    assert_eq!(
        f.gw.metric("tlsgate_handshakes_total", &["outcome=\"tls13_psk\""]),
        n(&s, "resumed") as f64
    );
    assert_eq!(
        f.gw.metric("tlsgate_requests_total", &["status=\"200\"", "protocol=\"h2\""]),
        40.0
    );
    assert_eq!(f.gw.metric("tlsgate_requests_total", &[]), 40.0);
    assert_eq!(f.gw.metric("tlsgate_open_connections", &[]), 0.0, "{}", f.gw.metrics());

    // Under --rate as well (one connection per paced request).
    let (code, stdout, s) = bench(&f, &["--h2", "--new-conn", "--rate", "50", "-c", "2", "-d", "1s"]);
    assert_eq!(code, 0, "{stdout}");
    let requests = n(&s, "requests");
    assert!((45..=51).contains(&requests), "50/s for 1 s: {requests}\n{stdout}");
    assert_eq!(n(&s, "handshakes"), requests, "{stdout}");
}

#[test]
fn phases_add_up_and_json_matches_the_summary() {
    let f = common::start("", "");
    let (code, stdout, s) = bench(
        &f,
        &["--new-conn", "-c", "2", "-n", "60", "--method", "POST", "--body", "hi"],
    );
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(n(&s, "requests"), 60);
    assert_eq!(s["method"], "POST");
    for phase in ["connect", "handshake", "ttfb", "ttlb", "request"] {
        assert_eq!(s["latency_us"][phase]["count"], 60, "{phase}");
        let l = &s["latency_us"][phase];
        let p: Vec<u64> = ["p50", "p90", "p99", "p999", "max"]
            .iter()
            .map(|k| l[k].as_u64().unwrap())
            .collect();
        assert!(p.windows(2).all(|w| w[0] <= w[1]), "{phase}: {l}");
        assert!(!s["histograms_us"]
            .get(phase)
            .is_some_and(|h| h.as_array().unwrap().is_empty()));
    }
    // In new-conn mode every request's TTFB counts from the start of its connect, so per request
    // connect + handshake <= TTFB <= TTLB, and so do the means (1 % for histogram rounding).
    let (c, h, fb, lb) = (
        mean(&s, "connect"),
        mean(&s, "handshake"),
        mean(&s, "ttfb"),
        mean(&s, "ttlb"),
    );
    assert!(c + h <= fb * 1.01 && fb <= lb * 1.01, "{c} + {h} <= {fb} <= {lb}");
    assert_eq!(s["latency_us"]["ttlb"], s["latency_us"]["request"]);
    // The text shows the same figures.
    assert!(stdout.contains("60 requests, 60 handshakes"), "{stdout}");
    for row in ["connect", "handshake", "ttfb", "ttlb"] {
        assert!(
            stdout.lines().any(|l| l.trim_start().starts_with(row)),
            "{row}: {stdout}"
        );
    }
}

#[test]
fn constant_rate_paces_requests() {
    let f = common::start("", "");
    let started = Instant::now();
    let (code, stdout, s) = bench(&f, &["--rate", "100", "-c", "4", "-d", "1s"]);
    let took = started.elapsed();
    assert_eq!(code, 0, "{stdout}");
    let requests = n(&s, "requests");
    assert!((95..=101).contains(&requests), "100/s for 1 s: {requests}\n{stdout}");
    assert_eq!(s["rate"], 100.0);
    assert!(took >= Duration::from_millis(950), "{took:?}");
    assert!(stdout.contains("intended send time"), "{stdout}");
    // A rate far above what the server can do makes latency grow (measured from the intended
    // send time) instead of hiding the backlog.
    let (_, stdout, s) = bench(&f, &["--rate", "1000000", "-c", "1", "-d", "500ms"]);
    let p50 = s["latency_us"]["ttlb"]["p50"].as_u64().unwrap();
    assert!(p50 > 10_000, "coordinated omission corrected: p50 {p50} us\n{stdout}");
}

#[test]
fn tcp_fast_open_connections_work() {
    // With or without a TFO cookie (the kernel falls back to a normal SYN), every connection works.
    let f = common::start("", "");
    let (code, stdout, s) = bench(&f, &["--tfo", "--new-conn", "-c", "2", "-n", "20"]);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!((n(&s, "requests"), n(&s, "errors_total")), (20, 0), "{stdout}");
}

#[test]
fn resumption_mechanism_matches_the_server_outcomes() {
    let f = common::start("", "");
    let mut expected_total = 0;
    for (args, mechanism) in [
        (&["--tls", "1.2", "--no-ticket"][..], "session_id"),
        (&["--tls", "1.2", "--no-session-id"][..], "ticket"),
        (&["--tls", "1.3"][..], "tls13_psk"),
    ] {
        let before =
            f.gw.metric("tlsgate_handshakes_total", &[&format!("outcome=\"{mechanism}\"")]);
        let common = ["--new-conn", "-c", "1", "-n", "30", "--groups", "X25519:P-256"];
        let (code, stdout, s) = bench(&f, &[&common[..], args].concat());
        assert_eq!(code, 0, "{stdout}");
        let resumed = n(&s, "resumed");
        assert!(resumed >= 29, "{args:?}: {stdout}");
        assert_eq!(s["resumed_by"][mechanism], resumed, "{args:?}: {:#}", s["resumed_by"]);
        assert!(
            stdout.contains(&format!("resumed by: {mechanism} {resumed}")),
            "{stdout}"
        );
        expected_total += 30;
        let deadline = Instant::now() + Duration::from_secs(10);
        while (f.gw.metric("tlsgate_handshakes_total", &[]) as u64) < expected_total && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let after =
            f.gw.metric("tlsgate_handshakes_total", &[&format!("outcome=\"{mechanism}\"")]);
        assert_eq!(
            (after - before) as u64,
            resumed,
            "{args:?}: server counted the same mechanism"
        );
    }
}
