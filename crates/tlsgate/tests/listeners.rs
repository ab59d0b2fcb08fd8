//! Issue 15 (proxy correctness): listening addresses belong to one gateway, and a reload says
//! which listener changes it could not apply.
//!
//! - A second `tlsgate serve` with the same configuration exits non-zero with a clear message
//!   instead of joining the first one's SO_REUSEPORT group (and taking part of its traffic).
//! - Any other socket holding the address (a plain listener without SO_REUSEPORT), for an https
//!   listener or the admin listener: the same clear error.
//! - `tlsgate reload` after a listener's port changed: the rest applies, the listener change is
//!   reported as not applied, exit status 3, and the old port keeps serving.

mod common;

use std::net::TcpListener;
use std::time::Duration;
use tlsgate_testkit::{free_port, TestPki};

fn in_use(addr: &str) -> String {
    format!("cannot listen on {addr}: address already in use (another process serves it)")
}

/// `tlsgate serve --config FILE`, expected to give up at once.
fn serve(config: &std::path::Path) -> tlsgate_testkit::Output {
    tlsgate_testkit::run(
        common::binary().to_str().unwrap(),
        &["serve", "--config", config.to_str().unwrap()],
        b"",
        Duration::ZERO,
        Duration::from_secs(20),
    )
}

fn handshakes(f: &common::Fixture) -> f64 {
    f.gw.metric("tlsgate_handshakes_total", &[])
}

#[test]
fn a_second_gateway_with_the_same_config_is_refused_and_the_first_serves_everything() {
    let f = common::start("", "");
    let before = handshakes(&f);
    let second = serve(&f.gw.config);
    assert_eq!(
        second.status,
        Some(1),
        "the second gateway must exit at once:\n{}",
        second.all()
    );
    let addr = format!("127.0.0.1:{}", f.https);
    assert!(second.stderr.contains(&in_use(&addr)), "{}", second.all());

    // Every new connection still reaches the first gateway (with both in one reuseport group,
    // about half of them would have gone to the second).
    let n = 20;
    for i in 0..n {
        let out = f.curl(&[], "/hello");
        assert_eq!(out.stdout, "Hello, world!", "request {i}: {}", out.all());
    }
    assert_eq!(handshakes(&f) - before, f64::from(n), "{}", f.gw.metrics());
}

#[test]
fn a_plain_listener_holding_the_https_port_is_a_clear_error() {
    let holder = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = holder.local_addr().unwrap().port();
    let pki = TestPki::new();
    let config = pki.write("tlsgate.toml", &common::config_text(&pki, port, free_port(), "", ""));
    let out = serve(&config);
    assert_eq!(out.status, Some(1), "{}", out.all());
    assert!(
        out.stderr.contains(&in_use(&format!("127.0.0.1:{port}"))),
        "{}",
        out.all()
    );
}

#[test]
fn a_plain_listener_holding_the_admin_port_is_a_clear_error() {
    let holder = TcpListener::bind("127.0.0.1:0").unwrap();
    let admin = holder.local_addr().unwrap().port();
    let pki = TestPki::new();
    let https = free_port();
    let config = pki.write("tlsgate.toml", &common::config_text(&pki, https, admin, "", ""));
    let out = serve(&config);
    assert_eq!(out.status, Some(1), "{}", out.all());
    let message = format!("admin.listen: {}", in_use(&format!("127.0.0.1:{admin}")));
    assert!(out.stderr.contains(&message), "{}", out.all());
    // Nothing was left behind: the https port is free again.
    assert!(TcpListener::bind(("127.0.0.1", https)).is_ok());
}

#[test]
fn reload_reports_a_listener_change_it_did_not_apply() {
    let f = common::start("", "");
    let config = f.gw.config.to_str().unwrap().to_string();
    let moved = free_port();
    // The listener moves to another port, and the page changes (which a reload applies).
    let text = common::config_with_certs(&common::existing_site_certs(&f.pki), moved, f.admin, "", "")
        .replace("Hello, world!", "Hello, v2!");
    f.write_config(&text);
    let out = common::tlsgate(&["reload", "--config", &config]);
    assert_eq!(
        out.status,
        Some(3),
        "exit status 3: applied, with changes left for a restart\n{}",
        out.all()
    );
    let all = out.all();
    assert!(all.contains("configuration reloaded"), "{all}");
    for change in [
        format!(
            "not applied, needs a restart: [[listener]] 127.0.0.1:{} removed (still listening)",
            f.https
        ),
        format!("not applied, needs a restart: [[listener]] 127.0.0.1:{moved} added (not listening)"),
        "2 change(s) not applied".to_string(),
    ] {
        assert!(all.contains(&change), "missing {change:?} in:\n{all}");
    }
    // The old port still serves, with the rest of the new configuration in effect.
    assert_eq!(f.curl(&[], "/hello").stdout, "Hello, v2!");
    assert!(!tlsgate_testkit::listening(moved), "nothing listens on the new port");
    assert!(f.gw.log().contains("not applied"), "{}", f.gw.log());

    // Through the admin API: 200, the same lines, and the count in a header.
    let (code, body) = f.gw.reload();
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("[[listener]] 127.0.0.1:"), "{body}");

    // Back to the file the gateway started with: nothing left unapplied, exit status 0.
    f.write_config(&f.config_again("", ""));
    let out = common::tlsgate(&["reload", "--config", &config]);
    assert_eq!(out.status, Some(0), "{}", out.all());
    assert!(!out.all().contains("not applied"), "{}", out.all());
    assert_eq!(f.curl(&[], "/hello").stdout, "Hello, world!");
}
